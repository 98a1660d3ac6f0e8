"""SQL generation: a compiled :class:`~statcurator.query.relational.EnginePlan` as sqlglot
expression trees, rendered in each engine's dialect.

Statements are built as sqlglot trees, never as strings that are parsed again, so that
quoting, escaping and the dialect (DuckDB, Spark) are the library's job. Spark gets one
rewrite: sums are taken over ``DECIMAL(38, 0)``, because Spark's BIGINT sums overflow where
DuckDB's widen to HUGEINT. The statement has the shape::

    WITH __sc_src AS (SELECT keys AS k0.., unit AS __u, quantized inputs AS q0..,
                             non-null flags AS n0.. FROM table [JOIN public ...]
                      WHERE filter AND keys in their public key sets
                            AND the unit is not NULL (nor NaN)),
         [__sc_grp: DENSE_RANK() OVER (PARTITION BY __u ORDER BY md5(salt, unit, keys),
                                       k0, k1, ...) per unit <= max_groups,]
         [__sc_rnk: ROW_NUMBER() OVER (PARTITION BY __u ORDER BY md5(salt, unit, keys, q..,
                                       n..)) per unit <= max_rows]
    SELECT k0.., COUNT(*), SUM(q0), COUNT(q1), SUM(q1), ... FROM __sc_bnd GROUP BY k0..

Without contribution bounding there is nothing to rank, and the main statement reads the
table itself (``SELECT key AS k0.., COUNT(*), SUM(quantized input), ... FROM table WHERE ...
GROUP BY key..``), which DuckDB plans 0.02–0.04 ms faster than the same through a subquery;
when an input is read by more than one aggregate (a mean's count and sum), ``__sc_src`` is
a subquery in ``FROM`` instead (``SELECT k0.., COUNT(q0), SUM(q0) FROM (SELECT ...) AS
__sc_src GROUP BY k0..``), so that the input is computed once per row, and a subquery is
planned faster than a CTE. There is one more statement per histogram: ``SELECT k0.., bin,
COUNT(*) ... GROUP BY k0.., bin``.
A centred term (``SUM(2q - c)``, and its squares) is returned as its raw moments
``COUNT(q)``, ``SUM(q)`` (and ``SUM(q*q)``), columns ``t<i>_0, t<i>_1, ..``, which
:func:`~statcurator.engines.base.result_from_rows` combines with exact integer algebra:
DuckDB aggregates raw moments about 10% faster than it computes the centred sum itself.
Every real value is clamped in double precision and rounded with ``FLOOR(x·2^k + 0.5)``,
exact for the |x·2^k| <= 2^30 the compiler guarantees, so DuckDB, Spark and Python agree.

**Rows without a unit id.** With contribution bounding, a row whose unit id is NULL (or
NaN) is read by nothing: it belongs to no known unit. Bounded together as one unit, such rows
would let one person added without an id change which rows of the others are kept (an L1
change of 2 against a declared 1). The memory engine skips them too.

**Group identity in contribution bounding.** A person may keep at most ``max_groups``
groups. The groups are ranked by a salted hash (a fresh random order per release), and the
hash is computed over an *unambiguous* encoding of the key values (:func:`encoded`): each
field is ``N`` for NULL or ``V<length>:<text>`` otherwise, so no choice of key expressions
can make two different key tuples render alike (``'~'`` is not NULL, ``('x|y', 'z')`` is
not ``('x', 'y|z')``). That makes the ranking identical on every engine. It is not what
makes the bound hold, though: ``DENSE_RANK`` orders by the hash *and then by the key values
themselves*, so rows of two different groups are never peers and never share a rank, even
if their hashes collided. Peers under ``ORDER BY`` equality are equal under ``GROUP BY``
equality (both treat NULLs as equal, NaN as equal to NaN and -0.0 as 0.0), so the rows of
ranks ``1..max_groups`` fall in at most ``max_groups`` groups — whatever the keys are.

>>> from statcurator.query.expr import Col, Compare, Lit
>>> expr_sql(Compare(">=", Col("age", "t"), Lit(18)))
'("t"."age" >= 18)'
>>> expr_sql(Lit(0.1))
"CAST('0.1' AS DOUBLE)"
>>> expr_sql(Lit("it's"), dialect="spark")
"'it\\\\'s'"
"""

from __future__ import annotations

import dataclasses
import functools
import re
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from sqlglot import exp

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
from ..query.shapes import put_all, same_but, value_at
from .base import term_columns

__all__ = ["expr_sql", "plan_sql", "plan_template", "plan_statements", "render", "to_spark",
           "quote", "encoded", "quantized_sql", "clear_cache", "NULL_CODE"]

#: The encoding of a NULL field in hashed text: no encoded value equals it, because every
#: non-NULL field starts with ``V``.
NULL_CODE = "N"

