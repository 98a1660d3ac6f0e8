"""Privacy losses: the values that measure what a release costs.

Three standard definitions, each an exact, frozen value:

* :class:`PureDP` — ε-differential privacy (Dwork, McSherry, Nissim, Smith 2006);
* :class:`ApproxDP` — (ε, δ)-differential privacy;
* :class:`ZCDP` — ρ-zero-concentrated DP (Bun & Steinke 2016), the natural currency of
  Gaussian noise.

``a + b`` is sequential (basic) composition; ``a.fits(b)`` says whether loss ``a`` is within
budget ``b``. Conversions go only in the valid direction: ε-DP ⇒ (ε²/2)-zCDP ⇒ (ε', δ)-DP.

>>> PureDP(Fraction(1, 10)) + PureDP(Fraction(1, 5))
PureDP(epsilon=Fraction(3, 10))
>>> PureDP(1) + ApproxDP(1, Fraction(1, 10**6))
ApproxDP(epsilon=Fraction(2, 1), delta=Fraction(1, 1000000))
>>> PureDP(1).to_zcdp()
ZCDP(rho=Fraction(1, 2))
>>> PureDP(1).fits(ApproxDP(2, 0))
True
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

from .errors import InvalidParameterError
from .numbers import (
    MAX_BITS,
    exact,
    exact_probability,
    exp_bounds,
    ln_bounds,
    round_up,
    sqrt_bounds,
)

__all__ = ["PrivacyLoss", "PureDP", "ApproxDP", "ZCDP", "loss_from_parameters", "ZERO"]


class PrivacyLoss:
    """Base of the privacy-loss values. Subclasses are frozen dataclasses of Fractions.

    >>> isinstance(PureDP(1), PrivacyLoss), PureDP(0).is_zero()
    (True, True)
    """

    __slots__ = ()

    # -- composition --------------------------------------------------------------------
    def __add__(self, other: PrivacyLoss) -> PrivacyLoss:
        return compose(self, other)

    def __radd__(self, other: object) -> PrivacyLoss:
        if other == 0:  # lets sum() start from 0
            return self
        return NotImplemented

    def scale(self, k: int | Fraction) -> PrivacyLoss:
        """The loss of ``k`` sequential repetitions (or of group privacy for pure DP)."""
        raise NotImplementedError

    def group(self, k: int) -> PrivacyLoss:
        """Group privacy: the loss towards datasets that differ in ``k`` privacy units.

        Pure ε-DP gives kε; (ε, δ)-DP gives (kε, k·e^((k-1)ε)·δ); ρ-zCDP gives k²ρ
        (Dwork & Roth 2014, Thm 2.2; Bun & Steinke 2016, Prop. 1.9).

        >>> PureDP(Fraction(1, 10)).group(3)
        PureDP(epsilon=Fraction(3, 10))
        >>> ZCDP(Fraction(1, 8)).group(2)
        ZCDP(rho=Fraction(1, 2))
        """
        raise NotImplementedError

    # -- comparison with a budget ---------------------------------------------------------
    def fits(self, budget: PrivacyLoss) -> bool:
        """True when this loss is at most ``budget`` (component-wise, after valid conversion)."""
        a, b = _common(self, budget)
        return all(x <= y for x, y in zip(a._components(), b._components(), strict=True))

    def _components(self) -> tuple[Fraction, ...]:
        raise NotImplementedError

    def is_zero(self) -> bool:
        """True for the loss of releasing nothing (every component is 0)."""
        return all(c == 0 for c in self._components())


@dataclass(frozen=True, slots=True)
class PureDP(PrivacyLoss):
    """ε-differential privacy.

    >>> PureDP(0.5).epsilon
    Fraction(1, 2)
    >>> PureDP(1).scale(3)
    PureDP(epsilon=Fraction(3, 1))
    """

    epsilon: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon", allow_zero=True))

    def scale(self, k: int | Fraction) -> PureDP:
        """kε: k sequential repetitions."""
        return PureDP(self.epsilon * exact(k, "k", allow_zero=True))

    def group(self, k: int) -> PureDP:
        """kε for groups of k units."""
        return PureDP(self.epsilon * _group_size(k))

    def to_approx(self) -> ApproxDP:
        """(ε, 0)-DP."""
        return ApproxDP(self.epsilon, Fraction(0))

    def to_zcdp(self) -> ZCDP:
        """ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4)."""
        return ZCDP(self.epsilon**2 / 2)

    def _components(self) -> tuple[Fraction, ...]:
        return (self.epsilon,)

    def __str__(self) -> str:
        return f"ε={_fmt(self.epsilon)}"


@dataclass(frozen=True, slots=True)
class ApproxDP(PrivacyLoss):
    """(ε, δ)-differential privacy.

    >>> str(ApproxDP(1, 1e-6))
    'ε=1, δ=1e-06'
    """

    epsilon: Fraction
    delta: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon", allow_zero=True))
        object.__setattr__(self, "delta", exact_probability(self.delta, "delta"))

    def scale(self, k: int | Fraction) -> ApproxDP:
        """(kε, kδ): k sequential repetitions (basic composition)."""
        k = exact(k, "k", allow_zero=True)
        return ApproxDP(self.epsilon * k, min(self.delta * k, _ALMOST_ONE))

    def group(self, k: int) -> ApproxDP:
        """(kε, k·e^((k-1)ε)·δ), δ rounded up.

        >>> ApproxDP(Fraction(1, 10), Fraction(1, 10**6)).group(1)
        ApproxDP(epsilon=Fraction(1, 10), delta=Fraction(1, 1000000))
        >>> float(ApproxDP(1, 1e-6).group(2).delta)    # 2·e·1e-6
        5.43656365...e-06
        """
        n = _group_size(k)
        if n <= 1 or self.delta == 0:
            return ApproxDP(self.epsilon * n, self.delta * min(n, 1) if n <= 1 else 0)
        factor = exp_bounds((n - 1) * self.epsilon, 64)[1]
        delta = round_up(n * factor * self.delta, bits=min(MAX_BITS - 8, 128))
        return ApproxDP(self.epsilon * n, min(delta, _ALMOST_ONE))

    def to_approx(self) -> ApproxDP:
        """Itself."""
        return self

    def _components(self) -> tuple[Fraction, ...]:
        return (self.epsilon, self.delta)

    def __str__(self) -> str:
        return f"ε={_fmt(self.epsilon)}, δ={_fmt(self.delta)}"


@dataclass(frozen=True, slots=True)
class ZCDP(PrivacyLoss):
    """ρ-zero-concentrated differential privacy.

    >>> ZCDP(Fraction(1, 2)).to_approx(Fraction(1, 10**6)).epsilon > 3
    True
    """

    rho: Fraction

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", exact(self.rho, "rho", allow_zero=True))

    def scale(self, k: int | Fraction) -> ZCDP:
        """kρ: k sequential repetitions."""
        return ZCDP(self.rho * exact(k, "k", allow_zero=True))

    def group(self, k: int) -> ZCDP:
        """k²ρ for groups of k units."""
        return ZCDP(self.rho * _group_size(k) ** 2)

    def to_zcdp(self) -> ZCDP:
        """Itself."""
        return self

    def to_approx(self, delta: Fraction | float | None = None) -> ApproxDP:
        """(ε, δ)-DP implied by ρ-zCDP, for the given δ.

        ε is the smaller of two valid bounds: Bun & Steinke (2016, Prop. 1.3),
        ε = ρ + 2·sqrt(ρ·ln(1/δ)), and the tighter Canonne, Kamath & Steinke (2020, Cor. 13),
        ε = αρ + (ln(1/δ) + (α-1)·ln(1-1/α) - ln α)/(α-1) at a good α > 1. Both are evaluated
        with exact interval arithmetic (:func:`~statcurator.core.numbers.ln_bounds`) and
        rounded *up*, so the conversion never under-states the loss; no float enters ε (a
        float only suggests which α to try, and any α > 1 gives a valid bound).

        >>> ZCDP(Fraction(1, 2)).to_approx(Fraction(1, 10**6)).epsilon > 3
        True
        >>> eps = float(ZCDP(Fraction(1, 2)).to_approx(1e-6).epsilon)
        >>> 5.2 < eps < 5.3 < 0.5 + 2 * (0.5 * 13.8155) ** 0.5    # CKS beats Bun–Steinke
        True
        """
        if delta is None:
            raise InvalidParameterError(
                "converting zCDP to (ε, δ)-DP needs a δ",
                remedy="pass delta=1e-6 (or the δ of your budget)")
        d = exact_probability(delta, "delta", allow_zero=False)
        if self.rho == 0:
            return ApproxDP(0, d)
        return ApproxDP(_zcdp_epsilon(self.rho, d), d)

    def epsilon(self, delta: Fraction | float) -> Fraction:
        """The ε of :meth:`to_approx` (a conservative upper bound).

        >>> round(float(ZCDP(Fraction(1, 8)).epsilon(1e-5)), 4)
        2.1657
        """
        return self.to_approx(delta).epsilon

    def _components(self) -> tuple[Fraction, ...]:
        return (self.rho,)

    def __str__(self) -> str:
        return f"ρ={_fmt(self.rho)}"


ZERO = PureDP(0)
_ALMOST_ONE = Fraction(1) - Fraction(1, 2**64)


def _group_size(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidParameterError(f"a group size must be a non-negative integer, got {k!r}",
                                    remedy="pass the number of privacy units, e.g. group(2)")
    return k


#: bits of the binary fractions that irrational costs are rounded up to
_COST_BITS = 48


@functools.lru_cache(maxsize=4096)
def _zcdp_epsilon(rho: Fraction, delta: Fraction) -> Fraction:
    """A rigorous upper bound of the ε of ρ-zCDP at δ (see ZCDP.to_approx)."""
    bits = 80
    log_inv_delta = ln_bounds(1 / delta, bits)[1]
    # Bun & Steinke: ρ + 2·sqrt(ρ·ln(1/δ))
    best = rho + 2 * sqrt_bounds(rho * log_inv_delta, bits)[1]
    # Canonne, Kamath & Steinke: minimise over α > 1; a float search suggests α
    alpha = _suggest_alpha(float(rho), float(log_inv_delta))
    if alpha is not None:
        a = Fraction(alpha).limit_denominator(1 << 32)
        if a > 1:
            num = (log_inv_delta + (a - 1) * ln_bounds(1 - 1 / a, bits)[1]
                   - ln_bounds(a, bits)[0])
            cks = a * rho + num / (a - 1)
            best = min(best, cks)
    # a negative bound means δ(0) <= δ already (δ(ε) decreases in ε): ε = 0 is valid
    return round_up(max(best, Fraction(0)), bits=_COST_BITS)


def _suggest_alpha(rho: float, log_inv_delta: float) -> float | None:
    """The α minimising the CKS bound, by golden-section search on log(α - 1)."""

    def f(t: float) -> float:
        a = 1.0 + math.exp(t)
        return a * rho + (log_inv_delta + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)

    lo, hi = -20.0, 60.0
    try:
        grid = [lo + i * (hi - lo) / 200 for i in range(201)]
        values = [f(t) for t in grid]
    except (OverflowError, ValueError):
        return None
    i = min(range(len(values)), key=values.__getitem__)
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    phi = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        m1, m2 = hi - phi * (hi - lo), lo + phi * (hi - lo)
        if f(m1) < f(m2):
            hi = m2
        else:
            lo = m1
    alpha = 1.0 + math.exp((lo + hi) / 2)
    return alpha if math.isfinite(alpha) else None


def _fmt(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    f = float(x)
    return f"{f:.6g}" if Fraction(repr(f)) != x else repr(f)


def _common(a: PrivacyLoss, b: PrivacyLoss) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Bring two losses to one definition, converting only in the valid direction."""
    if type(a) is type(b):
        return a, b
    kinds = {type(a), type(b)}
    if kinds == {PureDP, ApproxDP}:
        return a.to_approx(), b.to_approx()  # type: ignore[attr-defined]
    if kinds == {PureDP, ZCDP}:
        return a.to_zcdp(), b.to_zcdp()  # type: ignore[attr-defined]
    raise InvalidParameterError(
        f"cannot combine a {type(a).__name__} loss with a {type(b).__name__} loss directly",
        remedy="convert the zCDP loss with .to_approx(delta) first, "
               "or keep Gaussian (zCDP) and (ε, δ) work under separate budgets")


