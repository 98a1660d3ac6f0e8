"""The compiled relational plan engines run, and the exact aggregates they return.

The compiler (:mod:`.compiler`) turns a :class:`~.plan.QueryPlan` into an
:class:`EnginePlan`: the private relation (scan, public joins, filter), the group keys, the
restriction to public key sets, per-unit contribution bounding, and the per-row *integer*
terms whose sums the engine returns. Every real value is clamped to its declared bounds and
rounded onto the public grid ``2**-k`` before it is summed, so an engine sums integers (DuckDB
HUGEINT, Spark DECIMAL(38), Python int) and every engine returns *identical* numbers.

Engines never add noise: they return an :class:`ExactResult`, which only the compiled
query's mechanisms ever see.

Per row, a :class:`Quantized` input ``q`` is NULL when its expression is NULL or NaN, and
otherwise ``floor(clamp(x, lq·2^-k, uq·2^-k)·2^k + 1/2)``, an integer in ``[lq, uq]`` (the
clamp happens in double precision, where ±∞ is clamped like any other value).

>>> from statcurator.query.expr import Col
>>> q = Quantized(Col("age", "t"), bits=0, lq=0, uq=120, integral=True, real=False)
>>> q.quantize(130), q.quantize(None), q.quantize(41)
(120, None, 41)
>>> r = Quantized(Col("x", "t"), bits=2, lq=-4, uq=4, integral=False, real=True)
>>> r.quantize(0.3), r.quantize(float("inf")), r.quantize(float("nan"))
(1, 4, None)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .expr import Col, Expr
from .plan import GroupKey, Relation

__all__ = ["Quantized", "Term", "Histogram", "Bounding", "EnginePlan", "ExactResult",
           "TERM_KINDS"]

#: Per-group exact aggregates an engine can be asked for.
#: ``rows`` COUNT(*); ``nonnull`` COUNT(expr); ``valid`` COUNT(q); ``sum`` SUM(q);
#: ``centered`` SUM(2q - (lq + uq)); ``centered_sq`` SUM((2q - (lq + uq))^2);
#: ``units`` COUNT(DISTINCT privacy unit); ``distinct`` COUNT(DISTINCT expr); ``cross``
#: SUM((2q - (lq + uq))·(2q' - (lq' + uq'))) over the rows where both are non-NULL;
#: ``distinct_sum`` SUM(DISTINCT q).
TERM_KINDS = ("rows", "nonnull", "valid", "sum", "centered", "centered_sq", "units",
              "distinct", "cross", "distinct_sum")


@dataclass(frozen=True, slots=True)
class Quantized:
    """A numeric expression clamped to ``[lq, uq]·2^-bits`` and rounded onto the grid 2^-bits.

    ``integral``: the expression is an integer column read with bits <= 0 rounding, so the
    engine may clamp it as an integer; ``real``: its physical type is floating point, so NaN
    must be tested for (a NaN is treated as NULL: it contributes nothing).
    """

    expr: Expr
    bits: int
    lq: int
    uq: int
    integral: bool
    real: bool

    @property
    def scale(self) -> Fraction:
        """The value of one grid step, 2**-bits."""
        return Fraction(1, 2**self.bits) if self.bits >= 0 else Fraction(2 ** -self.bits)

    @property
    def center(self) -> int:
        """lq + uq: ``2q - center`` is twice the offset from the middle of the range."""
        return self.lq + self.uq

    def low_double(self) -> float:
        return float(self.lq * self.scale)

    def high_double(self) -> float:
        return float(self.uq * self.scale)

    def step_double(self) -> float:
        return float(1 / self.scale)

    def quantize(self, x: Any) -> int | None:
        """The reference semantics every engine reproduces (used by the memory engine)."""
        if x is None:
            return None
        if self.integral and self.bits == 0 and isinstance(x, int):
            return min(max(x, self.lq), self.uq)
        x = float(x)
        if math.isnan(x):
            return None
        x = min(max(x, self.low_double()), self.high_double())
        return int(math.floor(x * self.step_double() + 0.5))


@dataclass(frozen=True, slots=True)
class Term:
    """One exact per-group aggregate: a kind of :data:`TERM_KINDS` over an input."""

    kind: str
    input: Quantized | Expr | None = None
    #: the second input of a ``cross`` term
    input2: Quantized | None = None

    def __post_init__(self) -> None:
        if self.kind not in TERM_KINDS:
            raise ValueError(f"unknown term kind {self.kind!r}")


@dataclass(frozen=True, slots=True)
class Histogram:
    """Per (group, bin) row counts of a quantized input over ``bins`` equal public bins.

    Bin ``b`` holds ``q`` with ``b = (q - lq)`` when there is one bin per grid point
    (``bins == uq - lq + 1``), else ``b = min((q - lq)·bins // (uq - lq), bins - 1)``. Only
    aggregates leave the engine: counts per bin, from which quantile scores are computed.
    """

    input: Quantized
    bins: int

    @property
    def per_point(self) -> bool:
        return self.bins == self.input.uq - self.input.lq + 1

    def bin_of(self, q: int | None) -> int | None:
        if q is None:
            return None
        off = q - self.input.lq
        if self.per_point:
            return off
        return min(off * self.bins // (self.input.uq - self.input.lq), self.bins - 1)

    def bin_range(self, b: int) -> tuple[Fraction, Fraction]:
        """The value range ``[low, high]`` of bin ``b`` (in data units)."""
        q = self.input
        if self.per_point:
            v = (q.lq + b) * q.scale
            return v, v
        width = Fraction(q.uq - q.lq, self.bins)
        lo = q.lq + b * width
        hi = q.lq + (b + 1) * width
        return lo * q.scale, hi * q.scale


@dataclass(frozen=True, slots=True)
class Bounding:
    """Contribution bounding per privacy unit.

    Within each unit (rows sharing ``unit``; NULL ids form one unit) keep at most
    ``max_groups`` groups, ranked by the MD5 of (salt, unit, group key) with ties broken on
    the key values themselves — so distinct groups never share a rank, whatever their
    hashes —, then at most ``max_rows`` rows, ranked by the MD5 of (salt, unit, everything
    the aggregation reads from the row). Hashed fields are encoded unambiguously (see
    :mod:`statcurator.engines.sqlgen`). The salt is secret and fresh for every release, so
    the choice is random (not by data order) yet identical on every engine; rows with equal
    hashes are identical in everything the aggregates read, so which one is kept does not
    matter.
    """

    unit: Col
    max_rows: int
    max_groups: int | None = None


@dataclass(frozen=True)
class EnginePlan:
    """What an engine runs: relation → keys → key restriction → bounding → exact aggregates."""

    relation: Relation
    keys: tuple[GroupKey, ...]
    key_values: tuple[tuple[Any, ...] | None, ...]
    bounding: Bounding | None
    terms: tuple[Term, ...]
    histograms: tuple[Histogram, ...] = ()
    #: which keys (and whether the unit) are real-valued: they are hashed in their DOUBLE
    #: text form, so a CASE mixing 1 and 2.5 hashes 1 as "1.0" on every engine
    real_keys: tuple[bool, ...] = ()
    real_unit: bool = False
    #: which COUNT(DISTINCT expr) inputs are real-valued (hashed as DOUBLE text, like keys)
    real_distinct: tuple[bool, ...] = ()

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(k.name for k in self.keys)

    def quantized_inputs(self) -> tuple[Quantized, ...]:
        """The distinct quantized inputs the terms and histograms read, in order."""
        seen: dict[Quantized, None] = {}
        for t in self.terms:
            if isinstance(t.input, Quantized):
                seen.setdefault(t.input, None)
            if t.input2 is not None:
                seen.setdefault(t.input2, None)
        for h in self.histograms:
            seen.setdefault(h.input, None)
        return tuple(seen)

    def describe(self) -> str:
        """A readable summary (used by ``Query.explain``)."""
        lines = [f"keys: {', '.join(f'{k.name} = {k.expr.sql()}' for k in self.keys) or '(none)'}"]
        for k, vals in zip(self.keys, self.key_values, strict=True):
            if vals is not None:
                shown = ", ".join(map(repr, vals[:8])) + (", ..." if len(vals) > 8 else "")
                lines.append(f"  {k.name} restricted to its public key set ({len(vals)}): {shown}")
        if self.bounding is not None:
            b = self.bounding
            g = f", at most {b.max_groups} groups" if b.max_groups else ""
            lines.append(f"bounding: at most {b.max_rows} rows per {b.unit.name}{g} "
                         "(random: salted MD5, fresh salt per release)")
        for i, t in enumerate(self.terms):
            lines.append(f"term {i}: {t.kind}" + (f" of {_show_input(t.input)}" if t.input is not None else ""))
        for i, h in enumerate(self.histograms):
            lines.append(f"histogram {i}: {h.bins} bins of {_show_input(h.input)}")
        return "\n".join(lines)


def _show_input(x: Quantized | Expr) -> str:
    if isinstance(x, Quantized):
        lo, hi = x.lq * x.scale, x.uq * x.scale
        return f"clamp({x.expr.sql()}, {_f(lo)}, {_f(hi)}) on the grid 2^{-x.bits}"
    return x.sql()


def _f(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{float(x):g}"


@dataclass
class ExactResult:
    """Exact aggregates per group, as an engine returns them (never released as such).

    ``groups`` maps a key tuple to the term values (Python ints, in the order of
    ``EnginePlan.terms``); groups without rows are absent. ``histograms[i]`` maps a key tuple
    to ``{bin: count}``.
    """

    key_names: tuple[str, ...]
    groups: dict[tuple[Any, ...], tuple[int, ...]] = field(default_factory=dict)
    histograms: tuple[dict[tuple[Any, ...], dict[int, int]], ...] = ()

    def canonical(self) -> tuple[Any, ...]:
        """A comparable form (for parity tests between engines)."""
        groups = sorted(((_canon_key(k), v) for k, v in self.groups.items()), key=repr)
        hists = tuple(sorted(((_canon_key(k), tuple(sorted(h.items()))) for k, h in hist.items()),
                             key=repr) for hist in self.histograms)
        return (self.key_names, tuple(groups), hists)


def _canon_key(k: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(int(v) if isinstance(v, float) and v.is_integer() else v for v in k)
