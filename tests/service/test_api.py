"""The HTTP API in process, on a SQLite and a PostgreSQL ledger: roles, isolation between
analysts, debit before release, idempotent request ids, stored answers."""

from __future__ import annotations

from fractions import Fraction

import pytest

from .conftest import Setup

COUNT = "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex"


def test_openapi_is_published_and_names_the_bearer_scheme(api) -> None:
    doc = api.get("/openapi.json").json()
    assert {"/v1/queries", "/v1/queries/dry-run", "/v1/datasets", "/v1/budget",
            "/v1/releases/{request_id}", "/v1/admin/analysts"} <= set(doc["paths"])
    assert any(s.get("scheme") == "bearer" for s in doc["components"]["securitySchemes"].values())
    assert api.get("/healthz").json()["ok"] is True


def test_schema_shows_declared_metadata_only(api, setup: Setup) -> None:
    ds = api.get("/v1/datasets", headers=setup.headers("alice")).json()["datasets"]
    assert [d["name"] for d in ds] == ["adult"]
    cols = {c["name"]: c for c in ds[0]["columns"]}
    assert cols["age"]["bounds"] == ["0", "120"] and cols["sex"]["categories"]
    # no private value: no row count unless declared, no min/max read from the data
    assert ds[0]["rows"] is None and "min" not in str(cols["age"])
    one = api.get("/v1/datasets/adult", headers=setup.headers("alice")).json()
    assert one["budget"]["analyst"]["remaining"] == {"epsilon": "1"}
    assert "dataset" not in one["budget"]  # an analyst sees the dataset's remaining only
    r = api.get("/v1/datasets/nope", headers=setup.headers("alice"))
    assert r.status_code == 404 and "adult" in r.json()["remedy"]


def test_dry_run_spends_nothing_and_run_debits_before_answering(api, setup: Setup) -> None:
    h = setup.headers("alice")
    before = setup.ledger_rows()
    dry = api.post("/v1/queries/dry-run", json={"sql": COUNT, "epsilon": "1/4"}, headers=h)
    assert dry.status_code == 200 and dry.json()["cost"] == {"epsilon": "1/4"}
    assert dry.json()["accuracy"][0]["halfwidth"] == pytest.approx(12.0)
    assert setup.ledger_rows() == before
    r = api.post("/v1/queries", json={"sql": COUNT, "epsilon": "1/4"}, headers=h)
    out = r.json()
    assert r.status_code == 200 and out["replayed"] is False
    assert out["release"]["columns"] == ["sex", "n", "n_low", "n_high"]
    assert out["budget"]["analyst"]["remaining"] == {"epsilon": "3/4"}
    led = setup.svc.curator.ledger
    charges = led.charges(analyst="alice")
    assert len(charges) == 1 and charges[0].answered and charges[0].cost.epsilon == Fraction(1, 4)


def test_idempotency_key_returns_the_stored_answer_charged_once(api, setup: Setup) -> None:
    h = setup.headers("alice", **{"Idempotency-Key": "req-1"})
    first = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5}, headers=h).json()
    again = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5}, headers=h).json()
    assert again["replayed"] is True and again["release"]["rows"] == first["release"]["rows"]
    assert setup.svc.curator.ledger.status("alice", "adult").spent.epsilon == Fraction(1, 2)
    stored = api.get("/v1/releases/req-1", headers=setup.headers("alice")).json()
    assert stored["release"]["rows"] == first["release"]["rows"]
    # the same key for another query is a conflict, not fresh noise
    r = api.post("/v1/queries", json={"sql": "SELECT COUNT(*) FROM adult", "epsilon": 0.5},
                 headers=h)
    assert r.status_code == 409 and r.headers["content-type"] == "application/problem+json"
    # request ids are scoped to the analyst: bob's req-1 is his own, and alice's is hidden
    assert api.get("/v1/releases/req-1", headers=setup.headers("bob")).status_code == 404
    bob = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5},
                   headers=setup.headers("bob", **{"Idempotency-Key": "req-1"})).json()
    assert bob["replayed"] is False


def test_analysts_see_only_their_own_budgets_and_history(api, setup: Setup) -> None:
    api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.25}, headers=setup.headers("bob"))
    alice = api.get("/v1/budget", headers=setup.headers("alice")).json()
    assert alice["analyst"] == "alice" and [g["charges"] for g in alice["grants"]] == [0]
    text = str(api.get("/v1/budget/history", headers=setup.headers("alice")).json())
    text += str(api.get("/v1/releases", headers=setup.headers("alice")).json())
    assert "bob" not in text and COUNT not in text
    assert len(api.get("/v1/releases", headers=setup.headers("bob")).json()["releases"]) == 1


