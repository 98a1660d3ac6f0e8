"""Static facts about row-level expressions, from declared metadata only: their kind, their
public bounds (interval arithmetic over declared column bounds), and their public key set.

Nothing here reads private data. Public tables joined into a query are public, so their
values may supply key sets and bounds.

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.plan import Scan
>>> from statcurator.query.scope import Scope
>>> from statcurator.query.expr import Arith, Col, Lit
>>> meta = TableMeta("t", (Column("income", type="integer", bounds=(0, 200000)),
...                        Column("sex", categories=("F", "M"))))
>>> an = Analyzer(Scope(DictCatalog({"t": TableInfo.from_meta(meta)}), [Scan("t", "t")]))
>>> an.bounds(Arith("/", Col("income", "t"), Lit(1000)))
Bounds(low=Fraction(0, 1), high=Fraction(200, 1), integral=False)
>>> an.key_set(Col("sex", "t"))
('F', 'M')
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..core.errors import UnsupportedQueryError
from .expr import (
    Agg,
    And,
    Arith,
    Between,
    Bin,
    Case,
    Col,
    Compare,
    Expr,
    InList,
    IsNull,
    KeyRef,
    Lit,
    Neg,
    Not,
    Or,
    WidthBucket,
)
from .scope import Scope

__all__ = ["Bounds", "Analyzer", "NUMERIC"]

NUMERIC = ("integer", "real")


@dataclass(frozen=True)
class Bounds:
    """Public bounds of a numeric expression; ``integral`` when its values are integers."""

    low: Fraction
    high: Fraction
    integral: bool


def _lit_kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "real"
    return "string"


class Analyzer:
    """Kinds, bounds and key sets of expressions in one query's scope."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        #: aliases of the tables joined with LEFT JOIN (their columns may be NULL)
        self.left_joined: tuple[str, ...] = ()

    # -- kinds ------------------------------------------------------------------------
    def kind(self, e: Expr) -> str:
        """``integer``, ``real``, ``string``, ``boolean`` or ``null``; refuses ill-typed ones."""
        if isinstance(e, Col):
            kind = self.scope.info_of(e).kind(e.name)
            if kind == "other":
                # a date, a time, a struct, a list, bytes...: the engine's comparisons,
                # casts and group keys on such values are not those the analysis knows, and
                # may fail (after the charge, or only on some rows: an error as an oracle)
                raise UnsupportedQueryError(
                    f"column {e.name!r} has a type queries cannot use (not an integer, real, "
                    "string or boolean)",
                    remedy="convert it in the data (a date to text, or to a number such as "
                           "its year or days since a fixed day) and register it again")
            return kind
        if isinstance(e, Lit):
            return _lit_kind(e.value)
        if isinstance(e, Compare):
            a, b = self.kind(e.left), self.kind(e.right)
            self._comparable(a, b, e)
            return "boolean"
        if isinstance(e, Between):
            kinds = [self.kind(x) for x in (e.expr, e.low, e.high)]
            self._comparable(kinds[0], kinds[1], e)
            self._comparable(kinds[0], kinds[2], e)
            return "boolean"
        if isinstance(e, InList):
            a = self.kind(e.expr)
            for v in e.values:
                self._comparable(a, self.kind(v), e)
            return "boolean"
        if isinstance(e, And | Or):
            for t in e.terms:
                self._boolean(t)
            return "boolean"
        if isinstance(e, Not):
            self._boolean(e.expr)
            return "boolean"
        if isinstance(e, IsNull):
            self.kind(e.expr)
            return "boolean"
        if isinstance(e, Arith | Neg):
            parts = (e.left, e.right) if isinstance(e, Arith) else (e.expr,)
            kinds = [self.kind(p) for p in parts]
            for p, k in zip(parts, kinds, strict=True):
                if k not in NUMERIC + ("null",):
                    raise UnsupportedQueryError(
                        f"arithmetic on the {k} expression {p.sql()}",
                        remedy="use + - * / on numeric columns and constants only")
            if isinstance(e, Arith) and e.op == "/":
                return "real"
            return "real" if "real" in kinds else "integer"
        if isinstance(e, Case):
            for c, _ in e.whens:
                self._boolean(c)
            branches = {self.kind(v) for _, v in e.whens}
            if e.default is not None:
                branches.add(self.kind(e.default))
            branches.discard("null")
            if not branches:
                return "null"
            if branches <= set(NUMERIC):
                return "real" if "real" in branches else "integer"
            if len(branches) > 1:
                raise UnsupportedQueryError(
                    f"CASE mixes values of kinds {sorted(branches)}: {e.sql()}",
                    remedy="make every THEN/ELSE value the same type")
            return branches.pop()
        if isinstance(e, Bin):
            if self.kind(e.expr) not in NUMERIC:
                raise UnsupportedQueryError(f"BIN of a non-numeric expression {e.expr.sql()}",
                                            remedy="bin numeric columns only")
            return "string"
        if isinstance(e, WidthBucket):
            if self.kind(e.expr) not in NUMERIC:
                raise UnsupportedQueryError(
                    f"WIDTH_BUCKET of a non-numeric expression {e.expr.sql()}",
                    remedy="bin numeric columns only")
            return "integer"
        if isinstance(e, Agg | KeyRef):  # pragma: no cover - front ends keep these out of rows
            raise UnsupportedQueryError(f"{e.sql()} cannot be used row by row",
                                        remedy="aggregates belong in SELECT/HAVING")
        raise UnsupportedQueryError(f"unsupported expression {e.sql()}",  # pragma: no cover
                                    remedy="see docs/queries.md for the SQL subset")

    def _boolean(self, e: Expr) -> None:
        k = self.kind(e)
        if k not in ("boolean", "null"):
            raise UnsupportedQueryError(f"{e.sql()} is not a condition (it is {k})",
                                        remedy="write a comparison, e.g. x > 0")

    @staticmethod
    def _comparable(a: str, b: str, e: Expr) -> None:
        if "null" in (a, b) or a == b or (a in NUMERIC and b in NUMERIC):
            return
        raise UnsupportedQueryError(f"cannot compare {_a(a)} {a} with {_a(b)} {b} in {e.sql()}",
                                    remedy="compare values of the same type "
                                           "(quote strings, leave numbers unquoted)")

    # -- bounds -----------------------------------------------------------------------
    def bounds(self, e: Expr, *, within: Agg | None = None) -> Bounds:
        """Public bounds of a numeric aggregate argument, or a refusal naming the remedy."""
        where = f" in {within.sql()}" if within is not None else ""
        if isinstance(e, Col):
            info = self.scope.info_of(e)
            kind = info.kind(e.name)
            if kind not in NUMERIC:
                raise UnsupportedQueryError(
                    f"column {e.name!r} is {kind}, not numeric{where}",
                    remedy="aggregate numeric columns only (COUNT works on any column)")
            integral = kind == "integer" or (
                e.name in info.meta and str(info.meta[e.name].type) == "integer")
            if info.public:
                pb = info.public_bounds(e.name)
                if pb is None:
                    raise UnsupportedQueryError(
                        f"public column {info.name}.{e.name} has no finite values to bound it",
                        remedy="aggregate a column with values")
                return Bounds(pb[0], pb[1], integral)
            declared = info.meta[e.name].bounds if e.name in info.meta else None
            if declared is None:
                hint = "[0, 200000]" if kind == "integer" else "[0.0, 1.0]"
                raise UnsupportedQueryError(
                    f"column {e.name!r} has no declared bounds{where}",
                    remedy=f"add bounds = {hint} (the public range of {e.name!r}) to its "
                           f"metadata under [columns.{e.name}]; bounds must come from public "
                           "knowledge, never from the data")
            return Bounds(declared[0], declared[1], integral)
        if isinstance(e, Lit):
            v = e.value
            if v is None:
                return Bounds(Fraction(0), Fraction(0), True)
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise UnsupportedQueryError(f"cannot aggregate the constant {e.sql()}",
                                            remedy="aggregate numeric values")
            import math
            if not math.isfinite(v):
                raise UnsupportedQueryError(f"the constant {v} is not finite",
                                            remedy="use finite constants")
            f = Fraction(v) if isinstance(v, int) else Fraction(repr(v))
            return Bounds(f, f, isinstance(v, int))
        if isinstance(e, Neg):
            b = self.bounds(e.expr, within=within)
            return Bounds(-b.high, -b.low, b.integral)
        if isinstance(e, Arith):
            a = self.bounds(e.left, within=within)
            if e.op == "/":
                if not isinstance(e.right, Lit) or not isinstance(e.right.value, int | float) \
                        or isinstance(e.right.value, bool) or e.right.value == 0:
                    raise UnsupportedQueryError(
                        f"division by a non-constant (or zero) inside {within.sql() if within else 'an aggregate'}",
                        remedy="divide by a nonzero constant, or divide the released "
                               "aggregates instead (e.g. SUM(a) / SUM(b))")
                c = self.bounds(e.right).low
                lo, hi = sorted((a.low / c, a.high / c))
                return Bounds(lo, hi, False)
            b = self.bounds(e.right, within=within)
            if e.op == "+":
                return Bounds(a.low + b.low, a.high + b.high, a.integral and b.integral)
            if e.op == "-":
                return Bounds(a.low - b.high, a.high - b.low, a.integral and b.integral)
            corners = [x * y for x in (a.low, a.high) for y in (b.low, b.high)]
            return Bounds(min(corners), max(corners), a.integral and b.integral)
        if isinstance(e, Case):
            parts = [v for _, v in e.whens] + ([e.default] if e.default is not None else [])
            bs = [self.bounds(v, within=within) for v in parts
                  if not (isinstance(v, Lit) and v.value is None)]
            if not bs:
                return Bounds(Fraction(0), Fraction(0), True)
            return Bounds(min(b.low for b in bs), max(b.high for b in bs),
                          all(b.integral for b in bs))
        if isinstance(e, WidthBucket):
            return Bounds(Fraction(0), Fraction(e.count + 1), True)
        raise UnsupportedQueryError(
            f"cannot bound {e.sql()}{where}",
            remedy="aggregate numeric columns with declared bounds, constants, CASE and + - * /")

    # -- key sets ---------------------------------------------------------------------
    def key_set(self, e: Expr) -> tuple[Any, ...] | None:
        """The public set of values a group key can take, or None (not public)."""
        if isinstance(e, Col):
            info = self.scope.info_of(e)
            nullable_join = self._outer_joined(e.table)
            if info.public:
                vals = info.public_values(e.name)
                return vals + ((None,) if nullable_join and None not in vals else ())
            kind = info.kind(e.name)
            col = next((c for c in info.meta.columns if c.name == e.name), None)
            nullable = bool(col and col.nullable)
            if col is not None and col.categories is not None:
                vals = tuple(_coerce(v, kind, e.name) for v in col.categories)
            elif kind == "boolean":
                vals = (False, True)
            else:
                return None
            return vals + ((None,) if nullable and None not in vals else ())
        if isinstance(e, Lit):
            return (e.value,)
        if isinstance(e, Case):
            out: list[Any] = []
            parts = [v for _, v in e.whens] + [e.default if e.default is not None else Lit(None)]
            for v in parts:
                s = self.key_set(v)
                if s is None:
                    return None
                out.extend(x for x in s if x not in out)
            return tuple(out)
        if isinstance(e, Bin):
            return e.labels()
        if isinstance(e, WidthBucket):
            return tuple(range(e.count + 2)) + ((None,) if self._may_be_null(e.expr) else ())
        return None

    def _outer_joined(self, alias: str | None) -> bool:
        return alias in self.left_joined

    def _may_be_null(self, e: Expr) -> bool:
        for c in e.columns():
            info = self.scope.info_of(c)
            if info.public or self._outer_joined(c.table):
                return True
            if c.name not in info.meta or info.meta[c.name].nullable:
                return True
        return False


def _coerce(v: Any, kind: str, column: str) -> Any:
    """A declared category in the column's physical kind (TOML "007" for a string column)."""
    try:
        if kind == "integer" and not isinstance(v, bool) and float(v).is_integer():
            return int(v)
        if kind == "real" and not isinstance(v, bool):
            return float(v)
        if kind == "string":
            return str(v)
        if kind == "boolean" and str(v).lower() in ("true", "false"):
            return str(v).lower() == "true"
        if kind not in ("integer", "real", "boolean"):
            return v
    except (TypeError, ValueError):
        pass
    raise UnsupportedQueryError(
        f"category {v!r} of column {column!r} does not fit its type {kind}",
        remedy="list categories of the column's type in its metadata")


def _a(kind: str) -> str:
    """The article of a kind's name ("an integer", "a string").

    >>> _a("integer"), _a("string")
    ('an', 'a')
    """
    return "an" if kind[:1] in "aeiou" else "a"
