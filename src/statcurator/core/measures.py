"""Privacy losses: the values that measure what a release costs.

Three standard definitions, each an exact, frozen value:

* :class:`PureDP` — ε-differential privacy (Dwork, McSherry, Nissim, Smith 2006);
* :class:`ApproxDP` — (ε, δ)-differential privacy;
* :class:`ZCDP` — ρ-zero-concentrated DP (Bun & Steinke 2016), the natural currency of
  Gaussian noise.

``a + b`` is sequential (basic) composition; ``a.fits(b)`` says whether loss ``a`` is within
budget ``b``. One table of valid implications, :func:`convert`, serves the core and the
ledger alike, and only a *loss* is ever converted, never a budget:

==========  ===========================  ===========================  ==========================
from → to    pure ε                       (ε, δ)                        ρ-zCDP
==========  ===========================  ===========================  ==========================
pure ε      itself                       (ε, 0)                        ε²/2 (Bun–Steinke 1.4)
(ε, δ)      ε, only when δ = 0           itself                        never
ρ-zCDP      never                        (ε(ρ, δ), δ) at a stated δ     itself
==========  ===========================  ===========================  ==========================

>>> PureDP(Fraction(1, 10)) + PureDP(Fraction(1, 5))
PureDP(epsilon=Fraction(3, 10))
>>> PureDP(1) + ApproxDP(1, Fraction(1, 10**6))
ApproxDP(epsilon=Fraction(2, 1), delta=Fraction(1, 1000000))
>>> PureDP(1).to_zcdp()
ZCDP(rho=Fraction(1, 2))
>>> PureDP(1).fits(ApproxDP(2, 0))
True
>>> ZCDP(Fraction(1, 2)).fits(PureDP(1))      # zCDP never implies pure ε-DP
False
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

__all__ = ["PrivacyLoss", "PureDP", "ApproxDP", "ZCDP", "loss_from_parameters", "ZERO",
           "KINDS", "kind_of", "convert", "components", "maximum"]


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
        """True when this loss is at most ``budget``: the loss (never the budget) is
        converted into the budget's kind by :func:`convert` — a zCDP loss at the budget's
        δ — and compared component-wise. A loss that does not convert does not fit.

        >>> PureDP(1).fits(ZCDP(Fraction(1, 2))), ZCDP(Fraction(1, 2)).fits(PureDP(1))
        (True, False)
        """
        kind = kind_of(budget)
        delta = budget.delta if isinstance(budget, ApproxDP) else None
        try:
            loss = convert(self, kind, delta=delta)
        except InvalidParameterError:
            return False
        return all(x <= y for x, y in zip(components(loss), components(budget), strict=True))

    def is_zero(self) -> bool:
        """True for the loss of releasing nothing (every component is 0)."""
        return all(c == 0 for c in components(self))


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
            return ApproxDP(self.epsilon * n, self.delta * min(n, 1) if n <= 1 else Fraction(0))
        factor = exp_bounds((n - 1) * self.epsilon, 64)[1]
        delta = round_up(n * factor * self.delta, bits=min(MAX_BITS - 8, 128))
        return ApproxDP(self.epsilon * n, min(delta, _ALMOST_ONE))

    def to_approx(self) -> ApproxDP:
        """Itself."""
        return self

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
            return ApproxDP(Fraction(0), d)
        return ApproxDP(_zcdp_epsilon(self.rho, d), d)

    def epsilon_at(self, delta: Fraction | float) -> Fraction:
        """The ε of :meth:`to_approx` at ``delta`` (a conservative upper bound).

        A method with its own name: a zCDP loss has no ε of its own, so ``loss.epsilon``
        does not exist on it (``getattr(loss, "epsilon", 0)`` is 0, never a bound method).

        >>> round(float(ZCDP(Fraction(1, 8)).epsilon_at(1e-5)), 4)
        2.1657
        """
        return self.to_approx(delta).epsilon

    def __str__(self) -> str:
        return f"ρ={_fmt(self.rho)}"


ZERO = PureDP(Fraction(0))
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
    return _fmt_ratio(x)


@functools.lru_cache(maxsize=1024)
def _fmt_ratio(x: Fraction) -> str:
    # cached: the same few ε, δ and ρ are shown again and again (in every release's
    # certificate), and the float round trip reads a string as a Fraction
    f = float(x)
    return f"{f:.6g}" if Fraction(repr(f)) != x else repr(f)


# -- the one table of valid conversions --------------------------------------------------------

#: The kinds of privacy loss by the short names the ledger stores.
KINDS: dict[str, type[PrivacyLoss]] = {"pure": PureDP, "approx": ApproxDP, "zcdp": ZCDP}
_FIELDS: dict[type[PrivacyLoss], tuple[str, ...]] = {
    PureDP: ("epsilon",), ApproxDP: ("epsilon", "delta"), ZCDP: ("rho",)}
_NAMES = {"pure": "a pure ε-DP", "approx": "an (ε, δ)-DP", "zcdp": "a ρ-zCDP"}
_REFUSALS = {
    ("approx", "pure"): "use a budget of (ε, δ) for work with δ > 0, or mechanisms with δ = 0",
    ("approx", "zcdp"): "(ε, δ) losses never convert to zCDP; keep work with δ > 0 under an "
                        "(ε, δ) budget, or use Gaussian noise (zCDP) throughout",
    ("zcdp", "pure"): "zCDP never implies pure ε-DP; give Gaussian work a ZCDP budget, or use "
                      "the Laplace mechanism",
    ("zcdp", "approx"): "state the δ at which to convert (loss.to_approx(delta), which costs "
                        "more than zCDP composition), or give Gaussian work a ZCDP budget",
}


def kind_of(loss: PrivacyLoss) -> str:
    """The short name of a loss's kind: ``pure``, ``approx`` or ``zcdp``.

    >>> kind_of(ApproxDP(1, 0)), kind_of(ZCDP(1))
    ('approx', 'zcdp')
    """
    for kind, cls in KINDS.items():
        if type(loss) is cls:
            return kind
    raise InvalidParameterError(f"unsupported privacy loss type {type(loss).__name__}",
                                remedy="use PureDP(epsilon), ApproxDP(epsilon, delta) or ZCDP(rho)")


def components(loss: PrivacyLoss) -> tuple[Fraction, ...]:
    """The exact parameters of a loss, in the order of its fields.

    >>> components(ApproxDP(1, 0.5))
    (Fraction(1, 1), Fraction(1, 2))
    """
    return tuple(getattr(loss, f) for f in _FIELDS[KINDS[kind_of(loss)]])


def convert(loss: PrivacyLoss, kind: str, *, delta: object = None) -> PrivacyLoss:
    """``loss`` as a loss of ``kind``, by the one table of valid implications (module docs).

    Only valid directions: pure → (ε, 0) and → ε²/2-zCDP; (ε, 0) → pure; zCDP → (ε, δ) at a
    *stated* ``delta`` (rounded up conservatively). Anything else raises
    :class:`~statcurator.core.errors.InvalidParameterError` with a remedy.

    >>> convert(PureDP(1), "zcdp")
    ZCDP(rho=Fraction(1, 2))
    >>> convert(ApproxDP(Fraction(1, 2), 0), "pure")
    PureDP(epsilon=Fraction(1, 2))
    >>> convert(ZCDP(Fraction(1, 2)), "pure")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: a ρ-zCDP loss (ρ=0.5) does not convert to a pure ε-DP loss; zCDP never implies pure ε-DP; give Gaussian work a ZCDP budget, or use the Laplace mechanism
    """
    if kind not in KINDS:
        raise InvalidParameterError(f"unknown kind of privacy loss {kind!r}",
                                    remedy="use 'pure', 'approx' or 'zcdp'")
    source = kind_of(loss)
    if source == kind:
        return loss
    if isinstance(loss, ApproxDP) and loss.delta == 0:
        loss, source = _derived(PureDP, loss.epsilon), "pure"
        if kind == "pure":
            return loss
    if isinstance(loss, PureDP):
        return (_derived(ApproxDP, loss.epsilon, Fraction(0)) if kind == "approx"
                else _derived(ZCDP, loss.epsilon**2 / 2))
    if isinstance(loss, ZCDP) and kind == "approx" and delta is not None:
        return loss.to_approx(exact_probability(delta, "delta", allow_zero=False))
    raise InvalidParameterError(
        f"{_NAMES[source]} loss ({loss}) does not convert to {_NAMES[kind]} loss",
        remedy=_REFUSALS[(source, kind)])


def _common(a: PrivacyLoss, b: PrivacyLoss) -> tuple[PrivacyLoss, PrivacyLoss]:
    """Two losses as one kind for composition: the kind one of them converts into (by
    :func:`convert`); pure and (ε, δ) meet at (ε, δ), pure and zCDP at zCDP."""
    ka, kb = kind_of(a), kind_of(b)
    if ka == kb:
        return a, b
    try:
        return a, convert(b, ka)
    except InvalidParameterError:
        pass
    try:
        return convert(a, kb), b
    except InvalidParameterError:
        raise InvalidParameterError(
            f"cannot compose {_NAMES[ka]} loss ({a}) with {_NAMES[kb]} loss ({b})",
            remedy="convert the zCDP loss with .to_approx(delta) first, or keep Gaussian "
                   "(zCDP) and (ε, δ) work under separate budgets") from None


def maximum(a: PrivacyLoss, b: PrivacyLoss) -> PrivacyLoss:
    """The component-wise maximum of two losses of one kind (after :func:`convert`): the
    loss of parallel composition.

    >>> maximum(PureDP(1), ApproxDP(Fraction(1, 2), Fraction(1, 10**9)))
    ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000000))
    """
    x, y = _common(a, b)
    return _derived(type(x), *(max(u, v) for u, v in zip(components(x), components(y),
                                                          strict=True)))


def compose(a: PrivacyLoss, b: PrivacyLoss) -> PrivacyLoss:
    """Sequential composition: losses add (basic composition).

    >>> compose(ZCDP(Fraction(1, 8)), PureDP(Fraction(1, 2)))
    ZCDP(rho=Fraction(1, 4))
    """
    if not isinstance(a, PrivacyLoss) or not isinstance(b, PrivacyLoss):
        return NotImplemented
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