def test_an_analyst_cannot_count_the_others_rows(api, setup: Setup) -> None:
    """Review helper-30, finding 5: every release's certificate gave the charge's ledger
    position (seq) and the ledger's location, and the history the positions of one's own
    rows: between two of her queries alice counted bob's charges, answers and grants. The
    analyst's view hides both; the admin's keeps them."""
    def positions(who: str, rid: str) -> tuple[dict, dict]:
        run = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.125},
                       headers=setup.headers(who, **{"Idempotency-Key": rid})).json()
        stored = api.get(f"/v1/releases/{rid}", headers=setup.headers(who)).json()
        return (run["release"]["provenance"]["certificate"]["ledger"],
                stored["release"]["provenance"]["certificate"]["ledger"])

    for seen in positions("alice", "a1"):
        assert "seq" not in seen and "location" not in seen and seen["request_id"] == "a1"
    # an estimate's stored answer keeps its certificate elsewhere (helper-34)
    r = api.post("/v1/estimates", json={"dataset": "adult", "estimator": "median",
                                        "column": "age", "epsilon": 0.125},
                 headers=setup.headers("alice", **{"Idempotency-Key": "e1"}))
    assert r.status_code == 200
    stored = api.get("/v1/releases/e1", headers=setup.headers("alice")).text
    assert '"certificate"' in stored and '"seq"' not in stored and '"location"' not in stored
    api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.125}, headers=setup.headers("bob"))
    events = api.get("/v1/budget/history", headers=setup.headers("alice")).json()["events"]
    assert events and all("seq" not in e for e in events)
    for seen in positions("admin", "m1"):  # control: the curator sees where the row is
        assert seen["seq"] >= 1 and "location" in seen


def test_no_request_field_names_an_analyst(api, setup: Setup) -> None:
    before = setup.ledger_rows()
    r = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5, "analyst": "bob"},
                 headers=setup.headers("alice"))
    assert r.status_code == 422 and "token" in r.json()["remedy"]
    assert setup.ledger_rows() == before


def test_admin_endpoints_refuse_analysts(api, setup: Setup) -> None:
    h = setup.headers("alice")
    for method, path, body in (("get", "/v1/admin/analysts", None),
                               ("get", "/v1/admin/ledger", None),
                               ("put", "/v1/admin/analysts/alice/budgets/adult", {"epsilon": 9}),
                               ("put", "/v1/admin/datasets/adult/budget", {"epsilon": 99}),
                               ("post", "/v1/admin/analysts", {"name": "mallory"})):
        r = api.request(method, path, json=body, headers=h)
        assert r.status_code == 403, path
    assert setup.svc.curator.ledger.status("alice", "adult").total.epsilon == 1


def test_the_curator_grants_rotates_and_reads_the_ledger(api, setup: Setup) -> None:
    h = setup.headers("admin")
    api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5}, headers=setup.headers("alice"))
    g = api.put("/v1/admin/analysts/Alice/budgets/adult", json={"epsilon": 3}, headers=h)
    assert g.status_code == 200 and g.json()["remaining"] == {"epsilon": "5/2"}
    new = api.post("/v1/admin/analysts/alice/rotate", headers=h).json()["token"]
    assert api.get("/v1/me", headers=setup.headers("alice")).status_code == 401
    me = {"Authorization": f"Bearer {new}"}
    budget = api.get("/v1/budget", headers=me).json()["grants"][0]
    assert budget["spent"] == {"epsilon": "1/2"}  # rotation kept what was spent
    analysts = api.get("/v1/admin/analysts", headers=h).json()["analysts"]
    assert {a["analyst"] for a in analysts} == {"admin", "alice", "bob"}
    assert all(len(a["token_hint"]) == 8 for a in analysts)
    assert new not in str(analysts) and setup.tokens["bob"] not in str(analysts)
    rows = api.get("/v1/admin/ledger", headers=h).json()["entries"]
    assert any(e["type"] == "charge" and e["analyst"] == "alice" for e in rows)
    assert api.get("/v1/admin/ledger/verify", headers=h).json()["ok"] is True
    d = api.put("/v1/admin/datasets/adult/budget", json={"epsilon": 20}, headers=h).json()
    assert d["total"] == {"epsilon": "20"}


def test_an_analyst_rotates_their_own_token(api, setup: Setup) -> None:
    new = api.post("/v1/me/rotate", headers=setup.headers("bob")).json()["token"]
    assert api.get("/v1/me", headers={"Authorization": f"Bearer {new}"}).json()["analyst"] == "bob"
    r = api.post("/v1/admin/analysts/alice/rotate", headers={"Authorization": f"Bearer {new}"})
    assert r.status_code == 403


