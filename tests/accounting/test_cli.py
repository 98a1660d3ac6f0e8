"""The command line's ledger (issue 7 §3): persistent by default, budgets required, the
``budget`` and ``ledger`` commands, the anchor, and a throwaway ledger only on request."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statcurator.accounting import Ledger

runner = CliRunner()
COUNT = "SELECT COUNT(*) AS n FROM adult"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch) -> Path:
    """Temporary user directories, so that the default ledger and the anchors never touch
    the real home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("STATCURATOR_LEDGER", raising=False)
    monkeypatch.delenv("STATCURATOR_LEDGER_KEY", raising=False)
    return tmp_path


def cli(*args: str):
    from statcurator.cli import app

    return runner.invoke(app, list(args))


def _json(result) -> dict:
    assert result.output.strip(), result
    return json.loads(result.output)


def _grant(*extra: str, dataset_eps: str = "10", grant_eps: str = "3") -> None:
    for args in (["--epsilon", dataset_eps], ["--analyst", "alice", "--epsilon", grant_eps]):
        r = cli("budget", "set", "--dataset", "adult", *args, *extra)
        assert r.exit_code == 0, r.output


@pytest.mark.slow
def test_the_default_ledger_is_persistent_and_in_the_user_data_dir(home):
    """Regression (issue 7 §3): without --ledger each run was charged only against itself:
    25 runs at ε=1 gave 25 fresh answers. Now the default ledger remembers, and an analyst
    granted ε=3 gets three."""
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", "--json", COUNT)
    assert r.exit_code == 2
    err = _json(r)
    assert err["error"] == "NoBudgetError"
    assert "statcurator budget set --dataset adult" in err["remedy"]
    _grant()
    default = home / "data" / "statcurator" / "ledger.db"
    assert default.exists()
    outcomes = [cli("query", "adult", "-e", "1", "--analyst", "alice", "--json", COUNT)
                for _ in range(5)]
    assert [o.exit_code for o in outcomes] == [0, 0, 0, 2, 2]
    first = _json(outcomes[0])
    assert first["ledger"] == str(default) and first["ledger_persistent"]
    assert first["budget_remaining"] == "ε=2" and first["dataset_budget_remaining"] == "ε=9"
    assert _json(outcomes[3])["error"] == "BudgetExceededError"
    with Ledger(default) as led:
        assert led.status("alice", "adult").spent.epsilon == 3
    # the human-readable output says where the ledger is (on stderr)
    _grant(grant_eps="4")
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", COUNT)
    assert r.exit_code == 0 and f"ledger: {default}" in r.output


def test_the_ledger_option_and_the_environment_variable(home, monkeypatch):
    chosen = home / "chosen.db"
    monkeypatch.setenv("STATCURATOR_LEDGER", str(chosen))
    _grant()
    assert chosen.exists() and not (home / "data" / "statcurator" / "ledger.db").exists()
    other = home / "other.db"
    _grant("--ledger", str(other))
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", "--ledger", str(other), "--json",
            COUNT)
    assert _json(r)["ledger"] == str(other)
    with Ledger(chosen) as led:
        assert led.counts()["charges"] == 0


def test_a_throwaway_ledger_only_on_request_and_said_so():
    r = cli("query", "adult", "-e", "1", "--ledger", ":memory:", "--json", COUNT)
    out = _json(r)
    assert r.exit_code == 0 and out["ledger"] == ":memory:" and not out["ledger_persistent"]
    r = cli("query", "adult", "-e", "1", "--ledger", ":memory:", COUNT)
    assert "throwaway" in r.output and "forgotten" in r.output


def test_the_analyst_is_the_os_user_normalized(monkeypatch):
    import getpass

    monkeypatch.setattr(getpass, "getuser", lambda: "  ALICE ")
    _grant()
    out = _json(cli("query", "adult", "-e", "1", "--json", COUNT))
    assert out["analyst"] == "alice" and out["budget_remaining"] == "ε=2"
    monkeypatch.setattr(getpass, "getuser", lambda: "\u0430lice")
    r = cli("query", "adult", "-e", "1", "--json", COUNT)
    assert r.exit_code == 2 and "--analyst" in _json(r)["remedy"]


