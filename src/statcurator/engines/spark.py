"""The Spark engine (the ``spark`` extra): the same compiled plan, as
sqlglot trees rendered as Spark SQL, run on a SparkSession; sums are taken over DECIMAL(38, 0) so they
stay exact. pyspark is imported only inside the functions that need it.

Usage (needs pyspark and Java)::

    eng = SparkEngine()                      # local[2] session, created on first use
    eng = SparkEngine(spark=my_session)      # or an existing session (a cluster)
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any

from ..core.errors import EngineError
from ..query.relational import EnginePlan, ExactResult
from .base import TableSource, result_from_rows
from .sqlgen import plan_sql

if TYPE_CHECKING:
    from ..core.schema import TableMeta

__all__ = ["SparkEngine", "local_session", "spark_schema"]


def local_session(master: str = "local[2]", app_name: str = "statcurator") -> Any:
    """A local SparkSession tuned for small jobs (few shuffle partitions, no UI)."""
    from pyspark.sql import SparkSession

    return (SparkSession.builder.master(master).appName(app_name)
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate())


def spark_schema(arrow_schema: Any) -> Any:
    """The Spark schema a CSV file is read with (matching the Arrow schema of the source)."""
    import pyarrow.types as pt
    from pyspark.sql import types as T

    fields = []
    for f in arrow_schema:
        t = f.type
        if pt.is_boolean(t):
            st = T.BooleanType()
        elif pt.is_integer(t):
            st = T.LongType()
        elif pt.is_floating(t):
            st = T.DoubleType()
        else:
            st = T.StringType()
        fields.append(T.StructField(f.name, st, True))
    return T.StructType(fields)


class SparkEngine:
    """Run compiled plans on Spark. ``spark`` is an existing session (None: a local one)."""

    name = "spark"

    def __init__(self, spark: Any = None, *, master: str = "local[2]") -> None:
        self._spark = spark
        self.master = master
        self.sources: dict[str, TableSource] = {}
        self.views: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def spark(self) -> Any:
        if self._spark is None:
            try:
                self._spark = local_session(self.master)
            except ImportError as e:
                raise EngineError("the Spark engine needs pyspark",
                                  remedy="pip install 'statcurator[spark]' (and Java 17)") from e
        return self._spark

    def register(self, name: str, source: TableSource) -> None:
        with self._lock:
            view = self.views.get(name) or f"sc_{re.sub(r'[^A-Za-z0-9_]', '_', name)}_{len(self.views)}"
            spark = self.spark
            if source.kind == "parquet":
                df = spark.read.parquet(source.path)
            elif source.kind == "csv":
                df = (spark.read.option("header", "true").option("sep", source.separator)
                      .option("emptyValue", "").schema(spark_schema(source.schema))
                      .csv(source.path))
            else:
                table = source.to_arrow()
                df = spark.createDataFrame(table)
            df.createOrReplaceTempView(view)
            self.views[name] = view
            self.sources[name] = source

    def declare_types(self, name: str, meta: TableMeta) -> list[str]:
        """Not checked ahead: Spark analyzes every plan before its charge (:meth:`validate`)."""
        return []

    def unregister(self, name: str) -> None:
        with self._lock:
            view = self.views.pop(name, None)
            self.sources.pop(name, None)
            if view and self._spark is not None:
                self._spark.catalog.dropTempView(view)

    def close(self) -> None:
        for name in list(self.views):
            self.unregister(name)

    def sql(self, plan: EnginePlan, salt: str = "0") -> tuple[str, list[str]]:
        """The Spark SQL statements for ``plan`` (for ``explain``)."""
        return plan_sql(plan, salt, self.views, dialect="spark")

    def validate(self, plan: EnginePlan) -> None:
        """Analyze the statements without running them (Spark resolves names and types when
        a query is planned; no job runs until rows are collected)."""
        main, hists = self.sql(plan, "0" * 32)
        try:
            for stmt in (main, *hists):
                self.spark.sql(stmt)
        except EngineError:
            raise
        except Exception as e:  # AnalysisException and friends
            raise EngineError(
                f"Spark cannot run this query on the registered data ({type(e).__name__}); "
                "nothing was charged",
                remedy="the data owner should check that the registered data's column types "
                       "match its metadata (the cause is chained)") from e

    def execute(self, plan: EnginePlan, *, salt: str) -> ExactResult:
        main, hists = self.sql(plan, salt)
        try:
            spark = self.spark
            rows = [tuple(r) for r in spark.sql(main).collect()]
            hist_rows = [[tuple(r) for r in spark.sql(h).collect()] for h in hists]
        except EngineError:
            raise
        except Exception as e:  # py4j / pyspark exceptions
            # as for DuckDB: the message may quote private values, so only the type is shown
            raise EngineError(f"Spark failed to run the compiled query ({type(e).__name__})",
                              remedy="the data owner should check that the registered data "
                                     "matches its metadata (the cause is chained)") from e
        return result_from_rows(plan, rows, hist_rows)
