"""Engine fixtures: one Spark session shared by every Spark test of the run."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark_session():
    pytest.importorskip("pyspark")
    from statcurator.engines.spark import local_session

    spark = local_session("local[2]", app_name="statcurator-tests")
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()
