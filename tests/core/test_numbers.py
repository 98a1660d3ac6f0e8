"""Exact numbers: parameter validation, exact data values, rounding, rigorous bounds."""

from __future__ import annotations

import math
import sys
from decimal import Decimal, getcontext, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.core.errors import DataError, InvalidParameterError
from statcurator.core.numbers import (
    MAX_BITS,
    ceil_fraction,
    exact,
    exact_probability,
    exact_value,
    exp_bounds,
    floor_fraction,
    ln_bounds,
    round_down,
    round_up,
    round_up_decimal,
    sqrt_bounds,
)

# -- invalid privacy parameters are refused with a clear error --------------------------------


@pytest.mark.parametrize("bad", [0, -1, -0.5, 0.0, Fraction(-1, 3)])
def test_epsilon_must_be_positive(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="must be > 0"):
        exact(bad, "epsilon")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), np.float64("nan"),
                                 Decimal("NaN"), Decimal("Infinity")])
def test_nan_and_infinity_are_refused(bad: object) -> None:
    with pytest.raises(InvalidParameterError, match="finite"):
        exact(bad, "epsilon")


@pytest.mark.parametrize("bad", ["1", "0.5", "1/3", "nan"])
def test_strings_are_refused_unless_allowed(bad: str) -> None:
    with pytest.raises(InvalidParameterError, match="string"):
        exact(bad, "epsilon")


def test_strings_are_parsed_exactly_when_allowed() -> None:
    assert exact("0.1", "epsilon", strings=True) == Fraction(1, 10)
    assert exact(" 1/3 ", "epsilon", strings=True) == Fraction(1, 3)
    for bad in ("nan", "inf", "-inf", "Infinity", "abc", "1/0", ""):
        with pytest.raises(InvalidParameterError):
            exact(bad, "epsilon", strings=True)


@pytest.mark.parametrize("bad", [5e-324, 1e-310, 2.2e-308 / 3, sys.float_info.min / 2])
def test_subnormal_floats_are_refused_as_too_small(bad: float) -> None:
    with pytest.raises(InvalidParameterError, match="too small"):
        exact(bad, "epsilon")


# One rule for every numeric type (issue 7, finding 5): the same number is accepted or
# refused whatever type it arrives as, and the message names the real problem and the range.
SAME_NUMBER = [lambda t: t, float, Decimal, lambda t: Fraction(Decimal(t)),
               lambda t: np.float64(float(t))]


@pytest.mark.parametrize("convert", SAME_NUMBER)
@pytest.mark.parametrize(("text", "problem"), [("1e-300", "too small"), ("1e-78", "too small"),
                                               ("1e78", "too large"), ("1e308", "too large")])
def test_out_of_range_is_refused_alike_for_every_type(convert, text: str, problem: str) -> None:
    value = convert(text)
    kw = {"strings": True} if isinstance(value, str) else {}
    with pytest.raises(InvalidParameterError, match=problem) as info:
        exact(value, "epsilon", **kw)
    message = str(info.value)
    assert "2^-256" in message and "2^256" in message  # the accepted range is stated
    assert len(message) < 300  # no 309-digit number quoted


@pytest.mark.parametrize("convert", SAME_NUMBER)
@pytest.mark.parametrize("text", ["1e-70", "1e-77", "1e70", "0.1", "123456.789"])
def test_in_range_is_accepted_alike_for_every_type(convert, text: str) -> None:
    value = convert(text)
    kw = {"strings": True} if isinstance(value, str) else {}
    assert exact(value, "epsilon", **kw) == Fraction(Decimal(text))


def test_precision_beyond_what_a_parameter_uses_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="precision"):
        exact(1 + Fraction(1, 3**400), "epsilon")
    assert MAX_BITS >= 256


@pytest.mark.parametrize("bad", [True, False, None, [1], {"e": 1}, object(), 1j])
def test_non_numbers_are_refused(bad: object) -> None:
    with pytest.raises(InvalidParameterError):
        exact(bad, "epsilon")


@pytest.mark.parametrize("bad", [1, 1.0, 2, Fraction(3, 2), float("nan"), -1e-9])
def test_delta_must_be_a_probability_below_one(bad: object) -> None:
    with pytest.raises(InvalidParameterError):
        exact_probability(bad, "delta")


def test_floats_mean_the_decimal_they_print_as() -> None:
    assert exact(0.1, "epsilon") == Fraction(1, 10)
    assert exact(np.float32(0.5), "epsilon") == Fraction(1, 2)
    assert exact(np.int64(3), "k") == 3
    assert exact(Decimal("0.001"), "epsilon") == Fraction(1, 1000)
    assert exact(1e-6, "delta") == Fraction(1, 10**6)


def test_maximum_is_enforced() -> None:
    with pytest.raises(InvalidParameterError, match="<= 1"):
        exact(2, "p", maximum=1)


# -- exact data values -------------------------------------------------------------------------


def test_exact_value_takes_floats_at_their_binary_value() -> None:
    assert exact_value(0.1) == Fraction(0.1) != Fraction(1, 10)
    assert exact_value(-0.0) == 0
    assert exact_value(5e-324) == Fraction(5e-324)  # data may be subnormal
    assert exact_value(np.float64(1e308)) == Fraction(1e308)
    for bad in (float("nan"), float("inf"), np.float64("-inf")):
        with pytest.raises(DataError):
            exact_value(bad)
    with pytest.raises(DataError):
        exact_value("1")