_SRC, _GRP, _RNK, _BND, _KEPT = "__sc_src", "__sc_grp", "__sc_rnk", "__sc_bnd", "__sc_kept"


# -- small tree builders -------------------------------------------------------------------

def quote(name: str) -> str:
    """A double-quoted SQL identifier (DuckDB dialect), for the few statements engines
    write by hand (views over registered files).

    >>> quote('we"ird')
    '"we""ird"'
    """
    return '"' + name.replace('"', '""') + '"'


def _ident(name: str) -> exp.Identifier:
    return exp.Identifier(this=name, quoted=True)


def _col(name: str, table: str | None = None) -> exp.Column:
    return exp.Column(this=_ident(name), table=_ident(table) if table else None)


def _ref(name: str) -> exp.Column:
    """An unquoted reference to a generated column (k0, q1, __u, ...)."""
    return exp.Column(this=exp.Identifier(this=name, quoted=False))


def _paren(e: exp.Expression) -> exp.Paren:
    return exp.Paren(this=e)


def _cast(e: exp.Expression, to: str) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType.build(to))


def _double(x: Any) -> exp.Cast:
    return _cast(exp.Literal.string(repr(float(x))), "DOUBLE")


def _int(x: int) -> exp.Expression:
    lit = exp.Literal.number(abs(int(x)))
    return exp.Neg(this=lit) if x < 0 else lit


def _number(x: Any) -> exp.Expression:
    if isinstance(x, bool):
        return exp.Boolean(this=x)
    if isinstance(x, int):
        return _int(x)
    return _double(x)


def literal(v: Any) -> exp.Expression:
    """A typed SQL literal: NULL, string, boolean, integer or DOUBLE."""
    if v is None:
        return exp.Null()
    if isinstance(v, str):
        return exp.Literal.string(v)
    return _number(v)


def _and(terms: Sequence[exp.Expression]) -> exp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = exp.And(this=out, expression=t)
    return _paren(out)


def _or(terms: Sequence[exp.Expression]) -> exp.Expression:
    out = terms[0]
    for t in terms[1:]:
        out = exp.Or(this=out, expression=t)
    return _paren(out)


# LEAST/GREATEST skip NULLs in DuckDB and Spark alike (our arguments are never NULL there)
def _least(a: exp.Expression, b: exp.Expression) -> exp.Least:
    return exp.Least(this=a, expressions=[b], ignore_nulls=True)


def _greatest(a: exp.Expression, b: exp.Expression) -> exp.Greatest:
    return exp.Greatest(this=a, expressions=[b], ignore_nulls=True)


def _case(whens: Sequence[tuple[exp.Expression, exp.Expression]],
          default: exp.Expression | None = None) -> exp.Paren:
    return _paren(exp.Case(ifs=[exp.If(this=c, true=v) for c, v in whens], default=default))


def _clamps(x: exp.Expression, low: exp.Expression,
            high: exp.Expression) -> list[tuple[exp.Expression, exp.Expression]]:
    """The CASE branches that clamp a non-NULL ``x`` into [low, high]: a comparison per end
    (DuckDB evaluates them about twice as fast as LEAST(GREATEST(...)) on a column)."""
    return [(exp.LT(this=x.copy(), expression=low), low.copy()),
            (exp.GT(this=x.copy(), expression=high), high.copy())]


def _is_null(e: exp.Expression) -> exp.Is:
    return exp.Is(this=e, expression=exp.Null())


_COMPARE: dict[str, type[exp.Expression]] = {
    "=": exp.EQ, "<>": exp.NEQ, "<": exp.LT, "<=": exp.LTE, ">": exp.GT, ">=": exp.GTE}
_ARITH: dict[str, type[exp.Expression]] = {
    "+": exp.Add, "-": exp.Sub, "*": exp.Mul, "/": exp.Div}


# -- row-level expressions -----------------------------------------------------------------

