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
import re
from decimal import Decimal
from fractions import Fraction

from .errors import InvalidParameterError

__all__ = [
    "exact",
    "exact_probability",
    "exact_value",
    "round_up",
    "round_down",
    "round_up_decimal",
    "floor_fraction",
    "ceil_fraction",
    "exp_bounds",
    "ln_bounds",
    "sqrt_bounds",
    "exp_upper",
    "exp_lower",
    "MAX_BITS",
    "MIN_MAGNITUDE",
    "MAX_MAGNITUDE",
]

#: One rule for every numeric type (int, float, Decimal, Fraction, numpy, CLI text): a
#: non-zero parameter lies between these magnitudes, 2^-256 (≈ 8.6e-78) and 2^256
#: (≈ 1.2e77). Beyond them no privacy parameter means anything, and arithmetic with them
#: would be needlessly slow.
MIN_MAGNITUDE = Fraction(1, 2**256)
MAX_MAGNITUDE = Fraction(2**256)

#: Numerators and denominators above this many bits are refused: a parameter inside the
#: magnitude range needs at most about 150 significant decimal digits to be written down.
MAX_BITS = 512


#: A number given as text is refused unread when longer than this, or when its decimal
#: exponent is beyond ±_MAX_EXPONENT: ``Fraction("1e-99999999")`` builds 10^99999999 (minutes
#: of CPU, holding the GIL: one request would stall a whole service) only to be refused as
#: too small. A Decimal's exponent is checked the same way.
_MAX_TEXT = 400
_MAX_EXPONENT = 400
_EXPONENT = re.compile(r"[eE]\s*([+-]?[\d_]+)$")  # Fraction reads 1e-9_999_999 too


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

    Refused with :class:`InvalidParameterError`: NaN, ±∞, booleans, strings (unless
    allowed), values ≤ 0 when ``positive`` (or < 0 when ``allow_zero``), values above
    ``maximum``, non-zero values outside [:data:`MIN_MAGNITUDE`, :data:`MAX_MAGNITUDE`] in
    magnitude — whatever their type: ``1e-300``, ``Decimal("1e-300")`` and
    ``Fraction(1, 10**300)`` are all too small —, and rationals with more than
    :data:`MAX_BITS` bits.

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
        text = _written_size_checked(value.strip(), name)
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
        digits = len(value.as_tuple().digits)
        if digits > _MAX_TEXT:
            raise _refuse(name, f"has more precision than a parameter can use ({digits} digits)",
                          f"round {name} to at most 30 significant digits")
        if value and abs(value.adjusted()) > _MAX_EXPONENT:
            raise _out_of_range(name, value.adjusted() < 0, f"1e{value.adjusted():+d}")
        result = Fraction(value)
    elif isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise _refuse(name, f"must be a finite number, got {f}", remedy)
        result = Fraction(repr(f))
    else:
        raise _refuse(name, f"must be a number, got {type(value).__name__}", remedy)

    if positive:
        if allow_zero and result < 0:
            raise _refuse(name, f"must be >= 0, got {_show(result)}", remedy)
        if not allow_zero and result <= 0:
            raise _refuse(name, f"must be > 0, got {_show(result)}", remedy)
    if result != 0:
        size = abs(result)
        if size < MIN_MAGNITUDE or size > MAX_MAGNITUDE:
            problem = "too small" if size < MIN_MAGNITUDE else "too large"
            raise _refuse(name, f"is {problem} ({_magnitude(result)}): a parameter's "
                                f"magnitude must lie between {_RANGE}",
                          f"pass a {name} in that range, such as {name}=1")
        if result.numerator.bit_length() > MAX_BITS or result.denominator.bit_length() > MAX_BITS:
            raise _refuse(name, f"has more precision than a parameter can use ({_magnitude(result)}"
                                f" written with {result.denominator.bit_length()} bits)",
                          f"round {name} to at most 30 significant digits")
    if maximum is not None and result > maximum:
        raise _refuse(name, f"must be <= {_show(Fraction(maximum))}, got {_show(result)}",
                      f"choose a {name} of at most {_show(Fraction(maximum))}")
    return result


