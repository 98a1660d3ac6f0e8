"""Exact samplers: Bernoulli(p), Bernoulli(e^-γ), discrete Laplace and discrete Gaussian.

The algorithms are those of Canonne, Kamath & Steinke, *The Discrete Gaussian for
Differential Privacy* (NeurIPS 2020): every random decision is a comparison of uniform random
bits (from :mod:`statcurator.mechanisms.rng`) with an exact rational number, so the samples
follow the target distribution *exactly* — there is no floating-point noise whose low-order
bits could leak the input (Mironov 2012).

They are vectorized in numpy with *filtered* comparisons, in the style of the filtered
exact predicates of computational geometry: to decide ``U < q`` for a uniform ``U`` whose
first 32 bits are ``u`` and an exact rational ``q``, the sampler first compares ``u`` with
integers ``lo <= q·2**32 <= hi`` obtained from a float approximation of ``q`` and a proven
bound on its error (only IEEE-754 basic operations, which are correctly rounded, go into
those bounds — never ``exp`` or ``log``). When ``u`` falls between ``lo`` and ``hi`` (with
probability about 2**-31) the comparison is finished with exact rational arithmetic and more
random bits. Floats therefore only ever take decisions that are provably the exact ones.

The geometric variable of the discrete Laplace sampler (P(V >= k) = e^-k) is drawn with one
64-bit word by comparing it with a table of ⌊e^-k·2**64⌋, k = 1..44, computed once with the
exact interval arithmetic of :func:`statcurator.core.numbers.exp_bounds`; ties with the table
are resolved by the same exact lazy comparison.

>>> import warnings
>>> from fractions import Fraction
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(3):
...         x = discrete_laplace(Fraction(2), size=5)
>>> x.dtype, x.shape
(dtype('int64'), (5,))
>>> isinstance(discrete_gaussian(Fraction(4)), int)
True
"""

from __future__ import annotations

import bisect
import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.numbers import ceil_fraction, exact, exp_bounds, floor_fraction
from . import rng

__all__ = [
    "uniform_int",
    "bernoulli",
    "bernoulli_exp",
    "discrete_laplace",
    "discrete_gaussian",
    "discrete_laplace_reference",
    "discrete_gaussian_reference",
    "bernoulli_exp_reference",
]

_TWO32 = float(2**32)
#: absorbs the rounding of the few float operations that turn a float estimate and its error
#: bound into integer thresholds (each contributes at most 2**-52 for values of size <= 2)
_SLACK = 2.0**-48
#: largest numerator / denominator handled by the vectorized samplers (floats hold them exactly)
_FAST_LIMIT = 2**52
#: tests set this to a probability to send that share of decisions down the exact slow path
_force_fallback = 0.0
#: batch size of the vectorized loops (bounds memory; each batch is independent)
_CHUNK = 1 << 20
#: up to this many draws, the exact integer samplers run one draw at a time (a vectorized
#: batch has fixed costs near 50 µs; one integer draw takes about 7 µs)
_SCALAR_DRAWS = 4


# -- exact lazy comparisons -----------------------------------------------------------------


class _LazyUniform:
    """A uniform U in [0, 1) of which only the first ``bits`` bits (``value``) are drawn.

    U lies in [value/2^bits, (value+1)/2^bits); more bits are drawn only when a comparison
    needs them, so comparisons with any real number are exact and terminate with probability 1.
    """

    __slots__ = ("value", "bits")

    def __init__(self, value: int, bits: int) -> None:
        self.value = value
        self.bits = bits

    def _refine(self) -> None:
        self.value = (self.value << 64) | rng.randbits(64)
        self.bits += 64

    def less_than_rational(self, q: Fraction) -> bool:
        # U < q  <=>  V < q·2^b - value for the uniform V in [0,1) of the undrawn bits
        w = q * (1 << self.bits) - self.value
        if w <= 0:
            return False
        if w >= 1:
            return True
        return rng.randbelow(w.denominator) < w.numerator

    def less_than(self, bounds: Callable[[int], tuple[Fraction, Fraction]]) -> bool:
        """U < c for a real c given by ``bounds(precision) -> (lo, hi)``, lo <= c <= hi."""
        while True:
            lo, hi = bounds(self.bits + 64)
            if lo == hi:
                return self.less_than_rational(lo)
            scale = 1 << self.bits
            if (self.value + 1) <= lo * scale:
                return True
            if self.value >= hi * scale:
                return False
            self._refine()


