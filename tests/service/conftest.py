"""Service fixtures: the same tests run with a SQLite ledger and a PostgreSQL one.

``svc`` is a :class:`CuratorService` (the Python calls), ``api`` its FastAPI app in process
(Starlette's test client), and :func:`start_server` runs ``statcurator serve`` in a real
process on 127.0.0.1 with a free port, always stopped. The PostgreSQL server is the ledger
tests' throwaway one (``tests/accounting/_postgres.py``); without its binaries the PostgreSQL
cases are skipped, naming scripts/setup-system.sh.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service needs pip install -e '.[service]'")

from statcurator.service import CuratorService, ServiceConfig  # noqa: E402

from ..accounting.conftest import pg_dsn  # noqa: E402, F401 - the ledger tests' PostgreSQL

ADULT = {"name": "adult", "data": "adult", "budget": {"epsilon": 10},
         "grant": {"epsilon": 1}}


def write_config(path: Path, kind: str, dsn: str | None = None, *,
                 datasets: tuple[dict[str, Any], ...] = (ADULT,), **sections: Any) -> Path:
    """A service configuration file for a SQLite ledger in ``path``'s folder or a fresh
    PostgreSQL schema."""
    lines = []
    server = {"host": "127.0.0.1", "port": 0, **sections.pop("server", {})}
    lines.append("[server]")
    lines += [f"{k} = {json.dumps(v)}" for k, v in server.items()]
    lines.append("[ledger]")
    if kind == "postgres":
        lines += [f"dsn = {json.dumps(dsn)}", f'schema = "s{uuid.uuid4().hex[:12]}"']
    else:
        lines.append(f"path = {json.dumps(str(path.parent / 'ledger.db'))}")
    for name, table in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    for d in datasets:
        lines.append("[[datasets]]")
        for k, v in d.items():
            value = ("{ " + ", ".join(f"{a} = {json.dumps(b)}" for a, b in v.items()) + " }"
                     if isinstance(v, dict) else json.dumps(v))
            lines.append(f"{k} = {value}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(params=["sqlite", "postgres"])
def ledger_kind(request) -> tuple[str, str | None]:
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    return request.param, dsn


@dataclass
class Setup:
    svc: CuratorService
    config_path: Path
    tokens: dict[str, str] = field(default_factory=dict)

    def headers(self, who: str, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}", **extra}

    def ledger_rows(self) -> int:
        return len(self.svc.curator.ledger.entries(types=("dataset_budget", "grant", "charge",
                                                          "answer")))


@pytest.fixture
def setup(ledger_kind, tmp_path: Path) -> Iterator[Setup]:
    kind, dsn = ledger_kind
    path = write_config(tmp_path / "curator.toml", kind, dsn)
    svc = CuratorService.from_config(ServiceConfig.load(path, env={}))
    admin, admin_token = svc.add_analyst(None, "admin", role="admin")
    s = Setup(svc, path, {"admin": admin_token})
    for name in ("alice", "bob"):
        _, s.tokens[name] = svc.add_analyst(admin, name)
    yield s
    svc.close()


@pytest.fixture
def api(setup: Setup):
    from fastapi.testclient import TestClient

    from statcurator.service import create_app

    with TestClient(create_app(setup.svc)) as client:
        yield client


# -- real server processes ----------------------------------------------------------------------

@dataclass
class Server:
    url: str
    admin_token: str | None
    process: subprocess.Popen[str]


@contextmanager
def start_server(config: Path, *, workers: int = 1, env: dict[str, str] | None = None,
                 timeout: float = 60) -> Iterator[Server]:
    """``statcurator serve --config config --json`` on 127.0.0.1 (port 0: a free one); the
    first line it prints gives the URL and, on first start, the admin token."""
    cmd = [sys.executable, "-c", "from statcurator.cli import main; main()", "serve",
           "--config", str(config),
           "--workers", str(workers), "--json"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})}, start_new_session=True)
    try:
        info = _read_json(proc, timeout)
        server = Server(info["url"], info["tokens"].get("admin"), proc)
        _wait_healthy(server.url, timeout, proc)
        yield server
    finally:
        stop(proc)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _read_json(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """The JSON object ``serve --json`` prints (several lines, ending with ``}``)."""
    import queue
    import threading

    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put(line)
            if line.rstrip() == "}":
                return
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    text, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        if not line:
            break
        text += line
        if line.rstrip() == "}":
            return json.loads(text)
    proc.kill()
    raise RuntimeError(f"the server did not start: {text} {proc.stderr.read()}")


def _wait_healthy(url: str, timeout: float, proc: subprocess.Popen[str]) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read()}")
        try:
            if httpx.get(url + "healthz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not answer /healthz in time")
