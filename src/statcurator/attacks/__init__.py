"""The attack lab: adversaries against published tables and query interfaces, measured.

Every attack is a frozen value whose docstring states its adversary model — exactly what the
attacker knows — and whose ``run(...)`` returns a :class:`Risk`: the share of targets
breached with a Wilson interval, the baseline an attacker reaches without the release, the
number of targets, and per-target detail on request.

* On published tables: :class:`Linkage` (prosecutor, journalist and marketer risk),
  :class:`Homogeneity`, :class:`BackgroundKnowledge`, :class:`Skewness`,
  :class:`Similarity`, :class:`Composition` (intersection of independent releases),
  :class:`Minimality` and :class:`Update` (re-publication).
* On statistics and query interfaces: :class:`MembershipInference` (Homer et al.),
  :class:`Reconstruction` (Dinur–Nissim, LP decoder), :class:`Averaging` and
  :class:`Differencing`, against an oracle — a :class:`NaiveInterface` or the curator.
* The DP contrast: :func:`dp_histograms` (noisy histograms of the sensitive value per
  generalized cell) and :func:`~statcurator.attacks.membership.dp_aggregates`; every table
  attack takes ``epsilon=`` to attack the DP counterpart too.
* :mod:`statcurator.attacks.experiments`: the composition experiment and Adult scenarios.

>>> import statcurator as sc
>>> res = sc.anonymize(sc.datasets.adult(), sc.KAnonymity(5), algorithm="mondrian",
...                    qi=["age", "sex", "race", "native-country"], sensitive=["salary-class"])
>>> risk = sc.attacks.Homogeneity().run(res)
>>> risk.targets, 0 < risk.rate < 1
(30162, True)
"""

from .composition import Composition, Update, intersect
from .dp import HistogramRelease, dp_histograms
from .membership import (
    Aggregates,
    MembershipInference,
    dp_advantage_bound,
    dp_aggregates,
    one_hot_aggregates,
    simulate_gwas,
)
from .minimality import Minimality
from .queries import Averaging, Differencing, NaiveInterface, Reconstruction, lp_decode
from .risk import Risk, wilson
from .tables import BackgroundKnowledge, Homogeneity, Linkage, Similarity, Skewness

__all__ = [
    "Risk",
    "wilson",
    "Linkage",
    "Homogeneity",
    "BackgroundKnowledge",
    "Skewness",
    "Similarity",
    "Composition",
    "Update",
    "Minimality",
    "MembershipInference",
    "Reconstruction",
    "Averaging",
    "Differencing",
    "NaiveInterface",
    "HistogramRelease",
    "dp_histograms",
    "Aggregates",
    "simulate_gwas",
    "one_hot_aggregates",
    "dp_aggregates",
    "dp_advantage_bound",
    "intersect",
    "lp_decode",
    "ATTACKS",
]

#: the attacks by their CLI names
ATTACKS: dict[str, type] = {
    "linkage": Linkage,
    "homogeneity": Homogeneity,
    "background": BackgroundKnowledge,
    "skewness": Skewness,
    "similarity": Similarity,
    "composition": Composition,
    "minimality": Minimality,
    "update": Update,
    "membership": MembershipInference,
    "reconstruction": Reconstruction,
    "averaging": Averaging,
    "differencing": Differencing,
}
