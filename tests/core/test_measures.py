"""Privacy losses: exact composition, valid conversions, group privacy, refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar
from scipy.stats import norm

from statcurator.core.composition import compose_losses, group_privacy, parallel_loss
from statcurator.core.errors import InvalidParameterError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP, loss_from_parameters

# -- exact accounting ------------------------------------------------------------------------


def test_ten_tenths_and_a_thousand_thousandths_make_exactly_two() -> None:
    spent = compose_losses([PureDP(0.1)] * 10 + [PureDP(0.001)] * 1000)
    assert spent == PureDP(2)
    assert spent.epsilon - 2 == 0  # exactly nothing left of a budget of 2
    assert not PureDP(2 + Fraction(1, 10**30)).fits(PureDP(2))  # any further charge: refused
    assert sum([0.1] * 10 + [0.001] * 1000) != 2  # what floats would have said


def test_sum_starts_from_zero() -> None:
    assert sum([PureDP(Fraction(1, 3))] * 3) == PureDP(1)


@given(st.lists(st.fractions(min_value=0, max_value=10, max_denominator=10**6), max_size=30))
def test_composition_is_exact_addition(epsilons: list[Fraction]) -> None:
    assert compose_losses(PureDP(e) for e in epsilons).epsilon == sum(epsilons, Fraction(0))


def test_mixed_composition_converts_only_in_valid_directions() -> None:
    assert PureDP(1) + ApproxDP(1, Fraction(1, 10)) == ApproxDP(2, Fraction(1, 10))
    assert PureDP(1) + ZCDP(Fraction(1, 2)) == ZCDP(1)  # ε-DP ⇒ ε²/2-zCDP
    with pytest.raises(InvalidParameterError, match="convert the zCDP"):
        ApproxDP(1, Fraction(1, 10**6)) + ZCDP(1)
    # fits converts the loss at the budget's δ (ρ = 1 at δ = 0.1 is ε ≈ 2.85)
    assert ZCDP(1).fits(ApproxDP(10, Fraction(1, 10)))
    assert not ZCDP(1).fits(ApproxDP(2, Fraction(1, 10)))


# -- one table of valid implications (issue 14: the fits bug) --------------------------------

def test_zcdp_never_fits_a_pure_budget() -> None:
    # the bug: ZCDP(1/2).fits(PureDP(1)) was True because the *budget* was converted
    assert not ZCDP(Fraction(1, 2)).fits(PureDP(1))
    assert not ZCDP(Fraction(1, 10**9)).fits(PureDP(10**6))
    assert not ApproxDP(1, Fraction(1, 10**9)).fits(PureDP(10))
    assert not ApproxDP(1, Fraction(1, 10**9)).fits(ZCDP(10**6))


_RHO = st.fractions(min_value=Fraction(1, 1000), max_value=10)
_DELTA = st.fractions(min_value=Fraction(1, 10**9), max_value=Fraction(1, 10))
LOSSES = st.one_of(_RHO.map(PureDP), st.builds(ApproxDP, _RHO, _DELTA),
                   st.builds(ApproxDP, _RHO, st.just(Fraction(0))), _RHO.map(ZCDP))


def _implies(a, b) -> bool:
    """An independent statement of when loss ``a`` is guaranteed within budget ``b``."""
    ka, kb = type(a), type(b)
    if ka is ApproxDP and a.delta == 0:
        a, ka = PureDP(a.epsilon), PureDP
    if ka is kb:
        return all(getattr(a, f) <= getattr(b, f) for f in a.__dataclass_fields__)
    if ka is PureDP and kb is ApproxDP:
        return a.epsilon <= b.epsilon
    if ka is PureDP and kb is ZCDP:
        return a.epsilon ** 2 / 2 <= b.rho
    if ka is ZCDP and kb is ApproxDP:
        if b.delta == 0:
            return False
        return a.rho + 2 * (a.rho * math.log(1 / b.delta)) ** 0.5 <= b.epsilon * (1 - 1e-9) \
            or a.to_approx(b.delta).epsilon <= b.epsilon
    return False  # never the reverse: zCDP or (ε, δ>0) never imply pure, (ε, δ) never zCDP


@settings(max_examples=150, deadline=None)
@given(LOSSES, LOSSES)
def test_fits_follows_the_table_for_every_pair_of_kinds(a, b) -> None:
    assert a.fits(b) == _implies(a, b)


@settings(max_examples=100, deadline=None)
@given(LOSSES, st.sampled_from(["pure", "approx", "zcdp"]))
def test_the_ledger_converts_by_the_same_table(loss, kind) -> None:
    from statcurator.accounting._losses import convert as ledger_convert
    from statcurator.core.measures import components, convert

    try:
        core = components(convert(loss, kind))
    except InvalidParameterError:
        core = None
    try:
        ledger = ledger_convert(loss, kind)
    except InvalidParameterError:
        ledger = None
    assert core == ledger


def test_fits_compares_component_wise() -> None:
    assert ApproxDP(1, Fraction(1, 10**6)).fits(ApproxDP(1, Fraction(1, 10**5)))
    assert not ApproxDP(1, Fraction(1, 10**4)).fits(ApproxDP(2, Fraction(1, 10**5)))
    assert PureDP(1).fits(ZCDP(Fraction(1, 2)))
    assert not PureDP(1).fits(ZCDP(Fraction(1, 3)))


def test_parallel_composition_is_the_maximum() -> None:
    assert parallel_loss([PureDP(1), PureDP(3), PureDP(2)]) == PureDP(3)
    assert parallel_loss([ApproxDP(1, Fraction(1, 10)), ApproxDP(2, Fraction(1, 100))]) == \
        ApproxDP(2, Fraction(1, 10))


# -- invalid parameters ----------------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: PureDP(-1), lambda: PureDP(float("nan")), lambda: PureDP(float("inf")),
    lambda: PureDP("1"), lambda: PureDP(5e-324), lambda: ApproxDP(1, 1),
    lambda: ApproxDP(1, 1.5), lambda: ApproxDP(1, -0.1), lambda: ZCDP(-0.5),
    lambda: ZCDP(True), lambda: loss_from_parameters(), lambda: loss_from_parameters(1, rho=1),
    lambda: loss_from_parameters(epsilon=0), lambda: loss_from_parameters(epsilon=1, delta=1),
])
def test_invalid_losses_are_refused(make) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InvalidParameterError):
        make()


def test_zcdp_conversion_needs_a_delta() -> None:
    with pytest.raises(InvalidParameterError, match="needs a δ"):
        ZCDP(1).to_approx()
    with pytest.raises(InvalidParameterError):
        ZCDP(1).to_approx(0)
    assert ZCDP(0).to_approx(1e-6) == ApproxDP(0, Fraction(1, 10**6))


# -- zCDP -> (ε, δ): valid, tight, conservative ----------------------------------------------


def _cks_optimum(rho: float, delta: float) -> float:
    def f(t: float) -> float:
        a = 1 + math.exp(t)
        return a * rho + (math.log(1 / delta) + (a - 1) * math.log1p(-1 / a) - math.log(a)) / (a - 1)

    return float(minimize_scalar(f, bounds=(-20, 60), method="bounded",
                                 options={"xatol": 1e-12}).fun)


def _gaussian_delta(eps: float, rho: float) -> float:
    """The exact δ(ε) of the Gaussian mechanism with ρ = Δ²/(2σ²) (Balle & Wang 2018)."""
    mu = math.sqrt(2 * rho)  # Δ/σ
    return float(norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu))


@settings(max_examples=80, deadline=None)
@given(st.fractions(min_value=Fraction(1, 10**6), max_value=50, max_denominator=10**6),
       st.sampled_from([Fraction(1, 10**k) for k in (2, 3, 5, 6, 9, 12)]))
def test_zcdp_to_approx_is_valid_and_tight(rho: Fraction, delta: Fraction) -> None:
    eps = ZCDP(rho).to_approx(delta).epsilon
    bun_steinke = float(rho) + 2 * math.sqrt(float(rho) * math.log(1 / float(delta)))
    optimum = max(_cks_optimum(float(rho), float(delta)), 0.0)
    assert float(eps) <= bun_steinke * (1 + 1e-12) + 1e-12  # never worse than Bun–Steinke
    assert float(eps) >= optimum * (1 - 1e-9)  # never below the valid CKS bound
    assert float(eps) <= optimum * (1 + 1e-6) + 1e-9  # and close to it
    # the Gaussian mechanism itself (a ρ-zCDP mechanism) meets the converted guarantee
    assert _gaussian_delta(float(eps), float(rho)) <= float(delta) * (1 + 1e-9)


def test_zcdp_conversion_is_monotone_in_rho() -> None:
    eps = [ZCDP(Fraction(k, 100)).to_approx(1e-6).epsilon for k in range(1, 200)]
    assert eps == sorted(eps)


def test_pure_to_zcdp() -> None:
    assert PureDP(2).to_zcdp() == ZCDP(2)


# -- group privacy ---------------------------------------------------------------------------


def test_group_privacy() -> None:
    assert group_privacy(PureDP(Fraction(1, 10)), 10) == PureDP(1)
    assert ZCDP(Fraction(1, 2)).group(3) == ZCDP(Fraction(9, 2))
    g = ApproxDP(Fraction(1, 2), Fraction(1, 10**6)).group(3)
    assert g.epsilon == Fraction(3, 2)
    assert float(g.delta) >= 3 * math.exp(1.0) * 1e-6  # k·e^((k-1)ε)·δ, rounded up
    assert float(g.delta) <= 3 * math.exp(1.0) * 1e-6 * (1 + 1e-12)
    assert PureDP(1).group(0) == PureDP(0)
    with pytest.raises(InvalidParameterError):
        PureDP(1).group(-1)
    with pytest.raises(InvalidParameterError):
        PureDP(1).group(1.5)  # type: ignore[arg-type]


def test_composition_of_many_unrelated_denominators_stays_exact() -> None:
    primes = [29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 101, 103, 107,
              109, 113, 127, 131, 137, 139, 149, 151, 157, 163, 167, 173, 179, 181, 191, 193,
              197, 199, 211, 223, 227, 229, 233, 239, 241, 251]
    total = compose_losses(PureDP(Fraction(1, p)) for p in primes)
    assert total.epsilon == sum((Fraction(1, p) for p in primes), Fraction(0))
    assert total.epsilon.denominator.bit_length() > 256  # beyond the guard on parameters
    assert total == PureDP(Fraction(1, 29)) + compose_losses(
        PureDP(Fraction(1, p)) for p in primes[1:])
    assert hash(total) == hash(_copy(total))
    approx = compose_losses(ApproxDP(Fraction(1, p), Fraction(1, p * 10**6)) for p in primes)
    assert approx.delta == sum((Fraction(1, p * 10**6) for p in primes), Fraction(0))


def _copy(loss: PureDP) -> PureDP:
    return compose_losses([loss, PureDP(0)])  # type: ignore[return-value]
