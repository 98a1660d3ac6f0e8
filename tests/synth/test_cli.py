"""`statcurator synthesize`: a synthetic CSV, an HTML report, --json, and clear errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statcurator.cli import app
from statcurator.synth import _pgm

runner = CliRunner()


def test_refuses_bad_arguments_before_reading_data(tmp_path: Path) -> None:
    r = runner.invoke(app, ["synthesize", "adult", "--out", str(tmp_path / "s.csv")])
    assert r.exit_code == 2 and "--epsilon" in r.output
    r = runner.invoke(app, ["synthesize", "adult", "--epsilon", "1", "--method", "gan"])
    assert r.exit_code == 2 and "--method mst" in r.output
    r = runner.invoke(app, ["synthesize", "adult", "--epsilon", "nan"])
    assert r.exit_code == 2
    r = runner.invoke(app, ["synthesize", "adult", "--epsilon", "1", "--out",
                            str(tmp_path / "s.xyz")])
    assert r.exit_code == 2 and "--out" in r.output


@pytest.mark.slow
@pytest.mark.skipif(not _pgm.available(), reason="needs the mbi library (synth extra)")
def test_synthesizes_a_csv_and_a_report(tmp_path: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    out, report = tmp_path / "synth.csv", tmp_path / "r.html"
    r = runner.invoke(app, ["synthesize", "adult", "--epsilon", "2", "--delta", "1e-6",
                            "--columns", "sex,age,salary-class", "--bins", "8",
                            "--rows", "300", "--out", str(out), "--report", str(report),
                            "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["method"] == "MST" and doc["rows"] == 300
    assert doc["cost"].startswith("ε=") and "δ=1e-06" in doc["cost"]
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 300 and set(rows[0]) == {"sex", "age", "salary-class"}
    assert all(0 <= int(row["age"]) <= 120 for row in rows)
    html = report.read_text()
    assert "data:image/png;base64," in html and "not for publication" in html
