"""Per-analyst rate limits (server.requests_per_second, server.burst).

The attack: an analyst with a valid token floods the service with requests that cost no
budget (dry runs, stored answers) and takes the workers from everyone else. The limit admits
``burst`` requests at once and ``requests_per_second`` on average per identity; beyond that a
request gets 429 before anything runs, so it charges nothing. The control runs the same flood
with the limit off and shows every request admitted.

The HTTP tests use a refill rate of 1/1000 per second, so that no request is refilled while a
test runs (deterministic); the bucket's arithmetic over time is tested with a fake clock.

The same flood spread over several worker processes: each worker used to keep its own
buckets, so N workers admitted N bursts. The workers of one server now share one bucket file;
the control (each process with its own buckets, as before) admits the burst once per process.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import multiprocessing
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from statcurator.service import CuratorService, ServiceConfig
from statcurator.service._config import ConfigError
from statcurator.service._limits import (
    RateLimiter,
    SharedBuckets,
    TooManyRequests,
    bucket_file,
)

from .conftest import start_server, write_config

DRY = {"sql": "SELECT COUNT(*) AS n FROM adult", "epsilon": 0.1}


# -- the bucket ------------------------------------------------------------------------------

def test_a_bucket_admits_its_burst_then_the_rate() -> None:
    clock = [100.0]
    limits = RateLimiter(rate=4, burst=2, clock=lambda: clock[0])
    assert [limits.admit("a") for _ in range(3)] == [0.0, 0.0, 0.25]
    assert limits.admit("a") == 0.25  # a refused request takes nothing from the bucket
    clock[0] += 0.25
    assert limits.admit("a") == 0.0 and limits.admit("a") == 0.25
    clock[0] += 3600  # a long pause refills the burst, no more
    assert [limits.admit("a") for _ in range(3)] == [0.0, 0.0, 0.25]


def test_identities_have_separate_buckets_and_rate_zero_is_no_limit() -> None:
    clock = [0.0]
    limits = RateLimiter(rate=1, burst=1, clock=lambda: clock[0])
    assert limits.admit("alice") == 0.0 and limits.admit("alice") == 1.0
    assert limits.admit("bob") == 0.0
    off = RateLimiter(rate=0, burst=1)
    assert not off.enabled and all(off.admit("alice") == 0.0 for _ in range(1000))


def test_a_clock_that_steps_back_never_refills() -> None:
    clock = [10.0]
    limits = RateLimiter(rate=1, burst=1, clock=lambda: clock[0])
    assert limits.admit("a") == 0.0
    clock[0] = 5.0
    assert limits.admit("a") == 1.0


@pytest.mark.parametrize(("rate", "burst"), [(-1, 1), (float("nan"), 1), (float("inf"), 1),
                                             (1, 0)])
def test_a_limiter_refuses_impossible_settings(rate: float, burst: int) -> None:
    with pytest.raises(ValueError, match="rate >= 0 and burst >= 1"):
        RateLimiter(rate, burst)


# -- configuration ---------------------------------------------------------------------------

def test_the_limit_is_on_by_default() -> None:
    server = ServiceConfig.parse({}, env={}).server
    assert (server.requests_per_second, server.burst) == (50.0, 100)


@pytest.mark.parametrize(("doc", "env", "message"), [
    ({"server": {"requests_per_second": -1}}, {}, "server.requests_per_second must be 0"),
    ({"server": {"requests_per_second": "fast"}}, {}, "server.requests_per_second must be a"),
    ({}, {"STATCURATOR_SERVER__REQUESTS_PER_SECOND": "nan"},
     "(from STATCURATOR_SERVER__REQUESTS_PER_SECOND)"),
    ({"server": {"burst": 0}}, {}, "server.burst must be in [1, 1000000]"),
    ({"server": {"burst": 2.5}}, {}, "server.burst must be a whole number"),
])
def test_bad_limits_are_refused_with_the_key(doc: dict, env: dict, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        ServiceConfig.parse(doc, env=env)
    assert message in str(e.value) and e.value.remedy


def test_an_environment_variable_turns_the_limit_off() -> None:
    cfg = ServiceConfig.parse({}, env={"STATCURATOR_SERVER__REQUESTS_PER_SECOND": "0"})
    assert cfg.server.requests_per_second == 0


# -- over HTTP -------------------------------------------------------------------------------

def _client(tmp_path: Path, rate: float, burst: int) -> Iterator[tuple]:
    from fastapi.testclient import TestClient

    from statcurator.service import create_app

    path = write_config(tmp_path / "curator.toml", "sqlite",
                        server={"requests_per_second": rate, "burst": burst})
    svc = CuratorService.from_config(ServiceConfig.load(path, env={}))
    admin, admin_token = svc.add_analyst(None, "admin", role="admin")
    tokens = {"admin": admin_token}
    for name in ("alice", "bob"):
        _, tokens[name] = svc.add_analyst(admin, name)
    try:
        with TestClient(create_app(svc)) as client:
            yield client, svc, {k: {"Authorization": f"Bearer {v}"} for k, v in tokens.items()}
    finally:
        svc.close()


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[tuple]:
    yield from _client(tmp_path, 0.001, 3)


@pytest.fixture
def unlimited(tmp_path: Path) -> Iterator[tuple]:
    yield from _client(tmp_path, 0, 3)


def test_a_flood_of_free_requests_is_refused_beyond_the_burst(limited) -> None:
    client, _, h = limited
    codes = [client.post("/v1/queries/dry-run", json=DRY, headers=h["alice"]).status_code
             for _ in range(10)]
    assert codes == [200] * 3 + [429] * 7
    r = client.post("/v1/queries/dry-run", json=DRY, headers=h["alice"])
    assert r.status_code == 429
    assert r.headers["content-type"].startswith("application/problem+json")
    assert int(r.headers["Retry-After"]) >= 1
    body = r.json()
    assert body["title"] == "Too many requests" and "charged nothing" in body["detail"]
    assert "server.requests_per_second" in body["remedy"]
    # another analyst is still served: the flood took only alice's bucket
    assert client.get("/v1/budget", headers=h["bob"]).status_code == 200


def test_the_control_without_a_limit_admits_the_whole_flood(unlimited) -> None:
    client, _, h = unlimited
    codes = {client.post("/v1/queries/dry-run", json=DRY, headers=h["alice"]).status_code
             for _ in range(30)}
    assert codes == {200}


def test_a_refused_query_charges_nothing(limited) -> None:
    client, svc, h = limited
    run = {"sql": "SELECT COUNT(*) AS n FROM adult", "epsilon": 0.1}
    assert client.post("/v1/queries", json=run, headers=h["alice"]).status_code == 200
    for _ in range(2):
        client.get("/v1/me", headers=h["alice"])
    rows = svc.curator.ledger.counts()
    spent = client.get("/v1/budget", headers=h["bob"]).json()  # bob's view is unaffected
    r = client.post("/v1/queries", json=run, headers={**h["alice"], "Idempotency-Key": "k1"})
    assert r.status_code == 429
    assert svc.curator.ledger.counts() == rows
    assert svc.curator.ledger.status("alice", "adult").charges == 1  # the first query only
    assert client.get("/v1/budget", headers=h["bob"]).json() == spent


def test_bad_tokens_are_refused_before_any_bucket(limited) -> None:
    client, _, h = limited
    bad = {"Authorization": "Bearer sct_not-a-token"}
    assert {client.get("/v1/me", headers=bad).status_code for _ in range(20)} == {401}
    assert client.app.state.limits._buckets == {}  # nothing was recorded for them
    assert client.get("/v1/me", headers=h["alice"]).status_code == 200


def test_the_schema_declares_429(limited) -> None:
    client, _, _ = limited
    spec = client.get("/openapi.json").json()
    assert "429" in spec["paths"]["/v1/queries"]["post"]["responses"]


def test_a_tiny_rate_is_refused_and_a_wait_is_never_infinite() -> None:
    # a subnormal rate made the wait inf, and math.ceil(inf) turned every 429 into a 500
    for rate in (1e-310, 1e-4):
        with pytest.raises(ConfigError, match="must be 0 \\(no limit\\) or in"):
            ServiceConfig.parse({"server": {"requests_per_second": rate}}, env={})
    assert ServiceConfig.parse({"server": {"requests_per_second": 0.001}},
                               env={}).server.requests_per_second == 0.001
    limits = RateLimiter(rate=1e-310, burst=1, clock=lambda: 0.0)
    assert limits.admit("a") == 0.0 and limits.admit("a") == 86_400.0
    with pytest.raises(TooManyRequests) as e:
        limits.check("a")
    assert e.value.retry_after == 86_400.0


# -- one set of buckets for all the worker processes -------------------------------------------

def _flood(path: str | None, n: int, start, results) -> None:
    """One worker process: ``n`` requests of alice, at the same moment as the others."""
    limits = RateLimiter(0.001, 5, shared=SharedBuckets(path) if path else None)
    start.wait(30)
    results.put(sum(limits.admit("alice") == 0.0 for _ in range(n)))


@pytest.mark.parametrize("shared", [True, False], ids=["shared", "control-own-buckets"])
def test_worker_processes_admit_one_burst_between_them(tmp_path: Path, shared: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    path = str(bucket_file(tmp_path)) if shared else None
    start, results = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_flood, args=(path, 20, start, results)) for _ in range(3)]
    for p in procs:
        p.start()
    start.set()
    admitted = [results.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    # three workers, a burst of 5: five requests in all; each worker's own buckets: 15
    assert sum(admitted) == (5 if shared else 15), admitted


def test_a_full_table_falls_back_to_the_workers_own_bucket(tmp_path: Path) -> None:
    path = bucket_file(tmp_path, slots=2)
    a = RateLimiter(0.001, 1, shared=SharedBuckets(path))
    b = RateLimiter(0.001, 1, shared=SharedBuckets(path))
    assert [a.admit(x) for x in ("alice", "bob", "carol")] == [0.0, 0.0, 0.0]
    assert b.admit("alice") > 0 and b.admit("bob") > 0  # shared: already spent in a
    assert b.admit("carol") == 0.0  # no room: b's own bucket (a's was its own too)
    assert a.admit("carol") > 0


_FORK = """
import json, os, sys
from statcurator.service._limits import RateLimiter, SharedBuckets
shared = SharedBuckets(sys.argv[1])
limits = RateLimiter(0.001, 2, shared=shared)
first, fd_before = limits.admit("alice"), shared._fd
read, write = os.pipe()
pid = os.fork()
if pid == 0:  # the child: the second request of the burst, then none
    try:
        os.write(write, json.dumps([limits.admit("alice"), limits.admit("alice") > 0,
                                    shared._fd != fd_before]).encode())
    finally:
        os._exit(0)
