"""Scalar expressions of the query plan IR: frozen, hashable values compared by structure.

An expression is built by the SQL front end (:mod:`.sql`) or by the dataframe-style builder
(:mod:`.builder`); both produce these same values, so two queries that mean the same thing
compare equal. Row-level expressions (:class:`Col`, :class:`Compare`, :class:`Case`, ...) run
inside the engine; :class:`Agg` and :class:`KeyRef` appear only in a query's outputs,
``HAVING`` and ``ORDER BY``, where they denote released (noisy) values and public group keys.

>>> e = And((Compare(">=", Col("age"), Lit(18)), InList(Col("sex"), (Lit("Female"),))))
>>> sorted(c.name for c in e.columns())
['age', 'sex']
>>> print(e.sql())
"age" >= 18 AND "sex" IN ('Female')
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, fields
from fractions import Fraction
from typing import Any

__all__ = [
    "Expr", "Col", "Lit", "Compare", "InList", "Between", "And", "Or", "Not", "IsNull",
    "Case", "Arith", "Neg", "Bin", "WidthBucket", "Agg", "KeyRef", "Func",
    "COMPARISONS", "AGGREGATES", "FUNCTIONS", "walk", "depth",
]

COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")

#: Aggregate functions of the IR. Quantile-like functions are one ``quantile`` with a
#: parameter ``p`` (MIN is p = 0, MEDIAN p = 1/2, MAX p = 1).
AGGREGATES = ("count", "count_distinct", "sum", "sum_distinct", "avg", "var_samp", "var_pop", "stddev_samp",
              "stddev_pop", "quantile", "iqr", "regr_slope", "regr_intercept", "corr")

#: Scalar functions of released values (post-processing: never row by row in an engine),
#: with their number of arguments (``rand`` is a uniform draw in [0, 1) that reads nothing). Each is monotone on the pieces where it is defined, so an
#: output's interval maps through it exactly.
FUNCTIONS = {"abs": 1, "sqrt": 1, "power": 2, "exp": 1, "ln": 1, "log10": 1, "round": 1,
             "floor": 1, "ceil": 1, "rand": 0}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal_sql(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, Fraction):
        return str(value.numerator) if value.denominator == 1 else repr(float(value))
    return repr(value)


#: the field names of each expression class, in order (see Expr.children)
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


class Expr:
    """Base of all expression values (each subclass is a frozen dataclass)."""

    __slots__ = ()

    def children(self) -> tuple[Expr, ...]:
        names = _FIELD_NAMES.get(type(self))
        if names is None:  # once per class: dataclasses.fields is slow on hot walks
            names = _FIELD_NAMES[type(self)] = tuple(f.name for f in fields(self))  # type: ignore[arg-type]
        out: list[Expr] = []
        for name in names:
            v = getattr(self, name)
            if isinstance(v, Expr):
                out.append(v)
            elif isinstance(v, tuple):
                for item in v:
                    if isinstance(item, Expr):
                        out.append(item)
                    elif isinstance(item, tuple):
                        out.extend(x for x in item if isinstance(x, Expr))
        return tuple(out)

    def columns(self) -> frozenset[Col]:
        """Every column the expression reads."""
        return frozenset(e for e in walk(self) if isinstance(e, Col))

    def aggregates(self) -> tuple[Agg, ...]:
        """The aggregate calls inside this expression, in order, without repeats."""
        seen: dict[Agg, None] = {}
        for e in walk(self):
            if isinstance(e, Agg):
                seen.setdefault(e, None)
        return tuple(seen)

    def sql(self) -> str:  # pragma: no cover - every subclass overrides
        raise NotImplementedError

    def __str__(self) -> str:
        return self.sql()


def depth(expr: Expr) -> int:
    """The number of levels of an expression tree (a column or a constant is one), counted
    without recursion.

    >>> depth(Col("x")), depth(Neg(Neg(Col("x"))))
    (1, 3)
    """
    deepest, stack = 0, [(expr, 1)]
    while stack:
        e, d = stack.pop()
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in e.children())
    return deepest


def walk(expr: Expr) -> Iterator[Expr]:
    """Pre-order traversal of an expression tree.

    >>> [type(e).__name__ for e in walk(Neg(Col("x")))]
    ['Neg', 'Col']
    """
    stack = [expr]
    while stack:
        e = stack.pop()
        yield e
        stack.extend(reversed(e.children()))


@dataclass(frozen=True, slots=True)
class Col(Expr):
    """A column; ``table`` is the alias of the table it comes from (None until resolved).

    >>> Col("age", "adult").sql()
    '"adult"."age"'
    """

    name: str
    table: str | None = None

    def sql(self) -> str:
        return (f"{_quote(self.table)}." if self.table else "") + _quote(self.name)


@dataclass(frozen=True, slots=True, eq=False)
class Lit(Expr):
    """A public constant: NULL, a boolean, an integer, a float or a string.

    Two constants are equal when their values are equal *and of the same type*: ``1``,
    ``1.0`` and ``TRUE`` are different SQL (an integer, a double, a boolean), so plans that
    differ in them never share a cache entry.

    >>> Lit("O'Hara").sql()
    "'O''Hara'"
    >>> Lit(1) == Lit(1.0), Lit(1) == Lit(True), Lit(2.5) == Lit(2.5)
    (False, False, True)
    """

    value: None | bool | int | float | str

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Lit):
            return NotImplemented
        a, b = self.value, other.value
        return type(a) is type(b) and (a is b or a == b)

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))

    def sql(self) -> str:
        return _literal_sql(self.value)


@dataclass(frozen=True, slots=True)
class Compare(Expr):
    """``left op right`` with SQL's three-valued logic (NULL if either side is NULL)."""

    op: str
    left: Expr
    right: Expr

    def sql(self) -> str:
        return f"{_wrap(self.left)} {self.op} {_wrap(self.right)}"


