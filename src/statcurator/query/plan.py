"""The logical plan of a DP query: relations and the aggregate query on top of them.

A :class:`QueryPlan` is what the SQL front end and the builder both produce: a private
:class:`Scan`, optionally joined with public tables (:class:`Join`) and filtered
(:class:`Filter`), then grouped and aggregated. Its outputs may combine aggregates and group
keys with arithmetic; ``HAVING`` and ``ORDER BY`` act on the released values, so they are
post-processing. Everything is frozen, hashable and compared by structure.

>>> from statcurator.query.expr import Agg, Col, Compare, Lit, KeyRef
>>> rel = Filter(Scan("adult", "adult"), Compare(">=", Col("age", "adult"), Lit(18)))
>>> plan = QueryPlan(rel, group_by=(GroupKey("sex", Col("sex", "adult")),),
...                  outputs=(Output("sex", KeyRef("sex")), Output("n", Agg("count"))))
>>> print(plan.sql())
SELECT "sex" AS "sex", COUNT(*) AS "n" FROM "adult" AS "adult" WHERE "adult"."age" >= 18 GROUP BY "adult"."sex"
>>> plan.private_table
'adult'
"""

from __future__ import annotations

from dataclasses import dataclass

from .expr import Agg, Expr

__all__ = ["Relation", "Scan", "Join", "Filter", "GroupKey", "Output", "OrderKey", "QueryPlan"]


class Relation:
    """Base of the relational nodes."""

    __slots__ = ()

    def scans(self) -> tuple[Scan, ...]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Scan(Relation):
    """Read a registered table under an alias."""

    table: str
    alias: str

    def scans(self) -> tuple[Scan, ...]:
        return (self,)

    def sql(self) -> str:
        return f'"{self.table}" AS "{self.alias}"'


@dataclass(frozen=True, slots=True)
class Join(Relation):
    """``left [INNER|LEFT] JOIN right ON`` equalities; ``right`` must be a public table.

    ``on`` pairs a column of ``left`` with a column of ``right``. Each private row meets at
    most as many public rows as the most repeated join key of the public table (its
    stability), a number read from the public table, never from the private one.
    """

    left: Relation
    right: Scan
    on: tuple[tuple[Expr, Expr], ...]
    kind: str = "inner"

    def scans(self) -> tuple[Scan, ...]:
        return self.left.scans() + (self.right,)

    def sql(self) -> str:
        cond = " AND ".join(f"{a.sql()} = {b.sql()}" for a, b in self.on)
        kw = "LEFT JOIN" if self.kind == "left" else "JOIN"
        return f"{_rel_sql(self.left)} {kw} {self.right.sql()} ON {cond}"


@dataclass(frozen=True, slots=True)
class Filter(Relation):
    """Keep the rows where ``predicate`` is TRUE (a row-wise, 1-stable transformation)."""

    input: Relation
    predicate: Expr

    def scans(self) -> tuple[Scan, ...]:
        return self.input.scans()


@dataclass(frozen=True, slots=True)
class GroupKey:
    """A GROUP BY key: an output name and a row-level expression."""

    name: str
    expr: Expr


@dataclass(frozen=True, slots=True)
class Output:
    """One output column: a name and an expression over group keys and aggregates."""

    name: str
    expr: Expr


@dataclass(frozen=True, slots=True)
class OrderKey:
    """An ORDER BY key over the released table (post-processing)."""

    expr: Expr
    descending: bool = False


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """An aggregate query: the plan both front ends produce and the compiler consumes."""

    relation: Relation
    group_by: tuple[GroupKey, ...] = ()
    outputs: tuple[Output, ...] = ()
    having: Expr | None = None
    order_by: tuple[OrderKey, ...] = ()
    #: ``LIMIT``/``TOP``/``FETCH`` and ``OFFSET``: rows of the released table kept after
    #: HAVING and ORDER BY (post-processing; every group is still measured and charged)
    limit: int | None = None
    offset: int = 0
    #: what the front end did that the analyst should know (e.g. a literal's type coerced)
    notes: tuple[str, ...] = ()

    @property
    def private_table(self) -> str:
        """The registered name of the private table (the first scan)."""
        return self.relation.scans()[0].table

    def aggregates(self) -> tuple[Agg, ...]:
        """Every distinct aggregate the outputs and HAVING/ORDER BY need, in order."""
        seen: dict[Agg, None] = {}
        exprs = [o.expr for o in self.outputs]
        if self.having is not None:
            exprs.append(self.having)
        exprs.extend(k.expr for k in self.order_by)
        for e in exprs:
            for a in e.aggregates():
                seen.setdefault(a, None)
        return tuple(seen)

    def sql(self) -> str:
        """A readable SQL rendering (for explanations and provenance, not for engines)."""
        rel, where = _split_filter(self.relation)
        parts = ["SELECT " + ", ".join(f'{o.expr.sql()} AS "{o.name}"' for o in self.outputs),
                 "FROM " + _rel_sql(rel)]
        if where:
            parts.append("WHERE " + " AND ".join(w.sql() for w in where))
        if self.group_by:
            parts.append("GROUP BY " + ", ".join(k.expr.sql() for k in self.group_by))
        if self.having is not None:
            parts.append("HAVING " + self.having.sql())
        if self.order_by:
            parts.append("ORDER BY " + ", ".join(
                k.expr.sql() + (" DESC" if k.descending else "") for k in self.order_by))
        if self.limit is not None:
            parts.append(f"LIMIT {self.limit}")
        if self.offset:
            parts.append(f"OFFSET {self.offset}")
        return " ".join(parts)


def _split_filter(rel: Relation) -> tuple[Relation, list[Expr]]:
    preds: list[Expr] = []
    while isinstance(rel, Filter):
        preds.insert(0, rel.predicate)
        rel = rel.input
    return rel, preds


def _rel_sql(rel: Relation) -> str:
    if isinstance(rel, Scan):
        return rel.sql()
    if isinstance(rel, Join):
        return rel.sql()
    inner, preds = _split_filter(rel)
    cond = " AND ".join(p.sql() for p in preds)
    return f"(SELECT * FROM {_rel_sql(inner)} WHERE {cond})"
