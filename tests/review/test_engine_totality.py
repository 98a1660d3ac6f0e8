"""Row-level expressions must never raise for some data and not for other data.

An engine error after the charge is an answer in itself: "some row makes this expression
fail" is released exactly, without noise. Findings:

* ``x / y`` with ``y = 0`` raised ``ZeroDivisionError`` in the memory engine and
  ``DIVIDE_BY_ZERO`` in Spark (ANSI mode, Spark 4's default), while DuckDB returned ±inf or
  NaN — so ``WHERE 1 / (CASE WHEN <Bob has X> THEN 0 ELSE 1 END) > 0`` told whether Bob has X.
  Division by zero is now NULL on every engine (``NULLIF`` in SQL).
* ``WIDTH_BUCKET(x, -1e308, 1e308, 10)``: ``(x - low) * n / (high - low)`` overflows to NaN,
  and its cast to an integer failed on exactly the rows inside the range. Ranges that do not
  fit double precision are refused when the query is built (SQL and builder alike).
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from statcurator.core.errors import UnsupportedQueryError
from statcurator.core.schema import Column, TableMeta
from statcurator.engines import get_engine
from statcurator.engines.base import TableSource
from statcurator.query.builder import col, count
from statcurator.query.catalog import DictCatalog, TableInfo
from statcurator.query.compiler import compile_query
from statcurator.query.sql import parse_sql

from .conftest import ENGINES, make_curator

META = TableMeta("t", (Column("name"), Column("x", type="real", bounds=(-10, 10)),
                       Column("i", type="integer", bounds=(-10, 10))))
SCHEMA = pa.schema([("name", pa.string()), ("x", pa.float64()), ("i", pa.int64())])
ROWS = [{"name": "a", "x": v, "i": i} for v, i in
        [(1.0, 0), (0.0, 1), (-0.0, -1), (math.nan, 0), (math.inf, 2), (-math.inf, 0),
         (None, None), (1e308, 0), (5e-324, 3), (-2.5, -2)]]
DIVISIONS = [
    "SELECT COUNT(*) AS n FROM t WHERE x / i > 0",
    "SELECT COUNT(*) AS n FROM t WHERE i / x < 1 OR i / i IS NULL",
    "SELECT SUM(CASE WHEN 1 / i > 0 THEN 1 ELSE 0 END) AS s FROM t",
    "SELECT WIDTH_BUCKET(x / i, -5, 5, 4) AS b, COUNT(*) AS n FROM t GROUP BY b",
]


def plan(sql: str):
    cat = DictCatalog({"t": TableInfo.from_schema("t", META, SCHEMA)})
    return compile_query(parse_sql(sql, cat), cat).engine_plan


def results(names, rows, sql, **options):
    out = []
    for name in names:
        eng = get_engine(name, **options.get(name, {}))
        eng.register("t", TableSource.from_arrow(pa.Table.from_pylist(rows, SCHEMA)))
        out.append(eng.execute(plan(sql), salt="ab").canonical())
    return out


@pytest.mark.parametrize("sql", DIVISIONS)
def test_division_by_zero_is_null_and_engines_agree(sql):
    memory, duckdb = results(("memory", "duckdb"), ROWS, sql)
    assert memory == duckdb


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bob_has_it", [False, True])
def test_a_zero_divisor_cannot_turn_an_attribute_into_an_error(engine, bob_has_it):
    table = pa.table({"name": ["Alice", "Bob"], "x": [1.0, 5.0 if bob_has_it else 1.0],
                      "i": [1, 1]})
    cur = make_curator(engine, table, META)
    sql = ("SELECT COUNT(*) AS n FROM t "
           "WHERE 1 / (CASE WHEN name = 'Bob' AND x = 5 THEN 0 ELSE 1 END) > 0")
    rel = cur.sql(sql).release(epsilon=1, analyst="eve")
    assert len(rel.rows()) == 1


@pytest.mark.parametrize("low, high, n", [(-1e308, 1e308, 10), (0, 1e304, 100_000),
                                          (0, math.inf, 3), (1, 1, 3), (2, 1, 3), (0, 1, 0),
                                          (0, 10**400, 2)],
                         ids=["doubles", "times-n", "inf", "empty", "reversed", "no-bucket",
                              "huge-int"])
def test_width_bucket_ranges_beyond_double_precision_are_refused(low, high, n):
    cat = DictCatalog({"t": TableInfo.from_schema("t", META, SCHEMA)})
    with pytest.raises(UnsupportedQueryError):
        parse_sql(f"SELECT WIDTH_BUCKET(x, {low!r}, {high!r}, {n}) AS b, COUNT(*) FROM t "
                  "GROUP BY b", cat)
    with pytest.raises(UnsupportedQueryError):
        col("x").width_bucket(low, high, n)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_widest_accepted_width_bucket_runs_on_every_row(engine):
    # the whole int64 range in 100000 buckets still fits; it must run on extreme data
    meta = TableMeta("t", (Column("x", type="real"),))
    table = pa.table({"x": [-1e308, -2.0**63, -1.0, 0.0, 2.0**63 - 1024, 1e308, math.nan,
                            math.inf, None]})
    cur = make_curator(engine, table, meta)
    for sql in ("SELECT WIDTH_BUCKET(x, -9223372036854775808, 9223372036854775807, 100000) "
                "AS b, COUNT(*) AS n FROM t GROUP BY b",
                "SELECT WIDTH_BUCKET(x, -1e300, 1e300, 100000) AS b, COUNT(*) AS n "
                "FROM t GROUP BY b"):
        cq = cur.sql(sql).compile()
        cur.engine.execute(cq.engine_plan, salt="00")
    built = cur.table("t").group_by(col("x").width_bucket(-1e300, 1e300, 7).alias("b"))
    built.agg(count().alias("n")).compile()


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.parametrize("sql", DIVISIONS)
def test_spark_divides_like_the_other_engines(spark_session, sql):
    memory, spark = results(("memory", "spark"), ROWS, sql,
                            spark={"spark": spark_session})
    assert memory == spark


@pytest.mark.parametrize("edges", [(0, math.nan, 10), (0, 10**400), (5,), (2**53, 2**53 + 1)],
                         ids=["nan", "huge-int", "one-edge", "equal-as-doubles"])
def test_bin_edges_that_engines_cannot_compare_are_refused(edges):
    with pytest.raises(UnsupportedQueryError):
        col("x").bin(list(edges))
    if not any(isinstance(v, float) and math.isnan(v) for v in edges):
        cat = DictCatalog({"t": TableInfo.from_schema("t", META, SCHEMA)})
        args = ", ".join(str(v) for v in edges)
        with pytest.raises(UnsupportedQueryError):
            parse_sql(f"SELECT BIN(x, {args}) AS b, COUNT(*) FROM t GROUP BY b", cat)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("sql", ["SELECT MEDIAN(x * 1e308) AS m FROM t",
                                 "SELECT MEDIAN(x / 1e300) AS m FROM t",
                                 "SELECT QUANTILE(x * 1e300 * 1e9, 0.5) AS m FROM t"])
def test_bounds_beyond_double_precision_are_refused_before_the_charge(engine, sql):
    # a quantile's sensitivity is a count, so nothing refused these bounds before the charge,
    # and the engine's clamp in double precision then failed: charged for no answer
    cur = make_curator(engine, pa.table({"name": ["a"], "x": [1.0], "i": [1]}), META)
    with pytest.raises(UnsupportedQueryError, match="double precision"):
        cur.sql(sql).release(epsilon=1, analyst="eve")
    assert cur.budget("eve", "t").spent.epsilon == 0


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) AS n FROM t WHERE x IN (9223372036854775807, 1)",
    "SELECT COUNT(*) AS n FROM t WHERE x >= 9223372036854775807 OR i = 2.5",
    "SELECT BIN(x, -1, 0, 9223372036854775807) AS b, COUNT(*) AS n FROM t GROUP BY b",
])
def test_the_reference_engine_compares_numbers_like_sql(sql):
    # SQL compares a BIGINT with a DOUBLE as doubles: 2.0^63 = 9223372036854775807
    rows = ROWS + [{"name": "b", "x": 2.0**63, "i": 0}]
    memory, duckdb = results(("memory", "duckdb"), rows, sql)
    assert memory == duckdb
