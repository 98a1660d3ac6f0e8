"""The Laplace mechanism family, with exact discrete Laplace noise.

* :class:`LaplaceMechanism` — one value (or an array of values, each its own release) of
  sensitivity Δ, with noise of scale Δ/ε; integer outputs, or real outputs on a public grid.
* :class:`GeometricMechanism` — the geometric mechanism of Ghosh, Roughgarden & Sundararajan
  (2009) for integer queries: two-sided geometric noise with α = e^(-ε/Δ).
* :class:`VectorLaplaceMechanism` — a whole vector (a histogram) with L1 sensitivity Δ₁:
  independent noise of scale Δ₁/ε on each coordinate is ε-DP for the vector.

The noise is the discrete Laplace law (two-sided geometric), sampled exactly
(:func:`statcurator.mechanisms.samplers.discrete_laplace`): P(noise = k) ∝ e^(-|k|/b) in grid
units. It is ε-DP for integer-valued queries of sensitivity Δ at b = Δ/ε, exactly as the
continuous Laplace mechanism is for real ones (Dwork, McSherry, Nissim & Smith 2006).

>>> import warnings
>>> from fractions import Fraction
>>> from statcurator.mechanisms import rng
>>> m = LaplaceMechanism(sensitivity=1, epsilon=Fraction(1, 2))
>>> m.scale, m.cost
(Fraction(2, 1), PureDP(epsilon=Fraction(1, 2)))
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(1):
...         noisy = m.release(2)
>>> isinstance(noisy, int)
True
>>> m.accuracy(0.05)    # P(|noise| > 6) <= 5%
6.0
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError
from ..core.measures import PureDP
from ..core.numbers import exact
from ..core.relations import AbsoluteDistance, L1Distance
from . import samplers
from ._base import (
    OnGrid,
    add_units,
    array_to_grid_units,
    as_alpha,
    distance,
    dlap_halfwidth,
    from_grid_units,
    grid_sensitivity,
    grid_value,
    to_grid_units,
)

__all__ = ["LaplaceMechanism", "GeometricMechanism", "VectorLaplaceMechanism"]


class _LaplaceCalibration(OnGrid):
    """Laplace noise calibrated to a sensitivity in grid units: scale ``grid_sensitivity/ε``.

    Subclasses define ``epsilon`` and ``grid_sensitivity`` (scalar: ⌈Δ/g⌉; vector: the L1
    sensitivity in grid units, with the rounding of off-grid coordinates counted).
    """

    epsilon: Fraction

    @property
    def grid_sensitivity(self) -> int:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    @functools.cached_property
    def noise_scale(self) -> Fraction:
        """The scale b of the discrete Laplace noise, in grid units: Δ_grid/ε (computed
        once: the mechanism is frozen)."""
        return self.grid_sensitivity / self.epsilon

    @property
    def scale(self) -> Fraction:
        """The noise scale in output units: Δ_grid·g/ε (= Δ/ε when Δ is on the grid)."""
        return self.noise_scale * self.step

    @property
    def cost(self) -> PureDP:
        """The privacy loss of one release at the declared sensitivity: PureDP(ε)."""
        return PureDP(self.epsilon)


@dataclass(frozen=True)
class LaplaceMechanism(_LaplaceCalibration):
    """ε-DP release of a value of sensitivity Δ with discrete Laplace noise.

    Properties: pure ε-DP (``cost == PureDP(epsilon)``); the privacy map is linear,
    ``privacy_map(d) = ε·⌈d/g⌉/⌈Δ/g⌉`` for any input distance ``d`` (beyond Δ it is group
    privacy); unbiased noise of
    variance 2a/(1-a)² (a = e^(-1/b)), close to the continuous Laplace's 2b².

    ``grid=None`` releases integers (inputs are rounded half-up to an integer first);
    ``grid=g`` releases multiples of ``g`` (a power of two such as 2**-10 keeps float64
    outputs exact). ``scale`` is the noise scale in output units: ``⌈Δ/g⌉·g/ε``.

    An array passed to :meth:`release` is released element-wise: every element gets its own
    noise and is one release of cost ``cost``; a neighbour that can change k elements costs
    ``cost.scale(k)`` (or use :class:`VectorLaplaceMechanism` with the L1 sensitivity).

    >>> m = LaplaceMechanism(sensitivity=Fraction(200000), epsilon=1, grid=Fraction(1, 2**10))
    >>> m.scale
    Fraction(200000, 1)
    >>> m.privacy_map(100000)
    PureDP(epsilon=Fraction(1, 2))
    """

    sensitivity: Fraction
    epsilon: Fraction
    grid: Fraction | None = None

    name = "laplace"
    input_metric = AbsoluteDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "grid", grid_value(self.grid))

    # -- calibration ----------------------------------------------------------------------

    @property
    def grid_sensitivity(self) -> int:
        """The sensitivity in grid units, ⌈Δ/g⌉ (the rounding to the grid is accounted for)."""
        return grid_sensitivity(self.sensitivity, self.step)

    def privacy_map(self, d: object) -> PureDP:
        """The loss for inputs at distance ``d``: ε·⌈d/g⌉/⌈Δ/g⌉ (the one privacy map; the
        :meth:`measurement` view reuses it, so it chains after a transformation).

        >>> LaplaceMechanism(sensitivity=2, epsilon=1).privacy_map(1)
        PureDP(epsilon=Fraction(1, 2))
        >>> from statcurator.core.measurement import make_count
        >>> from statcurator.core.relations import AddRemove
        >>> (make_count(AddRemove()) >> LaplaceMechanism(1, 1).measurement()).map(3)
        PureDP(epsilon=Fraction(3, 1))
        """
        dist = distance(d)
        units = grid_sensitivity(dist, self.step) if dist else 0
        return PureDP(self.epsilon * units / self.grid_sensitivity)

    # -- release --------------------------------------------------------------------------
    def release(self, x: Any) -> Any:
        """The noisy value: an int (no grid) or a Fraction on the grid; arrays element-wise.

        Arrays come back as int64 (no grid) or float64 holding grid multiples (exact for a
        power-of-two grid). NaN and ±∞ are refused: clamp the data first.
        """
        if isinstance(x, np.ndarray | list | tuple):
            units = array_to_grid_units(np.asarray(x), self.step)
            noisy = add_units(units, self.sample_noise_units(units.size).reshape(units.shape))
            return noisy if self.grid is None else from_grid_units(noisy, self.step)
        units = to_grid_units(x, self.step)  # exact Python int: no overflow for scalars
        noisy = units + self.sample_noise_units()
        return noisy if self.grid is None else noisy * self.step

    def sample_noise_units(self, size: int | None = None) -> Any:
        """Draws of the noise alone, in grid units (int, or an int64 array)."""
        return samplers.discrete_laplace(self.noise_scale, size)

    def noise_pmf(self, k: np.ndarray) -> np.ndarray:
        """P(noise = k) for integer grid units k (floats, for plots and tests)."""
        a = math.exp(-1 / float(self.noise_scale))
        return (1 - a) / (1 + a) * np.power(a, np.abs(np.asarray(k, dtype=np.float64)))

    @property
    def noise_std(self) -> float:
        """The standard deviation of the noise in output units: sqrt(2a)/(1-a)·g."""
        a = math.exp(-1 / float(self.noise_scale))
        return math.sqrt(2 * a) / (1 - a) * float(self.step)

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Half-width h (output units) with P(|noise| > h) <= alpha, for the exact discrete law.

        >>> LaplaceMechanism(sensitivity=1, epsilon=Fraction(1, 10)).accuracy(0.05)
        30.0
        """
        h = dlap_halfwidth(self.noise_scale, as_alpha(alpha))
        return float(h * self.step)


