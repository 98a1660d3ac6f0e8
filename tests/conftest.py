"""Shared fixtures: the small reference tables the tests read, all inside the repository.

``tests/data`` holds copies of the textbook tables, the t-closeness toy table and the Adult
research sample (provenance and licences in ``tests/data/README.md``); the full Adult table
and its ARX hierarchies are the bundled ``statcurator.datasets.adult()``.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


def _quiet_interpreter_teardown() -> None:
    """After the summary, nothing more reaches stderr (issue 8): DuckDB's nanobind bindings
    print "nanobind: leaked N instances" at interpreter teardown whenever a thread still holds
    a connection (a daemon thread of a test), one block per process. atexit handlers run
    after pytest has printed everything and before that teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)


atexit.register(_quiet_interpreter_teardown)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data`` (read in place; tests write to ``tmp_path``, never here)."""
    return DATA


@pytest.fixture(scope="session")
def textbook(data_dir: Path) -> Path:
    return data_dir / "textbook"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run every test that uses a Spark session on one xdist worker (``--dist loadgroup``
    in pyproject.toml): one local JVM for the whole run instead of one per worker."""
    for item in items:
        if "spark_session" in getattr(item, "fixturenames", ()) or item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.xdist_group("spark"))