_RANGE = "2^-256 (≈8.6e-78) and 2^256 (≈1.2e77)"


def _out_of_range(name: str, small: bool, shown: str) -> InvalidParameterError:
    return _refuse(name, f"is {'too small' if small else 'too large'} (≈{shown}): a "
                         f"parameter's magnitude must lie between {_RANGE}",
                   f"pass a {name} in that range, such as {name}=1")


def _written_size_checked(text: str, name: str) -> str:
    """``text``, once it is short enough to be read quickly: refuses, before reading it, a
    number written too long or with a decimal exponent far outside the range of any
    parameter (its value would take long to build); a zero so written becomes ``"0"``.

    >>> _written_size_checked("-0.0e-99999999", "delta")
    '0'
    >>> _written_size_checked("1e-99999999", "epsilon")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: epsilon is too small (≈1e-99999999): a parameter's magnitude must lie between 2^-256 (≈8.6e-78) and 2^256 (≈1.2e77); pass a epsilon in that range, such as epsilon=1
    """
    if len(text) > _MAX_TEXT:
        raise _refuse(name, f"is too long to be a parameter ({len(text)} characters)",
                      f"write {name} with at most 30 significant digits, such as {name}=0.5")
    m = _EXPONENT.search(text)
    digits = "" if m is None else m.group(1).replace("_", "")
    if m is None or digits in ("", "+", "-") or abs(int(digits)) <= _MAX_EXPONENT:
        return text
    mantissa = text[:m.start()].rstrip()
    if re.fullmatch(r"[+-]?(0[0_]*\.?[0_]*|\.[0_]+)", mantissa):
        return "0"  # a zero, whatever its exponent
    if not re.fullmatch(r"[+-]?(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)", mantissa):
        raise _refuse(name, f"is not a number: {text!r}",
                      f"pass a positive finite value such as {name}=1")
    exponent = int(digits)
    raise _out_of_range(name, exponent < 0, f"1e{exponent:+d}")


def _magnitude(x: Fraction) -> str:
    """A short rendering of any rational, however many digits it has (≈1e-300)."""
    sign = "-" if x < 0 else ""
    x = abs(x)
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if -1000 < e < 1000:
        return f"{sign}≈{float(x):.6g}"
    exp10 = int(e * 0.30102999566398120)
    return f"{sign}≈1e{exp10:+d}"


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


# -- exact data values ----------------------------------------------------------------------


