"""Noise calibrated to smooth sensitivity (Nissim, Raskhodnikova & Smith 2007), exactly.

The local sensitivity of a statistic (the median, a trimmed mean, a triangle count) is
often far below its global sensitivity, but noise proportional to it leaks. NRS show that
noise proportional to a **β-smooth upper bound** S of the local sensitivity — S(x) >= LS(x)
and S(x) <= e^β·S(x') for neighbours — is private when the noise law is *admissible*:
shifting it by α·S and dilating it by e^±β changes probabilities by at most e^(ε/2)-ish.

This module releases ``f(x) + noise`` on a public grid of step g with **discrete** noise of
scale ``t = S_g(x)/α`` grid units, where ``S_g = S/g + c`` (c = 64 units absorbs the
rounding of f(x) to the grid and keeps t away from 0), sampled exactly from the secure
generator. Two laws, each with its own proof, carried out for the discrete law (the
continuous lemmas of NRS do not apply to lattices as such):

* ``"cauchy"`` — pure ε-DP with the heavy-tailed law P(k) ∝ 1/(1 + (k/t)^4) (NRS's
  "Cauchy-like" family with γ = 4). With u = k - F the privacy loss between neighbours is
  at most (normalization) β + 2u₀/(1-u₀), u₀ = α/(cI), I = ∫dz/(1+z⁴) = π/√2, because
  tI - 1 <= Σ_k 1/(1+(k/t)^4) <= tI + 1; (dilation) 4β, since
  |ln(1+z⁴e^(-4λ)) - ln(1+z⁴)| <= 4|λ|; (sliding) 3^(3/4)·α·e^β, the Lipschitz constant of
  ln(1+z⁴) times the shift |F - F'|/t' <= S_g/t' <= α·e^β. With β = ε/10 the loss is
  ε/2 + 3^(3/4)αe^β + 2u₀/(1-u₀) = ε for the α computed here, **for every output**.
* ``"laplace"`` — (ε, δ)-DP with discrete Laplace noise of scale t: the loss is at most
  β + αe^β + (e^β - 1)|u|/t, and |u|/t <= T = ln(2/δ) except with probability δ. With
  β = ε/(4T) the loss is ε outside an event of probability δ.

All parameters are exact rationals, bounded in the conservative direction (the upper bound
of e^β, of ln(2/δ), of 3^(3/4); the lower bound of π/√2), and S is taken as a rigorous
float upper bound within a relative 2^-30 of itself, which is accounted for as an extra
2^-30 of smoothness (``SLACK``).

>>> m = SmoothSensitivityMechanism(epsilon=1)
>>> m.beta, round(float(m.alpha), 3)       # noise scale S/α ≈ 5.2·S/ε
(Fraction(1, 10), 0.193)
>>> m.cost
PureDP(epsilon=Fraction(1, 1))
>>> SmoothSensitivityMechanism(epsilon=1, delta=1e-6, noise="laplace").cost
ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import ApproxDP, PrivacyLoss, PureDP
from ..core.numbers import exact, exact_probability, exp_bounds, ln_bounds
from . import rng, samplers
from ._base import (
    OnGrid,
    add_units,
    as_alpha,
    dlap_halfwidth,
    from_grid_units,
    grid_value,
    smallest_integer,
    to_grid_units,
)
from .samplers import _bernoulli_filtered

__all__ = ["SmoothSensitivityMechanism", "discrete_heavy_tailed", "smooth_upper_bound",
           "HEAVY_TAILED_LIMIT",
           "heavy_tailed_tail", "SLACK", "NOISES"]

#: the extra smoothness that pays for rounding S (and the scale) up to a rational
SLACK = Fraction(1, 2**30)
#: 3^(3/4) = 2.27950..., rounded up: the Lipschitz constant of ln(1 + z^4)
_LIP = Fraction(228, 100)
#: π/√2 = 2.221441..., rounded down: ∫ dz / (1 + z^4) over the real line
_I = Fraction(22214, 10000)
#: grid units added to S/g (covers the rounding of f to the grid; keeps the scale >= c/α)
FLOOR_UNITS = 64
NOISES = ("cauchy", "laplace")


@functools.lru_cache(maxsize=256)
def _parameters(epsilon: Fraction, delta: Fraction, noise: str) -> tuple[Fraction, Fraction]:
    """(β, α) with a provable loss of at most ε (and δ for "laplace")."""
    if noise == "cauchy":
        beta = epsilon / 10
        b = beta + SLACK
        e_b = exp_bounds(b, 64)[1]
        u0 = epsilon / (FLOOR_UNITS * _I)  # α <= ε below, so u = α/(cI) <= u0
        if u0 >= Fraction(1, 2):
            raise InvalidParameterError(f"epsilon={epsilon} is too large for smooth "
                                        "sensitivity noise", remedy="use epsilon <= 10")
        room = epsilon - 5 * b - 2 * u0 / (1 - u0)
        alpha = room / (_LIP * e_b)
    else:
        t_hi = ln_bounds(2 / delta, 64)[1]
        beta = epsilon / (4 * t_hi)
        b = beta + SLACK
        e_b = exp_bounds(b, 64)[1]
        alpha = (epsilon - b - (e_b - 1) * t_hi) / e_b
    if alpha <= 0:
        raise InvalidParameterError(f"epsilon={epsilon} is too small for smooth sensitivity",
                                    remedy="use a larger epsilon (or a larger delta)")
    return beta, _round_down(alpha)


def _round_down(x: Fraction, bits: int = 40) -> Fraction:
    """x rounded down to ``bits`` significant bits (a smaller α only adds noise)."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    scale = Fraction(2) ** (bits - e)
    return Fraction(math.floor(x * scale)) / scale


