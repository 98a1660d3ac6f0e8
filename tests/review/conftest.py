"""Fixtures of the review tests: curators over tiny tables, on the memory and DuckDB engines."""

from __future__ import annotations

import warnings

import pytest

from statcurator.curator import Curator

ENGINES = ("duckdb", "memory")


def make_curator(engine: str, table: object, meta: object, *, budget: object = 1000) -> Curator:
    """A curator with one private table ``t`` and a generous budget for analyst ``eve``."""
    cur = Curator(engine=engine, default_budget=None)
    cur.register("t", table, meta)
    cur.set_dataset_budget("t", epsilon=budget, delta=1e-3)
    cur.set_budget("eve", "t", epsilon=budget, delta=1e-3)
    return cur


@pytest.fixture(scope="session")
def spark_session():
    pytest.importorskip("pyspark")
    from statcurator.engines.spark import local_session

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        spark = local_session("local[2]", app_name="statcurator-review-tests")
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
