"""The median and trimmed means with smooth sensitivity (Nissim, Raskhodnikova & Smith 2007).

On data x clamped to the declared [lo, hi] and sorted (x_(i) = lo for i <= 0, hi for
i > n), the β-smooth bound is S(x) = max_k e^(-βk)·U(k) where U(k) bounds the local
sensitivity of every dataset within k neighbour steps:

* **median** (the lower median x_(m), m = ⌈n/2⌉): U(k) = max_{0<=t<=k+1} (x_(m+t) -
  x_(m+t-k-1)) — NRS's formula. It is valid for both neighbour relations: one change moves
  every order statistic one way by at most one rank, and adding or removing a row moves
  them (and m by at most one) one way too, so each width-(k+1) window at x sits inside a
  width-(k+2) window at a neighbour — the condition that makes S β-smooth.
* **trimmed mean** (the mean of x_(m+1..n-m), c = n - 2m values): with n public (change
  one row), U(k) = (x_(n-m+1+k) - x_(m-k))/c; under add/remove, with a fixed public trim
  count m, U(k) = (x_(n-m+1+k) - x_(m-k))/(c - k) (one added value w enters the kept set
  as clamp(w, x_(m), x_(n-m+1)), so T moves by at most that range over c).

The noise is the heavy-tailed law of :mod:`statcurator.mechanisms.smooth` (pure ε) or the
discrete Laplace ((ε, δ)), on a fine public grid. The scale depends on the data, so no
interval is released; the accuracy is stated in terms of S: with probability 1 - a the
error is at most ≈ 5.2·S/ε·(0.67/a)^(1/3) (pure) or 1.4·S/ε·ln(1/a) ((ε, δ)).

>>> import numpy as np, warnings
>>> from statcurator.mechanisms import rng
>>> from scipy.stats import norm
>>> incomes = 40000 + 10000 * norm.ppf((np.arange(5001) + 0.5) / 5001)   # median 40000
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(4):
...         est = median(incomes, epsilon=1, bounds=(0, 10**6))
>>> abs(est.value - 40000) < 1000     # vs ±10^6 with the global sensitivity
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PrivacyLoss, PureDP
from ..core.numbers import exact, floor_fraction
from ..core.relations import ChangeOne, Relation
from ..core.schema import TableMeta
from ..mechanisms.smooth import (
    HEAVY_TAILED_LIMIT,
    SmoothSensitivityMechanism,
    smooth_upper_bound,
)
from ._common import Statistic, clamp, column_values, float_down, float_up, pure_or_approx
from ._protocol import Estimate

__all__ = ["Median", "TrimmedMean", "median", "trimmed_mean", "median_local_bounds",
           "trimmed_mean_local_bounds"]


def _padded(x: np.ndarray, lo: float, hi: float) -> Callable[[np.ndarray], np.ndarray]:
    n = x.shape[0]
    padded = np.concatenate([[lo], x, [hi]])

    def at(i: np.ndarray) -> np.ndarray:  # 1-based order statistics with padding
        return padded[np.clip(i, 0, n + 1)]

    return at


def median_local_bounds(x: np.ndarray, lo: float, hi: float
                        ) -> tuple[int, Callable[[np.ndarray], np.ndarray], int]:
    """(m, U, kmax) for the lower median of the sorted, clamped ``x`` (see the module).

    >>> m, U, kmax = median_local_bounds(np.array([1.0, 2.0, 4.0, 8.0, 9.0]), 0.0, 10.0)
    >>> m, U(np.array([0, 1, 5])).tolist(), kmax
    (3, [4.0, 6.0, 10.0], 5)
    """
    n = x.shape[0]
    m = (n + 1) // 2
    at = _padded(x, lo, hi)

    def local(ks: np.ndarray) -> np.ndarray:
        out = np.empty(ks.shape[0])
        for lo_i in range(0, ks.shape[0], 256):  # blocks of k: a (k, t) table each
            kk = ks[lo_i:lo_i + 256]
            t = np.arange(0, int(kk.max()) + 2)
            width = at(m + t[None, :]) - at(m + t[None, :] - kk[:, None] - 1)
            width[t[None, :] > kk[:, None] + 1] = -np.inf
            out[lo_i:lo_i + 256] = width.max(axis=1)
        return out

    return m, local, n


def trimmed_mean_local_bounds(x: np.ndarray, lo: float, hi: float, trim: int,
                              relation: Relation
                              ) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    """(U, kmax) for the mean of x_(trim+1..n-trim) (see the module).

    >>> U, kmax = trimmed_mean_local_bounds(np.arange(10.0), 0.0, 9.0, 2, ChangeOne())
    >>> [round(u, 4) for u in U(np.array([0, 1, 2])).tolist()], kmax
    ([1.1667, 1.5, 1.5], 7)
    """
    n = x.shape[0]
    c = n - 2 * trim
    at = _padded(x, lo, hi)
    cap = hi - lo
    fixed = isinstance(relation, ChangeOne)

    def local(ks: np.ndarray) -> np.ndarray:
        width = at(n - trim + 1 + ks) - at(trim - ks)
        denom = np.full(ks.shape[0], float(c)) if fixed else (c - ks).astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            u = np.where(denom > 0, width / np.where(denom > 0, denom, 1.0), cap)
        return np.minimum(u, cap)

    return local, max(trim, c, 0) + 1


class _Smooth(Statistic):
    """Shared by the smooth-sensitivity statistics: noise choice and release."""

    column: str
    grid: Any

    def _columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _mechanism(self, loss: PrivacyLoss, grid: Fraction) -> SmoothSensitivityMechanism:
        eps, delta = pure_or_approx(loss, self.statistic)
        return SmoothSensitivityMechanism(eps, delta, grid, "cauchy" if delta == 0
                                          else "laplace")

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        noise = "heavy-tailed (Cauchy-like) noise" if isinstance(loss, PureDP) \
            else "Laplace noise"
        return f"smooth sensitivity (NRS 2007), {noise}"

    def _release(self, meta: TableMeta, loss: PrivacyLoss,
                 core: Callable[[np.ndarray, float, float], tuple[float, Fraction]]
                 ) -> Callable[..., Any]:
        lo, hi = self._bounds(meta, self.column)
        grid = self._grid(lo, hi)
        mech = self._mechanism(loss, grid)
        lo_f, hi_f = float_down(lo), float_up(hi)
        # The noise scale S(x)/α depends on the data, but S never exceeds the bounds' width
        # (smooth_upper_bound's cap, rounded up by less than 2^-30): the largest scale the
        # sampler must draw is public. The default grid is coarsened (a public choice, from
        # ε and the bounds) until it fits; what still does not is refused here, before any
        # charge — never after it, by the sampler, on one neighbour only.
        cap = (Fraction(hi_f) - Fraction(lo_f)) * (1 + Fraction(1, 2**20))

        def too_large(m: SmoothSensitivityMechanism) -> bool:
            return m.noise == "cauchy" and m.noise_scale(cap) > HEAVY_TAILED_LIMIT - 1

        while self.grid is None and too_large(mech) and grid < cap:
            grid *= 2
            mech = self._mechanism(loss, grid)
        if too_large(mech):
            raise InvalidParameterError(
                f"the noise could need a scale of {float(mech.noise_scale(cap)):.3g} grid "
                "units, more than "
                f"the sampler draws ({float(HEAVY_TAILED_LIMIT):.3g})",
                remedy="use a larger epsilon, or a coarser grid (grid=...)")

        def run(table: Any, size: int | None = None) -> Any:
            x = np.sort(clamp(column_values(table, self.column), lo, hi))
            value, smooth = core(x, lo_f, hi_f)
            if size is not None:
                return mech.release(Fraction(value), smooth, size)
            out = mech.release(Fraction(value), smooth)
            return Estimate(self.statistic, float(out), None, None, loss,
                            self._mechanism_name(loss),
                            details={"noise": mech.noise, "beta": float(mech.beta),
                                     "grid": float(grid)})

        return run


@dataclass(frozen=True)
class Median(_Smooth):
    """The median of a numeric column with smooth-sensitivity noise (NRS 2007).

    ``epsilon`` (and ``delta``: Laplace-type noise instead of the heavy-tailed one) may be
    given here or to :meth:`Curator.estimate`; ``bounds`` narrows or replaces the declared
    bounds; ``grid`` is the public output grid (default ≈ range/2^24).

    >>> import statcurator as sc
    >>> cur = sc.Curator()
    >>> _ = cur.register("adult", sc.datasets.adult())
    >>> est = cur.estimate("adult", Median("age"), epsilon=1, analyst="ann")
    >>> 36 <= est.value <= 38, est.cost
    (True, PureDP(epsilon=Fraction(1, 1)))
    """

    column: str
    epsilon: Any = None
    delta: Any = None
    bounds: Any = None
    grid: Any = None

    statistic = "median"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        beta = self._mechanism(loss, Fraction(1)).beta

        def core(x: np.ndarray, lo: float, hi: float) -> tuple[float, Fraction]:
            m, local, kmax = median_local_bounds(x, lo, hi)
            value = float(x[m - 1]) if m >= 1 else lo
            return value, smooth_upper_bound(local, beta, hi - lo, kmax)

        return self._release(meta, loss, core)


@dataclass(frozen=True)
class TrimmedMean(_Smooth):
    """The mean of the middle values (``trim`` cut from each end) with smooth sensitivity.

    ``trim`` is a proportion in [0, 1/2) or a number of values per side. A proportion needs
    a public n: neighbours that change one row (n is then fixed), or a declared ``rows``
    (the count is ⌊trim·rows⌋); under add/remove without ``rows``, pass a count.

    >>> import numpy as np, warnings
    >>> from statcurator.mechanisms import rng
    >>> x = np.concatenate([np.full(500, 10.0), np.full(500, 20.0), [1e6]])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(2):
    ...         est = TrimmedMean("x", trim=100, epsilon=1, bounds=(0, 1e6)).run({"x": x})
    >>> 14.9 < est.value < 15.1      # the mean of the middle 801 values is 15.006
    True
    """

    column: str
    trim: Any = Fraction(1, 10)
    epsilon: Any = None
    delta: Any = None
    bounds: Any = None
    grid: Any = None

    statistic = "trimmed mean"

    def _trim_count(self, meta: TableMeta, relation: Relation) -> Callable[[int], int]:
        t = self.trim
        if isinstance(t, int) and not isinstance(t, bool):
            if t < 0:
                raise InvalidParameterError("trim must be >= 0", remedy="pass trim=0.1")
            return lambda n: t
        p = exact(t, "trim", allow_zero=True)
        if p >= Fraction(1, 2):
            raise InvalidParameterError(f"trim={t} leaves nothing to average",
                                        remedy="pass a proportion below 1/2, e.g. trim=0.1")
        if isinstance(relation, ChangeOne):
            return lambda n: floor_fraction(p * n)
        if meta.rows is not None:
            count = floor_fraction(p * meta.rows)
            return lambda n: count
        raise InvalidParameterError(
            "a trimming proportion needs a public table size under add/remove neighbours",
            remedy=f"pass trim as a count of values per side (e.g. trim={max(1, int(p * 1000))}),"
                   " or declare rows = N in the metadata")

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        beta = self._mechanism(loss, Fraction(1)).beta
        count = self._trim_count(meta, relation)

        def core(x: np.ndarray, lo: float, hi: float) -> tuple[float, Fraction]:
            n = x.shape[0]
            m = count(n)
            kept = x[m:n - m]
            # fsum is correctly rounded: the value is within an ulp of the exact mean, far
            # inside the 64 grid units the mechanism adds to S/g for the rounding
            value = math.fsum(kept.tolist()) / kept.size if kept.size else (lo + hi) / 2
            local, kmax = trimmed_mean_local_bounds(x, lo, hi, m, relation)
            return value, smooth_upper_bound(local, beta, hi - lo, kmax)

        return self._release(meta, loss, core)


def median(data: Any, column: str | None = None, *, epsilon: Any, delta: Any = None,
           bounds: Any = None, grid: Any = None, meta: Any = None) -> Estimate:
    """The smooth-sensitivity median of ``data`` (local use, no ledger).

    ``data`` is a table (``column`` names the column) or a 1-d array; ``bounds`` (or the
    metadata) declares the public range.

    >>> import numpy as np
    >>> est = median(np.full(1000, 5.0), epsilon=1, bounds=(0, 10))
    >>> abs(est.value - 5) < 0.05
    True
    """
    col = column if column is not None else "x"
    table = {"x": np.asarray(data, dtype=float)} if column is None else data
    return Median(col, epsilon, delta, bounds, grid).run(table, meta)


def trimmed_mean(data: Any, column: str | None = None, *, trim: Any = Fraction(1, 10),
                 epsilon: Any, delta: Any = None, bounds: Any = None, grid: Any = None,
                 meta: Any = None) -> Estimate:
    """The smooth-sensitivity trimmed mean (local use; see :class:`TrimmedMean`).

    >>> import numpy as np
    >>> est = trimmed_mean(np.arange(1000.0), trim=100, epsilon=1, bounds=(0, 1000))
    >>> abs(est.value - 499.5) < 50      # noise ≈ 5.2·S/ε, S ≈ 800/800
    True
    """
    col = column if column is not None else "x"
    table = {"x": np.asarray(data, dtype=float)} if column is None else data
    return TrimmedMean(col, trim, epsilon, delta, bounds, grid).run(table, meta)