def test_the_curator_revokes_an_analyst(api, setup: Setup) -> None:
    """A revoked token stops working at once for every endpoint; the analyst's spent budget
    stays spent (a new identity is not made, nothing is refunded); rotating issues a new
    token; only the admin revokes, and never the last admin with a working token."""
    h = setup.headers("admin")
    alice = setup.headers("alice")
    assert api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5},
                    headers=alice).status_code == 200
    # an analyst cannot revoke anyone, not even another analyst
    assert api.post("/v1/admin/analysts/bob/revoke", headers=alice).status_code == 403
    r = api.post("/v1/admin/analysts/Alice/revoke", headers=h)
    assert r.status_code == 200 and r.json() == {"analyst": "alice", "revoked": True}
    for method, path in (("GET", "/v1/me"), ("GET", "/v1/budget"), ("POST", "/v1/me/rotate"),
                         ("GET", "/v1/releases")):
        assert api.request(method, path, headers=alice).status_code == 401, path
    q = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.1}, headers=alice)
    assert q.status_code == 401
    listed = {a["analyst"]: a for a in api.get("/v1/admin/analysts", headers=h).json()["analysts"]}
    assert listed["alice"]["revoked"] is True and listed["bob"]["revoked"] is False
    assert listed["alice"]["grants"][0]["spent"] == {"epsilon": "1/2"}
    assert api.post("/v1/admin/analysts/nobody/revoke", headers=h).status_code == 404
    # the last admin with a working token cannot be revoked; with a second admin it can
    last = api.post("/v1/admin/analysts/admin/revoke", headers=h)
    assert last.status_code == 409 and "POST /v1/admin/analysts" in last.json()["remedy"]
    assert "statcurator" not in last.json()["remedy"]  # the API caller's terms
    new = api.post("/v1/admin/analysts/alice/rotate", headers=h).json()["token"]
    me = {"Authorization": f"Bearer {new}"}
    assert api.get("/v1/budget", headers=me).json()["grants"][0]["spent"] == {"epsilon": "1/2"}
    second = api.post("/v1/admin/analysts", json={"name": "root", "role": "admin"},
                      headers=h).json()["token"]
    assert api.post("/v1/admin/analysts/admin/revoke", headers=h).status_code == 200
    assert api.get("/v1/me", headers=h).status_code == 401
    assert api.get("/v1/me", headers={"Authorization": f"Bearer {second}"}).status_code == 200


def test_a_token_authenticated_before_its_revocation_cannot_undo_it(api, setup: Setup) -> None:
    """The attack: a thief's request with alice's token is authenticated, the curator revokes
    alice, then the request rotates "its own" token and gets a working one. One's own
    rotation replaces only the token the request came with: refused (401), still revoked.
    The control: the same rotation with the token still current succeeds."""
    svc = setup.svc
    thief = svc.authenticate(setup.tokens["alice"])
    admin = svc.authenticate(setup.tokens["admin"])
    assert svc.revoke(admin, "alice") == {"analyst": "alice", "revoked": True}
    from statcurator.service._problems import Unauthorized

    with pytest.raises(Unauthorized):
        svc.rotate(thief, thief.name)
    listed = {a["analyst"]: a["revoked"] for a in svc.store.list()}
    assert listed["alice"] is True
    # the curator's own rotation of someone else re-enables, as intended
    fresh = svc.rotate(admin, "alice")
    assert svc.authenticate(fresh).name == "alice"
    # control: bob's own rotation with his current token works, and only once
    bob = svc.authenticate(setup.tokens["bob"])
    new = svc.rotate(bob, bob.name)
    assert svc.authenticate(new).name == "bob" and svc.authenticate(setup.tokens["bob"]) is None
    with pytest.raises(Unauthorized):
        svc.rotate(bob, bob.name)  # the same (now rotated) token again
    # over HTTP: a stale token's self-rotation is 401
    r = api.post("/v1/me/rotate", headers=setup.headers("bob"))
    assert r.status_code == 401


def test_a_revoked_admin_s_request_in_flight_cannot_take_another_identity(
        api, setup: Setup) -> None:
    """The attack: mallory's admin request is authenticated, the curator revokes mallory,
    then the request rotates the curator's token (taking the service over) or creates a
    new admin for itself. Every change of the token store asked by an admin is conditional,
    in the same guarded statement, on the asking token still being a working admin token:
    both refused (401), the curator's token still works. The control: the curator's own
    token, still working, does both."""
    from statcurator.service._problems import Unauthorized

    svc = setup.svc
    boss = svc.authenticate(setup.tokens["admin"])
    _, mallory_token = svc.add_analyst(boss, "mallory", role="admin")
    thief = svc.authenticate(mallory_token)
    assert svc.revoke(boss, "mallory")["revoked"] is True
    with pytest.raises(Unauthorized):
        svc.rotate(thief, "admin")
    with pytest.raises(Unauthorized):
        svc.add_analyst(thief, "mallory2", role="admin")
    with pytest.raises(Unauthorized):
        svc.rotate(thief, "bob")
    # nor revoke anyone, nor change budgets or datasets (checked again before the change)
    with pytest.raises(Unauthorized):
        svc.revoke(thief, "bob")
    with pytest.raises(Unauthorized):
        svc.grant(thief, "bob", "adult", {"epsilon": 100})
    with pytest.raises(Unauthorized):
        svc.set_dataset_budget(thief, "adult", {"epsilon": 1000})
    with pytest.raises(Unauthorized):
        svc.register(thief, {"name": "x", "data": "adult"})
    assert svc.curator.ledger.status("bob", "adult").total.epsilon == 1
    assert svc.authenticate(setup.tokens["admin"]).name == "admin"
    assert svc.store.get("mallory2") is None
    assert svc.authenticate(setup.tokens["bob"]).name == "bob"
    # the control: a working admin token does the same
    fresh = svc.rotate(boss, "bob")
    assert svc.authenticate(fresh).name == "bob"
    _, token = svc.add_analyst(boss, "carol")
    assert svc.authenticate(token).name == "carol"
    # over HTTP too: the revoked admin's token is refused before anything
    r = api.post("/v1/admin/analysts/admin/rotate", headers={"Authorization":
                                                              f"Bearer {mallory_token}"})
    assert r.status_code == 401


