"""The SQL front end: analysts' SQL, parsed with sqlglot, into a :class:`~.plan.QueryPlan`.

The supported subset is one aggregate ``SELECT`` over one private table::

    SELECT [group keys,] aggregates and arithmetic on them
    FROM private_table [AS a] [[LEFT] JOIN public_table [AS p] ON a.x = p.y [AND ...]]
    [WHERE row predicate] [GROUP BY keys] [HAVING predicate on released values]
    [ORDER BY released values or keys] [LIMIT n [OFFSET m]]

(``SELECT DISTINCT`` and a ``GROUP BY`` without aggregates release the key set; ``TOP n`` and
``FETCH FIRST n ROWS ONLY`` are ``LIMIT n``) with ``COUNT(*)``, ``COUNT(x)``,
``COUNT(DISTINCT x)``, ``SUM``, ``SUM(DISTINCT x)``, ``AVG``, ``VARIANCE``/``VAR``/``VAR_SAMP``/``VAR_POP``,
``STDDEV``/``STD``/``STDEV``/``STDDEV_SAMP``/``STDDEV_POP``, ``MEDIAN``,
``PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)``, ``QUANTILE(x, p)``, ``MIN``, ``MAX``,
``IQR``, ``REGR_SLOPE``/``REGR_INTERCEPT``/``CORR(y, x)``; functions of released values
(``ABS``, ``SQRT``, ``POWER``, ``EXP``, ``LN``, ``LOG``, ``ROUND``, ``FLOOR``, ``CEIL``);
predicates with comparisons, ``IN``, ``BETWEEN``, ``IS NULL``, ``AND``/``OR``/``NOT``;
``CASE`` with public constants; ``+ - * /``; and public binning with ``WIDTH_BUCKET(x, lo,
hi, n)`` or ``BIN(x, e0, e1, ..., ek)``. Anything else is refused with an
:class:`~statcurator.core.errors.UnsupportedQueryError` naming the construct and a remedy.

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)), Column("sex")))
>>> cat = DictCatalog({"t": TableInfo.from_meta(meta)})
>>> plan = parse_sql("SELECT sex, COUNT(*) AS n FROM t WHERE age >= 18 GROUP BY sex", cat)
>>> [o.name for o in plan.outputs]
['sex', 'n']
>>> parse_sql("SELECT sex, COUNT(*) AS n FROM t GROUP BY sex ORDER BY n DESC LIMIT 1", cat).limit
1
>>> parse_sql("SELECT * FROM t", cat)
Traceback (most recent call last):
...
statcurator.core.errors.UnsupportedQueryError: SELECT * (row-level output) is not supported in a DP query; select aggregates such as COUNT(*) or AVG(col), grouped by public keys
"""

from __future__ import annotations

import logging
import math
from fractions import Fraction
from typing import Any

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
    Func,
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
from .scope import Scope, agg_name, key_refs, unique_names

__all__ = ["parse_sql", "quiet_parser_warnings", "SUPPORTED_AGGREGATES"]

SUPPORTED_AGGREGATES = ("COUNT(*)", "COUNT(x)", "COUNT(DISTINCT x)", "SUM",
                        "SUM(DISTINCT x)", "AVG", "VARIANCE", "VAR", "VAR_SAMP", "VAR_POP",
                        "STDDEV", "STD", "STDEV",
                        "STDDEV_SAMP", "STDDEV_POP", "MEDIAN", "PERCENTILE_CONT", "QUANTILE",
                        "MIN", "MAX", "IQR", "REGR_SLOPE", "REGR_INTERCEPT", "CORR")

#: aggregate spellings sqlglot leaves as plain function calls → the IR's function. VAR and
#: STDEV are the sample statistics (T-SQL; VARP and STDEVP the population ones); STD is the
#: population standard deviation (MySQL's STD = STDDEV_POP).
_NAMED_AGGREGATES = {"mean": "avg", "var": "var_samp", "varp": "var_pop", "std": "stddev_pop",
                     "stdev": "stddev_samp", "stdevp": "stddev_pop", "iqr": "iqr"}

#: functions of released values (post-processing), by sqlglot's node key
_FUNCTION_KEYS = {"abs": "abs", "sqrt": "sqrt", "pow": "power", "exp": "exp", "ln": "ln",
                  "round": "round", "floor": "floor", "ceil": "ceil"}


def _refuse(construct: str, remedy: str) -> UnsupportedQueryError:
    return UnsupportedQueryError(f"{construct} is not supported in a DP query", remedy=remedy)


#: what sqlglot logs before statcurator refuses SQL it cannot read (the refusal says it,
#: with a remedy): the messages :func:`quiet_parser_warnings` drops
_PARSER_NOISE = ("Falling back to parsing as a 'Command'", "Byte strings are not supported")


class _ParserNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(n in message for n in _PARSER_NOISE)