def test_dry_run_shows_the_remaining_budgets():
    out = _json(cli("query", "adult", "-e", "1", "--analyst", "alice", "--dry-run", "--json",
                    COUNT))
    assert out["budget"]["grant_remaining"] is None       # no ledger yet, none created
    _grant()
    out = _json(cli("query", "adult", "-e", "1", "--analyst", "alice", "--dry-run", "--json",
                    COUNT))
    assert out["budget"]["grant_remaining"] == "ε=3"
    assert out["budget"]["dataset_remaining"] == "ε=10"
    r = cli("query", "adult", "-e", "1", "--analyst", "bob", "--dry-run", COUNT)
    assert r.exit_code == 0 and "remaining budget" in r.output
    assert "statcurator budget set --dataset adult --analyst bob" in r.output


def test_a_huge_epsilon_is_warned_about():
    out = _json(cli("query", "adult", "-e", "1e6", "--ledger", ":memory:", "--json", COUNT))
    assert any("little privacy" in w for w in out["warnings"])


@pytest.mark.slow
def test_budget_commands():
    r = cli("budget", "set", "--dataset", "adult", "--epsilon", "5", "--delta", "1e-6",
            "--json")
    assert _json(r)["total"] == "ε=5, δ=1e-06" and _json(r)["analyst"] is None
    out = _json(cli("budget", "set", "--dataset", "adult", "--analyst", "Bob", "--epsilon",
                    "1", "--json"))
    assert out["analyst"] == "bob" and out["remaining"] == "ε=1"
    cli("query", "adult", "-e", "0.5", "--analyst", "bob", COUNT)
    shown = _json(cli("budget", "show", "--json"))
    assert [d["dataset"] for d in shown["datasets"]] == ["adult"]
    assert shown["datasets"][0]["spent"] == "ε=0.5, δ=0"
    assert [(g["analyst"], g["remaining"]) for g in shown["grants"]] == [("bob", "ε=0.5")]
    assert _json(cli("budget", "show", "--analyst", "nobody", "--json"))["grants"] == []
    events = _json(cli("budget", "history", "--json"))["events"]
    assert [e["event"] for e in events] == ["dataset budget set", "grant set", "charge"]
    assert events[-1]["query"] == COUNT
    human = cli("budget", "show")
    assert human.exit_code == 0 and "bob" in human.output
    bad = cli("budget", "set", "--dataset", "adult", "--json")
    assert bad.exit_code == 2 and "--epsilon" in _json(bad)["remedy"]
    bad = cli("budget", "set", "--dataset", "adult", "--analyst", "eve\u200b", "--epsilon",
              "1", "--json")
    assert bad.exit_code == 2 and _json(bad)["error"] == "InvalidParameterError"


def test_ledger_verify_and_export(home):
    _grant()
    cli("query", "adult", "-e", "1", "--analyst", "alice", COUNT)
    out = _json(cli("ledger", "verify", "--json"))
    assert out["ok"] and out["charges"] == 1 and out["rows"] == 5 and not out["keyed"]
    lines = cli("ledger", "export").output.strip().splitlines()
    assert [json.loads(x)["type"] for x in lines] == ["genesis", "dataset_budget", "grant",
                                                      "charge", "answer"]
    target = home / "ledger.csv"
    summary = _json(cli("ledger", "export", "--format", "csv", "--output", str(target),
                        "--json"))
    assert summary["rows"] == 5
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert rows[3]["epsilon"] == "1/1" and rows[3]["analyst"] == "alice"


def test_ledger_verify_names_the_first_bad_row(home):
    import sqlite3

    _grant()
    path = home / "data" / "statcurator" / "ledger.db"
    with sqlite3.connect(path) as raw:
        raw.execute("DROP TRIGGER ledger_append_only_update")
        raw.execute("UPDATE ledger SET grant_total = 'pure:100/1' WHERE seq = 3")
    raw.close()
    r = cli("ledger", "verify", "--json")
    assert r.exit_code == 2 and _json(r)["error"] == "LedgerTamperedError"
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", "--json", COUNT)
    assert r.exit_code == 2 and "tampered" in _json(r)["message"]