def _exp_neg_bounds(k: int | Fraction) -> Callable[[int], tuple[Fraction, Fraction]]:
    """Bounds of e^-k at a precision; e^-k < 2^-k, so a huge k is settled without computing it."""

    def bounds(precision: int) -> tuple[Fraction, Fraction]:
        if k >= precision + 2:
            return Fraction(0), Fraction(1, 1 << (precision + 2))
        if isinstance(k, int) or k.denominator == 1:
            return exp_neg_int_bounds(int(k), precision)
        return exp_bounds(-k, precision)

    return bounds


@functools.lru_cache(maxsize=8192)
def exp_neg_int_bounds(k: int, bits: int) -> tuple[Fraction, Fraction]:
    """Cached rational bounds of e^-k for an integer k (see ``exp_bounds``)."""
    return exp_bounds(-k, bits)


# e^-k·2^64, k = 0..44, as exact integers ⌊·⌋ (e^-k is irrational for k >= 1, so U < e^-k is
# certain when u < T_k and impossible when u > T_k)
def _exp_table() -> np.ndarray:
    table = []
    k = 0
    while True:
        lo, hi = exp_bounds(-k, 160)
        t_lo, t_hi = floor_fraction(lo * 2**64), floor_fraction(hi * 2**64)
        if t_lo != t_hi:  # pragma: no cover - 160 bits always separate these
            raise RuntimeError("could not certify the e^-k table")
        if t_lo == 0:
            break
        table.append(min(t_lo, 2**64 - 1))
        k += 1
    return np.array(table, dtype=np.uint64)


_EXP_TABLE = _exp_table()  # _EXP_TABLE[k] = ⌊e^-k·2^64⌋ (k=0 saturates at 2^64 - 1)
_EXP_TABLE_ASC = _EXP_TABLE[1:][::-1].copy()  # k = K..1, ascending


def _forced(n: int) -> np.ndarray:
    if _force_fallback <= 0.0:
        return np.zeros(n, dtype=bool)
    return rng.words32(n) < np.uint32(min(_force_fallback, 1.0) * (2**32 - 1))


# -- Bernoulli ------------------------------------------------------------------------------


def _bernoulli_filtered(q: np.ndarray, err: np.ndarray | float,
                        exact_q: Callable[[int], Fraction]) -> np.ndarray:
    """Exact Bernoulli(q_i) draws from float estimates ``q`` with ``|q - q_exact| <= err``.

    ``exact_q(i)`` returns the exact rational q_i; it is called only for the rare draws the
    float filter cannot decide.
    """
    n = q.shape[0]
    u = rng.words32(n).astype(np.float64)
    slack = err + _SLACK
    lo = np.floor((q - slack) * _TWO32)  # lo <= q_exact·2^32
    hi = np.ceil((q + slack) * _TWO32)  # hi >= q_exact·2^32
    out = u + 1.0 <= lo  # U < (u+1)/2^32 <= q
    undecided = ~out & (u < hi)  # otherwise U >= u/2^32 >= hi/2^32 >= q
    forced = _forced(n)
    if forced.any():
        undecided |= forced
    for i in np.flatnonzero(undecided):
        out[i] = _LazyUniform(int(u[i]), 32).less_than_rational(exact_q(int(i)))
    return out


