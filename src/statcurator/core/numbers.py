"""Exact numbers for privacy arithmetic.

Privacy parameters (ε, δ, ρ, budgets, sensitivities, scales) are held as
:class:`fractions.Fraction`. A float given by a user is read as the *decimal it prints as*
(``0.1`` means 1/10, not the binary float 0.1000000000000000055…): that is the number the user
meant, and the same exact number then drives both the noise and the charge, so the two
always agree.

>>> exact(0.1, "epsilon")
Fraction(1, 10)
>>> exact("1/3", "epsilon", strings=True)
Fraction(1, 3)
>>> exact(float("nan"), "epsilon")
Traceback (most recent call last):
...
statcurator.core.errors.InvalidParameterError: epsilon must be a finite number, got nan; pass a positive finite value such as epsilon=1
"""

from __future__ import annotations

import math
import numbers
import sys
from decimal import Decimal
from fractions import Fraction

from .errors import InvalidParameterError

__all__ = ["exact", "exact_probability", "round_up", "round_down", "MAX_BITS"]

#: Numerators and denominators above this many bits are refused as absurd: no privacy
#: parameter needs them, and unbounded rationals make arithmetic arbitrarily slow.
MAX_BITS = 256


def _refuse(name: str, problem: str, remedy: str) -> InvalidParameterError:
    return InvalidParameterError(f"{name} {problem}", remedy=remedy)


def exact(
    value: object,
    name: str,
    *,
    positive: bool = True,
    allow_zero: bool = False,
    maximum: Fraction | int | None = None,
    strings: bool = False,
) -> Fraction:
    """Convert ``value`` to an exact :class:`Fraction`, refusing anything absurd.

    Accepted: ``int`` (not ``bool``), ``Fraction``, ``Decimal``, finite *normal* floats (read
    as their shortest decimal representation), numpy scalars of those kinds, and, only when
    ``strings=True`` (the CLI), strings such as ``"0.5"`` or ``"1/3"``.

    Refused with :class:`InvalidParameterError`: NaN, ±∞, subnormal floats, booleans,
    strings (unless allowed), values ≤ 0 when ``positive`` (or < 0 when ``allow_zero``),
    values above ``maximum``, and rationals with more than :data:`MAX_BITS` bits.

    >>> exact(2, "k")
    Fraction(2, 1)
    >>> exact(0, "delta", allow_zero=True)
    Fraction(0, 1)
    >>> exact(-1, "epsilon")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: epsilon must be > 0, got -1; pass a positive finite value such as epsilon=1
    """
    remedy = f"pass a positive finite value such as {name}=1"
    if isinstance(value, bool):
        raise _refuse(name, f"must be a number, got the boolean {value}", remedy)
    if isinstance(value, str):
        if not strings:
            raise _refuse(name, f"must be a number, got the string {value!r}", remedy)
        text = value.strip()
        try:
            if text.lower() in {"nan", "inf", "-inf", "+inf", "infinity", "-infinity"}:
                raise ValueError
            result = Fraction(text)
        except (ValueError, ZeroDivisionError):
            raise _refuse(name, f"is not a number: {value!r}", remedy) from None
    elif isinstance(value, Fraction):
        result = value
    elif isinstance(value, numbers.Integral):
        result = Fraction(int(value))
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise _refuse(name, f"must be a finite number, got {value}", remedy)
        result = Fraction(value)
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise _refuse(name, f"must be a finite number, got {f}", remedy)
        if f != 0.0 and abs(f) < sys.float_info.min:
            raise _refuse(name, f"is a subnormal float ({f!r}), too small to mean anything", remedy)
        result = Fraction(repr(f))
    else:
        raise _refuse(name, f"must be a number, got {type(value).__name__}", remedy)

    if result.numerator.bit_length() > MAX_BITS or result.denominator.bit_length() > MAX_BITS:
        raise _refuse(name, f"has an absurd precision ({result})",
                      f"round {name} to a simpler value")
    if positive:
        if allow_zero and result < 0:
            raise _refuse(name, f"must be >= 0, got {_show(result)}", remedy)
        if not allow_zero and result <= 0:
            raise _refuse(name, f"must be > 0, got {_show(result)}", remedy)
    if maximum is not None and result > maximum:
        raise _refuse(name, f"must be <= {_show(Fraction(maximum))}, got {_show(result)}",
                      f"choose a {name} of at most {_show(Fraction(maximum))}")
    return result


def exact_probability(value: object, name: str, *, allow_zero: bool = True,
                      strings: bool = False) -> Fraction:
    """An exact probability strictly below 1 (δ, α): ``0 <= p < 1`` (or ``0 < p < 1``).

    >>> exact_probability(1e-6, "delta")
    Fraction(1, 1000000)
    >>> exact_probability(1, "delta")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: delta must be < 1, got 1; a probability such as delta=1e-6 is typical
    """
    p = exact(value, name, allow_zero=allow_zero, strings=strings)
    if p >= 1:
        raise InvalidParameterError(f"{name} must be < 1, got {_show(p)}",
                                    remedy=f"a probability such as {name}=1e-6 is typical")
    return p


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x} (≈{float(x):.6g})"


def round_up(x: float | Fraction, bits: int = 52) -> Fraction:
    """The smallest multiple of 2**-bits that is >= ``x`` (conservative rounding of a cost).

    Used where an irrational quantity (a square root, a logarithm) has to become an exact
    cost: the rounding never lowers the privacy loss that is charged.

    >>> round_up(Fraction(1, 3), bits=4)
    Fraction(3, 8)
    """
    q = Fraction(x) * (1 << bits)
    n = q.numerator // q.denominator
    if n < q:
        n += 1
    return Fraction(n, 1 << bits)


def round_down(x: float | Fraction, bits: int = 52) -> Fraction:
    """The largest multiple of 2**-bits that is <= ``x``.

    >>> round_down(Fraction(1, 3), bits=4)
    Fraction(5, 16)
    """
    q = Fraction(x) * (1 << bits)
    return Fraction(q.numerator // q.denominator, 1 << bits)
