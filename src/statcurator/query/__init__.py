"""The DP query layer: plan IR, SQL front end, builder, rewrite rules, sensitivity, compiler.

* :mod:`.expr`, :mod:`.plan` — the frozen plan IR;
* :mod:`.sql` — SQL (sqlglot) → plan, refusing everything outside the supported subset;
* :mod:`.builder` — a dataframe-style builder producing the same plans;
* :mod:`.analysis`, :mod:`.rewrite`, :mod:`.sensitivity` — public bounds and key sets, the
  rewrite rules, sensitivities from the plan;
* :mod:`.aggregates` — one class per aggregate (its measures, and how they combine);
* :mod:`.compiler` — plan → compiled query (engine plan and measures), no ε, no data;
* :mod:`.binding` — a budget bound to a compiled query: mechanisms and the query's one
  core Measurement (whose map is the cost charged and whose function is the release);
* :mod:`.postprocess`, :mod:`.release` — intervals, HAVING/ORDER BY, and the ``Release``.

Users normally go through :class:`statcurator.curator.Curator`; the builder functions are
re-exported here:

>>> from statcurator.query import col, count
>>> (col("age") >= 18).node.sql()
'"age" >= 18'
"""

from .binding import BoundQuery
from .builder import (
    avg,
    col,
    count,
    count_distinct,
    lit,
    max,
    mean,
    median,
    min,
    quantile,
    stddev,
    stddev_pop,
    sum,
    var_pop,
    variance,
    when,
)
from .compiler import CompiledQuery, CompileOptions, compile_query
from .plan import QueryPlan
from .release import Release
from .sql import parse_sql

__all__ = [
    "parse_sql", "compile_query", "CompileOptions", "CompiledQuery", "BoundQuery", "QueryPlan",
    "Release", "col", "lit", "when", "count", "count_distinct", "sum", "avg", "mean",
    "variance", "var_pop", "stddev", "stddev_pop", "median", "quantile", "min", "max",
]
