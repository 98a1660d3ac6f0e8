"""SQL generation: a compiled :class:`~statcurator.query.relational.EnginePlan` as SQL text.

The SQL is written once, in DuckDB's dialect, and transpiled with sqlglot for Spark (with
one rewrite: sums are taken over ``DECIMAL(38, 0)``, because Spark's BIGINT sums overflow
where DuckDB's widen to HUGEINT). The statement has the shape::

    WITH src AS (SELECT keys AS k0.., unit AS __u, quantized inputs AS q0..,
                        non-null flags AS n0.. FROM table [JOIN public ...]
                 WHERE filter AND keys in their public key sets),
         [grp: DENSE_RANK of md5(salt|unit|keys) per unit <= max_groups,]
         [bnd: ROW_NUMBER of md5(salt|unit|keys|q..|n..) per unit <= max_rows]
    SELECT k0.., COUNT(*), SUM(q0), SUM(2*q0 - c), ... FROM bnd GROUP BY k0..

and one more statement per histogram: ``SELECT k0.., bin, COUNT(*) ... GROUP BY k0.., bin``.
Every real value is clamped in double precision and rounded with ``FLOOR(x·2^k + 0.5)``,
exact for the |x·2^k| <= 2^30 the compiler guarantees, so DuckDB, Spark and Python agree.

>>> from statcurator.query.expr import Col, Compare, Lit
>>> expr_sql(Compare(">=", Col("age", "t"), Lit(18)))
'("t"."age" >= 18)'
>>> expr_sql(Lit(0.1))
"CAST('0.1' AS DOUBLE)"
"""

from __future__ import annotations

from typing import Any

from ..query.expr import (
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
    Lit,
    Neg,
    Not,
    Or,
    WidthBucket,
)
from ..query.plan import Filter, Join, Relation, Scan
from ..query.relational import EnginePlan, Quantized
from .base import HASH_SEPARATOR, NULL_TEXT

__all__ = ["expr_sql", "plan_sql", "to_spark", "quote"]


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _double(x: Any) -> str:
    return f"CAST('{float(x)!r}' AS DOUBLE)"


def _number(x: Any) -> str:
    if isinstance(x, bool):
        return "TRUE" if x else "FALSE"
    if isinstance(x, int):
        return str(x)
    return _double(x)