os.close(write)
os.waitpid(pid, 0)
with os.fdopen(read) as f:
    child = json.loads(f.read())
print(json.dumps([first, child, limits.admit("alice") > 0]))
"""


def test_a_forked_child_locks_the_file_through_its_own_descriptor(tmp_path: Path) -> None:
    """(In a fresh interpreter: a fork from the test process, which other tests fill with
    threads, could hang its child.)"""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", _FORK, str(bucket_file(tmp_path))],
                         capture_output=True, text=True, timeout=120, check=True)
    # the parent's first request; the child's second (the burst's last) through its own
    # descriptor, then refused; the parent refused after it
    assert json.loads(out.stdout) == [0.0, [0.0, True, True], True], out.stderr


def test_a_file_system_without_locks_falls_back_to_the_workers_own_bucket(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flock() that fails (ENOLCK: NFS mounted without locks) used to raise out of every
    authenticated request (a 500)."""
    import errno

    from statcurator.service import _limits

    shared = SharedBuckets(bucket_file(tmp_path))

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(_limits.fcntl, "flock", no_locks)
    limits = RateLimiter(0.001, 2, shared=shared)
    assert [limits.admit("alice") for _ in range(2)] == [0.0, 0.0]
    assert limits.admit("alice") > 0 and limits._buckets  # its own bucket, still a limit


