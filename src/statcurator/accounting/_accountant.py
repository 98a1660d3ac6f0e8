"""The privacy budget of one analyst on one dataset, as a pure in-memory object.

:class:`Accountant` is the arithmetic the persistent :class:`~statcurator.accounting.Ledger`
runs inside its transactions; it is also usable on its own (a notebook, a simulation).
Composition is *basic* (sequential) composition in the budget's currency: pure ε and
(ε, δ) parameters add, and zCDP ρ adds (Bun & Steinke 2016, Lemma 2.3), which is what makes a
ZCDP budget the economical choice for Gaussian work. Every amount is an exact ``Fraction``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..core.errors import BudgetExceededError, InvalidParameterError
from ..core.measures import PrivacyLoss
from ._losses import components, convert, describe, kind_of, make, validate_loss

__all__ = ["Accountant", "BudgetStatus"]


@dataclass(frozen=True, slots=True)
class BudgetStatus:
    """A snapshot of one budget: its ``total``, what is ``spent`` and what ``remaining``.

    The three are loss values of the budget's own kind, with exact ``Fraction`` parameters;
    ``charges`` counts the charges spent so far.

    >>> from statcurator.core.measures import PureDP
    >>> s = BudgetStatus(PureDP(1), PureDP(0.25), PureDP(0.75), charges=1)
    >>> s.remaining.epsilon, s.exhausted
    (Fraction(3, 4), False)
    >>> print(s)
    spent ε=0.25 of ε=1 in 1 charge; remaining ε=0.75
    """

    total: PrivacyLoss
    spent: PrivacyLoss
    remaining: PrivacyLoss
    charges: int = field(default=0)

    @property
    def kind(self) -> str:
        """``'pure'``, ``'approx'`` or ``'zcdp'``: the currency of this budget."""
        return kind_of(self.total)

    @property
    def exhausted(self) -> bool:
        """True when nothing at all is left (every further charge will be refused)."""
        return components(self.remaining)[0] == 0

    def __str__(self) -> str:
        k = self.kind
        plural = "" if self.charges == 1 else "s"
        return (f"spent {describe(k, components(self.spent))} of "
                f"{describe(k, components(self.total))} in {self.charges} charge{plural}; "
                f"remaining {describe(k, components(self.remaining))}")


class Accountant:
    """The budget of one analyst on one dataset: a ``total``, what is ``spent``, and checks.

    ``total`` is a :class:`~statcurator.core.measures.PureDP`,
    :class:`~statcurator.core.measures.ApproxDP` or :class:`~statcurator.core.measures.ZCDP`
    value (a bare number means pure ε). A ZCDP budget also accepts pure ε charges, converted
    to ρ = ε²/2; an (ε, δ) budget accepts pure and (ε, δ) charges; anything else is refused
    with :class:`~statcurator.core.errors.InvalidParameterError` naming the remedy.
    Overspending raises :class:`~statcurator.core.errors.BudgetExceededError` and spends
    nothing. Not thread-safe: the ledger serializes access.

    >>> from fractions import Fraction
    >>> from statcurator.core.measures import PureDP, ZCDP
    >>> acc = Accountant(PureDP(1))
    >>> acc.spend(PureDP(0.25))
    PureDP(epsilon=Fraction(1, 4))
    >>> acc.remaining
    PureDP(epsilon=Fraction(3, 4))
    >>> acc.can_spend(PureDP(1))
    False
    >>> acc.spend(PureDP(1))
    Traceback (most recent call last):
    ...
    statcurator.core.errors.BudgetExceededError: a charge of ε=1 exceeds the privacy budget: ε=0.75 remains of ε=1; ask for at most ε=0.75 (less privacy loss means more noise), or ask the data owner to raise the budget
    >>> gauss = Accountant(ZCDP(Fraction(1, 2)))
    >>> gauss.cost(PureDP(Fraction(1, 2)))     # ε-DP implies (ε²/2)-zCDP
    ZCDP(rho=Fraction(1, 8))
    """

    __slots__ = ("_kind", "_total", "_spent", "_charges", "_label")

    def __init__(self, total: PrivacyLoss | Fraction | int | float, *,
                 label: str | None = None) -> None:
        loss = validate_loss(total, "total")
        self._kind = kind_of(loss)
        self._total: tuple[Fraction, ...] = convert(loss, self._kind)
        self._spent: tuple[Fraction, ...] = tuple(Fraction(0) for _ in self._total)
        self._charges = 0
        self._label = label

    @classmethod
    def _restore(cls, total: PrivacyLoss, spent: tuple[Fraction, ...], charges: int, *,
                 label: str | None = None) -> Accountant:
        """An accountant that has already spent ``spent`` (in the budget's currency)."""
        acc = cls(total, label=label)
        if len(spent) != len(acc._total) or any(s < 0 for s in spent):
            raise InvalidParameterError(f"spent amount {spent} does not match a {acc._kind} budget",
                                        remedy="pass amounts in the budget's currency")
        acc._spent = tuple(spent)
        acc._charges = charges
        return acc

    # -- the budget --------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        """``'pure'``, ``'approx'`` or ``'zcdp'``: the currency of this budget."""
        return self._kind

    @property
    def total(self) -> PrivacyLoss:
        """The total budget."""
        return make(self._kind, self._total)

    @property
    def spent(self) -> PrivacyLoss:
        """The exact sum of every accepted charge, in the budget's currency."""
        return make(self._kind, self._spent)

    @property
    def remaining(self) -> PrivacyLoss:
        """What is left: ``total - spent`` parameter by parameter (never negative)."""
        return make(self._kind, self._remaining())

    @property
    def charges(self) -> int:
        """How many charges were accepted."""
        return self._charges

    def status(self) -> BudgetStatus:
        """A :class:`BudgetStatus` snapshot.

        >>> from statcurator.core.measures import PureDP
        >>> print(Accountant(PureDP(2)).status())
        spent ε=0 of ε=2 in 0 charges; remaining ε=2
        """
        return BudgetStatus(self.total, self.spent, self.remaining, self._charges)

    def _remaining(self) -> tuple[Fraction, ...]:
        return tuple(t - s for t, s in zip(self._total, self._spent, strict=True))

    # -- charging ----------------------------------------------------------------------------
    def cost(self, loss: PrivacyLoss | Fraction | int | float) -> PrivacyLoss:
        """What ``loss`` costs in this budget's currency (validated, converted, not spent).

        >>> from statcurator.core.measures import ApproxDP, PureDP
        >>> Accountant(ApproxDP(1, 1e-6)).cost(PureDP(0.5))
        ApproxDP(epsilon=Fraction(1, 2), delta=Fraction(0, 1))
        """
        return make(self._kind, self._price(loss))

    def _price(self, loss: object) -> tuple[Fraction, ...]:
        return convert(validate_loss(loss), self._kind)

    def can_spend(self, loss: PrivacyLoss | Fraction | int | float) -> bool:
        """True when ``loss`` fits in what remains (exactly; no rounding either way).

        >>> from statcurator.core.measures import PureDP
        >>> Accountant(PureDP(1)).can_spend(PureDP(1))
        True
        """
        price = self._price(loss)
        return all(s + p <= t for s, p, t in zip(self._spent, price, self._total, strict=True))

    def spend(self, loss: PrivacyLoss | Fraction | int | float) -> PrivacyLoss:
        """Spend ``loss``; returns the amount charged in the budget's currency.

        Raises :class:`~statcurator.core.errors.BudgetExceededError` (and spends nothing)
        when the charge does not fit in what remains.
        """
        price = self._price(loss)
        new = tuple(s + p for s, p in zip(self._spent, price, strict=True))
        if any(n > t for n, t in zip(new, self._total, strict=True)):
            raise self._exceeded(price)
        self._spent = new
        self._charges += 1
        return make(self._kind, price)

    def _exceeded(self, price: tuple[Fraction, ...]) -> BudgetExceededError:
        rem = self._remaining()
        who = f" of {self._label}" if self._label else ""
        left = describe(self._kind, rem)
        if rem[0] == 0:
            remedy = "the budget is exhausted; ask the data owner to raise it"
        else:
            remedy = (f"ask for at most {left} (less privacy loss means more noise), "
                      "or ask the data owner to raise the budget")
            if self._kind == "zcdp":
                eps = float(2 * rem[0]) ** 0.5
                remedy = (f"ask for at most {left} (for a pure ε mechanism, ε ≤ {eps:.6g}; less "
                          "privacy loss means more noise), or ask the data owner to raise the "
                          "budget")
        err = BudgetExceededError(
            f"a charge of {describe(self._kind, price)} exceeds the privacy budget{who}: "
            f"{left} remains of {describe(self._kind, self._total)}", remedy=remedy)
        err.requested = make(self._kind, price)  # type: ignore[attr-defined]
        err.remaining = make(self._kind, rem)  # type: ignore[attr-defined]
        return err

    def __repr__(self) -> str:
        return (f"Accountant(total={describe(self._kind, self._total)}, "
                f"spent={describe(self._kind, self._spent)}, charges={self._charges})")
