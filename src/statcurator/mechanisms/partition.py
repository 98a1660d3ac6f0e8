"""DP partition selection: which GROUP BY keys may be released at all.

When the group keys are not declared public, the *presence* of a key is private (a key
present only because of one person reveals that person). Laplace thresholding (Korolova,
Kenthapadi, Mishra & Ntoulas 2009; Wilson et al. 2020; Desfontaines et al. 2022): add
discrete Laplace noise of scale m/ε to each key's count of privacy units (each unit adds at
most 1 to at most m = ``max_partitions`` keys, so the count vector has L1 sensitivity m)
and keep a key only when its noisy count reaches a public threshold τ.

A key that exists only because of one unit has count 1; it survives with probability at most
P(noise >= τ - 1) per key, m·P(noise >= τ - 1) in all. τ is the smallest integer for which that
is at most δ (at most δ/(e^ε + δ) when m > 1, which covers the reverse direction in which the
other m - 1 counts also move), computed with rigorous bounds of the discrete Laplace tail
P(X >= k) = a^k/(1 + a), a = e^(-ε/m). The result is (ε, δ)-DP for the kept keys and their
noisy counts together.

>>> ps = PartitionSelection(epsilon=1, delta=Fraction(1, 10**6))
>>> ps.threshold        # a key needs a noisy count of at least 15
15
>>> ps.cost
ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError
from ..core.measures import ApproxDP
from ..core.numbers import exact, exact_probability, exp_bounds
from ..core.relations import AddRemove
from . import samplers
from ._base import (
    MAX_GRID_UNITS,
    Mechanism,
    add_units,
    as_alpha,
    dlap_halfwidth,
    smallest_integer,
)

__all__ = ["PartitionSelection"]


@dataclass(frozen=True)
class PartitionSelection(Mechanism):
    """(ε, δ)-DP selection of the keys to release, by thresholding noisy unit counts.

    ``release(counts)`` takes the exact number of distinct privacy units in each candidate
    key (after bounding each unit to ``max_partitions`` keys) and returns ``(keep,
    noisy_counts)``: a boolean mask and the noisy counts (int64), which are themselves an
    ε-DP release of the counts and may be published for the kept keys.

    >>> ps = PartitionSelection(epsilon=1, delta=1e-6, max_partitions=2)
    >>> ps.noise_scale
    Fraction(2, 1)
    >>> keep, noisy = ps.release(np.array([0, 1, 5000]))
    >>> keep.tolist()
    [False, False, True]
    """

    epsilon: Fraction
    delta: Fraction
    max_partitions: int = 1

    name = "partition-selection"
    input_metric = AddRemove()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "delta", exact_probability(self.delta, "delta", allow_zero=False))
        m = self.max_partitions
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise InvalidParameterError(f"max_partitions must be a positive integer, got {m!r}",
                                        remedy="pass the number of groups one unit may touch")

    @property
    def noise_scale(self) -> Fraction:
        """Scale of the discrete Laplace noise on each count: m/ε."""
        return Fraction(self.max_partitions) / self.epsilon

    @property
    def delta_per_release(self) -> Fraction:
        """The bound that m·P(noise >= τ - 1) must meet (δ, or δ/(e^ε + δ) when m > 1)."""
        if self.max_partitions == 1:
            return self.delta
        return self.delta / (exp_bounds(self.epsilon, 64)[1] + self.delta)

    @property
    def threshold(self) -> int:
        """The public threshold τ on the noisy count (an integer >= 2)."""
        return _threshold(self.epsilon, self.max_partitions, self.delta_per_release)

    @property
    def cost(self) -> ApproxDP:
        """ApproxDP(ε, δ)."""
        return ApproxDP(self.epsilon, self.delta)

    def privacy_map(self, d: object) -> ApproxDP:
        """The loss for ``d`` added/removed units (group privacy beyond one unit).

        Its :meth:`measurement` reads the dataset relation itself (a step of it adds or
        removes one unit in at most ``max_partitions`` keys), so pass the relation:

        >>> from statcurator.core.relations import AddRemove
        >>> PartitionSelection(1, 1e-6).measurement(AddRemove()).map(1)
        ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000))
        """
        dist = exact(d, "distance", allow_zero=True)
        if dist == 0:
            return ApproxDP(0, 0)
        if dist.denominator != 1:
            raise InvalidParameterError("a number of privacy units must be an integer",
                                        remedy="pass d=1")
        return self.cost.group(int(dist))

    def release(self, counts: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(keep, noisy_counts)`` for the per-key counts of privacy units."""
        c = np.asarray(counts)
        if c.dtype.kind == "f":
            if not (np.isfinite(c).all() and (c == np.round(c)).all()):
                raise DataError("partition counts must be integers",
                                remedy="count distinct privacy units per key")
            c = c.astype(np.int64)
        if c.dtype.kind not in "iu" or (c < 0).any():
            raise DataError("partition counts must be non-negative integers",
                            remedy="count distinct privacy units per key")
        if c.size and int(c.max()) >= MAX_GRID_UNITS:  # int64 would wrap (uint64 beyond it)
            raise DataError("a partition count is too large to release",
                            remedy=f"counts must stay below 2^62 ({MAX_GRID_UNITS})")
        noisy = add_units(c.astype(np.int64), samplers.discrete_laplace(
            self.noise_scale, c.size).reshape(c.shape))
        return noisy >= self.threshold, noisy

    def keep_probability(self, count: int) -> float:
        """P(a key with this many units is kept), as a float (for display)."""
        a = math.exp(-1 / float(self.noise_scale))
        k = self.threshold - count  # kept iff noise >= k
        if k <= 0:
            return 1.0 - a ** (1 - k) / (1 + a)
        return a**k / (1 + a)

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Half-width of the noisy counts at level alpha."""
        return float(dlap_halfwidth(self.noise_scale, as_alpha(alpha)))


def _threshold(epsilon: Fraction, m: int, target: Fraction) -> int:
    """Smallest τ with m·P(X >= τ - 1) <= target, X ~ discrete Laplace(m/ε)."""
    scale = Fraction(m) / epsilon
    a_lo = exp_bounds(-1 / scale, 64)[0]

    def ok(k: int) -> bool:  # upper bound of m·a^k/(1+a) <= target
        return m * exp_bounds(-k / scale, 64)[1] / (1 + a_lo) <= target

    try:  # a float guess only; the threshold is decided by the exact test ``ok``
        a = math.exp(-1 / float(scale))
        guess = float(scale) * math.log(m / (float(target) * (1 + a)))
    except (ArithmeticError, ValueError):  # e.g. a target below the float range
        guess = 1.0
    k = max(1, math.ceil(guess) if math.isfinite(guess) else 1)
    return smallest_integer(ok, k, 1) + 1