def expr_tree(e: Expr) -> exp.Expression:
    """A row-level expression of the plan IR as a sqlglot tree (SQL semantics)."""
    if isinstance(e, Col):
        return _col(e.name, e.table)
    if isinstance(e, Lit):
        return literal(e.value)
    if isinstance(e, Compare):
        return _paren(_COMPARE[e.op](this=expr_tree(e.left), expression=expr_tree(e.right)))
    if isinstance(e, InList):
        # NULL in the list keeps SQL's meaning (TRUE on a match, else NULL), as in the memory engine
        test = exp.In(this=expr_tree(e.expr), expressions=[literal(v.value) for v in e.values])
        return _paren(exp.Not(this=test) if e.negated else test)
    if isinstance(e, Between):
        test = exp.Between(this=expr_tree(e.expr), low=expr_tree(e.low), high=expr_tree(e.high))
        return _paren(exp.Not(this=test) if e.negated else test)
    if isinstance(e, And):
        return _and([expr_tree(t) for t in e.terms])
    if isinstance(e, Or):
        return _or([expr_tree(t) for t in e.terms])
    if isinstance(e, Not):
        return _paren(exp.Not(this=expr_tree(e.expr)))
    if isinstance(e, IsNull):
        test = _is_null(expr_tree(e.expr))
        return _paren(exp.Not(this=test) if e.negated else test)
    if isinstance(e, Case):
        return _case([(expr_tree(c), expr_tree(v)) for c, v in e.whens],
                     expr_tree(e.default) if e.default is not None else None)
    if isinstance(e, Arith):
        right: exp.Expression = _cast(expr_tree(e.right), "DOUBLE")
        if e.op == "/":  # x / 0 is NULL everywhere: DuckDB gives ±inf, Spark (ANSI) an error
            right = exp.Nullif(this=right, expression=_double(0.0))
        return _paren(_ARITH[e.op](this=_cast(expr_tree(e.left), "DOUBLE"), expression=right))
    if isinstance(e, Neg):
        return _paren(exp.Neg(this=_cast(expr_tree(e.expr), "DOUBLE")))
    if isinstance(e, Bin):
        x = expr_tree(e.expr)
        labels = e.labels()
        whens: list[tuple[exp.Expression, exp.Expression]] = [
            (_is_null(x.copy()), exp.Null()),
            (exp.LT(this=x.copy(), expression=_number(e.edges[0])), exp.Null())]
        for i in range(1, len(e.edges)):
            op = exp.LTE if i == len(e.edges) - 1 else exp.LT
            whens.append((op(this=x.copy(), expression=_number(e.edges[i])),
                          exp.Literal.string(labels[i - 1])))
        return _case(whens, exp.Null())
    if isinstance(e, WidthBucket):
        x = expr_tree(e.expr)
        width = float(e.high) - float(e.low)
        scaled = exp.Div(this=_paren(exp.Mul(
            this=_paren(exp.Sub(this=_cast(x.copy(), "DOUBLE"), expression=_double(e.low))),
            expression=_double(e.count))), expression=_double(width))
        body = exp.Add(this=_cast(exp.Floor(this=scaled), "BIGINT"), expression=_int(1))
        return _case([(_is_null(x.copy()), exp.Null()),
                      (exp.LT(this=x.copy(), expression=_number(e.low)), _int(0)),
                      (exp.GTE(this=x.copy(), expression=_number(e.high)), _int(e.count + 1))],
                     _least(body, _int(e.count)))
    raise TypeError(f"cannot render {e!r} as SQL")  # pragma: no cover


def expr_sql(e: Expr, dialect: str = "duckdb") -> str:
    """Render a row-level expression in ``dialect`` (for explanations and tests)."""
    return expr_tree(e).sql(dialect=dialect)


def quantized_sql(q: Quantized) -> exp.Expression:
    """The per-row grid integer of a quantized input (NULL for NULL and NaN)."""
    x = expr_tree(q.expr)
    if q.integral:  # a NULL x fails both comparisons and falls through to CAST(NULL): NULL
        return _case(_clamps(x, _int(q.lq), _int(q.uq)), _cast(x.copy(), "BIGINT"))
    missing: exp.Expression = _is_null(x.copy())
    if q.real:
        missing = exp.Or(this=missing, expression=exp.IsNan(this=_cast(x.copy(), "DOUBLE")))
    xd = _cast(x.copy(), "DOUBLE")
    clamped = _case(_clamps(xd, _double(q.low_double()), _double(q.high_double())), xd.copy())
    rounded = exp.Floor(this=exp.Add(this=exp.Mul(this=clamped, expression=_double(q.step_double())),
                                     expression=_double(0.5)))
    return _case([(missing, exp.Null())], _cast(rounded, "BIGINT"))


# -- the relation --------------------------------------------------------------------------

def _select(expressions: Sequence[exp.Expression], source: exp.Expression, *,
            where: exp.Expression | None = None, group: Sequence[exp.Expression] = (),
            joins: Sequence[exp.Expression] = ()) -> exp.Select:
    """A SELECT built directly from its parts (sqlglot's builder methods copy the tree at
    every call and parse strings; a plan's statements are built once, without either)."""
    s = exp.Select(expressions=list(expressions), from_=exp.From(this=source))
    if joins:
        s.set("joins", list(joins))
    if where is not None:
        s.set("where", exp.Where(this=where))
    if group:
        s.set("group", exp.Group(expressions=list(group)))
    return s


def _named(name: str) -> exp.Table:
    return exp.Table(this=exp.Identifier(this=name))