def test_a_crowded_table_is_searched_a_bounded_number_of_slots(tmp_path: Path) -> None:
    """Past the table's room every request of a new identity scanned all 65,536 slots under
    the server-wide lock (9 ms each); the search now stops after _PROBES slots."""
    import hashlib

    from statcurator.service._limits import _HEADER, _PROBES, _SLOT

    slots = 4 * _PROBES
    shared = SharedBuckets(bucket_file(tmp_path, slots=slots))
    take = RateLimiter(0.001, 1)._take
    home = int.from_bytes(hashlib.blake2b(b"newcomer", digest_size=8).digest(), "little")
    far = (home + 2 * _PROBES) % slots  # free, but beyond the search
    for i in range(slots):  # every other slot taken by someone else
        if i != far:
            _SLOT.pack_into(shared._table, _HEADER.size + i * _SLOT.size, 10**6 + i, 1.0, 0.0)
    assert shared.update("newcomer", take) is None  # the worker's own bucket, then
    _SLOT.pack_into(shared._table, _HEADER.size + (home + _PROBES - 1) % slots * _SLOT.size,
                    0, 0.0, 0.0)  # a free slot within the search is found
    assert shared.update("newcomer", take) == 0.0


def test_a_worker_ignores_a_bucket_file_when_the_limit_is_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale variable (another server's, or a limit turned off) made every worker die at
    start and uvicorn restart it for ever."""
    from statcurator.core.errors import StatcuratorError
    from statcurator.service._app import _shared_buckets
    from statcurator.service._limits import BUCKETS_ENV

    monkeypatch.setenv(BUCKETS_ENV, str(tmp_path / "missing"))
    off = ServiceConfig.parse({"server": {"requests_per_second": 0}}, env={})
    assert _shared_buckets(off) is None
    on = ServiceConfig.parse({}, env={})
    with pytest.raises(StatcuratorError, match="cannot be used") as e:
        _shared_buckets(on)
    assert BUCKETS_ENV in e.value.remedy


def test_a_file_that_is_not_a_bucket_file_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.write_bytes(b"\0" * 64)
    with pytest.raises(ValueError, match="not a statcurator rate-limit bucket file"):
        SharedBuckets(other)


def _get(url: str, token: str, n: int) -> list[int]:
    codes = []
    for _ in range(n):  # a new connection each time: the workers share them out
        req = urllib.request.Request(url + "v1/me", headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                codes.append(r.status)
        except urllib.error.HTTPError as e:
            codes.append(e.code)
    return codes


@pytest.mark.slow
def test_a_server_with_two_workers_admits_the_burst_once(tmp_path: Path) -> None:
    config = write_config(tmp_path / "curator.toml", "sqlite",
                          server={"requests_per_second": 0.001, "burst": 6})
    with start_server(config, workers=2) as server, cf.ThreadPoolExecutor(5) as pool:
        codes = [c for f in [pool.submit(_get, server.url, server.admin_token, 8)
                             for _ in range(5)] for c in f.result()]
    # the health checks before the flood were anonymous; the admin's six, then 429s
    assert codes.count(200) == 6 and codes.count(429) == 34, codes
