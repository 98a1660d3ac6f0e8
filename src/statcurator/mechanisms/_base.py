"""Shared pieces of the mechanisms: the public output grid, input validation, tail bounds.

Real-valued answers are released on a *public grid* of step ``g``: the exact input is
rounded half-up to the nearest multiple of ``g`` (an integer number of grid units), integer
noise is added, and the result is multiplied back by ``g``. Rounding half-up is monotone, so
two inputs at distance ``d`` land at most ``⌈d/g⌉`` grid units apart: the sensitivity on the
grid is ``⌈Δ/g⌉``, and that — not ``Δ/g`` — calibrates the noise. ``grid=None`` means
integer outputs (a grid of 1).

>>> from fractions import Fraction
>>> to_grid_units(Fraction(7, 2), Fraction(1))   # 3.5 rounds half-up to 4
4
>>> grid_sensitivity(Fraction(1, 3), Fraction(1, 4))   # ⌈(1/3)/(1/4)⌉
2
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError
from ..core.measurement import Measurement, Space
from ..core.measures import PrivacyLoss
from ..core.numbers import (
    ceil_fraction,
    exact,
    exact_probability,
    exact_value,
    exp_bounds,
    floor_fraction,
)
from ..core.relations import AbsoluteDistance

__all__ = ["Mechanism", "add_units", "to_grid_units", "grid_sensitivity", "dyadic_exponent",
           "array_to_grid_units", "from_grid_units", "dlap_tail", "dlap_halfwidth",
           "dgauss_tail", "dgauss_halfwidth", "check_distance", "distance", "as_alpha",
           "smallest_integer"]

#: inputs further than this from 0 (in grid units) are refused: noise must fit in int64
MAX_GRID_UNITS = 2**62


class Mechanism:
    """Base of the mechanisms: each is a frozen dataclass stating its privacy map and accuracy.

    Subclasses define ``privacy_map(d)`` — the loss for inputs at distance ``d`` in
    ``input_metric``, for *every* d >= 0 (beyond the declared sensitivity it is group
    privacy), stated once —, ``cost`` (the map at the declared sensitivity), ``release(x)``
    and ``accuracy(alpha)``; :meth:`measurement` is the core
    :class:`~statcurator.core.measurement.Measurement` view, whose privacy map *is*
    ``privacy_map``; :meth:`describe` summarizes them for people and the CLI.
    """

    #: short name used by the CLI and in release records
    name: str = "mechanism"
    #: the distance between inputs that ``privacy_map`` reads
    input_metric: Space = AbsoluteDistance()

    @property
    def cost(self) -> PrivacyLoss:  # pragma: no cover - every subclass overrides it
        """The privacy loss of one release at the declared sensitivity."""
        raise NotImplementedError

    def privacy_map(self, d: object) -> PrivacyLoss:  # pragma: no cover - abstract
        """The privacy loss for inputs at distance ``d`` (any d >= 0)."""
        raise NotImplementedError

    def measurement(self, input_space: Space | None = None) -> Measurement:
        """This mechanism as a core Measurement (input: ``input_metric``, or ``input_space``
        for mechanisms that read a dataset relation); its privacy map is ``privacy_map``.

        >>> from statcurator.mechanisms import LaplaceMechanism
        >>> m = LaplaceMechanism(sensitivity=1, epsilon=1).measurement()
        >>> m.map(1), m.map(3)
        (PureDP(epsilon=Fraction(1, 1)), PureDP(epsilon=Fraction(3, 1)))
        """
        return Measurement(input_space if input_space is not None else self.input_metric,
                           type(self.cost), self.release, self.privacy_map, name=self.name)

    def release(self, x: Any) -> Any:  # pragma: no cover - abstract
        """One noisy release of ``x``."""
        raise NotImplementedError

    def describe(self, alpha: object = Fraction(1, 20)) -> dict[str, Any]:
        """A summary: name, parameters, cost and (where defined) the (1-alpha) half-width."""
        out: dict[str, Any] = {"mechanism": self.name, "cost": str(self.cost)}
        # the parameters: a dataclass's fields (not what its cached properties have stored
        # in its __dict__, which depends on what was asked before)
        keys = ([f.name for f in dataclasses.fields(self)] if dataclasses.is_dataclass(self)
                else list(vars(self)))
        for key in keys:
            if not key.startswith("_"):
                out[key] = getattr(self, key)
        accuracy = getattr(self, "accuracy", None)
        if accuracy is not None:
            a = as_alpha(alpha)
            out["alpha"] = a
            out["halfwidth"] = accuracy(a)
        return out


class OnGrid(Mechanism):
    """A mechanism whose values live on a public grid: ``grid`` (a Fraction, e.g. 2^-10),
    or ``None`` for the integers. Subclasses are frozen dataclasses with a ``grid`` field.
    """

    grid: Fraction | None

    @property
    def step(self) -> Fraction:
        """The grid step of the values (1 for integer values)."""
        return self.grid if self.grid is not None else Fraction(1)


def as_alpha(alpha: object) -> Fraction:
    """A confidence-interval error rate: an exact probability in (0, 1)."""
    return exact_probability(alpha, "alpha", allow_zero=False)


def distance(d: object) -> Fraction:
    """Validate an input distance for a privacy map: an exact number >= 0."""
    return exact(d, "distance", allow_zero=True)


def check_distance(d: object, declared: Fraction, what: str = "sensitivity") -> Fraction:
    """Validate an input distance for a privacy map: 0 <= d <= the declared sensitivity."""
    dist = exact(d, "distance", allow_zero=True)
    if dist > declared:
        raise InvalidParameterError(
            f"the input distance {dist} exceeds the declared {what} {declared}",
            remedy=f"build the mechanism with {what}={dist} (or bound the contributions "
                   "so that the query's sensitivity is at most the declared one)")
    return dist


def grid_value(grid: object) -> Fraction | None:
    return None if grid is None else exact(grid, "grid")


def grid_sensitivity(sensitivity: Fraction, grid: Fraction) -> int:
    """Sensitivity in grid units after rounding: ⌈Δ/g⌉ (rounding half-up is monotone)."""
    return ceil_fraction(sensitivity / grid)


def dyadic_exponent(grid: Fraction) -> int | None:
    """``e`` with grid = 2**e when the grid is a power of two, else None.

    >>> dyadic_exponent(Fraction(1, 1024)), dyadic_exponent(Fraction(4)), dyadic_exponent(Fraction(1, 10))
    (-10, 2, None)
    """
    n, d = grid.numerator, grid.denominator
    if n & (n - 1) or d & (d - 1):
        return None
    return (n.bit_length() - 1) - (d.bit_length() - 1)


def to_grid_units(x: object, grid: Fraction) -> int:
    """⌊x/g + 1/2⌋ for one exact value (NaN and ±∞ refused)."""
    v = exact_value(x, "the value to release")
    return floor_fraction(v / grid + Fraction(1, 2))


def array_to_grid_units(x: np.ndarray, grid: Fraction) -> np.ndarray:
    """Round an array to integer grid units exactly (vectorized for ints and dyadic grids)."""
    arr = np.asarray(x)
    e = dyadic_exponent(grid)
    if arr.dtype.kind == "b":
        arr = arr.astype(np.int64)
    if arr.dtype.kind in "iu":
        # checked before astype: a uint64 beyond int64 would wrap (neighbours 2^64 apart)
        reach = _magnitude(arr)
        if grid == 1:
            if reach >= MAX_GRID_UNITS:
                raise _too_large(grid)
            out = arr.astype(np.int64)
        elif e is not None and e < 0:
            if reach << -e >= MAX_GRID_UNITS:  # in grid units, exactly (Python integers)
                raise _too_large(grid)
            out = arr.astype(np.int64) << np.int64(-e)
        else:
            return _generic_to_grid(arr, grid)
    elif arr.dtype.kind == "f":
        if not np.isfinite(arr).all():
            raise DataError("the values to release contain NaN or ±∞",
                            remedy="clamp the data to its declared bounds (and drop or impute "
                                   "missing values) before aggregating")
        if e is None:
            return _generic_to_grid(arr, grid)
        y = np.ldexp(arr.astype(np.float64), -e)  # exact: a power-of-two scaling
        if y.size and float(np.abs(y).max()) >= MAX_GRID_UNITS:
            raise _too_large(grid)
        k = np.floor(y)
        frac = y - k  # exact (Sterbenz): |y| < 2^62 and k is y's floor
        out = k.astype(np.int64) + (frac >= 0.5)
    else:
        return _generic_to_grid(arr, grid)
    return out


def _generic_to_grid(arr: np.ndarray, grid: Fraction) -> np.ndarray:
    units = [to_grid_units(v, grid) for v in arr.ravel().tolist()]
    if any(abs(u) >= MAX_GRID_UNITS for u in units):
        raise _too_large(grid)
    return np.array(units, dtype=np.int64).reshape(arr.shape)


def _too_large(grid: Fraction) -> DataError:
    return DataError(f"a value is too large to release on a grid of step {grid}",
                     remedy="clamp the data to its declared bounds, or use a coarser grid")


def _magnitude(arr: np.ndarray) -> int:
    """The largest |value| of an integer array, as a Python int (0 when empty): np.abs
    would wrap at int64's minimum.

    >>> _magnitude(np.array([-(2**63), 5])), _magnitude(np.array([], dtype=np.uint64))
    (9223372036854775808, 0)
    """
    return max(-int(arr.min()), int(arr.max())) if arr.size else 0


def add_units(units: Any, noise: Any) -> np.ndarray:
    """``units + noise`` element-wise, exactly: int64 when no sum can leave its range, else
    Python integers (an object array) — int64 arithmetic would wrap silently.

    >>> add_units(np.array([2**62]), np.array([2**62])).tolist()
    [9223372036854775808]
    >>> add_units(np.array([1, -1]), np.array([5, 5])).dtype
    dtype('int64')
    >>> add_units(np.array([1, 2], dtype=np.uint64), np.array([-5, 5])).tolist()
    [-4, 7]
    >>> add_units(np.array([1, 2]), np.array([], dtype=np.int64).reshape(0, 2)).shape
    (0, 2)
    """
    u, z = np.asarray(units), np.asarray(noise)
    if u.size and z.size and u.dtype.kind in "iu" and z.dtype.kind in "iu":
        if _magnitude(u) + _magnitude(z) >= 2**63:
            return u.astype(object) + z.astype(object)
        return u.astype(np.int64) + z.astype(np.int64)  # (uint64 + int64 would be float64)
    return np.asarray(u + z)


def from_grid_units(units: np.ndarray, grid: Fraction) -> np.ndarray:
    """Grid units back to values: float64 (exact for power-of-two grids)."""
    e = dyadic_exponent(grid)
    if e is not None:
        return np.ldexp(units.astype(np.float64), e)
    return units.astype(np.float64) * float(grid)


# -- tails of the discrete noise laws --------------------------------------------------------


def dlap_tail(scale: Fraction, h: int, bits: int = 64) -> Fraction:
    """A rational upper bound of P(|X| > h) for X ~ discrete Laplace(scale), h >= 0.

    P(|X| >= k) = 2a^k/(1+a) with a = e^(-1/scale), for k >= 1.

    >>> float(dlap_tail(Fraction(1), 0))   # 2/(1+e) = 0.5379
    0.537882842739...
    """
    a_hi = exp_bounds(-Fraction(h + 1) / scale, bits)[1]
    a_lo = exp_bounds(-1 / scale, bits)[0]
    return 2 * a_hi / (1 + a_lo)


def dlap_halfwidth(scale: Fraction, alpha: Fraction) -> int:
    """The smallest integer h >= 0 with P(|X| > h) <= alpha (rigorous upper-bounded tail).

    >>> dlap_halfwidth(Fraction(10), Fraction(1, 20))   # continuous Laplace: 10·ln 20 = 29.96
    30
    """
    try:  # a float guess only; the answer is decided by the exact tail
        a = math.exp(-1 / float(scale))
        guess = float(scale) * math.log(2 / (float(alpha) * (1 + a))) - 1
    except (ArithmeticError, ValueError):
        guess = 0.0
    h = max(0, math.ceil(guess) if math.isfinite(guess) else 0)
    return smallest_integer(lambda k: dlap_tail(scale, k) <= alpha, h, 0)


def smallest_integer(ok: Any, guess: int, low: int) -> int:
    """The smallest integer k >= ``low`` with ``ok(k)``, for a predicate that is False then
    True as k grows, starting from a (float) ``guess``.

    The guess comes from float arithmetic and can be off by far more than one unit when the
    answer is large (its relative error times the answer), so the answer is bracketed by
    galloping away from the guess and then found by bisection: O(log error) exact tests, not
    O(error).

    >>> smallest_integer(lambda k: k * k >= 10**12, 5, 0)
    1000000
    """
    k = max(int(guess), low)
    if ok(k):
        good, step = k, 1
        while good - step >= low and ok(good - step):
            good, step = good - step, 2 * step
        bad = max(good - step, low - 1)  # low - 1 stands for "nothing below low"
    else:
        bad, step = k, 1
        while not ok(bad + step):
            bad, step = bad + step, 2 * step
        good = bad + step
    while good - bad > 1:
        mid = (bad + good) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


def _dgauss_pmf_table(sigma2: float) -> tuple[np.ndarray, float]:
    sigma = math.sqrt(sigma2)
    xs = np.arange(0, math.ceil(40 * sigma + 40), dtype=np.float64)
    w = np.exp(-xs * xs / (2 * sigma2))
    z = w[0] + 2 * w[1:].sum()
    return w, z


def dgauss_tail(sigma2: Fraction, h: int) -> float:
    """P(|X| > h) for X ~ discrete Gaussian(σ²) (an upper bound for large σ).

    For σ <= 10^4 the law is summed term by term; beyond, the tail is bounded by the
    Gaussian integral: Σ_{x>h} e^{-x²/2σ²} <= ∫_h^∞ and Z >= σ√(2π) - 1.

    >>> round(dgauss_tail(Fraction(1), 1), 4)   # P(|X| >= 2) for σ = 1
    0.1171
    """
    s2 = float(sigma2)
    if s2 <= 1e8:
        w, z = _dgauss_pmf_table(s2)
        return float(2 * w[h + 1:].sum() / z) if h + 1 < w.size else 0.0
    sigma = math.sqrt(s2)
    root = sigma * math.sqrt(2 * math.pi)
    return math.erfc(h / (sigma * math.sqrt(2))) * root / (root - 1)


def dgauss_halfwidth(sigma2: Fraction, alpha: Fraction) -> int:
    """The smallest integer h >= 0 with P(|X| > h) <= alpha for the discrete Gaussian.

    >>> dgauss_halfwidth(Fraction(100), Fraction(1, 20))   # continuous: 1.96·10
    20
    """
    target = float(alpha) * (1 - 1e-9)  # float summation error is far below this margin
    s2 = float(sigma2)
    if s2 <= 1e8:
        w, z = _dgauss_pmf_table(s2)
        # tail(h) = 2·Σ_{x>h} w / z, decreasing in h
        suffix = np.concatenate([np.cumsum(w[::-1])[::-1], [0.0]])  # suffix[i] = Σ_{x>=i} w
        tails = 2 * suffix[1:] / z  # tails[h] = P(|X| > h)
        ok = np.flatnonzero(tails <= target)
        return int(ok[0]) if ok.size else int(w.size)
    lo, hi = 0, max(1, int(40 * math.sqrt(s2)))
    while dgauss_tail(sigma2, hi) > target:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if dgauss_tail(sigma2, mid) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo
