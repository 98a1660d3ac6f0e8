"""DP statistical estimators: smooth sensitivity, propose-test-release, sample-and-aggregate,
quantiles with value intervals, regression, graph statistics; and (sub-package
:mod:`~statcurator.estimators.learning`) DP learners.

Every estimator is a value with a privacy map: ``est.measurement(meta)`` is the
:class:`~statcurator.core.measurement.Measurement` whose ``cost`` is charged, so it runs
through a curator (``cur.estimate("adult", Median("age"), epsilon=0.5, analyst=...)``,
charged in the ledger) or locally on a table (``Median("age", epsilon=0.5).run(table)`` or
``median(array, epsilon=0.5, bounds=(0, 120))``). See docs/estimators.md.

>>> import statcurator as sc
>>> sorted(n for n in __all__ if n[0].isupper())[:4]
['DegreeHistogram', 'EdgeCount', 'Estimate', 'Estimator']

Names are imported lazily (the learners import scipy and more).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module (relative to this package)
_EXPORTS: dict[str, str] = {
    "Estimator": "._protocol",
    "Estimate": "._protocol",
    "Median": ".smooth",
    "TrimmedMean": ".smooth",
    "median": ".smooth",
    "trimmed_mean": ".smooth",
    "IQR": ".ptr",
    "PTRMedian": ".ptr",
    "LADRegression": ".ptr",
    "iqr": ".ptr",
    "ptr_median": ".ptr",
    "lad_regression": ".ptr",
    "Quantiles": ".quantiles",
    "quantiles": ".quantiles",
    "SampleAndAggregate": ".aggregate",
    "sample_and_aggregate": ".aggregate",
    "LinearRegression": ".regression",
    "LogisticRegression": ".regression",
    "EdgeCount": ".graph",
    "DegreeHistogram": ".graph",
    "TriangleCount": ".graph",
    "edge_count": ".graph",
    "degree_histogram": ".graph",
    "triangle_count": ".graph",
    "learning": ".learning",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    value = mod if name == "learning" else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
