"""DP quantiles on a public grid: one quantile with a value interval, and many jointly.

:class:`QuantileMechanism` is the exponential mechanism over the points of a public grid
(Smith 2011; the "sorted data" form of McSherry & Talwar). A grid point v has the rank
interval [r⁻(v), r⁺(v)] = [#{x < v}, #{x <= v}] and the score
``-dist(t, [r⁻(v), r⁺(v)])`` for a target rank t (t = q·n for the q-quantile). Ties are
handled by the interval: a value held by many rows is *the* quantile for every t it covers,
so the best score is always 0. Adding a row moves r⁻ and r⁺ by 0 or 1 and q·n by q, in the
same direction, so r - q·n moves by 1 - q or -q: the score has sensitivity max(q, 1 - q)
under add/remove (1/2 for the median, as in OpenDP's quantile score); changing a row moves
r⁻, r⁺ by at most 1 and leaves n: sensitivity 1.
Points with equal scores form runs (between data values), which are sampled exactly by
:func:`~statcurator.mechanisms.exponential.sample_exponential` with the run lengths as base
measure, then a uniform point of the run.

``selection="permute-and-flip"`` (McKenna & Sheldon 2020) selects with the same scores and
the same ε/(2Δ) instead: visit the grid points in a uniformly random order and stop at the
first whose coin Bernoulli(exp(ε/(2Δ)·(score - best))) comes up heads. It is ε-DP like the
exponential mechanism and never less accurate in expectation; it concentrates more on the
best points when few are near the top (a quartile in a sparse tail). Since the coins are
independent of the order, the output is a uniformly random element of the set of points
whose coins came up heads (never empty: the best points' coins are certain), which is how it
is drawn here, exactly: one exact Bernoulli(e^-γ) per grid point (so at most
``PERMUTE_AND_FLIP_POINTS`` points), then a uniform element. Value intervals keep the
exponential mechanism, whose tail bound gives their coverage.

**Value intervals.** With G grid points the chosen point's score is at least
-(2Δ/ε)·(ln G + ln(1/a)) with probability 1 - a (the best score is 0). The interval
endpoints are two more releases with targets t_L = q·n and t_U = q·n + 2E on the data
padded with E public copies of each grid end, E = ⌈(2Δ/ε_end)·(ln G + ln(2/α))⌉: if the
lower endpoint were above the empirical quantile Q(q) (the smallest value with
#{x <= v} >= q·n), its padded rank r⁻ would be at least q·n + E, a score of at most -E —
probability at most α/2; the upper endpoint likewise. So [L, U] contains Q(q) with
probability at least 1 - α, whatever the data (ties and extremes included).

:class:`JointQuantiles` releases several quantiles sharing one budget with the joint
exponential mechanism of Gillenwater, Joseph & Kulesza (2021), on B public bins: a
non-decreasing tuple of bins (b_1 <= ... <= b_m) has probability ∝
exp(-ε/(2Δ)·Σ_j |P(b_j) - P(b_(j-1)) - n(q_j - q_(j-1))|), P(b) = #{x in bins < b} +
#{x in b}/2 (with b_0 the start, b_(m+1) the end), Δ = 2. It is sampled by a backward pass
(messages M_j) and forward draws, in log space with a rigorous error bound on every weight;
a draw the bounds cannot decide (probability about 2^-35) is settled with exact rational
interval arithmetic. Each chosen bin is reported by its midpoint.

>>> qm = QuantileMechanism(epsilon=1, lower=0, upper=100, grid=1)
>>> qm.rank_error(0.05)          # rank accuracy at 95%: (2/ε)(ln 101 + ln 20)
15.22...
>>> import warnings
>>> from statcurator.mechanisms import rng
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(0):
...         v = qm.release(list(range(101)), Fraction(1, 2))
>>> 35 <= v <= 65
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PureDP
from ..core.numbers import ceil_fraction, exact, exp_bounds, ln_bounds
from . import rng
from ._base import Mechanism, array_to_grid_units, as_alpha, grid_value
from .exponential import sample_exponential
from .samplers import _forced, _LazyUniform
from .smooth import _uniform_below

__all__ = ["QuantileMechanism", "JointQuantiles", "quantile_levels", "PERMUTE_AND_FLIP_POINTS"]

#: the largest grid that permute-and-flip draws point by point (one exact coin per point)
PERMUTE_AND_FLIP_POINTS = 2**22
SELECTIONS = ("exponential", "permute-and-flip")


def quantile_levels(qs: Sequence[Any]) -> tuple[Fraction, ...]:
    """Validated, strictly increasing quantile levels in [0, 1] (exact).

    >>> quantile_levels([0.25, 0.5, 0.75])
    (Fraction(1, 4), Fraction(1, 2), Fraction(3, 4))
    """
    out = tuple(exact(q, "quantile level", allow_zero=True, maximum=1) for q in qs)
    if not out:
        raise InvalidParameterError("no quantile level given", remedy="pass e.g. [0.5]")
    if any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise InvalidParameterError("quantile levels must be strictly increasing",
                                    remedy="pass e.g. [0.25, 0.5, 0.75]")
    return out


@dataclass(frozen=True)
class QuantileMechanism(Mechanism):
    """ε-DP quantile by the exponential mechanism over the public grid [lower, upper]/grid.

    Data are clamped to [lower, upper] and rounded to the grid (a per-row map), then a grid
    point is chosen (see the module docs). ``sensitivity`` is the score's: 1 for changed
    rows, max(q, 1 - q) for added or removed ones (:meth:`for_level`).
    ``privacy_map(d) = ε·d`` (d neighbour steps).

    >>> QuantileMechanism(epsilon=1, lower=0, upper=120, grid=Fraction(1, 4)).points
    481
    """

    epsilon: Fraction
    lower: Fraction
    upper: Fraction
    grid: Fraction | None = None
    sensitivity: Fraction = Fraction(1)
    selection: str = "exponential"

    name = "quantile (exponential mechanism)"

    @classmethod
    def for_level(cls, epsilon: object, lower: object, upper: object, grid: object,
                  q: object, add_remove: bool, selection: str = "exponential"
                  ) -> QuantileMechanism:
        """The mechanism for level q: sensitivity max(q, 1 - q) under add/remove, else 1.

        >>> QuantileMechanism.for_level(1, 0, 10, 1, Fraction(1, 2), True).sensitivity
        Fraction(1, 2)
        """
        level = exact(q, "quantile level", allow_zero=True, maximum=1)
        sens = max(level, 1 - level) if add_remove else Fraction(1)
        return cls(epsilon, lower, upper, grid, sens, selection)  # type: ignore[arg-type]

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity",
                                                      maximum=1))
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "lower", exact(self.lower, "lower", positive=False))
        object.__setattr__(self, "upper", exact(self.upper, "upper", positive=False))
        object.__setattr__(self, "grid", grid_value(self.grid))
        if self.upper < self.lower:
            raise InvalidParameterError("the quantile range is reversed",
                                        remedy="pass lower <= upper")
        if self.points > 2**40:
            raise InvalidParameterError(f"{self.points} grid points are too many",
                                        remedy="use a coarser grid")
        if self.selection not in SELECTIONS:
            raise InvalidParameterError(f"unknown selection {self.selection!r}",
                                        remedy="use 'exponential' or 'permute-and-flip'")
        if self.selection == "permute-and-flip" and self.points > PERMUTE_AND_FLIP_POINTS:
            raise InvalidParameterError(
                f"permute-and-flip draws one coin per grid point; {self.points} points are "
                f"more than {PERMUTE_AND_FLIP_POINTS}",
                remedy="use a coarser grid, or the exponential mechanism")

    @property
    def step(self) -> Fraction:
        return self.grid if self.grid is not None else Fraction(1)

    @property
    def _ends(self) -> tuple[int, int]:
        lo = ceil_fraction(self.lower / self.step)
        hi = (self.upper / self.step).__floor__()
        return lo, max(lo, hi)

    @property
    def points(self) -> int:
        """The number G of grid points (candidates)."""
        lo, hi = self._ends
        return hi - lo + 1

    @property
    def cost(self) -> PureDP:
        """PureDP(ε)."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """ε·d for datasets d rows apart."""
        return PureDP(self.epsilon * exact(d, "distance", allow_zero=True))

    def rank_error(self, alpha: object = Fraction(1, 20)) -> float:
        """Rank error E with P(|rank error| > E) <= alpha: (2Δ/ε)(ln G + ln(1/alpha))."""
        a = float(as_alpha(alpha))
        return 2 * float(self.sensitivity / self.epsilon) * (math.log(self.points)
                                                              + math.log(1 / a))

    def margin(self, alpha: object) -> int:
        """The E of the value interval (module docs), an exact upper bound."""
        a = as_alpha(alpha)
        e = 2 * self.sensitivity * (ln_bounds(self.points, 64)[1]
                                    + ln_bounds(2 / a, 64)[1]) / self.epsilon
        return ceil_fraction(e)

    def to_units(self, values: Any) -> np.ndarray:
        """Clamp to [lower, upper] and round to grid units (sorted int64)."""
        lo, hi = self._ends
        arr = np.asarray(values, dtype=np.float64)
        arr = arr[~np.isnan(arr)] if arr.dtype.kind == "f" else arr
        units = array_to_grid_units(arr, self.step) if arr.size else np.zeros(0, np.int64)
        return np.sort(np.clip(units, lo, hi))

    def sample_units(self, units: np.ndarray, target: Fraction, size: int | None = None,
                     pad: int = 0, selection: str | None = None) -> Any:
        """Grid points (units) for the sorted ``units`` and the exact target rank.

        ``pad`` adds that many public copies of each end of the grid (value intervals);
        ``selection`` overrides the mechanism's (intervals always use the exponential one).
        """
        lo, hi = self._ends
        if pad:
            units = np.concatenate([np.full(pad, lo, np.int64), units,
                                    np.full(pad, hi, np.int64)])
        starts, lengths, scores, den = _runs(units, lo, hi, Fraction(target))
        coefficient = self.epsilon / (2 * self.sensitivity * den)
        if (selection or self.selection) == "permute-and-flip":
            draws = _permute_and_flip(starts, lengths, scores, coefficient,
                                      1 if size is None else size)
            return int(draws[0]) if size is None else draws
        seg = sample_exponential(scores, coefficient, 1 if size is None else size,
                                 base_measure=lengths)
        seg = np.atleast_1d(seg)
        out = starts[seg] + _uniform_below(lengths[seg])
        return int(out[0]) if size is None else out

    def release(self, values: Any, q: object, size: int | None = None) -> Any:
        """The q-quantile of ``values``: a Fraction on the grid (an array for ``size``)."""
        units = self.to_units(values)
        level = exact(q, "quantile level", allow_zero=True, maximum=1)
        out = self.sample_units(units, level * units.size, size)
        if size is None:
            return out * self.step
        return out.astype(np.float64) * float(self.step)

    def interval(self, values: Any, q: object, alpha: object = Fraction(1, 20)
                 ) -> tuple[Fraction, Fraction]:
        """Two ε-DP releases (2ε in all) whose span holds the empirical q-quantile with
        probability >= 1 - alpha (module docs)."""
        units = self.to_units(values)
        level = exact(q, "quantile level", allow_zero=True, maximum=1)
        e = self.margin(alpha)
        t = level * units.size
        low = self.sample_units(units, t, None, pad=e, selection="exponential")
        high = self.sample_units(units, t + 2 * e, None, pad=e, selection="exponential")
        return low * self.step, max(low, high) * self.step


def _runs(units: np.ndarray, lo: int, hi: int, target: Fraction
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Runs of grid points with one rank interval: starts, lengths, integer scores (×den)."""
    den = target.denominator
    tnum = target.numerator
    vals, counts = np.unique(units, return_counts=True)
    cum = np.cumsum(counts)
    r_minus = cum - counts
    # point runs (one value each) and gap runs before each value, and the last gap
    prev_end = np.concatenate([[lo - 1], vals[:-1]]) if vals.size else np.array([], np.int64)
    gap_start = prev_end + 1
    gap_len = vals - gap_start
    last = int(vals[-1]) if vals.size else lo - 1
    starts = np.concatenate([gap_start, vals, [last + 1]]).astype(np.int64)
    lengths = np.concatenate([gap_len, np.ones(vals.size, np.int64), [hi - last]])
    rl = np.concatenate([r_minus, r_minus, [int(cum[-1]) if vals.size else 0]])
    ru = np.concatenate([r_minus, cum, [int(cum[-1]) if vals.size else 0]])
    if max(abs(tnum), den * (int(ru.max(initial=0)) + 1)) < 2**62:
        rl64, ru64 = rl.astype(np.int64) * den, ru.astype(np.int64) * den
        dist = np.maximum(np.maximum(rl64 - tnum, 0), tnum - ru64)
        scores = -dist
    else:  # pragma: no cover - astronomically many rows
        scores = np.array([-max(int(a) * den - tnum, 0, tnum - int(b) * den)
                           for a, b in zip(rl, ru, strict=True)], dtype=object)
    keep = lengths > 0
    return starts[keep], lengths[keep].astype(np.int64), scores[keep], den


