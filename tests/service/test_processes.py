"""Real server processes: concurrency against the budgets, and crashes around the debit.

* 50 parallel requests from 5 client processes against two server workers, where the budget
  allows 10: at most 10 answers, and neither the analyst's grant nor the dataset's budget is
  ever exceeded — repeated, alternating the limiting budget, on SQLite and PostgreSQL.
* The server SIGKILLed (a test-only fault hook, ``STATCURATOR_TEST_FAULT``) before the debit
  commits, after it, as soon as the answer is handed to the ledger's writer thread, and
  after the answer is in the ledger; restarted, the same request id never yields fresh noise
  for free.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import urllib.error
import urllib.request
from fractions import Fraction
from pathlib import Path

import pytest

from statcurator.accounting import Ledger

from .conftest import start_server, write_config

pytestmark = pytest.mark.slow

SQL = "SELECT COUNT(*) AS n FROM adult"


def _request(url: str, token: str, path: str, body: dict | None = None,
             key: str | None = None, method: str | None = None) -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if key:
        headers["Idempotency-Key"] = key
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url.rstrip("/") + path, data, headers,
                                 method=method or ("POST" if body is not None else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _client(url: str, token: str, n: int, tag: str) -> list[int]:
    """One client process: ``n`` requests at once, each with its own request id."""
    with cf.ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(_request, url, token, "/v1/queries",
                               {"sql": SQL, "epsilon": "1/10"}, f"{tag}-{i}")
                   for i in range(n)]
        return [f.result()[0] for f in futures]


def _ledger(config: Path, kind: str, dsn: str | None) -> Ledger:
    if kind == "sqlite":
        return Ledger(config.parent / "ledger.db")
    from statcurator.accounting import PostgresBackend

    schema = next(line.split('"')[1] for line in config.read_text().splitlines()
                  if line.startswith("schema"))
    return Ledger(backend=PostgresBackend(dsn, schema=schema))


def test_fifty_parallel_requests_never_overspend(ledger_kind, tmp_path: Path) -> None:
    kind, dsn = ledger_kind
    config = write_config(tmp_path / "curator.toml", kind, dsn)
    ctx = multiprocessing.get_context("spawn")
    with start_server(config, workers=2) as server, \
            cf.ProcessPoolExecutor(5, mp_context=ctx) as clients:
        admin = server.admin_token
        for rnd in range(4):
            name = f"analyst{rnd}"
            status, out = _request(server.url, admin, "/v1/admin/analysts", {"name": name})
            token = out["token"]
            led = _ledger(config, kind, dsn)
            spent = led.dataset_status("adult").spent.epsilon
            if rnd % 2 == 0:  # the analyst's grant is the limit: ε = 1 = 10 charges
                grant, dataset_total = Fraction(1), spent + 100
            else:  # the dataset's budget is the limit: exactly 10 charges left in it
                grant, dataset_total = Fraction(100), spent + 1
            _request(server.url, admin, f"/v1/admin/analysts/{name}/budgets/adult",
                     {"epsilon": str(grant)}, method="PUT")
            _request(server.url, admin, "/v1/admin/datasets/adult/budget",
                     {"epsilon": str(dataset_total)}, method="PUT")
            results = [s for f in [clients.submit(_client, server.url, token, 10, f"{rnd}.{p}")
                                   for p in range(5)] for s in f.result()]
            assert results.count(200) == 10 and results.count(403) == 40, results
            mine, data = led.status(name, "adult"), led.dataset_status("adult")
            assert mine.charges == 10 and mine.spent.epsilon == Fraction(1)
            assert mine.spent.epsilon <= mine.total.epsilon
            assert data.spent.epsilon <= data.total.epsilon
            assert led.verify().rows > 0  # the chain and every running total re-derived
            led.close()


def _after_restart(config: Path, admin: str, point: str) -> None:
    with start_server(config) as server:
        assert server.admin_token is None  # the admin exists: no new token printed
        led = Ledger(config.parent / "ledger.db")
        charges = led.charges(analyst="alice")
        again = _request(server.url, alice_token(config), "/v1/queries",
                         {"sql": SQL, "epsilon": 0.5}, key="k1")
        status, _ = _request(server.url, alice_token(config), "/v1/releases/k1")
        if point == "before-charge":  # nothing was debited, nothing released
            assert charges == []
            assert again[0] == 200 and again[1]["replayed"] is False
        elif point == "after-charge":  # the debit persists; never fresh noise for free
            assert len(charges) == 1 and not charges[0].answered
            assert again[0] == 409 and "new request id" in again[1]["remedy"]
            assert status == 409
            assert led.status("alice", "adult").spent.epsilon == Fraction(1, 2)
        elif point == "after-store" and not charges[0].answered:  # lost with the process
            assert len(charges) == 1
            assert again[0] == 409 and "new request id" in again[1]["remedy"]
            assert status == 409
            assert led.status("alice", "adult").spent.epsilon == Fraction(1, 2)
        else:  # the stored answer, the same numbers, charged once
            assert len(charges) == 1 and charges[0].answered
            assert again[0] == 200 and again[1]["replayed"] is True
            stored = json.loads(led.answer("alice", "k1"))
            assert again[1]["release"]["rows"] == stored["rows"]
            assert led.status("alice", "adult").spent.epsilon == Fraction(1, 2)
        led.close()


def alice_token(config: Path) -> str:
    return (config.parent / "alice.token").read_text()


@pytest.mark.parametrize("point", ["before-charge", "after-charge", "after-store",
                                   "after-answer"])
def test_a_killed_server_never_gives_fresh_noise_for_free(point: str, tmp_path: Path) -> None:
    config = write_config(tmp_path / "curator.toml", "sqlite")
    with start_server(config, env={"STATCURATOR_TEST_FAULT": point}) as server:
        admin = server.admin_token
        _, out = _request(server.url, admin, "/v1/admin/analysts", {"name": "alice"})
        (tmp_path / "alice.token").write_text(out["token"])
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            _request(server.url, out["token"], "/v1/queries", {"sql": SQL, "epsilon": 0.5},
                     key="k1")
        assert server.process.wait(timeout=30) == -9  # SIGKILLed by the hook
    _after_restart(config, admin, point)
