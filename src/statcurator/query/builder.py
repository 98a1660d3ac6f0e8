"""A dataframe-style builder that produces the same :class:`~.plan.QueryPlan` as the SQL
front end (Polars-like names: ``col``, ``lit``, ``when``; aggregate functions ``count``,
``sum``, ``avg``/``mean``, ``variance``, ``stddev``, ``median``, ``quantile``, ``min``,
``max``, ``count_distinct``).

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.sql import parse_sql
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)),
...                        Column("sex", categories=("F", "M"))))
>>> cat = DictCatalog({"t": TableInfo.from_meta(meta)})
>>> built = (Frame(cat, "t").filter(col("age") >= 18).group_by("sex")
...          .agg(count().alias("n"), avg("age").alias("mean_age")))
>>> built == parse_sql("SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age FROM t "
...                    "WHERE age >= 18 GROUP BY sex", cat)
True
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any, Generic, TypeVar

from ..core.errors import UnsupportedQueryError
from .catalog import Catalog
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
from .plan import Filter, GroupKey, Join, OrderKey, Output, QueryPlan, Relation, Scan
from .scope import Scope, agg_name, key_refs, qualify, unique_names

__all__ = ["E", "col", "lit", "when", "count", "count_distinct", "sum", "avg", "mean",
           "variance", "var_pop", "stddev", "stddev_pop", "median", "quantile", "min", "max",
           "Frame", "GroupedFrame", "with_having", "with_order"]

T = TypeVar("T")


def _expr(x: Any) -> Expr:
    if isinstance(x, E):
        return x.node
    if isinstance(x, Expr):
        return x
    if x is None or isinstance(x, bool | int | float | str):
        return Lit(x)
    raise TypeError(f"cannot use {x!r} in a query expression")


def _col(x: Any) -> Expr:
    return Col(x) if isinstance(x, str) else _expr(x)


class E:
    """A builder expression: wraps an IR node and overloads Python operators.

    ``==`` builds a comparison (so an ``E`` is not hashable and has no truth value).

    >>> ((col("age") > 30) & col("sex").is_in(["F"])).node.sql()
    '"age" > 30 AND "sex" IN (\\'F\\')'
    """

    __slots__ = ("node", "name", "function")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, node: Expr, name: str | None = None, function: str | None = None) -> None:
        self.node = node
        self.name = name
        self.function = function

    def alias(self, name: str) -> E:
        """Name the output column."""
        return E(self.node, name, self.function)

    def __bool__(self) -> bool:
        raise TypeError("use & | ~ to combine conditions (not and/or/not)")

    # comparisons
    def _cmp(self, op: str, other: Any) -> E:
        return E(Compare(op, self.node, _expr(other)))

    def __eq__(self, other: Any) -> E:  # type: ignore[override]
        return self._cmp("=", other)

    def __ne__(self, other: Any) -> E:  # type: ignore[override]
        return self._cmp("<>", other)

    def __lt__(self, other: Any) -> E:
        return self._cmp("<", other)

    def __le__(self, other: Any) -> E:
        return self._cmp("<=", other)

    def __gt__(self, other: Any) -> E:
        return self._cmp(">", other)

    def __ge__(self, other: Any) -> E:
        return self._cmp(">=", other)

    # logic
    def __and__(self, other: Any) -> E:
        return E(And(_flat(And, self.node) + _flat(And, _expr(other))))

    def __rand__(self, other: Any) -> E:
        return E(And(_flat(And, _expr(other)) + _flat(And, self.node)))

    def __or__(self, other: Any) -> E:
        return E(Or(_flat(Or, self.node) + _flat(Or, _expr(other))))

    def __ror__(self, other: Any) -> E:
        return E(Or(_flat(Or, _expr(other)) + _flat(Or, self.node)))

    def __invert__(self) -> E:
        n = self.node
        if isinstance(n, InList):
            return E(InList(n.expr, n.values, not n.negated))
        if isinstance(n, Between):
            return E(Between(n.expr, n.low, n.high, not n.negated))
        if isinstance(n, IsNull):
            return E(IsNull(n.expr, not n.negated))
        return E(Not(n))

    # arithmetic
    def _arith(self, op: str, other: Any, reverse: bool = False) -> E:
        a, b = self.node, _expr(other)
        return E(Arith(op, b, a) if reverse else Arith(op, a, b))

    def __add__(self, o: Any) -> E:
        return self._arith("+", o)

    def __radd__(self, o: Any) -> E:
        return self._arith("+", o, True)

    def __sub__(self, o: Any) -> E:
        return self._arith("-", o)

    def __rsub__(self, o: Any) -> E:
        return self._arith("-", o, True)

    def __mul__(self, o: Any) -> E:
        return self._arith("*", o)

    def __rmul__(self, o: Any) -> E:
        return self._arith("*", o, True)

    def __truediv__(self, o: Any) -> E:
        return self._arith("/", o)

    def __rtruediv__(self, o: Any) -> E:
        return self._arith("/", o, True)

    def __neg__(self) -> E:
        n = self.node
        if isinstance(n, Lit) and isinstance(n.value, int | float) and not isinstance(n.value, bool):
            return E(Lit(-n.value))
        return E(Neg(n))

    # predicates and binning
    def is_in(self, values: Iterable[Any]) -> E:
        """``x IN (values)`` with public constants."""
        return E(InList(self.node, tuple(Lit(v) for v in values)))

    def between(self, low: Any, high: Any) -> E:
        """``x BETWEEN low AND high`` (both ends included)."""
        return E(Between(self.node, _expr(low), _expr(high)))

    def is_null(self) -> E:
        return E(IsNull(self.node))

    def is_not_null(self) -> E:
        return E(IsNull(self.node, True))

    def bin(self, edges: Sequence[int | float]) -> E:
        """Public binning into ``[e0, e1), ..., [e_{k-1}, e_k]`` labelled like ``'[0, 18)'``."""
        edges = tuple(edges)
        if len(edges) < 2 or builtins.any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
            raise UnsupportedQueryError(f"bin edges {edges} must be at least two increasing numbers",
                                        remedy="e.g. col('age').bin([0, 18, 65, 120])")
        return E(Bin(self.node, edges))

    def width_bucket(self, low: int | float, high: int | float, count: int) -> E:
        """SQL's WIDTH_BUCKET: buckets 1..count over [low, high), 0 below, count+1 above."""
        return E(WidthBucket(self.node, low, high, count))

    def __repr__(self) -> str:
        return f"E({self.node.sql()})" + (f".alias({self.name!r})" if self.name else "")