@dataclass(frozen=True)
class GeometricMechanism(LaplaceMechanism):
    """The geometric mechanism for integer queries (Ghosh, Roughgarden & Sundararajan 2009).

    Noise P(k) ∝ α^|k| with α = e^(-ε/Δ) — the discrete Laplace of scale Δ/ε. Inputs must be
    integers (a non-integer is refused rather than rounded); ``sensitivity`` must be an
    integer. Pure ε-DP.

    >>> m = GeometricMechanism(sensitivity=1, epsilon=Fraction(1, 10))
    >>> round(m.alpha, 4)
    0.9048
    >>> m.release(0.5)
    Traceback (most recent call last):
    ...
    statcurator.core.errors.DataError: the geometric mechanism releases integer queries, got 0.5; round the query to an integer first, or use LaplaceMechanism with a grid
    """

    name = "geometric"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.grid is not None:
            raise InvalidParameterError("the geometric mechanism has integer outputs",
                                        remedy="drop grid=..., or use LaplaceMechanism")
        if self.sensitivity.denominator != 1:
            raise InvalidParameterError(
                f"the geometric mechanism needs an integer sensitivity, got {self.sensitivity}",
                remedy="use LaplaceMechanism with a grid for fractional sensitivities")

    @property
    def alpha(self) -> float:
        """The geometric ratio α = e^(-ε/Δ)."""
        return math.exp(-float(self.epsilon / self.sensitivity))

    def release(self, x: Any) -> Any:
        """The noisy integer (integer inputs only)."""
        arr = np.asarray(x)
        if arr.dtype.kind == "f" and not (np.isfinite(arr).all() and (arr == np.round(arr)).all()):
            raise DataError(f"the geometric mechanism releases integer queries, got {x}",
                            remedy="round the query to an integer first, or use "
                                   "LaplaceMechanism with a grid")
        if arr.dtype.kind == "O" and any(Fraction(v).denominator != 1 for v in arr.ravel()):
            raise DataError(f"the geometric mechanism releases integer queries, got {x}",
                            remedy="round the query to an integer first, or use "
                                   "LaplaceMechanism with a grid")
        return super().release(x)