def relation_tree(rel: Relation, names: dict[str, str] | None = None
                  ) -> tuple[exp.Table, list[exp.Join], list[exp.Expression]]:
    """The ``FROM`` table, the ``JOIN`` s and the WHERE predicates of the relation (filters
    hoisted above the joins). ``names`` maps registered table names to the engine's own
    names (Spark views)."""
    preds: list[exp.Expression] = []
    joins: list[exp.Join] = []
    names = names or {}
    first: list[exp.Table] = []

    def table(scan: Scan) -> exp.Table:
        return exp.Table(this=_ident(names.get(scan.table, scan.table)),
                         alias=exp.TableAlias(this=_ident(scan.alias)))

    def walk(r: Relation) -> None:
        if isinstance(r, Scan):
            first.append(table(r))
        elif isinstance(r, Filter):
            walk(r.input)
            preds.append(expr_tree(r.predicate))
        elif isinstance(r, Join):
            walk(r.left)
            on = [exp.EQ(this=expr_tree(a), expression=expr_tree(b)) for a, b in r.on]
            cond = on[0]
            for c in on[1:]:
                cond = exp.And(this=cond, expression=c)
            join = exp.Join(this=table(r.right), on=cond)
            if r.kind == "left":
                join.set("side", "LEFT")
            joins.append(join)
        else:  # pragma: no cover
            raise TypeError(f"unknown relation {r!r}")

    walk(rel)
    return first[0], joins, preds


def restrict_in_sql(plan: EnginePlan) -> bool:
    """Whether the public key sets filter the rows in SQL, or the aggregated groups after.

    With contribution bounding the rows outside the key sets must go before the bounding
    (they would use up a person's quota). Without it the two are equivalent — a group's
    aggregates read only its own rows — and filtering the few groups afterwards
    (:func:`~statcurator.engines.base.result_from_rows`) spares an IN test on every row.
    """
    return plan.bounding is not None


def _key_filter(key: exp.Expression, values: tuple[Any, ...]) -> exp.Expression:
    vals = [v for v in values if v is not None]
    parts: list[exp.Expression] = []
    if vals:
        parts.append(exp.In(this=key.copy(), expressions=[literal(v) for v in vals]))
    if len(vals) != len(values):
        parts.append(_is_null(key.copy()))
    return _or(parts) if parts else exp.false()


def encoded(text: exp.Expression) -> exp.Expression:
    """The unambiguous encoding of one hashed field: ``N`` for NULL, else
    ``V<number of characters>:<text>`` (see the module docs). A concatenation of encoded
    fields decodes in one way only, so distinct key tuples never hash alike.

    >>> encoded(exp.column("x")).sql()
    "CASE WHEN x IS NULL THEN 'N' ELSE 'V' || CAST(LENGTH(x) AS VARCHAR) || ':' || x END"
    """
    body = exp.DPipe(this=exp.DPipe(this=exp.DPipe(
        this=exp.Literal.string("V"), expression=_cast(exp.Length(this=text.copy()), "VARCHAR")),
        expression=exp.Literal.string(":")), expression=text.copy())
    return exp.Case(ifs=[exp.If(this=_is_null(text.copy()), true=exp.Literal.string(NULL_CODE))],
                    default=body)


def _field_text(e: exp.Expression, real: bool) -> exp.Expression:
    """The text of a hashed field; real values as the text of a DOUBLE with -0.0 made 0.0
    (``x + 0.0``) and every NaN ``nan`` (DuckDB prints a NaN whose sign bit is set, such as
    ``-inf * 0``, as ``-nan``), so one group hashes alike however its key was computed."""
    if not real:
        return _cast(e, "VARCHAR")
    x = exp.Add(this=_cast(e, "DOUBLE"), expression=_double(0.0))
    return exp.Case(ifs=[exp.If(this=exp.IsNan(this=x.copy()), true=exp.Literal.string("nan"))],
                    default=_cast(x, "VARCHAR"))


def _hash(salt: str, fields: Sequence[exp.Expression]) -> exp.Expression:
    out: exp.Expression = exp.Literal.string(salt)
    for f in fields:
        out = exp.DPipe(this=out, expression=encoded(f))
    return exp.MD5(this=out)


def _window(func: exp.Expression, order: Sequence[exp.Expression]) -> exp.Window:
    return exp.Window(this=func, partition_by=[_ref("__u")], order=exp.Order(
        expressions=[exp.Ordered(this=o, nulls_first=False) for o in order]))


