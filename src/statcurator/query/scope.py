"""Name resolution shared by the SQL front end and the builder, so both give the same plan.

A :class:`Scope` knows the tables of a query (the private one and any public ones joined to
it) under their aliases, and turns a column name into a qualified :class:`~.expr.Col`.
:func:`qualify` applies it to a whole expression; :func:`key_refs` rewrites an output
expression so that group keys become :class:`~.expr.KeyRef` and anything else that reads a
row is refused (row-level output).

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> meta = TableMeta("t", (Column("age", type="integer"),))
>>> scope = Scope(DictCatalog({"t": TableInfo.from_meta(meta)}), [Scan("t", "t")])
>>> scope.resolve("age")
Col(name='age', table='t')
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..core.errors import UnsupportedQueryError
from .catalog import Catalog, TableInfo
from .expr import Agg, Col, Expr, KeyRef, Lit
from .plan import GroupKey, Scan

__all__ = ["Scope", "qualify", "key_refs", "agg_name", "unique_names", "replace_children"]


class Scope:
    """The tables visible in one query, by alias."""

    def __init__(self, catalog: Catalog, scans: Sequence[Scan]) -> None:
        self.catalog = catalog
        self.tables: dict[str, TableInfo] = {}
        for s in scans:
            if s.alias in self.tables:
                raise UnsupportedQueryError(f"the alias {s.alias!r} is used twice",
                                            remedy="give each table its own alias")
            self.tables[s.alias] = catalog.table_info(s.table)

    def resolve(self, name: str, table: str | None = None) -> Col:
        if table is not None:
            info = self.tables.get(table)
            if info is None:
                for alias, t in self.tables.items():  # a table's own name works as an alias
                    if t.name == table:
                        table, info = alias, t
                        break
            if info is None:
                raise UnsupportedQueryError(
                    f"unknown table or alias {table!r} in {table}.{name}",
                    remedy="tables in this query: " + ", ".join(self.tables))
            return Col(self._column_name(info, name), table)
        hits = [(alias, info) for alias, info in self.tables.items()
                if self._find(info, name) is not None]
        if not hits:
            cols = sorted({c for info in self.tables.values() for c in info.columns})
            raise UnsupportedQueryError(f"unknown column {name!r}",
                                        remedy="columns available: " + ", ".join(cols))
        if len(hits) > 1:
            raise UnsupportedQueryError(
                f"column {name!r} is ambiguous (in {', '.join(a for a, _ in hits)})",
                remedy=f"qualify it, e.g. {hits[0][0]}.{name}")
        alias, info = hits[0]
        return Col(self._find(info, name), alias)  # type: ignore[arg-type]

    @staticmethod
    def _find(info: TableInfo, name: str) -> str | None:
        if info.has(name):
            return name
        lowered = [c for c in info.columns if c.lower() == name.lower()]
        return lowered[0] if len(lowered) == 1 else None

    def _column_name(self, info: TableInfo, name: str) -> str:
        found = self._find(info, name)
        if found is None:
            raise UnsupportedQueryError(f"table {info.name!r} has no column {name!r}",
                                        remedy="its columns are: " + ", ".join(info.columns))
        return found

    def info_of(self, col: Col) -> TableInfo:
        return self.tables[col.table]  # type: ignore[index]


def replace_children(expr: Expr, fn: Callable[[Expr], Expr]) -> Expr:
    """Rebuild ``expr`` with ``fn`` applied to each direct child expression."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(expr):  # type: ignore[arg-type]
        v = getattr(expr, f.name)
        if isinstance(v, Expr):
            changes[f.name] = fn(v)
        elif isinstance(v, tuple) and v and any(isinstance(x, Expr | tuple) for x in v):
            changes[f.name] = tuple(
                fn(x) if isinstance(x, Expr)
                else tuple(fn(y) if isinstance(y, Expr) else y for y in x) if isinstance(x, tuple)
                else x for x in v)
    return dataclasses.replace(expr, **changes) if changes else expr  # type: ignore[type-var]


def qualify(expr: Expr, scope: Scope) -> Expr:
    """Resolve every column of ``expr`` in ``scope`` (unqualified or by alias)."""
    if isinstance(expr, Col):
        return scope.resolve(expr.name, expr.table)
    return replace_children(expr, lambda e: qualify(e, scope))


def key_refs(expr: Expr, keys: Sequence[GroupKey], where: str) -> Expr:
    """Replace group-key expressions by :class:`KeyRef`; refuse other row-level reads."""
    for k in keys:
        if expr == k.expr:
            return KeyRef(k.name)
    if isinstance(expr, KeyRef | Lit):
        return expr
    if isinstance(expr, Agg):
        return expr
    if isinstance(expr, Col):
        names = ", ".join(k.name for k in keys) or "none"
        raise UnsupportedQueryError(
            f"{where} reads the column {expr.name!r} row by row (it is neither aggregated nor a "
            f"GROUP BY key; keys: {names})",
            remedy=f"aggregate it (COUNT, SUM({expr.name}), AVG({expr.name}), ...) or add it to "
                   "GROUP BY; a DP query releases only aggregates")
    return replace_children(expr, lambda e: key_refs(e, keys, where))


_AGG_SQL_NAMES = {"count": "count", "count_distinct": "count_distinct", "sum": "sum",
                  "sum_distinct": "sum_distinct",
                  "avg": "avg", "var_samp": "var", "var_pop": "var_pop", "stddev_samp": "stddev",
                  "stddev_pop": "stddev_pop"}


def agg_name(agg: Agg, function: str | None = None) -> str:
    """The default output name of an aggregate: ``count``, ``sum_income``, ``median_age``...

    >>> agg_name(Agg("sum", Col("income", "t")))
    'sum_income'
    >>> agg_name(Agg("count"))
    'count'
    >>> from fractions import Fraction
    >>> agg_name(Agg("quantile", Col("age"), Fraction(1, 2)))
    'median_age'
    """
    if function is None:
        if agg.func == "quantile":
            function = {0: "min", 1: "max"}.get(agg.p, "median" if agg.p == 1 / 2 else "quantile")  # type: ignore[call-overload]
        else:
            function = _AGG_SQL_NAMES.get(agg.func, agg.func)
    if isinstance(agg.arg, Col):
        if isinstance(agg.arg2, Col):
            return f"{function}_{agg.arg.name}_{agg.arg2.name}"
        return f"{function}_{agg.arg.name}"
    return function


def unique_names(names: Iterable[str]) -> list[str]:
    """Make output names unique by suffixing ``_2``, ``_3``... (first one kept as is).

    >>> unique_names(["n", "n", "m"])
    ['n', 'n_2', 'm']
    """
    out: list[str] = []
    seen: set[str] = set()
    for n in names:
        cand, i = n, 2
        while cand in seen:
            cand, i = f"{n}_{i}", i + 1
        seen.add(cand)
        out.append(cand)
    return out