def compose(a: PrivacyLoss, b: PrivacyLoss) -> PrivacyLoss:
    """Sequential composition: losses add (basic composition).

    >>> compose(ZCDP(Fraction(1, 8)), PureDP(Fraction(1, 2)))
    ZCDP(rho=Fraction(1, 4))
    """
    if not isinstance(a, PrivacyLoss) or not isinstance(b, PrivacyLoss):
        return NotImplemented  # type: ignore[return-value]
    x, y = _common(a, b)
    # the sum of validated losses is exact and legitimate even when its denominator outgrows
    # the MAX_BITS guard on *parameters* (many charges with unrelated denominators)
    if isinstance(x, PureDP):
        return _derived(PureDP, x.epsilon + y.epsilon)  # type: ignore[attr-defined]
    if isinstance(x, ApproxDP):
        return _derived(ApproxDP, x.epsilon + y.epsilon,  # type: ignore[attr-defined]
                        min(x.delta + y.delta, _ALMOST_ONE))  # type: ignore[attr-defined]
    return _derived(ZCDP, x.rho + y.rho)  # type: ignore[attr-defined]


def _derived(cls: type[PrivacyLoss], *components: Fraction) -> PrivacyLoss:
    """A loss computed exactly from validated losses: no re-validation of its size."""
    obj = object.__new__(cls)
    for name, value in zip(cls.__dataclass_fields__, components, strict=True):  # type: ignore[attr-defined]
        object.__setattr__(obj, name, value)
    return obj


def loss_from_parameters(epsilon: object = None, delta: object = None, rho: object = None,
                         *, strings: bool = False) -> PrivacyLoss:
    """The loss a user asks for, from the usual keyword parameters.

    >>> loss_from_parameters(epsilon=1)
    PureDP(epsilon=Fraction(1, 1))
    >>> loss_from_parameters(epsilon="0.5", delta="1e-6", strings=True)
    ApproxDP(epsilon=Fraction(1, 2), delta=Fraction(1, 1000000))
    >>> loss_from_parameters(rho=0.125)
    ZCDP(rho=Fraction(1, 8))
    """
    if rho is not None:
        if epsilon is not None:
            raise InvalidParameterError("give either rho or epsilon, not both",
                                        remedy="use rho for Gaussian (zCDP) work, epsilon otherwise")
        return ZCDP(exact(rho, "rho", strings=strings))
    if epsilon is None:
        raise InvalidParameterError("no privacy parameter given", remedy="pass epsilon=1 (or rho=...)")
    eps = exact(epsilon, "epsilon", strings=strings)
    if delta is None:
        return PureDP(eps)
    d = exact_probability(delta, "delta", strings=strings)
    return PureDP(eps) if d == 0 else ApproxDP(eps, d)
