"""The Curator: the classic examples, the release object, dry runs, and the ledger path
(debit before release, refusals touch nothing, replays are free, crashes keep the charge)."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.accounting import AnswerLostError, Ledger, NoBudgetError
from statcurator.core.errors import (
    BudgetExceededError,
    DataError,
    MetadataError,
    UnsupportedQueryError,
)
from statcurator.core.measures import ApproxDP, PureDP
from statcurator.core.schema import Column, TableMeta
from statcurator.curator import DEFAULT_BUDGET, Curator
from statcurator.mechanisms import epsilon_for_accuracy
from statcurator.query.builder import avg, col, count
from statcurator.query.release import Release

from .conftest import DIABETES_META, SpyEngine

COUNT_Y = "SELECT COUNT(*) AS n FROM diabetes WHERE Diabetes = 'Y'"


@pytest.fixture
def cur(diabetes_csv, spy):
    c = Curator(engine=spy, default_budget=PureDP(10))
    c.register("diabetes", diabetes_csv, DIABETES_META)
    return c


# -- the classic examples -------------------------------------------------------------------

def test_diabetes_count_sensitivity_one_and_release(cur, spy):
    q = cur.sql(COUNT_Y)
    assert [m.sensitivity for m in q.compile().measures] == [1]
    assert q.cost(epsilon=Fraction(1, 2)) == PureDP(Fraction(1, 2))
    assert spy.calls == 0  # dry runs touch nothing
    rel = q.release(epsilon=Fraction(1, 2), analyst="alice")
    assert spy.calls == 1
    (row,) = rel.rows()
    assert isinstance(row["n"], int)
    assert row["n_low"] == row["n"] - q.accuracy(epsilon=Fraction(1, 2))[0]["halfwidth"]
    assert rel.mechanisms["n"][0]["mechanism"] == "laplace"
    assert rel.mechanisms["n"][0]["scale"] == 2
    assert cur.budget("alice", "diabetes").spent == PureDP(Fraction(1, 2))


def test_histogram_sensitivity(diabetes_csv):
    sql = "SELECT Diabetes, COUNT(*) AS n FROM diabetes GROUP BY Diabetes"
    for neighbours, expected in (("unbounded", 1), ("bounded", 2)):
        c = Curator()
        c.register("diabetes", diabetes_csv, DIABETES_META.replace(neighbours=neighbours))
        q = c.sql(sql)
        assert q.compile().measures[0].sensitivity == expected
        assert q.bind(1).infos[0].scale == expected
        rel = q.release(epsilon=1)
        assert [r["Diabetes"] for r in rel.rows()] == ["Y", "N"]  # every public key, in order


def test_average_height():
    rng = np.random.default_rng(7)
    heights = np.clip(rng.normal(170, 10, 2000), 100, 250)
    heights[0] = 10_000.0  # an outlier: clamped to the declared bound, never seen as is
    heights[1] = float("nan")  # contributes nothing
    meta = TableMeta("people", (Column("height", type="real", bounds=(100, 250)),))
    c = Curator(default_budget=PureDP(10))
    c.register("people", pa.table({"height": heights}), meta)
    q = c.sql("SELECT AVG(height) AS h FROM people")
    measures = q.compile().measures
    assert [m.label for m in measures] == ["h: count", "h: centred sum"]
    assert [m.sensitivity for m in measures] == [1, 75]  # (250 - 100) / 2 around the midpoint
    # the interval at α = 1e-6 covers the clamped mean but once in a million runs (it used to
    # be a 95% interval: the test failed in about 3% of runs)
    rel = q.release(epsilon=1, alpha=1e-6)
    (row,) = rel.rows()
    true_mean = float(np.mean(np.clip(heights[~np.isnan(heights)], 100, 250)))
    assert row["h_low"] <= true_mean <= row["h_high"]
    assert abs(row["h"] - true_mean) < 2
    assert [m["epsilon"] for m in rel.mechanisms["h"]] == [Fraction(1, 2), Fraction(1, 2)]


def test_composition_of_q_queries_costs_q_epsilon(cur):
    for i in range(10):
        cur.sql(COUNT_Y).release(epsilon=Fraction(1, 10), analyst="bob", request_id=f"b{i}")
    st = cur.budget("bob", "diabetes")
    assert st.spent == PureDP(1)  # exactly 10 × 0.1
    assert len(cur.ledger.charges("bob")) == 10


# -- the release ----------------------------------------------------------------------------

def test_release_table_and_renderings(cur):
    rel = cur.sql("SELECT Gender, COUNT(*) AS n, AVG(Age) AS a FROM diabetes GROUP BY Gender "
                  "ORDER BY Gender").release(epsilon=1)
    assert rel.table.column_names == ["Gender", "n", "n_low", "n_high", "a", "a_low", "a_high"]
    assert rel.table.schema.field("n").type == pa.int64()
    assert rel.to_pandas().shape == (2, 7)
    assert rel.to_polars().shape == (2, 7)
    assert [r["Gender"] for r in rel.rows()] == ["F", "M"]
    text = str(rel)
    assert "DP release" in text and "a: centred sum" in text and "ε=1" in text
    assert "<table>" in rel._repr_html_()
    again = Release.from_json(rel.to_json())
    assert again.rows() == rel.rows() and again.cost == rel.cost
    assert rel.provenance["dataset"] == "diabetes" and rel.provenance["engine"] == "duckdb"
    assert "salt" not in json.dumps(rel.to_dict())


def test_having_and_order_are_post_processing(cur):
    q = cur.sql("SELECT Gender, COUNT(*) AS n FROM diabetes GROUP BY Gender "
                "HAVING n > -1000 ORDER BY n DESC")
    assert q.cost(1) == PureDP(1)
    rel = q.release(epsilon=1)
    ns = [r["n"] for r in rel.rows()]
    assert ns == sorted(ns, reverse=True)
    none = cur.sql("SELECT Gender, COUNT(*) AS n FROM diabetes GROUP BY Gender HAVING n > 1e9")
    assert none.release(epsilon=1).rows() == []


def test_builder_query_through_the_curator(cur):
    q = (cur.table("diabetes").filter(col("Age") >= 20).group_by("Gender")
         .agg(count().alias("n"), avg("Age").alias("a")))
    assert q.plan == cur.sql("SELECT Gender, COUNT(*) AS n, AVG(Age) AS a FROM diabetes "
                             "WHERE Age >= 20 GROUP BY Gender").plan
    rel = q.having(col("n") > -100).sort("Gender").release(epsilon=1)
    assert [r["Gender"] for r in rel.rows()] == ["F", "M"]


def test_partition_selection_release(cur):
    q = cur.sql("SELECT Age, COUNT(*) AS n FROM diabetes GROUP BY Age")
    with pytest.raises(UnsupportedQueryError, match="needs δ"):
        q.cost(1)
    assert q.cost(1, delta=1e-6) == ApproxDP(1, Fraction(1, 10**6))
    cur.set_budget("carol", "diabetes", ApproxDP(5, 1e-5))
    # four people, one per age: no age clears the threshold. Each survives with probability
    # at most δ, so δ = 1e-9 keeps the false-failure rate below 4e-9
    rel = q.release(epsilon=1, delta=1e-9, analyst="carol")
    assert rel.rows() == []
    assert rel.mechanisms["(groups)"][0]["threshold"] > 10


# -- dry runs -------------------------------------------------------------------------------

def test_accuracy_and_epsilon_for(cur, spy):
    q = cur.sql(COUNT_Y)
    eps = q.epsilon_for(10, alpha=0.05)
    assert eps == epsilon_for_accuracy(10, alpha=0.05)
    assert q.accuracy(epsilon=eps, alpha=0.05)[0]["halfwidth"] <= 10
    assert q.accuracy(epsilon=eps * Fraction(99, 100), alpha=0.05)[0]["halfwidth"] > 10
    two = cur.sql("SELECT COUNT(*) AS n, SUM(Age) AS s FROM diabetes")
    e2 = two.epsilon_for(600)
    assert max(a["halfwidth"] for a in two.accuracy(e2)) <= 600
    assert spy.calls == 0 and cur.ledger.charges() == []


def test_epsilon_for_mean_needs_rows(cur):
    q = cur.sql("SELECT AVG(Age) FROM diabetes")
    with pytest.raises(UnsupportedQueryError, match="rows="):
        q.epsilon_for(1)
    eps = q.epsilon_for(1, rows=10_000)
    assert q.accuracy(eps, rows=10_000)[0]["halfwidth"] <= 1


def test_explain_shows_plan_sql_and_split(cur):
    text = cur.sql("SELECT Gender, AVG(Age) FROM diabetes GROUP BY Gender").explain(epsilon=1)
    assert "engine SQL (duckdb" in text and "WHEN Age < 0 THEN 0 WHEN Age > 120 THEN 120" in text.replace('"diabetes".', "").replace('"Age"', "Age")
    assert "ε split" in text and "centred sum" in text


def test_metadata_only_registration_allows_dry_runs_only():
    c = Curator()
    c.register("diabetes", None, DIABETES_META)
    q = c.sql(COUNT_Y)
    assert q.cost(1) == PureDP(1)
    with pytest.raises(DataError, match="dry runs only"):
        q.release(epsilon=1)
    assert c.ledger.charges() == []


# -- the ledger path ------------------------------------------------------------------------

def test_over_budget_is_refused_before_data_is_touched(cur, spy):
    cur.set_budget("dave", "diabetes", PureDP(Fraction(1, 2)))
    with pytest.raises(BudgetExceededError):
        cur.sql(COUNT_Y).release(epsilon=1, analyst="dave")
    assert spy.calls == 0
    assert cur.ledger.charges("dave") == []
    assert cur.budget("dave", "diabetes").spent == PureDP(0)


@pytest.mark.parametrize("sql, kwargs", [
    ("SELECT Age FROM diabetes", {}),
    ("SELECT SUM(Name) FROM diabetes", {}),
    ("SELECT Age, COUNT(*) FROM diabetes GROUP BY Age", {}),  # needs δ
    (COUNT_Y, {"epsilon": -1}),
    (COUNT_Y, {"epsilon": float("nan")}),
])
def test_refused_queries_touch_nothing_and_cost_nothing(cur, spy, sql, kwargs):
    with pytest.raises(sc.StatcuratorError):
        cur.sql(sql).release(**{"epsilon": 1, **kwargs}, analyst="erin")
    assert spy.calls == 0
    assert cur.ledger.charges() == []


def test_default_budget_policy(diabetes_csv):
    c = Curator()
    c.register("diabetes", diabetes_csv, DIABETES_META)
    assert c.budget("frank", "diabetes").total == DEFAULT_BUDGET
    strict = Curator(default_budget=None)
    strict.register("diabetes", diabetes_csv, DIABETES_META)
    with pytest.raises(NoBudgetError):
        strict.sql(COUNT_Y).release(epsilon=0.1, analyst="frank")


def test_replay_returns_the_stored_answer_for_free(cur, spy):
    q = cur.sql(COUNT_Y)
    first = q.release(epsilon=1, analyst="gina", request_id="req-1")
    second = q.release(epsilon=1, analyst="gina", request_id="req-1")
    assert second.replayed and not first.replayed
    assert second.rows() == first.rows()
    assert spy.calls == 1  # the replay never reached the engine: no fresh noise
    assert cur.budget("gina", "diabetes").spent == PureDP(1)


def test_a_crash_after_the_charge_keeps_the_charge(diabetes_csv, tmp_path):
    path = tmp_path / "curator.ledger.db"
    crashing = Curator(engine=SpyEngine(fail=True), ledger=path)
    crashing.register("diabetes", diabetes_csv, DIABETES_META, budget=PureDP(10))
    crashing.set_budget("hal", "diabetes", PureDP(5))
    with pytest.raises(RuntimeError, match="crashed"):
        crashing.sql(COUNT_Y).release(epsilon=1, analyst="hal", request_id="boom")
    crashing.close()
    # a new curator on the same ledger: the charge is there, and the id gives no free answer
    fresh = Curator(ledger=path)
    fresh.register("diabetes", diabetes_csv, DIABETES_META)    # the ledger keeps its budget
    assert fresh.budget("hal", "diabetes").spent == PureDP(1)
    with pytest.raises(AnswerLostError):
        fresh.sql(COUNT_Y).release(epsilon=1, analyst="hal", request_id="boom")
    assert fresh.budget("hal", "diabetes").spent == PureDP(1)
    fresh.close()


def test_persistent_ledger_across_curators(diabetes_csv, tmp_path):
    path = tmp_path / "c.ledger.db"
    for i in range(2):
        c = Curator(ledger=str(path))
        c.register("diabetes", diabetes_csv, DIABETES_META, budget=PureDP(10))
        if i == 0:
            c.set_budget("ivy", "diabetes", PureDP(1))
        c.sql(COUNT_Y).release(epsilon=Fraction(1, 2), analyst="ivy")
        c.close()
    c = Curator(ledger=Ledger(str(path)))
    c.register("diabetes", diabetes_csv, DIABETES_META)
    with pytest.raises(BudgetExceededError):
        c.sql(COUNT_Y).release(epsilon=Fraction(1, 100), analyst="ivy")
    c.close()


# -- data sources ---------------------------------------------------------------------------

SOURCE_SQL = "SELECT Gender, COUNT(*) AS n, SUM(Age) AS s, MEDIAN(Age) AS m FROM diabetes GROUP BY Gender"


def _exact(c, sql):
    q = c.sql(sql)
    return c.engine.execute(q.compile().engine_plan, salt="1").canonical()


def test_files_are_read_in_place_and_agree(diabetes_csv, tmp_path):
    import duckdb
    import pyarrow.parquet as pq

    from statcurator.io.tables import read_table

    table = read_table(diabetes_csv, meta=DIABETES_META)
    pq.write_table(table, tmp_path / "d.parquet")
    con = duckdb.connect(str(tmp_path / "d.duckdb"))
    con.register("src", table)
    con.execute("CREATE TABLE diabetes AS SELECT * FROM src")
    con.close()
    reference = Curator(engine="memory")
    reference.register("diabetes", table, DIABETES_META)
    expected = _exact(reference, SOURCE_SQL)
    for data in (diabetes_csv, tmp_path / "d.parquet", tmp_path / "d.duckdb",
                 f"{tmp_path / 'd.duckdb'}:diabetes", table, table.to_pandas()):
        c = Curator()
        c.register("diabetes", data, DIABETES_META)
        assert _exact(c, SOURCE_SQL) == expected, data


def test_pandas_and_polars_frames(diabetes_csv):
    import polars as pl

    from statcurator.io.tables import read_table

    table = read_table(diabetes_csv, meta=DIABETES_META)
    for frame in (table.to_pandas(), pl.from_arrow(table)):
        c = Curator()
        c.register("diabetes", frame, DIABETES_META)
        assert c.sql(COUNT_Y).release(epsilon=1).rows()[0]["n"] is not None


def test_metadata_must_match_the_data(diabetes_csv):
    bad = DIABETES_META.replace(columns=DIABETES_META.columns + (Column("Weight", type="real"),))
    with pytest.raises(MetadataError, match="Weight"):
        Curator().register("diabetes", diabetes_csv, bad)


def test_bundled_adult_and_public_join():
    c = Curator(default_budget=PureDP(10))
    c.register("adult", "adult")
    c.register_public("continents", {"country": ["United-States", "Mexico", "Germany"],
                                     "continent": ["America", "America", "Europe"]})
    q = c.sql('SELECT p.continent, COUNT(*) AS n FROM adult a JOIN continents p '
              'ON a."native-country" = p.country GROUP BY p.continent')
    assert q.compile().key_sets == (("America", "Europe"),)
    rel = q.release(epsilon=1)
    assert [r["continent"] for r in rel.rows()] == ["America", "Europe"]
    assert rel.rows()[0]["n"] > 20000


def test_unknown_table_error_lists_registered_tables(cur):
    with pytest.raises(UnsupportedQueryError, match="registered tables: diabetes"):
        cur.sql("SELECT COUNT(*) FROM nope")


def test_a_query_the_data_types_cannot_run_is_refused_before_the_charge(tmp_path) -> None:
    """Metadata that declares an integer over a DATE column: registration finds (and warns
    of) the mismatch, and the analysis goes by the data's type, which no query may use (a
    date's comparisons and casts are not those the analysis knows): refused before the
    ledger is charged."""
    import datetime

    import duckdb

    from statcurator import Curator
    from statcurator.core.errors import UnsupportedQueryError
    from statcurator.core.schema import Column, TableMeta

    db = tmp_path / "visits.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE visits (day DATE)")
    con.execute("INSERT INTO visits VALUES (?)", [datetime.date(2024, 1, 1)])
    con.close()
    meta = TableMeta("visits", (Column("day", type="integer", bounds=(0, 100)),))
    cur = Curator()
    with pytest.warns(UserWarning, match="'day' is declared integer but its data is DATE"):
        cur.register("visits", f"{db}:visits", meta)
    assert cur.engine.declare_types("visits", meta) == [
        "column 'day' is declared integer but its data is DATE"]
    cur.set_budget("alice", "visits", epsilon=1)
    with pytest.raises(UnsupportedQueryError, match="'day' has a type queries cannot use"):
        cur.sql("SELECT SUM(day) AS s FROM visits").release(epsilon=0.5, analyst="alice")
    assert cur.budget("alice", "visits").spent.epsilon == 0
    assert cur.ledger.charges() == []


def test_a_table_whose_types_match_its_metadata_is_planned_once_per_statement() -> None:
    """A typed table (every declared type holds its data's) is not prepared before the
    charge: the statement is planned once, when it runs. The control: the same data under
    metadata that declares ``age`` a string is prepared first, and its query still runs."""
    import pyarrow as pa

    from statcurator import Curator
    from statcurator.core.schema import Column, TableMeta

    data = pa.table({"age": pa.array([30, 40, 50], pa.int32()), "w": [0.5, 1.5, 2.5],
                     "s": ["a", "b", "a"], "b": [True, False, True]})
    typed = TableMeta("t", (Column("age", type="integer", bounds=(0, 100)),
                            Column("w", type="real", bounds=(0, 3)),
                            Column("s", categories=("a", "b")), Column("b", type="boolean")))
    cur = Curator()
    cur.register("t", data, typed)
    assert cur.engine.declare_types("t", typed) == []
    grouped = cur.sql("SELECT s, COUNT(*) AS n, SUM(age) AS a FROM t GROUP BY s")
    assert len(grouped.release(epsilon=0.25)) == 2 and cur.engine._prepared == {}
    grouped.release(epsilon=0.25)  # asked again: prepared now, planned once from here on
    assert len(cur.engine._prepared) == 1
    loose = TableMeta("t", (Column("age", type="string"), Column("w", type="integer")))
    with pytest.warns(UserWarning, match="does not match its metadata"):
        cur.register("t", data, loose)
    assert cur.engine.declare_types("t", loose) == [
        "column 'age' is declared string but its data is INTEGER",
        "column 'w' is declared integer but its data is DOUBLE"]
    cur.sql("SELECT COUNT(*) AS n FROM t WHERE age = '30'").release(epsilon=0.5)
    assert len(cur.engine._prepared) == 1


def test_in_memory_data_never_lands_in_a_users_database_file(
        tmp_path) -> None:
    """Arrow data registered on an engine over a user's DuckDB *file* (a connection passed
    in) is read in place, never copied: the private rows must not land in that file.
    Control: a plain table created on the same connection is in the file."""
    import duckdb
    import pyarrow as pa

    from statcurator import Curator
    from statcurator.core.schema import Column, TableMeta
    from statcurator.engines.duckdb import DuckDBEngine

    path = tmp_path / "user.duckdb"
    engine = DuckDBEngine(connection=duckdb.connect(str(path)))
    cur = Curator(engine=engine)
    cur.register("patients", pa.table({"age": [31, 47, 52]}),
                 TableMeta("patients", (Column("age", type="integer", bounds=(0, 100)),)))
    assert cur.sql("SELECT COUNT(*) AS n FROM patients").release(epsilon=0.5).rows()
    engine.con.execute("CREATE TABLE control AS SELECT 1 AS x")
    engine.close()
    with duckdb.connect(str(path)) as con:
        assert [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()")
                .fetchall()] == ["control"]


@pytest.mark.parametrize("levels", [150, 400, 3000])
def test_deeply_nested_sql_is_refused_before_anything_is_charged(levels):
    """An expression nested hundreds of levels deep used to pass the parser and then exhaust
    Python's recursion in a later stage — after the charge for some (the budget spent, the
    service's answer a 500). It is now refused at compilation (at most MAX_DEPTH levels),
    or at the parse for thousands, uncharged. Control: MAX_DEPTH levels are answered."""
    from statcurator.query.compiler import MAX_DEPTH

    cur = Curator()
    cur.register("adult", sc.datasets.adult())
    for sql in ("SELECT COUNT(*) AS n FROM adult WHERE age" + " + 1" * levels + " > 5",
                "SELECT SUM(age" + " * 1" * levels + ") AS s FROM adult",
                "SELECT COUNT(*) AS n FROM adult WHERE " + "- " * levels + "age < 5"):
        with pytest.raises(UnsupportedQueryError, match="nested"):
            cur.sql(sql).release(epsilon=1)
    assert cur.budget("default", "adult").spent == ApproxDP(0, 0)
    ok = "SELECT COUNT(*) AS n FROM adult WHERE age" + " + 1" * (MAX_DEPTH - 3) + " > 5"
    assert cur.sql(ok).release(epsilon=1).rows()