def plan_statements(plan: EnginePlan, salt: str, names: dict[str, str] | None = None
                    ) -> tuple[exp.Select, list[exp.Select]]:
    """The main statement and one statement per histogram, as sqlglot trees."""
    _check_salt(salt)
    frm, joins, preds = relation_tree(plan.relation, names)
    inputs = plan.quantized_inputs()
    qname = {q: f"q{i}" for i, q in enumerate(inputs)}
    nonnull = [t.input for t in plan.terms if t.kind == "nonnull"]
    distinct = [t.input for t in plan.terms if t.kind == "distinct"]
    cols: list[exp.Expression] = [exp.alias_(expr_tree(k.expr), f"k{i}")
                                  for i, k in enumerate(plan.keys)]
    if plan.bounding is not None:
        unit_expr = expr_tree(plan.bounding.unit)
        cols.append(exp.alias_(unit_expr, "__u"))
        # A row without a unit id (NULL, or NaN for a real id) belongs to no known unit:
        # bounded together, one person added with no id would change the rows another kept
        preds.append(exp.Not(this=_is_null(unit_expr.copy())))
        if plan.real_unit:
            preds.append(exp.Not(this=exp.IsNan(this=unit_expr.copy())))
    cols += [exp.alias_(quantized_sql(q), qname[q]) for q in inputs]
    cols += [exp.alias_(_case([(_is_null(expr_tree(e)), _int(0))], _int(1)), f"n{i}")  # type: ignore[arg-type]
             for i, e in enumerate(nonnull)]
    cols += [exp.alias_(expr_tree(e), f"x{i}") for i, e in enumerate(distinct)]  # type: ignore[arg-type]
    if not cols:
        cols = [exp.alias_(_int(1), "__one")]
    if restrict_in_sql(plan):
        for k, vals in zip(plan.keys, plan.key_values, strict=True):
            if vals is not None:
                preds.append(_key_filter(expr_tree(k.expr), vals))
    src = _select(cols, frm, joins=joins,
                  where=(_and(preds) if len(preds) > 1 else preds[0]) if preds else None)
    # Without contribution bounding the source is read once: a subquery in FROM, which
    # DuckDB plans faster than the same SELECT as a CTE (0.03 ms of a small query's 0.7)
    ctes: list[tuple[str, exp.Expression]] = []
    source: exp.Expression = exp.Subquery(this=src, alias=exp.TableAlias(
        this=exp.Identifier(this=_SRC)))
    keys = [f"k{i}" for i in range(len(plan.keys))]
    b = plan.bounding
    if b is not None:
        ctes.append((_SRC, src))
        source = _named(_SRC)
        real = plan.real_keys or (False,) * len(keys)
        ktext = [_field_text(_ref(k), r) for k, r in zip(keys, real, strict=True)]
        unit = _field_text(_ref("__u"), plan.real_unit)
        if b.max_groups is not None and keys:
            # ranked by the salted hash, ties broken on the keys themselves (module docs)
            order = [_hash(salt, [unit, *ktext]), *(_ref(k) for k in keys)]
            ctes.append((_GRP, _select([exp.Star(), exp.alias_(
                _window(exp.DenseRank(), order), "__g")], _named(_SRC))))
            source = exp.Subquery(
                this=_select([exp.Star()], _named(_GRP), where=exp.LTE(
                    this=_ref("__g"), expression=_int(b.max_groups))),
                alias=exp.TableAlias(this=exp.Identifier(this=_KEPT)))
        fields = [unit, *ktext, *(_cast(_ref(qname[q]), "VARCHAR") for q in inputs),
                  *(_cast(_ref(f"n{i}"), "VARCHAR") for i in range(len(nonnull))),
                  *(_field_text(_ref(f"x{i}"), r)
                    for i, r in enumerate(plan.real_distinct or (False,) * len(distinct)))]
        ctes.append((_RNK, _select([exp.Star(), exp.alias_(
            _window(exp.RowNumber(), [_hash(salt, fields)]), "__r")], source)))
        ctes.append((_BND, _select([exp.Star()], _named(_RNK), where=exp.LTE(
            this=_ref("__r"), expression=_int(b.max_rows)))))
        source = _named(_BND)
    aggs: list[exp.Expression] = []
    index = {id(e): i for i, e in enumerate(nonnull)}
    index.update({id(e): i for i, e in enumerate(distinct)})
    # each aggregate once, in the order of term_columns (result_from_rows reads them there)
    for i, (t, at) in enumerate(zip(plan.terms, term_columns(plan.terms)[1], strict=True)):
        cols_t = _term(t, qname, index)
        for j, (c, p) in enumerate(zip(cols_t, at, strict=True)):
            if p == len(aggs):  # first asked for here (else an earlier term's column)
                # raw moments t<i>_<j>, combined by result_from_rows
                aggs.append(exp.alias_(c, f"t{i}" if len(cols_t) == 1 else f"t{i}_{j}"))
    key_refs = [_ref(k) for k in keys]
    if not aggs:
        aggs = [exp.alias_(exp.Count(this=exp.Star()), "t_")]

    def with_ctes(stmt: exp.Select, share: bool) -> exp.Select:
        if not ctes:
            return stmt
        stmt.set("with_", exp.With(expressions=[
            exp.CTE(this=body if share else body.copy(),
                    alias=exp.TableAlias(this=exp.Identifier(this=name)))
            for name, body in ctes]))
        return stmt

    main = (_flat(src, cols, len(keys), aggs) if b is None else None) or _select(
        [*key_refs, *aggs], source.copy(), group=[k.copy() for k in key_refs])
    hists = []
    for h in plan.histograms:
        q = _ref(qname[h.input])
        off = _paren(exp.Sub(this=q.copy(), expression=_paren(_int(h.input.lq))))
        if h.per_point:
            bexpr: exp.Expression = off
        else:
            span = h.input.uq - h.input.lq
            bexpr = _least(exp.IntDiv(this=_paren(exp.Mul(this=off, expression=_int(h.bins))),
                                      expression=_int(span)), _int(h.bins - 1))
        stmt = _select([*(k.copy() for k in key_refs), exp.alias_(bexpr, "__bin"),
                        exp.alias_(exp.Count(this=exp.Star()), "__n")], source.copy(),
                       where=exp.Not(this=_is_null(q.copy())),
                       group=[*(k.copy() for k in key_refs), _ref("__bin")])
        hists.append(with_ctes(stmt, share=False))
    return with_ctes(main, share=True), hists


