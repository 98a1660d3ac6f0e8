"""statcurator: a privacy-preserving statistical database.

Anonymize microdata under syntactic privacy models, measure what releases leak, and answer
analysts' queries with differential privacy, all from one :class:`Curator`.

>>> import statcurator as sc
>>> sc.datasets.adult().num_rows
30162
>>> sc.PureDP(1) + sc.PureDP(0.5)
PureDP(epsilon=Fraction(3, 2))
>>> sc.anonymize(sc.datasets.adult(), sc.KAnonymity(5)).classes
24

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
    "load_dataset": ".datasets",
    "load_metadata": ".io.metadata",
    "TableMeta": ".core.schema",
    "Column": ".core.schema",
    "Role": ".core.schema",
    "PrivacyUnit": ".core.schema",
    # the curator and its answers
    "Curator": ".curator",
    "Release": ".query.release",
    # anonymization
    "anonymize": ".anonymize",
    "AnonymizationResult": ".anonymize.result",
    "KAnonymity": ".anonymize.criteria",
    "LDiversity": ".anonymize.criteria",
    "TCloseness": ".anonymize.criteria",
    "DeltaPresence": ".anonymize.criteria",
    "Hierarchy": ".anonymize.hierarchy",
    # the attack lab
    "attacks": ".attacks",
    "experiments": ".attacks.experiments",
    "Risk": ".attacks.risk",
    # DP building blocks
    "mechanisms": ".mechanisms",
    "estimators": ".estimators",
    "synth": ".synth",
    "DecisionTreeClassifier": ".estimators.learning",
    "RandomForestClassifier": ".estimators.learning",
    "KMeans": ".estimators.learning",
    "Ledger": ".accounting",
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
    "DataError": ".core.errors",
    "LedgerError": ".core.errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'statcurator' has no attribute {name!r}")
    mod = importlib.import_module(module, __name__)
    # an entry naming a module by its own name exports the module (datasets, mechanisms, and
    # anonymize, a module that can be called like its main function)
    value = mod if module.rsplit(".", 1)[-1] == name else getattr(mod, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