@dataclass(frozen=True, slots=True)
class InList(Expr):
    """``expr [NOT] IN (constants)``."""

    expr: Expr
    values: tuple[Lit, ...]
    negated: bool = False

    def sql(self) -> str:
        neg = " NOT" if self.negated else ""
        return f"{_wrap(self.expr)}{neg} IN ({', '.join(v.sql() for v in self.values)})"


@dataclass(frozen=True, slots=True)
class Between(Expr):
    """``expr [NOT] BETWEEN low AND high`` (both ends included)."""

    expr: Expr
    low: Expr
    high: Expr
    negated: bool = False

    def sql(self) -> str:
        neg = " NOT" if self.negated else ""
        return f"{_wrap(self.expr)}{neg} BETWEEN {_wrap(self.low)} AND {_wrap(self.high)}"


@dataclass(frozen=True, slots=True)
class And(Expr):
    """Conjunction (Kleene logic)."""

    terms: tuple[Expr, ...]

    def sql(self) -> str:
        return " AND ".join(_wrap(t, (Or,)) for t in self.terms)


@dataclass(frozen=True, slots=True)
class Or(Expr):
    """Disjunction (Kleene logic)."""

    terms: tuple[Expr, ...]

    def sql(self) -> str:
        return " OR ".join(_wrap(t, (And,)) for t in self.terms)


@dataclass(frozen=True, slots=True)
class Not(Expr):
    """Negation (NOT NULL is NULL)."""

    expr: Expr

    def sql(self) -> str:
        return f"NOT ({self.expr.sql()})"


@dataclass(frozen=True, slots=True)
class IsNull(Expr):
    """``expr IS [NOT] NULL``. A float NaN is not NULL (as in SQL engines)."""

    expr: Expr
    negated: bool = False

    def sql(self) -> str:
        return f"{_wrap(self.expr)} IS {'NOT ' if self.negated else ''}NULL"