def test_a_rotation_retried_after_a_dropped_reply_is_not_refused(setup: Setup,
                                                                 monkeypatch) -> None:
    """One's own rotation is a compare-and-swap on the old token; a retry of a statement
    that was applied (the connection dropped after the commit, and the store reconnects and
    runs it again) finds the new token in place and succeeds, instead of locking the analyst
    out (the old token dead, the new one never returned)."""
    import statcurator.service._store as store_module

    store = setup.svc.store
    bob = setup.svc.authenticate(setup.tokens["bob"])
    fixed = store_module._new_token()
    monkeypatch.setattr(store_module, "_new_token", lambda: fixed)
    assert store.rotate("bob", replacing=bob.token_digest) == fixed  # applied
    assert store.rotate("bob", replacing=bob.token_digest) == fixed  # the retry: accepted
    assert setup.svc.authenticate(fixed).name == "bob"
    monkeypatch.setattr(store_module, "_new_token", lambda: "sct_" + "y" * 43)
    with pytest.raises(store_module.StoreRefusal):  # a different rotation: refused
        store.rotate("bob", replacing=bob.token_digest)


def _losing_replies(tmp_path, applied_then_lost):  # type: ignore[no-untyped-def]
    """A SQLite token store whose connection, while ``lost["armed"]``, applies the first
    statement ``applied_then_lost(sql)`` selects and then reports the connection dropped
    (psycopg's error: the one the store retries once after reconnecting)."""
    import statcurator.service._store as store_module

    psycopg = pytest.importorskip("psycopg")
    store = store_module.ServiceStore.sqlite(tmp_path / "t.db")
    real = store._connect
    lost = {"armed": False}

    class Dropping:
        def __init__(self, conn) -> None:  # type: ignore[no-untyped-def]
            self.conn = conn

        def execute(self, sql: str, *args):  # type: ignore[no-untyped-def]
            out = self.conn.execute(sql, *args)
            if lost["armed"] and applied_then_lost(sql):
                lost["armed"] = False
                raise psycopg.OperationalError("the connection was lost")
            return out

        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(self.conn, name)

    store._connect = lambda: Dropping(real())  # type: ignore[method-assign]
    store._conn = None
    return store, lost


def test_a_change_whose_reply_was_lost_is_not_refused_on_its_retry(tmp_path) -> None:
    """The store reconnects once after a dropped connection and runs the statement again.
    When the first run had been applied (its reply lost), the retry of a new analyst meets
    its own row (a unique key) and returns the token it wrote, and a retried rotation counts
    its token once."""
    store, lost = _losing_replies(tmp_path, lambda sql: sql.split()[0] in ("INSERT", "UPDATE"))
    lost["armed"] = True
    who, token = store.add("carol")
    assert store.authenticate(token).name == "carol"  # the token it returned is the row's
    lost["armed"] = True
    new = store.rotate("carol")
    assert store.authenticate(new).name == "carol"
    assert [a["tokens_issued"] for a in store.list()] == [2]  # once, not twice
    store.close()


def test_a_dataset_registered_by_an_admin_revoked_while_it_loads_is_refused(
        setup: Setup, monkeypatch) -> None:
    """The attack: mallory registers a dataset; while the server reads its file, the curator
    revokes mallory. The token is checked again after the load and the store's insert is
    guarded on it: refused (401), nothing stored. The control: the curator registers."""
    from statcurator.service._problems import Unauthorized

    svc = setup.svc
    boss = svc.authenticate(setup.tokens["admin"])
    _, token = svc.add_analyst(boss, "mallory", role="admin")
    thief = svc.authenticate(token)
    load = svc.curator.register

    def slow_load(*args, **kwargs):  # type: ignore[no-untyped-def]
        svc.revoke(boss, "mallory")  # the revocation lands while the file is read
        return load(*args, **kwargs)

    monkeypatch.setattr(svc.curator, "register", slow_load)
    with pytest.raises(Unauthorized):
        svc.register(thief, {"name": "x", "data": "adult"})
    assert "x" not in [d[0] for d in svc.store.datasets()]
    assert "x" not in svc.curator.tables  # nor served by this worker
    monkeypatch.setattr(svc.curator, "register", load)
    assert svc.register(boss, {"name": "x", "data": "adult"})["name"] == "x"  # not stuck
    assert svc.register(boss, {"name": "y", "data": "adult"})["name"] == "y"
    assert "y" in [d[0] for d in svc.store.datasets()]