def _flat(kind: type, node: Expr) -> tuple[Expr, ...]:
    return node.terms if isinstance(node, kind) else (node,)  # type: ignore[attr-defined]


def col(name: str, table: str | None = None) -> E:
    """A column (optionally qualified by a table alias)."""
    return E(Col(name, table), name)


def lit(value: Any) -> E:
    """A public constant."""
    return E(Lit(value))


class _When:
    def __init__(self, whens: tuple[tuple[Expr, Expr], ...], cond: Expr) -> None:
        self._whens, self._cond = whens, cond

    def then(self, value: Any) -> _Chain:
        return _Chain(self._whens + ((self._cond, _expr(value)),))


class _Chain(E):
    __slots__ = ("_whens",)

    def __init__(self, whens: tuple[tuple[Expr, Expr], ...]) -> None:
        super().__init__(Case(whens, None))
        self._whens = whens

    def when(self, cond: Any) -> _When:
        return _When(self._whens, _expr(cond))

    def otherwise(self, value: Any) -> E:
        return E(Case(self._whens, _expr(value)))


def when(cond: Any) -> _When:
    """``when(c1).then(v1).when(c2).then(v2).otherwise(d)`` — a CASE on public constants."""
    return _When((), _expr(cond))


# -- aggregates --------------------------------------------------------------------------

