"""The compiler types every column as the engine reads it (findings of the 2026-11-26 review).

Finding 1: a pandas Categorical of integers (an Arrow dictionary of int64) was typed as text
by the compiler, while DuckDB reads it as BIGINT. ``WHERE zone = code`` (or ``= CASE WHEN
<condition on a person> THEN 'x' ELSE '10' END``) then passed the analysis, and DuckDB
converted the text to an integer as it ran, only on the rows that reached the comparison:
the query failed exactly when some row held a value that does not convert — a yes/no answer
about the data at any ε, with no noise. Now a dictionary column has its values' kind, and
registration refuses a table whose columns the engine reads with other kinds than the
compiler's.

Finding 2: columns of no supported kind (dates, times, structs, lists, bytes) passed the
analysis where left undeclared: GROUP BY a struct failed after the charge only when a row
matched (Python cannot hash a dict), and two such columns compared bound in the compiler
but not in DuckDB (an error after the charge). Now no query may use them.

Each test runs the attack on two neighbouring tables; each control shows the attack would
tell them apart without the fix.
"""

from __future__ import annotations

import warnings

import pandas as pd
import pyarrow as pa
import pytest

from statcurator.core.errors import DataError, UnsupportedQueryError
from statcurator.core.schema import Column, TableMeta
from statcurator.curator import Curator
from statcurator.query import catalog as catalog_module

META = TableMeta("t", (Column("zone", type="integer", bounds=(0, 100)), Column("code"),
                       Column("age", type="integer", bounds=(0, 120))))
ORACLE = "SELECT COUNT(*) AS n FROM t WHERE zone = CASE WHEN age = 99 THEN 'x' ELSE '10' END"


def categorical_table(last_age: int) -> pd.DataFrame:
    df = pd.DataFrame({"zone": [10, 20, 10, 20, 30], "code": ["1", "2", "3", "4", "5"],
                       "age": [30, 40, 50, 60, last_age]})
    df["zone"] = df["zone"].astype("category")
    return df