def test_a_grant_by_an_admin_revoked_during_its_lookups_is_refused(setup: Setup,
                                                                  monkeypatch) -> None:
    """The dataset lookup of a grant or a budget may load another worker's datasets (a
    while): the token is checked again just before the ledger is written."""
    from statcurator.service._problems import Unauthorized

    svc = setup.svc
    boss = svc.authenticate(setup.tokens["admin"])
    _, token = svc.add_analyst(boss, "mallory", role="admin")
    thief = svc.authenticate(token)
    lookup = svc._known_dataset

    def slow_lookup(dataset):  # type: ignore[no-untyped-def]
        svc.revoke(boss, "mallory")
        return lookup(dataset)

    monkeypatch.setattr(svc, "_known_dataset", slow_lookup)
    with pytest.raises(Unauthorized):
        svc.grant(thief, "bob", "adult", {"epsilon": 100})
    assert svc.curator.ledger.status("bob", "adult").total.epsilon == 1
    monkeypatch.setattr(svc, "_known_dataset", lookup)
    assert svc.grant(boss, "bob", "adult", {"epsilon": 2})["total"] == {"epsilon": "2"}


def test_lost_replies_of_a_dataset_and_a_self_revocation_are_their_own(tmp_path) -> None:
    """A dataset's row and a revocation's marker written by an attempt whose reply was lost
    are this call's own on the retry, even when the retry's guard would now refuse (an admin
    that revoked itself is no longer a working admin)."""
    import statcurator.service._store as store_module

    # a guarded change's reply is lost after its COMMIT, a plain one's after its INSERT
    store, lost = _losing_replies(tmp_path, lambda sql: sql == "COMMIT" or (
        sql.split()[0] == "INSERT" and "WHERE" not in sql))
    _, a = store.add("a", "admin")
    store.add("b", "admin")
    lost["armed"] = True
    store.add_dataset("sales", "sales.csv", None)  # applied, reply lost, retried
    assert store.datasets() == [("sales", "sales.csv", None)]
    lost["armed"] = True
    a_digest = store_module.token_hash(a)
    assert store.revoke("a", by=a_digest) == "revoked"  # applied, lost, retry's guard fails
    assert store.authenticate(a) is None
    store.close()


def test_store_and_driver_errors_never_show_a_password_or_the_store_s_path() -> None:
    """API callers get 503 without the store's location; the PostgreSQL ledger's messages
    show an error's class, not the driver's text (which quotes a malformed DSN whole); a
    password in the DSN's query string is redacted; psycopg missing is a remedy, not a
    traceback."""
    import sys

    from statcurator.core.errors import LedgerError
    from statcurator.service import ServiceConfig
    from statcurator.service._problems import problem
    from statcurator.service._store import StoreError

    status, body = problem(StoreError("the token store (/srv/secret/t.db) failed",
                                      remedy="check ledger.path"))
    assert status == 503 and "/srv/secret" not in str(body) and body["remedy"]
    cfg = ServiceConfig.parse({"ledger": {"dsn": "postgresql://u@h/db?password=s3cret",
                                          "schema": "s"}}, env={})
    assert "s3cret" not in cfg.ledger_location()
    psycopg = pytest.importorskip("psycopg")
    from statcurator.accounting import Ledger, PostgresBackend

    with pytest.raises(LedgerError) as err:
        Ledger(backend=PostgresBackend("postgresql://u:s3cr%zzet@127.0.0.1:1/db"))
    assert "s3cr" not in str(err.value)
    from statcurator.accounting._postgres import table_exists

    sys.modules["psycopg"] = None  # type: ignore[assignment]
    try:
        with pytest.raises(LedgerError, match="psycopg driver"):
            table_exists("postgresql://u@h/db", "s", "ledger")
    finally:
        sys.modules["psycopg"] = psycopg


def test_a_broken_store_is_reported_not_raised_raw(tmp_path) -> None:
    """A file that is not a statcurator token store (a table of another shape): the error
    names the store and says what to check, instead of a raw sqlite3 error (a 500)."""
    import sqlite3

    from statcurator.core.errors import LedgerError
    from statcurator.service._store import ServiceStore

    path = tmp_path / "t.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE statcurator_tokens (x)")
    store = ServiceStore.sqlite(path)
    with pytest.raises(LedgerError, match="token store") as err:
        store.revoke("a")
    assert "statcurator store" in err.value.remedy
    assert not store._conn.in_transaction  # rolled back, nothing held
    store.close()


