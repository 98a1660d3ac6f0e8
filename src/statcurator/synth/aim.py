"""AIM: an adaptive and iterative mechanism for workload-aware synthetic data.

McKenna, Mullins, Sheldon & Miklau, *AIM: An Adaptive and Iterative Mechanism for
Differentially Private Synthetic Data* (VLDB 2022). Given a workload of marginals (by default
every 3-way marginal), AIM

1. measures every one-way marginal (discrete Gaussian, ρ_t = 0.9ρ/T each, T = 16d);
2. repeats: among the *candidates* (every marginal contained in a workload marginal, whose
   addition keeps the junction tree under a size limit growing with the budget spent), the
   exponential mechanism (ε_t with ε_t²/8 = 0.1ρ/T) picks the one the current model gets
   most wrong, scored w_r·(‖M_r(D) - M_r(p̂)‖₁ - √(2/π)·σ_t·n_r) with w_r = Σ_W |r ∩ W|
   (sensitivity max w_r); it is measured at ρ_t and the model re-fitted (Private-PGM, warm
   start); when the new measurement barely moved the model (‖Δ‖₁ <= √(8/π)·σ_t·n_r) the noise
   is halved and ε_t doubled (budget annealing);
3. stops when the remaining budget cannot pay two more rounds, spending it all on a last one.

The rounds' costs (ρ_t + ε_t²/8) add up to at most ρ, exactly (rational arithmetic).

>>> from statcurator import datasets
>>> AIM(rho=0.01).measurement(datasets.adult().meta).cost
ZCDP(rho=Fraction(1, 100))
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..estimators.learning._domain import Attribute
from . import _pgm
from ._base import (
    Compression,
    Synthesizer,
    SyntheticModel,
    em_cost,
    em_epsilon_for_rho,
    select,
)
from .marginals import contingency, kway

__all__ = ["AIM"]


class AIM(Synthesizer):
    """The AIM synthesizer (McKenna et al. 2022) on statcurator's exact Gaussian noise.

    ``workload``: k (every k-way marginal, default 3) or a list of cliques;
    ``max_model_size``: the junction tree's size limit in MB; ``round_iters``: mirror-descent
    iterations per round (the final fit uses ``iters``).
    """

    name = "AIM"

    def __init__(self, epsilon: object = None, *, workload: int | Sequence[Sequence[str]] = 3,
                 max_model_size: float = 80.0, round_iters: int = 100,
                 rounds: int | None = None, **options: Any) -> None:
        super().__init__(epsilon, **options)
        self.workload, self.max_model_size = workload, max_model_size
        self.round_iters, self.rounds = round_iters, rounds
        if not (isinstance(max_model_size, int | float) and 0 < max_model_size < 1e6):
            raise InvalidParameterError("max_model_size must be a positive number of MB",
                                        remedy="pass max_model_size=80")

    def _workload(self, names: list[str]) -> list[tuple[str, ...]]:
        if isinstance(self.workload, int):
            return kway(names, min(self.workload, len(names)))
        return [tuple(c) for c in self.workload]

    def _run(self, codes: np.ndarray, domain: tuple[Attribute, ...], rho: Fraction,
             progress: Callable[[str, float], None]) -> SyntheticModel:
        names = [a.name for a in domain]
        sizes = [a.size for a in domain]
        dsizes = {a.name: a.size for a in domain}
        work = self._workload(names)
        # candidates: every marginal inside a workload marginal, weighted by its overlap
        subsets = {c for w in work for k in range(1, len(w) + 1)
                   for c in itertools.combinations(w, k)}
        cands = {c: sum(len(set(c) & set(w)) for w in work) for c in sorted(subsets)}
        truth = {c: contingency(codes, sizes, [names.index(a) for a in c]).ravel()
                 .astype(np.float64) for c in cands}
        rounds = self.rounds or 16 * len(names)
        rho_t = Fraction(9, 10) * rho / rounds
        eps_t = em_epsilon_for_rho(rho / (10 * rounds))

        progress("measuring one-way marginals", 0.0)
        measured, used = [], Fraction(0)
        oneway = {}
        for a in names:
            y, s = self.measure(codes, sizes, names, (a,), rho_t)
            oneway[a] = y
            measured.append(_pgm.Noisy((a,), y, s))
            used += rho_t
        model = _pgm.estimate(dsizes, measured, iters=self.round_iters)
        cliques = [(a,) for a in names]
        last = False
        while not last:
            remaining = rho - used
            if remaining < 2 * (rho_t + em_cost(eps_t)):
                rho_t = Fraction(9, 10) * remaining
                eps_t = em_epsilon_for_rho(remaining / 10)
                last = True
            limit = self.max_model_size * float((used + rho_t + em_cost(eps_t)) / rho)
            small = [c for c in cands if c in cliques or
                     _pgm.model_size_mb(dsizes, [*cliques, c]) <= limit]
            sigma = math.sqrt(float(1 / (2 * rho_t)))
            scores = np.array([cands[c] * (np.abs(truth[c] - _pgm.marginal(model, c)).sum()
                                           - math.sqrt(2 / math.pi) * sigma * truth[c].size)
                               for c in small])
            sens = Fraction(max(cands[c] for c in small))
            chosen = small[select(scores, eps_t, sens)]
            used += em_cost(eps_t)
            y, s = self.measure(codes, sizes, names, chosen, rho_t)
            used += rho_t
            assert used <= rho, "AIM spent more than its budget"
            measured.append(_pgm.Noisy(chosen, y, s))
            if chosen not in cliques:
                cliques.append(chosen)
            before = _pgm.marginal(model, chosen)
            model = _pgm.estimate(dsizes, measured, iters=self.round_iters, warm=model)
            after = _pgm.marginal(model, chosen)
            progress(f"round: measured {' × '.join(chosen)}", min(0.9, float(used / rho)))
            if np.abs(after - before).sum() <= math.sqrt(8 / math.pi) * sigma * y.size:
                rho_t, eps_t = 4 * rho_t, 2 * eps_t  # budget annealing
        progress("fitting the graphical model", 0.9)
        model = _pgm.estimate(dsizes, measured, iters=self.iters, warm=model)
        progress("done", 1.0)
        identity = Compression({a.name: np.arange(a.size) for a in domain},
                               {a.name: np.arange(a.size) for a in domain})
        return SyntheticModel(tuple(domain), model, identity, oneway, {}, tuple(cliques), rho,
                              tuple(measured))
