"""Shared fixtures: paths to the shared data (read in place, never copied)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
LOCAL = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data`` next to the checkout (the project's reference data).

    Missing shared data is an error, not a skip: the known-answer tests must not pass by
    not running.
    """
    if not SHARED.exists():
        pytest.fail(f"{SHARED} is missing; check out the project next to its shared/ folder")
    return SHARED


@pytest.fixture(scope="session")
def textbook(shared_data: Path) -> Path:
    return shared_data / "textbook"