def test_an_unreachable_database_s_message_never_shows_the_password() -> None:
    pytest.importorskip("psycopg")
    from statcurator.accounting._postgres import table_exists
    from statcurator.core.errors import LedgerError

    for dsn in ("postgresql://u:s3cr%zzet@127.0.0.1:1/db", "postgresql://u:s3cret@127.0.0.1:1/db"):
        with pytest.raises(LedgerError) as err:
            table_exists(dsn, "s", "ledger")
        assert "s3cr" not in str(err.value) and "s3cr" not in (err.value.remedy or "")


def test_the_token_store_reports_a_held_lock_instead_of_waiting_twice(
        tmp_path, monkeypatch) -> None:
    """Another writer holding the SQLite token store: a guarded change waits the busy
    timeout once, then says so (LedgerError, with a remedy), not a raw sqlite3 error after
    twice the wait."""
    import sqlite3
    import time

    import statcurator.service._store as store_module
    from statcurator.core.errors import LedgerError

    monkeypatch.setattr(store_module, "_BUSY_SECONDS", 1)
    path = tmp_path / "t.db"
    store = store_module.ServiceStore.sqlite(path)
    store.add("a", "admin")
    store.add("b", "admin")
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        start = time.monotonic()
        with pytest.raises(LedgerError, match="stayed locked") as err:
            store.revoke("a")
        assert time.monotonic() - start < 5 and err.value.remedy
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store.revoke("a") == "revoked"
    store.close()


def test_two_admins_revoking_each_other_at_once_leave_one(setup: Setup, ledger_kind) -> None:
    """The check "another admin keeps a working token" and the revocation are one guarded
    statement: rounds of two curators (two store connections, as two server processes)
    revoking each other at the same moment always leave exactly one working admin. The
    control: a check made first and a write made after it, interleaved as a race can
    interleave them (both checks, then both writes), leaves none."""
    import threading

    from statcurator.service._store import ServiceStore

    kind, dsn = ledger_kind
    store = setup.svc.store

    def another() -> ServiceStore:
        if kind == "postgres":
            return ServiceStore.postgres(dsn, setup.svc.config.ledger.schema)
        return ServiceStore.sqlite(setup.svc.config.tokens_path())

    def working_admins() -> list[str]:
        return [a["analyst"] for a in store.list() if a["role"] == "admin" and not a["revoked"]]

    def only_working(*names: str) -> None:
        for name in names:
            store.add(name, "admin")
        for other in set(working_admins()) - set(names):
            assert store.revoke(other) == "revoked"

    for round_ in range(12):
        a, b = f"a{round_}", f"b{round_}"
        only_working(a, b)
        s1, s2 = another(), another()
        barrier = threading.Barrier(2)
        outcome: dict[str, str] = {}

        def go(own: ServiceStore, name: str, barrier: threading.Barrier,
               outcome: dict[str, str]) -> None:
            barrier.wait()
            outcome[name] = own.revoke(name)

        threads = [threading.Thread(target=go, args=(s1, b, barrier, outcome)),
                   threading.Thread(target=go, args=(s2, a, barrier, outcome))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        s1.close()
        s2.close()
        assert len(working_admins()) == 1, (round_, outcome)
        assert sorted(outcome.values()) == ["last admin", "revoked"], outcome

    if kind == "postgres":
        _queued_revokes_under_repeatable_read(store, dsn, setup.svc.config.ledger.schema)

    # the control: check, then write, interleaved
    only_working("c", "d")
    checks = [len(working_admins()) > 1, len(working_admins()) > 1]
    for name, ok in zip(("c", "d"), checks, strict=True):
        if ok:
            store._run(f"UPDATE statcurator_tokens SET token_hash = {store._ph} WHERE "
                       f"analyst = {store._ph}", (f"revoked:{name}", name))
    assert working_admins() == []


def _queued_revokes_under_repeatable_read(store, dsn: str, schema: str) -> None:
    """Two revokes queued on the advisory lock (a third session holds it) in a database
    whose default isolation is REPEATABLE READ: their snapshots are taken before they get
    the lock, so without the store's explicit READ COMMITTED both would revoke."""
    import threading
    import time

    import psycopg
    from psycopg.conninfo import make_conninfo

    from statcurator.service._store import _LOCK_KEY, ServiceStore

    rr = make_conninfo(dsn, options="-c default_transaction_isolation=repeatable\\ read")
    for name in ("e", "f"):
        store.add(name, "admin")
    for other in [a["analyst"] for a in store.list()
                  if a["role"] == "admin" and not a["revoked"] and a["analyst"] not in ("e", "f")]:
        store.revoke(other)
    stores = [ServiceStore.postgres(rr, schema), ServiceStore.postgres(rr, schema)]
    outcome: dict[str, str] = {}
    with psycopg.connect(dsn, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
        threads = [threading.Thread(target=lambda s, n: outcome.__setitem__(n, s.revoke(n)),
                                    args=(st, n)) for st, n in zip(stores, ("f", "e"), strict=True)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # both wait for the lock
            waiting = holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = "
                                     "'advisory' AND NOT granted").fetchone()[0]
            if waiting >= 2:
                break
            time.sleep(0.05)
        holder.execute("COMMIT")
        for t in threads:
            t.join()
    for st in stores:
        st.close()
    working = [a["analyst"] for a in store.list() if a["role"] == "admin" and not a["revoked"]]
    assert len(working) == 1, (outcome, working)


def test_names_and_request_ids_with_a_slash_are_reachable(api, setup: Setup) -> None:
    """An analyst named ``ops/eve`` can be revoked, rotated and granted, and a stored answer
    under the request id ``2024/01/run-1`` fetched again; names and ids of dots only (which
    browsers resolve away) are refused when they would be created."""
    h = setup.headers("admin")
    _, token = setup.svc.add_analyst(setup.svc.authenticate(setup.tokens["admin"]), "ops/eve")
    g = api.put("/v1/admin/analysts/ops%2Feve/budgets/adult", json={"epsilon": 2}, headers=h)
    assert g.status_code == 200 and g.json()["total"] == {"epsilon": "2"}
    key = {"Idempotency-Key": "2024/01/run-1"}
    first = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.5},
                     headers={"Authorization": f"Bearer {token}", **key}).json()
    again = api.get("/v1/releases/2024%2F01%2Frun-1",
                    headers={"Authorization": f"Bearer {token}"})
    assert again.status_code == 200 and again.json()["release"]["rows"] == \
        first["release"]["rows"]
    assert api.post("/v1/admin/analysts/ops%2Feve/revoke", headers=h).status_code == 200
    assert api.get("/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 401
    assert api.post("/v1/admin/analysts/ops%2Feve/rotate", headers=h).status_code == 200
    dots = api.post("/v1/admin/analysts", json={"name": ".."}, headers=h)
    assert dots.status_code == 400 and "only dots" in dots.json()["detail"]
    r = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 0.1},
                 headers=setup.headers("bob", **{"Idempotency-Key": ".."}))
    assert r.status_code == 400 and "only dots" in r.json()["detail"]


