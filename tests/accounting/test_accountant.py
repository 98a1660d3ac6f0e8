"""The in-memory budget accountant: exact arithmetic, composition, currencies, refusals."""

from __future__ import annotations

from fractions import Fraction

import pytest

from statcurator.accounting import Accountant, BudgetStatus
from statcurator.core.errors import BudgetExceededError, InvalidParameterError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP


def test_budget_of_two_in_ten_tenths_and_a_thousand_thousandths_leaves_exactly_zero():
    acc = Accountant(PureDP(2))
    for _ in range(10):
        acc.spend(PureDP(0.1))
    for _ in range(1000):
        acc.spend(PureDP(0.001))
    assert acc.spent == PureDP(2)
    assert acc.remaining.epsilon == 0
    assert acc.charges == 1010
    assert acc.status().exhausted
    # Float arithmetic would not have got here: the same sum in binary floats is not 2.
    assert sum([0.1] * 10 + [0.001] * 1000) != 2.0
    for tiny in (Fraction(1, 10**75), Fraction(1, 2**255), 1e-75):
        assert not acc.can_spend(PureDP(tiny))
        with pytest.raises(BudgetExceededError, match="exhausted"):
            acc.spend(PureDP(tiny))
    # Tinier still is not a privacy parameter at all: refused as absurd (or subnormal).
    for absurd in (Fraction(1, 10**100), 1e-300, 2.2250738585072014e-308, 5e-324):
        with pytest.raises(InvalidParameterError):
            acc.spend(absurd)
    assert acc.charges == 1010 and acc.spent == PureDP(2)


def test_refusal_names_what_is_left_and_what_to_do():
    acc = Accountant(PureDP(1), label="analyst 'alice' on dataset 'adult'")
    acc.spend(PureDP(Fraction(2, 3)))
    with pytest.raises(BudgetExceededError) as info:
        acc.spend(PureDP(Fraction(1, 2)))
    message = str(info.value)
    assert "analyst 'alice' on dataset 'adult'" in message
    assert "ε=1/3 (≈0.333333)" in message          # what is left, exactly
    assert "ask for at most" in message and "raise the budget" in message
    assert info.value.remaining == PureDP(Fraction(1, 3))
    assert info.value.requested == PureDP(Fraction(1, 2))
    assert acc.spent == PureDP(Fraction(2, 3))      # nothing was spent


def test_spending_the_exact_remainder_is_allowed():
    acc = Accountant(PureDP(1))
    acc.spend(PureDP(Fraction(1, 3)))
    acc.spend(PureDP(Fraction(2, 3)))
    assert acc.remaining == PureDP(0)


def test_approx_budget_composes_epsilon_and_delta_and_accepts_pure_charges():
    acc = Accountant(ApproxDP(1, Fraction(1, 10**6)))
    assert acc.cost(PureDP(0.5)) == ApproxDP(0.5, 0)
    acc.spend(PureDP(0.5))
    acc.spend(ApproxDP(0.25, Fraction(1, 2 * 10**6)))
    assert acc.spent == ApproxDP(0.75, Fraction(1, 2 * 10**6))
    # ε still fits, δ does not: refused on δ alone.
    with pytest.raises(BudgetExceededError, match="δ"):
        acc.spend(ApproxDP(0.1, Fraction(6, 10**7)))
    acc.spend(ApproxDP(0.25, Fraction(1, 2 * 10**6)))
    assert acc.remaining == ApproxDP(0, 0)


def test_zcdp_budget_converts_pure_charges_and_composes_rho():
    acc = Accountant(ZCDP(Fraction(1, 2)))
    assert acc.cost(PureDP(1)) == ZCDP(Fraction(1, 2))        # ε-DP ⇒ (ε²/2)-zCDP
    assert acc.cost(ApproxDP(1, 0)) == ZCDP(Fraction(1, 2))   # δ = 0 is pure
    for _ in range(3):
        acc.spend(ZCDP(Fraction(1, 8)))
    # What is left (ρ=1/8) is named in zCDP terms and as the largest pure ε that fits.
    with pytest.raises(BudgetExceededError, match=r"ρ=0.125 .*ε ≤ 0.5\b"):
        acc.spend(PureDP(1))
    acc.spend(PureDP(Fraction(1, 2)))                         # ρ = 1/8
    assert acc.spent == ZCDP(Fraction(1, 2)) and acc.status().exhausted
    with pytest.raises(BudgetExceededError, match="exhausted"):
        acc.spend(PureDP(Fraction(1, 100)))


@pytest.mark.parametrize(("budget", "charge", "remedy"), [
    (PureDP(1), ZCDP(Fraction(1, 8)), "ZCDP budget"),
    (PureDP(1), ApproxDP(0.5, 1e-9), r"ApproxDP|budget of \(ε, δ\)"),
    (ApproxDP(1, 1e-6), ZCDP(Fraction(1, 8)), "to_approx"),
    (ZCDP(1), ApproxDP(0.5, 1e-9), "(do not|never) convert to zCDP"),
])
def test_incompatible_charges_are_refused_with_a_remedy(budget, charge, remedy):
    acc = Accountant(budget)
    with pytest.raises(InvalidParameterError, match=remedy):
        acc.spend(charge)
    with pytest.raises(InvalidParameterError):
        acc.can_spend(charge)
    assert acc.charges == 0 and acc.spent.is_zero()


def test_approx_charge_without_delta_counts_as_pure():
    acc = Accountant(PureDP(1))
    assert acc.spend(ApproxDP(0.5, 0)) == PureDP(0.5)


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "0.5", 5e-324, True, None,
                                 PureDP(0), ZCDP(0), ApproxDP(0, 1e-6), [1]])
def test_invalid_costs_and_totals_are_refused(bad):
    acc = Accountant(PureDP(1))
    with pytest.raises(InvalidParameterError):
        acc.spend(bad)
    with pytest.raises(InvalidParameterError):
        Accountant(bad)
    assert acc.charges == 0


def test_a_tampered_loss_value_is_revalidated():
    loss = PureDP(0.5)
    object.__setattr__(loss, "epsilon", float("nan"))
    with pytest.raises(InvalidParameterError, match="finite"):
        Accountant(PureDP(1)).spend(loss)


def test_bare_numbers_are_pure_epsilon_read_as_decimals():
    acc = Accountant(1)
    assert acc.total == PureDP(1)
    assert acc.spend(0.1) == PureDP(Fraction(1, 10))


def test_sums_beyond_the_user_precision_limit_stay_exact():
    # 60 charges with distinct prime denominators: the spent sum has far more than the
    # 256 bits a user-given parameter may have, and must still be exact.
    primes = [p for p in range(3, 1000) if all(p % d for d in range(2, p))][:60]
    acc = Accountant(PureDP(10))
    for p in primes:
        acc.spend(PureDP(Fraction(1, p)))
    expected = sum(Fraction(1, p) for p in primes)
    assert acc.spent.epsilon == expected
    assert expected.denominator.bit_length() > 256
    assert acc.remaining.epsilon == 10 - expected
    assert "ε=" in str(acc.status())


def test_status_is_a_frozen_snapshot():
    acc = Accountant(PureDP(1))
    s = acc.status()
    acc.spend(PureDP(0.5))
    assert isinstance(s, BudgetStatus) and s.spent == PureDP(0)
    with pytest.raises(AttributeError):
        s.total = PureDP(2)  # type: ignore[misc]
