"""Propose-test-release (Dwork & Lei 2009): scale, location and a robust regression.

PTR *proposes* a bound b on the local sensitivity, *tests* privately how many rows would
have to change before the data violate it, and *releases* the statistic with noise for b —
or refuses (⊥). Refusal is a normal answer, reported as such and charged: the decision
itself is differentially private, so it leaks nothing beyond the budget.

The distance d(x) is computed from the same rank-window bounds U(k) as the smooth
sensitivity (:mod:`statcurator.estimators.smooth`): d(x) = min{k : U(k) > b}. Because
U(k) at x is at most U(k+1) at any neighbour, d has sensitivity 1, and d >= 1 implies the
local sensitivity is at most b. The test adds exact discrete Laplace noise of scale 1/ε_t
and passes when d + noise > τ, τ the smallest integer with P(noise > τ) <= δ; the release
uses the discrete Laplace mechanism for sensitivity b with ε_r. The whole is
(ε_t + ε_r, δ)-DP (Dwork & Roth 2014, §7.3). [Distances are capped at τ + 256, which keeps
the sensitivity 1.]

* :class:`IQR` — Dwork & Lei's scale estimator: the interquartile range is located in a bin
  of a public geometric grid (ratio ``ratio``); the test asks how many rows keep it in its
  bin (the quartiles after k changes lie within k ranks of today's). The bin is released —
  no noise is needed for a locally constant value. Two offset grids are tried in turn
  (ε/2, δ/2 each), as in the paper.
* :class:`PTRMedian` — the median, with the bound proposed from a DP IQR and a DP count
  (b = 4·(τ + 12)·IQR/n), or given by the analyst (``bound=``).
* :class:`LADRegression` — a robust regression: least absolute deviations fitted on random
  disjoint blocks of rows, each coefficient the PTR median of the block estimates (one row
  changes one block's estimate).

>>> import numpy as np
>>> x = np.random.default_rng(0).normal(50, 10, 20000)
>>> est = iqr(x, epsilon=1, delta=1e-6, bounds=(0, 100))
>>> est.refused or 12 < est.value < 15      # IQR of N(50, 10²) is 13.5
True
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import ApproxDP, PrivacyLoss
from ..core.numbers import exact, exp_bounds
from ..core.relations import Relation
from ..core.schema import TableMeta
from ..mechanisms import LaplaceMechanism, samplers
from ..mechanisms._base import dlap_halfwidth, smallest_integer
from ._common import (
    Statistic,
    clamp,
    column_values,
    default_grid,
    float_down,
    float_up,
    silenced,
)
from ._protocol import Estimate
from .smooth import median_local_bounds

__all__ = ["IQR", "PTRMedian", "LADRegression", "iqr", "ptr_median", "lad_regression",
           "ptr_threshold", "ptr_test", "iqr_distance"]

#: extra distance beyond the threshold at which d is capped (capping keeps sensitivity 1)
_CAP = 256


@functools.lru_cache(maxsize=256)
def ptr_threshold(epsilon: Fraction, delta: Fraction) -> int:
    """τ: the smallest integer with P(N > τ) <= δ for N ~ discrete Laplace(1/ε).

    P(N >= k) = a^k/(1 + a), a = e^-ε (k >= 1), bounded above with exact arithmetic.

    >>> ptr_threshold(Fraction(1), Fraction(1, 10**6))
    13
    """
    a_lo = exp_bounds(-epsilon, 64)[0]

    def ok(k: int) -> bool:
        return exp_bounds(-epsilon * k, 64)[1] / (1 + a_lo) <= delta

    guess = max(1, math.ceil(float(math.log(1 / float(delta)) / float(epsilon))))
    return smallest_integer(ok, guess, 1) - 1


def ptr_test(distance: int, epsilon: Fraction, delta: Fraction) -> bool:
    """The private test: distance + DLap(1/ε) > τ.

    >>> ptr_test(10**6, Fraction(1), Fraction(1, 10**6))
    True
    """
    noise = int(samplers.discrete_laplace(1 / epsilon))
    return distance + noise > ptr_threshold(epsilon, delta)


def _distance(exceeds: Callable[[int], bool], cap: int) -> int:
    """min{k >= 0 : exceeds(k)} capped at ``cap`` (exceeds is monotone)."""
    return min(smallest_integer(lambda k: k >= cap or exceeds(k), 0, 0), cap)


def median_distance(x: np.ndarray, lo: float, hi: float, bound: float, cap: int) -> int:
    """d(x) = min{k : U(k) > bound} for the median's rank windows (module docs)."""
    _, local, _ = median_local_bounds(x, lo, hi)
    # U is a float difference (rounded to nearest, a monotone map); comparing it with a bound
    # lowered by 2^-50 makes "U(0) <= bound" imply the exact U(0) <= bound
    limit = bound * (1 - 2.0**-50)
    return _distance(lambda k: float(local(np.array([k]))[0]) > limit, cap)