def _round_up_sig(x: Fraction, bits: int = 40) -> Fraction:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    scale = Fraction(2) ** (bits - e)
    return Fraction(math.ceil(x * scale)) / scale


@dataclass(frozen=True)
class SmoothSensitivityMechanism(OnGrid):
    """Release ``f(x)`` with noise of scale S(x)/α for a β-smooth bound S (see the module).

    ``epsilon`` (and ``delta`` for ``noise="laplace"``) is the loss of one release towards
    datasets at distance 1 *of the relation S is smooth for*; ``beta`` is the smoothness
    the bound must be computed with (:func:`smooth_upper_bound`); ``grid`` the public
    output grid (None: integers). The noise scale depends on the data through S, so it is
    private: the mechanism does not report it.

    >>> import warnings
    >>> m = SmoothSensitivityMechanism(epsilon=1, grid=Fraction(1, 1024))
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(1):
    ...         out = m.release(Fraction(37), Fraction(1, 4), size=1000)
    >>> 36 < float(np.median(out)) < 38
    True
    """

    epsilon: Fraction
    delta: Fraction = Fraction(0)
    grid: Fraction | None = None
    noise: str = "cauchy"

    name = "smooth-sensitivity"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon", maximum=10))
        object.__setattr__(self, "delta", exact_probability(self.delta, "delta"))
        object.__setattr__(self, "grid", grid_value(self.grid))
        if self.noise not in NOISES:
            raise InvalidParameterError(f"unknown smooth-sensitivity noise {self.noise!r}",
                                        remedy="use noise='cauchy' (pure ε) or 'laplace' "
                                               "(with delta)")
        if self.noise == "laplace" and self.delta == 0:
            raise InvalidParameterError("Laplace noise with smooth sensitivity needs delta > 0",
                                        remedy="pass delta=1e-6, or noise='cauchy' for pure ε")
        if self.noise == "cauchy" and self.delta != 0:
            raise InvalidParameterError("the heavy-tailed (Cauchy-like) noise is pure ε-DP",
                                        remedy="drop delta, or use noise='laplace'")

    @property
    def beta(self) -> Fraction:
        """The smoothness β the bound S must have."""
        return _parameters(self.epsilon, self.delta, self.noise)[0]

    @property
    def alpha(self) -> Fraction:
        """The noise scale is S/α (grid units: (S/g + 64)/α)."""
        return _parameters(self.epsilon, self.delta, self.noise)[1]

    @property
    def cost(self) -> PrivacyLoss:
        """PureDP(ε) for "cauchy", ApproxDP(ε, δ) for "laplace"."""
        return PureDP(self.epsilon) if self.noise == "cauchy" else ApproxDP(self.epsilon,
                                                                            self.delta)

    def noise_scale(self, smooth: Fraction) -> Fraction:
        """The noise scale t in grid units for a smooth bound S (a private quantity)."""
        s = exact(smooth, "smooth sensitivity", allow_zero=True)
        return _round_up_sig((s / self.step + FLOOR_UNITS) / self.alpha)

    def release(self, value: object, smooth: object, size: int | None = None) -> Any:
        """``value`` + noise of scale S/α on the grid (a Fraction; float64 array for ``size``)."""
        t = self.noise_scale(exact(smooth, "smooth sensitivity", allow_zero=True))
        units = to_grid_units(value, self.step)
        if self.noise == "cauchy":
            noise = discrete_heavy_tailed(t, 1 if size is None else size)
        else:
            noise = samplers.discrete_laplace(t, 1 if size is None else size)
        if size is None:
            out = units + int(noise[0])
            return out if self.grid is None else out * self.step
        noisy = add_units(units, noise)
        return noisy if self.grid is None else from_grid_units(noisy, self.step)

    def accuracy(self, smooth: object, alpha: object = Fraction(1, 20)) -> float:
        """Half-width h with P(|noise| > h) <= alpha at the smooth bound S (data-dependent:
        for planning and benchmarks, not for release)."""
        t = self.noise_scale(exact(smooth, "smooth sensitivity", allow_zero=True))
        a = as_alpha(alpha)
        if self.noise == "laplace":
            return float(dlap_halfwidth(t, a) * self.step)
        return float(heavy_tailed_halfwidth(t, a) * self.step)


