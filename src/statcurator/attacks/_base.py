"""The machinery shared by the attacks on published tables.

An attack on a published table is a frozen dataclass whose ``run`` does four things, in this
order and with this separation:

1. read what the adversary may see: the released classes (:mod:`._release`), exact for an
   anonymized table, noisy for a :class:`~statcurator.attacks.dp.HistogramRelease`;
2. read what the adversary knows about the targets (their QIs, and whatever else the model
   grants, e.g. b values they do not have);
3. infer, from 1 and 2 only;
4. score the inferences against the truth, which only the evaluator holds, and build the
   :class:`~statcurator.attacks.risk.Risk`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from ..core.errors import InvalidParameterError
from ._release import (
    Classes,
    Knowledge,
    candidate_counts,
    classes_of,
    match,
    published,
    target_knowledge,
)
from .dp import HistogramRelease, dp_histograms
from .risk import Risk

__all__ = ["TableAttack", "Matched", "view", "truth_index", "match_targets", "leave_one_out"]


def view(release: Any, *, qi: Sequence[str] | None = None, sensitive: str | None = None,
         hierarchies: Mapping[str, Any] | None = None) -> tuple[Classes, Any]:
    """The classes an attacker reads from ``release`` and the published table behind them."""
    if isinstance(release, HistogramRelease):
        return release.classes, release.published
    if isinstance(release, Classes):
        return release, release.source
    pub = published(release, qi=qi, sensitive=sensitive, hierarchies=hierarchies)
    return classes_of(pub), pub


def truth_index(classes: Classes, truth: Sequence[str | None] | None) -> np.ndarray | None:
    """Each target's true sensitive value as an index into ``classes.values`` (−1: absent)."""
    if truth is None:
        return None
    pos = {v: i for i, v in enumerate(classes.values)}
    return np.array([pos.get("" if t is None else t, -1) for t in truth], dtype=np.int64)


@dataclass(frozen=True)
class Matched:
    """The targets matched to one release: the matched classes (CSR) and, per target, the
    released sensitive counts summed over them (``counts``) and the candidate records."""

    classes: Classes
    knowledge: Knowledge
    indptr: np.ndarray
    indices: np.ndarray
    counts: np.ndarray

    @property
    def candidates(self) -> np.ndarray:
        """Released records that could be each target (noisy releases: the noisy total)."""
        sizes = candidate_counts(self.classes, self.indptr, self.indices,
                                 self.classes.sizes[:, None])
        return sizes[:, 0]

    @property
    def matched(self) -> np.ndarray:
        """Number of classes each target matches."""
        return np.diff(self.indptr)


def match_targets(classes: Classes, knowledge: Knowledge) -> Matched:
    """Match the targets to the release (cached per target set: a DP counterpart with the same
    cells reuses the matching)."""
    hit = classes.matches.get(id(knowledge.qi))
    if hit is not None and hit[0] is knowledge.qi:
        indptr, indices = hit[1]
    else:
        indptr, indices = match(classes, knowledge.qi)
        if len(classes.matches) > 8:
            classes.matches.clear()
        classes.matches[id(knowledge.qi)] = (knowledge.qi, (indptr, indices))
    counts = candidate_counts(classes, indptr, indices) if classes.values else \
        np.zeros((knowledge.size, 0))
    return Matched(classes, knowledge, indptr, indices, counts)


def leave_one_out(m: Matched) -> np.ndarray | None:
    """The counts each target would read with its own record removed (evaluator only: needs
    each target's row and the release's row → class map; ``None`` otherwise). A noisy release
    keeps its noise: the own (cell, value) count loses one before clamping. Targets not in
    the data keep their counts."""
    rows, rc = m.knowledge.rows, m.classes.row_class
    truth = truth_index(m.classes, m.knowledge.truth)
    if rows is None or rc is None or truth is None:
        return None
    inside = (rows >= 0) & (rows < len(rc))
    own = np.full(len(rows), -1, dtype=np.int64)
    own[inside] = rc[rows[inside]]
    ok = (own >= 0) & (truth >= 0)
    raw = m.classes.unclamped if m.classes.unclamped is not None else m.classes.counts
    u = raw[own[ok], truth[ok]]
    loo = m.counts.copy()
    loo[np.flatnonzero(ok), truth[ok]] -= np.maximum(u, 0) - np.maximum(u - 1, 0)
    return np.maximum(loo, 0)


