"""An exact aggregate too large for the noise arithmetic must be released, never refused.

Finding: an integer sum is handed to the mechanism as ``raw·2^-k`` in an int64 array. When
the true total did not fit (2^63), the release raised ``OverflowError`` (or the mechanism's
"too large" ``DataError``) *after* the engine ran — so whether a query fails depends on the
private data, with no noise at all. With a public constant of 2^64 in a CASE, one person's
attribute decides the error: a one-bit, noiseless answer for any ε. Honest queries hit it
too (an integer column with bounds of 10^18 and a hundred rows).

Fix (compiler ``_laplace`` and ``BoundQuery``): integer sums on a coarse quantization grid
2^k are released on that grid (the mechanism works on the engine's own small integers), and
every exact aggregate is clamped to the mechanisms' public domain (±2^61 grid units) before
the noise — a data-independent 1-Lipschitz map, so the sensitivity is unchanged.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from statcurator.core.schema import Column, TableMeta
from statcurator.query.relational import ExactResult
from statcurator.testing.dp import check_dp

from .conftest import ENGINES, make_curator

META = TableMeta("t", (Column("name"), Column("x", type="integer", bounds=(0, 10)),
                       Column("sex", categories=("F", "M"))))
PROBE = ("SELECT SUM(CASE WHEN name = 'Bob' AND x = 5 THEN 18446744073709551616 ELSE 0 END) "
         "AS s FROM t")


def people(bob_x: int) -> pa.Table:
    return pa.table({"name": ["Alice", "Bob", "Carol"], "x": [1, bob_x, 2],
                     "sex": ["F", "M", "F"]})


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("bob_x", [1, 5])
def test_a_huge_constant_cannot_turn_an_attribute_into_an_error(engine, bob_x):
    cur = make_curator(engine, people(bob_x), META)
    for sql in (PROBE, PROBE.replace("AS s FROM t", "AS s FROM t GROUP BY sex")):
        rel = cur.sql(sql).release(epsilon=1, analyst="eve")
        for row in rel.rows():
            assert row["s_low"] <= row["s"] <= row["s_high"]
        assert rel.table.num_rows == len(rel.rows())  # the Arrow table builds as well


@pytest.mark.parametrize("engine", ENGINES)
def test_the_probe_is_differentially_private(engine):
    def sampler(bob_x):
        cur = make_curator(engine, people(bob_x), META)
        q = cur.sql(PROBE)
        bound = q.bind(1)
        exact = cur.engine.execute(q.compile().engine_plan, salt="5eed")
        return lambda n: np.array([float(a.point(q.plan.outputs[0].expr, 0))
                                   for a in bound.noise_many(exact, n)])

    assert check_dp(sampler(5), sampler(1), 1, trials=20_000).passed


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("grouped", [False, True])
def test_an_honest_sum_beyond_int64_is_released(engine, grouped):
    # an integer column with public bounds of 10^18: 100 rows at the top sum to 10^20 > 2^63
    meta = TableMeta("t", (Column("x", type="integer", bounds=(0, 10**18)),
                           Column("sex", categories=("F", "M"))))
    table = pa.table({"x": pa.array([10**18] * 100, pa.int64()), "sex": ["F"] * 100})
    cur = make_curator(engine, table, meta)
    sql = "SELECT sex, SUM(x) AS s FROM t GROUP BY sex" if grouped else "SELECT SUM(x) AS s FROM t"
    rel = cur.sql(sql).release(epsilon=1, analyst="eve", alpha=1e-9)
    row = rel.rows()[0]
    assert row["s_low"] <= 10**20 <= row["s_high"]
    assert abs(row["s"] - 10**20) < 10**20 / 4  # 25 noise scales: P = e^-25


@pytest.mark.parametrize("grouped", [False, True])
def test_any_exact_aggregate_is_noised_without_error(grouped):
    # whatever an engine returns (here a count of 2^100, and a sum of -2^100 grid steps), the
    # noise step is total: it cannot fail for some data and succeed for other data
    meta = TableMeta("t", (Column("x", type="real", bounds=(-1, 1)),
                           Column("sex", categories=("F", "M"))))
    cur = make_curator("memory", pa.table({"x": [0.5], "sex": ["F"]}), meta)
    sql = "SELECT COUNT(*) AS n, SUM(x) AS s FROM t" + (" GROUP BY sex" if grouped else "")
    bound = cur.sql(sql).bind(1)
    keys = [("F",), ("M",)] if grouped else [()]
    exact = ExactResult(("sex",) if grouped else (), {k: (2**100, -(2**100)) for k in keys})
    for answer in bound.noise_many(exact, 3):
        names, rows, _ = answer.rows()
        for r in rows:
            values = dict(zip(names, r, strict=True))
            assert 2**60 < values["n"] <= 2**62 and values["s"] < 0
