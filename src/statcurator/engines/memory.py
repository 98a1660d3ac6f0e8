"""The pure-Python reference engine: it interprets the plan IR row by row.

Slow and obviously correct, it is the oracle of the parity tests: DuckDB and Spark must give
exactly its numbers. It reproduces the SQL semantics the other engines follow: three-valued
logic, NULL-skipping aggregates, NaN equal to itself and above every number (as DuckDB and
Spark order floats), arithmetic in IEEE double precision.

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.compiler import compile_query
>>> from statcurator.query.sql import parse_sql
>>> from .base import TableSource
>>> data = pa.table({"age": [30, 40, None, 200], "sex": ["F", "M", "F", "F"]})
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)),
...                        Column("sex", categories=("F", "M"))))
>>> cat = DictCatalog({"t": TableInfo.from_schema("t", meta, data.schema)})
>>> cq = compile_query(parse_sql("SELECT sex, COUNT(*), SUM(age) FROM t GROUP BY sex", cat), cat)
>>> eng = MemoryEngine()
>>> eng.register("t", TableSource.from_arrow(data))
>>> sorted(eng.execute(cq.engine_plan, salt="00").groups.items())
[(('F',), (3, 150)), (('M',), (1, 40))]
"""

from __future__ import annotations

import contextlib
import math
from collections import defaultdict
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from ..core.errors import EngineError
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
from ..query.relational import EnginePlan, ExactResult, Quantized
from .base import TableSource, row_hash

if TYPE_CHECKING:
    from ..core.schema import TableMeta

__all__ = ["MemoryEngine", "evaluate"]

Row = dict[tuple[str, str], Any]


