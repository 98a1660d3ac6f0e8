"""The command line as a whole: --version, --help, printing (escaping, no truncation, plain
lines when piped) and remedies in CLI terms."""

from __future__ import annotations

import json
import re
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from statcurator import __version__
from statcurator.cli import app
from statcurator.cli._common import JSON_OPTION, cli_remedy, emit, handle_errors, print_table
from statcurator.core.errors import InvalidParameterError

runner = CliRunner()

BRACKETS = ("optional extra: pip install 'statcurator[spark]'",
            "add bounds under [columns.age] in the metadata")


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make rich treat the captured output as an 80-column terminal (without colours)."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "80")


def _demo_app() -> typer.Typer:
    """A command whose errors carry brackets and Python-style remedies."""
    demo = typer.Typer()

    @demo.command()
    @handle_errors(aliases={"meta": "--metadata"})
    def run(
        which: str,
        delta: Annotated[str | None, typer.Option("--delta", "-d")] = None,
        qi: str = typer.Option(None, "--qi"),
        algorithm: str = "optimal",
        json_output: bool = JSON_OPTION,
    ) -> None:
        remedies = {
            "brackets": (BRACKETS[0], BRACKETS[1]),
            "delta": ("a key set is not public", "pass delta=1e-6 (charged), or declare it"),
            "qi": ("no QIs", "pass qi=['age', 'sex'], or use algorithm='mondrian'"),
            "meta": ("no metadata", "pass meta= (a TOML file)"),
            "other": ("oops", "pass rho=1 (this command has no --rho)"),
        }
        problem, remedy = remedies[which]
        raise InvalidParameterError(problem, remedy=remedy)

    @demo.callback()
    def _root() -> None:
        """Demo."""

    return demo


def test_version() -> None:
    r = runner.invoke(app, ["--version"])
    assert r.exit_code == 0 and r.output.strip() == f"statcurator {__version__}"


def test_help_promises_only_the_commands_that_exist() -> None:
    r = runner.invoke(app, ["--help"])
    assert r.exit_code == 0
    names = {c.name for c in app.registered_commands} | {g.name for g in app.registered_groups}
    assert {"anonymize", "query", "mechanisms", "datasets", "attack", "serve"} <= names
    listed = set(re.findall(r"^[│|]\s(\w+)\s{2,}", r.output, flags=re.M))
    assert listed == names, "--help must list exactly the registered commands and groups"


@pytest.mark.parametrize("tty", [False, True])
def test_brackets_in_errors_are_printed_as_they_are(tty: bool, terminal: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    if not tty:
        monkeypatch.setenv("TTY_COMPATIBLE", "0")
    r = runner.invoke(_demo_app(), ["run", "brackets"])
    assert r.exit_code == 2
    text = " ".join(r.output.split())  # a terminal may soft-wrap the line
    assert BRACKETS[0] in text and BRACKETS[1] in text


def test_emit_and_tables_print_brackets(terminal: None, capsys: pytest.CaptureFixture) -> None:
    emit("needs ", ("[spark]", "bold"), " under [columns.age]")
    print_table(("key [a]", "value"), [("[columns.age]", "statcurator[spark]")], title="[t]")
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)  # styles, not text
    for text in ("needs [spark] under [columns.age]", "key [a]", "[columns.age]",
                 "statcurator[spark]", "[t]"):
        assert text in out


@pytest.mark.parametrize(("which", "expected"), [
    ("delta", "pass --delta 1e-6 (charged), or declare it"),
    ("qi", "pass --qi age,sex, or use --algorithm mondrian"),
    ("meta", "pass --metadata (a TOML file)"),
    ("other", "pass rho=1 (this command has no --rho)"),  # not an option here: left alone
])
def test_remedies_name_the_command_s_flags(which: str, expected: str) -> None:
    r = runner.invoke(_demo_app(), ["run", which])
    assert r.exit_code == 2 and r.output.strip().endswith(expected)
    doc = json.loads(runner.invoke(_demo_app(), ["run", which, "--json"]).stdout)
    assert doc["remedy"] == expected and doc["message"].endswith(expected)


def test_python_asides_and_cli_forms() -> None:
    flags = {"epsilon": "--epsilon", "qi": "--qi"}
    assert cli_remedy("run `statcurator budget set --epsilon E` (Python: "
                      "cur.set_dataset_budget('d', epsilon=E))", flags) == \
        "run `statcurator budget set --epsilon E`"
    assert cli_remedy("pass qi=[...] (CLI: --qi a,b,c)", flags) == "pass --qi a,b,c"
    assert cli_remedy("pass epsilon=1", {}) == "pass epsilon=1"