def _agg(func: str, x: Any = None, p: Fraction | None = None, function: str | None = None) -> E:
    return E(Agg(func, None if x is None else _col(x), p), None, function)


def count(x: Any = None) -> E:
    """``COUNT(*)`` (no argument) or ``COUNT(x)`` (non-NULL values)."""
    return _agg("count", x, function="count")


def count_distinct(x: Any) -> E:
    """``COUNT(DISTINCT x)``: distinct persons on the privacy unit column (sensitivity from
    the groups a unit may touch), or distinct values of any other column (from its rows)."""
    return _agg("count_distinct", x, function="count_distinct")


def sum(x: Any) -> E:  # noqa: A001 - the SQL name
    """``SUM(x)`` (clamped to x's declared bounds)."""
    return _agg("sum", x, function="sum")


def avg(x: Any) -> E:
    """``AVG(x)``: midpoint + noisy centred sum / noisy count."""
    return _agg("avg", x, function="avg")


def mean(x: Any) -> E:
    """Same as :func:`avg` (named ``mean_x`` by default)."""
    return _agg("avg", x, function="mean")


def variance(x: Any) -> E:
    """Sample variance (``VARIANCE``/``VAR_SAMP``)."""
    return _agg("var_samp", x, function="var")


def var_pop(x: Any) -> E:
    """Population variance."""
    return _agg("var_pop", x, function="var_pop")


def stddev(x: Any) -> E:
    """Sample standard deviation."""
    return _agg("stddev_samp", x, function="stddev")


def stddev_pop(x: Any) -> E:
    """Population standard deviation."""
    return _agg("stddev_pop", x, function="stddev_pop")


def quantile(x: Any, p: Any) -> E:
    """The p-quantile by the exponential mechanism (``QUANTILE(x, p)``)."""
    q = Fraction(p) if not isinstance(p, float) else Fraction(repr(p))
    if not 0 <= q <= 1:
        raise UnsupportedQueryError(f"the quantile order {p} must be in [0, 1]",
                                    remedy="e.g. quantile('age', 0.9)")
    return _agg("quantile", x, q, function="quantile")


def median(x: Any) -> E:
    """The median (quantile 1/2)."""
    return _agg("quantile", x, Fraction(1, 2), function="median")


def min(x: Any) -> E:  # noqa: A001
    """Quantile 0 (see docs: the exponential mechanism over the declared range)."""
    return _agg("quantile", x, Fraction(0), function="min")


def max(x: Any) -> E:  # noqa: A001
    """Quantile 1."""
    return _agg("quantile", x, Fraction(1), function="max")


# -- frames --------------------------------------------------------------------------------