class MemoryEngine:
    """Interpret plans over in-memory rows (Python lists read from Arrow)."""

    name = "memory"

    def __init__(self) -> None:
        self.sources: dict[str, TableSource] = {}
        self._rows: dict[str, list[dict[str, Any]]] = {}

    def register(self, name: str, source: TableSource) -> None:
        self.sources[name] = source
        self._rows.pop(name, None)

    def declare_types(self, name: str, meta: TableMeta) -> list[str]:
        """Nothing to check ahead: the interpreter checks types as it evaluates."""
        return []

    def unregister(self, name: str) -> None:
        self.sources.pop(name, None)
        self._rows.pop(name, None)

    def close(self) -> None:
        self.sources.clear()
        self._rows.clear()

    def validate(self, plan: EnginePlan) -> None:
        """Every table the plan reads is registered (the interpreter checks types as it
        evaluates; the data never raises: NULL, NaN and division by zero have values)."""
        for scan in plan.relation.scans():
            if scan.table not in self.sources:
                raise EngineError(f"table {scan.table!r} is not registered with the memory "
                                  "engine", remedy="register it first")

    def sql(self, plan: EnginePlan, salt: str = "0") -> tuple[str, list[str]]:
        """The memory engine interprets the plan; the SQL shown is what DuckDB would run."""
        from .sqlgen import plan_sql

        return plan_sql(plan, salt)

    def _table(self, name: str) -> list[dict[str, Any]]:
        if name not in self._rows:
            if name not in self.sources:
                raise EngineError(f"table {name!r} is not registered with the memory engine",
                                  remedy="register it first")
            self._rows[name] = self.sources[name].to_arrow().to_pylist()
        return self._rows[name]

    # -- relation ---------------------------------------------------------------------
    def relation(self, rel: Relation) -> list[Row]:
        if isinstance(rel, Scan):
            return [{(rel.alias, k): v for k, v in r.items()} for r in self._table(rel.table)]
        if isinstance(rel, Filter):
            return [r for r in self.relation(rel.input) if evaluate(rel.predicate, r) is True]
        if isinstance(rel, Join):
            left = self.relation(rel.left)
            right = self.relation(rel.right)
            lkeys = [tuple(evaluate(a, row) for a, _ in rel.on) for row in left]
            rkeys = [tuple(evaluate(b, r) for _, b in rel.on) for r in right]
            # SQL compares a number with a double as doubles (2^53 + 1 = 2^53)
            doubles = [any(isinstance(k[i], float) for k in lkeys + rkeys)
                       for i in range(len(rel.on))]
            index: dict[tuple, list[Row]] = defaultdict(list)
            for r, key in zip(right, rkeys, strict=True):
                if any(v is None for v in key):
                    continue
                index[_join_key(key, doubles)].append(r)
            out: list[Row] = []
            right_cols = [(rel.right.alias, c) for c in self._table(rel.right.table)[0]] \
                if self._table(rel.right.table) else []
            for row, key in zip(left, lkeys, strict=True):
                matches = [] if any(v is None for v in key) else \
                    index.get(_join_key(key, doubles), [])
                for m in matches:
                    out.append({**row, **m})
                if not matches and rel.kind == "left":
                    out.append({**row, **{c: None for c in right_cols}})
            return out
        raise EngineError(f"unknown relation {type(rel).__name__}", remedy="compile the plan first")

    # -- the aggregation --------------------------------------------------------------
    def execute(self, plan: EnginePlan, *, salt: str) -> ExactResult:
        inputs = plan.quantized_inputs()
        qpos = {q: i for i, q in enumerate(inputs)}
        nonnull = [t.input for t in plan.terms if t.kind == "nonnull"]
        distinct = [t.input for t in plan.terms if t.kind == "distinct"]
        prepared = []
        for row in self.relation(plan.relation):
            key = tuple(_canon(evaluate(k.expr, row)) for k in plan.keys)
            if not _in_key_sets(key, plan.key_values):
                continue
            unit = _canon(evaluate(plan.bounding.unit, row)) if plan.bounding else None
            if plan.bounding and (unit is None or unit is _NAN):
                continue  # no unit id: belongs to no known unit (as the SQL engines)
            qs = tuple(q.quantize(evaluate(q.expr, row)) for q in inputs)
            nn = tuple(0 if evaluate(e, row) is None else 1 for e in nonnull)  # type: ignore[arg-type]
            xs = tuple(_canon(evaluate(e, row)) for e in distinct)  # type: ignore[arg-type]
            prepared.append((key, unit, qs, nn, xs))
        if plan.bounding is not None:
            prepared = _bound(prepared, plan, salt)

        groups: dict[tuple, list[int]] = {}
        units: dict[tuple, set] = defaultdict(set)
        values: list[dict[tuple, set]] = [defaultdict(set) for _ in distinct]
        qsets: dict[int, dict[tuple, set]] = {i: defaultdict(set) for i, t in
                                              enumerate(plan.terms) if t.kind == "distinct_sum"}
        hists: list[dict[tuple, dict[int, int]]] = [defaultdict(lambda: defaultdict(int))
                                                    for _ in plan.histograms]
        nn_pos = {id(e): i for i, e in enumerate(nonnull)}
        x_pos = {id(e): i for i, e in enumerate(distinct)}
        if not plan.keys:
            groups[()] = [0] * len(plan.terms)
        for key, unit, qs, nn, xs in prepared:
            acc = groups.setdefault(key, [0] * len(plan.terms))
            if unit is not None:  # COUNT(DISTINCT u) skips NULLs, as in SQL
                units[key].add(unit)
            for x, seen in zip(xs, values, strict=True):
                if x is not None:
                    seen[key].add(x)
            for i, t in enumerate(plan.terms):
                if t.kind == "rows":
                    acc[i] += 1
                elif t.kind == "nonnull":
                    acc[i] += nn[nn_pos[id(t.input)]]
                elif t.kind in ("units", "distinct"):
                    pass
                else:
                    q = qs[qpos[t.input]]  # type: ignore[index]
                    if q is None:
                        continue
                    assert isinstance(t.input, Quantized)
                    if t.kind == "valid":
                        acc[i] += 1
                    elif t.kind == "sum":
                        acc[i] += q
                    elif t.kind == "distinct_sum":
                        qsets[i][key].add(q)
                    elif t.kind == "centered":
                        acc[i] += 2 * q - t.input.center
                    elif t.kind == "cross":
                        assert t.input2 is not None
                        q2 = qs[qpos[t.input2]]
                        if q2 is not None:
                            acc[i] += (2 * q - t.input.center) * (2 * q2 - t.input2.center)
                    elif t.kind == "centered_sq":
                        acc[i] += (2 * q - t.input.center) ** 2
            for h, hist in zip(plan.histograms, hists, strict=True):
                b = h.bin_of(qs[qpos[h.input]])
                if b is not None:
                    hist[key][b] += 1
        for i, t in enumerate(plan.terms):
            if t.kind == "units":
                for key, acc in groups.items():
                    acc[i] = len(units.get(key, ()))
            elif t.kind == "distinct":
                seen = values[x_pos[id(t.input)]]
                for key, acc in groups.items():
                    acc[i] = len(seen.get(key, ()))
            elif t.kind == "distinct_sum":
                for key, acc in groups.items():
                    acc[i] = sum(qsets[i].get(key, ()))
        return ExactResult(plan.key_names, {k: tuple(v) for k, v in groups.items()},
                           tuple({k: dict(v) for k, v in h.items()} for h in hists))


