"""Join stability and public key sets must follow the engines' SQL equality, not Arrow's bits.

Findings:

* The stability of a join (rows one private row meets) was the largest group of the public
  join key as Arrow groups it — by bits. SQL engines join by value: ``-0.0 = 0.0``, and a
  BIGINT compared with a DOUBLE is compared as a double, where 2^60 .. 2^60 + 63 are all equal.
  One private row then met 2 (or 64) public rows while the sensitivity assumed 1.
* A public key set could list one group twice (``0.0`` and ``-0.0`` from a public column, or
  categories ``"1"`` and ``1`` of a string column, both ``'1'``): the same group's exact
  aggregate was released twice with independent noise, at the cost of one.

Fixes: ``TableInfo.max_multiplicity`` groups keys as the engines compare them (as doubles
where either side is real, ``-0.0`` normalized), and ``rewrite.public_key_sets`` removes keys
that are equal in SQL.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from statcurator.core.schema import Column, TableMeta

from .conftest import ENGINES, make_curator

REAL = TableMeta("t", (Column("x", type="real"),))
INTEGER = TableMeta("t", (Column("x", type="integer"),))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("meta, x, keys", [
    (REAL, 0.0, pa.array([0.0, -0.0])),
    (REAL, float(2**53), pa.array([2**53, 2**53 + 1], pa.int64())),
    (REAL, float(2**60), pa.array(range(2**60, 2**60 + 64), pa.int64())),
    (INTEGER, 2**60, pa.array([float(2**60), float(2**60)])),
])
def test_one_private_row_moves_a_joined_count_by_at_most_its_sensitivity(engine, meta, x, keys):
    # neighbours: the empty table and the table with one row
    one = pa.table({"x": pa.array([x], pa.float64() if meta is REAL else pa.int64())})
    cur = make_curator(engine, one, meta)
    cur.register_public("p", pa.table({"k": keys, "tag": [str(i) for i in range(len(keys))]}))
    for sql in ("SELECT COUNT(*) AS n FROM t JOIN p ON t.x = p.k",
                "SELECT COUNT(*) AS n FROM t LEFT JOIN p ON t.x = p.k"):
        cq = cur.sql(sql).compile()
        moved = cur.engine.execute(cq.engine_plan, salt="00").groups[()][0]
        assert moved <= cq.measures[0].sensitivity, (sql, moved, cq.measures[0].sensitivity)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_public_column_lists_each_group_once(engine):
    cur = make_curator(engine, pa.table({"city": ["a", "b"]}), TableMeta("t", (Column("city"),)))
    cur.register_public("p", pa.table({"city": ["a", "b"], "v": [0.0, -0.0]}))
    q = cur.sql("SELECT p.v AS v, COUNT(*) AS n FROM t JOIN p ON t.city = p.city GROUP BY p.v")
    rel = q.release(epsilon=1, analyst="eve")
    assert [r["v"] for r in rel.rows()] == [0.0]       # one group, one noisy release
    assert q.compile().key_sets == ((0.0,),)


@pytest.mark.parametrize("engine", ENGINES)
def test_categories_equal_after_coercion_are_one_group(engine):
    meta = TableMeta("t", (Column("code", categories=("1", 1, "2")),))
    cur = make_curator(engine, pa.table({"code": ["1", "1", "2"]}), meta)
    rel = cur.sql("SELECT code, COUNT(*) AS n FROM t GROUP BY code").release(
        epsilon=1, analyst="eve")
    assert [r["code"] for r in rel.rows()] == ["1", "2"]


@pytest.mark.parametrize("x, keys", [
    (float(2**53), pa.array([2**53, 2**53 + 1, 7], pa.int64())),
    (0.0, pa.array([-0.0, 0.0, 1.0])),
    (float("nan"), pa.array([float("nan"), 1.0, float("nan")])),
])
def test_the_reference_engine_joins_like_duckdb(x, keys):
    # the memory engine is the oracle of the parity and sensitivity tests: it must not join
    # fewer rows than DuckDB does (it compared 2^53 with 2^53 + 1 exactly, and NaN never)
    counts = []
    for engine in ENGINES:
        cur = make_curator(engine, pa.table({"x": pa.array([x, 1.0])}), REAL)
        cur.register_public("p", pa.table({"k": keys}))
        cq = cur.sql("SELECT COUNT(*) AS n FROM t JOIN p ON t.x = p.k").compile()
        counts.append(cur.engine.execute(cq.engine_plan, salt="00").groups[()][0])
    assert counts[0] == counts[1]
