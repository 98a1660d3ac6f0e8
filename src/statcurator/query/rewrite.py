"""The rewrite rules that make a plan's sensitivity bounded, decided from metadata alone.

1. :func:`clamp_to_grid` — every numeric aggregate argument is clamped to its public bounds
   and rounded onto the public grid 2^-k (NULL and NaN contribute nothing, ±∞ clamp), so an
   engine sums integers exactly and one row moves a sum by a known amount.
2. :func:`contribution_bounding` — with a person id, at most ``max_rows`` rows and
   ``max_groups`` groups per person reach the aggregation (chosen at random by salted
   hashes in the engine), so one person moves the aggregates by a known amount.
3. :func:`public_key_sets` — group keys with a public set of values restrict the rows to
   those values, and the answer lists every one of them; the others are left to DP
   partition selection.

The compiler (:mod:`.compiler`) applies them and derives the sensitivities
(:mod:`.sensitivity`).

>>> from statcurator.query.analysis import Bounds
>>> from statcurator.query.expr import Col
>>> from fractions import Fraction
>>> q = clamp_to_grid(Col("income"), Bounds(Fraction(0), Fraction(200000), False), "real")
>>> q.bits, q.lq, q.uq * q.scale
(12, 0, Fraction(200000, 1))
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..core.errors import UnsupportedQueryError
from .analysis import Analyzer, Bounds
from .catalog import TableInfo
from .expr import Arith, Col, Expr, Neg, walk
from .plan import GroupKey
from .relational import Bounding, Quantized

__all__ = ["GRID_SPAN_BITS", "clamp_to_grid", "contribution_bounding", "public_key_sets"]

_DOUBLE_MAX = Fraction(sys.float_info.max)
#: the finest grid 2^-k engines can scale by in double precision (k <= 1000 keeps 2^k finite)
_MAX_BITS = 1000

#: A quantized input spans at most 2**GRID_SPAN_BITS grid steps: squares of centred values
#: then fit in 64 bits and sums of 10^9 rows stay exact in 128.
GRID_SPAN_BITS = 30


def clamp_to_grid(e: Expr, b: Bounds, kind: str) -> Quantized:
    """Clamp ``e`` to its public bounds on the finest grid 2^-k with ``max|bound|·2^k <= 2^30``.

    Integer-valued inputs keep k <= 0 (no rounding at all for bounds below 2^30). The
    quantized range ``[lq, uq]·2^-k`` lies inside the declared bounds, so the sensitivity
    computed from the declared bounds stays valid.

    >>> from statcurator.query.expr import Col
    >>> clamp_to_grid(Col("x"), Bounds(Fraction(0), Fraction(200000), True), "integer")
    Quantized(expr=Col(name='x', table=None), bits=0, lq=0, uq=200000, integral=True, real=False)
    >>> clamp_to_grid(Col("x"), Bounds(Fraction(-1), Fraction(1), False), "real").bits
    30
    """
    m = max(abs(b.low), abs(b.high))
    if m > _DOUBLE_MAX:  # engines clamp in double precision: the bounds must be doubles
        raise UnsupportedQueryError(
            f"the bounds of {e.sql()} (up to about 10^{len(str(math.floor(m))) - 1} in "
            "magnitude) exceed double precision",
            remedy="aggregate an expression with a smaller range (e.g. divide by a constant)")
    if m == 0:
        bits = 0
    else:
        bits = GRID_SPAN_BITS - (m.numerator.bit_length() - m.denominator.bit_length())
        while m * Fraction(2) ** bits > 2**GRID_SPAN_BITS:
            bits -= 1
        while m * Fraction(2) ** (bits + 1) <= 2**GRID_SPAN_BITS:
            bits += 1
    if b.integral:
        bits = min(bits, 0)
    if bits > _MAX_BITS:  # the grid step 2^-bits must be a (normal) double as well
        raise UnsupportedQueryError(
            f"the bounds of {e.sql()} are too close to 0 for double precision",
            remedy="aggregate an expression with a larger range (e.g. multiply by a constant)")
    step = Fraction(2) ** bits
    lq = math.ceil(b.low * step)
    uq = math.floor(b.high * step)
    if lq > uq:  # pragma: no cover - impossible with GRID_SPAN_BITS steps of resolution
        raise UnsupportedQueryError(f"the bounds [{b.low}, {b.high}] are too narrow",
                                    remedy="declare wider bounds")
    plain = not any(isinstance(n, Arith | Neg) for n in walk(e))
    integral = kind == "integer" and bits == 0 and plain
    return Quantized(e, bits, lq, uq, integral, kind == "real" or not plain)


def contribution_bounding(private: TableInfo, alias: str, grouped: bool,
                          stability: int) -> tuple[Bounding | None, int, int]:
    """The bounding step for the table's privacy unit, and the resulting (rows, groups)
    one unit can contribute: ``(max_rows, min(max_groups, max_rows))`` with a person id
    (bounding runs after the joins, so it absorbs their duplication), ``(stability,
    stability)`` with one row per person, and ``(k·stability, k·stability)`` for a group of
    up to k rows without a key (nothing to bound by: each of its rows is duplicated by the
    joins like any row).

    >>> from statcurator.core.schema import Column, PrivacyUnit, TableMeta
    >>> meta = TableMeta("t", (Column("pid"),), privacy_unit=PrivacyUnit("pid", 5, 2))
    >>> b, r, g = contribution_bounding(TableInfo.from_meta(meta), "t", True, 1)
    >>> (b.max_rows, b.max_groups, r, g)
    (5, 2, 5, 2)
    >>> meta = TableMeta("t", (Column("x"),), privacy_unit=PrivacyUnit(group_size=4))
    >>> contribution_bounding(TableInfo.from_meta(meta), "t", True, 3)
    (None, 12, 12)
    """
    unit = private.meta.privacy_unit
    if unit.column is None:  # a row, or a group of max_rows = group_size rows
        return None, unit.max_rows * stability, unit.max_rows * stability
    if not private.has(unit.column):
        raise UnsupportedQueryError(
            f"the privacy unit column {unit.column!r} is missing from the data",
            remedy="fix privacy_unit in the metadata")
    r = unit.max_rows
    g = min(unit.max_groups or r, r)
    bounding = Bounding(Col(unit.column, alias), unit.max_rows,
                        unit.max_groups if grouped else None)
    return bounding, r, g


def public_key_sets(analyzer: Analyzer, keys: Sequence[GroupKey],
                    max_keys: int) -> list[tuple[Any, ...] | None]:
    """Each key's public set of values (None: not public), refusing absurdly many groups."""
    sets = [None if s is None else _distinct(s) for s in (analyzer.key_set(k.expr) for k in keys)]
    if sets and all(s is not None for s in sets):
        size = math.prod([len(s) for s in sets if s is not None])
        if size > max_keys:
            raise UnsupportedQueryError(
                f"the public key sets make {size} groups",
                remedy=f"group by fewer or coarser keys (at most {max_keys} groups)")
    return sets


def _distinct(values: Sequence[Any]) -> tuple[Any, ...]:
    """The values without repeats under SQL equality (``-0.0 = 0.0``, ``1 = 1.0``; a
    boolean never equals a number; NaN equals NaN), first occurrence kept.

    A key listed twice would be released twice, with independent noise on the *same* group,
    while its sensitivity counts it once.

    >>> _distinct((0.0, -0.0, 1, 1.0, True, "1", float("nan"), float("nan")))
    (0.0, 1, True, '1', nan)
    """
    out: dict[tuple[Any, ...], Any] = {}
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            key: tuple[Any, ...] = ("nan",)
        else:
            key = (isinstance(v, bool), v)
        out.setdefault(key, v)
    return tuple(out.values())
