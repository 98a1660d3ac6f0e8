"""``statcurator attack ...`` and ``statcurator experiment composition`` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statcurator.cli import app

from .conftest import TEXTBOOK

runner = CliRunner()


def _run(*args: str) -> dict:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout) if "--json" in args else {"output": r.output}


@pytest.fixture()
def bob_carl(tmp_path: Path) -> Path:
    p = tmp_path / "targets.csv"
    p.write_text("Name;Zipcode;Age;Disease\nBob;47678;27;Heart Disease\nCarl;47673;36;Cancer\n")
    return p


def test_homogeneity_on_files(bob_carl: Path) -> None:
    table = str(TEXTBOOK / "homogeneity_3anonymous.csv")
    doc = _run("attack", "homogeneity", table, "--qi", "Zipcode,Age", "--sensitive", "Disease",
               "--targets", str(bob_carl), "--json")
    assert (doc["successes"], doc["targets"]) == (1, 2)


@pytest.mark.slow
def test_background_on_files_with_a_report(bob_carl: Path, tmp_path: Path) -> None:
    table = str(TEXTBOOK / "homogeneity_3anonymous.csv")
    report = tmp_path / "bg.html"
    doc = _run("attack", "background", table, "--qi", "Zipcode,Age", "--sensitive", "Disease",
               "--targets", str(bob_carl), "--b", "1", "--report", str(report), "--json")
    assert doc["successes"] == 2 and doc["curves"]["success vs b"]["y"][:2] == [0.5, 1.0]
    assert report.exists() and "success vs b" in report.read_text()


def test_linkage_voters_and_patients(tmp_path: Path) -> None:
    deid = tmp_path / "deid.csv"
    lines = (TEXTBOOK / "patients.csv").read_text().splitlines()
    deid.write_text("\n".join(";".join(x.split(";")[1:]) for x in lines) + "\n")
    doc = _run("attack", "linkage", str(deid), "--external", str(TEXTBOOK / "voters.csv"),
               "--id", "Name", "--truth", str(TEXTBOOK / "patients.csv"), "--qi",
               "Age,Sex,Zipcode", "--population", str(TEXTBOOK / "voters.csv"), "--json",
               "--detail")
    assert doc["successes"] == 10 and doc["measures"]["sample uniques"] == 1.0
    assert {d["target"] for d in doc["detail"] if not d["breached"]} == {"Mike"}


def test_composition_of_two_files(tmp_path: Path) -> None:
    people = tmp_path / "p.csv"
    people.write_text("ZIP;Age;Nationality;Condition\n13068;21;Japanese;Viral Infection\n"
                      "13053;31;American;Cancer\n")
    out = _run("attack", "composition", str(TEXTBOOK / "hospital_4anonymous.csv"),
               str(TEXTBOOK / "hospital_3diverse.csv"), "--qi", "ZIP,Age,Nationality",
               "--sensitive", "Condition", "--targets", str(people))
    assert "composition" in out["output"] and "mean values left" in out["output"]


def test_errors_name_the_flag() -> None:
    r = runner.invoke(app, ["attack", "homogeneity", str(TEXTBOOK / "voters.csv"), "--qi",
                            "Age", "--sensitive", "Disease"])
    assert r.exit_code == 2 and "--targets" in r.output


def test_dataset_mode_and_dp_contrast() -> None:
    doc = _run("attack", "homogeneity", "adult", "--k", "5", "--sensitive", "salary-class",
               "--qi", "age,sex,race", "--algorithm", "mondrian", "--sample", "500",
               "--epsilon", "1", "--json")
    assert doc["targets"] == 500 and doc["contrast"]["cost"] == "ε=1"


def test_membership_and_reconstruction() -> None:
    doc = _run("attack", "membership", "gwas", "--snps", "2000", "--pool", "100",
               "--targets", "100", "--statistics", "100,2000", "--json")
    assert doc["measures"]["statistics published"] == 2000
    doc = _run("attack", "reconstruction", "--rows", "40", "--queries", "160", "--json")
    assert doc["rate"] == 1.0


def test_minimality_on_adult() -> None:
    doc = _run("attack", "minimality", "adult", "--k", "10", "--l", "5", "--sensitive",
               "occupation", "--json")
    assert doc["successes"] == 0
    assert doc["measures"]["predecessors explained by small classes"] == 6


@pytest.mark.slow
def test_experiment_composition_json(tmp_path: Path) -> None:
    report = tmp_path / "exp.html"
    doc = _run("experiment", "composition", "adult", "--sensitive", "occupation", "--overlap",
               "500", "--k", "10,50", "--algorithm", "optimal", "--l", "3", "--epsilon", "0.1",
               "--seeds", "2", "--workers", "1", "--report", str(report), "--json")
    rows = doc["rows"]
    assert len(rows) == 6  # (k=10, k=50, l=3) x (anonymized, dp)
    for key in ("algorithm", "k", "l", "t", "epsilon", "perfect", "perfect_sd", "partial",
                "values_left", "class_size", "targets"):
        assert all(key in r for r in rows)
    assert all(0 <= r["perfect"] <= 1 and r["targets"] == 500 for r in rows)
    assert {r["epsilon"] for r in rows} == {None, 0.1}
    assert report.exists() and "Perfect and partial breach" in report.read_text()
