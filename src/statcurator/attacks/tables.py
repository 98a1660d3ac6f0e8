"""Attacks on one published table: linkage, homogeneity, background knowledge, skewness and
similarity.

Each is a frozen value whose docstring states the adversary model exactly; ``run`` returns a
:class:`~statcurator.attacks.risk.Risk` (see :class:`~statcurator.attacks._base.TableAttack`
for the arguments). The textbook's 3-anonymous patient table: Bob (47678, 27) has heart
disease by homogeneity; Carl (47673, 36) has cancer once heart disease is ruled out.

>>> import pyarrow as pa
>>> release = pa.table({
...     "Zipcode": ["476**"] * 3 + ["4790*"] * 3 + ["476**"] * 3,
...     "Age": ["2*"] * 3 + [">=40"] * 3 + ["3*"] * 3,
...     "Disease": ["Heart Disease"] * 3 + ["Flu", "Heart Disease", "Cancer"]
...                + ["Heart Disease", "Cancer", "Cancer"]})
>>> targets = {"Zipcode": ["47678", "47673"], "Age": ["27", "36"],
...            "Disease": ["Heart Disease", "Cancer"]}
>>> kw = dict(qi=["Zipcode", "Age"], sensitive="Disease")
>>> Homogeneity().run(release, targets, **kw).successes
1
>>> BackgroundKnowledge(b=1).run(release, targets, **kw).successes
2
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..anonymize.hierarchy import Hierarchy
from ..core.errors import InvalidParameterError
from ._base import Matched, TableAttack, detail_rows, truth_index
from ._checks import share, whole
from ._release import Knowledge, match, target_knowledge
from .risk import Risk, curve, wilson

__all__ = ["Linkage", "Homogeneity", "BackgroundKnowledge", "Skewness", "Similarity"]


def _present(counts: np.ndarray) -> np.ndarray:
    return counts > 0


def _true_present(present: np.ndarray, truth: np.ndarray) -> np.ndarray:
    ok = truth >= 0
    out = np.zeros(len(truth), dtype=bool)
    out[ok] = present[np.flatnonzero(ok), truth[ok]]
    return out


def _prior_rows(m: Matched) -> np.ndarray:
    """The counts the same adversary reads *without* the release's QI structure: the whole
    table's value counts, for every target (belief B1)."""
    total = m.classes.counts.sum(axis=0)
    return np.broadcast_to(total, m.counts.shape)


