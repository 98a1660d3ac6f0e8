"""A throwaway PostgreSQL server for the ledger tests and the ledger benchmark.

It runs Debian's ``postgresql`` binaries (installed by ``scripts/setup-system.sh``) from a
temporary directory, listening on 127.0.0.1 only, and is stopped and removed afterwards.
``initdb`` refuses to run as root, so when the tests run as root the server runs as the
``postgres`` system user that the Debian package creates.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

INSTALL_HINT = "PostgreSQL binaries not found; install them with scripts/setup-system.sh"


def binaries() -> Path | None:
    """The folder holding initdb and pg_ctl, or None."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(found).resolve().parent
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if Path(folder, "initdb").exists() and Path(folder, "pg_ctl").exists():
            return Path(folder)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def throwaway_server() -> Iterator[str]:
    """Start a server; yield its connection string (database ``postgres``); stop it."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError(INSTALL_HINT)
    user: str | None = None
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            raise RuntimeError("running as root and there is no 'postgres' user to run the "
                               "server; run scripts/setup-system.sh") from None
        user = "postgres"
    root = Path(tempfile.mkdtemp(prefix="statcurator-pg-"))
    if user is not None:
        shutil.chown(root, user)
    data, port = root / "data", _free_port()
    run = {"user": user, "check": True, "capture_output": True, "timeout": 120}
    try:
        subprocess.run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "-A", "trust", "-E", "UTF8", "--no-sync"], **run)
        options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off "
                   "-c full_page_writes=off -c max_connections=60")
        subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-w",
                        "-t", "60", "-l", str(root / "log"), "start"], **run)
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate",
                            "-w", "stop"], **{**run, "check": False})
    finally:
        shutil.rmtree(root, ignore_errors=True)