def _flat(src: exp.Select, cols: list[exp.Expression], nkeys: int,
          aggs: list[exp.Expression]) -> exp.Select | None:
    """The main statement without its subquery: ``src`` with the aggregates over its own
    columns' expressions, grouped by the key expressions (``SELECT key AS k0, COUNT(*) AS
    t0 FROM t WHERE ... GROUP BY key``), which DuckDB plans faster. None when an inner
    column is read by more than one aggregate (inlined, it would be computed once per
    aggregate: slower), or a key holds no column (``GROUP BY 1`` names a position)."""
    inner = {str(c.alias): c.this for c in cols}  # k0.., q0.., n0.., x0.. (no __u here)
    keys = [f"k{i}" for i in range(nkeys)]
    if any(inner[k].find(exp.Column) is None for k in keys):
        return None

    def generated(node: exp.Expression) -> bool:  # _ref(): unquoted, unqualified
        return (isinstance(node, exp.Column) and not node.table and not node.this.quoted
                and node.name in inner)

    reads = [c.name for a in aggs for c in a.find_all(exp.Column) if generated(c)]
    if len(reads) != len(set(reads)):
        return None
    flat = src.copy()  # its FROM, JOINs and WHERE
    flat.set("expressions", [
        *(exp.alias_(inner[k].copy(), k) for k in keys),
        *(a.transform(lambda n: inner[n.name].copy() if generated(n) else n) for a in aggs)])
    if keys:
        flat.set("group", exp.Group(expressions=[inner[k].copy() for k in keys]))
    return flat


def _term(t: Any, qname: dict[Quantized, str], nn_index: dict[int, int]
          ) -> list[exp.Expression]:
    """The aggregate columns of one term: one, or for the centred terms their raw moments
    (:data:`~statcurator.engines.base.RAW_MOMENTS`, combined exactly in Python)."""
    if t.kind == "rows":
        return [exp.Count(this=exp.Star())]
    if t.kind == "nonnull":
        return [exp.Sum(this=_ref(f"n{nn_index[id(t.input)]}"))]
    if t.kind == "units":
        return [exp.Count(this=exp.Distinct(expressions=[_ref("__u")]))]
    if t.kind == "distinct":
        return [exp.Count(this=exp.Distinct(expressions=[_ref(f"x{nn_index[id(t.input)]}")]))]
    q = _ref(qname[t.input])
    count = exp.Count(this=q.copy())
    total = exp.Sum(this=q.copy())
    # |q| <= 2^30, so q*q fits in 64 bits and the sums widen to 128: the moments are exact
    if t.kind == "valid":
        return [count]
    if t.kind == "sum":
        return [total]
    if t.kind == "distinct_sum":
        return [exp.Sum(this=exp.Distinct(expressions=[q.copy()]))]
    if t.kind == "centered":
        return [count, total]
    if t.kind == "centered_sq":
        return [count, total, exp.Sum(this=exp.Mul(this=q.copy(), expression=q.copy()))]
    if t.kind == "cross":
        q2 = _ref(qname[t.input2])
        c2 = _int(t.input2.center)
        a = _paren(exp.Sub(this=exp.Mul(this=_int(2), expression=q.copy()),
                           expression=_int(t.input.center)))
        b = _paren(exp.Sub(this=exp.Mul(this=_int(2), expression=q2), expression=c2))
        # |2q - c| <= 2^30 on both sides: the product fits in 62 bits; SUM skips NULL pairs
        return [exp.Sum(this=exp.Mul(this=_cast(a, "BIGINT"), expression=b))]
    raise TypeError(f"unknown term kind {t.kind!r}")  # pragma: no cover


