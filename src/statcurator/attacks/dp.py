"""The DP counterpart of a published table: noisy histograms of the sensitive value per
generalized cell.

Instead of the records, the publisher releases, for every generalized cell, the count of each
sensitive value plus independent discrete Laplace noise, all cells at once with
:class:`~statcurator.mechanisms.VectorLaplaceMechanism`. Each person's record falls in
exactly one (cell, value) coordinate, so the vector's L1 sensitivity is 1 under add/remove
neighbours and 2 under change-one neighbours, and the release is ε-DP *given the cells*. For
a full-domain generalization the cells are every combination of labels at the chosen levels —
a public domain, fixed before the data are seen; empty cells are released too (their noise is
drawn when someone first asks, see :meth:`HistogramRelease.classes_with`). Mondrian's cells
are the partitions it found, which depend on the quasi-identifiers: that contrast protects the
counts, not the cell structure. The attacker clamps negative counts at 0 — post-processing,
free of charge. Two such releases cost ε₁ + ε₂ (sequential composition), and nothing more.

>>> import warnings
>>> import pyarrow as pa
>>> from statcurator.mechanisms import rng
>>> t = pa.table({"zip": ["476**"] * 3, "disease": ["flu", "flu", "cancer"]})
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(3):
...         h = dp_histograms(t, epsilon=1, qi=["zip"], sensitive="disease")
>>> h.cost, h.classes.counts.shape, bool((h.classes.counts >= 0).all())
(PureDP(epsilon=Fraction(1, 1)), (1, 2), True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PureDP
from ..core.numbers import exact
from ..mechanisms import VectorLaplaceMechanism
from ._release import Classes, Published, classes_of, published

__all__ = ["HistogramRelease", "dp_histograms", "NEIGHBOURS"]

#: the L1 sensitivity of a histogram under each neighbour relation
NEIGHBOURS = {"add/remove": 1, "change-one": 2}


@dataclass(frozen=True, eq=False)
class HistogramRelease:
    """Noisy sensitive-value histograms per generalized cell (see the module docstring).

    ``classes`` is what the attacker sees (noisy, clamped counts); ``mechanism`` the vector
    Laplace mechanism that added the noise and ``cost`` its privacy loss (ε per release).
    """

    classes: Classes
    epsilon: Any
    mechanism: VectorLaplaceMechanism
    neighbours: str = "add/remove"
    published: Published | None = field(default=None, repr=False)
    levels: tuple[int, ...] | None = None
    #: noise of the empty cells asked about so far (drawn once each, then kept)
    empty: dict[tuple[str, ...], np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def cost(self) -> PureDP:
        """The privacy loss of this release, from the mechanism that ran."""
        return self.mechanism.cost

    @property
    def description(self) -> str:
        return self.classes.description

    def classes_with(self, qi_values: Mapping[str, Sequence[str | None]]) -> Classes:
        """The classes, with the cells of these people added when they are empty.

        A full-domain generalization at fixed levels has a public domain of cells: every
        combination of labels. The histogram covers all of them — an empty cell is released
        as 0 plus noise like any other — but only the cells someone asks about are
        materialized: their noise is drawn on first use (the same law, independently, once per
        cell). Mondrian's cells have no public domain: its releases stay as they are.
        """
        c = self.classes
        if self.levels is None or not c.qi:
            return c
        keys = []
        for d, q in enumerate(c.qi):
            h = c.hierarchies.get(q)
            if h is None:
                return c
            lv = self.levels[d]
            keys.append([h.generalize(v, lv) if v in h else None for v in qi_values[q]])
        present = {tuple(c.labels[d][int(x)] for d, x in enumerate(row)) for row in c.cells}
        wanted = {k for k in zip(*keys, strict=True) if None not in k and k not in present}
        new = [k for k in sorted(wanted) if k not in self.empty]
        width = max(c.counts.shape[1], 1)
        if new:
            noise = self.mechanism.release(np.zeros(len(new) * width, dtype=np.int64))
            for k, row in zip(new, noise.reshape(len(new), width), strict=True):
                self.empty[k] = row.astype(np.float64)
        if not wanted:
            return c
        added = sorted(wanted)
        labels = [list(x) for x in c.labels]
        index = [{lab: i for i, lab in enumerate(x)} for x in c.labels]
        cells = np.empty((len(added), len(c.qi)), dtype=np.int64)
        for i, key in enumerate(added):
            for d, lab in enumerate(key):
                if lab not in index[d]:
                    index[d][lab] = len(labels[d])
                    labels[d].append(lab)
                cells[i, d] = index[d][lab]
        raw = np.stack([self.empty[k] for k in added])
        clamped = np.maximum(raw, 0)
        sensitive = c.counts.shape[1] > 0
        assert c.unclamped is not None
        return replace(
            c, labels=tuple(tuple(x) for x in labels), cells=np.concatenate([c.cells, cells]),
            counts=np.concatenate([c.counts, clamped if sensitive else clamped[:, :0]]),
            sizes=np.concatenate([c.sizes, clamped.sum(axis=1)]),
            unclamped=np.concatenate([c.unclamped, raw]), matches={})


def dp_histograms(release: Any, epsilon: Any, *, neighbours: str = "add/remove",
                  qi: Sequence[str] | None = None, sensitive: str | None = None,
                  hierarchies: Mapping[str, Any] | None = None) -> HistogramRelease:
    """The ε-DP counterpart of ``release`` (an anonymization result or a released table).

    The exact per-cell counts are computed by the publisher (who holds the data); only their
    noisy version leaves. Without a sensitive attribute the histogram is of the cells' sizes
    (what linkage reads).
    """
    eps = exact(epsilon, "epsilon")
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(f"unknown neighbour relation {neighbours!r}",
                                    remedy="use 'add/remove' or 'change-one'")
    pub = published(release, qi=qi, sensitive=sensitive, hierarchies=hierarchies)
    exact_classes = classes_of(pub)
    mech = VectorLaplaceMechanism(sensitivity=NEIGHBOURS[neighbours], epsilon=eps)
    if pub.sensitive is None:  # no sensitive attribute: the histogram of the cells' sizes
        exact_classes = replace(exact_classes, values=(), counts=exact_classes.sizes[:, None])
    counts = exact_classes.counts.astype(np.int64)
    noisy = mech.release(counts.ravel()).reshape(counts.shape)
    clamped = np.maximum(noisy, 0).astype(np.float64)  # post-processing
    classes = replace(exact_classes, counts=clamped if pub.sensitive is not None else
                      np.zeros((len(clamped), 0)), sizes=clamped.sum(axis=1), noisy=True,
                      unclamped=noisy.astype(np.float64),
                      description=f"ε={float(eps):g} DP histograms per cell of {pub.name}")
    levels = tuple(pub.levels[q] for q in pub.qi) if pub.levels else None
    return HistogramRelease(classes, eps, mech, neighbours, pub, levels)