class TableAttack:
    """Base of the attacks on one published table (see the module docstring).

    ``run(release, targets=None, *, truth=None, detail=False, alpha=0.05, epsilon=None)``:
    ``release`` is an :class:`~statcurator.anonymize.AnonymizationResult`, a released table
    (with ``qi=``/``sensitive=``), or a DP :class:`~statcurator.attacks.dp.HistogramRelease`;
    ``targets`` a table of the targets' quasi-identifiers (default: every input record of an
    anonymization result); ``truth`` their true values (default: the targets' sensitive
    column, or the input table's); ``id`` the targets' identifier column (shown in detail).
    With ``epsilon``, the same adversary also attacks the ε-DP counterpart
    (:func:`~statcurator.attacks.dp.dp_histograms`) and the risk carries it as ``contrast``.
    When the evaluator knows where each target's record is, the measure "breached without the
    target's own record" is the same attack on the counts without it.
    """

    name: ClassVar[str] = "attack"
    adversary: ClassVar[str] = ""
    baseline_method: ClassVar[str] = ("the same adversary knowing only the overall "
                                      "distribution of the sensitive value")

    def run(self, release: Any, targets: Any = None, *, truth: Any = None,
            qi: Sequence[str] | None = None, sensitive: str | None = None,
            hierarchies: Mapping[str, Any] | None = None, detail: bool = False,
            alpha: float = 0.05, epsilon: Any = None, id: str | None = None) -> Risk:  # noqa: A002
        classes, pub = view(release, qi=qi, sensitive=sensitive, hierarchies=hierarchies)
        if pub is None:
            raise InvalidParameterError("this release carries no published table",
                                        remedy="attack an anonymization result or a table")
        knowledge = self.knowledge_of(pub, targets, truth, id)
        if isinstance(release, HistogramRelease):
            classes = release.classes_with(knowledge.qi)
        self._check(classes, knowledge)
        matched = match_targets(classes, knowledge)
        risk = self.assess(matched, detail=detail, alpha=alpha)
        loo = leave_one_out(matched) if self.needs_sensitive else None
        if loo is not None:
            alone = self.assess(replace(matched, counts=loo), detail=False, alpha=alpha)
            risk = replace(risk, measures={**risk.measures,
                                           "breached without the target's own record":
                                               alone.rate})
        cost = getattr(release, "cost", None)
        if cost is not None:
            risk = replace(risk, cost=cost)
        if epsilon is not None:
            dp = dp_histograms(pub, epsilon)
            risk = risk.with_contrast(self.run(dp, targets, truth=truth, detail=detail,
                                               alpha=alpha, id=id))
        return risk

    def knowledge_of(self, pub: Any, targets: Any, truth: Any, id_column: str | None
                     ) -> Knowledge:
        """The targets as the attacker knows them, and their truth for scoring."""
        return target_knowledge(pub, targets, truth=truth, id_column=id_column)

    def _check(self, classes: Classes, knowledge: Knowledge) -> None:
        if not classes.values and self.needs_sensitive:
            raise InvalidParameterError(f"the {self.name} attack needs the sensitive attribute",
                                        remedy="pass sensitive=COLUMN (CLI: --sensitive COLUMN)")
        if knowledge.truth is None and self.needs_truth:
            raise InvalidParameterError(
                "the targets' true values are unknown, so the attack cannot be scored",
                remedy="pass truth=[...] or give the targets table the sensitive column "
                       "(it is used for scoring only)")

    needs_sensitive: ClassVar[bool] = True
    needs_truth: ClassVar[bool] = True

    def assess(self, m: Matched, *, detail: bool, alpha: float) -> Risk:  # pragma: no cover
        raise NotImplementedError

    def _risk(self, m: Matched, success: np.ndarray, baseline: float, *, alpha: float,
              measures: Mapping[str, Any] | None = None,
              curves: Mapping[str, Any] | None = None,
              detail: list[dict[str, Any]] | None = None) -> Risk:
        return Risk(self.name, self.adversary, int(np.count_nonzero(success)), len(success),
                    baseline, self.baseline_method, alpha, m.classes.description,
                    dict(measures or {}), dict(curves or {}),
                    None if detail is None else tuple(detail))


def detail_rows(m: Matched, success: np.ndarray, **columns: Sequence[Any]) -> list[dict[str, Any]]:
    """Per-target detail: id (or index), classes matched, candidate records, success and the
    attack's own columns."""
    k = m.knowledge
    cand = m.candidates
    out = []
    for i in range(k.size):
        row: dict[str, Any] = {"target": k.ids[i] if k.ids else i,
                               "classes_matched": int(m.matched[i]),
                               "candidates": float(cand[i])}
        if k.truth is not None:
            row["truth"] = k.truth[i]
        for name, values in columns.items():
            row[name] = values[i]
        row["breached"] = bool(success[i])
        out.append(row)
    return out
