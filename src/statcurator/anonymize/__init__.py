"""Anonymization: hierarchies, privacy criteria, lattice search, Mondrian, utility metrics.

The one call is :func:`anonymize`:

>>> import statcurator as sc
>>> from statcurator.anonymize import anonymize, KAnonymity
>>> res = anonymize(sc.datasets.adult(), KAnonymity(5))
>>> res.levels["age"], res.classes, res.verified["5-anonymity"]
(4, 24, True)

The pieces are importable for those who need them: :class:`Hierarchy`, the criteria
(:class:`KAnonymity`, :class:`LDiversity`, :class:`TCloseness`, :class:`DeltaPresence`), the
utility and risk metrics (:mod:`.metrics`), the lattice (:class:`Lattice`) and the independent
verifier (:func:`verify`).
"""

import sys as _sys
import types as _types

from .api import ALGORITHMS, anonymize
from .criteria import ClassSummary, Criterion, DeltaPresence, KAnonymity, LDiversity, TCloseness
from .hierarchy import Hierarchy
from .lattice import Lattice
from .metrics import METRICS, prosecutor_risk
from .result import AnonymizationResult
from .verify import verify

__all__ = [
    "anonymize",
    "AnonymizationResult",
    "Criterion",
    "KAnonymity",
    "LDiversity",
    "TCloseness",
    "DeltaPresence",
    "ClassSummary",
    "Hierarchy",
    "Lattice",
    "verify",
    "prosecutor_risk",
    "ALGORITHMS",
    "METRICS",
]


class _CallableModule(_types.ModuleType):
    """``statcurator.anonymize`` is both this package and its one call:
    ``sc.anonymize(data, sc.KAnonymity(5))`` is ``sc.anonymize.anonymize(...)``."""

    def __call__(self, *args: object, **kwargs: object) -> AnonymizationResult:
        return anonymize(*args, **kwargs)  # type: ignore[arg-type]


_sys.modules[__name__].__class__ = _CallableModule
