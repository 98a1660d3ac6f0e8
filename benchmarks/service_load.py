"""Load on the curator service over loopback: requests/s and latency percentiles.

    python benchmarks/service_load.py [--rows 1000000] [--workers 2] [--seconds 5]
                                      [--connections 16] [--ledger sqlite|postgres DSN]

Starts ``statcurator serve`` (``--workers`` processes, a SQLite ledger in a temporary folder)
over a generated table of ``--rows`` rows, and drives it from this process with a small
asyncio HTTP/1.1 client over keep-alive connections, for three kinds of request:

* **stored answer** — ``GET /v1/releases/{id}``: an answer charged once, read again for free;
* **dry run** — ``POST /v1/queries/dry-run``: cost, accuracy and remaining budget;
* **fresh DP count** — ``POST /v1/queries`` with a new ``Idempotency-Key`` each time: a
  filtered count that scans the whole table, charged in the ledger before the noise is
  drawn (and, as a second row, a count grouped by a public key).

For the fresh counts it also reports the ledger's write rate (rows appended per second: a
charge and an answer per release). Goals (issue 10): ≥ 1,000 req/s for stored answers and
≥ 100 req/s for fresh counts on 2 cores. The client runs on the same 2 cores as the server,
so the figures are a lower bound of what the server alone sustains. One analyst sends
every request, so its rate limit (``server.requests_per_second``) is turned off.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

COUNT = "SELECT COUNT(*) AS n FROM big WHERE age >= 30"  # a full scan of the column
GROUPED = "SELECT grp, COUNT(*) AS n FROM big GROUP BY grp"


def make_table(folder: Path, rows: int) -> tuple[Path, Path]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)  # the benchmark's data, not noise
    table = pa.table({"grp": rng.choice(np.array(["a", "b", "c", "d"]), rows),
                      "age": rng.integers(0, 100, rows), "income": rng.uniform(0, 1e5, rows)})
    data = folder / "big.parquet"
    pq.write_table(table, data)
    meta = folder / "big.toml"
    meta.write_text('[table]\nname = "big"\nsource = "big.parquet"\n'
                    '[columns.grp]\ntype = "string"\ncategories = ["a", "b", "c", "d"]\n'
                    '[columns.age]\ntype = "integer"\nbounds = [0, 100]\n'
                    '[columns.income]\ntype = "real"\nbounds = [0, 100000]\n', encoding="utf-8")
    return data, meta


def write_config(folder: Path, data: Path, meta: Path, workers: int, dsn: str | None) -> Path:
    ledger = (f'dsn = "{dsn}"\nschema = "bench{os.getpid()}"' if dsn
              else f'path = "{folder / "ledger.db"}"')
    cfg = folder / "curator.toml"
    # one analyst drives the whole load: its rate limit is off (this measures capacity)
    cfg.write_text(f'[server]\nhost = "127.0.0.1"\nport = 0\nworkers = {workers}\n'
                   'requests_per_second = 0\n'
                   f'[ledger]\n{ledger}\n'
                   f'[[datasets]]\nname = "big"\ndata = "{data}"\nmetadata = "{meta}"\n'
                   'budget = { epsilon = 1000000 }\ngrant = { epsilon = 1000000 }\n',
                   encoding="utf-8")
    return cfg


# -- a minimal keep-alive HTTP/1.1 client ------------------------------------------------------

class Conn:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def request(self, method: str, path: str, token: str, body: bytes = b"",
                      extra: str = "") -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{extra}\r\n")
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readline()
        status = int(status_line.split()[1])
        length = 0
        while True:
            line = await self.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        payload = await self.reader.readexactly(length)
        return status, payload


async def drive(url: str, token: str, seconds: float, connections: int, make) -> dict:
    """``connections`` clients sending requests made by ``make(i)`` for ``seconds``."""
    parts = urlsplit(url)
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    deadline = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def client() -> None:
        conn = Conn(parts.hostname, parts.port)
        while time.perf_counter() < deadline:
            method, path, body, extra = make(next(counter))
            t0 = time.perf_counter()
            status, _ = await conn.request(method, path, token, body, extra)
            latencies.append(time.perf_counter() - t0)
            statuses[status] = statuses.get(status, 0) + 1
        conn.writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(connections)))
    elapsed = time.perf_counter() - start
    latencies.sort()

    def pct(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    return {"requests": len(latencies), "seconds": elapsed, "rps": len(latencies) / elapsed,
            "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "statuses": statuses}


def start(config: Path, workers: int) -> tuple[subprocess.Popen, dict]:
    cmd = [sys.executable, "-c", "from statcurator.cli import main; main()", "serve",
           "--config", str(config), "--workers", str(workers), "--json"]
    # the throwaway ledger's anchor goes to the benchmark's folder, not the user's anchors
    env = {**os.environ, "XDG_STATE_HOME": str(config.parent / "state")}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, start_new_session=True,
                            env=env)
    text = ""
    for line in proc.stdout:
        text += line
        if line.rstrip() == "}":
            break
    info = json.loads(text)
    import httpx

    for _ in range(600):
        try:
            if httpx.get(info["url"] + "healthz", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.1)
    return proc, info


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--connections", type=int, default=16)
    ap.add_argument("--postgres", metavar="DSN", default=None,
                    help="a PostgreSQL ledger instead of SQLite")
    args = ap.parse_args()
    import httpx

    folder = Path(tempfile.mkdtemp(prefix="statcurator-load-"))
    data, meta = make_table(folder, args.rows)
    config = write_config(folder, data, meta, args.workers, args.postgres)
    proc, info = start(config, args.workers)
    try:
        url, admin = info["url"], info["tokens"]["admin"]
        h = {"Authorization": f"Bearer {admin}"}
        token = httpx.post(url + "v1/admin/analysts", json={"name": "load"}, headers=h
                           ).json()["token"]
        a = {"Authorization": f"Bearer {token}"}
        body = json.dumps({"sql": COUNT, "epsilon": "1/1000"}).encode()
        r = httpx.post(url + "v1/queries", content=body, timeout=60,
                       headers={**a, "Idempotency-Key": "stored-1",
                                "Content-Type": "application/json"})
        assert r.status_code == 200, r.text
        print(f"statcurator service load: {args.rows:,} rows, {args.workers} workers, "
              f"{args.connections} connections, {args.seconds:g} s per scenario; "
              f"ledger {'PostgreSQL' if args.postgres else 'SQLite (WAL)'}")
        print(f"machine: {os.cpu_count()} cores, Python {platform.python_version()}; "
              f"load average before: {os.getloadavg()[0]:.2f}")
        results = {}
        # warm every worker's plan cache and connections first
        asyncio.run(drive(url, token, 1.0, args.connections,
                          lambda i: ("POST", "/v1/queries/dry-run", body, "")))
        results["stored answer"] = asyncio.run(drive(
            url, token, args.seconds, args.connections,
            lambda i: ("GET", "/v1/releases/stored-1", b"", "")))
        results["dry run"] = asyncio.run(drive(
            url, token, args.seconds, args.connections,
            lambda i: ("POST", "/v1/queries/dry-run", body, "")))
        before = httpx.get(url + "v1/admin/ledger/verify", headers=h, timeout=120).json()
        results["fresh DP count"] = asyncio.run(drive(
            url, token, args.seconds, args.connections,
            lambda i: ("POST", "/v1/queries", body, f"Idempotency-Key: fresh-{i}\r\n")))
        after = httpx.get(url + "v1/admin/ledger/verify", headers=h, timeout=120).json()
        grouped = json.dumps({"sql": GROUPED, "epsilon": "1/1000"}).encode()
        results["fresh grouped"] = asyncio.run(drive(
            url, token, args.seconds, args.connections,
            lambda i: ("POST", "/v1/queries", grouped, f"Idempotency-Key: grouped-{i}\r\n")))
        load = os.getloadavg()[0]
        print(f"\n{'request':<16}{'req/s':>9}{'p50 ms':>9}{'p90 ms':>9}{'p99 ms':>9}  statuses")
        for name, r in results.items():
            print(f"{name:<16}{r['rps']:>9.0f}{r['p50_ms']:>9.2f}{r['p90_ms']:>9.2f}"
                  f"{r['p99_ms']:>9.2f}  {r['statuses']}")
        fresh = results["fresh DP count"]
        rows = after["rows"] - before["rows"]
        print(f"\nledger writes during the fresh counts: {rows} rows ({after['charges'] - before['charges']} "
              f"charges + {after['answers'] - before['answers']} answers) in "
              f"{fresh['seconds']:.1f} s = {rows / fresh['seconds']:.0f} rows/s; chain verified")
        goals = [("stored answers", results["stored answer"]["rps"], 1000),
                 ("fresh counts", fresh["rps"], 100)]
        for name, got, goal in goals:
            print(f"goal {name}: {got:.0f} req/s vs >= {goal} -> "
                  f"{'met' if got >= goal else 'NOT met'}")
        print(f"load average after: {load:.2f}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)  # the generated table and the ledger


if __name__ == "__main__":
    main()