def _widen_sums(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Sum) and isinstance(node.this, exp.Distinct):
        # SUM(DISTINCT q) → SUM(DISTINCT CAST(q AS DECIMAL)): the cast inside the DISTINCT
        (inner,) = node.this.expressions
        if not isinstance(inner, exp.Cast):
            return exp.Sum(this=exp.Distinct(expressions=[_cast(inner.copy(),
                                                                "DECIMAL(38, 0)")]))
        return node
    if isinstance(node, exp.Sum) and not isinstance(node.this, exp.Cast):
        return exp.Sum(this=_cast(node.this.copy(), "DECIMAL(38, 0)"))
    return node


_DIALECT_REWRITES: dict[str, Callable[[exp.Expression], exp.Expression]] = {
    "spark": _widen_sums}


def render(tree: exp.Expression, dialect: str = "duckdb") -> str:
    """A statement tree as SQL text in ``dialect`` (Spark: sums over DECIMAL(38, 0))."""
    rewrite = _DIALECT_REWRITES.get(dialect)
    if rewrite is not None:
        tree = tree.transform(rewrite)
    return tree.sql(dialect=dialect)


#: The salt is the only part of a plan's SQL that changes from one release to the next, so
#: the text is generated once per plan with this random token in the salt's place and the
#: token is replaced (a 128-bit random hex string: no user literal contains it by chance).
_SALT_TOKEN = secrets.token_hex(16)
_QUOTED_SALT = f"'{_SALT_TOKEN}'"  # the token as the string literal the salt is


@functools.lru_cache(maxsize=1024)
def _templates(plan: EnginePlan, names: tuple[tuple[str, str], ...],
               dialect: str) -> tuple[str, tuple[str, ...]]:
    main, hists = plan_statements(plan, _SALT_TOKEN, dict(names))
    return render(main, dialect), tuple(render(h, dialect) for h in hists)


def _texts(plan: EnginePlan, names: tuple[tuple[str, str], ...],
           dialect: str) -> tuple[str, tuple[str, ...]]:
    """The plan's statements with the salt token: from its base's (:func:`link`), else
    generated (and cached)."""
    if _LINKS:
        linked = _linked(plan, names, dialect)
        if linked is not None:
            return linked
    return _templates(plan, names, dialect)


def clear_cache() -> None:
    """Forget the generated SQL (tests that patch the generator call it)."""
    _templates.cache_clear()
    _LINKS.clear()
    _FRAGMENTS.clear()


# -- plans of a known shape: the SQL of another plan with other constants -------------------

#: id(plan) -> (plan, base, paths): ``plan`` is ``base`` with other values in the literals at
#: ``paths`` of its relation (a query of a known shape, see statcurator.query.shapes)
_LINKS: dict[int, tuple[EnginePlan, EnginePlan, tuple[tuple[Any, ...], ...]]] = {}
#: (id(base), paths, names, dialect) -> (base, the statements cut at those literals, or None)
_FRAGMENTS: dict[tuple[Any, ...], tuple[EnginePlan, Any]] = {}
_LITERALS: dict[tuple[type, Any, str], str] = {}


def link(plan: EnginePlan, base: EnginePlan, paths: tuple[tuple[Any, ...], ...]) -> None:
    """Generate ``plan``'s SQL from ``base``'s, with other constants: ``plan`` is ``base``
    with other values (of the same types) in the literals at ``paths`` of its relation.

    The base's statements are generated once with a random token in each of those
    literals and cut there; ``plan``'s are the pieces joined with its own constants. The cut
    is used only if joining the base's own constants gives back the base's SQL exactly, and
    ``plan`` must equal the base with its constants put in place (else ValueError).
    """
    if not same_but(base, plan, paths, within="relation"):
        raise ValueError("link(): the plan is not its base with other constants")
    if len(_LINKS) >= 1024:
        _LINKS.clear()
    _LINKS[id(plan)] = (plan, base, paths)


def _linked(plan: EnginePlan, names: tuple[tuple[str, str], ...],
            dialect: str) -> tuple[str, tuple[str, ...]] | None:
    hit = _LINKS.get(id(plan))
    if hit is None or hit[0] is not plan:
        return None
    _, base, paths = hit
    cut = _fragments(base, paths, names, dialect)
    if cut is None:
        return None
    values = [_literal_text(value_at(plan.relation, p), dialect) for p in paths]
    main, hists = cut
    return _join(main, values), tuple(_join(h, values) for h in hists)


def _fragments(base: EnginePlan, paths: tuple[tuple[Any, ...], ...],
               names: tuple[tuple[str, str], ...], dialect: str) -> Any:
    key = (id(base), paths, names, dialect)
    hit = _FRAGMENTS.get(key)
    if hit is not None and hit[0] is base:
        return hit[1]
    if len(_FRAGMENTS) >= 256:
        _FRAGMENTS.clear()
    cut = _cut(base, paths, names, dialect)
    _FRAGMENTS[key] = (base, cut)
    return cut