def exact_value(value: object, name: str = "value") -> Fraction:
    """The exact rational value of a *data* value (not a parameter).

    Unlike :func:`exact`, a float is taken at its exact binary value (data computed by an
    engine means the float it holds, not the decimal a user typed), negative values and zero
    are allowed, subnormals are accepted, and NaN or ±∞ are refused with a
    :class:`~statcurator.core.errors.DataError`.

    >>> exact_value(0.5)
    Fraction(1, 2)
    >>> exact_value(0.1) == Fraction(1, 10)
    False
    >>> exact_value(-3)
    Fraction(-3, 1)
    >>> exact_value(float("inf"))
    Traceback (most recent call last):
    ...
    statcurator.core.errors.DataError: value must be finite, got inf; clamp the data to its declared bounds first
    """
    from .errors import DataError

    if isinstance(value, Fraction):
        return value
    if isinstance(value, bool):
        return Fraction(int(value))
    if isinstance(value, numbers.Integral):
        return Fraction(int(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise DataError(f"{name} must be finite, got {value}",
                            remedy="clamp the data to its declared bounds first")
        return Fraction(value)
    if isinstance(value, numbers.Real):
        f = float(value)
        if not math.isfinite(f):
            raise DataError(f"{name} must be finite, got {f}",
                            remedy="clamp the data to its declared bounds first")
        return Fraction(f)
    raise DataError(f"{name} must be a number, got {type(value).__name__}",
                    remedy="pass an int, a float or a Fraction")


# -- rounding -------------------------------------------------------------------------------


def floor_fraction(x: Fraction | int) -> int:
    """⌊x⌋ of an exact rational.

    >>> floor_fraction(Fraction(-1, 2))
    -1
    """
    x = Fraction(x)
    return x.numerator // x.denominator


def ceil_fraction(x: Fraction | int) -> int:
    """⌈x⌉ of an exact rational.

    >>> ceil_fraction(Fraction(1, 3)), ceil_fraction(2)
    (1, 2)
    """
    x = Fraction(x)
    return -((-x.numerator) // x.denominator)


def round_up_decimal(x: Fraction, digits: int = 6) -> Fraction:
    """The smallest decimal with ``digits`` significant digits that is >= ``x`` (x > 0).

    Used to turn a computed parameter into a value a person can read and type, always in
    the conservative direction.

    >>> round_up_decimal(Fraction(1, 3), 3)
    Fraction(167, 500)
    >>> round_up_decimal(Fraction(1, 4), 3)
    Fraction(1, 4)
    """
    x = Fraction(x)
    if x <= 0:
        raise InvalidParameterError(f"cannot round {x} to significant digits",
                                    remedy="pass a positive number")
    e = len(str(x.numerator // x.denominator)) if x >= 1 else 0
    if x < 1:  # find the first significant decimal place
        e = 0
        while x * 10 ** (-e + 1) < 1:
            e -= 1
    scale = Fraction(10) ** (digits - e)
    return Fraction(ceil_fraction(x * scale)) / scale


def _round_rel(x: Fraction, bits: int, up: bool) -> Fraction:
    """Round a positive rational to ``bits`` significant bits, up or down."""
    shift = bits - (x.numerator.bit_length() - x.denominator.bit_length())
    scaled = x * (Fraction(2) ** shift)
    n = ceil_fraction(scaled) if up else floor_fraction(scaled)
    return Fraction(n) / (Fraction(2) ** shift)


def _round_abs(x: Fraction, bits: int, up: bool) -> Fraction:
    """Round a rational to a multiple of 2**-bits, up or down."""
    scaled = x * (1 << bits)
    n = ceil_fraction(scaled) if up else floor_fraction(scaled)
    return Fraction(n, 1 << bits)


# -- rigorous bounds of transcendental functions --------------------------------------------
#
# Privacy costs and thresholds sometimes involve e^x, ln x or sqrt(x) of exact rationals. These
# functions return *rational* lower and upper bounds computed with exact arithmetic only
# (series with explicit remainder bounds, outward rounding), so that a cost rounded up from
# the upper bound is provably never below the true value. No float is involved.


def exp_bounds(x: Fraction | int, bits: int = 96) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= e**x <= hi`` with a relative gap of about ``2**-bits``.

    >>> lo, hi = exp_bounds(Fraction(-1), 60)
    >>> e_inv = Fraction("0.36787944117144232159552377016146")  # 1/e to 32 digits
    >>> lo < e_inv < hi and hi - lo < Fraction(1, 2**55)
    True
    >>> exp_bounds(0)
    (Fraction(1, 1), Fraction(1, 1))
    """
    x = Fraction(x)
    if x == 0:
        return Fraction(1), Fraction(1)
    # Halve x until |y| <= 1/2, sum the Taylor series of e^y with a remainder bound, then
    # square back; each squaring doubles the relative error, so carry s extra bits.
    s = max(0, x.numerator.bit_length() - x.denominator.bit_length() + 2)
    work = bits + s + 16
    y = x / (1 << s)
    term = Fraction(1)
    total = Fraction(1)
    k = 0
    eps = Fraction(1, 1 << (work + 2))
    while True:
        k += 1
        term = _round_abs(term * y / k, work + 8, up=term * y > 0)
        total += term
        if abs(term) < eps:
            break
    # remainder after the last term: |R| <= 2 |y|^(k+1)/(k+1)! <= 2|term|·|y|; plus the
    # rounding of each of the k terms (2^-(work+8) each)
    err = 2 * abs(term) * abs(y) + Fraction(k + 1, 1 << (work + 8))
    lo, hi = total - err, total + err
    for _ in range(s):
        lo = _round_rel(lo * lo, work, up=False)
        hi = _round_rel(hi * hi, work, up=True)
    return lo, hi


def exp_upper(x: Fraction | int, bits: int = 96) -> Fraction:
    """A rational upper bound of e**x (see :func:`exp_bounds`).

    >>> exp_upper(1) > Fraction(271828182845904, 10**14)
    True
    """
    return exp_bounds(x, bits)[1]


def exp_lower(x: Fraction | int, bits: int = 96) -> Fraction:
    """A rational lower bound of e**x (see :func:`exp_bounds`).

    >>> exp_lower(1) < Fraction(271828182845905, 10**14)
    True
    """
    return exp_bounds(x, bits)[0]


def _atanh_series(z: Fraction, bits: int) -> tuple[Fraction, Fraction]:
    """Bounds of 2·atanh(z) = ln((1+z)/(1-z)) for |z| <= 1/3."""
    total = Fraction(0)
    power = z
    z2 = z * z
    j = 0
    eps = Fraction(1, 1 << (bits + 4))
    while True:
        term = _round_abs(power / (2 * j + 1), bits + 8, up=power > 0)
        total += term
        if abs(power) < eps:
            break
        power = _round_abs(power * z2, bits + 8, up=power > 0)
        j += 1
    # tail after term j: sum_{i>j} |z|^(2i+1)/(2i+1) <= |power|·z²/(1-z²); plus roundings
    err = abs(power) * z2 / (1 - z2) + Fraction(2 * (j + 2), 1 << (bits + 8))
    return 2 * (total - err), 2 * (total + err)


def ln_bounds(x: Fraction | int, bits: int = 96) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= ln(x) <= hi`` (x > 0) with an absolute gap of about ``2**-bits``.

    >>> lo, hi = ln_bounds(2, 60)
    >>> lo < Fraction("0.69314718055994530941723212145818") < hi
    True
    >>> ln_bounds(1)
    (Fraction(0, 1), Fraction(0, 1))
    """
    x = Fraction(x)
    if x <= 0:
        raise InvalidParameterError(f"ln is undefined at {x}", remedy="pass a positive number")
    if x == 1:
        return Fraction(0), Fraction(0)
    work = bits + 8
    # x = 2^k · y with y in [2/3, 4/3]: ln x = k ln 2 + ln y, both by the atanh series
    k = x.numerator.bit_length() - x.denominator.bit_length()
    y = x / (Fraction(2) ** k)
    while y > Fraction(4, 3):
        y /= 2
        k += 1
    while y < Fraction(2, 3):
        y *= 2
        k -= 1
    ylo, yhi = _atanh_series((y - 1) / (y + 1), work) if y != 1 else (Fraction(0), Fraction(0))
    l2lo, l2hi = _atanh_series(Fraction(1, 3), work + k.bit_length())
    if k >= 0:
        lo, hi = ylo + k * l2lo, yhi + k * l2hi
    else:
        lo, hi = ylo + k * l2hi, yhi + k * l2lo
    return _round_abs(lo, work, up=False), _round_abs(hi, work, up=True)


def sqrt_bounds(x: Fraction | int, bits: int = 96) -> tuple[Fraction, Fraction]:
    """Rationals ``lo <= sqrt(x) <= hi`` (x >= 0) with a relative gap of about ``2**-bits``.

    >>> sqrt_bounds(4)
    (Fraction(2, 1), Fraction(2, 1))
    >>> lo, hi = sqrt_bounds(2, 40)
    >>> lo * lo <= 2 <= hi * hi
    True
    """
    x = Fraction(x)
    if x < 0:
        raise InvalidParameterError(f"sqrt is undefined at {x}", remedy="pass x >= 0")
    if x == 0:
        return Fraction(0), Fraction(0)
    # sqrt(n/d) = sqrt(n·d)/d; scale by 4^s so the integer square root has enough bits
    n, d = x.numerator, x.denominator
    s = max(0, bits + 2 - (n * d).bit_length() // 2)
    m = n * d << (2 * s)
    r = math.isqrt(m)
    denom = d << s
    if r * r == m:
        return Fraction(r, denom), Fraction(r, denom)
    return Fraction(r, denom), Fraction(r + 1, denom)