def _bernoulli_exp_int(k: np.ndarray) -> np.ndarray:
    """Exact Bernoulli(e^-k_i) for integers k_i >= 0: one 64-bit word each."""
    n = k.shape[0]
    u = rng.words64(n)
    kk = np.minimum(k, len(_EXP_TABLE)).astype(np.int64)
    table = np.append(_EXP_TABLE, np.uint64(0))
    t = table[kk]
    out = (u < t) | (k == 0)
    undecided = (u == t) & (k != 0)
    forced = _forced(n) & (k != 0)
    if forced.any():
        undecided |= forced
    for i in np.flatnonzero(undecided):
        out[i] = _LazyUniform(int(u[i]), 64).less_than(_exp_neg_bounds(int(k[i])))
    return out


def _bernoulli_exp_unit(f: np.ndarray, err: np.ndarray,
                        exact_f: Callable[[int], Fraction]) -> np.ndarray:
    """Exact Bernoulli(e^-f_i) for 0 <= f_i <= 1 (CKS Algorithm 1, vectorized).

    K = 1; while Bernoulli(f/K): K += 1; the result is "K is odd", whose probability is
    1 - f + f²/2! - f³/3! + ... = e^-f.
    """
    # round K = 1 on the whole array (most draws stop here), then the shrinking rest
    first = _bernoulli_filtered(f, err + f * 2.0**-51, exact_f)
    result = ~first
    active = np.flatnonzero(first)
    k = 2
    while active.size:
        fa = f[active]
        qa = fa / k
        qerr = err[active] / k + qa * 2.0**-51
        idx = active

        def exact(j: int, idx: np.ndarray = idx, k: int = k) -> Fraction:
            return exact_f(int(idx[j])) / k

        a = _bernoulli_filtered(qa, qerr, exact)
        result[active[~a]] = k % 2 == 1
        active = active[a]
        k += 1
    return result


def _bernoulli_exp_vec(g: np.ndarray, err: np.ndarray,
                       exact_g: Callable[[int], Fraction]) -> np.ndarray:
    """Exact Bernoulli(e^-γ_i) for γ_i >= 0 given float estimates with error bounds.

    e^-γ = e^-⌊γ⌋ · e^-(γ-⌊γ⌋): the integer part uses the e^-k table, the fractional part
    CKS Algorithm 1. ⌊γ⌋ is certified by the error bound or computed exactly.
    """
    n = g.shape[0]
    err = np.broadcast_to(np.asarray(err, dtype=np.float64), (n,))
    huge = ~((g < 2.0**40) & (err < 2.0**20))  # also catches inf and nan estimates
    if huge.any():
        # e^-γ is astronomically small: settle these few draws one by one, exactly
        out = np.zeros(n, dtype=bool)
        for i in np.flatnonzero(huge):
            out[i] = bernoulli_exp_reference(exact_g(int(i)))
        rest = np.flatnonzero(~huge)
        if rest.size:
            out[rest] = _bernoulli_exp_vec(g[rest], err[rest],
                                           lambda j: exact_g(int(rest[j])))
        return out
    k_lo = np.maximum(np.floor(g - err - _SLACK), 0.0)  # γ >= 0 is a precondition
    k_hi = np.floor(g + err + _SLACK)
    k = k_lo.astype(np.int64)  # k <= ⌊γ⌋ <= k + 1
    # where ⌊γ⌋ is not certified (γ within the error of an integer), γ - k lies in [0, 2):
    # draw e^-(γ-k) as two independent Bernoulli(e^-(γ-k)/2), each within CKS's range
    halve = k_lo != k_hi
    out = _bernoulli_exp_int(k)
    alive = np.flatnonzero(out)
    if alive.size:
        h = halve[alive]
        factor = np.where(h, 0.5, 1.0)
        f = (g[alive] - k[alive]) * factor
        ferr = (err[alive] + np.abs(g[alive]) * 2.0**-52) * factor

        def exact_frac(j: int) -> Fraction:
            i = int(alive[j])
            v = exact_g(i) - int(k[i])
            return v / 2 if halve[i] else v

        res = _bernoulli_exp_unit(f, ferr, exact_frac)
        again = np.flatnonzero(res & h)
        if again.size:
            res[again] = _bernoulli_exp_unit(f[again], ferr[again],
                                             lambda t: exact_frac(int(again[t])))
        out[alive] = res
    return out


