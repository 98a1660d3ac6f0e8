"""Composition (intersection) attacks on independent releases, and re-publication.

**Composition** (Ganta, Kasiviswanathan & Smith 2008). Two publishers release independent
anonymizations of overlapping populations. The adversary knows that a target is in both
releases and knows the target's quasi-identifiers. In release i it reads the records whose
cells contain the target's values and counts each sensitive value among them: ``c_i(v)``.

* The values left are those present in every release: ``S = {v : c_i(v) > 0 for all i}``.
* **Perfect breach**: exactly one value is left, ``S = {v}``, and it is the target's.
* **Partial breach** at threshold τ: the adversary's confidence in the true value t,

      conf(t) = Π_i c_i(t) / Σ_v Π_i c_i(v),

  reaches τ. This is the exact posterior of an adversary who takes the target to be a
  uniformly random record among its candidates in each release, independently, conditioned
  on the target having the same value in all of them: P(v) ∝ Π_i c_i(v)/n_i, and the class
  sizes n_i cancel.

The baseline is the same adversary with one release only (the better of the two): the
homogeneity attack. Against DP releases (noisy histograms per cell, clamped at 0) the
adversary computes exactly the same thing from the noisy counts.

**Update** (re-publication): a table re-published after inserts and deletes, each version
anonymized independently; intersecting the versions a target is in breaks what each
version's k promised.

>>> import pyarrow as pa
>>> r1 = pa.table({"zip": ["130**"] * 4, "disease": ["flu", "stroke", "cold", "stroke"]})
>>> r2 = pa.table({"zip": ["1305*"] * 3, "disease": ["stroke", "ulcer", "acne"]})
>>> risk = Composition(r2).run(r1, {"zip": ["13053"], "disease": ["stroke"]},
...                            qi=["zip"], sensitive="disease")
>>> risk.successes, risk.measures["mean values left"], risk.baseline
(1, 1.0, 0.0)
>>> intersect([np.array([[1., 2., 1.]]), np.array([[0., 1., 3.]])], np.array([2]))["confidence"]
array([0.6])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np

from ..core.errors import InvalidParameterError
from ._base import leave_one_out, match_targets, truth_index, view
from ._checks import share, whole
from ._release import Classes, Knowledge, target_knowledge
from .dp import HistogramRelease, dp_histograms
from .risk import Risk, curve, wilson

__all__ = ["Composition", "Update", "intersect", "THRESHOLDS"]

#: the confidence thresholds of the partial-breach curve
THRESHOLDS = tuple(round(0.1 * i, 1) for i in range(1, 11))


def intersect(counts: Sequence[np.ndarray], truth: np.ndarray,
              thresholds: Sequence[float] = THRESHOLDS) -> dict[str, np.ndarray]:
    """The intersection attack on per-target value counts, one (targets × values) matrix per
    release over a common value index.

    Returns per target: ``values_left`` (|S|), ``perfect`` (S is exactly the true value),
    ``confidence`` (conf(t), 0 when no value is left or t is unknown) and ``partial`` (one
    boolean column per threshold).
    """
    if not counts:
        raise InvalidParameterError("no release to intersect", remedy="pass two or more")
    present = np.ones(counts[0].shape, dtype=bool)
    product = np.ones(counts[0].shape)
    for c in counts:
        present &= c > 0
        product *= np.maximum(c, 0)
    left = present.sum(axis=1)
    idx = np.arange(len(truth))
    known = truth >= 0
    t = np.maximum(truth, 0)
    true_left = known & present[idx, t]
    total = product.sum(axis=1)
    conf = np.where(known & (total > 0), product[idx, t] / np.where(total > 0, total, 1), 0.0)
    partial = np.stack([conf >= th - 1e-12 for th in thresholds], axis=1) if len(thresholds) \
        else np.zeros((len(truth), 0), dtype=bool)
    return {"values_left": left, "perfect": (left == 1) & true_left, "confidence": conf,
            "partial": partial}


def _aligned(counts: np.ndarray, values: Sequence[str], domain: Sequence[str]) -> np.ndarray:
    """Counts re-indexed onto a common value domain."""
    pos = {v: i for i, v in enumerate(domain)}
    out = np.zeros((counts.shape[0], len(domain)))
    out[:, [pos[v] for v in values]] = counts
    return out


@dataclass(frozen=True, init=False)
class Composition:
    """The intersection attack on independent releases (see the module docstring).

    Adversary model: knows each target's quasi-identifiers and that the target is in *every*
    release, and the public generalization rules; intersects the sensitive values of the
    target's matching records across the releases. ``Composition(other, ...)`` holds the other
    release(s); ``run(release, targets)`` attacks ``release`` together with them. ``targets``
    is one table of QIs (or a list, one per release, when the QIs differ between releases);
    by default every input record of the first release is a target (all must then be in the
    other releases too). ``threshold`` is the confidence of the reported partial breach.

    >>> Composition(threshold=0.8).threshold
    0.8
    """

    others: tuple[Any, ...] = field(default=(), compare=False)
    threshold: float = 0.5
    name: ClassVar[str] = "composition"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers and that the target is in every release; "
        "intersects the sensitive values of its matching records across the releases "
        "(perfect breach: one value left)")
    baseline_method: ClassVar[str] = "the same adversary with one release only (the better one)"

    def __init__(self, *others: Any, threshold: float = 0.5) -> None:
        object.__setattr__(self, "others", tuple(others))
        object.__setattr__(self, "threshold", share(threshold, "threshold"))

    def run(self, release: Any, targets: Any = None, *, truth: Any = None,
            qi: Sequence[str] | None = None, sensitive: str | None = None,
            hierarchies: Mapping[str, Any] | None = None, detail: bool = False,
            alpha: float = 0.05, epsilon: Any = None, id: str | None = None,  # noqa: A002
            rows: Sequence[Sequence[int]] | None = None) -> Risk:
        """Attack ``release`` together with the releases this attack holds (or a list passed as
        ``release``). ``epsilon``: also attack the ε-DP histograms of every release (ε each).
        ``rows`` (evaluator only): for each release, each target's row in that release's input
        — it enables the leave-one-out baseline for explicit targets."""
        releases = list(release) if isinstance(release, list | tuple) else [release]
        releases += list(self.others)
        if len(releases) < 2:
            raise InvalidParameterError(f"the {self.name} attack needs two or more releases",
                                        remedy="pass Composition(other_release) or a list")
        views = [view(r, qi=qi, sensitive=sensitive, hierarchies=hierarchies) for r in releases]
        if any(c.values == () for c, _ in views):
            raise InvalidParameterError(f"the {self.name} attack needs the sensitive attribute",
                                        remedy="pass sensitive=COLUMN (CLI: --sensitive COLUMN)")
        per_release = targets if isinstance(targets, list | tuple) else [targets] * len(views)
        if len(per_release) != len(views):
            raise InvalidParameterError(f"{len(per_release)} target tables for {len(views)} "
                                        "releases", remedy="give one target table per release")
        first = target_knowledge(views[0][1], per_release[0], truth=truth, id_column=id)
        knowledge = [first]
        for (_, pub), t in zip(views[1:], per_release[1:], strict=True):
            if t is None:  # the first release's records; their rows are known if same input
                mine, theirs = views[0][1].original, getattr(pub, "original", None)
                same = mine is not None and theirs is not None and (
                    mine is theirs or mine.equals(theirs))
                knowledge.append(replace(first, rows=first.rows if same else None))
            else:
                knowledge.append(replace(target_knowledge(pub, t, id_column=id),
                                         truth=first.truth))
        if rows is not None:
            if len(rows) != len(knowledge):
                raise InvalidParameterError(f"rows for {len(rows)} releases, not {len(knowledge)}",
                                            remedy="give each target's row in every release")
            knowledge = [replace(k, rows=np.asarray(r, dtype=np.int64))
                         for k, r in zip(knowledge, rows, strict=True)]
        if first.truth is None:
            raise InvalidParameterError(
                "the targets' true values are unknown, so the attack cannot be scored",
                remedy="pass truth=[...] or give the targets table the sensitive column")
        classes = [r.classes_with(k.qi) if isinstance(r, HistogramRelease) else c
                   for r, (c, _), k in zip(releases, views, knowledge, strict=True)]
        risk = self.assess(classes, knowledge, detail=detail, alpha=alpha)
        costs = [getattr(r, "cost", None) for r in releases]
        if all(c is not None for c in costs):
            risk = replace(risk, cost=sum(costs[1:], costs[0]))
        if epsilon is not None:
            dps = [dp_histograms(pub, epsilon) for _, pub in views]
            contrast = self._alone().run(dps, targets, truth=truth, detail=detail,
                                         alpha=alpha, id=id, rows=rows)
            risk = risk.with_contrast(contrast)
        return risk

    def _alone(self) -> Composition:
        """This attack without the releases it holds (same parameters)."""
        import copy

        twin = copy.copy(self)
        object.__setattr__(twin, "others", ())
        return twin

    def assess(self, classes: Sequence[Classes], knowledge: Sequence[Knowledge], *,
               detail: bool = False, alpha: float = 0.05) -> Risk:
        """Score the attack on already-read releases (``knowledge[i]``: targets in release i)."""
        domain = sorted(set().union(*(c.values for c in classes)))
        matched = [match_targets(c, k) for c, k in zip(classes, knowledge, strict=True)]
        counts = [_aligned(m.counts, m.classes.values, domain) for m in matched]
        truth = truth_index(replace(classes[0], values=tuple(domain)), knowledge[0].truth)
        assert truth is not None
        out = intersect(counts, truth)
        perfect = out["perfect"]
        n = len(truth)
        singles = [intersect([c], truth, ())["perfect"] for c in counts]
        baseline = max(float(s.mean()) for s in singles) if n else 0.0
        method = self.baseline_method
        local = [leave_one_out(m) for m in matched]
        loo = None if any(x is None for x in local) else [
            _aligned(x, m.classes.values, domain) for x, m in zip(local, matched, strict=True)]
        if loo is not None:
            out_loo = intersect(loo, truth)
            baseline = float(out_loo["perfect"].mean()) if n else 0.0
            method = "the same adversary with the target's own record removed from every release"
        partial = out["partial"]
        j = THRESHOLDS.index(self.threshold) if self.threshold in THRESHOLDS else None
        at = partial[:, j] if j is not None else out["confidence"] >= self.threshold - 1e-12
        sizes = [m.candidates for m in matched]
        shares = partial.mean(axis=0) if n else np.zeros(len(THRESHOLDS))
        bounds = [wilson(int(partial[:, i].sum()), n, alpha) for i in range(len(THRESHOLDS))]
        measures: dict[str, Any] = {
            "perfect breach": float(perfect.mean()) if n else 0.0,
            f"partial breach (confidence >= {self.threshold:g})": float(at.mean()) if n else 0.0,
            "mean confidence in the true value": float(out["confidence"].mean()) if n else 0.0,
            "mean values left": float(out["values_left"].mean()) if n else 0.0,
            "mean class size": float(np.mean([s.mean() for s in sizes])) if n else 0.0,
        }
        for i, s in enumerate(singles):
            measures[f"homogeneity in release {i + 1} alone"] = float(s.mean()) if n else 0.0
        for i, c in enumerate(counts):
            measures[f"mean distinct values in release {i + 1} alone"] = float(
                (c > 0).sum(axis=1).mean()) if n else 0.0
        left = out["values_left"]
        measures["values left (share of targets)"] = {
            str(v): float(np.mean(left == v)) if n else 0.0 for v in range(5)} | {
            "5+": float(np.mean(left >= 5)) if n else 0.0}
        if loo is not None:
            measures["perfect breach without the target's record"] = baseline
            measures[f"partial breach without the target's record (confidence >= "
                     f"{self.threshold:g})"] = float(
                (out_loo["confidence"] >= self.threshold - 1e-12).mean()) if n else 0.0
        measures.update(self._extra(classes, matched, counts, out))
        curves = {"partial breach": curve(THRESHOLDS, shares.tolist(),
                                          xlabel="adversary confidence in the true value ≥",
                                          ylabel="share of targets",
                                          low=[b[0] for b in bounds],
                                          high=[b[1] for b in bounds])}
        rows = None
        if detail:
            k = knowledge[0]
            rows = tuple({"target": k.ids[i] if k.ids else i, "truth": k.truth[i] if k.truth
                          else None, "values_left": int(out["values_left"][i]),
                          "left": [domain[v] for v in np.flatnonzero(
                              np.logical_and.reduce([c[i] > 0 for c in counts]))],
                          "confidence": float(out["confidence"][i]),
                          "candidates": [float(s[i]) for s in sizes],
                          "breached": bool(perfect[i])} for i in range(n))
        description = " ∩ ".join(c.description for c in classes)
        return Risk(self.name, self.adversary, int(perfect.sum()), n, baseline,
                    method, alpha, description, measures, curves, rows)

    def _extra(self, classes: Sequence[Classes], matched: Sequence[Any],
               counts: Sequence[np.ndarray], out: Mapping[str, np.ndarray]) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, init=False)
class Update(Composition):
    """Re-publication: intersect the versions of a table published after inserts and deletes.

    Adversary model: knows each target's quasi-identifiers in every version (they may change,
    e.g. age after a birthday: pass one target table per version) and that the target is in
    every version; intersects the sensitive values of its matching records across versions.
    Breach: one value left. ``k`` (default: the smallest class of the first version) is what
    each version promised; the measure *k broken* is the share of targets whose records in
    the first version that are still possible — those with a value left after intersecting
    — are fewer than k.

    >>> Update(k=5).k
    5
    """

    k: int | None = None
    name: ClassVar[str] = "update"
    adversary: ClassVar[str] = (
        "knows each target's quasi-identifiers in every version and that the target is in "
        "every version; intersects the sensitive values of its matching records across "
        "versions (breach: one value left)")
    baseline_method: ClassVar[str] = "the same adversary with one version only (the better one)"

    def __init__(self, *others: Any, threshold: float = 0.5, k: int | None = None) -> None:
        super().__init__(*others, threshold=threshold)
        object.__setattr__(self, "k", None if k is None else whole(k, "k", example=5))

    def run(self, release: Any, targets: Any = None, **kw: Any) -> Risk:  # type: ignore[override]
        """As :meth:`Composition.run`, with the versions in publication order."""
        return super().run(release, targets, **kw)

    def _extra(self, classes: Sequence[Classes], matched: Sequence[Any],
               counts: Sequence[np.ndarray], out: Mapping[str, np.ndarray]) -> dict[str, Any]:
        present = np.logical_and.reduce([c > 0 for c in counts])
        still = np.where(present, counts[0], 0).sum(axis=1)
        k = self.k
        if k is None:
            sizes = classes[0].sizes[classes[0].sizes > 0]
            k = int(sizes.min()) if len(sizes) else 1
        n = max(len(still), 1)
        return {"k": k, "k broken": float(np.count_nonzero(still < k) / n),
                "mean records still possible in version 1": float(still.mean())
                if len(still) else 0.0}
