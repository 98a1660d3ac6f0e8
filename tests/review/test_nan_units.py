"""A NaN person id is treated alike on every engine (since the 2026-11-26 review: as no
person at all, its rows dropped, see test_null_units.py).

Finding: the memory (reference) engine partitioned rows by Python equality, under which
every NaN is different from every other: ten rows with a NaN person id were ten persons of
one row each, so contribution bounding (``max_rows = 1``) let all ten through, and removing
"the NaN person" (all of them, under the neighbour relation and in DuckDB) moved COUNT(*) by
10 where the sensitivity is 1. A float id column with missing values (pandas turns missing
integers into NaN) is an ordinary way to get there. NaN group keys were likewise split into
one group per row. The memory engine now canonicalizes NaN keys and units, as SQL does.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pytest

from statcurator.core.schema import Column, PrivacyUnit, TableMeta

from .conftest import ENGINES, make_curator

META = TableMeta("t", (Column("pid", type="real"), Column("x", type="real", bounds=(0, 10))),
                 privacy_unit=PrivacyUnit("pid", max_rows=1))


def exact(engine, pids, sql, xs=None):
    table = pa.table({"pid": pa.array(pids, pa.float64()),
                      "x": pa.array(xs or [1.0] * len(pids), pa.float64())})
    cur = make_curator(engine, table, META)
    cq = cur.sql(sql).compile()
    return cq, cur.engine.execute(cq.engine_plan, salt="ab").groups


@pytest.mark.parametrize("engine", ENGINES)
def test_removing_the_nan_person_moves_a_count_by_its_sensitivity(engine):
    sql = "SELECT COUNT(*) AS n, COUNT(DISTINCT pid) AS u FROM t"
    cq, with_nan = exact(engine, [math.nan] * 10 + [1.0], sql)
    _, without = exact(engine, [1.0], sql)
    for i, m in enumerate(cq.measures):
        assert abs(with_nan[()][i] - without[()][i]) <= m.sensitivity


@pytest.mark.parametrize("engine", ENGINES)
def test_nan_keys_form_one_group(engine):
    _, groups = exact(engine, [1.0, 2.0, 3.0], "SELECT x / 0 AS g, COUNT(*) AS n FROM t GROUP BY g")
    assert len(groups) == 1                      # x / 0 is NULL: one NULL group
    _, groups = exact(engine, [1.0, 2.0, 3.0], "SELECT x AS g, COUNT(*) AS n FROM t GROUP BY g",
                      xs=[math.nan, math.nan, 5.0])
    assert sorted(n for n, *_ in groups.values()) == [1, 2]   # NaN (one group) and 5.0
    _, groups = exact(engine, [math.nan, math.nan, 5.0],
                      "SELECT pid AS g, COUNT(*) AS n FROM t GROUP BY g")
    assert sorted(n for n, *_ in groups.values()) == [1]      # NaN ids are no person
