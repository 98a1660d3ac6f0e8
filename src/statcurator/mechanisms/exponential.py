"""Selection mechanisms: the exponential mechanism and report-noisy-max.

:class:`ExponentialMechanism` (McSherry & Talwar 2007) picks candidate i with probability
proportional to ``base_i · exp(ε·u_i/(2Δ))`` (``exp(ε·u_i/Δ)`` for monotonic scores), where
u is a score of sensitivity Δ and ``base`` an optional base measure (the widths of the
intervals when the candidates are intervals, as for DP quantiles). It is sampled *exactly*:

1. Each candidate gets a bucket (k, e): k <= γ_i = c·(u_max - u_i) an integer (k = ⌊γ_i⌋ up to
   a cap), e the binary exponent of base_i (2^e <= base_i < 2^(e+1)).
2. A bucket is chosen with probability ∝ n_b·2^(e+1)·e^-k by comparing a uniform random
   number with rational bounds of these weights (exact interval arithmetic on e^-k; ties are
   resolved lazily with more random bits).
3. A member i of the bucket is proposed uniformly and accepted with probability
   (base_i/2^(e+1))·e^-(γ_i - k) — an exact Bernoulli of a rational times a CKS Bernoulli of
   e^-rational; on rejection everything restarts at step 2.

The accepted i has probability ∝ n_b·2^(e+1)·e^-k · (1/n_b) · base_i/2^(e+1) · e^-(γ_i-k)
= base_i·e^-γ_i, exactly the exponential mechanism; each round accepts with probability at
least about 1/(2e²). No Gumbel noise and no floating-point exponential decides anything.

:class:`ReportNoisyMax` adds discrete Laplace noise to integer (or grid) scores and reports the
index of the largest; ties go to the smallest index.

>>> from fractions import Fraction
>>> em = ExponentialMechanism(epsilon=1, sensitivity=1)
>>> p = em.probabilities([0.5, 0.3])       # "gender" vs "age"
>>> round(float(p[0]), 4)                  # e^(0.25) / (e^(0.25) + e^(0.15))
0.525
>>> em.release([0.5, 0.3]) in (0, 1)
True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError
from ..core.measures import PureDP
from ..core.numbers import exact, exact_value, floor_fraction
from ..core.relations import LInfDistance
from . import rng, samplers
from ._base import (
    Mechanism,
    OnGrid,
    add_units,
    array_to_grid_units,
    as_alpha,
    distance,
    grid_sensitivity,
    grid_value,
)
from .samplers import (
    _bernoulli_exp_vec,
    _bernoulli_filtered,
    _forced,
    _LazyUniform,
    exp_neg_int_bounds,
)

__all__ = ["ExponentialMechanism", "ReportNoisyMax", "sample_exponential"]


# -- exact vectors ---------------------------------------------------------------------------


class _ExactVector:
    """Numbers as float estimates with error bounds, and their exact values on demand."""

    def __init__(self, values: Any, name: str) -> None:
        arr = values if isinstance(values, np.ndarray) else None
        if arr is None:
            seq = list(values)
            if all(isinstance(v, int | float | np.integer | np.floating)
                   and not isinstance(v, bool) for v in seq):
                arr = np.asarray(seq)
                if arr.dtype.kind not in "iuf":  # mixed huge ints
                    arr = None
            if arr is None:
                self._exact = [exact_value(v, name) for v in seq]
                self.approx = np.array([_float(v) for v in self._exact], dtype=np.float64)
                self.err = np.abs(self.approx) * 2.0**-52 + 2.0**-1060
                self._check(name)
                return
        if arr.ndim != 1:
            raise InvalidParameterError(f"{name} must be a one-dimensional sequence",
                                        remedy="pass a list or a 1-d array")
        if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
            return self.__init__(list(arr.tolist()), name)  # type: ignore[misc]
        self._array = arr
        self._exact = None
        self.approx = arr.astype(np.float64)
        if arr.dtype.kind == "f":
            self.err = np.zeros(arr.shape[0])
        else:
            self.err = np.abs(self.approx) * 2.0**-53
        self._check(name)

    def _check(self, name: str) -> None:
        if not np.isfinite(self.approx).all():
            raise DataError(f"{name} contain NaN, ±∞ or values beyond the float range",
                            remedy="score only finite values, within ±1e308")

    def __len__(self) -> int:
        return self.approx.shape[0]

    def exact(self, i: int) -> Fraction:
        if self._exact is not None:
            return self._exact[i]
        return Fraction(self._array[i].item())


def _float(x: Fraction) -> float:
    try:
        return float(x)
    except OverflowError:
        return math.inf if x > 0 else -math.inf


# -- the exact sampler ----------------------------------------------------------------------


def sample_exponential(scores: Any, coefficient: object, size: int | None = None,
                       base_measure: Any = None) -> int | np.ndarray:
    """Exact draws of i with probability ∝ base_i · exp(coefficient · score_i).

    ``coefficient`` is an exact rational (ε/(2Δ) for the exponential mechanism). Scores and
    base measure are taken at their exact values (floats at their binary value).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         draws = sample_exponential([0, 1], Fraction(1), size=20000)
    >>> 0.72 < float(draws.mean()) < 0.75    # e/(1+e) = 0.731
    True
    """
    c = exact(coefficient, "coefficient", allow_zero=True)
    sampler = _ExponentialSampler(scores, c, base_measure)
    if size is None:
        return int(sampler.sample(1)[0])
    return sampler.sample(int(size))


class _ExponentialSampler:
    def __init__(self, scores: Any, c: Fraction, base_measure: Any) -> None:
        u = _ExactVector(scores, "scores")
        n = len(u)
        if n == 0:
            raise InvalidParameterError("no candidates to choose from",
                                        remedy="pass at least one score")
        self.c = c
        self.u = u
        # exact maximum: the float argmax, then exact comparison among the near-ties
        top = float(u.approx.max())
        slack = 2 * float(u.err.max()) + abs(top) * 2.0**-50
        near = np.flatnonzero(u.approx >= top - slack)
        self.u_ref = max(u.exact(int(i)) for i in near)
        ref_f = _float(self.u_ref)
        cf = float(c)
        diff = ref_f - u.approx
        g = np.maximum(cf * diff, 0.0)
        self.g = g
        self.gerr = (cf * (u.err + abs(ref_f) * 2.0**-53) * (1 + 2.0**-40)
                     + g * 2.0**-49 + 2.0**-1000)

        # base measure: caps c_b = 2^(e+1) >= base_i, ratios r_i = base_i / c_b in [1/2, 1)
        if base_measure is None:
            self.base = None
            expo = np.zeros(n, dtype=np.int64)
            logbase = np.zeros(n)
            valid = np.arange(n)
        else:
            b = _ExactVector(base_measure, "base_measure")
            if len(b) != n:
                raise InvalidParameterError(
                    f"base_measure has {len(b)} weights for {n} scores",
                    remedy="give one non-negative weight per candidate")
            if (b.approx < 0).any() or (b._exact is not None and any(v < 0 for v in b._exact)):
                raise InvalidParameterError("base_measure has a negative weight",
                                            remedy="weights must be >= 0")
            self.base = b
            valid = np.flatnonzero(b.approx > 0)
            if b._exact is not None:  # exact zeros that round to tiny floats, or vice versa
                valid = np.array([i for i in range(n) if b.exact(i) > 0], dtype=np.int64)
            if valid.size == 0:
                raise InvalidParameterError("every base_measure weight is 0",
                                            remedy="give at least one candidate a positive weight")
            mant, ex = np.frexp(b.approx)
            expo = (ex - 1).astype(np.int64)  # 2^(ex-1) <= approx < 2^ex
            if b._exact is not None:
                for i in valid:
                    v = b.exact(int(i))
                    e = v.numerator.bit_length() - v.denominator.bit_length()
                    if Fraction(2) ** e > v:
                        e -= 1
                    expo[i] = e
            self.ratio = np.ldexp(b.approx, -(expo + 1))  # approx of base/2^(e+1)
            self.ratio_err = np.zeros(n) if b._exact is None else self.ratio * 2.0**-50
            logbase = np.log(np.maximum(b.approx, 1e-300))
        self.valid = valid
        self.expo = expo

        # the bucket cap: beyond it the tail's total weight is below e^-25 of the best
        logw = logbase[valid] - g[valid]
        best = float(logw.max())
        tot = float(np.logaddexp.reduce(logbase[valid]))
        gmax = min(float(g[valid].max()), 1e6)
        kcap = min(4096, max(1, math.ceil(tot - best + 25)), math.ceil(gmax) + 1)
        k = np.floor(g - self.gerr - 2.0**-40)
        k = np.clip(k, 0, kcap).astype(np.int64)
        self.k = k

        emin = int(expo[valid].min())
        width = int(expo[valid].max()) - emin + 1
        key = k[valid] * width + (expo[valid] - emin)
        ukeys, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        order = np.argsort(inverse, kind="stable")
        self.members = valid[order]
        self.starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        self.counts = counts.astype(np.int64)
        self.bucket_k = [int(x) // width for x in ukeys]
        self.bucket_e = [int(x) % width + emin for x in ukeys]
        self._thresholds()

    # stage 1 --------------------------------------------------------------------------
    def _weight_bounds(self, bits: int) -> tuple[list[Fraction], list[Fraction]]:
        los, his = [], []
        for k, e, n in zip(self.bucket_k, self.bucket_e, self.counts.tolist(), strict=True):
            lo, hi = exp_neg_int_bounds(k, bits)
            cap = Fraction(1) if self.base is None else Fraction(2) ** (e + 1)
            los.append(n * cap * lo)
            his.append(n * cap * hi)
        return los, his

    def _thresholds(self) -> None:
        los, his = self._weight_bounds(128)
        t_lo, t_hi = sum(los), sum(his)
        a_list, b_list = [], []
        h_prev, l_cum = Fraction(0), Fraction(0)
        top = 2**64 - 1
        for lo, hi in zip(los, his, strict=True):
            l_cum += lo
            a = -((-h_prev * 2**64) // t_lo)  # u >= a  =>  C_{j-1} <= U·T
            bm1 = floor_fraction(l_cum * 2**64 / t_hi) - 1  # u <= b-1  =>  U·T < C_j
            if a > top:
                a, bm1 = top, -1
            a_list.append(a)
            b_list.append(max(bm1, -1))
            h_prev += hi
        self.a = np.array(a_list, dtype=np.uint64)
        self.bvalid = np.array([b >= 0 for b in b_list], dtype=bool)  # False: nothing certain
        self.bm1 = np.array([max(b, 0) for b in b_list], dtype=np.uint64)

    def _choose_buckets(self, m: int) -> np.ndarray:
        u = rng.words64(m)
        j = np.searchsorted(self.a, u, side="right") - 1
        ok = self.bvalid[j] & (u <= self.bm1[j])
        forced = _forced(m)
        if forced.any():
            ok &= ~forced
        for i in np.flatnonzero(~ok):
            j[i] = self._lazy_bucket(int(u[i]))
        return j

    def _lazy_bucket(self, u: int) -> int:
        lazy = _LazyUniform(u, 64)
        while True:
            los, his = self._weight_bounds(lazy.bits + 64)
            t_lo, t_hi = sum(los), sum(his)
            scale = Fraction(1, 1 << lazy.bits)
            u_lo, u_hi = lazy.value * scale, (lazy.value + 1) * scale
            h_prev, l_cum = Fraction(0), Fraction(0)
            for j, (lo, hi) in enumerate(zip(los, his, strict=True)):
                l_cum += lo
                if h_prev <= u_lo * t_lo and u_hi * t_hi <= l_cum:
                    return j
                h_prev += hi
            lazy._refine()

    # stage 2 --------------------------------------------------------------------------
    def _exact_gamma(self, i: int) -> Fraction:
        return self.c * (self.u_ref - self.u.exact(i))

    def sample(self, size: int) -> np.ndarray:
        result = np.empty(size, dtype=np.int64)
        active = np.arange(size)
        while active.size:
            m = active.size
            j = self._choose_buckets(m)
            offs = _uniform_below(self.counts[j])
            cand = self.members[self.starts[j] + offs]
            if self.base is None:
                acc = np.ones(m, dtype=bool)
            else:
                base = self.base

                def exact_ratio(t: int, cand: np.ndarray = cand,
                                base: _ExactVector = base) -> Fraction:
                    i = int(cand[t])
                    return base.exact(i) / Fraction(2) ** (int(self.expo[i]) + 1)

                acc = _bernoulli_filtered(self.ratio[cand], self.ratio_err[cand], exact_ratio)
            idx = np.flatnonzero(acc)
            if idx.size:
                ci = cand[idx]
                kk = self.k[ci]
                g2 = self.g[ci] - kk
                e2 = self.gerr[ci] + np.abs(self.g[ci]) * 2.0**-52

                def exact_g2(t: int, ci: np.ndarray = ci) -> Fraction:
                    i = int(ci[t])
                    return self._exact_gamma(i) - int(self.k[i])

                acc[idx] = _bernoulli_exp_vec(g2, e2, exact_g2)
            result[active[acc]] = cand[acc]
            active = active[~acc]
        return result


def _uniform_below(n: np.ndarray) -> np.ndarray:
    """Uniform integers in [0, n_i) for an int64 array n >= 1, exactly (rejection)."""
    out = np.zeros(n.shape[0], dtype=np.int64)
    todo = np.flatnonzero(n > 1)
    while todo.size:
        nn = n[todo]
        _, ex = np.frexp((nn - 1).astype(np.float64))  # bit length of n-1 (n < 2^53)
        shift = (64 - ex).astype(np.uint64)
        w = rng.words64(todo.size) >> shift
        ok = w < nn.astype(np.uint64)
        out[todo[ok]] = w[ok].astype(np.int64)
        todo = todo[~ok]
    return out


# -- the mechanisms -------------------------------------------------------------------------


@dataclass(frozen=True)
class ExponentialMechanism(Mechanism):
    """ε-DP selection: P(i) ∝ base_i · exp(ε·u_i/(2Δ)) (or exp(ε·u_i/Δ) when ``monotonic``).

    Properties: pure ε-DP for scores of sensitivity Δ (McSherry & Talwar 2007); monotonic
    scores (all scores move in the same direction between neighbours, e.g. counts under
    add/remove) allow the factor 2 to be dropped. Sampled exactly (see the module docs).
    ``privacy_map(d) = ε·d/Δ``.

    >>> ExponentialMechanism(epsilon=Fraction(1, 2), sensitivity=1).coefficient
    Fraction(1, 4)
    >>> ExponentialMechanism(epsilon=1, sensitivity=1, monotonic=True).coefficient
    Fraction(1, 1)
    """

    epsilon: Fraction
    sensitivity: Fraction = Fraction(1)
    monotonic: bool = False

    name = "exponential"
    input_metric = LInfDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        if not isinstance(self.monotonic, bool):
            raise InvalidParameterError("monotonic must be True or False",
                                        remedy="pass monotonic=True only for monotone scores")

    @property
    def coefficient(self) -> Fraction:
        """The c in P(i) ∝ exp(c·u_i): ε/(2Δ), or ε/Δ for monotonic scores."""
        return self.epsilon / (self.sensitivity * (1 if self.monotonic else 2))

    @property
    def cost(self) -> PureDP:
        """PureDP(ε)."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """Loss for scores whose sensitivity (the largest change of any score) is ``d``:
        ε·d/Δ.

        >>> ExponentialMechanism(epsilon=1, sensitivity=2).measurement().map(1)
        PureDP(epsilon=Fraction(1, 2))
        """
        return PureDP(self.epsilon * distance(d) / self.sensitivity)

    def release(self, scores: Sequence[Any] | np.ndarray,
                base_measure: Sequence[Any] | np.ndarray | None = None) -> int:
        """The index of the chosen candidate."""
        return int(sample_exponential(scores, self.coefficient, None, base_measure))

    def sample(self, scores: Sequence[Any] | np.ndarray, size: int,
               base_measure: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """``size`` independent releases (for tests and simulations)."""
        return sample_exponential(scores, self.coefficient, size, base_measure)

    def probabilities(self, scores: Sequence[Any] | np.ndarray,
                      base_measure: Sequence[Any] | np.ndarray | None = None) -> np.ndarray:
        """The selection probabilities as floats (for display; sampling never uses them)."""
        u = np.asarray([float(x) for x in scores], dtype=np.float64)
        logw = float(self.coefficient) * (u - u.max())
        if base_measure is not None:
            b = np.asarray([float(x) for x in base_measure], dtype=np.float64)
            with np.errstate(divide="ignore"):
                logw = logw + np.log(b)
        w = np.exp(logw - logw.max())
        return w / w.sum()

    def accuracy(self, alpha: object = Fraction(1, 20), candidates: int = 2) -> float:
        """Score gap g with P(u(chosen) < max u - g) <= alpha (uniform base, n candidates).

        McSherry & Talwar: g = ln(n/alpha)/c, i.e. 2Δ/ε·ln(n/alpha).

        >>> round(ExponentialMechanism(epsilon=1, sensitivity=1).accuracy(0.05, 2), 3)
        7.378
        """
        a = float(as_alpha(alpha))
        return math.log(candidates / a) / float(self.coefficient)


@dataclass(frozen=True)
class ReportNoisyMax(OnGrid):
    """ε-DP arg-max: add discrete Laplace noise to each score, report the largest's index.

    Noise scale 2Δ/ε in grid units (Δ/ε for monotonic scores such as counts under
    add/remove, Dwork & Roth 2014, Claim 3.9); scores are rounded to the grid (⌈Δ/g⌉ grid
    units of sensitivity) and ties go to the smallest index, which keeps the proof valid for
    discrete noise. Pure ε-DP; only the index is released.

    >>> rnm = ReportNoisyMax(epsilon=1, sensitivity=1, monotonic=True)
    >>> rnm.noise_scale
    Fraction(1, 1)
    >>> rnm.release([100, 3, 5])
    0
    """

    epsilon: Fraction
    sensitivity: Fraction = Fraction(1)
    monotonic: bool = False
    grid: Fraction | None = None

    name = "report-noisy-max"
    input_metric = LInfDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "sensitivity", exact(self.sensitivity, "sensitivity"))
        object.__setattr__(self, "grid", grid_value(self.grid))


    @property
    def noise_scale(self) -> Fraction:
        """Scale of the discrete Laplace noise in grid units."""
        units = grid_sensitivity(self.sensitivity, self.step)
        return units * (1 if self.monotonic else 2) / self.epsilon

    @property
    def cost(self) -> PureDP:
        """PureDP(ε)."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """Loss for scores whose sensitivity is ``d``: ε·⌈d/g⌉/⌈Δ/g⌉."""
        dist = distance(d)
        units = grid_sensitivity(dist, self.step) if dist else 0
        return PureDP(self.epsilon * units / grid_sensitivity(self.sensitivity, self.step))

    def release(self, scores: Sequence[Any] | np.ndarray) -> int:
        """The index of the largest noisy score."""
        return int(self.sample(scores, 1)[0])

    def sample(self, scores: Sequence[Any] | np.ndarray, size: int) -> np.ndarray:
        """``size`` independent releases."""
        units = array_to_grid_units(np.asarray(scores), self.step).ravel()
        noise = samplers.discrete_laplace(self.noise_scale, size * units.size)
        noisy = add_units(units[None, :], noise.reshape(size, units.size))
        return np.argmax(noisy, axis=1).astype(np.int64)