class Frame(Generic[T]):
    """A lazy relation over one private table (and public tables joined to it).

    ``finish`` turns the finished :class:`QueryPlan` into what the caller wants (the curator
    returns its ``Query``; by default the plan itself).
    """

    def __init__(self, catalog: Catalog, table: str, alias: str | None = None, *,
                 finish: Callable[[QueryPlan], T] | None = None,
                 _relation: Relation | None = None) -> None:
        info = catalog.table_info(table)
        self.catalog = catalog
        self.finish: Callable[[QueryPlan], T] = finish or _identity  # type: ignore[assignment]
        self.relation: Relation = _relation or Scan(info.name, alias or info.name)
        self.scope = Scope(catalog, self.relation.scans())

    def _derive(self, relation: Relation) -> Frame[T]:
        f = Frame.__new__(Frame)
        f.catalog, f.finish, f.relation = self.catalog, self.finish, relation
        f.scope = Scope(self.catalog, relation.scans())
        return f

    def filter(self, *predicates: Any) -> Frame[T]:
        """Keep rows where every predicate holds (``WHERE``); consecutive filters merge."""
        terms: list[Expr] = []
        for p in predicates:
            terms.extend(_flat(And, qualify(_expr(p), self.scope)))
        rel = self.relation
        if isinstance(rel, Filter):
            terms = list(_flat(And, rel.predicate)) + terms
            rel = rel.input
        if not terms:
            return self
        pred = terms[0] if len(terms) == 1 else And(tuple(terms))
        return self._derive(Filter(rel, pred))

    where = filter

    def join(self, table: str, on: Any, *, how: str = "inner", alias: str | None = None) -> Frame[T]:
        """Join a public table: ``on`` is a column name, a list of names, a dict
        ``{left: right}`` or a list of ``(left, right)`` pairs.

        >>> import pyarrow as pa
        >>> from statcurator.core.schema import Column, TableMeta
        >>> from statcurator.query.catalog import DictCatalog, TableInfo
        >>> pub = pa.table({"city": ["a"], "region": ["N"]})
        >>> cat = DictCatalog({
        ...     "t": TableInfo.from_meta(TableMeta("t", (Column("city"),))),
        ...     "r": TableInfo.from_schema("r", TableMeta("r", (Column("city"),)), pub.schema,
        ...                                public=True, data=pub)})
        >>> plan = Frame(cat, "t").join("r", on="city").group_by(col("region", "r")).agg(count())
        >>> print(plan.sql())
        SELECT "region" AS "region", COUNT(*) AS "count" FROM "t" AS "t" JOIN "r" AS "r" ON "t"."city" = "r"."city" GROUP BY "r"."region"
        """
        if how not in ("inner", "left"):
            raise UnsupportedQueryError(f"a {how} join", remedy="use how='inner' or how='left'")
        info = self.catalog.table_info(table)
        right = Scan(info.name, alias or info.name)
        if isinstance(on, str):
            pairs = [(on, on)]
        elif isinstance(on, dict):
            pairs = list(on.items())
        else:
            pairs = [(p, p) if isinstance(p, str) else tuple(p) for p in on]
        base = self.relation
        scope = Scope(self.catalog, base.scans() + (right,))
        left_scope = self.scope
        cond = []
        for a, b in pairs:
            la = qualify(_col(a), left_scope)
            rb = _col(b)
            rb = scope.resolve(rb.name, right.alias) if isinstance(rb, Col) and rb.table is None \
                else qualify(rb, scope)
            cond.append((la, rb))
        # filters stay above the join, where SQL's WHERE puts them
        preds = None
        if isinstance(base, Filter):
            preds, base = base.predicate, base.input
        rel: Relation = Join(base, right, tuple(cond), how)
        if preds is not None:
            rel = Filter(rel, preds)
        return self._derive(rel)

    def group_by(self, *keys: Any) -> GroupedFrame[T]:
        """Group by columns or expressions (``col('age').bin([...]).alias('band')``)."""
        gk: list[tuple[str | None, Expr]] = []
        for k in keys:
            e: Expr
            if isinstance(k, str):
                col = self.scope.resolve(k)
                gk.append((col.name, col))
                continue
            e = qualify(_expr(k), self.scope)
            name = k.name if isinstance(k, E) else None
            gk.append((name or (e.name if isinstance(e, Col) else None), e))
        named = [n or f"group_{i + 1}" for i, (n, _) in enumerate(gk)]
        out: list[GroupKey] = []
        for n, (_, e) in zip(unique_names(named), gk, strict=True):
            if not builtins.any(k.expr == e for k in out):
                out.append(GroupKey(n, e))
        return GroupedFrame(self, tuple(out))

    def agg(self, *aggs: Any, **named: Any) -> T:
        """Aggregate the whole table (no GROUP BY)."""
        return GroupedFrame(self, ()).agg(*aggs, **named)


def _identity(plan: QueryPlan) -> QueryPlan:
    return plan


