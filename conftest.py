"""The test session's own user folders: everything pytest runs here (the tests, the modules'
and docs' doctests, and the processes they start) finds statcurator's default ledger
(``~/.local/share/statcurator``) and its anchors (``~/.local/state/statcurator``) in a
temporary folder, never the user's. A test used to read and write the user's default ledger
and anchors: a user's own ledger there could fail the suite, and every run added its
ledgers' anchors to the user's file.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

#: the XDG folders statcurator's defaults live in (platformdirs reads them on Linux)
_FOLDERS = ("XDG_DATA_HOME", "XDG_STATE_HOME")
_made: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point the XDG folders at a new temporary folder, in the main process and in each
    xdist worker (each its own)."""
    home = tempfile.mkdtemp(prefix="statcurator-test-home-")
    _made.append(home)
    for name in _FOLDERS:
        os.environ[name] = os.path.join(home, name.lower())


def pytest_unconfigure(config: pytest.Config) -> None:
    while _made:
        shutil.rmtree(_made.pop(), ignore_errors=True)