# -- homogeneity ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Homogeneity(TableAttack):
    """The homogeneity attack (Machanavajjhala et al. 2006).

    Adversary model: knows each target's quasi-identifier values and that the target's record
    is in the release (prosecutor model), and the public generalization rules. It reads the
    released records whose cells contain the target's values. Breach: all those records carry
    one and the same sensitive value, which is then the target's.

    >>> Homogeneity.name
    'homogeneity'
    """

    name: ClassVar[str] = "homogeneity"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers and that the target is in the release; "
        "breach when every matching released record has the same sensitive value")

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:
        truth = truth_index(m.classes, m.knowledge.truth)
        assert truth is not None
        success, guess = self._infer(m.counts, truth)
        base, _ = self._infer(_prior_rows(m), truth)
        distinct = _present(m.counts).sum(axis=1)
        claims = guess >= 0
        measures = {"certain inferences": int(claims.sum()),
                    "wrong certain inferences": int((claims & ~success).sum()),
                    "mean distinct values": float(distinct.mean()) if len(distinct) else 0.0}
        rows = detail_rows(m, success, inferred=[m.classes.values[g] if g >= 0 else None
                                                 for g in guess.tolist()],
                           distinct=distinct.tolist()) if detail else None
        return self._risk(m, success, float(base.mean()) if len(base) else 0.0, alpha=alpha,
                          measures=measures, detail=rows)

    @staticmethod
    def _infer(counts: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        present = _present(counts)
        single = present.sum(axis=1) == 1
        guess = np.where(single, present.argmax(axis=1), -1)
        return single & (guess == truth), guess


# -- background knowledge ---------------------------------------------------------------------

@dataclass(frozen=True)
class BackgroundKnowledge(TableAttack):
    """The background-knowledge attack (Machanavajjhala et al. 2006): ``b`` values ruled out.

    Adversary model: as :class:`Homogeneity`, and in addition knows ``b`` sensitive values the
    target does *not* have — the least favourable ``b`` for the target: the most frequent
    wrong values among its matching records ("Japanese have a low incidence of heart
    disease"). It removes them. Breach: exactly one value remains (the target's). The risk's
    curve ``success vs b`` gives the rate for every b from 0 to m − 1; distinct
    l-diversity guarantees 0 for b < l − 1.

    >>> BackgroundKnowledge(b=2).b
    2
    """

    b: int = 1
    name: ClassVar[str] = "background knowledge"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers, that the target is in the release, and b "
        "sensitive values the target does not have (the most frequent wrong ones among its "
        "matching records); breach when one value remains")

    def __post_init__(self) -> None:
        object.__setattr__(self, "b", whole(self.b, "b", 0, example="1 (CLI: --b 1)"))

    @staticmethod
    def knowledge(counts: np.ndarray, truth: np.ndarray, b: int) -> np.ndarray:
        """The values each target is known *not* to have: up to ``b`` wrong values, the most
        frequent among its matching records first. (Generated by the evaluator from the truth
        — that is the model — and handed to the inference as a mask.)"""
        wrong = np.where(_present(counts), counts, 0.0).astype(np.float64)
        ok = truth >= 0
        wrong[np.flatnonzero(ok), truth[ok]] = -1.0
        order = np.argsort(-wrong, axis=1, kind="stable")[:, :b]
        ruled = np.zeros(counts.shape, dtype=bool)
        rows = np.repeat(np.arange(len(counts)), order.shape[1])
        ruled[rows, order.ravel()] = True
        return ruled & (wrong > 0)

    @staticmethod
    def infer(counts: np.ndarray, ruled_out: np.ndarray) -> np.ndarray:
        """The inferred value per target (−1: more than one value remains)."""
        remaining = _present(counts) & ~ruled_out
        return np.where(remaining.sum(axis=1) == 1, remaining.argmax(axis=1), -1)

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:
        truth = truth_index(m.classes, m.knowledge.truth)
        assert truth is not None
        guess = self.infer(m.counts, self.knowledge(m.counts, truth, self.b))
        success = (guess >= 0) & (guess == truth)
        prior = np.ascontiguousarray(_prior_rows(m))
        base_guess = self.infer(prior, self.knowledge(prior, truth, self.b))
        baseline = float(((base_guess >= 0) & (base_guess == truth)).mean()) if len(truth) else 0.0
        bs = list(range(max(len(m.classes.values), self.b + 1)))
        rates = self._curve(m.counts, truth, bs)
        bounds = [wilson(round(r * len(truth)), len(truth), alpha) for r in rates]
        lows, highs = [b[0] for b in bounds], [b[1] for b in bounds]
        base_rates = self._curve(prior, truth, bs)
        curves = {"success vs b": curve(bs, rates, xlabel="b (values ruled out)",
                                        ylabel="share of targets breached", low=lows,
                                        high=highs, baseline=base_rates)}
        wrong_left = (_present(m.counts).sum(axis=1) - _true_present(_present(m.counts), truth))
        measures = {"b": self.b, "mean wrong values among candidates": float(wrong_left.mean())
                    if len(wrong_left) else 0.0}
        rows = detail_rows(m, success, inferred=[m.classes.values[g] if g >= 0 else None
                                                 for g in guess.tolist()]) if detail else None
        return self._risk(m, success, baseline, alpha=alpha, measures=measures, curves=curves,
                          detail=rows)

    @staticmethod
    def _curve(counts: np.ndarray, truth: np.ndarray, bs: Sequence[int]) -> list[float]:
        # ruling out the b most frequent wrong values leaves the true value alone exactly when
        # it is present and at most b wrong values are
        present = _present(counts)
        wrong = present.sum(axis=1) - _true_present(present, truth)
        ok = _true_present(present, truth)
        n = max(len(truth), 1)
        return [float(np.count_nonzero(ok & (wrong <= b)) / n) for b in bs]


