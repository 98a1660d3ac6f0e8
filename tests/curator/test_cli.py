"""``statcurator query``: the issue's interface, rich output, --json, --dry-run, ledgers."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from statcurator.cli import app
from statcurator.io.metadata import dump_metadata

from .conftest import DIABETES_META

runner = CliRunner()


@pytest.fixture(autouse=True)
def _private_dirs(tmp_path, monkeypatch):
    """The CLI's default ledger and anchors live in the user's directories: use temporary
    ones, never the real home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("STATCURATOR_LEDGER", raising=False)
    monkeypatch.delenv("STATCURATOR_LEDGER_KEY", raising=False)


def run(*args: str):
    # one-off releases unless a test names its ledger (the default is a persistent one)
    ledger = [] if "--ledger" in args else ["--ledger", ":memory:"]
    result = runner.invoke(app, ["query", *ledger, *args])
    return result


@pytest.fixture
def meta_toml(tmp_path):
    path = tmp_path / "diabetes.toml"
    path.write_text(dump_metadata(DIABETES_META), encoding="utf-8")
    return path


def test_json_output(diabetes_csv, meta_toml):
    r = run(str(diabetes_csv), "--metadata", str(meta_toml), "--epsilon", "0.5", "--json",
            "SELECT Diabetes, COUNT(*) AS n FROM diabetes GROUP BY Diabetes")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert [row["Diabetes"] for row in out["rows"]] == ["Y", "N"]
    assert set(out["rows"][0]) == {"Diabetes", "n", "n_low", "n_high"}
    assert out["epsilon_spent"] == 0.5 and out["delta_spent"] == 0
    assert out["mechanisms"]["n"][0]["mechanism"] == "laplace"
    assert out["mechanisms"]["n"][0]["scale"] == 4  # bounded histogram: 2 / 0.5


def test_rich_table_output(diabetes_csv, meta_toml):
    r = run(str(diabetes_csv), "-m", str(meta_toml), "-e", "1",
            "SELECT AVG(Age) AS a FROM diabetes")
    assert r.exit_code == 0, r.output
    assert "a interval" in r.output and "centred sum" in r.output


def test_adult_demo_and_dry_run():
    r = run("adult", "--epsilon", "1", "--dry-run", "--json",
            "SELECT sex, COUNT(*) AS n, MEDIAN(age) FROM adult GROUP BY sex")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["dry_run"] and out["epsilon"] == 1.0
    assert out["accuracy"][0]["halfwidth"] == 6.0  # ε/2 on a histogram of sensitivity 1
    r = run("adult", "--epsilon", "1", "--dry-run", "SELECT COUNT(*) FROM adult")
    assert r.exit_code == 0 and "no data read" in r.output


def test_refusal_exit_code_and_json_error():
    r = run("adult", "--epsilon", "1", "--json", "SELECT age FROM adult")
    assert r.exit_code == 2
    err = json.loads(r.output)
    assert err["error"] == "UnsupportedQueryError" and err["remedy"]


def test_delta_for_partition_selection():
    r = run("adult", "-e", "1", "--json", "SELECT age, COUNT(*) AS n FROM adult GROUP BY age")
    assert r.exit_code == 2 and "delta" in json.loads(r.output)["remedy"]
    r = run("adult", "-e", "1", "--delta", "1e-6", "--json",
            "SELECT age, COUNT(*) AS n FROM adult GROUP BY age")
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["delta_spent"] == 1e-6 and len(out["rows"]) > 40


def test_persistent_ledger_and_replay(tmp_path):
    ledger = tmp_path / "cli.ledger.db"
    for grant in (["--epsilon", "10"], ["--analyst", "Alice", "--epsilon", "1"]):
        r = runner.invoke(app, ["budget", "set", "--ledger", str(ledger), "--dataset", "adult",
                                *grant])
        assert r.exit_code == 0, r.output
    args = ["adult", "-e", "0.4", "--ledger", str(ledger), "--analyst", "alice", "--json",
            "SELECT COUNT(*) AS n FROM adult"]
    first = json.loads(run(*args, "--request-id", "q1").output)
    again = json.loads(run(*args, "--request-id", "q1").output)
    assert again["replayed"] and again["rows"] == first["rows"]
    assert json.loads(run(*args).output)["budget_remaining"].startswith("ε=0.2")
    r = run(*args)  # 0.4 more would exceed alice's grant of ε = 1
    assert r.exit_code == 2 and json.loads(r.output)["error"] == "BudgetExceededError"


def test_duckdb_database_and_parquet(tmp_path, diabetes_csv, meta_toml):
    import duckdb
    import pyarrow.parquet as pq

    from statcurator.io.tables import read_table

    table = read_table(diabetes_csv, meta=DIABETES_META)
    pq.write_table(table, tmp_path / "d.parquet")
    con = duckdb.connect(str(tmp_path / "d.duckdb"))
    con.register("src", table)
    con.execute("CREATE TABLE diabetes AS SELECT * FROM src")
    con.close()
    for data in (tmp_path / "d.parquet", tmp_path / "d.duckdb"):
        r = run(str(data), "-m", str(meta_toml), "-e", "1", "--json",
                "SELECT COUNT(*) AS n FROM diabetes")
        assert r.exit_code == 0, r.output
        assert abs(json.loads(r.output)["rows"][0]["n"] - 4) < 30
