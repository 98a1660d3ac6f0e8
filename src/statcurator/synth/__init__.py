"""DP synthetic data and consistent marginals.

* :class:`MarginalWorkload` — a workload of marginals measured with exact Gaussian noise
  (ρ-zCDP), made consistent and non-negative by post-processing;
* :class:`MST` and :class:`AIM` — synthesizers that select marginals privately, measure
  them, fit a graphical model (Private-PGM, the ``mbi`` library of the ``synth`` extra) and
  sample a table with the original schema.

Budgets are in ρ (zCDP); ``epsilon`` with ``delta`` is converted with :func:`rho_for`.

>>> rho_for(1, 1e-9) < rho_for(1, 1e-6)
True
"""

from __future__ import annotations

from ._base import Synthesizer, SyntheticModel, rho_for
from .aim import AIM
from .marginals import MarginalWorkload, NoisyMarginals, kway, make_consistent
from .metrics import average_tv, marginal_tv
from .mst import MST

__all__ = ["MST", "AIM", "Synthesizer", "SyntheticModel", "MarginalWorkload",
           "NoisyMarginals", "kway", "make_consistent", "rho_for", "average_tv",
           "marginal_tv"]