# -- the interquartile range -------------------------------------------------------------------


def _quartile_ranks(n: int) -> tuple[int, int]:
    return max(1, -(-n // 4)), max(1, -(-3 * n // 4))


def iqr_distance(x: np.ndarray, lo: float, hi: float, ratio: Fraction, offset: Fraction,
                 cap: int) -> tuple[int, int | None]:
    """(d, bin): the bin j of IQR(x) on the grid offset·ratio^j (None for IQR = 0), and the
    number of rows that surely keep it there (module docs)."""
    n = x.shape[0]
    padded = np.concatenate([[lo], x, [hi]])

    def at(i: int) -> Fraction:
        return Fraction(float(padded[min(max(i, 0), n + 1)]))

    r1, r3 = _quartile_ranks(n) if n else (0, 0)
    value = at(r3) - at(r1)
    if value <= 0:
        j = None
        edges = (Fraction(0), Fraction(0))
    else:
        j = math.floor(math.log(float(value / offset)) / math.log(float(ratio)))
        while offset * ratio**j > value:
            j -= 1
        while offset * ratio ** (j + 1) <= value:
            j += 1
        edges = (offset * ratio**j, offset * ratio ** (j + 1))

    def escapes(k: int) -> bool:
        low = max(Fraction(0), at(r3 - k) - at(r1 + k))
        high = at(r3 + k) - at(r1 - k)
        if j is None:
            return high > 0
        return low < edges[0] or high >= edges[1]

    # A = min{k : the interval escapes}; A >= 1; d = A - 1 (see the module docs)
    return _distance(escapes, cap + 1) - 1, j


@dataclass(frozen=True)
class IQR(Statistic):
    """The interquartile range by propose-test-release (Dwork & Lei 2009), (ε, δ)-DP.

    The released value is the geometric middle of the IQR's bin on the public grid of
    ratio ``ratio`` (default 1.1025 = 1.05²: within ±5% of the IQR); ``interval`` is the
    bin, which holds the data's IQR with certainty when released. ⊥ (``refused``) when
    the IQR is too close to a bin edge in both grids — e.g. on tiny or wild data.

    >>> IQR("age", epsilon=1, delta=1e-6).columns()
    ('age',)
    """

    column: str
    epsilon: Any = None
    delta: Any = None
    bounds: Any = None
    ratio: Any = Fraction(441, 400)

    statistic = "IQR"
    measures = (ApproxDP,)

    def _columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        return "propose-test-release (Dwork & Lei 2009), geometric bins"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        lo, hi = self._bounds(meta, self.column)
        scale_fn = iqr_release(loss, self._root())

        def run(table: Any, size: int | None = None) -> Any:
            x = np.sort(clamp(column_values(table, self.column), lo, hi))
            if size is not None:
                return np.array([_value(scale_fn(x, lo, hi)) for _ in range(size)])
            value, edges = scale_fn(x, lo, hi)
            return Estimate("IQR", value, edges, 0.0 if edges else None, loss,
                            self._mechanism_name(loss), refused=value is None)

        return run

    def _root(self) -> Fraction:
        r = exact(self.ratio, "ratio")
        if r <= 1:
            raise InvalidParameterError("the IQR bin ratio must be > 1", remedy="ratio=1.1")
        num, den = r.numerator, r.denominator
        rn, rd = math.isqrt(num), math.isqrt(den)
        if rn * rn == num and rd * rd == den:
            return Fraction(rn, rd)
        raise InvalidParameterError(f"ratio={r} is not the square of a rational",
                                    remedy="pass ratio=1.1025 (1.05²) or (1 + 1/k)²")


def _value(out: tuple[float | None, Any]) -> float:
    return np.nan if out[0] is None else float(out[0])


def iqr_release(loss: PrivacyLoss, root: Fraction
                ) -> Callable[[np.ndarray, Fraction, Fraction], tuple[float | None, Any]]:
    """The two-grid PTR release of the IQR for a budget (ε, δ) (halved per attempt)."""
    if not isinstance(loss, ApproxDP) or loss.delta == 0:
        raise InvalidParameterError("propose-test-release needs delta > 0",
                                    remedy="pass delta=1e-6 (and epsilon)")
    eps, delta = loss.epsilon / 2, loss.delta / 2
    ratio = root * root
    tau = ptr_threshold(eps, delta)

    def release(x: np.ndarray, lo: Fraction, hi: Fraction) -> tuple[float | None, Any]:
        lo_f, hi_f = float_down(lo), float_up(hi)
        for offset in (Fraction(1), root):
            d, j = iqr_distance(x, lo_f, hi_f, ratio, offset, tau + _CAP)
            if ptr_test(d, eps, delta):
                if j is None:
                    return 0.0, (0.0, 0.0)
                left = offset * ratio**j
                return float(left * root), (float(left), float(left * ratio))
        return None, None

    return release


# -- the median ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PTRMedian(Statistic):
    """The median by propose-test-release, (ε, δ)-DP, with a (1 - alpha) interval.

    ``bound``: the proposed local-sensitivity bound (public). Without it, a third of ε (and
    half of δ) buys a DP IQR and a sixth a DP count, and the proposal is
    b = 4·(τ + 12)·IQR/n̂ (n̂ the count's lower 99.9% bound). The interval is the release ±
    the noise's (1 - alpha) half-width: it holds the data's median whenever the release
    is not ⊥.

    >>> from statcurator import datasets
    >>> PTRMedian("age", bound=1, epsilon=1, delta=1e-6).measurement(datasets.adult().meta).cost
    ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000))
    """

    column: str
    bound: Any = None
    epsilon: Any = None
    delta: Any = None
    bounds: Any = None
    grid: Any = None
    alpha: float = 0.05

    statistic = "median (PTR)"
    measures = (ApproxDP,)

    def _columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        how = "proposed bound" if self.bound is not None else "bound from a DP IQR and count"
        return f"propose-test-release (Dwork & Lei 2009), {how}"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        lo, hi = self._bounds(meta, self.column)
        grid = exact(self.grid, "grid") if self.grid is not None else default_grid(lo, hi)
        release = ptr_median_release(loss, lo, hi, grid, self.bound, Fraction(str(self.alpha)))

        def run(table: Any, size: int | None = None) -> Any:
            x = np.sort(clamp(column_values(table, self.column), lo, hi))
            if size is not None:
                return np.array([_value(release(x)[:2]) for _ in range(size)])
            value, halfwidth, b = release(x)
            iv = None if value is None else (value - halfwidth, value + halfwidth)
            return Estimate("median", value, iv, self.alpha if iv else None, loss,
                            self._mechanism_name(loss), refused=value is None,
                            details={"bound": b})

        return run


def ptr_median_release(loss: PrivacyLoss, lo: Fraction, hi: Fraction, grid: Fraction,
                       bound: Any, alpha: Fraction
                       ) -> Callable[[np.ndarray], tuple[float | None, float, float | None]]:
    """The PTR median for one budget: returns ``release(sorted_x) -> (value or None,
    half-width, proposed bound)``."""
    if not isinstance(loss, ApproxDP) or loss.delta == 0:
        raise InvalidParameterError("propose-test-release needs delta > 0",
                                    remedy="pass delta=1e-6 (and epsilon)")
    eps, delta = loss.epsilon, loss.delta
    lo_f, hi_f = float_down(lo), float_up(hi)
    if bound is not None:
        b_fixed = exact(bound, "bound", allow_zero=True)
        eps_med, delta_med = eps, delta
        scale = None
    else:
        b_fixed = None
        eps_med, delta_med = eps / 2, delta / 2
        scale = iqr_release(ApproxDP(eps / 3, delta / 2), Fraction(21, 20))
        eps_count = eps / 6
    eps_t, eps_r = eps_med / 2, eps_med / 2
    tau = ptr_threshold(eps_t, delta_med)

    def release(x: np.ndarray) -> tuple[float | None, float, float | None]:
        if b_fixed is None:
            s, _ = scale(x, lo, hi)  # type: ignore[misc]
            count = LaplaceMechanism(1, eps_count).release(x.shape[0])
            n_low = int(count) - dlap_halfwidth(1 / eps_count, Fraction(1, 1000))
            if s is None or n_low < 1:
                return None, 0.0, None
            b = Fraction(4 * (tau + 12)) * Fraction(s) / n_low
        else:
            b = b_fixed
        b = max(b, grid)  # a zero bound is replaced by one grid step of noise
        d = median_distance(x, lo_f, hi_f, float(b), tau + _CAP)
        if not ptr_test(d, eps_t, delta_med):
            return None, 0.0, float(b)
        m = (x.shape[0] + 1) // 2
        value = Fraction(float(x[m - 1])) if m >= 1 else lo
        mech = LaplaceMechanism(b, eps_r, grid)
        return float(mech.release(value)), mech.accuracy(alpha), float(b)

    return release


# -- a robust regression ------------------------------------------------------------------------


@dataclass(frozen=True)
class LADRegression(Statistic):
    """Least-absolute-deviations regression of ``target`` on ``features``, (ε, δ)-DP.

    Rows go to ``blocks`` disjoint random blocks (public; each row independently); LAD is
    fitted on each block (iteratively reweighted least squares on the declared bounds);
    each coefficient (intercept last) is the PTR median of the k block estimates clamped to
    ``coef_bounds`` — k estimates with one changed by a neighbour, so change-one neighbours
    among k public values. ε and δ are split evenly over the coefficients.

    >>> LADRegression("y", ("x",), epsilon=1, delta=1e-6).columns()
    ('x', 'y')
    """

    target: str
    features: Sequence[str] = ()
    epsilon: Any = None
    delta: Any = None
    bounds: Any = None
    coef_bounds: Any = (-10, 10)
    blocks: int = 100

    statistic = "LAD regression (PTR)"
    measures = (ApproxDP,)

    def _columns(self) -> tuple[str, ...]:
        return (*tuple(self.features), self.target)

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        return "LAD on random blocks, propose-test-release median per coefficient"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        feats = tuple(self.features)
        if not feats:
            raise InvalidParameterError("LADRegression needs at least one feature",
                                        remedy="pass features=('x',)")
        k = self.blocks
        if isinstance(k, bool) or not isinstance(k, int) or k < 8:
            raise InvalidParameterError("blocks must be an integer >= 8", remedy="blocks=100")
        ranges = [self._bounds(meta, c) for c in (*feats, self.target)]
        clo, chi = (exact(v, "coef_bounds", positive=False) for v in self.coef_bounds)
        p = len(feats) + 1
        per = ApproxDP(loss.epsilon / p, loss.delta / p)  # type: ignore[attr-defined]
        grid = default_grid(clo, chi)
        medians = [ptr_median_release(per, clo, chi, grid, None, Fraction(1, 20))
                   for _ in range(p)]

        def fit(table: Any) -> list[float | None]:
            cols = [clamp(column_values(table, c), a, b)
                    for c, (a, b) in zip((*feats, self.target), ranges, strict=True)]
            X = np.column_stack([*cols[:-1], np.ones(cols[0].shape[0])])
            y = cols[-1]
            block = samplers.uniform_int(k, y.shape[0]) if y.shape[0] else np.zeros(0, int)
            est = np.full((k, p), (float(clo) + float(chi)) / 2)
            for b in range(k):
                rows = block == b
                if rows.sum() >= p:
                    # a block that fails keeps the public midpoint; nothing is shown
                    with silenced(streams=False), contextlib.suppress(
                            np.linalg.LinAlgError, ValueError):
                        est[b] = _lad(X[rows], y[rows])
            est = np.clip(np.nan_to_num(est, nan=(float(clo) + float(chi)) / 2),
                          float(clo), float(chi))
            return [medians[j](np.sort(est[:, j]))[0] for j in range(p)]

        def run(table: Any, size: int | None = None) -> Any:
            if size is not None:
                return np.array([[np.nan if v is None else v for v in fit(table)]
                                 for _ in range(size)])
            coef = fit(table)
            refused = any(v is None for v in coef)
            return Estimate("LAD coefficients", None if refused else tuple(coef), None, None,
                            loss, self._mechanism_name(loss), refused=refused,
                            details={"names": [*feats, "intercept"]})

        return run


def _lad(X: np.ndarray, y: np.ndarray, iters: int = 50) -> np.ndarray:
    """Least absolute deviations by iteratively reweighted least squares."""
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    for _ in range(iters):
        r = np.abs(y - X @ beta)
        w = 1 / np.maximum(r, 1e-8)
        sw = np.sqrt(w)
        beta, *_ = np.linalg.lstsq(X * sw[:, None], y * sw, rcond=None)
    return beta


# -- local use ----------------------------------------------------------------------------------


def _as_table(data: Any, column: str | None) -> tuple[Any, str]:
    if column is None:
        return {"x": np.asarray(data, dtype=float)}, "x"
    return data, column


def iqr(data: Any, column: str | None = None, *, epsilon: Any, delta: Any,
        bounds: Any = None, ratio: Any = Fraction(441, 400), meta: Any = None) -> Estimate:
    """The PTR interquartile range (local use; see :class:`IQR`).

    >>> import numpy as np
    >>> est = iqr(np.arange(10000.0), epsilon=1, delta=1e-6, bounds=(0, 10000))
    >>> lo, hi = est.interval                  # the bin of the IQR (5000), ±5%
    >>> lo <= 5000 < hi and abs(hi / lo - 1.1025) < 1e-9
    True
    """
    table, col = _as_table(data, column)
    return IQR(col, epsilon, delta, bounds, ratio).run(table, meta)


def ptr_median(data: Any, column: str | None = None, *, epsilon: Any, delta: Any,
               bound: Any = None, bounds: Any = None, alpha: float = 0.05,
               meta: Any = None) -> Estimate:
    """The PTR median (local use; see :class:`PTRMedian`).

    With seeded noise (for the example only: seeded noise is not private), a median of
    well-concentrated data is released; on spread-out data the test refuses (⊥):

    >>> import warnings
    >>> import numpy as np
    >>> from statcurator.mechanisms import rng
    >>> concentrated = np.round(np.random.default_rng(0).normal(5000, 300, 20001))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         est = ptr_median(concentrated, epsilon=1, delta=1e-6, bounds=(0, 10000))
    ...         spread = ptr_median(np.arange(10001.0), epsilon=1, delta=1e-6,
    ...                             bounds=(0, 10000))
    >>> round(est.value), spread.refused
    (4998, True)
    """
    table, col = _as_table(data, column)
    return PTRMedian(col, bound, epsilon, delta, bounds, None, alpha).run(table, meta)


def lad_regression(data: Any, target: str, features: Sequence[str], *, epsilon: Any,
                   delta: Any, bounds: Any = None, coef_bounds: Any = (-10, 10),
                   blocks: int = 100, meta: Any = None) -> Estimate:
    """The PTR LAD regression (local use; see :class:`LADRegression`).

    >>> import numpy as np
    >>> rng_ = np.random.default_rng(1)
    >>> x = rng_.uniform(0, 1, 50000); y = 2 * x + 1 + rng_.laplace(0, 0.1, 50000)
    >>> est = lad_regression({"x": x, "y": y}, "y", ["x"], epsilon=1, delta=1e-6,
    ...                      bounds={"x": (0, 1), "y": (-1, 4)}, coef_bounds=(-5, 5))
    >>> est.refused or (abs(est.value[0] - 2) < 0.2 and abs(est.value[1] - 1) < 0.2)
    True
    """
    return LADRegression(target, tuple(features), epsilon, delta, bounds, coef_bounds,
                         blocks).run(data, meta)