def _bernoulli_interval(bounds: Callable[[int], tuple[Fraction, Fraction]],
                        n: int) -> np.ndarray:
    """Exact Bernoulli(p) draws for a real p in [0, 1] known through rational bounds.

    ``bounds(precision) -> (lo, hi)`` with lo <= p <= hi and hi - lo about 2^-precision.
    One 64-bit word per draw; the lazy comparison settles the rare ties.
    """
    lo, hi = bounds(128)
    t_lo = max(0, floor_fraction(lo * 2**64))  # u < t_lo  =>  U < p
    t_hi = ceil_fraction(hi * 2**64)  # u >= t_hi  =>  U >= p
    u = rng.words64(n)
    out = u < np.uint64(min(t_lo, 2**64 - 1)) if t_lo > 0 else np.zeros(n, dtype=bool)
    if t_lo > 2**64 - 1:
        out[:] = True
    above = u >= np.uint64(t_hi) if t_hi <= 2**64 - 1 else np.zeros(n, dtype=bool)
    undecided = ~out & ~above
    forced = _forced(n)
    if forced.any():
        undecided |= forced
    for i in np.flatnonzero(undecided):
        out[i] = _LazyUniform(int(u[i]), 64).less_than(bounds)
    return out


def bernoulli(p: object, size: int | None = None) -> bool | np.ndarray:
    """Exact Bernoulli(p) draws for a rational ``0 <= p <= 1``.

    >>> bernoulli(0), bernoulli(1)
    (False, True)
    >>> bernoulli(Fraction(1, 3), size=4).shape
    (4,)
    """
    q = exact(p, "p", allow_zero=True, maximum=1)
    n = 1 if size is None else _size(size)
    out = _bernoulli_filtered(np.full(n, float(q)), abs(float(q)) * 2.0**-52, lambda i: q)
    return bool(out[0]) if size is None else out


def bernoulli_exp(gamma: object, size: int | None = None) -> bool | np.ndarray:
    """Exact Bernoulli(e^-γ) draws for a rational ``γ >= 0``.

    >>> bernoulli_exp(0)
    True
    >>> bernoulli_exp(Fraction(1, 2), size=3).dtype
    dtype('bool')
    """
    g = exact(gamma, "gamma", allow_zero=True)
    n = 1 if size is None else _size(size)
    gf = float(g)
    out = _bernoulli_exp_vec(np.full(n, gf), np.full(n, gf * 2.0**-52), lambda i: g)
    return bool(out[0]) if size is None else out


# -- uniform integers and the geometric -----------------------------------------------------


def uniform_int(n: int, size: int | None = None) -> int | np.ndarray:
    """Uniform integers in ``[0, n)``, exactly (rejection sampling on 64-bit words).

    >>> uniform_int(1, size=3).tolist()
    [0, 0, 0]
    >>> 0 <= uniform_int(10**20) < 10**20
    True
    """
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise InvalidParameterError(f"uniform_int needs an integer n >= 1, got {n!r}",
                                    remedy="pass a positive integer")
    n = int(n)
    if size is None:
        return rng.randbelow(n)
    m = _size(size)
    if n > 2**63:
        return np.array([rng.randbelow(n) for _ in range(m)], dtype=object)
    return _uniform_int_vec(n, m)


def _uniform_int_vec(n: int, m: int) -> np.ndarray:
    if n == 1:
        return np.zeros(m, dtype=np.int64)
    bits = (n - 1).bit_length()
    # rejection sampling on the top `bits` bits of a word (accepts with probability > 1/2)
    if bits <= 32:
        words, shift, limit = rng.words32, np.uint32(32 - bits), np.uint32(n)
    else:
        words, shift, limit = rng.words64, np.uint64(64 - bits), np.uint64(n)
    accept = n / 2.0**bits
    out = np.empty(m, dtype=np.int64)
    filled = 0
    while filled < m:
        want = m - filled
        w = words(int(want / accept * 1.05) + 16) >> shift
        w = w[w < limit][:want]
        out[filled:filled + w.size] = w.astype(np.int64)
        filled += w.size
    return out


