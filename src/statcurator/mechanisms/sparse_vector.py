"""The sparse vector technique: AboveThreshold (Dwork, Naor, Reingold, Rothblum & Vadhan 2009).

Given a stream of queries of sensitivity Δ and a public threshold T, AboveThreshold reports
the index of the first query whose noisy value reaches the noisy threshold, and stops. Its
cost is ε however many queries fall below — the point of the technique. This is Algorithm 1
of Lyu, Su & Li, *Understanding the Sparse Vector Technique* (2017) with ε₁ = ε₂ = ε/2:
threshold noise of scale Δ/ε₁ = 2Δ/ε, query noise of scale 2Δ/ε₂ = 4Δ/ε (Δ/ε₂ = 2Δ/ε for
monotonic queries). The noise is discrete Laplace on the grid; the privacy proof shifts the
threshold noise by Δ and the winning query's noise by 2Δ grid units, bijections of the
integers, so it holds exactly for discrete noise.

>>> sv = SparseVector(epsilon=1, sensitivity=1, threshold=100)
>>> sv.threshold_scale, sv.query_scale
(Fraction(2, 1), Fraction(4, 1))
>>> sv.release([3, 5, 1000, 2])
2
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.measures import PureDP
from ..core.numbers import exact, exact_value
from ..core.relations import LInfDistance
from . import samplers
from ._base import (
    OnGrid,
    add_units,
    array_to_grid_units,
    as_alpha,
    distance,
    dlap_halfwidth,
    grid_sensitivity,
    grid_value,
    to_grid_units,
)

__all__ = ["SparseVector", "AboveThreshold"]


@dataclass(frozen=True)
class SparseVector(OnGrid):
    """AboveThreshold: the index of the first query above a public threshold, ε-DP in total.

    Properties: pure ε-DP for any number of below-threshold answers before the first
    above-threshold one (one "above" per run; run it again, at a new cost, for the next).
    ``release`` returns the index, or ``None`` when no query reaches the threshold.

    >>> SparseVector(epsilon=1, sensitivity=1, threshold=0, monotonic=True).query_scale
    Fraction(2, 1)
    """

    epsilon: Fraction
    sensitivity: Fraction
    threshold: Fraction
    monotonic: bool = False
    grid: Fraction | None = None

    name = "sparse-vector"
    input_metric = LInfDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "threshold", exact_value(self.threshold, "threshold"))
        object.__setattr__(self, "grid", grid_value(self.grid))


    @property
    def _units(self) -> int:
        return grid_sensitivity(self.sensitivity, self.step)

    @property
    def threshold_scale(self) -> Fraction:
        """Scale (grid units) of the threshold noise: Δ/ε₁ = 2Δ/ε."""
        return 2 * self._units / self.epsilon

    @property
    def query_scale(self) -> Fraction:
        """Scale (grid units) of each query's noise: 4Δ/ε (2Δ/ε for monotonic queries)."""
        return (2 if self.monotonic else 4) * self._units / self.epsilon

    @property
    def cost(self) -> PureDP:
        """PureDP(ε) for one run, however many queries it reads."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """Loss for queries whose sensitivity is ``d``: ε·⌈d/g⌉/⌈Δ/g⌉."""
        dist = distance(d)
        units = grid_sensitivity(dist, self.step) if dist else 0
        return PureDP(self.epsilon * units / self._units)

    def release(self, queries: Sequence[Any] | np.ndarray) -> int | None:
        """The index of the first query whose noisy value reaches the noisy threshold."""
        i = int(self.sample(queries, 1)[0])
        return None if i < 0 else i

    def sample(self, queries: Sequence[Any] | np.ndarray, size: int) -> np.ndarray:
        """``size`` independent runs over the same queries; -1 where none was above."""
        q = array_to_grid_units(np.asarray(queries), self.step).ravel()
        if not q.size:  # no query: none is above the threshold (and no noise is drawn)
            return np.full(samplers._size(size), -1, dtype=np.int64)
        t = to_grid_units(self.threshold, self.step)
        rho = samplers.discrete_laplace(self.threshold_scale, size)
        nu = samplers.discrete_laplace(self.query_scale, size * q.size).reshape(size, q.size)
        above = add_units(q[None, :], nu) >= add_units(t, rho)[:, None]
        first = np.argmax(above, axis=1)
        return np.where(above.any(axis=1), first, -1).astype(np.int64)

    def accuracy(self, alpha: object = Fraction(1, 20), queries: int = 1) -> float:
        """α-accuracy of AboveThreshold over ``queries`` queries (Dwork & Roth Thm 3.24 style).

        With probability >= 1 - alpha no query below T - h is reported and a query above
        T + h is not passed over, where h bounds the threshold noise (at alpha/2) plus the
        largest of the query noises (alpha/2 shared over the queries).
        """
        a = as_alpha(alpha)
        h_rho = dlap_halfwidth(self.threshold_scale, a / 2)
        h_nu = dlap_halfwidth(self.query_scale, a / (2 * max(1, int(queries))))
        return float((h_rho + h_nu) * self.step)


#: the name used by Dwork & Roth (2014, Algorithm 1)
AboveThreshold = SparseVector
