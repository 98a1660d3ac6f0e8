"""Privacy losses as the ledger sees them: validation, conversion into a budget's currency,
and the exact text encoding stored in the ledger.

A budget is held in one *currency* (its kind): pure ε, (ε, δ), or ρ-zCDP. A charge is
converted into that currency only in the valid direction (Bun & Steinke 2016):

========  ==========================  ==========================  ==========================
budget    PureDP(ε) charge            ApproxDP(ε, δ) charge       ZCDP(ρ) charge
========  ==========================  ==========================  ==========================
pure      ε                           ε if δ = 0, else refused    refused
approx    (ε, 0)                      (ε, δ)                      refused
zcdp      ρ = ε²/2                    ε²/2 if δ = 0, else refused  ρ
========  ==========================  ==========================  ==========================

>>> from statcurator.core.measures import PureDP, ZCDP
>>> convert(PureDP(1), "zcdp")
(Fraction(1, 2),)
>>> encode(ZCDP(Fraction(1, 8)))
('zcdp', None, None, '1/8')
>>> decode('approx', '1/10', '1/1000000', None)
ApproxDP(epsilon=Fraction(1, 10), delta=Fraction(1, 1000000))
"""

from __future__ import annotations

import functools
import numbers
from decimal import Decimal
from fractions import Fraction

from ..core.errors import InvalidParameterError, LedgerError
from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from ..core.numbers import MAX_BITS, exact

__all__ = ["KINDS", "kind_of", "components", "convert", "make", "validate_loss",
           "encode", "decode", "describe", "rational_text", "pack", "unpack"]

#: Budget currencies, by the name stored in the ledger.
KINDS: dict[str, type[PrivacyLoss]] = {"pure": PureDP, "approx": ApproxDP, "zcdp": ZCDP}
_FIELDS: dict[str, tuple[str, ...]] = {"pure": ("epsilon",), "approx": ("epsilon", "delta"),
                                       "zcdp": ("rho",)}
_NAMES = {"pure": "a pure ε-DP", "approx": "an (ε, δ)-DP", "zcdp": "a ρ-zCDP"}
#: The columns a loss is stored in, in order.
_STORED = ("epsilon", "delta", "rho")


def kind_of(loss: PrivacyLoss) -> str:
    """The currency name of a loss value.

    >>> kind_of(ApproxDP(1, 0))
    'approx'
    """
    for kind, cls in KINDS.items():
        if type(loss) is cls:
            return kind
    raise InvalidParameterError(
        f"unsupported privacy loss type {type(loss).__name__}",
        remedy="use PureDP(epsilon), ApproxDP(epsilon, delta) or ZCDP(rho)")


def components(loss: PrivacyLoss) -> tuple[Fraction, ...]:
    """The exact parameters of a loss, in the order of its fields.

    >>> components(ApproxDP(1, 0.5))
    (Fraction(1, 1), Fraction(1, 2))
    """
    return tuple([getattr(loss, f) for f in _FIELDS[kind_of(loss)]])


def make(kind: str, values: tuple[Fraction, ...]) -> PrivacyLoss:
    """A loss value of ``kind`` from exact parameters that are already known to be valid.

    Sums of many charges can have numerators and denominators longer than the
    :data:`~statcurator.core.numbers.MAX_BITS` that :func:`~statcurator.core.numbers.exact`
    accepts from users; such a sum is still exact and legitimate, so it is built without
    that check (every other check still holds: the values are sums of validated ones).

    >>> make("pure", (Fraction(3, 10),))
    PureDP(epsilon=Fraction(3, 10))
    >>> make("pure", (Fraction(1, 3**200),)).epsilon == Fraction(1, 3**200)
    True
    """
    cls = KINDS[kind]
    if all(v.numerator.bit_length() <= MAX_BITS and v.denominator.bit_length() <= MAX_BITS
           for v in values):
        try:
            return cls(*values)
        except InvalidParameterError:  # a sum outside the magnitude range of parameters
            pass
    obj = object.__new__(cls)
    for name, v in zip(_FIELDS[kind], values, strict=True):
        object.__setattr__(obj, name, v)
    return obj


def validate_loss(value: object, what: str = "cost") -> PrivacyLoss:
    """Re-validate a privacy loss given by a caller, or read a bare number as pure ε.

    The primary parameter (ε, or ρ for zCDP) must be strictly positive: a charge or a
    budget of nothing is a mistake, never a free query. NaN, ±∞, subnormals, strings,
    booleans and δ ≥ 1 are refused by :func:`~statcurator.core.numbers.exact`.

    >>> validate_loss(0.5)
    PureDP(epsilon=Fraction(1, 2))
    >>> validate_loss(PureDP(0))
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: cost must be positive, got ε=0; pass the mechanism's positive cost such as PureDP(0.1); results that cost nothing (replays, post-processing) are not charged
    >>> validate_loss("0.5")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: epsilon must be a number, got the string '0.5'; pass a positive finite value such as epsilon=1
    """
    if isinstance(value, PrivacyLoss):
        # Rebuild through the validating constructor: a loss value that was tampered with
        # (object.__setattr__ on a frozen dataclass, a float smuggled in) is caught here.
        loss = KINDS[kind_of(value)](*components(value))
    elif isinstance(value, numbers.Real | Decimal | str) and not isinstance(value, bool):
        loss = PureDP(exact(value, "epsilon"))
    else:
        raise InvalidParameterError(
            f"{what} must be a privacy loss, got {type(value).__name__} {value!r}",
            remedy="pass PureDP(epsilon), ApproxDP(epsilon, delta) or ZCDP(rho)")
    primary = loss.rho if isinstance(loss, ZCDP) else loss.epsilon  # type: ignore[attr-defined]
    if primary <= 0:
        remedy = ("pass the mechanism's positive cost such as PureDP(0.1); results that cost "
                  "nothing (replays, post-processing) are not charged" if what == "cost"
                  else "pass a positive total such as PureDP(1)")
        raise InvalidParameterError(f"{what} must be positive, got {loss}", remedy=remedy)
    return loss