# -- the heavy-tailed law P(k) ∝ 1/(1 + (k/t)^4) ----------------------------------------------


def heavy_tailed_tail(t: Fraction, h: int) -> Fraction:
    """A rational upper bound of P(|N| > h) for P(N = k) ∝ 1/(1 + (k/t)^4), h >= 0.

    Σ_{k>h} w(k) <= ∫_h^∞ (t/x)^4 dx = t^4/(3h^3) and Z >= tI - 1, so
    P(|N| > h) <= 2t^4/(3h^3(tI - 1)).

    >>> float(heavy_tailed_tail(Fraction(100), 200)) < 0.04
    True
    """
    if h <= 0:
        return Fraction(1)
    z = t * _I - 1
    if z <= 0:
        return Fraction(1)
    return min(Fraction(1), 2 * t**4 / (3 * Fraction(h) ** 3 * z))


def heavy_tailed_halfwidth(t: Fraction, alpha: Fraction) -> int:
    """The smallest h with :func:`heavy_tailed_tail` <= alpha."""
    guess = math.ceil(float(t) * (2 / (3 * float(_I) * float(alpha))) ** (1 / 3))
    return smallest_integer(lambda h: heavy_tailed_tail(t, h) <= alpha, max(guess, 1), 1)


#: the largest noise scale (in grid units) :func:`discrete_heavy_tailed` draws; a caller whose
#: scale depends on the data checks its largest possible scale against it before charging
HEAVY_TAILED_LIMIT = 2**40


