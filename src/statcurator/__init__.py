"""statcurator: a privacy-preserving statistical database.

Anonymize microdata under syntactic privacy models, measure what releases leak, and answer
analysts' queries with differential privacy, all from one :class:`Curator`.

>>> import statcurator as sc
>>> sc.datasets.adult().num_rows
30162
>>> sc.PureDP(1) + sc.PureDP(0.5)
PureDP(epsilon=Fraction(3, 2))

Names are imported lazily so that ``import statcurator`` stays fast.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# public name -> module that defines it (relative to this package)
_EXPORTS: dict[str, str] = {
    # data and metadata
    "datasets": ".datasets",
    "Dataset": ".io.dataset",
    "load_dataset": ".io.dataset",
    "load_metadata": ".io.metadata",
    "TableMeta": ".core.schema",
    "Column": ".core.schema",
    "Role": ".core.schema",
    "PrivacyUnit": ".core.schema",
    # privacy losses
    "PureDP": ".core.measures",
    "ApproxDP": ".core.measures",
    "ZCDP": ".core.measures",
    # errors
    "StatcuratorError": ".core.errors",
    "InvalidParameterError": ".core.errors",
    "MetadataError": ".core.errors",
    "BudgetExceededError": ".core.errors",
    "UnsupportedQueryError": ".core.errors",
    "VerificationError": ".core.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'statcurator' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    value = mod if name == module.rsplit(".", 1)[-1] and not hasattr(mod, name) else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