def convert(loss: PrivacyLoss, kind: str) -> tuple[Fraction, ...]:
    """The parameters of ``loss`` in the currency ``kind``, by the core's one table of valid
    implications (:func:`statcurator.core.measures.convert`). The ledger states no δ, so a
    zCDP charge is never spent from an (ε, δ) budget without an explicit conversion.

    >>> convert(ApproxDP(Fraction(1, 2), 0), "pure")
    (Fraction(1, 2),)
    >>> convert(ZCDP(1), "approx")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: a ρ-zCDP charge (ρ=1) cannot be spent from an (ε, δ)-DP budget; state the δ at which to convert (loss.to_approx(delta), which costs more than zCDP composition), or give Gaussian work a ZCDP budget
    """
    from ..core.measures import components as _components
    from ..core.measures import convert as _convert

    try:
        return _components(_convert(loss, kind))
    except InvalidParameterError as e:
        source = kind_of(loss)
        raise InvalidParameterError(
            f"{_NAMES[source]} charge ({loss}) cannot be spent from {_NAMES[kind]} budget",
            remedy=e.remedy) from None


def rational_text(x: Fraction) -> str:
    """The exact text stored for a rational: always ``numerator/denominator``.

    >>> rational_text(Fraction(2))
    '2/1'
    """
    return f"{x.numerator}/{x.denominator}"


def _parse(text: str | None, column: str) -> Fraction:
    try:
        if not isinstance(text, str) or text.count("/") != 1:
            raise ValueError
        num, den = text.split("/")
        if not (num.isdigit() and den.isdigit()) or int(den) == 0:
            raise ValueError
        return Fraction(int(num), int(den))
    except ValueError:
        raise LedgerError(f"the ledger holds a malformed {column} value {text!r}",
                          remedy="the ledger file is damaged; restore it from a backup") from None


def encode(loss: PrivacyLoss) -> tuple[str, str | None, str | None, str | None]:
    """``(kind, epsilon, delta, rho)`` as stored: exact rational text, never a float.

    >>> encode(PureDP(0.1))
    ('pure', '1/10', None, None)
    """
    kind = kind_of(loss)
    fields = _FIELDS[kind]
    return (kind, *[rational_text(getattr(loss, f)) if f in fields else None
                    for f in _STORED])  # type: ignore[return-value]


def decode(kind: str, epsilon: str | None, delta: str | None, rho: str | None) -> PrivacyLoss:
    """The loss value back from its stored text (malformed text is a :class:`LedgerError`).

    >>> decode("pure", "1/10", None, None)
    PureDP(epsilon=Fraction(1, 10))
    """
    if kind not in KINDS:
        raise LedgerError(f"the ledger holds an unknown loss kind {kind!r}",
                          remedy="open it with the statcurator version that wrote it")
    stored = {"epsilon": epsilon, "delta": delta, "rho": rho}
    return make(kind, tuple(_parse(stored[f], f) for f in _FIELDS[kind]))


def pack(kind: str, values: tuple[Fraction, ...]) -> str:
    """An amount in a currency as one exact text, as the ledger's running totals are stored.

    >>> pack("approx", (Fraction(1, 2), Fraction(1, 10**6)))
    'approx:1/2,1/1000000'
    """
    return f"{kind}:" + ",".join([rational_text(v) for v in values])


def unpack(text: object) -> tuple[str, tuple[Fraction, ...]]:
    """The (kind, values) back from :func:`pack` (malformed text is a :class:`LedgerError`).

    >>> unpack("zcdp:1/8")
    ('zcdp', (Fraction(1, 8),))
    """
    return _unpack(text) if isinstance(text, str) else _unpack_uncached(text)


@functools.lru_cache(maxsize=1024)
def _unpack(text: str) -> tuple[str, tuple[Fraction, ...]]:  # totals repeat on every row
    return _unpack_uncached(text)


def _unpack_uncached(text: object) -> tuple[str, tuple[Fraction, ...]]:
    kind, _, rest = text.partition(":") if isinstance(text, str) else ("", "", "")
    if kind not in KINDS:
        raise LedgerError(f"the ledger holds a malformed amount {text!r}",
                          remedy="the ledger was altered; restore it from a backup")
    values = tuple(_parse(v, "amount") for v in rest.split(","))
    if len(values) != len(_FIELDS[kind]):
        raise LedgerError(f"the ledger holds a malformed amount {text!r}",
                          remedy="the ledger was altered; restore it from a backup")
    return kind, values


def describe(kind: str, values: tuple[Fraction, ...]) -> str:
    """Human-readable parameters, exact when the decimal form would round.

    >>> describe("pure", (Fraction(1, 3),))
    'ε=1/3 (≈0.333333)'
    >>> describe("approx", (Fraction(1, 2), Fraction(1, 10**6)))
    'ε=0.5, δ=1e-06'
    """
    symbols = {"epsilon": "ε", "delta": "δ", "rho": "ρ"}
    return ", ".join(f"{symbols[f]}={_show(v)}" for f, v in zip(_FIELDS[kind], values, strict=True))


def _show(x: Fraction) -> str:
    if x.denominator == 1:
        return str(x.numerator)
    f = float(x)
    if f != 0 and Fraction(repr(f)) == x:
        return repr(f)
    if x.numerator.bit_length() + x.denominator.bit_length() > 128:
        return f"≈{f:.6g}" if f != 0 else "≈0 (below 1e-308)"
    return f"{x} (≈{f:.6g})"