#: the one NaN object every NaN key and unit becomes: Python compares NaN != NaN, but SQL
#: groups (and partitions) NaNs together, so every NaN id is one person, bounded as one
_NAN = float("nan")


def _canon(v: Any) -> Any:
    return _NAN if isinstance(v, float) and math.isnan(v) else v


def _join_key(key: tuple, doubles: list[bool]) -> tuple:
    """A join key under SQL equality: numbers compared with doubles become doubles, -0.0 is
    0.0 and NaN equals NaN (as in DuckDB and Spark)."""
    out = []
    for v, dbl in zip(key, doubles, strict=True):
        if dbl and not isinstance(v, bool | str) and isinstance(v, int | float | Decimal):
            v = float(v) + 0.0
        if isinstance(v, float) and math.isnan(v):
            v = ("nan",)
        out.append(v)
    return tuple(out)


def _in_key_sets(key: tuple, key_values: tuple) -> bool:
    for v, allowed in zip(key, key_values, strict=True):
        if allowed is not None and not any(_same(v, a) for a in allowed):
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return a == b


def _bound(prepared: list, plan: EnginePlan, salt: str) -> list:
    """Keep at most max_groups groups and max_rows rows per unit, chosen by salted MD5."""
    b = plan.bounding
    assert b is not None
    by_unit: dict[Any, list] = defaultdict(list)
    for item in prepared:
        by_unit[item[1]].append(item)
    real = list(plan.real_keys or (False,) * len(plan.keys))
    inputs = len(plan.quantized_inputs())
    nonnull = sum(1 for t in plan.terms if t.kind == "nonnull")
    distinct = sum(1 for t in plan.terms if t.kind == "distinct")
    row_real = ([plan.real_unit, *real] + [False] * (inputs + nonnull)
                + list(plan.real_distinct or (False,) * distinct))

    out = []
    for unit, items in by_unit.items():
        if b.max_groups is not None and plan.keys:
            # a person keeps the groups of the max_groups smallest hashes; the kept set is a
            # set of *keys* (dict equality is SQL's GROUP BY equality here: NaN is one value,
            # -0.0 is 0.0), so colliding hashes can never let more groups through
            ghash: dict[tuple, str] = {}
            for key, *_ in items:
                if key not in ghash:
                    ghash[key] = row_hash(salt, [unit, *key], [plan.real_unit, *real])
            ranked = sorted(ghash, key=lambda k: (ghash[k], _order_key(k)))
            keep = set(ranked[: b.max_groups])
            items = [it for it in items if it[0] in keep]
        items = sorted(items, key=lambda it: row_hash(
            salt, [unit, *it[0], *it[2], *it[3], *it[4]], row_real))
        out.extend(items[: b.max_rows])
    return out


def _order_key(key: tuple) -> tuple:
    """A total order on key tuples (ties of the group hash, which only an MD5 collision
    makes: any order keeps the groups distinct)."""
    return tuple((v is None, type(v).__name__, repr(v)) for v in key)


# -- expression semantics ------------------------------------------------------------------

def _cmp(a: Any, b: Any) -> int:
    """Three-way comparison with NaN equal to itself and greater than every other number.

    A number compared with a double is compared as a double, as SQL engines do (so the
    BIGINT 2^63 - 1 equals the DOUBLE 2^63); Python alone would compare them exactly.
    """
    if isinstance(a, float) != isinstance(b, float) and _number(a) and _number(b):
        with contextlib.suppress(OverflowError):  # beyond the double range: exactly
            a, b = float(a), float(b)
    fa = isinstance(a, float) and math.isnan(a)
    fb = isinstance(b, float) and math.isnan(b)
    if fa or fb:
        return 0 if fa and fb else (1 if fa else -1)
    return (a > b) - (a < b)