def _geometric_exp1(m: int) -> np.ndarray:
    """V with P(V >= k) = e^-k (k = 0, 1, ...): one 64-bit word per draw.

    V = #{k >= 1 : U < e^-k}; the comparisons with the certified table ⌊e^-k·2^64⌋ are exact
    except when u equals a table entry (or is 0), which the lazy comparison settles.
    """
    u = rng.words64(m)
    pos = np.searchsorted(_EXP_TABLE_ASC, u, side="right")
    v = (len(_EXP_TABLE_ASC) - pos).astype(np.int64)
    undecided = (u == 0) | (_EXP_TABLE_ASC[np.maximum(pos - 1, 0)] == u) & (pos > 0)
    forced = _forced(m)
    if forced.any():
        undecided |= forced
    for i in np.flatnonzero(undecided):
        lazy = _LazyUniform(int(u[i]), 64)
        k = 1
        while lazy.less_than(_exp_neg_bounds(k)):
            k += 1
        v[i] = k - 1
    return v


# -- discrete Laplace -----------------------------------------------------------------------


def _scale_parts(scale: object, name: str = "scale") -> tuple[int, int]:
    if type(scale) is Fraction:  # a mechanism's own scale: validated once per value
        return _fraction_parts(scale, name)
    s = exact(scale, name)
    return s.numerator, s.denominator


@functools.lru_cache(maxsize=256)
def _fraction_parts(scale: Fraction, name: str) -> tuple[int, int]:
    s = exact(scale, name)  # (equal Fractions are the same value: the cache cannot confuse)
    return s.numerator, s.denominator


def discrete_laplace(scale: object, size: int | None = None) -> int | np.ndarray:
    """Exact draws from the discrete Laplace law P(x) ∝ exp(-|x|/scale) on the integers.

    ``scale`` is an exact positive rational (ε-DP for an integer query of sensitivity Δ at
    ``scale = Δ/ε``). CKS Algorithm 2, vectorized: for ``scale = t/s``, draw ``U`` uniform in
    [0, t) and keep it with probability e^-U/t, draw the geometric ``V``, and return
    ``±⌊(U + t·V)/s⌋`` (rejecting "-0").

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         draws = discrete_laplace(Fraction(10), size=100_000)
    >>> 13 < float(draws.std()) < 15   # sd = sqrt(2·a)/(1-a), a = e^-1/10: about 14.1
    True
    """
    t, s = _scale_parts(scale)
    if size is None:
        return _dlap_scalar(t, s)
    m = _size(size)
    if m <= _SCALAR_DRAWS:  # a few draws: the integer sampler, without numpy's fixed costs
        return _object_or_int64([_dlap_scalar(t, s) for _ in range(m)])
    if t >= _FAST_LIMIT or s >= _FAST_LIMIT:
        return _object_or_int64([discrete_laplace_reference(Fraction(t, s)) for _ in range(m)])
    out = np.empty(m, dtype=np.int64)
    for start in range(0, m, _CHUNK):
        stop = min(m, start + _CHUNK)
        out[start:stop] = _dlap_vec(t, s, stop - start)
    return out


def _dlap_vec(t: int, s: int, m: int) -> np.ndarray:
    out = np.empty(m, dtype=np.int64)
    filled = 0
    tf = float(t)
    while filled < m:
        want = m - filled
        batch = int(want * 1.9) + 16
        u = _uniform_int_vec(t, batch)
        # keep U with probability e^(-U/t): γ = U/t is correctly rounded (U, t < 2^52)
        g = u / tf
        keep = _bernoulli_exp_unit(g, g * 2.0**-52, lambda j, u=u: Fraction(int(u[j]), t))
        u = u[keep]
        v = _geometric_exp1(u.size)
        if v.size and int(v.max()) > (2**62) // t:  # pragma: no cover - probability < e^-1000
            raise OverflowError("discrete Laplace draw beyond the int64 range")
        y = (u + t * v) // s
        sign = rng.random_bits(y.size)
        valid = ~(sign & (y == 0))
        z = np.where(sign, -y, y)[valid][:want]
        out[filled:filled + z.size] = z
        filled += z.size
    return out