def test_the_anchor_refuses_a_deleted_or_rolled_back_ledger(home):
    """Deleting the CLI's ledger file, or putting back an older copy, would reset the
    budgets; the anchor kept in the user's state directory notices both."""
    _grant(grant_eps="1")
    path = home / "data" / "statcurator" / "ledger.db"
    backup = path.read_bytes()                     # a copy before spending (WAL checkpointed)
    assert cli("query", "adult", "-e", "1", "--analyst", "alice", COUNT).exit_code == 0
    path.write_bytes(backup)                       # roll back: the budget looks unspent
    for wal in path.parent.glob("ledger.db-*"):
        wal.unlink()
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", "--json", COUNT)
    assert r.exit_code == 2 and "anchor" in _json(r)["message"]
    path.unlink()                                  # delete: a new ledger would be empty
    r = cli("query", "adult", "-e", "1", "--analyst", "alice", "--json", COUNT)
    assert r.exit_code == 2 and "missing" in _json(r)["message"]
    assert "anchors.json" in _json(r)["remedy"]
    assert not path.exists()


def test_releases_list_and_show_again_at_no_cost(home):
    """``releases list`` shows the charged requests and whether each answer is stored;
    ``releases show`` prints a stored answer again, as the query printed it, charging
    nothing; an answer lost between its charge and its release is listed as lost and never
    shown afresh."""
    _grant()
    first = _json(cli("query", "adult", "-e", "0.5", "--analyst", "alice", "--request-id",
                      "r1", "--json", COUNT))
    shown = cli("releases", "show", "r1", "--analyst", "alice", "--json")
    again = _json(shown)
    assert again["replayed"] is True and again["rows"] == first["rows"]
    assert again["budget_remaining"] == first["budget_remaining"] == "ε=2.5"  # nothing spent
    text = cli("releases", "show", "r1", "--analyst", "alice").output
    assert "(replayed: no new cost)" in text and "remaining ε=2.5" in text
    # a charge whose answer was never stored (the curator stopped), and a library user's
    # own answer that is not a query release
    path = home / "data" / "statcurator" / "ledger.db"
    from statcurator.core.measures import PureDP

    with Ledger(path, anchor=None) as led:
        led.charge("alice", "adult", PureDP(1), request_id="lost", query="q", mechanism="m")
        led.charge("alice", "adult", PureDP(1), request_id="own", query="q", mechanism="m")
        led.store_answer("alice", "own", "42")
    listed = _json(cli("releases", "list", "--json"))["releases"]
    assert [(r["request_id"], r["answered"]) for r in listed] == [
        ("own", True), ("lost", False), ("r1", True)]
    assert listed[-1]["cost"] == "ε=0.5" and listed[-1]["query"] == COUNT
    assert _json(cli("releases", "list", "--analyst", "bob", "--json"))["releases"] == []
    assert "NO (lost)" in cli("releases", "list").output
    own = _json(cli("releases", "show", "own", "--analyst", "alice", "--json"))
    assert own == {"request_id": "own", "replayed": True, "answer": 42}
    lost = cli("releases", "show", "lost", "--analyst", "alice", "--json")
    assert lost.exit_code == 2 and _json(lost)["error"] == "AnswerLostError"
    unknown = cli("releases", "show", "r1", "--analyst", "bob", "--json")  # alice's id
    assert unknown.exit_code == 2 and "no request 'r1'" in _json(unknown)["problem"]
    assert "statcurator releases list" in _json(unknown)["remedy"]  # not charge() (Python)
    spent = _json(cli("budget", "show", "--analyst", "alice", "--json"))["grants"][0]
    assert spent["spent"] == "ε=2.5" and spent["charges"] == 3  # shows charged nothing
