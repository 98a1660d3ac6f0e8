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

import math
from dataclasses import dataclass
from fractions import Fraction

from .errors import InvalidParameterError
from .numbers import exact, exact_probability, round_up

__all__ = ["PrivacyLoss", "PureDP", "ApproxDP", "ZCDP", "loss_from_parameters", "ZERO"]


class PrivacyLoss:
    """Base of the privacy-loss values. Subclasses are frozen dataclasses of Fractions."""

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

    # -- comparison with a budget ---------------------------------------------------------
    def fits(self, budget: PrivacyLoss) -> bool:
        """True when this loss is at most ``budget`` (component-wise, after valid conversion)."""
        a, b = _common(self, budget)
        return all(x <= y for x, y in zip(a._components(), b._components(), strict=True))

    def _components(self) -> tuple[Fraction, ...]:
        raise NotImplementedError

    def is_zero(self) -> bool:
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
        return PureDP(self.epsilon * exact(k, "k", allow_zero=True))

    def to_approx(self) -> ApproxDP:
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
        k = exact(k, "k", allow_zero=True)
        return ApproxDP(self.epsilon * k, min(self.delta * k, _ALMOST_ONE))

    def to_approx(self) -> ApproxDP:
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
        return ZCDP(self.rho * exact(k, "k", allow_zero=True))

    def to_zcdp(self) -> ZCDP:
        return self

    def to_approx(self, delta: Fraction | float | None = None) -> ApproxDP:
        """(ε, δ)-DP implied by ρ-zCDP: ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3).

        The irrational ε is rounded *up* to an exact binary fraction, after a relative
        safety margin for floating-point error, so the conversion never under-states the loss.
        """
        if delta is None:
            raise InvalidParameterError(
                "converting zCDP to (ε, δ)-DP needs a δ",
                remedy="pass delta=1e-6 (or the δ of your budget)")
        d = exact_probability(delta, "delta", allow_zero=False)
        if self.rho == 0:
            return ApproxDP(0, d)
        eps = float(self.rho) + 2.0 * math.sqrt(float(self.rho) * math.log(1.0 / float(d)))
        return ApproxDP(round_up(eps * (1 + 2**-40), bits=48), d)

    def _components(self) -> tuple[Fraction, ...]:
        return (self.rho,)

    def __str__(self) -> str:
        return f"ρ={_fmt(self.rho)}"


ZERO = PureDP(0)
_ALMOST_ONE = Fraction(1) - Fraction(1, 2**64)


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
    if isinstance(x, PureDP):
        return PureDP(x.epsilon + y.epsilon)  # type: ignore[attr-defined]
    if isinstance(x, ApproxDP):
        return ApproxDP(x.epsilon + y.epsilon,  # type: ignore[attr-defined]
                        min(x.delta + y.delta, _ALMOST_ONE))  # type: ignore[attr-defined]
    return ZCDP(x.rho + y.rho)  # type: ignore[attr-defined]


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
