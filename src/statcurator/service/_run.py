"""``statcurator serve``: prepare the ledger, the store and the admin token, then run uvicorn.

The parent process checks the configuration, opens the ledger (verifying its chain), gives
datasets and configured analysts their initial budgets, creates the admin on first start
(printing its token once) and binds the socket; then it serves — in process with one worker,
or through uvicorn's worker processes, each of which builds its own Curator from the same
configuration (:func:`~statcurator.service._app.app_from_environment`).
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ._config import ServiceConfig

__all__ = ["serve", "prepare", "analysts_add", "analysts_list", "analysts_rotate",
           "analysts_revoke"]


def prepare(config: ServiceConfig) -> tuple[Any, dict[str, Any]]:
    """Open the service (budgets initialized) and create the admin and the configured
    analysts that have no token yet. Returns the service and what to tell the operator
    (``tokens``: new tokens, shown once; ``notices``)."""
    from ._core import CuratorService

    svc = CuratorService.from_config(config)
    info: dict[str, Any] = {"tokens": {}, "notices": svc.initialize()}
    if not svc.store.has_admin():
        p, token = svc.add_analyst(None, "admin", role="admin")
        info["tokens"][p.name] = token
    for name in config.analysts:
        if svc.store.get(name) is None:
            p, token = svc.add_analyst(None, name)
            info["tokens"][p.name] = token
    return svc, info


def serve(config_path: str | None, *, host: str | None = None, port: int | None = None,
          workers: int | None = None, as_json: bool = False,
          say: Callable[..., None] | None = None) -> None:
    """Run the service until interrupted (Ctrl-C / SIGTERM stop it cleanly)."""
    import uvicorn

    from ..cli._common import emit, print_json
    from . import _limits
    from ._app import CONFIG_ENV, create_app

    config = ServiceConfig.load(config_path)
    server = config.server
    server = replace(server, **{k: v for k, v in (("host", host), ("port", port),
                                                  ("workers", workers)) if v is not None})
    config = replace(config, server=server)
    if server.workers > 1 and _throwaway(config):
        from ..core.errors import InvalidParameterError

        raise InvalidParameterError(
            "several workers cannot share a throwaway in-memory ledger and token store (each "
            "would have its own)", remedy="set [ledger] path (or dsn), or run one worker "
                                          "(--workers 1)")
    svc, info = prepare(config)
    sock = _bind(server.host, server.port)
    actual = sock.getsockname()[1]
    shown = f"[{server.host}]" if ":" in server.host else server.host
    url = f"http://{shown}:{actual}/"
    location = config.ledger_location()
    if as_json:
        print_json({"url": url, "api": url + "docs", "openapi": url + "openapi.json",
                    "ledger": location, "workers": server.workers, "config": config.source,
                    "datasets": list(svc.curator.tables), "tokens": info["tokens"],
                    "notices": info["notices"]})
    else:
        (say or emit)(("statcurator is serving", "bold green"), f" {len(svc.curator.tables)} "
                      f"dataset(s) on {config.engine}")
        emit("  console:  ", url)
        emit("  API docs: ", url + "docs", "  (OpenAPI: ", url + "openapi.json", ")")
        emit("  ledger:   ", location)
        emit("  config:   ", config.source)
        for note in info["notices"]:
            emit(("  notice: ", "yellow"), note)
        for name, token in info["tokens"].items():
            emit((f"  {'admin' if name == 'admin' else 'analyst ' + name} token (shown once; "
                  "keep it): ", "bold"), token)
        if not info["tokens"]:
            emit("  sign in with your token (lost it? `statcurator analysts rotate admin`)")
    import sys

    sys.stdout.flush()
    shared: str | None = None  # the folder of the workers' shared rate-limit buckets
    try:
        if server.workers == 1:
            from ._faults import install_fault

            install_fault(svc)
            ucfg = uvicorn.Config(create_app(svc), log_level="warning", access_log=False,
                                  timeout_graceful_shutdown=5)
            uvicorn.Server(ucfg).run(sockets=[sock])
        else:
            svc.close()
            svc = None
            os.environ[CONFIG_ENV] = str(Path(config_path).resolve()) if config_path else ""
            _env_overrides(host, port, workers)
            os.environ.pop(_limits.BUCKETS_ENV, None)  # never another server's file
            if server.requests_per_second > 0 and _limits.fcntl is not None:
                # one set of rate-limit buckets for all the workers (POSIX file locks)
                shared = tempfile.mkdtemp(prefix="statcurator-limits-")
                os.environ[_limits.BUCKETS_ENV] = str(_limits.bucket_file(shared))
            # uvicorn's own worker processes, on the socket bound above (fd)
            uvicorn.run("statcurator.service._app:app_from_environment", factory=True,
                        workers=server.workers, fd=sock.fileno(), log_level="warning",
                        access_log=False, timeout_graceful_shutdown=5)
    finally:
        sock.close()
        if svc is not None:
            svc.close()
        if shared is not None:
            os.environ.pop(_limits.BUCKETS_ENV, None)
            shutil.rmtree(shared, ignore_errors=True)


def _env_overrides(host: str | None, port: int | None, workers: int | None) -> None:
    """Command-line values reach the worker processes as environment overrides."""
    for key, value in (("HOST", host), ("PORT", port), ("WORKERS", workers)):
        if value is not None:
            os.environ[f"STATCURATOR_SERVER__{key}"] = (f'"{value}"' if key == "HOST"
                                                         else str(value))


def _bind(host: str, port: int) -> socket.socket:
    from ..core.errors import InvalidParameterError

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto=IPPROTO_TCP: asyncio sets TCP_NODELAY only on sockets that say they are TCP;
    # without it, Nagle's algorithm holds every response back ~40 ms (delayed ACKs)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise InvalidParameterError(f"cannot listen on {host}:{port}: {e.strerror or e}",
                                    remedy="choose another port (--port, server.port; 0 picks "
                                           "a free one) or stop what uses it") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


# -- the CLI's analysts commands ---------------------------------------------------------------

def _open(config_path: str | None) -> Any:
    from ._core import CuratorService

    return CuratorService.from_config(_kept(config_path))


def _kept(config_path: str | None) -> ServiceConfig:
    """The configuration of an ``analysts`` command, refused when its tokens would be
    forgotten at once (a throwaway in-memory ledger and store)."""
    from ..core.errors import InvalidParameterError

    config = ServiceConfig.load(config_path)
    if _throwaway(config):
        raise InvalidParameterError(
            "the configuration's ledger is a throwaway in-memory one: an analyst created or "
            "changed here would be forgotten at once",
            remedy="set [ledger] path (or dsn) in the configuration, or unset "
                   "STATCURATOR_LEDGER=:memory:")
    return config


def _throwaway(config: ServiceConfig) -> bool:
    """Whether the configuration keeps its ledger or its token store in memory only."""
    return config.ledger.dsn is None and ":memory:" in (str(config.sqlite_path()),
                                                        str(config.tokens_path()))


def _existing_store(config_path: str | None, *, read_only: bool = False,
                    config: ServiceConfig | None = None) -> Any:
    """The token store of a command that changes or reads analysts but creates none: a
    mistyped path or schema is reported, not created (``read_only``: opened without
    writing anything, tables or settings, for a command that only reads). ``config``: the
    configuration at ``config_path`` when the caller has loaded it already."""
    from ..core.errors import InvalidParameterError
    from ._core import open_store, store_exists

    config = _kept(config_path) if config is None else config
    if not store_exists(config):
        where = _config_flag(config_path)
        place = config.ledger_location() if config.ledger.dsn else config.tokens_path()
        raise InvalidParameterError(
            f"there is no token store at {place} yet",
            remedy=f"start the service once (statcurator serve{where}) or create the first "
                   f"analyst (statcurator analysts add NAME{where}); or check the path")
    return open_store(config, read_only=read_only)


def _config_flag(config_path: str | None) -> str:
    return f" --config {config_path}" if config_path else ""


def analysts_add(config_path: str | None, name: str, role: str = "analyst"
                 ) -> dict[str, Any]:
    svc = _open(config_path)
    try:
        p, token = svc.add_analyst(None, name, role)
        grants = svc.budget(p)["grants"]
        return {"analyst": p.name, "role": p.role, "token": token, "grants": grants,
                "store": svc.store.location}
    finally:
        svc.close()


def analysts_list(config_path: str | None) -> dict[str, Any]:
    """The analysts and their grants, read only: no ledger, store or budget is created or
    written, and no dataset file is read (a mistyped path is reported)."""
    from ._core import _status

    config = _kept(config_path)
    store = _existing_store(config_path, read_only=True, config=config)
    try:
        grants: dict[str, list[dict[str, Any]]] = {}
        ledger = _existing_ledger(config)
        if ledger is not None:
            with ledger:
                for (a, d), s in ledger.budgets().items():
                    grants.setdefault(a, []).append({"dataset": d, **_status(s)})
        return {"store": store.location, "analysts": [
            {**row, "grants": grants.get(row["analyst"], [])} for row in store.list()]}
    finally:
        store.close()


def _existing_ledger(config: ServiceConfig) -> Any:
    """The configured ledger if it exists (None otherwise: nothing is created)."""
    if config.ledger.dsn is not None:
        from ..accounting._postgres import table_exists
        from ._core import open_ledger

        if not table_exists(config.ledger.dsn, config.ledger.schema, "ledger"):
            return None
        return open_ledger(config)
    from ..cli.ledger import open_ledger as open_file

    return open_file(str(config.sqlite_path()), create=False)


def analysts_revoke(config_path: str | None, name: str) -> dict[str, Any]:
    """Revoke ``name``'s token through the token store alone (no dataset is loaded: an
    emergency revocation needs only the store), in the command line's terms."""
    from ..accounting import analyst_id
    from ..core.errors import InvalidParameterError

    store = _existing_store(config_path)
    where = _config_flag(config_path)
    try:
        who = analyst_id(name)
        outcome = store.revoke(who)
        if outcome == "missing":
            raise InvalidParameterError(f"there is no analyst {who!r}",
                                        remedy=f"list them: statcurator analysts list{where}")
        if outcome == "last admin":
            raise InvalidParameterError(
                f"{who!r} is the last admin with a working token: revoking it would leave no "
                "one able to manage the service",
                remedy=f"add another admin first (statcurator analysts add NAME --role admin"
                       f"{where}), or give this one a new token instead (statcurator analysts "
                       f"rotate {who}{where})")
        return {"analyst": who, "revoked": True, "store": store.location}
    finally:
        store.close()


def analysts_rotate(config_path: str | None, name: str) -> dict[str, Any]:
    """A new token for ``name`` through the token store alone (also a revoked analyst's)."""
    from ..accounting import analyst_id
    from ..core.errors import InvalidParameterError

    store = _existing_store(config_path)
    try:
        who = analyst_id(name)
        if store.get(who) is None:
            raise InvalidParameterError(f"there is no analyst {who!r}",
                                        remedy=f"create it: statcurator analysts add {who}"
                                               f"{_config_flag(config_path)}")
        return {"analyst": who, "token": store.rotate(who), "store": store.location}
    finally:
        store.close()
