"""Where relational plans run (DuckDB, Spark, a pure-Python reference). Engines never add noise.

Each engine takes a compiled :class:`~statcurator.query.relational.EnginePlan` and returns an
:class:`~statcurator.query.relational.ExactResult` — exact aggregates only. ``get_engine``
builds one by name:

>>> get_engine("memory").name
'memory'
>>> get_engine("oracle")
Traceback (most recent call last):
...
statcurator.core.errors.EngineError: unknown engine 'oracle'; choose one of: duckdb, spark, memory
"""

from __future__ import annotations

from typing import Any

from ..core.errors import EngineError
from .base import Engine, TableSource

__all__ = ["Engine", "TableSource", "get_engine", "ENGINES"]

ENGINES = ("duckdb", "spark", "memory")


def get_engine(name: str = "duckdb", **options: Any) -> Engine:
    """An engine by name: ``duckdb`` (default), ``spark`` or ``memory``."""
    key = str(name).lower()
    if key == "duckdb":
        from .duckdb import DuckDBEngine

        return DuckDBEngine(**options)
    if key == "spark":
        from .spark import SparkEngine

        return SparkEngine(**options)
    if key == "memory":
        from .memory import MemoryEngine

        return MemoryEngine(**options)
    raise EngineError(f"unknown engine {name!r}", remedy="choose one of: " + ", ".join(ENGINES))