@dataclass(frozen=True, slots=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 ... [ELSE d] END``; the values are public constants or columns.

    >>> Case(((Compare("<", Col("age"), Lit(30)), Lit("young")),), Lit("old")).sql()
    'CASE WHEN "age" < 30 THEN \\'young\\' ELSE \\'old\\' END'
    """

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None = None

    def sql(self) -> str:
        body = " ".join(f"WHEN {c.sql()} THEN {v.sql()}" for c, v in self.whens)
        tail = f" ELSE {self.default.sql()}" if self.default is not None else ""
        return f"CASE {body}{tail} END"


@dataclass(frozen=True, slots=True)
class Arith(Expr):
    """``left op right`` for op in ``+ - * /``, evaluated in double precision; a division by
    zero is NULL on every engine (never an error that would depend on the data)."""

    op: str
    left: Expr
    right: Expr

    def sql(self) -> str:
        return f"({self.left.sql()} {self.op} {self.right.sql()})"


@dataclass(frozen=True, slots=True)
class Neg(Expr):
    """Unary minus."""

    expr: Expr

    def sql(self) -> str:
        return f"(-{self.expr.sql()})"


@dataclass(frozen=True, slots=True)
class Bin(Expr):
    """Public binning: the label of the bin ``[e_i, e_{i+1})`` holding the value.

    The last bin is closed on the right; values outside ``[e_0, e_k]`` (and NULL, NaN) get
    NULL, so they fall outside the public key set and are not counted.

    >>> Bin(Col("age"), (0, 18, 65, 120)).labels()
    ('[0, 18)', '[18, 65)', '[65, 120]')
    """

    expr: Expr
    edges: tuple[int | float, ...]

    def __post_init__(self) -> None:
        # NaN edges compare false with everything, and integers beyond the double range make
        # some engines fail to compare them with a double column: both are refused up front
        from ..core.errors import UnsupportedQueryError

        e = self.edges
        try:
            ok = len(e) >= 2 and all(isinstance(v, int | float) and not isinstance(v, bool)
                                     and not math.isnan(float(v)) for v in e) \
                and all(float(a) < float(b) for a, b in zip(e, e[1:], strict=False))
        except (OverflowError, TypeError):
            ok = False
        if not ok:
            raise UnsupportedQueryError(
                f"BIN edges {e!r} must be at least two strictly increasing numbers within "
                "double precision",
                remedy="write e.g. BIN(age, 0, 18, 65, 120)")

    def labels(self) -> tuple[str, ...]:
        e = self.edges
        out = []
        for i in range(len(e) - 1):
            right = "]" if i == len(e) - 2 else ")"
            out.append(f"[{_num(e[i])}, {_num(e[i + 1])}{right}")
        return tuple(out)

    def sql(self) -> str:
        return f"BIN({self.expr.sql()}, {', '.join(_num(x) for x in self.edges)})"


@dataclass(frozen=True, slots=True)
class WidthBucket(Expr):
    """SQL's ``WIDTH_BUCKET(x, low, high, n)``: 0 below ``low``, ``n + 1`` at or above ``high``,
    otherwise ``1 + floor((x - low) * n / (high - low))``; NULL for NULL. NaN is above
    everything (as in DuckDB and Spark), so it lands in bucket ``n + 1``."""

    expr: Expr
    low: int | float
    high: int | float
    count: int

    def __post_init__(self) -> None:
        # Engines compute (x - low) * n / (high - low) in double precision for the rows in
        # [low, high); a width (or width times n) beyond the double range makes that NaN or
        # ±inf, and the cast to an integer fails on exactly the rows inside the range: an
        # error that depends on the data. Such ranges are refused up front, by both front ends.
        from ..core.errors import UnsupportedQueryError

        n, lo, hi = self.count, self.low, self.high
        ok = isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 100_000
        try:
            ok = ok and all(isinstance(v, int | float) and not isinstance(v, bool)
                            for v in (lo, hi))
            width = float(hi) - float(lo)
            ok = ok and math.isfinite(float(lo)) and math.isfinite(float(hi)) \
                and width > 0 and math.isfinite(width * n)
        except (OverflowError, TypeError):
            ok = False
        if not ok:
            raise UnsupportedQueryError(
                f"WIDTH_BUCKET(x, {lo!r}, {hi!r}, {n!r}) needs finite low < high, 1 to "
                "100000 buckets, and a range that fits in double precision",
                remedy="write e.g. WIDTH_BUCKET(age, 0, 120, 12)")

    def sql(self) -> str:
        return f"WIDTH_BUCKET({self.expr.sql()}, {_num(self.low)}, {_num(self.high)}, {self.count})"


@dataclass(frozen=True, slots=True)
class Agg(Expr):
    """An aggregate call; in a compiled query each distinct one becomes one noisy release.

    ``func`` is one of :data:`AGGREGATES`; ``arg`` is None for ``COUNT(*)``; ``p`` is the
    quantile's order for ``quantile``; ``arg2`` is the second argument of the two-argument
    aggregates (``REGR_SLOPE(y, x)``, ``REGR_INTERCEPT(y, x)``, ``CORR(y, x)``: ``arg`` is y).

    >>> Agg("quantile", Col("age"), Fraction(1, 2)).sql()
    'QUANTILE("age", 1/2)'
    >>> Agg("corr", Col("y"), arg2=Col("x")).sql()
    'CORR("y", "x")'
    """

    func: str
    arg: Expr | None = None
    p: Fraction | None = None
    arg2: Expr | None = None

    def sql(self) -> str:
        if self.arg2 is not None:
            return f"{self.func.upper()}({self.arg.sql()}, {self.arg2.sql()})"  # type: ignore[union-attr]
        if self.func == "count" and self.arg is None:
            return "COUNT(*)"
        if self.func == "count_distinct":
            return f"COUNT(DISTINCT {self.arg.sql()})"  # type: ignore[union-attr]
        if self.func == "sum_distinct":
            return f"SUM(DISTINCT {self.arg.sql()})"  # type: ignore[union-attr]
        if self.func == "quantile":
            return f"QUANTILE({self.arg.sql()}, {self.p})"  # type: ignore[union-attr]
        return f"{self.func.upper()}({self.arg.sql()})"  # type: ignore[union-attr]


@dataclass(frozen=True, slots=True)
class Func(Expr):
    """A scalar function of released values (``SQRT(VARIANCE(x))``, ``POWER(STDDEV(x), 2)``,
    ``ROUND(AVG(x))``): one of :data:`FUNCTIONS`, computed after the noise, so it costs
    nothing (post-processing).

    >>> Func("power", (Agg("stddev_samp", Col("x")), Lit(2))).sql()
    'POWER(STDDEV_SAMP("x"), 2)'
    """

    name: str
    args: tuple[Expr, ...]

    def sql(self) -> str:
        return f"{self.name.upper()}({', '.join(a.sql() for a in self.args)})"


@dataclass(frozen=True, slots=True)
class KeyRef(Expr):
    """A reference to a group key by its output name (public: keys are declared or selected)."""

    name: str

    def sql(self) -> str:
        return _quote(self.name)


def _num(x: Any) -> str:
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return str(x)


def _wrap(e: Expr, kinds: tuple[type, ...] = (And, Or)) -> str:
    s = e.sql()
    return f"({s})" if isinstance(e, kinds) else s