# -- skewness ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Skewness(TableAttack):
    """The skewness (probabilistic inference) attack: posterior against prior (Li et al. 2007,
    the basis of t-closeness).

    Adversary model: knows each target's quasi-identifiers, that the target is in the release,
    and the overall distribution of the sensitive value (its prior, belief B1). Its posterior
    of a value is the value's share among the matching released records; it guesses the most
    likely value. Breach: the guess is right. The baseline guesses the most common value of
    the whole table. Measures: the posterior and the prior of the true value, their ratio (the
    *gain*), and the share of targets whose gain is at least ``gain``.

    >>> Skewness(gain=3).gain
    3.0
    """

    gain: float = 2.0
    name: ClassVar[str] = "skewness"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers, that it is in the release, and the overall "
        "distribution of the sensitive value; guesses the most likely value of its posterior "
        "(the value shares of the matching records)")
    baseline_method: ClassVar[str] = "guessing the most common value of the whole table"

    def __post_init__(self) -> None:
        g = float(self.gain)
        if not g >= 1 or g == float("inf"):
            raise InvalidParameterError(f"the gain threshold must be a finite number >= 1, "
                                        f"got {self.gain!r}", remedy="pass e.g. gain=2")
        object.__setattr__(self, "gain", g)

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:
        truth = truth_index(m.classes, m.knowledge.truth)
        assert truth is not None
        prior = m.classes.prior
        tot = m.counts.sum(axis=1, keepdims=True)
        post = np.where(tot > 0, m.counts / np.where(tot > 0, tot, 1), prior[None, :])
        guess = post.argmax(axis=1)
        success = (guess == truth) & (truth >= 0)
        baseline = float(np.mean(int(prior.argmax()) == truth)) if len(truth) else 0.0
        idx = np.arange(len(truth))
        ok = truth >= 0
        post_true = np.where(ok, post[idx, np.maximum(truth, 0)], 0.0)
        prior_true = np.where(ok, prior[np.maximum(truth, 0)], np.nan)
        with np.errstate(divide="ignore", invalid="ignore"):
            gains = post_true / prior_true
            top_gain = post[idx, guess] / prior[guess]
        finite = gains[np.isfinite(gains)]
        grid = [1.0, 1.5, 2.0, 3.0, 5.0, 10.0]
        n = max(len(truth), 1)
        measures = {
            "mean posterior of the true value": float(post_true.mean()) if len(truth) else 0.0,
            "mean prior of the true value": float(np.nanmean(prior_true)) if ok.any() else 0.0,
            "mean gain (posterior/prior of the true value)": float(finite.mean())
            if len(finite) else 0.0,
            "median gain": float(np.median(finite)) if len(finite) else 0.0,
            "max gain": float(finite.max()) if len(finite) else 0.0,
            "mean gain of the guessed value": float(np.nanmean(top_gain)) if len(truth) else 0.0,
            f"share with gain >= {self.gain:g}": float(np.count_nonzero(gains >= self.gain) / n),
        }
        curves = {"gain": curve(grid, [float(np.count_nonzero(gains >= g) / n) for g in grid],
                                xlabel="posterior/prior of the true value at least",
                                ylabel="share of targets")}
        rows = detail_rows(m, success, guess=[m.classes.values[g] for g in guess.tolist()],
                           posterior=post_true.tolist(), prior=prior_true.tolist(),
                           gain=gains.tolist()) if detail else None
        return self._risk(m, success, baseline, alpha=alpha, measures=measures, curves=curves,
                          detail=rows)