def test_over_budget_is_refused_and_records_nothing(api, setup: Setup) -> None:
    before = setup.ledger_rows()
    r = api.post("/v1/queries", json={"sql": COUNT, "epsilon": 2}, headers=setup.headers("bob"))
    body = r.json()
    assert r.status_code == 403 and "exceeds" in body["detail"] and body["remedy"]
    assert setup.ledger_rows() == before


def test_identical_repeats_return_the_stored_answer_when_enabled(setup: Setup) -> None:
    from dataclasses import replace

    svc = setup.svc
    svc.config = replace(svc.config, repeat="stored")
    alice = svc.store.get("alice")
    body = {"sql": COUNT, "epsilon": 0.25}
    first = svc.run(alice, body)
    # the same plan (other spacing, other key) and parameters: stored, free
    second = svc.run(alice, {**body, "sql": COUNT.replace(" ", "  ")}, "another-key")
    assert second["replayed"] and second["release"]["rows"] == first["release"]["rows"]
    assert svc.curator.ledger.status("alice", "adult").spent.epsilon == Fraction(1, 4)
    # another ε is another query; another analyst pays for their own answer
    assert not svc.run(alice, {**body, "epsilon": 0.5})["replayed"]
    assert not svc.run(svc.store.get("bob"), body)["replayed"]


def test_anonymize_and_attack_reports_for_the_curator(api, setup: Setup) -> None:
    h = setup.headers("admin")
    spec = {"k": 10, "qi": ["age", "sex"], "sensitive": "occupation", "algorithm": "mondrian"}
    rep = api.post("/v1/admin/datasets/adult/anonymize", json=spec, headers=h).json()
    assert rep["min_class_size"] >= 10 and all(rep["verified"].values())
    html = api.get(f"/v1/admin/anonymized/{rep['id']}/report.html", headers=h)
    assert html.status_code == 200 and "<html" in html.text.lower()
    risk = api.post("/v1/admin/attacks", json={"dataset": "adult", "attack": "homogeneity",
                                               "anonymization": spec}, headers=h).json()
    assert risk["targets"] == 30162 and 0 <= risk["rate"] <= 1
    r = api.post("/v1/admin/attacks", json={"dataset": "adult", "attack": "nope"}, headers=h)
    assert r.status_code == 400 and "homogeneity" in r.json()["remedy"]
    assert api.post("/v1/admin/datasets/adult/anonymize", json=spec,
                    headers=setup.headers("alice")).status_code == 403