def test_real_remedies_are_in_cli_terms() -> None:
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--algorithm", "best"])
    assert r.exit_code == 2 and "use --algorithm optimal or mondrian" in r.output
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--suppression", "200%"])
    assert r.exit_code == 2 and "--suppression 0.02 (or 2%)" in r.output
    r = runner.invoke(app, ["mechanisms", "partition-selection", "--epsilon", "1"])
    assert r.exit_code == 2 and "--delta 1e-6" in r.output
    for out in (r.output for r in [
            runner.invoke(app, ["anonymize", "adult", "--k", "5", "--algorithm", "best"]),
            runner.invoke(app, ["mechanisms", "laplace", "--epsilon", "0"])]):
        assert "=" not in out.split(";", 1)[1]  # no keyword=value in the remedy


def test_tables_never_cut_a_number(terminal: None, capsys: pytest.CaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    long = "1158.000000000001234"
    rows = [("a fairly long label for a row", long, "x" * 30)]
    monkeypatch.setenv("COLUMNS", "40")
    print_table(("label", "value", "note"), rows)
    assert long in capsys.readouterr().out
    monkeypatch.setenv("TTY_COMPATIBLE", "0")  # piped: plain lines, no box drawing
    print_table(("label", "value", "note"), rows, title="figures")
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "figures" and out[1].split() == ["label", "value", "note"]
    assert out[2].split("  ")[0] == rows[0][0] and long in out[2] and "│" not in out[2]


def test_piped_summaries_are_not_wrapped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    r = runner.invoke(app, ["mechanisms", "laplace", "--epsilon", "0.01", "--sensitivity",
                            "200000"])
    assert r.exit_code == 0
    assert "interval     value ± 5.99146e+07 with probability >= 0.95" in r.output.splitlines()


def test_datasets_lists_the_bundled_tables() -> None:
    r = runner.invoke(app, ["datasets"])
    assert r.exit_code == 0 and "30,162" in r.output and "diabetes" in r.output
    doc = json.loads(runner.invoke(app, ["datasets", "--json"]).stdout)
    assert [d["name"] for d in doc["datasets"]] == ["adult", "diabetes", "diabetes_neighbour"]


# -- query: post-processing, zCDP, data given as metadata, careless input -------------------

def _table_with_an_empty_category(tmp_path) -> tuple[str, str]:
    """A CSV whose declared category 'Z' never occurs, and its metadata (which names it)."""
    (tmp_path / "t.csv").write_text("g;x\n" + "a;1\n" * 5 + "b;2\n" * 3)
    (tmp_path / "t.toml").write_text('[table]\nname = "t"\nsource = "t.csv"\nseparator = ";"\n'
                                     '[columns.g]\ntype = "string"\n'
                                     'categories = ["a", "b", "Z"]\n'
                                     '[columns.x]\ntype = "integer"\n')  # no bounds
    return str(tmp_path / "t.csv"), str(tmp_path / "t.toml")


def test_nonnegative_counts_are_stated_post_processing(tmp_path) -> None:
    _, toml = _table_with_an_empty_category(tmp_path)
    sql = "SELECT g, COUNT(*) AS n FROM t GROUP BY g"
    # the metadata TOML is DATA (its source names the data); ε = 0.05: scale 20, so without
    # the clamp the empty group 'Z' would be negative half the time
    args = ["query", toml, "--ledger", ":memory:", "--epsilon", "0.05", "--nonnegative", sql]
    r = runner.invoke(app, args)
    assert r.exit_code == 0, r.output
    assert "post-processing: counts clamped at 0" in r.output
    doc = json.loads(runner.invoke(app, [*args, "--json"]).stdout)
    assert doc["post_processing"].startswith("counts clamped at 0")
    for row in doc["rows"]:
        assert isinstance(row["n"], int) and row["n"] >= 0 and row["n_low"] >= 0
    plain = json.loads(runner.invoke(app, [*args[:-2], sql, "--json"]).stdout)
    assert plain["post_processing"] is None


def test_rho_gives_gaussian_noise_under_zcdp(tmp_path) -> None:
    csv, _ = _table_with_an_empty_category(tmp_path)
    sql = "SELECT COUNT(*) AS n FROM t"
    doc = json.loads(runner.invoke(app, ["query", csv, "--ledger", ":memory:", "--rho", "0.5",
                                         sql, "--json"]).stdout)
    assert doc["cost"] == "ρ=1/2" or doc["cost"].startswith("ρ=0.5")
    assert doc["mechanisms"]["n"][0]["mechanism"] == "gaussian"
    r = runner.invoke(app, ["query", csv, "--ledger", ":memory:", "--rho", "0.5", sql])
    assert r.exit_code == 0 and "gaussian, ρ=0.5" in r.output
    dry = runner.invoke(app, ["query", csv, "--rho", "0.5", "--dry-run", sql])
    assert dry.exit_code == 0 and "ρ split" in dry.output
    both = runner.invoke(app, ["query", csv, "--epsilon", "1", "--rho", "0.5", sql])
    assert both.exit_code == 2 and "exactly one of --epsilon and --rho" in both.output


def test_query_input_separator_and_careless_data(tmp_path) -> None:
    (tmp_path / "p.csv").write_text("a|b\n1|2\n3|4\n")
    ok = runner.invoke(app, ["query", str(tmp_path / "p.csv"), "--ledger", ":memory:", "-e",
                             "1", "--input-separator", "|", "SELECT COUNT(*) AS n FROM p"])
    assert ok.exit_code == 0, ok.output
    for data in (str(tmp_path), str(tmp_path / "missing.csv")):  # a folder, a missing file
        r = runner.invoke(app, ["query", data, "--ledger", ":memory:", "-e", "1",
                                "SELECT COUNT(*) FROM t"])
        assert r.exit_code == 2 and isinstance(r.exception, SystemExit)
        assert r.output.startswith("error:") and "Traceback" not in r.output
    (tmp_path / "bare.toml").write_text('[table]\nname = "bare"\n[columns.a]\n')
    r = runner.invoke(app, ["query", str(tmp_path / "bare.toml"), "--ledger", ":memory:",
                            "-e", "1", "SELECT COUNT(*) FROM bare"])
    assert r.exit_code == 2 and 'add source = "FILE.csv"' in r.output


def test_more_remedies_are_in_cli_terms(tmp_path) -> None:
    r = runner.invoke(app, ["anonymize", "adult", "--k", "5", "--l", "3", "--c", "2",
                            "--sensitive", "occupation"])
    assert r.exit_code == 2 and "--l-variant recursive" in r.output and "variant=" not in r.output
    csv, _ = _table_with_an_empty_category(tmp_path)
    r = runner.invoke(app, ["estimate", csv, "--ledger", ":memory:", "-e", "1", "median", "x"])
    assert r.exit_code == 2 and "declare bounds" in r.output and "bounds=(" not in r.output


def test_query_report_renders_the_release_and_its_certificate(tmp_path) -> None:
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["query", "adult", "--ledger", ":memory:", "--epsilon", "1",
                            "--report", str(out), "--json",
                            "SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM adult GROUP BY sex"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["report"] == str(out) and doc["certificate"]["recheck"]["passed"]
    page = out.read_text()
    for needle in ("The answer", "What the guarantee means", "73.1%", "The certificate",
                   "passed", "data:image/png;base64", "statcurator-certificate/1"):
        assert needle in page, needle


def test_query_report_is_checked_before_anything_is_spent(tmp_path) -> None:
    led = tmp_path / "l.db"
    for bad, needle in (("r.txt", "end the file name"), ("", "a directory")):
        r = runner.invoke(app, ["query", "adult", "--ledger", str(led), "--analyst", "ana",
                                "--epsilon", "1", "--report", str(tmp_path / bad),
                                "SELECT COUNT(*) FROM adult"])
        assert r.exit_code != 0 and needle in r.output, r.output
    r = runner.invoke(app, ["query", "adult", "--ledger", str(led), "--analyst", "ana",
                            "--epsilon", "1", "--dry-run", "--report", str(tmp_path / "r.html"),
                            "SELECT COUNT(*) FROM adult"])
    assert r.exit_code != 0 and "--dry-run" in r.output
    assert not led.exists() or "spent ε=0" in runner.invoke(
        app, ["budget", "--ledger", str(led), "--analyst", "ana", "adult"]).output


def test_unreadable_sql_gets_the_refusal_alone() -> None:
    """sqlglot logs a warning before statcurator refuses SQL it cannot read; the command
    line says the refusal, with its remedy, and nothing else. Control: without the command
    line's logging setting, the warning is there."""
    import subprocess
    import sys

    sql = "FETCH FIRST 1 ROWS ONLY"
    r = subprocess.run([sys.executable, "-c", "from statcurator.cli import main; main()",
                        "query", "adult", "--epsilon", "1", sql],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "only SELECT queries are answered" in r.stderr + r.stdout
    assert "unsupported syntax" not in r.stderr + r.stdout
    control = subprocess.run(
        [sys.executable, "-c", "import statcurator as sc\n"
         "from statcurator.query.sql import parse_sql\n"
         "cur = sc.Curator(); cur.register('adult', sc.datasets.adult())\n"
         f"try:\n    parse_sql({sql!r}, cur.catalog)\nexcept Exception:\n    pass"],
        capture_output=True, text=True, timeout=120)
    assert "unsupported syntax" in control.stderr
