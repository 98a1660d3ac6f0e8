"""The Gaussian mechanism with exact discrete Gaussian noise, accounted in ρ-zCDP.

Adding discrete Gaussian noise N_Z(0, σ²) to a query of L2 sensitivity Δ satisfies
ρ-zCDP with ρ = Δ²/(2σ²) (Canonne, Kamath & Steinke 2020, Thm 4), exactly as the continuous
Gaussian does; zCDP composes by adding ρ and converts to (ε, δ)-DP with
:meth:`statcurator.core.measures.ZCDP.to_approx`.

>>> from fractions import Fraction
>>> g = GaussianMechanism(sensitivity=1, rho=Fraction(1, 2))
>>> g.sigma2, g.cost
(Fraction(1, 1), ZCDP(rho=Fraction(1, 2)))
>>> g.accuracy(0.05)    # P(|noise| > 2) <= 5% for σ = 1
2.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import ZCDP, ApproxDP
from ..core.numbers import exact, sqrt_bounds
from ..core.relations import AbsoluteDistance, L2Distance
from . import samplers
from ._base import (
    OnGrid,
    add_units,
    array_to_grid_units,
    as_alpha,
    dgauss_halfwidth,
    distance,
    from_grid_units,
    grid_sensitivity,
    grid_value,
    to_grid_units,
)

__all__ = ["GaussianMechanism", "VectorGaussianMechanism"]


@dataclass(frozen=True)
class GaussianMechanism(OnGrid):
    """ρ-zCDP release of a value of sensitivity Δ with discrete Gaussian noise.

    Properties: ``cost == ZCDP(rho)``; σ² = ⌈Δ/g⌉²/(2ρ) in grid units (exact rational);
    the privacy map is quadratic, ``privacy_map(d) = ρ·(⌈d/g⌉/⌈Δ/g⌉)²`` for any ``d``;
    unbiased noise.
    Outputs as for :class:`~statcurator.mechanisms.LaplaceMechanism` (integers, or multiples
    of ``grid``); arrays are released element-wise, each element one release.

    >>> g = GaussianMechanism(sensitivity=10, rho=Fraction(1, 8), grid=Fraction(1, 4))
    >>> g.sigma2             # (10·4)² / (2·1/8) in grid units
    Fraction(6400, 1)
    >>> float(g.scale)       # σ in output units: 80/4
    20.0
    >>> g.privacy_map(5)
    ZCDP(rho=Fraction(1, 32))
    """

    sensitivity: Fraction
    rho: Fraction
    grid: Fraction | None = None

    name = "gaussian"
    input_metric = AbsoluteDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "rho", exact(self.rho, "rho"))
        object.__setattr__(self, "grid", grid_value(self.grid))

    @classmethod
    def from_epsilon_delta(cls, sensitivity: object, epsilon: object, delta: object,
                           grid: object = None) -> GaussianMechanism:
        """The Gaussian mechanism with the largest ρ whose (ε, δ) conversion fits (ε, δ).

        >>> g = GaussianMechanism.from_epsilon_delta(1, 1, 1e-6)
        >>> g.cost.to_approx(1e-6).epsilon <= 1
        True
        """
        eps = exact(epsilon, "epsilon")
        d = exact(delta, "delta")
        # bisection on ρ: the (ε, δ) conversion increases with ρ, and every probe is the
        # same rigorous, conservatively rounded conversion the ledger would see
        lo, hi = Fraction(0), eps
        while ZCDP(hi).to_approx(d).epsilon <= eps:
            lo, hi = hi, hi * 2
        for _ in range(40):
            mid = (lo + hi) / 2
            if ZCDP(mid).to_approx(d).epsilon <= eps:
                lo = mid
            else:
                hi = mid
        if lo == 0:
            raise InvalidParameterError(f"no Gaussian noise gives (ε={eps}, δ={d})",
                                        remedy="raise epsilon or delta")
        return cls(sensitivity, _round_down_sig(lo), grid)


    @property
    def grid_sensitivity(self) -> int:
        """The sensitivity in grid units, ⌈Δ/g⌉."""
        return grid_sensitivity(self.sensitivity, self.step)

    @property
    def sigma2(self) -> Fraction:
        """σ² of the discrete Gaussian noise in grid units (exact): ⌈Δ/g⌉²/(2ρ)."""
        return Fraction(self.grid_sensitivity) ** 2 / (2 * self.rho)

    @property
    def variance(self) -> Fraction:
        """σ² in output units (exact)."""
        return self.sigma2 * self.step**2

    @property
    def scale(self) -> Fraction:
        """σ in output units, rounded up to 40 significant bits (σ is usually irrational)."""
        return sqrt_bounds(self.variance, 40)[1]

    @property
    def cost(self) -> ZCDP:
        """ZCDP(ρ) at the declared sensitivity."""
        return ZCDP(self.rho)

    def to_approx(self, delta: object) -> ApproxDP:
        """The (ε, δ)-DP guarantee implied by the zCDP cost."""
        return self.cost.to_approx(delta)

    def privacy_map(self, d: object) -> ZCDP:
        """The loss for inputs at (L2) distance ``d``: ρ·(⌈d/g⌉/⌈Δ/g⌉)², quadratic in d.

        >>> GaussianMechanism(sensitivity=2, rho=1).privacy_map(1)
        ZCDP(rho=Fraction(1, 4))
        >>> GaussianMechanism(1, Fraction(1, 8)).measurement().map(2)
        ZCDP(rho=Fraction(1, 2))
        """
        dist = distance(d)
        units = grid_sensitivity(dist, self.step) if dist else 0
        return ZCDP(self.rho * Fraction(units, self.grid_sensitivity) ** 2)

    def release(self, x: Any) -> Any:
        """The noisy value: int (no grid) or Fraction on the grid; arrays element-wise."""
        if isinstance(x, np.ndarray | list | tuple):
            units = array_to_grid_units(np.asarray(x), self.step)
            noisy = add_units(units, self.sample_noise_units(units.size).reshape(units.shape))
            return noisy if self.grid is None else from_grid_units(noisy, self.step)
        noisy = to_grid_units(x, self.step) + self.sample_noise_units()
        return noisy if self.grid is None else noisy * self.step

    def sample_noise_units(self, size: int | None = None) -> Any:
        """Draws of the noise alone, in grid units."""
        return samplers.discrete_gaussian(self.sigma2, size)

    def noise_pmf(self, k: np.ndarray) -> np.ndarray:
        """P(noise = k) for integer grid units k (floats, for plots and tests)."""
        s2 = float(self.sigma2)
        sigma = math.sqrt(s2)
        xs = np.arange(-math.ceil(40 * sigma + 40), math.ceil(40 * sigma + 40) + 1)
        z = np.exp(-(xs.astype(np.float64) ** 2) / (2 * s2)).sum()
        kk = np.asarray(k, dtype=np.float64)
        return np.exp(-kk * kk / (2 * s2)) / z

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise in output units (≈ σ for σ >= 1)."""
        s2 = float(self.sigma2)
        sigma = math.sqrt(s2)
        xs = np.arange(-math.ceil(40 * sigma + 40), math.ceil(40 * sigma + 40) + 1,
                       dtype=np.float64)
        w = np.exp(-xs * xs / (2 * s2))
        return math.sqrt(float((w * xs * xs).sum() / w.sum())) * float(self.step)

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Half-width h (output units) with P(|noise| > h) <= alpha for the discrete law."""
        return float(dgauss_halfwidth(self.sigma2, as_alpha(alpha)) * self.step)


@dataclass(frozen=True)
class VectorGaussianMechanism(GaussianMechanism):
    """ρ-zCDP release of a whole integer vector of L2 sensitivity Δ₂.

    Independent discrete Gaussian noise N_Z(0, Δ₂²/(2ρ)) on each coordinate (CKS 2020,
    Thm 14: the multivariate discrete Gaussian has the same zCDP guarantee). Inputs must be
    integers, or multiples of the grid.

    >>> VectorGaussianMechanism(sensitivity=1, rho=Fraction(1, 2)).cost
    ZCDP(rho=Fraction(1, 2))
    """

    name = "vector-gaussian"
    input_metric = L2Distance()

    def release(self, x: Any) -> np.ndarray:
        """The noisy vector (int64, or float64 grid multiples)."""
        arr = np.asarray(x)
        units = array_to_grid_units(arr, self.step)
        back = from_grid_units(units, self.step) if self.grid is not None else units
        if arr.dtype.kind != "O" and not np.array_equal(back, arr.astype(back.dtype)):
            from ..core.errors import DataError

            raise DataError("the vector has values off the grid",
                            remedy="round it to the grid first and add the rounding to the "
                                   "L2 sensitivity, or use GaussianMechanism element-wise")
        noisy = add_units(units, samplers.discrete_gaussian(self.sigma2, units.size)
                          .reshape(units.shape))
        return noisy if self.grid is None else from_grid_units(noisy, self.step)


def _round_down_sig(x: Fraction, digits: int = 6) -> Fraction:
    """The largest decimal with ``digits`` significant digits that is <= x (x > 0)."""
    e = math.floor(math.log10(float(x)))
    scale = Fraction(10) ** (digits - 1 - e)
    v = Fraction(math.floor(x * scale)) / scale
    return v if v > 0 else x
