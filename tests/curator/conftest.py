"""Fixtures for curator tests: the textbook diabetes table with its metadata, a spy engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from statcurator.core.schema import Column, TableMeta
from statcurator.engines.duckdb import DuckDBEngine

DIABETES_META = TableMeta(
    "diabetes",
    (Column("Name", role="identifier"), Column("Gender", categories=("F", "M")),
     Column("Age", type="integer", bounds=(0, 120)), Column("Diabetes", categories=("Y", "N"))),
    neighbours="bounded", separator=";")


class SpyEngine(DuckDBEngine):
    """A DuckDB engine that records every plan it runs (to prove what touched the data)."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.calls = 0
        self.fail = fail

    def execute(self, plan, *, salt):
        self.calls += 1
        if self.fail:
            raise RuntimeError("the engine crashed after the charge")
        return super().execute(plan, salt=salt)


@pytest.fixture
def diabetes_csv(textbook: Path) -> Path:
    return textbook / "diabetes.csv"


@pytest.fixture
def spy() -> SpyEngine:
    return SpyEngine()
