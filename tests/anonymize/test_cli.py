"""``statcurator anonymize`` on the command line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from statcurator.cli import app

runner = CliRunner()


def test_readme_command(tmp_path):
    report = tmp_path / "adult-k5.html"
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--suppression", "0.02",
                            "--report", str(report)])
    assert r.exit_code == 0, r.output
    assert "suppressed" in r.output and report.exists()
    assert "Verification" in report.read_text()


def test_json_output(tmp_path):
    out = tmp_path / "rel.csv"
    r = runner.invoke(app, ["anonymize", "adult", "--k", "10", "--l", "5", "--sensitive",
                            "occupation", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    for key in ("algorithm", "levels", "suppressed", "classes", "min_class_size", "metrics",
                "verified", "output"):
        assert key in doc
    assert doc["levels"]["age"] == 4 and doc["classes"] == 8
    assert {"loss", "dm", "dmstar", "aecs"} <= set(doc["metrics"])
    assert all(doc["verified"].values())
    assert doc["output"] == str(out) and out.exists()


@pytest.mark.parametrize("args", [
    ["--k", "5", "--t", "0.2", "--sensitive", "occupation", "--t-distance", "ordered"],
    ["--k", "5", "--algorithm", "mondrian", "--qi", "sex,age,race"],
    ["--k", "3", "--l", "2", "--l-variant", "recursive", "--c", "4", "--sensitive", "occupation",
     "--qi", "sex,age"],
    ["--k", "5", "--metric", "dmstar", "--qi", "sex,age,education"],
])
def test_options(args):
    r = runner.invoke(app, ["anonymize", "adult", *args, "--json"])
    assert r.exit_code == 0, r.output
    assert all(json.loads(r.stdout)["verified"].values())


def test_errors_exit_2_with_a_remedy():
    r = runner.invoke(app, ["anonymize", "adult", "--l", "3"])
    assert r.exit_code == 2 and "--sensitive" in r.output
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--l", "20", "--sensitive",
                            "occupation", "--json"])
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["error"] == "UnsatisfiableError" and "lower l" in doc["remedy"]
    r = runner.invoke(app, ["anonymize", "adult"])
    assert r.exit_code == 2 and "--k" in r.output


def test_other_data_with_metadata(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("name,zip,disease\nA,121,flu\nB,122,cold\nC,131,flu\nD,132,cold\n")
    meta = tmp_path / "t.toml"
    meta.write_text('[table]\nname = "t"\n[columns.name]\nrole = "identifier"\n'
                    '[columns.zip]\ntype = "string"\nrole = "qi"\nhierarchy = { masking = 3 }\n'
                    '[columns.disease]\nrole = "sensitive"\n')
    out = tmp_path / "out.parquet"
    r = runner.invoke(app, ["anonymize", str(data), "--metadata", str(meta), "--k", "2",
                            "--l", "2", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["levels"] == {"zip": 1}
    import pyarrow.parquet as pq

    assert pq.read_table(out).column_names == ["zip", "disease"]