def _cut(base: EnginePlan, paths: tuple[tuple[Any, ...], ...],
         names: tuple[tuple[str, str], ...], dialect: str) -> Any:
    """The base's statements generated with a random token in each literal at ``paths``,
    cut into (text, slot, text, slot, ..., text); None if the cut does not give the base's
    own SQL back (a literal rendered other than alone, say)."""
    tokens = [_token(value_at(base.relation, p)) for p in paths]
    rel = put_all(base.relation, paths, tokens)
    main, hists = _templates(dataclasses.replace(base, relation=rel), names, dialect)
    rendered = [_literal_text(t, dialect) for t in tokens]
    if len(set(rendered)) != len(rendered):
        return None
    which = {r: i for i, r in enumerate(rendered)}
    pattern = re.compile("|".join(re.escape(r) for r in rendered))

    def cut(text: str) -> tuple[Any, ...]:
        parts: list[Any] = []
        at = 0
        for m in pattern.finditer(text):
            parts += [text[at:m.start()], which[m.group()]]
            at = m.end()
        parts.append(text[at:])
        return tuple(parts)

    out = (cut(main), tuple(cut(h) for h in hists))
    own = [_literal_text(value_at(base.relation, p), dialect) for p in paths]
    if (_join(out[0], own), tuple(_join(h, own) for h in out[1])) != _templates(base, names,
                                                                              dialect):
        return None
    return out


def _join(parts: tuple[Any, ...], values: list[str]) -> str:
    return "".join(values[p] if type(p) is int else p for p in parts)


def _token(value: Any) -> Any:
    """A random constant of the type of ``value`` (no user text holds it by chance)."""
    if isinstance(value, str):
        return "sc" + secrets.token_hex(16)
    if isinstance(value, int):
        return secrets.randbits(62) | 1 << 61
    return float(secrets.randbits(51) | 1 << 50) + 0.5


def _literal_text(value: Any, dialect: str) -> str:
    """A constant as SQL text in ``dialect`` (short ones remembered: constants repeat)."""
    key = (type(value), value, dialect)
    text = _LITERALS.get(key)
    if text is None:
        text = render(literal(value), dialect)
        if len(text) <= 64:
            if len(_LITERALS) >= 4096:
                _LITERALS.clear()
            _LITERALS[key] = text
    return text


def _check_salt(salt: str) -> None:
    if not salt or _HEX.fullmatch(salt) is None:
        raise ValueError("the salt must be lowercase hexadecimal")


_HEX = re.compile("[0-9a-f]+")


def plan_sql(plan: EnginePlan, salt: str, names: dict[str, str] | None = None,
             dialect: str = "duckdb") -> tuple[str, list[str]]:
    """The main statement and one statement per histogram, as SQL text in ``dialect``."""
    _check_salt(salt)
    main, hists = _texts(plan, _names_key(names), dialect)
    return main.replace(_SALT_TOKEN, salt), [h.replace(_SALT_TOKEN, salt) for h in hists]


def plan_template(plan: EnginePlan, names: dict[str, str] | None = None,
                  dialect: str = "duckdb", marker: str = "$1") -> tuple[str, list[str], bool]:
    """The statements with the salt as a query parameter (``marker``), for engines that
    prepare a statement once and execute it with each release's salt; and whether the salt
    appears at all (only contribution bounding uses it).

    >>> from statcurator.query.relational import EnginePlan
    >>> from statcurator.query.plan import Scan
    >>> main, hists, salted = plan_template(EnginePlan(Scan("t", "t"), (), (), None, ()))
    >>> salted, main
    (False, 'SELECT COUNT(*) AS t_ FROM "t" AS "t"')
    """
    main, hists = _texts(plan, _names_key(names), dialect)
    salted = _SALT_TOKEN in main or any(_SALT_TOKEN in h for h in hists)
    return (main.replace(_QUOTED_SALT, marker), [h.replace(_QUOTED_SALT, marker) for h in hists],
            salted)


def _names_key(names: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
    """The engine's table names as a key of the generated SQL."""
    return tuple(sorted(names.items())) if names else ()


def to_spark(sql: str) -> str:
    """Transpile DuckDB SQL text to Spark SQL with sqlglot; sums go over DECIMAL(38, 0).

    Used only for SQL that exists as text; plans are rendered from their trees.

    >>> to_spark("SELECT SUM(x) FROM t")
    'SELECT SUM(CAST(x AS DECIMAL(38, 0))) FROM t'
    """
    import sqlglot

    return render(sqlglot.parse_one(sql, read="duckdb"), "spark")