class GroupedFrame(Generic[T]):
    """A frame with group keys, waiting for its aggregates."""

    def __init__(self, frame: Frame[T], keys: tuple[GroupKey, ...]) -> None:
        self.frame = frame
        self.keys = keys

    def agg(self, *aggs: Any, **named: Any) -> T:
        """The outputs: the group keys first, then the aggregates (positional ones are named
        by ``.alias`` or by default, e.g. ``sum_income``; keyword ones by their keyword)."""
        items = [(a.name if isinstance(a, E) else None, a) for a in aggs]
        items += list(named.items())
        if not items:
            raise UnsupportedQueryError("no aggregate given", remedy="e.g. .agg(count())")
        exprs: list[Expr] = []
        names: list[str] = []
        for name, a in items:
            e = qualify(_expr(a), self.frame.scope)
            e = key_refs(e, self.keys, "agg()")
            if not e.aggregates():
                raise UnsupportedQueryError(f"{e.sql()} is not an aggregate",
                                            remedy="use count(), sum('x'), avg('x'), ...")
            exprs.append(e)
            if name is None and isinstance(e, Agg):
                name = agg_name(e, a.function if isinstance(a, E) else None)
            names.append(name or f"col_{len(names) + 1}")
        key_names = [k.name for k in self.keys]
        outs = unique_names(key_names + names)
        outputs = tuple(Output(n, KeyRef(k.name)) for n, k in zip(outs, self.keys, strict=False)) \
            + tuple(Output(n, e) for n, e in zip(outs[len(self.keys):], exprs, strict=True))
        plan = QueryPlan(self.frame.relation, self.keys, outputs)
        return self.frame.finish(plan)


def _outputs_scope(plan: QueryPlan, e: Expr, where: str) -> Expr:
    """Resolve names in HAVING/ORDER BY: output names first, then group keys."""
    named = {o.name: o.expr for o in plan.outputs}

    def sub(x: Expr) -> Expr:
        if isinstance(x, Col) and x.table is None and x.name in named:
            return named[x.name]
        if isinstance(x, Col):
            for k in plan.group_by:
                if isinstance(k.expr, Col) and k.expr.name == x.name:
                    return KeyRef(k.name)
            raise UnsupportedQueryError(f"{where} refers to {x.name!r}, which is not an output",
                                        remedy="use output names: " + ", ".join(named))
        from .scope import replace_children
        return replace_children(x, sub)

    return sub(e)


def with_having(plan: QueryPlan, predicate: Any) -> QueryPlan:
    """The plan with a HAVING predicate over its released outputs (post-processing).

    >>> from statcurator.query.plan import Scan
    >>> p = QueryPlan(Scan("t", "t"), (), (Output("n", Agg("count")),))
    >>> with_having(p, col("n") > 10).having
    Compare(op='>', left=Agg(func='count', arg=None, p=None, arg2=None), right=Lit(value=10))
    """
    e = _outputs_scope(plan, _expr(predicate), "having()")
    if plan.having is not None:
        e = And(_flat(And, plan.having) + _flat(And, e))
    return dataclasses.replace(plan, having=e)


def with_order(plan: QueryPlan, *keys: Any, descending: bool | Sequence[bool] = False) -> QueryPlan:
    """The plan sorted by outputs (post-processing)."""
    desc = [descending] * len(keys) if isinstance(descending, bool) else list(descending)
    order = tuple(OrderKey(_outputs_scope(plan, _col(k), "sort()"), d)
                  for k, d in zip(keys, desc, strict=True))
    return dataclasses.replace(plan, order_by=order)


def with_limit(plan: QueryPlan, n: int | None, offset: int = 0) -> QueryPlan:
    """The plan keeping ``n`` released rows after ``offset`` (post-processing: every group is
    still measured and charged).

    >>> from statcurator.query.plan import Scan
    >>> p = QueryPlan(Scan("t", "t"), (), (Output("n", Agg("count")),))
    >>> with_limit(p, 5, 10).sql()
    'SELECT COUNT(*) AS "n" FROM "t" AS "t" LIMIT 5 OFFSET 10'
    """
    for name, v in (("n", n), ("offset", offset)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
            raise UnsupportedQueryError(f"limit: {name} must be a non-negative integer, got {v!r}",
                                        remedy="e.g. .limit(10) or .limit(10, offset=20)")
    return dataclasses.replace(plan, limit=n, offset=offset)
