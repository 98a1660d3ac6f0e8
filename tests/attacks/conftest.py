"""Fixtures of the attack-lab tests: the textbook tables (tests/data/textbook, every column
read as text, as an attacker reads a published file) and small Adult splits."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

TEXTBOOK = Path(__file__).resolve().parents[1] / "data" / "textbook"


def read_text(path: Path) -> pa.Table:
    header = path.read_text(encoding="utf-8").splitlines()[0].split(";")
    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=";"),
                          convert_options=pacsv.ConvertOptions(
                              column_types={h: pa.string() for h in header},
                              strings_can_be_null=False))


@pytest.fixture(scope="session")
def textbook() -> Callable[[str], pa.Table]:
    """``textbook("voters.csv")``: a textbook table with every column as text."""
    if not TEXTBOOK.is_dir():
        pytest.fail(f"{TEXTBOOK} is missing: the textbook tables belong in tests/data/textbook")

    def read(name: str) -> pa.Table:
        return read_text(TEXTBOOK / name)

    return read
