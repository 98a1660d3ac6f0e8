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


def _files(tmp_path, csv_text, toml_text):
    """A data file and its metadata file in ``tmp_path``."""
    data, meta = tmp_path / "t.csv", tmp_path / "t.toml"
    data.write_text(csv_text)
    meta.write_text(toml_text)
    return data, meta


ZIP_QI = '[columns.zip]\ntype = "string"\nrole = "qi"\nhierarchy = { masking = 3 }\n'


def test_other_data_with_metadata(tmp_path):
    data, meta = _files(tmp_path, "name,zip,disease\nA,121,flu\nB,122,cold\nC,131,flu\nD,132,cold\n",
                        '[table]\nname = "t"\n[columns.name]\nrole = "identifier"\n' + ZIP_QI
                        + '[columns.disease]\nrole = "sensitive"\n')
    out = tmp_path / "out.parquet"
    r = runner.invoke(app, ["anonymize", str(data), "--metadata", str(meta), "--k", "2",
                            "--l", "2", "--out", str(out), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["levels"] == {"zip": 1}
    import pyarrow.parquet as pq

    assert pq.read_table(out).column_names == ["zip", "disease"]


# -- careless input and honest output (issue 8) --------------------------------------------

def _no_work(monkeypatch):
    """Fail the test if the command reads data or searches: arguments come first."""
    import statcurator.cli.anonymize as cli

    def boom(*args, **kwargs):
        raise AssertionError("the command started working before checking its arguments")

    monkeypatch.setattr(cli, "_load", boom)


@pytest.mark.parametrize("args,message", [
    (["--out", "release.xlsx"], "end the file name in one of"),
    (["--report", "report.pdf"], "end the file name in one of .html"),
    (["--out", "/proc/no/such/dir/r.csv"], "cannot write --out"),
    (["--report", "/proc/r.html"], "cannot write --report"),
    (["--suppression", "2"], "--suppression 0.02 (or 2%)"),
    (["--metric", "utility"], "use --metric loss or"),
    (["--l-variant", "fancy", "--l", "2"], "use --l-variant distinct or"),
    (["--separator", "::"], "--separator must be one character"),
    (["--l", "two"], "--l must be a whole number"),
])
def test_arguments_are_checked_before_any_work(monkeypatch, tmp_path, args, message):
    _no_work(monkeypatch)
    monkeypatch.chdir(tmp_path)
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", *args])
    assert r.exit_code == 2 and message in r.output, r.output
    assert "Traceback" not in r.output
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", *args, "--json"])
    assert r.exit_code == 2 and message in json.loads(r.stdout)["message"]


def test_out_is_a_directory_and_data_is_a_directory(tmp_path):
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "is a directory" in r.output
    r = runner.invoke(app, ["anonymize", str(tmp_path), "--k", "5"])
    assert r.exit_code == 2 and "is a directory, not a data file" in r.output


def _people(tmp_path, sep=","):
    rows = [("age", "sex", "zip", "disease")] + [
        (str(20 + i % 40), "MF"[i % 2], f"4760{i % 3}", ["flu", "cold", "ulcer"][i % 3])
        for i in range(60)]
    path = tmp_path / "people.csv"
    path.write_text("\n".join(sep.join(r) for r in rows) + "\n")
    return path


def test_naming_qis_of_data_without_metadata_builds_hierarchies(tmp_path):
    report = tmp_path / "r.html"
    r = runner.invoke(app, ["anonymize", str(_people(tmp_path)), "--k", "3", "--qi", "age,sex",
                            "--suppression", "5%", "--report", str(report), "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["suppression"] == 0.05 and doc["quasi_identifiers"] == ["age", "sex"]
    assert doc["automatic_hierarchies"] == {
        "age": "automatic: intervals of width 5, 10, 20, then *",
        "sex": "automatic: suppression only (the value, then *)"}
    assert "automatic: intervals of width 5, 10, 20" in report.read_text()
    text = runner.invoke(app, ["anonymize", str(_people(tmp_path)), "--k", "3", "--qi", "age"])
    assert "hierarchy of age   automatic: intervals" in text.output


def test_sensitive_without_l_or_t_is_reported_truthfully(tmp_path):
    report = tmp_path / "r.html"
    args = ["anonymize", "adult", "--k", "5", "--qi", "sex,race", "--sensitive", "occupation"]
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert doc["sensitive"] == ["occupation"] and doc["unprotected_sensitive"] == ["occupation"]
    r = runner.invoke(app, [*args, "--report", str(report)])
    assert "sensitive          occupation (no criterion protects it: released as is)" in \
        [line.strip() for line in r.output.splitlines()]
    html = report.read_text()
    assert "Sensitive attributes</th><td>occupation" in html and "no criterion protects" in html
    protected = json.loads(runner.invoke(app, [*args, "--l", "2", "--json"]).stdout)
    assert protected["sensitive"] == ["occupation"] and protected["unprotected_sensitive"] == []


def test_mondrian_summary_names_no_metric():
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--algorithm", "mondrian",
                            "--qi", "sex,age"])
    assert r.exit_code == 0, r.output
    first = r.output.splitlines()[0]
    assert first == "Anonymization of adult" and "metric" not in first


def test_summary_lines_are_not_wrapped_when_piped(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--qi", "sex,race,salary-class"])
    line = next(x for x in r.output.splitlines() if x.strip().startswith("utility"))
    assert "DM*" in line and "entropy" in line  # one line, however narrow the terminal


def test_a_sensitive_value_outside_its_hierarchy_is_refused(tmp_path):
    data, meta = _files(tmp_path, "zip,disease\n121,flu\n122,cold\n131,flu\n132,measles\n",
                        ZIP_QI + '[columns.disease]\nrole = "sensitive"\n'
                        '[columns.disease.hierarchy.tree]\n"respiratory" = ["flu", "cold"]\n')
    r = runner.invoke(app, ["anonymize", str(data), "-m", str(meta), "--k", "2", "--t", "0.5",
                            "--t-distance", "hierarchical", "--json"])
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["error"] == "DataError"
    assert "column 'disease' has the value 'measles'" in doc["problem"]
    assert "add a row for 'measles' to the hierarchy" in doc["remedy"]


def test_input_separator_and_its_remedy(tmp_path):
    data = tmp_path / "t.csv"
    data.write_text("zip;note,x\n121;a\n122;b\n131;c\n132;d\n")  # the header misleads a guess
    meta = tmp_path / "m.toml"
    meta.write_text('[columns.zip]\ntype = "integer"\nrole = "qi"\n'
                    'hierarchy = { intervals = [10, 100] }\n')
    r = runner.invoke(app, ["anonymize", str(data), "-m", str(meta), "--k", "2"])
    assert r.exit_code == 2 and "--input-separator ;" in r.output
    r = runner.invoke(app, ["anonymize", str(data), "-m", str(meta), "--k", "2",
                            "--input-separator", ";", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["levels"] == {"zip": 1}


def test_a_metadata_file_names_its_data(tmp_path):
    _people(tmp_path)
    (tmp_path / "people.toml").write_text(
        '[table]\nname = "people"\nsource = "people.csv"\n[columns.zip]\ntype = "string"\n'
        'role = "qi"\nhierarchy = { masking = 5 }\n')
    r = runner.invoke(app, ["anonymize", str(tmp_path / "people.toml"), "--k", "10", "--json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["dataset"] == "people" and doc["records"] == 60 and doc["levels"] == {"zip": 0}