# -- discrete Gaussian ----------------------------------------------------------------------


def discrete_gaussian(sigma2: object, size: int | None = None) -> int | np.ndarray:
    """Exact draws from the discrete Gaussian P(x) ∝ exp(-x²/(2σ²)) on the integers.

    ``sigma2`` is the exact rational σ². CKS Algorithm 3, vectorized: with t = ⌊σ⌋ + 1, draw
    Y from the discrete Laplace of scale t and keep it with probability
    exp(-(|Y| - σ²/t)²/(2σ²)).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         draws = discrete_gaussian(Fraction(100), size=100_000)
    >>> 9.8 < float(draws.std()) < 10.2
    True
    """
    s2 = exact(sigma2, "sigma2")
    t = math.isqrt(floor_fraction(s2)) + 1
    slow = t >= _FAST_LIMIT or s2.numerator.bit_length() > 1000 or s2.denominator.bit_length() > 1000
    if size is None:
        return _dgauss_scalar(s2, t)
    m = _size(size)
    if m <= _SCALAR_DRAWS:
        return _object_or_int64([_dgauss_scalar(s2, t) for _ in range(m)])
    if slow:
        return _object_or_int64([discrete_gaussian_reference(s2) for _ in range(m)])
    out = np.empty(m, dtype=np.int64)
    for start in range(0, m, _CHUNK):
        stop = min(m, start + _CHUNK)
        out[start:stop] = _dgauss_vec(s2, t, stop - start)
    return out


def _dgauss_vec(s2: Fraction, t: int, m: int) -> np.ndarray:
    out = np.empty(m, dtype=np.int64)
    filled = 0
    s2f = float(s2)  # correctly rounded: relative error <= 2^-53
    c_exact = s2 / t
    cf = s2f / t  # relative error <= 2^-52
    while filled < m:
        want = m - filled
        batch = int(want * 1.7) + 16
        y = _dlap_vec(t, 1, batch)
        ay = np.abs(y).astype(np.float64)
        d = ay - cf
        # |d - d_exact| <= 2^-51·c + 2^-53·|d|; then γ = d²/(2σ²) with three more roundings
        ed = (cf + np.abs(d)) * 2.0**-50
        g = d * d / (2.0 * s2f)
        gerr = 4.0 * (2.0 * np.abs(d) + ed) * ed / (2.0 * s2f) + g * 2.0**-49

        def exact_g(j: int, y: np.ndarray = y) -> Fraction:
            return (abs(int(y[j])) - c_exact) ** 2 / (2 * s2)

        keep = _bernoulli_exp_vec(g, gerr, exact_g)
        z = y[keep][:want]
        out[filled:filled + z.size] = z
        filled += z.size
    return out


# -- scalar fast paths (one draw, Python integers only) -------------------------------------


def _bexp_unit_int(num: int, den: int) -> bool:
    """Bernoulli(e^(-num/den)) for 0 <= num <= den: CKS Algorithm 1 on integers."""
    k = 1
    while rng.randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def _bexp_int_scalar(k: int) -> bool:
    """Bernoulli(e^-k) for an integer k >= 0 with one 64-bit word (the e^-k table)."""
    if k == 0:
        return True
    u = rng.randbits(64)
    t = int(_EXP_TABLE[k]) if k < len(_EXP_TABLE) else 0
    if u != t:
        return u < t
    return _LazyUniform(u, 64).less_than(_exp_neg_bounds(k))


def _bexp_rational_scalar(num: int, den: int) -> bool:
    """Bernoulli(e^(-num/den)) for num, den >= 0 integers."""
    whole, rest = divmod(num, den)
    return _bexp_int_scalar(whole) and _bexp_unit_int(rest, den)


