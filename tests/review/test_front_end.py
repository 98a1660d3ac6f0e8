"""Every clause the plan would ignore is refused, so the released answer is the one asked for.

Finding: ``FROM t TABLESAMPLE 10%``, ``USING SAMPLE``, ``PIVOT``/``UNPIVOT``, time travel and
other table or SELECT modifiers parsed, were dropped by the plan, and the query then ran on
the whole table: the analyst was charged for an answer to another question. (No extra
privacy loss — the answer is still a DP aggregate — but silently wrong.) They are refused by
name now; the known row-level escapes stay refused.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from statcurator.core.errors import UnsupportedQueryError
from statcurator.core.schema import Column, TableMeta

from .conftest import make_curator

META = TableMeta("t", (Column("name"), Column("age", type="integer", bounds=(0, 120)),
                       Column("sex", categories=("F", "M"))))


@pytest.fixture
def cur():
    c = make_curator("duckdb", pa.table({"name": ["Bob"], "age": [30], "sex": ["M"]}), META)
    c.register_public("p", pa.table({"name": ["Bob"], "k": [1]}))
    return c


@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t TABLESAMPLE 10%",
    "SELECT COUNT(*) FROM t USING SAMPLE 10%",
    "SELECT COUNT(*) FROM t PIVOT (SUM(age) FOR sex IN ('F'))",
    "SELECT COUNT(*) FROM t UNPIVOT (v FOR k IN (age))",
    "SELECT COUNT(*) FROM t AS x(a, b, c)",
    "SELECT COUNT(*) FROM t JOIN p TABLESAMPLE 1 ROWS ON t.name = p.name",
    # the row-level escapes stay closed
    "SELECT LIST(age) FROM t", "SELECT ANY_VALUE(name) FROM t", "SELECT MIN(name) FROM t",
    "SELECT COUNT(*) FROM (SELECT * FROM t) s", "SELECT sex, COUNT(*) FROM t GROUP BY sex LIMIT x",
    "SELECT sex, COUNT(*) FROM t GROUP BY sex LIMIT 10 PERCENT",
    "SELECT sex, COUNT(*) FROM t GROUP BY sex ORDER BY name",
])
def test_ignored_or_row_level_clauses_are_refused(cur, sql):
    with pytest.raises(UnsupportedQueryError):
        cur.sql(sql).release(epsilon=1, analyst="eve")
    assert cur.budget("eve", "t").spent.epsilon == 0