def _number(v: Any) -> bool:
    return isinstance(v, int | float | Decimal) and not isinstance(v, bool)


_OPS = {"=": lambda c: c == 0, "<>": lambda c: c != 0, "<": lambda c: c < 0,
        "<=": lambda c: c <= 0, ">": lambda c: c > 0, ">=": lambda c: c >= 0}


def _double(v: Any) -> float:
    return float(v)


def evaluate(e: Expr, row: Row) -> Any:
    """Evaluate a row-level expression with SQL semantics.

    >>> evaluate(Compare("<", Lit(float("nan")), Lit(1.0)), {})
    False
    >>> evaluate(And((Lit(None), Lit(False))), {})
    False
    """
    if isinstance(e, Col):
        return row.get((e.table, e.name))  # type: ignore[arg-type]
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Compare):
        a, b = evaluate(e.left, row), evaluate(e.right, row)
        if a is None or b is None:
            return None
        return _OPS[e.op](_cmp(a, b))
    if isinstance(e, InList):
        x = evaluate(e.expr, row)
        if x is None:
            return None
        hit = any(v.value is not None and _cmp(x, v.value) == 0 for v in e.values)
        if not hit and any(v.value is None for v in e.values):
            return None
        return (not hit) if e.negated else hit
    if isinstance(e, Between):
        x, lo, hi = (evaluate(p, row) for p in (e.expr, e.low, e.high))
        a = None if x is None or lo is None else _cmp(x, lo) >= 0
        b = None if x is None or hi is None else _cmp(x, hi) <= 0
        r = _and([a, b])
        return None if r is None else (not r if e.negated else r)
    if isinstance(e, And):
        return _and([evaluate(t, row) for t in e.terms])
    if isinstance(e, Or):
        vals = [evaluate(t, row) for t in e.terms]
        if any(v is True for v in vals):
            return True
        return None if any(v is None for v in vals) else False
    if isinstance(e, Not):
        v = evaluate(e.expr, row)
        return None if v is None else not v
    if isinstance(e, IsNull):
        r = evaluate(e.expr, row) is None
        return not r if e.negated else r
    if isinstance(e, Case):
        for cond, val in e.whens:
            if evaluate(cond, row) is True:
                return evaluate(val, row)
        return evaluate(e.default, row) if e.default is not None else None
    if isinstance(e, Arith):
        a, b = evaluate(e.left, row), evaluate(e.right, row)
        if a is None or b is None:
            return None
        a, b = _double(a), _double(b)
        if e.op == "+":
            return a + b
        if e.op == "-":
            return a - b
        if e.op == "*":
            return a * b
        return None if b == 0 else a / b  # as NULLIF(b, 0) in the SQL engines
    if isinstance(e, Neg):
        v = evaluate(e.expr, row)
        return None if v is None else -_double(v)
    if isinstance(e, Bin):
        x = evaluate(e.expr, row)
        if x is None:
            return None
        edges = e.edges
        if _cmp(x, edges[0]) < 0:
            return None
        labels = e.labels()
        for i in range(1, len(edges)):
            last = i == len(edges) - 1
            c = _cmp(x, edges[i])
            if (c < 0) or (last and c == 0 and not (isinstance(x, float) and math.isnan(x))):
                return labels[i - 1]
        return None
    if isinstance(e, WidthBucket):
        x = evaluate(e.expr, row)
        if x is None:
            return None
        if _cmp(x, e.low) < 0:
            return 0
        if _cmp(x, e.high) >= 0:
            return e.count + 1
        lo, width = float(e.low), float(e.high) - float(e.low)
        b = math.floor(((float(x) - lo) * float(e.count)) / width) + 1
        return min(b, e.count)
    raise EngineError(f"the memory engine cannot evaluate {e.sql()}", remedy="simplify the query")


def _and(vals: list[Any]) -> Any:
    if any(v is False for v in vals):
        return False
    return None if any(v is None for v in vals) else True