def test_estimates_are_charged_like_queries(api, setup: Setup) -> None:
    r = api.post("/v1/estimates", json={"dataset": "adult", "estimator": "median",
                                        "column": "age", "epsilon": 0.5},
                 headers=setup.headers("alice"))
    assert r.status_code == 200 and 30 <= r.json()["value"] <= 45
    assert setup.svc.curator.ledger.status("alice", "adult").spent.epsilon == Fraction(1, 2)


def _foreign_assets(html: str) -> list[str]:
    """The scripts and stylesheets of a page that load from another origin."""
    import re

    tags = re.findall(r"<(?:script|link)\b[^>]*>", html)
    return [t for t in tags if re.search(r'(?:src|href)="(?:https?:)?//', t)]


@pytest.fixture
def docs_api():
    """The app on an in-memory service: the docs' routes need no ledger."""
    from fastapi.testclient import TestClient

    from statcurator.service import CuratorService, create_app

    svc = CuratorService.in_memory()
    try:
        with TestClient(create_app(svc)) as client:
            yield client
    finally:
        svc.close()


def test_the_api_docs_page_loads_nothing_from_another_origin(docs_api) -> None:
    """Review helper-30, finding 7: /docs loaded Swagger UI unpinned and unchecked from a CDN,
    on the origin whose sessionStorage holds the console's token; now it loads Swagger UI
    from this server, and its policy names no other origin. Control: FastAPI's own page is
    caught by the same check."""
    from fastapi.openapi.docs import get_swagger_ui_html

    r = docs_api.get("/docs")
    assert r.status_code == 200 and '<script src="/docs/swagger-ui-bundle.js">' in r.text
    assert _foreign_assets(r.text) == []
    csp = r.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src 'self';" in csp
    assert "style-src 'self';" in csp and "connect-src 'self'" in csp
    assert "frame-ancestors 'none'" in csp and "http" not in csp and "unsafe" not in csp
    assert "SwaggerUIBundle" in docs_api.get("/static/docs.js").text
    assert docs_api.get("/openapi.json").json()["info"]["title"] == "statcurator"
    stock = get_swagger_ui_html(openapi_url="/openapi.json", title="x").body.decode()
    assert _foreign_assets(stock)                          # control


def test_swagger_ui_is_served_from_the_installed_package(docs_api) -> None:
    from importlib import resources

    static = resources.files("fastapi_offline") / "static"
    for name, media_type in (("swagger-ui-bundle.js", "text/javascript"),
                             ("swagger-ui.css", "text/css")):
        r = docs_api.get(f"/docs/{name}")
        assert r.status_code == 200, name
        assert r.headers["content-type"].split(";")[0] == media_type
        assert r.content == (static / name).read_bytes()
        assert r.headers["content-security-policy"] == \
            docs_api.get("/docs").headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
        # kept by the browser, asked again each time: an unchanged file costs a 304, an
        # upgraded one (another ETag) reaches the browser at once
        assert r.headers["cache-control"] == "no-cache" and r.headers["etag"]
        again = docs_api.get(f"/docs/{name}", headers={"If-None-Match": r.headers["etag"]})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["etag"] == r.headers["etag"]
        anything = docs_api.get(f"/docs/{name}", headers={"If-None-Match": "*"})
        assert anything.status_code == 304
        stale = docs_api.get(f"/docs/{name}", headers={"If-None-Match": '"0-0", "1-1"'})
        assert stale.status_code == 200 and stale.content == r.content
    # Swagger UI 5: the 4.x line cannot render OpenAPI 3.1, which FastAPI publishes
    js = docs_api.get("/docs/swagger-ui-bundle.js").text
    assert "SwaggerUIBundle" in js and 'PACKAGE_VERSION:"5.' in js
    # a fixed list: the package's other files, and any other name, are not served
    for path in ("/docs/redoc.standalone.js", "/docs/favicon.png", "/docs/swagger-ui.js",
                 "/docs/..%2Fswagger-ui.css", "/static/swagger-ui-bundle.js",
                 "/static-offline-docs/swagger-ui-bundle.js"):
        assert docs_api.get(path).status_code == 404, path


def test_without_swagger_ui_installed_the_docs_still_answer_and_say_why(
        docs_api, monkeypatch) -> None:
    # a broken install: the package with Swagger UI's files cannot be imported
    from importlib import resources

    def missing(anchor):
        raise ModuleNotFoundError(f"No module named {anchor!r}")

    monkeypatch.setattr(resources, "files", missing)
    assert docs_api.get("/docs").status_code == 200
    r = docs_api.get("/docs/swagger-ui-bundle.js")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    assert "fastapi-offline" in r.json()["detail"]
    assert "reinstall statcurator" in r.json()["remedy"]
    text = docs_api.get("/static/docs.js").text  # what the page says then
    assert "could not load" in text and "reinstall statcurator" in text