def literal(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return _string(v)
    return _number(v)


def expr_sql(e: Expr) -> str:
    """Render a row-level expression (DuckDB dialect)."""
    if isinstance(e, Col):
        return (f"{quote(e.table)}." if e.table else "") + quote(e.name)
    if isinstance(e, Lit):
        return literal(e.value)
    if isinstance(e, Compare):
        return f"({expr_sql(e.left)} {e.op} {expr_sql(e.right)})"
    if isinstance(e, InList):
        # NULL in the list keeps SQL's meaning (TRUE on a match, else NULL), as in the memory engine
        neg = "NOT " if e.negated else ""
        return f"({expr_sql(e.expr)} {neg}IN ({', '.join(literal(v.value) for v in e.values)}))"
    if isinstance(e, Between):
        neg = "NOT " if e.negated else ""
        return f"({expr_sql(e.expr)} {neg}BETWEEN {expr_sql(e.low)} AND {expr_sql(e.high)})"
    if isinstance(e, And):
        return "(" + " AND ".join(expr_sql(t) for t in e.terms) + ")"
    if isinstance(e, Or):
        return "(" + " OR ".join(expr_sql(t) for t in e.terms) + ")"
    if isinstance(e, Not):
        return f"(NOT {expr_sql(e.expr)})"
    if isinstance(e, IsNull):
        return f"({expr_sql(e.expr)} IS {'NOT ' if e.negated else ''}NULL)"
    if isinstance(e, Case):
        body = " ".join(f"WHEN {expr_sql(c)} THEN {expr_sql(v)}" for c, v in e.whens)
        tail = f" ELSE {expr_sql(e.default)}" if e.default is not None else ""
        return f"(CASE {body}{tail} END)"
    if isinstance(e, Arith):
        right = f"CAST({expr_sql(e.right)} AS DOUBLE)"
        if e.op == "/":  # x / 0 is NULL everywhere: DuckDB gives ±inf, Spark (ANSI) an error
            right = f"NULLIF({right}, CAST('0.0' AS DOUBLE))"
        return f"(CAST({expr_sql(e.left)} AS DOUBLE) {e.op} {right})"
    if isinstance(e, Neg):
        return f"(-CAST({expr_sql(e.expr)} AS DOUBLE))"
    if isinstance(e, Bin):
        x = expr_sql(e.expr)
        labels = e.labels()
        parts = [f"WHEN {x} IS NULL THEN NULL", f"WHEN {x} < {_number(e.edges[0])} THEN NULL"]
        for i in range(1, len(e.edges)):
            op = "<=" if i == len(e.edges) - 1 else "<"
            parts.append(f"WHEN {x} {op} {_number(e.edges[i])} THEN {_string(labels[i - 1])}")
        return "(CASE " + " ".join(parts) + " ELSE NULL END)"
    if isinstance(e, WidthBucket):
        x = expr_sql(e.expr)
        width = float(e.high) - float(e.low)
        body = (f"CAST(FLOOR(((CAST({x} AS DOUBLE) - {_double(e.low)}) * {_double(e.count)}) "
                f"/ {_double(width)}) AS BIGINT) + 1")
        return (f"(CASE WHEN {x} IS NULL THEN NULL WHEN {x} < {_number(e.low)} THEN 0 "
                f"WHEN {x} >= {_number(e.high)} THEN {e.count + 1} "
                f"ELSE LEAST({body}, {e.count}) END)")
    raise TypeError(f"cannot render {e!r} as SQL")  # pragma: no cover


def quantized_sql(q: Quantized) -> str:
    """The per-row grid integer of a quantized input (NULL for NULL and NaN)."""
    x = expr_sql(q.expr)
    if q.integral:
        return (f"(CASE WHEN {x} IS NULL THEN NULL "
                f"ELSE CAST(LEAST(GREATEST({x}, {q.lq}), {q.uq}) AS BIGINT) END)")
    nan = f" OR isnan(CAST({x} AS DOUBLE))" if q.real else ""
    clamped = (f"LEAST(GREATEST(CAST({x} AS DOUBLE), {_double(q.low_double())}), "
               f"{_double(q.high_double())})")
    return (f"(CASE WHEN {x} IS NULL{nan} THEN NULL "
            f"ELSE CAST(FLOOR({clamped} * {_double(q.step_double())} + {_double(0.5)}) AS BIGINT) END)")


def relation_sql(rel: Relation, names: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """``FROM`` text and the WHERE predicates (filters hoisted above the joins).

    ``names`` maps registered table names to the engine's own names (Spark views)."""
    preds: list[str] = []
    names = names or {}

    def walk(r: Relation) -> str:
        if isinstance(r, Scan):
            return f"{quote(names.get(r.table, r.table))} AS {quote(r.alias)}"
        if isinstance(r, Filter):
            inner = walk(r.input)
            preds.append(expr_sql(r.predicate))
            return inner
        if isinstance(r, Join):
            left = walk(r.left)
            on = " AND ".join(f"{expr_sql(a)} = {expr_sql(b)}" for a, b in r.on)
            kw = "LEFT JOIN" if r.kind == "left" else "JOIN"
            right = quote(names.get(r.right.table, r.right.table))
            return f"{left} {kw} {right} AS {quote(r.right.alias)} ON {on}"
        raise TypeError(f"unknown relation {r!r}")  # pragma: no cover

    return walk(rel), preds


def restrict_in_sql(plan: EnginePlan) -> bool:
    """Whether the public key sets filter the rows in SQL, or the aggregated groups after.

    With contribution bounding the rows outside the key sets must go before the bounding
    (they would use up a person's quota). Without it the two are equivalent — a group's
    aggregates read only its own rows — and filtering the few groups afterwards
    (:func:`~statcurator.engines.base.result_from_rows`) spares an IN test on every row.
    """
    return plan.bounding is not None


def _key_filter(expr: str, values: tuple[Any, ...]) -> str:
    vals = [v for v in values if v is not None]
    parts = []
    if vals:
        parts.append(f"{expr} IN ({', '.join(literal(v) for v in vals)})")
    if len(vals) != len(values):
        parts.append(f"{expr} IS NULL")
    return "(" + " OR ".join(parts) + ")" if parts else "FALSE"


def _text(col: str) -> str:
    return f"COALESCE(CAST({col} AS VARCHAR), '{NULL_TEXT}')"


def plan_sql(plan: EnginePlan, salt: str,
             names: dict[str, str] | None = None) -> tuple[str, list[str]]:
    """The main statement and one statement per histogram (DuckDB dialect)."""
    if not salt or not all(c in "0123456789abcdef" for c in salt):
        raise ValueError("the salt must be lowercase hexadecimal")
    frm, preds = relation_sql(plan.relation, names)
    inputs = plan.quantized_inputs()
    qname = {q: f"q{i}" for i, q in enumerate(inputs)}
    nonnull = [t.input for t in plan.terms if t.kind == "nonnull"]
    cols = [f"{expr_sql(k.expr)} AS k{i}" for i, k in enumerate(plan.keys)]
    if plan.bounding is not None:
        cols.append(f"{expr_sql(plan.bounding.unit)} AS __u")
    cols += [f"{quantized_sql(q)} AS {qname[q]}" for q in inputs]
    cols += [f"(CASE WHEN {expr_sql(e)} IS NULL THEN 0 ELSE 1 END) AS n{i}"  # type: ignore[arg-type]
             for i, e in enumerate(nonnull)]
    if not cols:
        cols = ["1 AS __one"]
    if restrict_in_sql(plan):
        for k, vals in zip(plan.keys, plan.key_values, strict=True):
            if vals is not None:
                preds.append(_key_filter(expr_sql(k.expr), vals))
    where = (" WHERE " + " AND ".join(preds)) if preds else ""
    ctes = [f"src AS (SELECT {', '.join(cols)} FROM {frm}{where})"]
    source = "src"
    keys = [f"k{i}" for i in range(len(plan.keys))]
    b = plan.bounding
    if b is not None:
        sep = f"'{HASH_SEPARATOR}'"
        real = plan.real_keys or (False,) * len(keys)
        ktext = [_text(f"CAST({k} AS DOUBLE)" if r else k) for k, r in zip(keys, real, strict=True)]
        head = f"'{salt}' || {sep} || {_text('CAST(__u AS DOUBLE)' if plan.real_unit else '__u')}"
        if b.max_groups is not None and keys:
            gtext = " || ".join([head] + [f"{sep} || {t}" for t in ktext])
            ctes.append(f"grp AS (SELECT *, DENSE_RANK() OVER (PARTITION BY __u ORDER BY "
                        f"md5({gtext})) AS __g FROM src)")
            source = f"(SELECT * FROM grp WHERE __g <= {b.max_groups}) AS kept"
        fields = ktext + [_text(f) for f in [qname[q] for q in inputs]
                          + [f"n{i}" for i in range(len(nonnull))]]
        rtext = " || ".join([head] + [f"{sep} || {f}" for f in fields])
        ctes.append(f"rnk AS (SELECT *, ROW_NUMBER() OVER (PARTITION BY __u ORDER BY "
                    f"md5({rtext})) AS __r FROM {source})")
        ctes.append(f"bnd AS (SELECT * FROM rnk WHERE __r <= {b.max_rows})")
        source = "bnd"
    aggs = []
    nn_index = {id(e): i for i, e in enumerate(nonnull)}
    for i, t in enumerate(plan.terms):
        if t.kind == "rows":
            a = "COUNT(*)"
        elif t.kind == "nonnull":
            a = f"SUM(n{nn_index[id(t.input)]})"
        elif t.kind == "units":
            a = "COUNT(DISTINCT __u)"
        else:
            q = qname[t.input]  # type: ignore[index]
            c = f"CAST({t.input.center} AS DECIMAL(38, 0))"  # type: ignore[union-attr]
            # centred sums from raw moments (exact integer algebra, one pass, no overflow:
            # |q| <= 2^30, so q*q fits in 64 bits and the sums widen to 128)
            a = {"valid": f"COUNT({q})", "sum": f"SUM({q})",
                 "centered": f"(2 * SUM({q}) - {c} * COUNT({q}))",
                 "centered_sq": f"(4 * SUM({q} * {q}) - 4 * {c} * SUM({q}) "
                                f"+ {c} * {c} * COUNT({q}))"}[t.kind]
        aggs.append(f"{a} AS t{i}")
    with_clause = "WITH " + ", ".join(ctes) + " "
    group = (" GROUP BY " + ", ".join(keys)) if keys else ""
    select = ", ".join(keys + aggs) if aggs else ", ".join(keys + ["COUNT(*) AS t_"])
    main = f"{with_clause}SELECT {select} FROM {source}{group}"
    hists = []
    for h in plan.histograms:
        q = qname[h.input]
        if h.per_point:
            bexpr = f"({q} - ({h.input.lq}))"
        else:
            span = h.input.uq - h.input.lq
            bexpr = f"LEAST((({q} - ({h.input.lq})) * {h.bins}) // {span}, {h.bins - 1})"
        sel = ", ".join(keys + [f"{bexpr} AS __bin", "COUNT(*) AS __n"])
        grp = ", ".join(keys + ["__bin"])
        hists.append(f"{with_clause}SELECT {sel} FROM {source} WHERE {q} IS NOT NULL GROUP BY {grp}")
    return main, hists


def to_spark(sql: str) -> str:
    """Transpile DuckDB SQL to Spark SQL with sqlglot; sums go over DECIMAL(38, 0)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="duckdb")

    def widen(node: Any) -> Any:
        if isinstance(node, exp.Sum) and not isinstance(node.this, exp.Cast):
            return exp.Sum(this=exp.Cast(this=node.this.copy(),
                                         to=exp.DataType.build("DECIMAL(38, 0)")))
        return node

    return tree.transform(widen).sql(dialect="spark")