@dataclass(frozen=True)
class VectorLaplaceMechanism(_LaplaceCalibration):
    """ε-DP release of a vector of L1 sensitivity Δ₁ (a histogram, a vector of counts).

    Each coordinate gets independent discrete Laplace noise of scale Δ₁/ε; the vector as a
    whole is ε-DP (Dwork, McSherry, Nissim & Smith 2006). A histogram over public bins has
    Δ₁ = 1 under add/remove neighbours and Δ₁ = 2 under change-one neighbours.

    Inputs must be integers (no grid) or multiples of the grid; for real-valued vectors give
    ``max_changed`` (how many coordinates one neighbour can change) so the rounding to the
    grid is accounted for: Δ₁ in grid units becomes ⌊Δ₁/g⌋ + max_changed.

    >>> h = VectorLaplaceMechanism(sensitivity=2, epsilon=1)    # bounded histogram
    >>> h.scale
    Fraction(2, 1)
    >>> import warnings
    >>> from statcurator.mechanisms import rng
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         h.release([10, 0, 5]).shape
    (3,)
    """

    sensitivity: Fraction
    epsilon: Fraction
    grid: Fraction | None = None
    max_changed: int | None = None

    name = "vector-laplace"
    input_metric = L1Distance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "grid", grid_value(self.grid))
        if self.max_changed is not None and (isinstance(self.max_changed, bool) or not isinstance(
                self.max_changed, int) or self.max_changed < 1):
            raise InvalidParameterError(f"max_changed must be a positive integer, got "
                                        f"{self.max_changed!r}", remedy="pass max_changed=1")


    @property
    def grid_sensitivity(self) -> int:
        """L1 sensitivity in grid units (⌊Δ₁/g⌋ + max_changed when inputs are rounded)."""
        ratio = self.sensitivity / self.step
        if self.max_changed is None:
            return math.ceil(ratio)
        return int(ratio) + self.max_changed

    def _units(self, d: Fraction) -> int:
        # Off-grid inputs are rounded coordinate by coordinate: each of the (at most
        # max_changed) changed coordinates can gain one grid unit, so an L1 distance d becomes
        # at most floor(d/g) + max_changed grid units; on-grid inputs move ceil(d/g) units.
        if d == 0:
            return 0
        if self.max_changed is None:
            return math.ceil(d / self.step)
        return math.floor(d / self.step) + self.max_changed

    def privacy_map(self, d: object) -> PureDP:
        """Loss for an L1 input distance ``d`` (rounding counted when ``max_changed``).

        >>> VectorLaplaceMechanism(2, 1).privacy_map(1)
        PureDP(epsilon=Fraction(1, 2))
        >>> m = VectorLaplaceMechanism(2, 1, grid=Fraction(1, 2), max_changed=3)
        >>> m.privacy_map(2) == m.cost
        True
        >>> VectorLaplaceMechanism(2, 1).measurement().map(4)
        PureDP(epsilon=Fraction(2, 1))
        """
        return PureDP(self.epsilon * self._units(distance(d)) / self.grid_sensitivity)

    def release(self, x: Any) -> np.ndarray:
        """The noisy vector (int64, or float64 grid multiples)."""
        arr = np.asarray(x)
        units = array_to_grid_units(arr, self.step)
        if self.max_changed is None:
            back = from_grid_units(units, self.step) if self.grid is not None else units
            if arr.dtype.kind != "O" and not np.array_equal(back, arr.astype(back.dtype)):
                raise DataError("the vector has values off the grid",
                                remedy="pass max_changed=k (coordinates one neighbour can "
                                       "change) so the rounding is accounted for")
        noisy = add_units(units, samplers.discrete_laplace(self.noise_scale, units.size)
                          .reshape(units.shape))
        return noisy if self.grid is None else from_grid_units(noisy, self.step)

    def noise_pmf(self, k: np.ndarray) -> np.ndarray:
        """P(noise_i = k) of one coordinate, for integer grid units k."""
        a = math.exp(-1 / float(self.noise_scale))
        return (1 - a) / (1 + a) * np.power(a, np.abs(np.asarray(k, dtype=np.float64)))

    @property
    def noise_std(self) -> float:
        """Standard deviation of one coordinate's noise in output units."""
        a = math.exp(-1 / float(self.noise_scale))
        return math.sqrt(2 * a) / (1 - a) * float(self.step)

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Per-coordinate half-width with P(|noise_i| > h) <= alpha."""
        return float(dlap_halfwidth(self.noise_scale, as_alpha(alpha)) * self.step)