# -- similarity -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Similarity(TableAttack):
    """The similarity attack (Li et al. 2007): semantically close values leak their category.

    Adversary model: as :class:`Homogeneity`, and knows a semantic grouping of the sensitive
    values — ``hierarchy`` (a :class:`~statcurator.anonymize.Hierarchy` of the sensitive
    values, read at ``level``, or a mapping value → category). Breach: the target's category
    holds at least ``threshold`` of the matching records' values (default 1: all of them —
    "Bob has some stomach disease").

    >>> Similarity({"flu": "lung", "cold": "lung", "ulcer": "stomach"}).level
    1
    """

    hierarchy: Any = field(default=None, compare=False)
    level: int = 1
    threshold: float = 1.0
    name: ClassVar[str] = "similarity"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers, that it is in the release, and a semantic "
        "grouping of the sensitive values; breach when the matching records' values fall in the "
        "target's category (at least the threshold's share)")

    def __post_init__(self) -> None:
        if self.hierarchy is None:
            raise InvalidParameterError("the similarity attack needs a grouping of the "
                                        "sensitive values",
                                        remedy="pass a Hierarchy of the sensitive column or a "
                                               "mapping value → category")
        object.__setattr__(self, "threshold", share(self.threshold, "threshold", example=1))

    def categories(self, values: Sequence[str]) -> list[str]:
        """The category of each sensitive value."""
        h = self.hierarchy
        if isinstance(h, Hierarchy):
            return [h.generalize(v, self.level) for v in values]
        if isinstance(h, Mapping):
            missing = [v for v in values if v not in h]
            if missing:
                raise InvalidParameterError(f"the grouping has no category for {missing}",
                                            remedy="give every sensitive value a category")
            return [str(h[v]) for v in values]
        raise InvalidParameterError(f"cannot read a grouping from {type(h).__name__}",
                                    remedy="pass a Hierarchy or a mapping value → category")

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:
        truth = truth_index(m.classes, m.knowledge.truth)
        assert truth is not None
        cats = self.categories(m.classes.values)
        names = list(dict.fromkeys(cats))
        onehot = np.zeros((len(cats), len(names)))
        onehot[np.arange(len(cats)), [names.index(c) for c in cats]] = 1
        true_cat = np.array([names.index(cats[t]) if t >= 0 else -1 for t in truth.tolist()])
        success, share = self._infer(m.counts @ onehot, true_cat)
        base, _ = self._infer(np.ascontiguousarray(_prior_rows(m)) @ onehot, true_cat)
        tot = (m.counts @ onehot).sum(axis=1)
        top = np.where(tot > 0, (m.counts @ onehot).max(axis=1) / np.where(tot > 0, tot, 1), 0)
        measures = {"categories": len(names), "level": self.level, "threshold": self.threshold,
                    "category disclosures (any category)": int((top >= self.threshold).sum()),
                    "mean share of the true category": float(share.mean()) if len(share) else 0.0}
        rows = detail_rows(m, success, true_category=[names[c] if c >= 0 else None
                                                      for c in true_cat.tolist()],
                           share=share.tolist()) if detail else None
        return self._risk(m, success, float(base.mean()) if len(base) else 0.0, alpha=alpha,
                          measures=measures, detail=rows)

    def _infer(self, cat_counts: np.ndarray, true_cat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        tot = cat_counts.sum(axis=1)
        idx = np.arange(len(true_cat))
        share = np.where((true_cat >= 0) & (tot > 0),
                         cat_counts[idx, np.maximum(true_cat, 0)] / np.where(tot > 0, tot, 1), 0.0)
        return share >= self.threshold - 1e-12, share


# -- linkage ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Linkage(TableAttack):
    """Linkage (re-identification) by joining on the quasi-identifiers (Sweeney 2002).

    Adversary model: holds an identified external table (``targets``: names and the
    quasi-identifiers of people, e.g. a voter list), and the public generalization rules; it
    does not know who is in the release. It links each person to the released records whose
    cells contain the person's QIs. Re-identification: exactly one released record matches,
    and it is the person's (``truth``: each person's row in the released data, −1 or None if
    absent; by default every input record of an anonymization result is a target). The
    baseline links each person to a released record chosen at random.

    Reported with ARX's three risk models: *prosecutor* (the attacker knows the target is in
    the data: a record's risk is 1/|its class|), *journalist* (the attacker links against a
    ``population`` table the data was drawn from: 1/F with F the number of population records
    in the class) and *marketer* (the expected share re-identified when everyone is attacked:
    Σ f/F over classes / n, or classes/n without a population), plus sample uniques (records
    alone in their class) and population uniques.

    >>> Linkage().threshold
    0.2
    """

    population: Any = field(default=None, compare=False)
    threshold: float = 0.2
    name: ClassVar[str] = "linkage"
    adversary: ClassVar[str] = (
        "holds an identified external table with the targets' quasi-identifiers; links each "
        "person to the matching released records; re-identified when exactly one matches")
    baseline_method: ClassVar[str] = "linking each person to a released record at random"
    needs_sensitive: ClassVar[bool] = False
    needs_truth: ClassVar[bool] = False

    def knowledge_of(self, pub: Any, targets: Any, truth: Any, id_column: str | None
                     ) -> Knowledge:
        """``truth`` here gives each target's row in the released data (−1 or None: absent)."""
        from dataclasses import replace

        k = target_knowledge(pub, targets, id_column=id_column)
        if truth is None:
            return replace(k, truth=None)
        rows = np.array([-1 if t is None else int(t) for t in truth], dtype=np.int64)
        if len(rows) != k.size:
            raise InvalidParameterError(f"truth gives {len(rows)} rows for {k.size} targets",
                                        remedy="give one row (or -1) per target")
        return replace(k, truth=None, rows=rows)

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:
        c = m.classes
        k = m.knowledge
        rows = k.rows if k.rows is not None else np.full(k.size, -1, dtype=np.int64)
        cand = np.rint(m.candidates)
        claim = cand == 1
        own = _own_class_matched(m, rows)
        success = claim & own
        records = float(c.sizes.sum())
        members = int(np.count_nonzero(rows >= 0))
        baseline = (members / k.size) / records if k.size and records else 0.0
        measures: dict[str, Any] = {
            "targets in the data": members,
            "unique matches": int(claim.sum()),
            "re-identified": int(success.sum()),
            "false links": int((claim & ~success).sum()),
            "precision of the unique matches": float(success.sum() / claim.sum())
            if claim.any() else 0.0,
            "expected re-identifications (random pick among matches)":
                float(np.sum(np.where(own & (cand > 0), 1 / np.maximum(cand, 1), 0.0))),
        }
        measures.update(risk_models(c, self._population_counts(c), self.threshold))
        rows_detail = detail_rows(m, success, row=rows.tolist(), unique=claim.tolist()) \
            if detail else None
        return self._risk(m, success, baseline, alpha=alpha, measures=measures,
                          detail=rows_detail)

    def _population_counts(self, c: Any) -> np.ndarray | None:
        if self.population is None:
            return None
        if c.source is None:
            raise InvalidParameterError("the population cannot be matched to this release",
                                        remedy="attack an anonymization result or a table")
        pop: Knowledge = target_knowledge(c.source, self.population)
        indptr, indices = match(c, pop.qi)
        return np.bincount(indices, minlength=c.size).astype(np.float64)


def _own_class_matched(m: Matched, rows: np.ndarray) -> np.ndarray:
    """Does each target's own record's class (evaluator's knowledge) appear among its
    matches?"""
    rc = m.classes.row_class
    out = np.zeros(len(rows), dtype=bool)
    if rc is None:
        return out
    member = (rows >= 0) & (rows < len(rc))
    own = np.full(len(rows), -1, dtype=np.int64)
    own[member] = rc[rows[member]]
    C = m.classes.size
    keys = np.repeat(np.arange(len(rows)), np.diff(m.indptr)) * C + m.indices
    want = np.arange(len(rows)) * C + own
    return (own >= 0) & np.isin(want, keys)


def _suppressed_class(c: Any) -> np.ndarray:
    """Classes whose every cell is only ``*`` (the suppressed records), when there are others."""
    if c.size <= 1 or not c.qi:
        return np.zeros(c.size, dtype=bool)
    star = np.array([[bool(lab) and set(lab) == {"*"} for lab in labels] for labels in c.labels],
                    dtype=object)
    out = np.ones(c.size, dtype=bool)
    for d in range(len(c.qi)):
        flags = np.array([bool(x) for x in star[d]], dtype=bool)
        out &= flags[c.cells[:, d]]
    return out


def risk_models(c: Any, population: np.ndarray | None, threshold: float = 0.2
                ) -> dict[str, Any]:
    """ARX's prosecutor, journalist and marketer re-identification risks of released classes
    (suppressed records excluded), sample and population uniques.

    With f_j the released records of class j, n = Σ f_j, J classes and F_j the population
    records in class j: prosecutor max = 1/min f_j, average = J/n, records at risk = share of
    records with 1/f_j > threshold; journalist max = 1/min F_j, average = Σ f_j/F_j / n;
    marketer = Σ f_j/F_j / n (J/n without a population); sample uniques = share of records
    with f_j = 1; population uniques = share with F_j = 1.
    """
    keep = ~_suppressed_class(c)
    f = np.rint(c.sizes[keep])
    nz = f > 0
    f = f[nz]
    n = float(f.sum())
    out: dict[str, Any] = {"classes": int(len(f)), "records": int(n)}
    if n == 0:
        return out
    out.update({
        "prosecutor risk (max)": float(1 / f.min()),
        "prosecutor risk (average)": float(len(f) / n),
        f"records at prosecutor risk > {threshold:g}": float(f[f * threshold < 1].sum() / n),
        "sample uniques": float(f[f == 1].sum() / n),
    })
    if population is None:
        out["marketer risk"] = float(len(f) / n)
        return out
    F = np.maximum(population[keep][nz], f)  # a class holds at least its own records
    out.update({
        "journalist risk (max)": float(1 / F.min()),
        "journalist risk (average)": float(np.sum(f / F) / n),
        "marketer risk": float(np.sum(f / F) / n),
        "population uniques": float(f[F == 1].sum() / n),
    })
    return out