def discrete_heavy_tailed(scale: object, size: int) -> np.ndarray:
    """Exact draws of N with P(N = k) ∝ 1/(1 + (k/t)^4) on the integers (t = ``scale``).

    Rejection from an envelope that the exact samplers draw directly: with T = ⌈t⌉, weight 1
    on |k| < T and 16^-j on the shell T·2^j <= |k| < T·2^(j+1) (which bounds 1/(1+(k/t)^4)
    there); the shell is a geometric choice (three fair bits per trial), the point a uniform
    integer, and the acceptance an exact Bernoulli of the rational ratio target/envelope.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         x = discrete_heavy_tailed(Fraction(10), 200_000)
    >>> 0.79 < float(np.mean(np.abs(x) <= 10)) < 0.81    # P(|N| <= t) = 0.802 at t = 10
    True
    """
    t = exact(scale, "scale")
    m = samplers._size(size)
    big_t = -((-t.numerator) // t.denominator)  # ⌈t⌉
    if big_t >= HEAVY_TAILED_LIMIT:
        raise InvalidParameterError(f"a noise scale of {float(t):.3g} grid units is too large",
                                    remedy="use a coarser grid")
    p4, q = t.numerator ** 4, t.denominator
    tf = float(t)
    center = Fraction(7 * (2 * big_t - 1), 7 * (2 * big_t - 1) + 16 * big_t)
    out = np.empty(m, dtype=np.int64)
    filled = 0
    while filled < m:
        want = m - filled
        batch = int(want * 2.2) + 16
        in_center = samplers.bernoulli(center, size=batch)
        j = np.zeros(batch, dtype=np.int64)
        active = np.flatnonzero(~in_center)
        while active.size:  # geometric: P(j) = (7/8)(1/8)^j, "three ones" has probability 1/8
            more = (rng.words32(active.size) & np.uint32(7)) == 7
            j[active[more]] += 1
            active = active[more]
        if int(j.max(initial=0)) >= 20:  # pragma: no cover - probability 8^-20 per draw
            raise OverflowError("heavy-tailed draw beyond the supported range")
        low = np.where(in_center, 0, big_t << j)
        width = np.where(in_center, 2 * big_t - 1, big_t << j)
        k = low + _uniform_below(width)
        k = np.where(in_center, k - (big_t - 1), k)
        sign = rng.random_bits(batch)
        k = np.where(~in_center & sign, -k, k)
        # accept with probability 16^j / (1 + (k/t)^4), exactly
        z = np.abs(k).astype(np.float64) / tf
        z4 = z * z * z * z
        with np.errstate(over="ignore"):
            prob = np.ldexp(1.0, 4 * j) / (1.0 + z4)
        err = prob * 2.0**-45 + 2.0**-1000

        def exact_p(i: int, k: np.ndarray = k, j: np.ndarray = j) -> Fraction:
            kq4 = (int(k[i]) * q) ** 4
            return Fraction(16 ** int(j[i]) * p4, p4 + kq4)

        keep = _bernoulli_filtered(np.minimum(prob, 1.0), err, exact_p)
        got = k[keep][:want]
        out[filled:filled + got.size] = got
        filled += got.size
    return out


def _uniform_below(n: np.ndarray) -> np.ndarray:
    """Uniform integers in [0, n_i) for an int64 array 1 <= n < 2^62 (rejection on words)."""
    out = np.zeros(n.shape[0], dtype=np.int64)
    todo = np.flatnonzero(n > 1)
    while todo.size:
        nn = n[todo].astype(np.uint64)
        bits = np.array([int(v - 1).bit_length() for v in n[todo].tolist()], dtype=np.uint64)
        w = rng.words64(todo.size) >> (np.uint64(64) - bits)
        ok = w < nn
        out[todo[ok]] = w[ok].astype(np.int64)
        todo = todo[~ok]
    return out


# -- the smooth bound --------------------------------------------------------------------------


def smooth_upper_bound(local_at_distance: Callable[[np.ndarray], np.ndarray], beta: Fraction,
                       cap: float, kmax: int, chunk: int = 4096) -> Fraction:
    """S = max_k e^(-βk)·U(k), as a rational upper bound within a relative 2^-30.

    ``local_at_distance(ks)`` returns float upper bounds of U(k) for an array of distances
    k (U(0) >= the local sensitivity, U(k) <= U(k+1) at every neighbour — the condition
    under which the maximum is β-smooth, NRS Prop. 3.2); ``cap`` bounds every U(k), so the
    scan stops once e^(-βk)·cap is below the best value found; ``kmax`` is the last distance
    with a new value (U is constant beyond).

    e^(-βk) is an upward-rounded product of a rigorous bound of e^(-β) (each IEEE product
    is correctly rounded, so (k+1)·2^-52 relative covers them all).

    >>> float(smooth_upper_bound(lambda k: 1.0 + k, Fraction(1), 100.0, 1000)) > 1.0
    True
    """
    r = float(exp_bounds(-beta - SLACK / 2, 64)[1]) * (1 + 2.0**-52)
    best = 0.0
    k0 = 0
    start = 1.0
    while k0 <= kmax:
        ks = np.arange(k0, min(k0 + chunk, kmax + 1), dtype=np.int64)
        factors = start * np.cumprod(np.concatenate([[1.0], np.full(ks.size - 1, r)]))
        start = float(factors[-1]) * r
        up = factors * (1 + (ks + 2).astype(np.float64) * 2.0**-52)
        u = np.asarray(local_at_distance(ks), dtype=np.float64) * (1 + 2.0**-50)
        best = max(best, float((up * u).max()))
        k0 = int(ks[-1]) + 1
        if start * cap * (1 + 2.0**-40) <= best:
            break
    return _round_up_sig(Fraction(best) * (1 + Fraction(1, 2**34)), 40) if best > 0 \
        else Fraction(0)


# -- continuous noise at float resolution (objective perturbation) ----------------------------

#: the relative resolution of :func:`exponential_float` and :func:`ball_noise`: their laws
#: are those of the continuous ones up to a density factor within e^(±2^-30), which the
#: objective-perturbation calibration pays for (``FLOAT_NOISE_SLACK``)
FLOAT_NOISE_SLACK = Fraction(1, 2**20)


def exponential_float(size: int) -> np.ndarray:
    """Exp(1) draws at float resolution, from exact pieces: an exact geometric integer
    part (P(V >= k) = e^-k), a fractional cell J/2^32 drawn exactly with probability
    ∝ e^(-J/2^32), and uniform bits inside the cell. The density is e^-x up to a factor
    e^(±2^-32) (constant on cells of width 2^-32).

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         e = exponential_float(100_000)
    >>> 0.99 < float(e.mean()) < 1.01
    True
    """
    m = samplers._size(size)
    out = np.empty(m, dtype=np.float64)
    filled = 0
    while filled < m:
        want = m - filled
        batch = int(want * 1.7) + 16
        j = rng.words32(batch).astype(np.float64)
        g = np.ldexp(j, -32)  # exact
        keep = samplers._bernoulli_exp_vec(g, np.zeros(batch),
                                           lambda i, j=j: Fraction(int(j[i]), 2**32))
        j = j[keep][:want]
        v = samplers._geometric_exp1(j.size).astype(np.float64)
        frac = np.ldexp(j + np.ldexp(rng.words32(j.size).astype(np.float64), -32), -32)
        out[filled:filled + j.size] = v + frac
        filled += j.size
    return out


def ball_noise(dimension: int, rate: Fraction) -> np.ndarray:
    """A vector b in R^d with density ∝ exp(-rate·‖b‖) (Chaudhuri, Monteleoni & Sarwate
    2011): its norm is Gamma(d, 1/rate) (a sum of d exponentials), its direction uniform
    (a discrete Gaussian vector of σ = 2^40, normalized).

    >>> ball_noise(3, Fraction(1)).shape
    (3,)
    """
    if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1:
        raise InvalidParameterError("the dimension must be a positive integer",
                                    remedy="pass dimension=2")
    r = exact(rate, "rate")
    norm = float(exponential_float(dimension).sum()) / float(r)
    while True:
        g = samplers.discrete_gaussian(Fraction(2**80), dimension).astype(np.float64)
        length = float(np.linalg.norm(g))
        if length > 0:
            return g / length * norm
