"""The configuration (keys, environment overrides, refusals naming key and remedy) and the
command line around the service: analysts add|list|rotate, budget grant, query --server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from statcurator.cli import app
from statcurator.service import ConfigError, ServiceConfig

from .conftest import start_server, write_config

runner = CliRunner()


@pytest.mark.parametrize("doc, env, key", [
    ({"server": {"port": "80"}}, {}, "server.port"),
    ({"server": {"workers": 0}}, {}, "server.workers"),
    ({"server": {"max_body_bytes": 10}}, {}, "server.max_body_bytes"),
    ({"server": {"max_groups": 0}}, {}, "server.max_groups"),
    ({"ledger": {"path": "a.db", "dsn": "postgresql://x/y"}}, {}, "ledger.dsn"),
    ({"ledger": {"dsn": "mysql://x"}}, {}, "ledger.dsn"),
    ({"ledger": {"dsn": "postgresql://x/y", "schema": "my-schema"}}, {}, "ledger.schema"),
    ({"ledger": {"dsn": "postgresql://x/y", "schema": 'a"b'}}, {}, "ledger.schema"),
    ({"engine": {"name": "oracle"}}, {}, "engine.name"),
    ({"queries": {"repeat": "always"}}, {}, "queries.repeat"),
    ({"datasets": [{"name": "a"}]}, {}, "datasets[0].data"),
    ({"datasets": [{"name": "a", "data": "adult", "budget": {"epsilon": -1}}]}, {},
     "datasets[0].budget"),
    ({"datasets": [{"name": "a", "data": "adult", "budget": {"epsiln": 1}}]}, {},
     "datasets[0].budget.epsiln"),
    ({"analysts": {"bob": {"nope": {"epsilon": 1}}}}, {}, "analysts.bob.nope"),
    ({"colour": 1}, {}, "colour"),
    ({}, {"STATCURATOR_SERVER__PORT": "abc"}, "STATCURATOR_SERVER__PORT"),
    ({}, {"STATCURATOR_NOPE__X": "1"}, "STATCURATOR_NOPE__X"),
])
def test_bad_configuration_names_the_key_and_the_remedy(doc, env, key) -> None:
    with pytest.raises(ConfigError) as err:
        ServiceConfig.parse(doc, env=env)
    assert key in str(err.value) and err.value.remedy


def test_environment_overrides_and_the_demo_defaults(tmp_path: Path) -> None:
    cfg = ServiceConfig.load(None, env={"STATCURATOR_SERVER__PORT": "9001",
                                        "STATCURATOR_QUERIES__REPEAT": "stored",
                                        "STATCURATOR_LEDGER": "ignored: not a key override"})
    assert cfg.server.port == 9001 and cfg.repeat == "stored"
    assert cfg.server.host == "127.0.0.1" and cfg.engine == "duckdb"
    assert [d.name for d in cfg.datasets] == ["adult"] and cfg.datasets[0].budget is not None
    path = tmp_path / "c.toml"
    path.write_text('[ledger]\npath = "sub/ledger.db"\n', encoding="utf-8")
    loaded = ServiceConfig.load(path, env={})
    assert loaded.sqlite_path() == tmp_path / "sub" / "ledger.db"
    assert loaded.tokens_path() == tmp_path / "sub" / "ledger.tokens.db"
    with pytest.raises(ConfigError, match="not valid TOML"):
        path.write_text("[server\n", encoding="utf-8")
        ServiceConfig.load(path, env={})


def test_a_bad_configuration_is_refused_at_start(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[server]\nprot = 1\n", encoding="utf-8")
    r = runner.invoke(app, ["serve", "--config", str(path), "--json"])
    assert r.exit_code == 2
    doc = json.loads(r.output)
    assert "server.prot" in doc["problem"] and "server.port" in doc["remedy"]


def test_analysts_commands_and_budget_grant(tmp_path: Path) -> None:
    config = write_config(tmp_path / "curator.toml", "sqlite")
    c = ["--config", str(config), "--json"]
    added = json.loads(runner.invoke(app, ["analysts", "add", "Dora", *c]).output)
    assert added["analyst"] == "dora" and added["token"].startswith("sct_")
    assert added["grants"][0]["total"] == {"epsilon": "1"}  # the configured grant
    r = runner.invoke(app, ["budget", "grant", "--dataset", "adult", "--analyst", "dora",
                            "--epsilon", "3", "--ledger", str(tmp_path / "ledger.db"), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["total"] == "ε=3"
    rotated = json.loads(runner.invoke(app, ["analysts", "rotate", "dora", *c]).output)
    listed = json.loads(runner.invoke(app, ["analysts", "list", *c]).output)
    dora = next(a for a in listed["analysts"] if a["analyst"] == "dora")
    assert dora["tokens_issued"] == 2 and dora["token_hint"] == rotated["token"][:8]
    assert dora["grants"][0]["total"] == {"epsilon": "3"}
    assert rotated["token"] not in json.dumps(listed)
    dup = runner.invoke(app, ["analysts", "add", "DORA", *c])
    assert dup.exit_code == 2 and "rotate" in json.loads(dup.output)["remedy"]
    revoked = json.loads(runner.invoke(app, ["analysts", "revoke", "Dora", *c]).output)
    assert revoked["analyst"] == "dora" and revoked["revoked"] is True
    listed = json.loads(runner.invoke(app, ["analysts", "list", *c]).output)
    dora = next(a for a in listed["analysts"] if a["analyst"] == "dora")
    assert dora["revoked"] is True and dora["grants"][0]["total"] == {"epsilon": "3"}
    text = runner.invoke(app, ["analysts", "list", "--config", str(config)]).output
    assert "REVOKED" in text
    from statcurator.service import CuratorService

    svc = CuratorService.from_config(ServiceConfig.load(config, env={}))
    try:
        assert svc.authenticate(rotated["token"]) is None
    finally:
        svc.close()
    again = json.loads(runner.invoke(app, ["analysts", "rotate", "DORA", *c]).output)
    listed = json.loads(runner.invoke(app, ["analysts", "list", *c]).output)
    assert not next(a for a in listed["analysts"] if a["analyst"] == "dora")["revoked"]
    assert again["analyst"] == "dora"
    nobody = runner.invoke(app, ["analysts", "revoke", "nobody", *c])
    assert nobody.exit_code == 2 and "no analyst 'nobody'" in json.loads(nobody.output)["problem"]


@pytest.mark.slow
def test_query_against_a_server_prints_what_the_local_command_prints(tmp_path: Path) -> None:
    config = write_config(tmp_path / "curator.toml", "sqlite")
    sql = "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"
    with start_server(config) as server:
        args = ["query", "--server", server.url, "--token", server.admin_token,
                "--epsilon", "0.5"]
        dry = runner.invoke(app, [*args, "--dry-run", "--json", sql])
        doc = json.loads(dry.output)
        assert doc["dry_run"] and doc["accuracy"][0]["halfwidth"] == 6.0
        assert doc["budget"]["grant_remaining"] == "ε=1"
        out = runner.invoke(app, [*args, "--json", "--request-id", "r1", sql])
        remote = json.loads(out.output)
        again = json.loads(runner.invoke(app, [*args, "--json", "--request-id", "r1", sql]).output)
        text = runner.invoke(app, [*args, sql]).output
        bad = runner.invoke(app, [*args[:4], "sct_nope", "--epsilon", "1", "--json", sql])
    local = json.loads(runner.invoke(app, ["query", "adult", "--epsilon", "0.5", "--ledger",
                                           ":memory:", "--json", sql]).output)
    assert set(remote) == set(local)
    assert remote["analyst"] == "admin" and remote["budget_remaining"] == "ε=0.5"
    assert again["replayed"] is True and again["rows"] == remote["rows"]
    assert "DP release: 2 row(s), cost ε=0.5" in text and "n interval" in text
    assert bad.exit_code == 2 and "token" in json.loads(bad.output)["problem"]


@pytest.mark.parametrize("args, flag", [
    (["query", "--analyst", "bob", "SELECT COUNT(*) FROM adult"], "--analyst"),
    (["query", "--ledger", "x.db", "SELECT COUNT(*) FROM adult"], "--ledger"),
    (["query", "--metadata", "m.toml", "SELECT COUNT(*) FROM adult"], "--metadata"),
    (["query", "--engine", "spark", "SELECT COUNT(*) FROM adult"], "--engine"),
    (["query", "--engine", "duckdb", "SELECT COUNT(*) FROM adult"], "--engine"),
    (["query", "--input-separator", ";", "SELECT COUNT(*) FROM adult"], "--input-separator"),
    (["budget", "show", "--analyst", "bob"], "--analyst"),
    (["budget", "history", "--ledger", "x.db"], "--ledger"),
    (["releases", "list", "--analyst", "bob"], "--analyst"),
    (["releases", "show", "r1", "--ledger", "x.db"], "--ledger"),
])
def test_options_the_server_would_ignore_are_refused(args, flag) -> None:
    """With --server the token is the analyst and the server has its own ledger, data and
    engine: an option that says otherwise is refused, before anything is sent (the URL below
    answers nothing: an ignored option would end in "cannot reach the server")."""
    server = ["--server", "http://127.0.0.1:9", "--token", "sct_x", "--json"]
    extra = ["--epsilon", "1"] if args[0] == "query" else []
    r = runner.invoke(app, [*args[:-1], *server, *extra, args[-1]] if args[0] == "query"
                      else [*args, *server])
    assert r.exit_code == 2
    doc = json.loads(r.output)
    assert doc["problem"].startswith(f"{flag} cannot be used with --server")
    assert doc["remedy"].startswith(f"drop {flag}")
    # the control: the same command without the option does try the server
    plain = [a for i, a in enumerate(args) if a != flag and (i == 0 or args[i - 1] != flag)]
    r = runner.invoke(app, [*plain[:-1], *server, *extra, plain[-1]] if args[0] == "query"
                      else [*plain, *server])
    assert r.exit_code == 2 and "cannot reach the server" in json.loads(r.output)["problem"]


@pytest.mark.slow
def test_budget_and_releases_against_a_server(tmp_path: Path) -> None:
    """An analyst's own grants, charges and stored answers from a running server, as the
    local commands show them from the server's ledger; and a server's refusal whose remedy
    names a request field reaches the command line as its flag."""
    config = write_config(tmp_path / "curator.toml", "sqlite")
    sql = "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"
    with start_server(config) as server:
        c = ["--config", str(config), "--json"]
        token = json.loads(runner.invoke(app, ["analysts", "add", "dora", *c]).output)["token"]
        remote = ["--server", server.url, "--token", token]
        q = runner.invoke(app, ["query", *remote, "--epsilon", "0.25", "--request-id", "r1",
                                "--json", sql])
        assert q.exit_code == 0, q.output
        shown = json.loads(runner.invoke(app, ["budget", "show", *remote, "--json"]).output)
        history = json.loads(runner.invoke(app, ["budget", "history", *remote,
                                                 "--json"]).output)
        other = json.loads(runner.invoke(app, ["budget", "show", *remote, "--dataset",
                                               "nope", "--json"]).output)
        text = runner.invoke(app, ["budget", "show", *remote]).output
        listed = json.loads(runner.invoke(app, ["releases", "list", *remote, "--json"]).output)
        replay = json.loads(runner.invoke(app, ["releases", "show", "r1", *remote,
                                                "--json"]).output)
        missing = runner.invoke(app, ["releases", "show", "r2", *remote, "--json"])
        refused = runner.invoke(app, ["query", *remote, "--epsilon", "0.1", "--json",
                                      "SELECT age, COUNT(*) FROM adult GROUP BY age"])
        after = json.loads(runner.invoke(app, ["budget", "show", *remote, "--json"]).output)
    ledger = ["--ledger", str(tmp_path / "ledger.db"), "--json"]
    local = json.loads(runner.invoke(app, ["budget", "show", "--analyst", "dora",
                                           *ledger]).output)
    local_history = json.loads(runner.invoke(app, ["budget", "history", "--analyst", "dora",
                                                   *ledger]).output)
    assert shown["analyst"] == "dora" and len(shown["grants"]) == 1
    mine, theirs = shown["grants"][0], local["grants"][0]
    for key in ("dataset", "kind", "total", "spent", "remaining", "charges", "exhausted"):
        assert mine[key] == theirs[key], key
    assert mine["spent"] == "ε=0.25" and mine["dataset_remaining"] == "ε=9.75"
    assert other["grants"] == []
    assert "grants of dora" in text and "ε=0.75" in text
    events = [(e["event"], e["amount"], e["request_id"]) for e in history["events"]]
    assert events == [("grant set", "ε=1", None), ("charge", "ε=0.25", "r1")]
    assert events == [(e["event"], e["amount"], e["request_id"])
                      for e in local_history["events"]]
    # the server's remedy names the request field "delta"; the command line says --delta
    doc = json.loads(refused.output)
    assert refused.exit_code == 2 and "--delta 1e-6" in doc["remedy"]
    assert '"delta"' not in doc["remedy"]
    assert after["grants"][0]["spent"] == "ε=0.25"  # neither the refusal nor the replay
    # charged anything
    assert [(r["request_id"], r["answered"], r["cost"]) for r in listed["releases"]] == [
        ("r1", True, "ε=0.25")]
    assert replay["replayed"] is True and replay["rows"] == json.loads(q.output)["rows"]
    assert replay["budget_remaining"] == "ε=0.75"
    assert missing.exit_code == 2 and "no request 'r2'" in json.loads(missing.output)["problem"]
    assert "statcurator releases list --server" in json.loads(missing.output)["remedy"]


def test_ledger_commands_take_the_service_configuration(ledger_kind, tmp_path: Path) -> None:
    """budget, releases and ledger commands reach the ledger a service configuration names,
    a PostgreSQL one too (which has no file for --ledger), from any machine with the file."""
    kind, dsn = ledger_kind
    config = write_config(tmp_path / "curator.toml", kind, dsn)
    c = ["--config", str(config), "--json"]
    added = json.loads(runner.invoke(app, ["analysts", "add", "erin", *c]).output)
    assert added["grants"][0]["total"] == {"epsilon": "1"}
    r = runner.invoke(app, ["budget", "grant", "--dataset", "adult", "--analyst", "erin",
                            "--epsilon", "2", *c])
    assert r.exit_code == 0, r.output
    granted = json.loads(r.output)
    assert granted["total"] == "ε=2" and (kind != "postgres" or "postgresql" in granted["ledger"])
    shown = json.loads(runner.invoke(app, ["budget", "show", "--analyst", "erin", *c]).output)
    assert [(g["dataset"], g["total"]) for g in shown["grants"]] == [("adult", "ε=2")]
    assert shown["datasets"][0]["total"] == "ε=10"
    history = json.loads(runner.invoke(app, ["budget", "history", *c]).output)["events"]
    assert [e["event"] for e in history][-2:] == ["grant set", "grant set"]
    verified = json.loads(runner.invoke(app, ["ledger", "verify", *c]).output)
    assert verified["ok"] is True and verified["rows"] >= 4
    exported = runner.invoke(app, ["ledger", "export", "--config", str(config)]).output
    assert len(exported.splitlines()) == verified["rows"]
    assert json.loads(runner.invoke(app, ["releases", "list", *c]).output)["releases"] == []
    both = runner.invoke(app, ["budget", "show", "--ledger", str(tmp_path / "x.db"), *c])
    assert both.exit_code == 2 and "--ledger and --config" in json.loads(both.output)["problem"]


def test_ledger_commands_with_config_never_create_what_they_only_read(
        ledger_kind, tmp_path: Path, monkeypatch) -> None:
    """A mistyped PostgreSQL schema (or a SQLite file that is not there) is reported
    missing by the reading commands, not created and then verified as an empty ledger; a
    configuration that names no ledger, with $STATCURATOR_LEDGER asking for a throwaway one,
    is refused instead of granting into memory; and a grant names a dataset and an analyst
    the service knows."""
    kind, dsn = ledger_kind
    config = write_config(tmp_path / "curator.toml", kind, dsn)
    for args in (["ledger", "verify"], ["budget", "show"], ["releases", "list"]):
        r = runner.invoke(app, [*args, "--config", str(config), "--json"])
        assert r.exit_code == 2, (args, r.output)
        doc = json.loads(r.output)
        assert "there is no ledger" in doc["problem"] and "--config" in doc["remedy"]
    if kind == "postgres":  # nothing was created: the schema is still missing
        import psycopg

        with psycopg.connect(dsn, autocommit=True) as conn:
            schema = conn.execute("SELECT to_regclass(%s)", (
                f'"{ServiceConfig.load(config, env={}).ledger.schema}".ledger',)).fetchone()
        assert schema[0] is None
    else:
        assert not (tmp_path / "ledger.db").exists()
    c = ["--config", str(config), "--json"]
    runner.invoke(app, ["analysts", "add", "fay", *c])
    for args, expected in ((["--dataset", "adlt", "--analyst", "fay"], "no dataset 'adlt'"),
                           (["--dataset", "adult", "--analyst", "fy"], "no analyst 'fy'")):
        r = runner.invoke(app, ["budget", "grant", *args, "--epsilon", "1", *c])
        assert r.exit_code == 2 and expected in json.loads(r.output)["problem"], r.output
    bare = tmp_path / "bare.toml"
    bare.write_text('[server]\nport = 0\n[[datasets]]\nname = "adult"\ndata = "adult"\n',
                    encoding="utf-8")
    monkeypatch.setenv("STATCURATOR_LEDGER", ":memory:")
    r = runner.invoke(app, ["budget", "set", "--dataset", "adult", "--epsilon", "1",
                            "--config", str(bare), "--json"])
    assert r.exit_code == 2 and "in-memory" in json.loads(r.output)["problem"]
    assert not list(Path.cwd().glob(":memory:*"))  # no store file named after the ledger
    throwaway = ServiceConfig.load(bare, env={})
    assert str(throwaway.tokens_path()) == ":memory:"  # a throwaway ledger's tokens too


def test_revoking_from_the_command_line_needs_only_the_token_store(tmp_path: Path) -> None:
    """An emergency revocation works where the service's data files are not (another
    machine); the last admin is refused in the command line's terms."""
    config = write_config(tmp_path / "curator.toml", "sqlite")
    c = ["--config", str(config), "--json"]
    admin = json.loads(runner.invoke(app, ["analysts", "add", "boss", "--role", "admin",
                                           *c]).output)
    runner.invoke(app, ["analysts", "add", "gus", *c])
    gone = write_config(tmp_path / "elsewhere.toml", "sqlite", datasets=(
        {"name": "sales", "data": str(tmp_path / "missing.csv")},))
    r = runner.invoke(app, ["analysts", "revoke", "gus", "--config", str(gone), "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["revoked"] is True, r.output
    last = runner.invoke(app, ["analysts", "revoke", "boss", *c])
    doc = json.loads(last.output)
    assert last.exit_code == 2 and "last admin" in doc["problem"]
    assert "statcurator analysts add NAME --role admin" in doc["remedy"]
    assert "POST" not in doc["remedy"]
    assert admin["role"] == "admin"


@pytest.mark.parametrize("args", [
    ["query", "--epsilon", "1", "adult", "SELECT COUNT(*) FROM adult"],
    ["budget", "show"], ["budget", "history"], ["releases", "list"], ["releases", "show", "r1"],
])
def test_a_token_without_a_server_is_refused_not_ignored(args, tmp_path: Path,
                                                          monkeypatch) -> None:
    """``--token`` on the command line without ``--server`` would be ignored (the local
    ledger is used): refused, even when $STATCURATOR_TOKEN holds the same value. A token from
    $STATCURATOR_TOKEN alone, which is set for every command, is not (the control: the
    command goes on to its own, other error)."""
    ledger = ["--ledger", str(tmp_path / "none.db"), "--json"]
    monkeypatch.delenv("STATCURATOR_TOKEN", raising=False)
    r = runner.invoke(app, [*args, "--token", "sct_x", *ledger])
    assert r.exit_code == 2 and json.loads(r.output)["problem"].startswith(
        "--token is read only with --server"), r.output
    monkeypatch.setenv("STATCURATOR_TOKEN", "sct_x")
    r = runner.invoke(app, [*args, "--token", "sct_x", *ledger])  # the same, but typed
    assert r.exit_code == 2 and "--token is read only" in json.loads(r.output)["problem"]
    r = runner.invoke(app, [*args, *ledger])
    assert "--token" not in r.output, r.output


def test_analysts_commands_create_no_store_by_mistake(ledger_kind, tmp_path: Path,
                                                      monkeypatch) -> None:
    """analysts list|revoke|rotate on a configuration whose token store does not exist (a
    mistyped path or schema) say so and create nothing; analysts commands refuse a
    throwaway in-memory ledger, whose tokens would be forgotten at once, and so does serve
    with several workers (each would have its own)."""
    kind, dsn = ledger_kind
    (tmp_path / "sub").mkdir()
    config = write_config(tmp_path / "sub" / "curator.toml", kind, dsn)
    c = ["--config", str(config), "--json"]
    for args in (["list"], ["revoke", "x"], ["rotate", "x"]):
        r = runner.invoke(app, ["analysts", *args, *c])
        assert r.exit_code == 2, (args, r.output)
        doc = json.loads(r.output)
        assert "there is no token store" in doc["problem"], doc
        assert f"--config {config}" in doc["remedy"]
    if kind == "sqlite":
        assert sorted(p.name for p in (tmp_path / "sub").iterdir()) == ["curator.toml"]
    else:
        import psycopg

        schema = ServiceConfig.load(config, env={}).ledger.schema
        with psycopg.connect(dsn, autocommit=True) as conn:
            found = conn.execute("SELECT count(*) FROM information_schema.schemata WHERE "
                                 "schema_name = %s", (schema,)).fetchone()[0]
        assert found == 0
    bare = tmp_path / "bare.toml"
    bare.write_text('[server]\nport = 0\n[[datasets]]\nname = "adult"\ndata = "adult"\n',
                    encoding="utf-8")
    monkeypatch.setenv("STATCURATOR_LEDGER", ":memory:")
    r = runner.invoke(app, ["analysts", "add", "bob", "--config", str(bare), "--json"])
    assert r.exit_code == 2 and "forgotten at once" in json.loads(r.output)["problem"]
    r = runner.invoke(app, ["serve", "--config", str(bare), "--workers", "2", "--json"])
    assert r.exit_code == 2 and "several workers" in json.loads(r.output)["problem"]
    assert not list(Path.cwd().glob(":memory:*"))


def test_analysts_list_writes_nothing_and_reads_no_data_file(tmp_path: Path) -> None:
    """analysts list is a reading command: the ledger's rows are the same after it (no grant
    or budget initialized), and a dataset whose file is not on this machine does not stop
    it."""
    from statcurator.accounting import Ledger

    config = write_config(tmp_path / "curator.toml", "sqlite")
    c = ["--config", str(config), "--json"]
    runner.invoke(app, ["analysts", "add", "hal", *c])
    with Ledger(tmp_path / "ledger.db") as led:
        before = len(led.entries())
    elsewhere = write_config(tmp_path / "elsewhere.toml", "sqlite", datasets=(
        {"name": "adult", "data": "adult", "grant": {"epsilon": 1}},
        {"name": "sales", "data": str(tmp_path / "missing.csv"), "budget": {"epsilon": 5},
         "grant": {"epsilon": 2}}))
    import hashlib

    def digest(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()

    import sqlite3

    with sqlite3.connect(tmp_path / "ledger.tokens.db") as conn:  # a store a reader must
        conn.execute("PRAGMA journal_mode=DELETE")                 # not "repair"
        conn.execute("DROP TABLE statcurator_datasets")
    before_store = digest(tmp_path / "ledger.tokens.db")
    r = runner.invoke(app, ["analysts", "list", "--config", str(elsewhere), "--json"])
    assert r.exit_code == 0, r.output
    # not a byte of the store written: no table re-created, no journal mode changed
    assert digest(tmp_path / "ledger.tokens.db") == before_store
    listed = {a["analyst"]: a for a in json.loads(r.output)["analysts"]}
    assert listed["hal"]["grants"][0]["total"] == {"epsilon": "1"}
    with Ledger(tmp_path / "ledger.db") as led:
        assert len(led.entries()) == before


def test_every_throwaway_combination_is_refused(tmp_path: Path) -> None:
    """A ledger in memory with a token file, or a token store in memory with a ledger file:
    analysts would be forgotten (or each worker would have its own store)."""
    mixed = [('path = ":memory:"\ntokens = "%s"' % (tmp_path / "t.db")),
             ('path = "%s"\ntokens = ":memory:"' % (tmp_path / "l.db"))]
    for ledger in mixed:
        cfg = tmp_path / "c.toml"
        cfg.write_text(f'[server]\nport = 0\n[ledger]\n{ledger}\n[[datasets]]\n'
                       'name = "adult"\ndata = "adult"\n', encoding="utf-8")
        r = runner.invoke(app, ["analysts", "add", "ivy", "--config", str(cfg), "--json"])
        assert r.exit_code == 2 and "forgotten" in json.loads(r.output)["problem"], ledger
        r = runner.invoke(app, ["serve", "--config", str(cfg), "--workers", "2", "--json"])
        assert r.exit_code == 2 and "several workers" in json.loads(r.output)["problem"]