def outcome(table: object, sql: str, meta: TableMeta = META) -> str:
    """What the analyst sees, and whether anything was charged."""
    cur = Curator(default_budget=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cur.register("t", table, meta)
    cur.set_dataset_budget("t", epsilon=10, delta=1e-3)
    cur.set_budget("eve", "t", epsilon=10, delta=1e-3)
    try:
        cur.sql(sql).release(epsilon=0.001, delta=1e-9, analyst="eve")
        seen = "answer"
    except Exception as e:  # noqa: BLE001 - the exception is what the attack observes
        seen = type(e).__name__
    return f"{seen}, charged {cur.budget('eve', 't').spent.epsilon}"


def test_an_integer_categorical_is_an_integer_to_the_compiler() -> None:
    for last_age in (70, 99):   # the person of age 99 absent, then present
        assert outcome(categorical_table(last_age), ORACLE) == "UnsupportedQueryError, charged 0"


def test_control_typed_as_text_the_categorical_answers_the_question(monkeypatch) -> None:
    plain = catalog_module.arrow_kind

    def as_before(t):  # the former rule: every dictionary is text
        import pyarrow.types as pt
        return "string" if pt.is_dictionary(t) else plain(t)

    monkeypatch.setattr(catalog_module, "arrow_kind", as_before)
    monkeypatch.setattr("statcurator.curator._check_kinds", lambda engine, name, info: info)
    assert outcome(categorical_table(70), ORACLE) == "answer, charged 1/1000"
    assert outcome(categorical_table(99), ORACLE) == "EngineError, charged 1/1000"


def test_registration_refuses_kinds_the_engine_reads_otherwise(monkeypatch) -> None:
    """Defence in depth: whatever the schema says, the engine's own reading must agree."""
    from statcurator.engines.duckdb import DuckDBEngine

    table = pa.table({"zone": [10, 20], "code": ["1", "2"], "age": [1, 2]})
    cur = Curator()
    monkeypatch.setattr(DuckDBEngine, "column_kinds",
                        lambda self, name: {"zone": "string", "code": "string", "age": "real"})
    with pytest.raises(DataError, match="'zone' \\(integer from the data's schema, string in "
                                        "the engine\\)"):
        cur.register("t", table, META)
    assert "t" not in cur.engine.tables and "t" not in cur.catalog.tables
    monkeypatch.undo()                       # control: the engine's real reading agrees
    cur.register("t", table, META)
    assert cur.engine.column_kinds("t") == {"zone": "integer", "code": "string",
                                           "age": "integer"}


def nested_table(last_age: int) -> pa.Table:
    return pa.table({"zone": [10, 20, 30], "code": ["1", "2", "3"], "age": [30, 40, last_age],
                     "tags": pa.array([{"k": 1}] * 3, pa.struct([("k", pa.int64())])),
                     "day": pa.array([1, 2, 3], pa.int32()).cast(pa.date32())})


@pytest.mark.parametrize("sql", [
    "SELECT tags, COUNT(*) AS n FROM t WHERE age = 99 GROUP BY tags",
    "SELECT COUNT(*) AS n FROM t WHERE day = day",
    "SELECT COUNT(tags) AS n FROM t",
    "SELECT COUNT(*) AS n FROM t WHERE day IS NULL",
])
def test_columns_of_no_supported_kind_are_refused_before_the_charge(sql: str) -> None:
    for last_age in (70, 99):
        assert outcome(nested_table(last_age), sql) == "UnsupportedQueryError, charged 0"


def test_control_a_struct_group_key_answers_the_question(monkeypatch) -> None:
    plain = catalog_module.TableInfo.kind
    monkeypatch.setattr(catalog_module.TableInfo, "kind",
                        lambda self, c: "string" if c == "tags" else plain(self, c))
    sql = "SELECT tags, COUNT(*) AS n FROM t WHERE age = 99 GROUP BY tags"
    assert outcome(nested_table(70), sql).startswith("answer")
    assert outcome(nested_table(99), sql).startswith("TypeError")


def test_the_refusal_names_the_remedy() -> None:
    cur = Curator()
    cur.register("t", nested_table(70), META)
    with pytest.raises(UnsupportedQueryError, match="'day' has a type queries cannot use.*"
                                                    "convert it in the data"):
        cur.sql("SELECT COUNT(*) AS n FROM t WHERE day IS NULL").cost(epsilon=1)


def test_a_column_the_engine_reads_as_no_query_kind_becomes_unusable(monkeypatch) -> None:
    """helper-34: a DuckDB file's unused UUID column (text to Arrow, UUID to DuckDB) made
    the whole table refused; it is now a column no query may use, and the table registers."""
    from statcurator.engines.duckdb import DuckDBEngine

    plain = DuckDBEngine.column_kinds
    monkeypatch.setattr(DuckDBEngine, "column_kinds",
                        lambda self, name: {**plain(self, name), "code": "other"})
    cur = Curator()
    info = cur.register("t", pa.table({"zone": [10, 20], "code": ["1", "2"], "age": [1, 2]}),
                        META)
    assert info.kinds["code"] == "other" and cur.catalog.table_info("t").kinds["age"] == "integer"
    with pytest.raises(UnsupportedQueryError, match="'code' has a type queries cannot use"):
        cur.sql("SELECT COUNT(*) AS n FROM t WHERE code = '1'").cost(epsilon=1)
    cur.sql("SELECT COUNT(*) AS n FROM t WHERE age > 1").cost(epsilon=1)


def test_a_unit_id_of_any_type_is_still_bounded() -> None:
    """helper-34: refusing kind ``other`` in queries also refused every query on a table
    whose person id is BLOB or UUID-like bytes, though the id is only partitioned on and
    hashed as text."""
    from statcurator.core.schema import PrivacyUnit

    meta = TableMeta("t", (Column("pid"), Column("sex", categories=("F", "M"))),
                     privacy_unit=PrivacyUnit("pid", max_rows=1))
    ids = pa.array([b"a", b"b", b"b", None], pa.binary())
    cur = Curator(default_budget=None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cur.register("t", pa.table({"pid": ids, "sex": ["F", "M", "M", "F"]}), meta)
    cq = cur.sql("SELECT sex, COUNT(*) AS n FROM t GROUP BY sex").compile()
    groups = cur.engine.execute(cq.engine_plan, salt="ab").groups
    assert sum(v[0] for v in groups.values()) == 2    # one row per id; the NULL id unread


def test_a_refused_registration_leaves_no_stale_query(monkeypatch) -> None:
    """A query compiled for the table before a refused re-registration must not run (the
    engine's table is gone: it would fail after its charge)."""
    from statcurator.engines.duckdb import DuckDBEngine

    cur = Curator()
    table = pa.table({"zone": [10, 20], "code": ["1", "2"], "age": [1, 2]})
    cur.register("t", table, META)
    q = cur.sql("SELECT COUNT(*) AS n FROM t")
    q.release(epsilon=0.1)
    monkeypatch.setattr(DuckDBEngine, "column_kinds",
                        lambda self, name: {"zone": "string", "code": "string", "age": "integer"})
    with pytest.raises(DataError):
        cur.register("t", table, META)
    with pytest.raises(UnsupportedQueryError, match="no registered table 't'"):
        q.release(epsilon=0.1)
    assert len(cur.ledger.charges()) == 1
