"""The minimality attack (Wong, Fu, Wang & Pei, VLDB 2007).

An anonymization algorithm that returns a *minimal* generalization says more than its table:
every generalization just below the released one must have violated the privacy criteria —
otherwise the algorithm would have returned it. An adversary who knows the algorithm
(Kerckhoffs), the criteria and everyone's quasi-identifiers keeps only the assignments of the
released sensitive values to people under which each of those finer generalizations fails,
and reads its posterior from them.

The smallest example: six people, two (A, B) in zip 13053 and four in 13068; the release
generalizes zip to ``130**`` and is 2-diverse with values {HIV, HIV, flu, cold, cough, fever}.
A minimal 2-diverse algorithm generalized only because the zip-level classes were not
2-diverse, and the only way for that is A and B both having HIV:

>>> import pyarrow as pa
>>> from statcurator.anonymize import Hierarchy, LDiversity
>>> zips = Hierarchy.from_masking("zip", ["13053", "13068"], length=5)
>>> release = pa.table({"zip": ["130**"] * 6,
...                     "disease": ["HIV", "HIV", "flu", "cold", "cough", "fever"]})
>>> people = {"zip": ["13053", "13053", "13068", "13068", "13068", "13068"],
...           "disease": ["HIV", "HIV", "flu", "cold", "cough", "fever"]}
>>> risk = Minimality(LDiversity("disease", 2)).run(
...     release, people, qi=["zip"], sensitive="disease", hierarchies={"zip": zips}, detail=True)
>>> risk.successes, risk.baseline, risk.measures["worlds consistent with minimality"]
(2, 0.0, 24)
>>> [d["posterior"] for d in risk.detail][:3]
[1.0, 1.0, 0.25]
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ..anonymize._engine import group_ids
from ..anonymize.criteria import ClassSummary, Criterion, KAnonymity, LDiversity, SensitiveDomain
from ..core.errors import InvalidParameterError
from ..core.numbers import exact
from ._base import view
from ._checks import share, whole
from ._release import Classes, target_knowledge
from .risk import Risk

__all__ = ["Minimality", "released_levels"]


def released_levels(classes: Classes) -> tuple[int, ...]:
    """The full-domain level of each QI, read from the released labels and the hierarchies
    (suppressed ``*`` rows aside); a release that is not a full-domain generalization is
    refused."""
    levels = []
    for d, q in enumerate(classes.qi):
        h = classes.hierarchies.get(q)
        if h is None:
            raise InvalidParameterError(f"the minimality attack needs the hierarchy of {q!r}",
                                        remedy="pass hierarchies={...} or attack an "
                                               "anonymization result")
        used = {lab for lab in classes.labels[d]}
        fits = [lv for lv in range(h.levels) if used <= set(h.labels(lv))]
        if not fits:
            non_star = {lab for lab in used if set(lab) != {"*"}}
            fits = [lv for lv in range(h.levels) if non_star <= set(h.labels(lv))]
        if not fits:
            raise InvalidParameterError(
                f"the released labels of {q!r} are not one level of its hierarchy",
                remedy="the minimality attack applies to full-domain generalizations "
                       "(algorithm='optimal')")
        levels.append(fits[0])
    return tuple(levels)


def _multiset_permutations(values: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """The distinct orderings of a multiset (each once)."""
    counts: dict[int, int] = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    keys = sorted(counts)
    n = len(values)
    out = [0] * n

    def rec(i: int) -> Iterator[tuple[int, ...]]:
        if i == n:
            yield tuple(out)
            return
        for k in keys:
            if counts[k]:
                counts[k] -= 1
                out[i] = k
                yield from rec(i + 1)
                counts[k] += 1

    return rec(0)


def _falling(n: int, k: int) -> int:
    return math.perm(n, k) if 0 <= k <= n else 0


@dataclass(frozen=True)
class Minimality:
    """The minimality attack on a full-domain generalization (see the module docstring).

    Adversary model: knows the quasi-identifiers of *every* person in the table (``people``:
    by default the input's QIs — Wong et al.'s assumption), the hierarchies, the privacy
    ``criteria`` and the ``suppression`` limit, and that the algorithm returned a minimal
    generalization; it keeps the assignments of the released values to people under which
    every immediate predecessor of the released levels violates the criteria. Breach: the
    posterior of the target's true value reaches ``threshold`` (default 1: certainty). The
    baseline is the same adversary without the minimality knowledge (the class frequencies).

    Exact posteriors come from enumerating the assignments when there are at most
    ``max_worlds``. Beyond, a sound deduction is used for k-anonymity and distinct
    l-diversity: when a predecessor's violation is not already explained by a class too small
    to satisfy the criteria, and only one of its classes *could* violate, that class must —
    so it holds at most l − 1 distinct values — and its members' posterior is computed
    exactly from the parent class's counts (inclusion–exclusion over value sets). Each
    deduction is used on its own: the reported risk is a lower bound of what an adversary
    combining them reaches.
    """

    criteria: tuple[Criterion, ...] = ()
    suppression: Fraction = Fraction(0)
    threshold: float = 1.0
    max_worlds: int = 1_000_000
    name: ClassVar[str] = "minimality"
    adversary: ClassVar[str] = (
        "knows everyone's quasi-identifiers, the hierarchies, the criteria and that the "
        "algorithm returns a minimal generalization; keeps the worlds where every finer "
        "generalization violates the criteria")
    baseline_method: ClassVar[str] = "the same adversary without the minimality knowledge"

    def __init__(self, *criteria: Criterion, suppression: Any = 0, threshold: float = 1.0,
                 max_worlds: int = 1_000_000) -> None:
        if not criteria:
            raise InvalidParameterError("the minimality attack needs the release's criteria",
                                        remedy="pass them, e.g. Minimality(LDiversity('d', 2))")
        object.__setattr__(self, "criteria", tuple(criteria))
        object.__setattr__(self, "suppression",
                           exact(suppression, "suppression", allow_zero=True, maximum=1))
        object.__setattr__(self, "threshold", share(threshold, "threshold", example=1))
        object.__setattr__(self, "max_worlds", whole(max_worlds, "max_worlds", example=10**6))

    @classmethod
    def of(cls, result: Any, **kw: Any) -> Minimality:
        """The attack on an anonymization result, with its criteria and suppression limit."""
        return cls(*result.criteria, suppression=result.suppression, **kw)

    def run(self, release: Any, people: Any = None, *, truth: Any = None,
            qi: Sequence[str] | None = None, sensitive: str | None = None,
            hierarchies: Mapping[str, Any] | None = None, detail: bool = False,
            alpha: float = 0.05) -> Risk:
        classes, pub = view(release, qi=qi, sensitive=sensitive, hierarchies=hierarchies)
        levels = released_levels(classes)
        know = target_knowledge(pub, people, truth=truth)
        if know.truth is None:
            raise InvalidParameterError(
                "the targets' true values are unknown, so the attack cannot be scored",
                remedy="give the people table the sensitive column (used for scoring only)")
        sens = classes.values
        n = know.size
        # the attacker's coding of everyone: hierarchy rows per QI
        raw = np.stack([np.asarray(classes.hierarchies[q].index(know.qi[q]), dtype=np.int64)
                        for q in classes.qi], axis=1) if classes.qi else np.zeros((n, 0), int)
        home = self._home_classes(classes, raw, levels)
        limit = math.floor(self.suppression * n)
        predecessors = [tuple(lv - (i == d) for i, lv in enumerate(levels))
                        for d in range(len(levels)) if levels[d] > 0]
        subs = [self._subclasses(classes, raw, p) for p in predecessors]
        class_counts = classes.counts.astype(np.int64)
        worlds = 1
        for c in range(classes.size):
            worlds *= math.factorial(int(class_counts[c].sum())) // math.prod(
                math.factorial(int(x)) for x in class_counts[c])
            if worlds > self.max_worlds:
                break
        if worlds <= self.max_worlds:
            post, info = self._enumerate(classes, home, subs, limit)
            mode = "exact enumeration"
        else:
            post, info = self._deduce(classes, home, subs, limit)
            mode = "deduction (lower bound)"
        truth_idx = np.array([sens.index(t) if t in sens else -1 for t in know.truth])
        idx = np.arange(n)
        ok = truth_idx >= 0
        p_true = np.where(ok, post[idx, np.maximum(truth_idx, 0)], 0.0)
        sizes = class_counts.sum(axis=1)
        freq = class_counts[home] / np.maximum(sizes[home], 1)[:, None]
        f_true = np.where(ok, freq[idx, np.maximum(truth_idx, 0)], 0.0)
        success = p_true >= self.threshold - 1e-12
        base = f_true >= self.threshold - 1e-12
        measures = {"mode": mode, "released levels": dict(zip(classes.qi, levels, strict=True)),
                    "predecessors": len(predecessors),
                    "mean posterior of the true value": float(p_true.mean()) if n else 0.0,
                    "mean class frequency of the true value": float(f_true.mean()) if n else 0.0,
                    "targets whose posterior changed": int(np.count_nonzero(
                        np.abs(post - freq).max(axis=1) > 1e-12))}
        measures.update(info)
        rows = None
        if detail:
            rows = tuple({"target": i, "truth": know.truth[i], "posterior": float(p_true[i]),
                          "class frequency": float(f_true[i]), "breached": bool(success[i])}
                         for i in range(n))
        return Risk(self.name, self.adversary, int(success.sum()), n,
                    float(base.mean()) if n else 0.0, self.baseline_method, alpha,
                    classes.description, measures, {}, rows)

    # -- the attacker's structure: released class of each person, predecessor sub-classes --------
    @staticmethod
    def _home_classes(classes: Classes, raw: np.ndarray, levels: Sequence[int]) -> np.ndarray:
        n = len(raw)
        lookup = {tuple(classes.labels[d][int(x)] for d, x in enumerate(row)): c
                  for c, row in enumerate(classes.cells)}
        star = tuple("*" for _ in classes.qi)
        home = np.empty(n, dtype=np.int64)
        for i in range(n):
            key = tuple(classes.hierarchies[q].rows[int(raw[i, d])][levels[d]]
                        for d, q in enumerate(classes.qi))
            c = lookup.get(key)
            if c is None:
                c = lookup.get(star)
            if c is None:
                raise InvalidParameterError(
                    "a person's generalized quasi-identifiers are not in the release",
                    remedy="pass as people exactly the individuals of the released table")
            home[i] = c
        got = np.bincount(home, minlength=classes.size)
        if not np.array_equal(got, classes.counts.sum(axis=1).astype(np.int64)):
            raise InvalidParameterError(
                "the people given do not fill the released classes exactly",
                remedy="pass as people exactly the individuals of the released table")
        return home

    @staticmethod
    def _subclasses(classes: Classes, raw: np.ndarray, levels: Sequence[int]) -> np.ndarray:
        """Each person's class at the (finer) generalization ``levels``."""
        cols, cards = [], []
        for d, q in enumerate(classes.qi):
            h = classes.hierarchies[q]
            cols.append(np.asarray(h.codes[levels[d]])[raw[:, d]])
            cards.append(h.cardinalities[levels[d]])
        ids, _, _ = group_ids(cols, cards)
        return ids

    def _violates(self, sub: np.ndarray, values: np.ndarray, domain: SensitiveDomain,
                  column: str, limit: int) -> bool:
        groups = int(sub.max()) + 1 if len(sub) else 0
        sizes = np.bincount(sub, minlength=groups).astype(np.int64)
        m = domain.size
        counts = np.bincount(sub * m + values, minlength=groups * m).reshape(groups, m)
        summary = ClassSummary(sizes, {column: counts}, {column: domain})
        ok = np.ones(groups, dtype=bool)
        for c in self.criteria:
            ok &= c.check(summary)
        return int(sizes[~ok].sum()) > limit

    # -- exact: enumerate the worlds -------------------------------------------------------------
    def _enumerate(self, classes: Classes, home: np.ndarray, subs: Sequence[np.ndarray],
                   limit: int) -> tuple[np.ndarray, dict[str, Any]]:
        m = len(classes.values)
        column = self._column(classes)
        totals = classes.counts.sum(axis=0).astype(np.int64)
        domain = SensitiveDomain(column, tuple(classes.values), totals)
        members = [np.flatnonzero(home == c) for c in range(classes.size)]
        options = []
        for c in range(classes.size):
            multiset = [j for j in range(m) for _ in range(int(classes.counts[c, j]))]
            options.append(list(_multiset_permutations(multiset)))
        hits = np.zeros((len(home), m))
        kept = total = 0
        values = np.empty(len(home), dtype=np.int64)
        for world in itertools.product(*options):
            total += 1
            for c, assignment in enumerate(world):
                values[members[c]] = assignment
            if all(self._violates(s, values, domain, column, limit) for s in subs):
                kept += 1
                hits[np.arange(len(home)), values] += 1
        if kept == 0:
            # no world explains the release as a minimal one: the minimality knowledge is void
            freq = classes.counts[home] / np.maximum(classes.counts[home].sum(axis=1), 1)[:, None]
            return freq, {"worlds": total, "worlds consistent with minimality": 0,
                          "release is minimal": False}
        return hits / kept, {"worlds": total, "worlds consistent with minimality": kept}

    def _column(self, classes: Classes) -> str:
        cols = {c.sensitive_column for c in self.criteria if c.sensitive_column}
        if len(cols) > 1:
            raise InvalidParameterError("the criteria protect several sensitive columns",
                                        remedy="attack one sensitive column at a time")
        return cols.pop() if cols else (classes.source.sensitive if classes.source else "")

    # -- large data: sound single deductions -------------------------------------------------------
    def _deduce(self, classes: Classes, home: np.ndarray, subs: Sequence[np.ndarray],
                limit: int) -> tuple[np.ndarray, dict[str, Any]]:
        counts = classes.counts.astype(np.int64)
        freq = counts[home] / np.maximum(counts[home].sum(axis=1), 1)[:, None]
        post = freq.copy()
        supported = all(isinstance(c, KAnonymity) or (isinstance(c, LDiversity)
                                                      and c.variant == "distinct")
                        for c in self.criteria)
        info: dict[str, Any] = {"predecessors explained by small classes": 0,
                                "forced classes": 0, "people in forced classes": 0}
        if not supported:
            info["deduction"] = "none: only k-anonymity and distinct l-diversity are supported"
            return post, info
        k = max((c.k for c in self.criteria if isinstance(c, KAnonymity)), default=1)
        l_ = max((int(c.l) for c in self.criteria if isinstance(c, LDiversity)), default=1)
        small = max(k, l_)
        for sub in subs:
            groups = int(sub.max()) + 1
            sizes = np.bincount(sub, minlength=groups)
            parent = np.zeros(groups, dtype=np.int64)
            parent[sub] = home
            auto = int(sizes[sizes < small].sum())
            if auto > limit:
                info["predecessors explained by small classes"] += 1
                continue
            if l_ <= 1:
                continue  # k-anonymity alone never depends on the sensitive values
            top = -np.sort(-counts, axis=1)[:, :l_ - 1].sum(axis=1)
            may = np.flatnonzero((sizes >= small) & (top[parent] >= sizes))
            need = limit - auto  # more than this many records must fail
            if len(may) != 1 or auto + int(sizes[may[0]]) <= limit or need < 0:
                continue
            s = int(may[0])
            info["forced classes"] += 1
            who = np.flatnonzero(sub == s)
            info["people in forced classes"] += len(who)
            p = self._forced_posterior(counts[parent[s]], len(who), l_)
            better = p[None, :].max(axis=1) > post[who].max(axis=1)
            post[who[better]] = p
        return post, info

    @staticmethod
    def _forced_posterior(c: np.ndarray, s: int, l_: int) -> np.ndarray:
        """P(a member of a class S of size s has value v) given that S, drawn from a parent
        class with value counts c, holds at most l − 1 distinct values (exact)."""
        vals = [int(v) for v in np.flatnonzero(c > 0)]
        f: dict[frozenset[int], int] = {}

        def ways(u: frozenset[int]) -> int:
            if u not in f:
                f[u] = _falling(sum(int(c[v]) for v in u), s)
            return f[u]

        total = 0
        per = dict.fromkeys(vals, 0)
        for size in range(1, l_):
            for t in itertools.combinations(vals, size):
                for r in range(0, size + 1):
                    for u in itertools.combinations(t, r):
                        sign = -1 if (size - r) % 2 else 1
                        us = frozenset(u)
                        total += sign * ways(us)
                        cu = sum(int(c[v]) for v in u)
                        for v in u:
                            per[v] += sign * int(c[v]) * _falling(cu - 1, s - 1)
        out = np.zeros(len(c))
        if total > 0:
            for v in vals:
                out[v] = float(Fraction(per[v], total))
        return out