def _geometric_scalar() -> int:
    u = rng.randbits(64)
    v = len(_EXP_LIST_ASC) - bisect.bisect_right(_EXP_LIST_ASC, u)  # searchsorted, in C ints
    if u == 0 or u in _EXP_TABLE_SET:
        lazy = _LazyUniform(u, 64)
        k = 1
        while lazy.less_than(_exp_neg_bounds(k)):
            k += 1
        return k - 1
    return v


_EXP_TABLE_SET = frozenset(int(x) for x in _EXP_TABLE[1:])
_EXP_LIST_ASC = [int(x) for x in _EXP_TABLE_ASC]  # the same table as Python integers


def _dlap_scalar(t: int, s: int) -> int:
    """One exact discrete Laplace draw of scale t/s (CKS Algorithm 2, integers only)."""
    while True:
        u = rng.randbelow(t)
        if not _bexp_unit_int(u, t):
            continue
        y = (u + t * _geometric_scalar()) // s
        negative = rng.randbits(1)
        if negative and y == 0:
            continue
        return -y if negative else y


def _dgauss_scalar(s2: Fraction, t: int) -> int:
    """One exact discrete Gaussian draw (CKS Algorithm 3, integers only)."""
    a, b = s2.numerator, s2.denominator
    while True:
        y = _dlap_scalar(t, 1)
        # γ = (|y| - σ²/t)² / (2σ²) = (|y|·b·t - a)² / (2·a·b·t²)
        if _bexp_rational_scalar((abs(y) * b * t - a) ** 2, 2 * a * b * t * t):
            return y


# -- slow reference implementations (Python integers, literal transcriptions of CKS) --------


def bernoulli_exp_reference(gamma: Fraction) -> bool:
    """Bernoulli(e^-γ) exactly, one draw, CKS Algorithm 1 with Python integers.

    >>> bernoulli_exp_reference(Fraction(0))
    True
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise InvalidParameterError("gamma must be >= 0", remedy="pass gamma >= 0")
    while gamma > 1:
        if not bernoulli_exp_reference(Fraction(1)):
            return False
        gamma -= 1
    k = 1
    while True:
        q = gamma / k
        if not rng.randbelow(q.denominator) < q.numerator:
            return k % 2 == 1
        k += 1


def discrete_laplace_reference(scale: Fraction) -> int:
    """One exact discrete Laplace draw with Python integers (CKS Algorithm 2).

    Used for parameters too large for the vectorized sampler, and to cross-check it.

    >>> isinstance(discrete_laplace_reference(Fraction(3, 2)), int)
    True
    """
    t, s = Fraction(scale).numerator, Fraction(scale).denominator
    while True:
        u = rng.randbelow(t)
        if not bernoulli_exp_reference(Fraction(u, t)):
            continue
        v = 0
        while bernoulli_exp_reference(Fraction(1)):
            v += 1
        y = (u + t * v) // s
        b = rng.randbits(1)
        if b and y == 0:
            continue
        return -y if b else y


def discrete_gaussian_reference(sigma2: Fraction) -> int:
    """One exact discrete Gaussian draw with Python integers (CKS Algorithm 3).

    >>> isinstance(discrete_gaussian_reference(Fraction(2)), int)
    True
    """
    s2 = Fraction(sigma2)
    t = math.isqrt(floor_fraction(s2)) + 1
    while True:
        y = discrete_laplace_reference(Fraction(t))
        if bernoulli_exp_reference((abs(y) - s2 / t) ** 2 / (2 * s2)):
            return y


# -- helpers --------------------------------------------------------------------------------


def _size(size: object) -> int:
    if isinstance(size, bool) or not isinstance(size, int | np.integer) or size < 0:
        raise InvalidParameterError(f"size must be a non-negative integer, got {size!r}",
                                    remedy="pass size=1000 (or None for one draw)")
    return int(size)


def _object_or_int64(values: Sequence[int]) -> np.ndarray:
    if all(-(2**63) <= v < 2**63 for v in values):
        return np.array(values, dtype=np.int64)
    return np.array(values, dtype=object)