def _permute_and_flip(starts: np.ndarray, lengths: np.ndarray, scores: np.ndarray,
                      coefficient: Fraction, size: int) -> np.ndarray:
    """``size`` permute-and-flip draws over runs of grid points (module docs): an exact coin
    Bernoulli(e^-γ), γ = coefficient·(best - score), for every point, then a uniformly
    random point among the heads. Draws are made in blocks of about 2^22 coins."""
    from .samplers import _bernoulli_exp_vec

    sc = np.asarray([int(v) for v in scores], dtype=object) if scores.dtype == object \
        else scores.astype(np.int64)
    gap_of_run = sc.max() - sc  # integers >= 0
    run = np.repeat(np.arange(lengths.size), lengths)
    offset = np.arange(run.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    points = starts[run] + offset
    gaps = gap_of_run[run]
    g1 = np.asarray(gaps, dtype=np.float64) * float(coefficient)
    rows = max(1, PERMUTE_AND_FLIP_POINTS // run.size)
    out = np.empty(size, dtype=np.int64)
    for first in range(0, size, rows):
        r = min(rows, size - first)
        g = np.tile(g1, r)

        def exact_gamma(i: int) -> Fraction:
            return coefficient * int(gaps[i % run.size])

        heads = _bernoulli_exp_vec(g, g * 2.0**-50 + 2.0**-1000, exact_gamma).reshape(r, -1)
        count = heads.sum(axis=1)  # >= 1: the best points' coins are certain
        k = _uniform_below(count.astype(np.int64))  # the k-th head of each row, uniformly
        col = np.argmax(np.cumsum(heads, axis=1) > k[:, None], axis=1)
        out[first:first + r] = points[col]
    return out


# -- the joint exponential mechanism -----------------------------------------------------------


@dataclass(frozen=True)
class JointQuantiles(Mechanism):
    """ε-DP release of m quantiles at once (Gillenwater, Joseph & Kulesza 2021) on ``bins``
    equal public bins of [lower, upper]; see the module docs.

    >>> jq = JointQuantiles(epsilon=1, qs=(0.25, 0.5, 0.75), lower=0, upper=100, bins=100)
    >>> import warnings
    >>> from statcurator.mechanisms import rng
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         out = jq.release(np.arange(1000) / 10)
    >>> [abs(float(v) - t) < 5 for v, t in zip(out, (25, 50, 75))]
    [True, True, True]
    """

    epsilon: Fraction
    qs: tuple[Fraction, ...]
    lower: Fraction
    upper: Fraction
    bins: int = 256

    name = "joint quantiles (Gillenwater et al. 2021)"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "qs", quantile_levels(self.qs))
        object.__setattr__(self, "lower", exact(self.lower, "lower", positive=False))
        object.__setattr__(self, "upper", exact(self.upper, "upper", positive=False))
        b = self.bins
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 1024:
            raise InvalidParameterError("bins must be an integer in 1..1024",
                                        remedy="pass bins=256")
        if self.upper <= self.lower:
            raise InvalidParameterError("the quantile range is empty",
                                        remedy="pass lower < upper")

    @property
    def cost(self) -> PureDP:
        """PureDP(ε) for all the quantiles together."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """ε·d for datasets d rows apart."""
        return PureDP(self.epsilon * exact(d, "distance", allow_zero=True))

    def edges(self) -> list[Fraction]:
        """The B + 1 public bin edges."""
        w = (self.upper - self.lower) / self.bins
        return [self.lower + i * w for i in range(self.bins + 1)]

    def counts(self, values: Any) -> np.ndarray:
        """Bin counts of the values clamped to [lower, upper] (NaN dropped)."""
        arr = np.asarray(values, dtype=np.float64)
        arr = arr[~np.isnan(arr)]
        lo, hi = float(self.lower), float(self.upper)
        idx = np.floor((np.clip(arr, lo, hi) - lo) / (hi - lo) * self.bins).astype(np.int64)
        return np.bincount(np.clip(idx, 0, self.bins - 1), minlength=self.bins)

    def release(self, values: Any, size: int | None = None) -> Any:
        """The m quantiles (bin midpoints, floats); an array (size, m) for ``size``."""
        bins = self.sample_bins(self.counts(values), 1 if size is None else size)
        w = (self.upper - self.lower) / self.bins
        mids = float(self.lower) + (bins + 0.5) * float(w)
        return mids[0] if size is None else mids

    def _utility_parts(self, counts: np.ndarray) -> tuple[np.ndarray, list[int], int, Fraction]:
        den = math.lcm(*[q.denominator for q in self.qs])
        n = int(counts.sum())
        below = np.concatenate([[0], np.cumsum(counts)[:-1]])
        pos = (2 * below + counts).astype(np.int64) * den  # 2·P(b)·den
        levels = (Fraction(0), *self.qs, Fraction(1))
        targets = [int(2 * n * den * (b - a)) for a, b in zip(levels, levels[1:], strict=False)]
        c = self.epsilon / (2 * 2 * 2 * den)  # ε/(2Δ), Δ = 2 in P units, ×2·den scaling
        return pos, targets, 2 * n * den, c

    def sample_bins(self, counts: np.ndarray, size: int) -> np.ndarray:
        """``size`` independent draws of the bin tuple (size × m, int64)."""
        pos, targets, end, c = self._utility_parts(np.asarray(counts, dtype=np.int64))
        return _JointSampler(pos, targets, end, c).sample(size)


class _JointSampler:
    """Backward messages in log space with a uniform error bound, forward exact draws."""

    def __init__(self, pos: np.ndarray, targets: list[int], end: int, c: Fraction) -> None:
        self.pos, self.targets, self.end, self.c = pos, targets, end, c
        self.m = len(targets) - 1
        cf = float(c)
        self.cf = cf
        b = pos.shape[0]
        diff = pos[None, :] - pos[:, None]  # diff[a, b] = pos[b] - pos[a]
        self.valid = np.triu(np.ones((b, b), dtype=bool))
        # log f_j(a, b) = -c·|diff - T_j|; the messages M_m(b) = f_(m+1)(b, end)
        self.logf = []
        for j in range(1, self.m + 1):
            k = np.abs(diff - targets[j - 1]).astype(np.float64)
            self.logf.append(np.where(self.valid, -cf * k, -np.inf))
        self.logf_start = -cf * np.abs(pos - targets[0]).astype(np.float64)
        last = -cf * np.abs(end - pos - targets[self.m]).astype(np.float64)
        msgs = [last]
        for j in range(self.m - 1, 0, -1):  # M_j(a) = LSE_b (log f_(j+1)(a,b) + M_(j+1)(b))
            msgs.append(_lse_rows(self.logf[j] + msgs[-1][None, :]))
        msgs.reverse()  # msgs[j-1] = M_j
        self.msgs = msgs
        # a uniform bound of the absolute error of every log weight: |x|·2^-50 per rounding
        # step (products, LSE) and 2^-48 for each exp/log (numpy's are within 4 ulp)
        big = float(max(np.abs(self.logf_start).max(initial=0), np.abs(last).max(initial=0),
                        max((np.abs(np.where(self.valid, f, 0)).max(initial=0)
                             for f in self.logf), default=0)))
        self.err = (self.m + 2) * ((big * (self.m + 2) + 4) * 2.0**-49 + (b + 8) * 2.0**-48)

    def sample(self, size: int) -> np.ndarray:
        out = np.empty((size, self.m), dtype=np.int64)
        prev = None
        for j in range(1, self.m + 1):
            logm = self.msgs[j - 1]
            if j == 1:
                w = (self.logf_start + logm)[None, :]
                rows = np.zeros(size, dtype=np.int64)
            else:
                w = self.logf[j - 1] + logm[None, :]
                rows = prev
            choice = np.empty(size, dtype=np.int64)
            for r in np.unique(rows):
                idx = np.flatnonzero(rows == r)
                choice[idx] = self._categorical(w[r], idx.size, j, int(r))
            out[:, j - 1] = choice
            prev = choice
        return out

    def _categorical(self, logw: np.ndarray, size: int, j: int, row: int) -> np.ndarray:
        """Exact draws ∝ e^logw, from float log weights known to ±err."""
        mx = float(logw[np.isfinite(logw)].max())
        lw = np.exp(logw - mx)  # each within a factor e^(±err) of the true ratio
        e = self.err + 2.0**-48
        lo = lw * math.exp(-e) * (1 - 2.0**-50)
        hi = lw * math.exp(e) * (1 + 2.0**-50)
        clo, chi = np.cumsum(lo), np.cumsum(hi)
        # cumsum of positives: relative error <= k·2^-53 at position k
        k = np.arange(1, lw.size + 1, dtype=np.float64)
        clo *= 1 - k * 2.0**-52
        chi *= 1 + k * 2.0**-52
        tot_lo, tot_hi = float(clo[-1]), float(chi[-1])
        words = rng.words64(size)
        u = words.astype(np.float64) * 2.0**-64  # U in [word, word + 1)·2^-64, u within 2^-53
        # choose i with C_(i-1) <= U·T < C_i: certain when chi[i-1] <= u·tot_lo and
        # (u + 2^-64 + 2^-53)·tot_hi <= clo[i]
        lower_c = np.concatenate([[0.0], chi[:-1]])
        i = np.searchsorted(clo, u * tot_hi, side="right")
        i = np.minimum(i, lw.size - 1)
        ok = (lower_c[i] <= u * tot_lo * (1 - 2.0**-52)) & \
             ((u + 2.0**-52) * tot_hi * (1 + 2.0**-52) <= clo[i])
        ok &= ~_forced(size)
        for t in np.flatnonzero(~ok):  # the same uniform, refined: no bias
            i[t] = self._exact_choice(j, row, int(words[t]))
        return i

    # -- the exact path ---------------------------------------------------------------------
    def _exact_choice(self, j: int, row: int, word: int) -> int:
        """The draw for the uniform whose first 64 bits are ``word``, decided with rational
        interval bounds of the weights (refined with more bits of the same uniform)."""
        lazy = _LazyUniform(word, 64)
        while True:
            bits = lazy.bits + 64
            los, his = self._exact_weights(j, row, bits)
            t_lo, t_hi = sum(los), sum(his)
            scale = Fraction(1, 1 << lazy.bits)
            u_lo, u_hi = lazy.value * scale, (lazy.value + 1) * scale
            h_prev, l_cum = Fraction(0), Fraction(0)
            for i, (lo, hi) in enumerate(zip(los, his, strict=True)):
                l_cum += lo
                if h_prev <= u_lo * t_lo and u_hi * t_hi <= l_cum:
                    return i
                h_prev += hi
            lazy._refine()

    def _exact_weights(self, j: int, row: int, bits: int
                       ) -> tuple[list[Fraction], list[Fraction]]:
        """Rational bounds of the step-j weights f_j(row, b)·M_j(b) (start row for j = 1)."""
        def f(k: int) -> tuple[Fraction, Fraction]:
            return _exp_neg(self.c, k, bits + 16)

        pos = [int(p) for p in self.pos.tolist()]
        nb = len(pos)
        msg = [f(abs(self.end - p - self.targets[self.m])) for p in pos]
        for jj in range(self.m - 1, j - 1, -1):
            new = []
            for a in range(nb):
                lo = hi = Fraction(0)
                for b in range(a, nb):
                    fl, fh = f(abs(pos[b] - pos[a] - self.targets[jj]))
                    lo += fl * msg[b][0]
                    hi += fh * msg[b][1]
                new.append((_trim(lo, bits + 8, False), _trim(hi, bits + 8, True)))
            msg = new
        los, his = [], []
        for b in range(nb):
            if j == 1:
                fl, fh = f(abs(pos[b] - self.targets[0]))
            elif b < row:
                fl = fh = Fraction(0)
            else:
                fl, fh = f(abs(pos[b] - pos[row] - self.targets[j - 1]))
            los.append(fl * msg[b][0])
            his.append(fh * msg[b][1])
        return los, his


@functools.lru_cache(maxsize=1 << 16)
def _exp_neg(c: Fraction, k: int, bits: int) -> tuple[Fraction, Fraction]:
    return exp_bounds(-c * k, bits)


def _trim(x: Fraction, bits: int, up: bool) -> Fraction:
    if x == 0:
        return x
    e = x.numerator.bit_length() - x.denominator.bit_length()
    s = Fraction(2) ** (bits - e)
    n = math.ceil(x * s) if up else math.floor(x * s)
    return Fraction(n) / s


def _lse_rows(x: np.ndarray) -> np.ndarray:
    """log Σ_b e^x[a, b] per row (rows of -inf give -inf)."""
    mx = np.max(x, axis=1)
    safe = np.where(np.isfinite(mx), mx, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(x - safe[:, None]).sum(axis=1))