@given(st.fractions())
def test_floor_and_ceil_are_exact(x: Fraction) -> None:
    assert floor_fraction(x) == math.floor(x)
    assert ceil_fraction(x) == math.ceil(x)


@given(st.fractions(min_value=Fraction(1, 10**12), max_value=10**12), st.integers(1, 10))
def test_round_up_decimal_is_conservative_and_tight(x: Fraction, digits: int) -> None:
    r = round_up_decimal(x, digits)
    assert r >= x
    # r has at most `digits` significant digits, and one unit less would be below x
    e = math.floor(math.log10(r))
    unit = Fraction(10) ** (e - digits + 1)
    assert (r / unit).denominator == 1
    assert r - unit < x or r == unit * 10 ** (digits - 1)


@given(st.fractions(min_value=-10**6, max_value=10**6), st.integers(1, 80))
def test_round_up_and_down_bracket(x: Fraction, bits: int) -> None:
    assert round_down(x, bits) <= x <= round_up(x, bits)
    assert round_up(x, bits) - round_down(x, bits) <= Fraction(1, 2**bits)


# -- rigorous bounds of e^x, ln x, sqrt x ------------------------------------------------------


def _decimal(x: Fraction) -> Decimal:
    return Decimal(x.numerator) / Decimal(x.denominator)


@settings(max_examples=60, deadline=None)
@given(st.fractions(min_value=-200, max_value=50, max_denominator=10**9))
def test_exp_bounds_bracket_the_true_value(x: Fraction) -> None:
    lo, hi = exp_bounds(x, 80)
    with localcontext() as ctx:
        ctx.prec = 80
        ref = _decimal(x).exp()  # correctly rounded at 80 digits: error 1e-79 relative
        slack = abs(ref) * Decimal(10) ** -75
        assert _decimal(lo) <= ref + slack
        assert _decimal(hi) >= ref - slack
        assert (hi - lo) <= Fraction(ref) * Fraction(1, 2**70) + Fraction(1, 10**70)


@settings(max_examples=60, deadline=None)
@given(st.fractions(min_value=Fraction(1, 10**12), max_value=10**30, max_denominator=10**12))
def test_ln_bounds_bracket_the_true_value(x: Fraction) -> None:
    lo, hi = ln_bounds(x, 80)
    with localcontext() as ctx:
        ctx.prec = 80
        ref = _decimal(x).ln()
        slack = Decimal(10) ** -70
        assert _decimal(lo) <= ref + slack and _decimal(hi) >= ref - slack
    assert hi - lo < Fraction(1, 2**70)


@given(st.fractions(min_value=0, max_value=10**20))
def test_sqrt_bounds_bracket_the_true_value(x: Fraction) -> None:
    lo, hi = sqrt_bounds(x, 60)
    assert lo * lo <= x <= hi * hi
    assert hi - lo <= max(hi, Fraction(1)) * Fraction(1, 2**55)


def test_bounds_refuse_invalid_arguments() -> None:
    with pytest.raises(InvalidParameterError):
        ln_bounds(0)
    with pytest.raises(InvalidParameterError):
        sqrt_bounds(-1)
    assert getcontext().prec >= 28  # the tests did not change the global decimal context


class _Guarded(Fraction):
    """Fraction that refuses to *build* a number written with a decimal exponent beyond
    ±1000 (what would take minutes: Fraction("1e-99999999") computes 10^99999999)."""

    def __new__(cls, value: object = 0, *rest: object) -> Fraction:  # type: ignore[misc]
        import re

        text = str(value) if isinstance(value, str | Decimal) else ""
        m = re.search(r"[eE]\s*([+-]?[\d_]+)\s*$", text)
        digits = "" if m is None else m.group(1).replace("_", "")
        assert digits in ("", "+", "-") or abs(int(digits)) <= 1000, \
            f"asked to build {text[:30]}"
        return Fraction(value, *rest)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["1e-99999999", "1e99999999", "-2.5E+123456789",
                                  "0.000001e-9999999", "1e-99_999_999", "1E+9_999_999"])
def test_a_huge_decimal_exponent_is_refused_before_the_number_is_built(monkeypatch,
                                                                        text: str) -> None:
    """Finding of the 2026-11-26 service review: one 65-byte request with epsilon
    "1e-20000000" held a server for 18 s (and "1e-99999999" for 210 s) while Python built
    10^20000000 only to refuse it as too small. Control: the guard stops the old path."""
    import statcurator.core.numbers as numbers_module

    monkeypatch.setattr(numbers_module, "Fraction", _Guarded)
    for value in (text, Decimal(text)):
        with pytest.raises(InvalidParameterError, match="is too (small|large)"):
            exact(value, "epsilon", strings=True, positive=False)
    with pytest.raises(AssertionError, match="asked to build"):
        _Guarded(text)                  # control: what exact() used to call first


def test_a_zero_with_a_huge_exponent_is_zero_and_text_is_bounded(monkeypatch) -> None:
    import statcurator.core.numbers as numbers_module

    monkeypatch.setattr(numbers_module, "Fraction", _Guarded)
    assert exact("-0.00e-99999999", "delta", strings=True, allow_zero=True) == 0
    with pytest.raises(InvalidParameterError, match="is not a number"):
        exact("xe-99999999", "delta", strings=True, allow_zero=True)
    with pytest.raises(InvalidParameterError, match="too long to be a parameter"):
        exact("0." + "0" * 500 + "1", "delta", strings=True)