def quiet_parser_warnings() -> None:
    """Drop sqlglot's log warnings that come before a refusal of unreadable SQL, and only
    those (its other warnings, such as a lossy translation, still show). For applications
    (the command line, the service), which own the process's logging; once per process.

    >>> quiet_parser_warnings(); quiet_parser_warnings()
    >>> sum(isinstance(f, _ParserNoise) for f in logging.getLogger("sqlglot").filters)
    1
    """
    log = logging.getLogger("sqlglot")
    if not any(isinstance(f, _ParserNoise) for f in log.filters):
        log.addFilter(_ParserNoise())


def parse_sql(text: str, catalog: Catalog) -> QueryPlan:
    """Parse one SQL statement into a :class:`QueryPlan`, or refuse it with the reason."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    if not isinstance(text, str) or not text.strip():
        raise UnsupportedQueryError("the query is empty", remedy="write SELECT ... FROM table")
    try:  # a lone surrogate (a JSON "\ud800" escape) cannot be stored in the ledger
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise UnsupportedQueryError("the query holds a lone UTF-16 surrogate (an unpaired "
                                    "\\ud800-\\udfff escape)",
                                    remedy="send the query as valid Unicode") from None
    # what sqlglot raises on text it cannot read: its own errors (a string or a name left
    # open is a TokenError), and — on some malformed input — a TypeError from inside its
    # parser, or a RecursionError when brackets nest hundreds deep
    unreadable = (SqlglotError, TypeError, RecursionError)
    try:
        statements = [s for s in sqlglot.parse(text, read="duckdb") if s is not None]
    except unreadable as e:
        # T-SQL's SELECT TOP n and [bracketed] names: the one other spelling analysts bring
        # (sqlglot reads TOP n as LIMIT n); anything else is reported against DuckDB's SQL
        try:
            statements = [s for s in sqlglot.parse(text, read="tsql") if s is not None]
        except unreadable:
            msg = (str(e).splitlines() or [type(e).__name__])[0]
            if isinstance(e, RecursionError):
                msg = "brackets are nested too deeply"
            elif not isinstance(e, SqlglotError):
                msg = "the SQL parser cannot read it"
            raise UnsupportedQueryError(
                f"cannot parse the query: {msg}",
                remedy="check the SQL syntax (a quote inside a string is written twice: "
                       "'it''s')") from None
    if len(statements) != 1:
        raise UnsupportedQueryError(f"got {len(statements)} statements",
                                    remedy="send exactly one SELECT statement")
    tree = statements[0]
    try:
        return _Converter(catalog, exp).select(tree)
    except RecursionError:
        raise UnsupportedQueryError("the query's expressions are nested too deeply",
                                    remedy="write the condition with fewer levels of "
                                           "brackets (AND/OR lists need none)") from None


class _Converter:
    def __init__(self, catalog: Catalog, exp: Any) -> None:
        self.catalog = catalog
        self.exp = exp

    # -- statement ---------------------------------------------------------------------
    def select(self, tree: Any) -> QueryPlan:
        exp = self.exp
        if isinstance(tree, exp.Union | exp.Intersect | exp.Except):
            raise _refuse(type(tree).__name__.upper(),
                          "run each SELECT as its own query (each is charged separately)")
        if not isinstance(tree, exp.Select):
            raise UnsupportedQueryError(
                f"only SELECT queries are answered, and {tree.sql()[:60]!r} is not one",
                remedy="write an aggregate SELECT ... FROM table")
        for key, what, remedy in (
                ("with", "WITH (common table expressions)", "inline the expression in one SELECT"),
                ("qualify", "QUALIFY", "drop it"),
                ("windows", "WINDOW", "drop the window clause")):
            if tree.args.get(key):
                raise _refuse(what, remedy)
        self.notes: list[str] = []  # what the analyst should be told (coercions, ...)
        limit, offset = self.limit(tree)
        distinct = tree.args.get("distinct")
        if distinct is not None and distinct.args.get("on") is not None:
            raise _refuse("SELECT DISTINCT ON", "use GROUP BY with the aggregates you need")
        # every other clause (USING SAMPLE, INTO, hints, ...) would be silently ignored by the
        # plan, so that the answer would not be the one asked for: refuse it by name
        known = {"expressions", "from", "from_", "joins", "where", "group", "having", "order",
                 "limit", "offset", "fetch", "distinct"}
        for key, value in tree.args.items():
            if value and key not in known:
                raise _refuse(f"the {key.upper()} clause of SELECT",
                              "drop it; see docs/queries.md for the SQL subset")
        for node in tree.walk():
            if isinstance(node, exp.Window):
                raise _refuse("a window function (OVER ...)",
                              "window functions compute per-row values; use GROUP BY aggregates")
            if isinstance(node, exp.Subquery | exp.Exists) or (
                    isinstance(node, exp.Select) and node is not tree):
                raise _refuse("a subquery", "write a single SELECT over one private table "
                                            "(joined only with public tables)")
        relation, scope = self.relation(tree)
        where = tree.args.get("where")
        if where is not None:
            relation = Filter(relation, self.row(where.this, scope, "WHERE"))
        items = list(tree.expressions)
        if any(isinstance(i, exp.Star) or (isinstance(i, exp.Column) and isinstance(i.this, exp.Star))
               for i in items):
            raise _refuse("SELECT * (row-level output)",
                          "select aggregates such as COUNT(*) or AVG(col), grouped by public keys")
        aliases = [i.alias if isinstance(i, exp.Alias) else None for i in items]
        bodies = [i.this if isinstance(i, exp.Alias) else i for i in items]
        if distinct is not None:
            if any(self.has_aggregate(b) for b in bodies) or tree.args.get("group") is not None:
                raise _refuse("SELECT DISTINCT with aggregates or GROUP BY",
                              "drop DISTINCT: the released rows of a grouped query are one per "
                              "group already")
            # SELECT DISTINCT a, b lists the (a, b) values present: the released key set of
            # GROUP BY a, b (public key sets, or DP partition selection)
            tree = tree.copy()
            tree.set("group", exp.Group(expressions=[b.copy() for b in bodies]))
            self.notes.append("SELECT DISTINCT answered as GROUP BY of its columns: the "
                              "released key set")
        keys = self.group_keys(tree, bodies, aliases, scope)
        outputs = self.outputs(bodies, aliases, keys, scope)
        if not any(o.expr.aggregates() for o in outputs) and not keys:
            raise _refuse("a row-level SELECT (no aggregate)",
                          "aggregate: e.g. SELECT COUNT(*) FROM t, or AVG(col) with declared "
                          "bounds; a DP query releases only aggregates")
        named = {o.name: o.expr for o in outputs}
        having = None
        if tree.args.get("having") is not None:
            having = self.output(tree.args["having"].this, keys, scope, "HAVING", named)
        order: list[OrderKey] = []
        if tree.args.get("order") is not None:
            for o in tree.args["order"].expressions:
                node = o.this
                if isinstance(node, exp.Literal) and not node.is_string:
                    i = int(node.this)
                    if not 1 <= i <= len(outputs):
                        raise UnsupportedQueryError(f"ORDER BY {i} is out of range",
                                                    remedy=f"use 1 to {len(outputs)}")
                    e = outputs[i - 1].expr
                else:
                    e = self.output(node, keys, scope, "ORDER BY", named)
                order.append(OrderKey(e, bool(o.args.get("desc"))))
        if limit is not None and not order:
            self.notes.append(f"LIMIT {limit} without ORDER BY keeps the first {limit} released "
                              "groups in key order (the declared categories' order, else "
                              "sorted): never an order that depends on the data")
        return QueryPlan(relation, tuple(keys), tuple(outputs), having, tuple(order),
                         limit=limit, offset=offset, notes=tuple(self.notes))

    def limit(self, tree: Any) -> tuple[int | None, int]:
        """``LIMIT``/``TOP``/``FETCH FIRST`` and ``OFFSET``: non-negative integer constants,
        applied to the released table (post-processing)."""
        exp = self.exp

        def count(node: Any, what: str) -> int:
            lit = self.literal(node) if node is not None else None
            v = None if lit is None else lit.value
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise UnsupportedQueryError(
                    f"{what} must be a non-negative integer constant, got "
                    f"{node.sql() if node is not None else 'nothing'}",
                    remedy=f"write e.g. {what} 10")
            return v

        limit = offset = None
        node = tree.args.get("limit") or tree.args.get("fetch")
        if node is not None:
            opts = node.args.get("limit_options")
            if opts is not None and (opts.args.get("percent") or opts.args.get("with_ties")):
                raise _refuse(f"{node.sql()} (PERCENT / WITH TIES)",
                              "limit the released table to a number of rows: LIMIT 10")
            extra = [k for k, v in node.args.items()
                     if v and k not in ("this", "expression", "count", "direction",
                                        "limit_options")]
            if extra:
                raise _refuse(f"{node.sql()} ({', '.join(extra)})", "write LIMIT n OFFSET m")
        if isinstance(node, exp.Fetch):
            limit = count(node.args.get("count"), "FETCH FIRST")
        elif node is not None:
            limit = count(node.expression, "LIMIT")
        node = tree.args.get("offset")
        if node is not None:
            offset = count(node.expression, "OFFSET")
        return limit, offset or 0

    # -- FROM and JOIN -----------------------------------------------------------------
    def relation(self, tree: Any) -> tuple[Relation, Scope]:
        frm = tree.args.get("from_") or tree.args.get("from")
        if frm is None:
            raise UnsupportedQueryError("the query has no FROM clause",
                                        remedy="name the table: SELECT COUNT(*) FROM t")
        first = self.scan(frm.this)
        joins = tree.args.get("joins") or []
        scans = [first]
        rel: Relation = first
        info = self.catalog.table_info(first.table)
        if info.public:
            raise UnsupportedQueryError(
                f"table {first.table!r} is public: it needs no DP query",
                remedy="query the public table directly; DP queries read a private table")
        pending = []
        for j in joins:
            right = self.scan(j.this)
            rinfo = self.catalog.table_info(right.table)
            if not rinfo.public:
                raise UnsupportedQueryError(
                    f"a join of two private tables ({first.table!r} and {right.table!r})",
                    remedy="join only with public tables (curator.register_public); a join "
                           "of private tables has no bounded sensitivity here")
            side = (j.args.get("side") or "").upper()
            kind = (j.args.get("kind") or "").upper()
            if kind in ("CROSS", "SEMI", "ANTI") or side in ("RIGHT", "FULL"):
                raise _refuse(f"a {side or kind} JOIN",
                              "use [INNER] JOIN or LEFT JOIN with ON equalities")
            if j.args.get("using"):
                raise _refuse("JOIN ... USING", "write ON a.x = p.x")
            on = j.args.get("on")
            if on is None:
                raise _refuse("a JOIN without ON", "join on equalities: ON a.x = p.y")
            scans.append(right)
            pending.append((right, on, "left" if side == "LEFT" else "inner"))
        scope = Scope(self.catalog, scans)
        for right, on, kind in pending:
            pairs = self.join_condition(on, right, scope)
            rel = Join(rel, right, pairs, kind)
        return rel, scope

    def scan(self, node: Any) -> Scan:
        exp = self.exp
        if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
            raise _refuse(f"FROM {node.sql()}", "read a registered table by name")
        # TABLESAMPLE, PIVOT, time travel, column renaming... are not part of the plan: the
        # whole table would be read instead of what was asked
        extra = [k for k, v in node.args.items()
                 if v and k not in ("this", "alias", "db", "catalog")]
        alias_node = node.args.get("alias")
        if extra or (alias_node is not None and alias_node.args.get("columns")):
            raise _refuse(f"FROM {node.sql()} ({', '.join(extra) or 'column aliases'})",
                          "read a registered table by name, optionally with a table alias")
        if node.args.get("db") or node.args.get("catalog"):
            name = node.sql(dialect="duckdb").split(" AS ")[0].replace('"', "")
            try:
                info = self.catalog.table_info(name)
            except UnsupportedQueryError as first:
                # a schema-qualified name (census.pums, main.t) names the registered table
                # of its last part when no table is registered under the whole name
                try:
                    info = self.catalog.table_info(node.name)
                except UnsupportedQueryError:
                    raise first from None
        else:
            info = self.catalog.table_info(node.name)
        alias = node.alias or info.name
        return Scan(info.name, alias)

    def join_condition(self, on: Any, right: Scan, scope: Scope) -> tuple[tuple[Expr, Expr], ...]:
        exp = self.exp
        conds = list(on.flatten()) if isinstance(on, exp.And) else [on]
        pairs = []
        for c in conds:
            if isinstance(c, exp.Paren):
                c = c.this
            if not isinstance(c, exp.EQ):
                raise _refuse(f"the join condition {c.sql()}", "join on column equalities only")
            a, b = (self.row(x, scope, "JOIN ON") for x in (c.this, c.expression))
            if not (isinstance(a, Col) and isinstance(b, Col)):
                raise _refuse(f"the join condition {c.sql()}", "compare two columns: a.x = p.y")
            if a.table == right.alias and b.table != right.alias:
                a, b = b, a
            if b.table != right.alias or a.table == right.alias:
                raise _refuse(f"the join condition {c.sql()}",
                              f"compare a column of the joined table {right.alias!r} with one "
                              "of the tables before it")
            pairs.append((a, b))
        return tuple(pairs)

    # -- GROUP BY and outputs ----------------------------------------------------------
    def group_keys(self, tree: Any, bodies: list[Any], aliases: list[str | None], scope: Scope) -> list[GroupKey]:
        exp = self.exp
        group = tree.args.get("group")
        if group is None:
            return []
        if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
            raise _refuse("ROLLUP/CUBE/GROUPING SETS", "run one query per grouping")
        keys: list[tuple[str | None, Expr]] = []
        for g in group.expressions:
            name = None
            if isinstance(g, exp.Literal) and not g.is_string:
                i = int(g.this)
                if not 1 <= i <= len(bodies):
                    raise UnsupportedQueryError(f"GROUP BY {i} is out of range",
                                                remedy=f"use 1 to {len(bodies)}")
                node, name = bodies[i - 1], aliases[i - 1]
            elif (isinstance(g, exp.Column) and not g.table and g.name in aliases
                  and not any(scope._find(t, g.name) for t in scope.tables.values())):
                i = aliases.index(g.name)
                node, name = bodies[i], aliases[i]
            else:
                node = g
            if self.has_aggregate(node):
                raise _refuse("an aggregate in GROUP BY", "group by row values or public bins")
            e = self.row(node, scope, "GROUP BY")
            if name is None:
                for body, alias in zip(bodies, aliases, strict=True):
                    if not self.has_aggregate(body) and self.row(body, scope, "SELECT") == e:
                        name = alias or (body.name if isinstance(body, exp.Column) else None)
                        break
            if name is None:
                name = e.name if isinstance(e, Col) else f"group_{len(keys) + 1}"
            keys.append((name, e))
        names = unique_names(n or f"group_{i + 1}" for i, (n, _) in enumerate(keys))
        out: list[GroupKey] = []
        for n, (_, e) in zip(names, keys, strict=True):
            if any(k.expr == e for k in out):
                continue
            out.append(GroupKey(n, e))
        return out

    def outputs(self, bodies: list[Any], aliases: list[str | None], keys: list[GroupKey],
                scope: Scope) -> list[Output]:
        exp = self.exp
        exprs: list[Expr] = []
        names: list[str] = []
        for i, (body, alias) in enumerate(zip(bodies, aliases, strict=True)):
            e = self.output(body, keys, scope, "SELECT", {})
            exprs.append(e)
            if alias:
                names.append(alias)
            elif isinstance(e, KeyRef):
                names.append(e.name)
            elif isinstance(e, Agg):
                names.append(agg_name(e, self.function_name(body)))
            elif isinstance(body, exp.Column):
                names.append(body.name)
            else:
                names.append(f"col_{i + 1}")
        return [Output(n, e) for n, e in zip(unique_names(names), exprs, strict=True)]

    def function_name(self, node: Any) -> str | None:
        exp = self.exp
        if isinstance(node, exp.WithinGroup):
            node = node.this
        if isinstance(node, exp.Count):
            if isinstance(node.this, exp.Distinct):
                return "count_distinct"
            return "count"
        if isinstance(node, exp.Anonymous):
            return str(node.this).lower()
        key = str(getattr(node, "key", ""))
        return {"variance": "var", "variancepop": "var_pop", "stddevsamp": "stddev",
                "stddevpop": "stddev_pop", "percentilecont": "percentile_cont",
                "percentiledisc": "percentile_disc", "approxquantile": "quantile",
                "regrslope": "regr_slope", "regrintercept": "regr_intercept"}.get(key, key)

    def has_aggregate(self, node: Any) -> bool:
        exp = self.exp
        return any(isinstance(n, exp.AggFunc) or (isinstance(n, exp.Anonymous)
                                                   and str(n.this).lower() in _NAMED_AGGREGATES)
                   for n in node.walk())

    def output(self, node: Any, keys: list[GroupKey], scope: Scope, where: str,
               named: dict[str, Expr]) -> Expr:
        """An expression over released values: keys, aggregates, constants, arithmetic."""
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.output(node.this, keys, scope, where, named)
        if isinstance(node, exp.Column) and not node.table and node.name in named:
            return named[node.name]
        if isinstance(node, exp.Pi):  # public constants of the output
            return Lit(math.pi)
        if isinstance(node, exp.Rand):
            if node.args.get("this") is not None:
                raise _refuse(f"{node.sql()} (a seeded random number)", "write RAND()")
            return Func("rand", ())
        refers = any(isinstance(n, exp.Column) and not n.table and n.name in named
                     for n in node.walk())
        if not self.has_aggregate(node) and not refers:
            e = self.row(node, scope, where)
            return key_refs(e, keys, where)
        agg = self.aggregate(node, scope)
        if agg is not None:
            return agg
        def sub(n: Any) -> Expr:
            return self.output(n, keys, scope, where, named)

        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}[type(node)]
            return Arith(op, sub(node.this), sub(node.expression))
        if isinstance(node, exp.Neg):
            return Neg(sub(node.this))
        cmp = self._comparison(node)
        if cmp is not None:
            return Compare(cmp, sub(node.this), sub(node.expression))
        if isinstance(node, exp.And):
            return And(tuple(sub(n) for n in node.flatten()))
        if isinstance(node, exp.Or):
            return Or(tuple(sub(n) for n in node.flatten()))
        if isinstance(node, exp.Not):
            return Not(sub(node.this))
        if isinstance(node, exp.Between):
            return Between(sub(node.this), sub(node.args["low"]), sub(node.args["high"]))
        if isinstance(node, exp.Case) and node.this is None:
            whens = tuple((sub(i.this), sub(i.args["true"])) for i in node.args["ifs"])
            d = node.args.get("default")
            return Case(whens, sub(d) if d is not None else None)
        func = self.released_function(node, sub)
        if func is not None:
            return func
        raise _refuse(f"{node.sql()} in {where}",
                      "combine aggregates only with + - * /, ABS, SQRT, POWER, EXP, LN, LOG10, "
                      "ROUND, FLOOR, CEIL, comparisons, AND/OR/NOT and CASE")

    def released_function(self, node: Any, sub: Any) -> Func | None:
        """A scalar function of released values (``SQRT(VARIANCE(x))``): post-processing."""
        exp = self.exp
        key = str(getattr(node, "key", ""))
        if isinstance(node, exp.Log):  # LOG(x) is the base-10 logarithm (DuckDB, PostgreSQL)
            if node.expression is None:
                return Func("log10", (sub(node.this),))
            base = self.literal(node.this)
            if base is None or base.value not in (10, 10.0):
                raise _refuse(f"{node.sql()} (a logarithm to a base other than 10)",
                              "write LN(x) / LN(b), or LOG10(x)")
            return Func("log10", (sub(node.expression),))
        if key not in _FUNCTION_KEYS:
            return None
        name = _FUNCTION_KEYS[key]
        extra = [k for k, v in node.args.items()
                 if v is not None and k not in ("this", "expression", "decimals")]
        if extra:
            raise _refuse(f"{node.sql()} ({', '.join(extra)})", f"write {name.upper()}(x)")
        args = [sub(node.this)]
        if name == "power":
            args.append(Lit(self.constant(node.expression, "POWER's exponent")))
        if node.args.get("decimals") is not None:
            if name != "round":
                raise _refuse(node.sql(), f"write {name.upper()}(x)")
            d = self.constant(node.args["decimals"], "ROUND's number of decimals")
            if not isinstance(d, int):
                raise UnsupportedQueryError("ROUND's number of decimals must be an integer",
                                            remedy="write ROUND(x, 2)")
            args.append(Lit(d))
        return Func(name, tuple(args))

    # -- aggregates --------------------------------------------------------------------
    def aggregate(self, node: Any, scope: Scope) -> Agg | None:
        exp = self.exp

        def arg(n: Any) -> Expr:
            if isinstance(n, exp.Distinct):
                raise _refuse(f"DISTINCT inside {node.sql()}",
                              "COUNT(DISTINCT x) and SUM(DISTINCT x) are supported; other "
                              "aggregates take every row's value")
            if self.has_aggregate(n):
                raise _refuse("a nested aggregate", "aggregate row values only")
            return self.row(n, scope, f"the argument of {node.key.upper()}")

        def p_of(n: Any) -> Fraction:
            if isinstance(n, exp.Literal) and not n.is_string:
                from ..core.errors import InvalidParameterError
                from ..core.numbers import exact

                try:  # as exact() reads numbers: never one with a huge exponent (1e-99999999)
                    p = exact(n.this, "the quantile order", strings=True, allow_zero=True)
                except InvalidParameterError:
                    p = Fraction(-1)
                if 0 <= p <= 1:
                    return p
            raise UnsupportedQueryError(f"the quantile order {n.sql()} must be a constant in [0, 1]",
                                        remedy="write e.g. PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY x)")

        if isinstance(node, exp.Filter):
            raise _refuse("an aggregate FILTER clause",
                          "use SUM(CASE WHEN cond THEN 1 ELSE 0 END) or a WHERE clause")
        if isinstance(node, exp.Count):
            a = node.this
            if a is None or isinstance(a, exp.Star):
                return Agg("count")
            if isinstance(a, exp.Distinct):
                if len(a.expressions) != 1:
                    raise _refuse("COUNT(DISTINCT a, b)", "count distinct persons: COUNT(DISTINCT id)")
                return Agg("count_distinct", self.row(a.expressions[0], scope, "COUNT(DISTINCT)"))
            if isinstance(a, exp.Literal | exp.Boolean):
                return Agg("count")
            return Agg("count", arg(a))
        if isinstance(node, exp.Sum) and isinstance(node.this, exp.Distinct):
            if len(node.this.expressions) != 1:
                raise _refuse("SUM(DISTINCT a, b)", "sum the distinct values of one column")
            return Agg("sum_distinct", arg(node.this.expressions[0]))
        simple = {exp.Sum: "sum", exp.Avg: "avg", exp.Variance: "var_samp",
                  exp.VariancePop: "var_pop", exp.Stddev: "stddev_samp",
                  exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop"}
        for cls, func in simple.items():
            if type(node) is cls:
                return Agg(func, arg(node.this))
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in _NAMED_AGGREGATES:
            name = str(node.this).upper()
            if len(node.expressions) != 1:
                raise UnsupportedQueryError(f"{name} takes one argument",
                                            remedy=f"write {name}(x)")
            return Agg(_NAMED_AGGREGATES[name.lower()], arg(node.expressions[0]))
        two = {exp.Corr: "corr", exp.RegrSlope: "regr_slope", exp.RegrIntercept: "regr_intercept"}
        for cls2, func in two.items():
            if type(node) is cls2:
                if node.expression is None:
                    raise UnsupportedQueryError(f"{func.upper()} takes two arguments (y, x)",
                                                remedy=f"write {func.upper()}(y, x)")
                return Agg(func, arg(node.this), arg2=arg(node.expression))
        if isinstance(node, exp.Median):
            return Agg("quantile", arg(node.this), Fraction(1, 2))
        if isinstance(node, exp.Min):
            return Agg("quantile", arg(node.this), Fraction(0))
        if isinstance(node, exp.Max):
            return Agg("quantile", arg(node.this), Fraction(1))
        if isinstance(node, exp.Quantile | exp.ApproxQuantile):
            return Agg("quantile", arg(node.this), p_of(node.args.get("quantile")))
        if isinstance(node, exp.PercentileCont | exp.PercentileDisc):
            if node.args.get("expression") is None:
                raise _refuse(f"{node.sql()} without WITHIN GROUP",
                              "write PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)")
            return Agg("quantile", arg(node.this), p_of(node.expression))
        if isinstance(node, exp.WithinGroup):
            inner = node.this
            order = node.expression
            if not isinstance(inner, exp.PercentileCont | exp.PercentileDisc) or order is None \
                    or len(order.expressions) != 1:
                raise _refuse(node.sql(), "write PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY x)")
            return Agg("quantile", arg(order.expressions[0].this), p_of(inner.this))
        if isinstance(node, exp.AggFunc):
            raise _refuse(f"the aggregate {node.key.upper()}",
                          "supported aggregates: " + ", ".join(SUPPORTED_AGGREGATES))
        return None

    # -- row-level expressions ---------------------------------------------------------
    def _comparison(self, node: Any) -> str | None:
        exp = self.exp
        return {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">",
                exp.GTE: ">="}.get(type(node))

    def literal(self, node: Any) -> Lit | None:
        exp = self.exp
        if isinstance(node, exp.Paren):
            return self.literal(node.this)
        if isinstance(node, exp.Null):
            return Lit(None)
        if isinstance(node, exp.Boolean):
            return Lit(bool(node.this))
        if isinstance(node, exp.Literal):
            if node.is_string:
                return Lit(node.this)
            return Lit(_number(node.this))
        if isinstance(node, exp.Neg):
            inner = self.literal(node.this)
            if inner is not None and isinstance(inner.value, int | float) \
                    and not isinstance(inner.value, bool):
                return Lit(-inner.value)
        return None

    def constant(self, node: Any, what: str) -> int | float:
        lit = self.literal(node)
        if lit is None or not isinstance(lit.value, int | float) or isinstance(lit.value, bool):
            raise UnsupportedQueryError(f"{what} must be a numeric constant, got {node.sql()}",
                                        remedy="bin edges and bucket bounds are public constants")
        return lit.value

    def row(self, node: Any, scope: Scope, where: str) -> Expr:
        exp = self.exp
        lit = self.literal(node)
        if lit is not None:
            return lit
        if isinstance(node, exp.Paren):
            return self.row(node.this, scope, where)
        if isinstance(node, exp.Column):
            if isinstance(node.this, exp.Star):
                raise _refuse("t.* (row-level output)", "select aggregates")
            return scope.resolve(node.name, node.table or None)
        if isinstance(node, exp.AggFunc):
            raise _refuse(f"an aggregate in {where}",
                          "aggregates belong in SELECT or HAVING; filter rows with WHERE")
        def sub(n: Any) -> Expr:
            return self.row(n, scope, where)

        cmp = self._comparison(node)
        if cmp is not None:
            left, right = sub(node.this), sub(node.expression)
            return Compare(cmp, left, self.coerce(right, left, scope)) if isinstance(right, Lit) \
                else Compare(cmp, self.coerce(left, right, scope), right)
        if isinstance(node, exp.And):
            return And(tuple(sub(n) for n in node.flatten()))
        if isinstance(node, exp.Or):
            return Or(tuple(sub(n) for n in node.flatten()))
        if isinstance(node, exp.Not):
            inner = node.this
            if isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.In):
                return self._in(inner, scope, where, negated=True)
            if isinstance(inner, exp.Between):
                b = self.row(inner, scope, where)
                return Between(b.expr, b.low, b.high, negated=True)  # type: ignore[attr-defined]
            if isinstance(inner, exp.Is):
                b = self.row(inner, scope, where)
                return IsNull(b.expr, negated=True)  # type: ignore[attr-defined]
            return Not(sub(inner))
        if isinstance(node, exp.In):
            return self._in(node, scope, where, negated=False)
        if isinstance(node, exp.Between):
            x = sub(node.this)
            return Between(x, self.coerce(sub(node.args["low"]), x, scope),
                           self.coerce(sub(node.args["high"]), x, scope))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise _refuse(node.sql(), "use IS NULL / IS NOT NULL or a comparison")
            return IsNull(sub(node.this))
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Div):
            op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/"}[type(node)]
            return Arith(op, sub(node.this), sub(node.expression))
        if isinstance(node, exp.Neg):
            return Neg(sub(node.this))
        if isinstance(node, exp.Case):
            subject = node.this
            whens = []
            for i in node.args["ifs"]:
                cond = sub(i.this)
                if subject is not None:
                    cond = Compare("=", sub(subject), cond)
                whens.append((cond, sub(i.args["true"])))
            d = node.args.get("default")
            return Case(tuple(whens), sub(d) if d is not None else None)
        if isinstance(node, exp.If):
            d = node.args.get("false")
            return Case(((sub(node.this), sub(node.args["true"])),), sub(d) if d is not None else None)
        if isinstance(node, exp.WidthBucket):
            lo = self.constant(node.args["min_value"], "WIDTH_BUCKET's low bound")
            hi = self.constant(node.args["max_value"], "WIDTH_BUCKET's high bound")
            n = self.constant(node.args["num_buckets"], "WIDTH_BUCKET's bucket count")
            if not (isinstance(n, int) and 1 <= n <= 100_000 and lo < hi):
                raise UnsupportedQueryError(
                    "WIDTH_BUCKET needs low < high and 1 to 100000 buckets",
                    remedy="write WIDTH_BUCKET(age, 0, 120, 12)")
            return WidthBucket(sub(node.this), lo, hi, n)
        if isinstance(node, exp.Anonymous) and str(node.this).lower() == "bin":
            args = node.expressions
            if len(args) < 3:
                raise UnsupportedQueryError("BIN needs a value and at least two edges",
                                            remedy="write BIN(age, 0, 18, 65, 120)")
            edges = tuple(self.constant(a, "a BIN edge") for a in args[1:])
            if any(b <= a for a, b in zip(edges, edges[1:], strict=False)):
                raise UnsupportedQueryError(f"BIN edges {edges} are not increasing",
                                            remedy="list strictly increasing edges")
            return Bin(sub(args[0]), edges)
        if isinstance(node, exp.Window):
            raise _refuse("a window function", "use GROUP BY aggregates")
        if isinstance(node, exp.Cast):
            raise _refuse(f"CAST ({node.sql()})",
                          "compare with constants of the column's own type instead")
        name = node.key.upper() if hasattr(node, "key") else type(node).__name__
        if isinstance(node, exp.Anonymous):
            name = str(node.this).upper()
        raise _refuse(f"{name} ({node.sql()}) in {where}",
                      "use comparisons, IN, BETWEEN, IS NULL, AND/OR/NOT, CASE, + - * /, "
                      "WIDTH_BUCKET or BIN")

    def _in(self, node: Any, scope: Scope, where: str, *, negated: bool) -> InList:
        if node.args.get("query") is not None:
            raise _refuse("IN (subquery)", "list public constants: x IN ('a', 'b')")
        values = []
        for v in node.expressions:
            lit = self.literal(v)
            if lit is None:
                raise _refuse(f"IN with a non-constant ({v.sql()})", "list constants only")
            values.append(lit)
        x = self.row(node.this, scope, where)
        return InList(x, tuple(self.coerce(v, x, scope) for v in values), negated)  # type: ignore[misc]

    def coerce(self, value: Expr, against: Expr, scope: Scope) -> Expr:
        """A constant compared with a column of another type, converted to the column's type
        where the conversion is exact and unambiguous — a quoted number against a numeric
        column (``educ = '8'``), TRUE/FALSE against a numeric one (as 1/0), 0/1 or 'true'/
        'false' against a boolean one — and stated in the plan's notes. A number against a
        text column is not converted (``'08'`` and ``'8'`` would both be 8): it is refused.
        """
        if not isinstance(value, Lit) or not isinstance(against, Col) or value.value is None:
            return value
        kind = scope.info_of(against).kind(against.name)
        v: Any = value.value
        new: Any = v
        if kind in ("integer", "real") and isinstance(v, str):
            try:
                new = _number(v.strip())
            except ValueError:
                return value
            if isinstance(new, float) and not math.isfinite(new):
                return value
        elif kind in ("integer", "real") and isinstance(v, bool):
            new = int(v)
        elif kind == "boolean" and isinstance(v, int) and not isinstance(v, bool) and v in (0, 1):
            new = bool(v)
        elif kind == "boolean" and isinstance(v, str) and v.strip().lower() in ("true", "false"):
            new = v.strip().lower() == "true"
        if new is v:
            return value
        lit = Lit(new)
        self.notes.append(f"the constant {value.sql()} compared with the {kind} column "
                          f"{against.name!r} was read as {lit.sql()}")
        return lit


def _number(text: str) -> int | float:
    try:
        return int(text)
    except ValueError:
        return float(text)
