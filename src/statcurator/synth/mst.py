"""MST: synthetic data from a maximum spanning tree of noisy 2-way marginals.

McKenna, Miklau & Sheldon, *Winning the NIST Contest: A scalable and general approach to
differentially private synthetic data* (J. Privacy and Confidentiality, 2021). The budget ρ
is split in thirds:

1. **one-way marginals**, each measured with the discrete Gaussian at ρ/(3d); values whose
   noisy count is below 3σ are merged into one code (domain compression, post-processing);
2. **selection**: d-1 rounds of Kruskal's algorithm in which the exponential mechanism
   (ε²/8 = ρ/(3(d-1)) each) picks the next edge among the attribute pairs joining two
   components, scored by the L1 distance between the pair's true 2-way marginal and its
   estimate from the noisy one-ways (sensitivity 1);
3. **measurement** of the chosen d-1 two-way marginals at ρ/(3(d-1)) each;

then Private-PGM (``mbi``) fits a graphical model to all measurements and the synthetic rows
are sampled from it (post-processing). The number of rows is the model's noisy estimate,
never the true count.

>>> from statcurator import datasets
>>> MST(epsilon=1, delta=1e-9).measurement(datasets.adult().meta).cost.epsilon <= 1
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

from ..estimators.learning._domain import Attribute
from . import _pgm
from ._base import Synthesizer, SyntheticModel, compress, em_cost, em_epsilon_for_rho, select
from .marginals import contingency

__all__ = ["MST", "pair_scores"]


class MST(Synthesizer):
    """The MST synthesizer (McKenna et al. 2021) on statcurator's exact Gaussian noise.

    ``epsilon``/``delta`` (converted to ρ, see :func:`~statcurator.synth.rho_for`) or
    ``rho``; ``columns`` and ``bins`` choose the public domain from the metadata;
    ``iters`` are the mirror-descent iterations of the model fit.
    """

    name = "MST"

    def _run(self, codes: np.ndarray, domain: tuple[Attribute, ...], rho: Fraction,
             progress: Callable[[str, float], None]) -> SyntheticModel:
        names = [a.name for a in domain]
        sizes = [a.size for a in domain]
        d = len(names)
        third = rho / 3
        spent = Fraction(0)

        # 1. one-way marginals, then compression of the rare values
        progress("measuring one-way marginals", 0.0)
        oneway, sigma = {}, {}
        for a in names:
            oneway[a], sigma[a] = self.measure(codes, sizes, names, (a,), third / d)
            spent += third / d
        comp = compress(domain, oneway, sigma)
        csizes = comp.sizes(domain)
        ccodes = comp.apply(codes, domain)
        measured = [_compressed_oneway(a, oneway[a.name], sigma[a.name], comp) for a in domain]

        # 2. the maximum spanning tree, edge by edge with the exponential mechanism
        progress("selecting 2-way marginals", 0.2)
        eps_sel = em_epsilon_for_rho(third / (d - 1))
        n_hat = max(np.mean([float(np.sum(oneway[a])) for a in names]), 1.0)
        prob = {}
        for a in domain:
            y = np.maximum(_unweighted(measured[names.index(a.name)]), 0.0)
            prob[a.name] = y / y.sum() if y.sum() > 0 else np.full(y.size, 1 / y.size)
        clist = [csizes[n] for n in names]
        pairs = list(itertools.combinations(range(d), 2))
        score = dict(zip(pairs, pair_scores(ccodes, clist, [prob[n] for n in names], n_hat,
                                            pairs), strict=True))
        parent = list(range(d))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        chosen = []
        for _ in range(d - 1):
            cands = [(i, j) for i, j in pairs if find(i) != find(j)]
            i, j = cands[select(np.array([score[c] for c in cands]), eps_sel, Fraction(1))]
            spent += em_cost(eps_sel)
            parent[find(i)] = find(j)
            chosen.append((names[i], names[j]))

        # 3. measure the tree's edges
        progress("measuring 2-way marginals", 0.4)
        for clique in chosen:
            y, s = self.measure(ccodes, clist, names, clique, third / (d - 1))
            spent += third / (d - 1)
            measured.append(_pgm.Noisy(clique, y, s))
        assert spent <= rho, "MST spent more than its budget"

        progress("fitting the graphical model", 0.5)
        model = _pgm.estimate(csizes, measured, iters=self.iters)
        progress("done", 1.0)
        return SyntheticModel(tuple(domain), model, comp, oneway, {},
                              tuple((a,) for a in names) + tuple(chosen), rho,
                              tuple(measured))


def pair_scores(codes: np.ndarray, sizes: list[int], prob: list[np.ndarray], n_hat: float,
                pairs: list[tuple[int, int]]) -> np.ndarray:
    """MST's selection scores: for each pair (i, j), the L1 distance between its true 2-way
    marginal and the independent estimate n̂·p_i ⊗ p_j from the noisy one-ways. One added
    row changes one cell of each true marginal by 1: sensitivity 1 (not monotone).

    >>> codes = np.array([[0, 0], [1, 1]])
    >>> pair_scores(codes, [2, 2], [np.array([.5, .5])] * 2, 2.0, [(0, 1)]).tolist()
    [2.0]
    """
    out = []
    for i, j in pairs:
        x = contingency(codes, sizes, [i, j]).astype(np.float64)
        out.append(float(np.abs(x - n_hat * np.outer(prob[i], prob[j])).sum()))
    return np.array(out)


def _compressed_oneway(a: Attribute, y: np.ndarray, sigma: float, comp) -> _pgm.Noisy:
    """The noisy one-way marginal re-expressed on the compressed domain: the merged cell is
    the sum of m noisy cells (noise variance mσ²), measured with weight 1/√m so that every
    cell of the measurement has noise σ."""
    kept = comp.kept[a.name]
    if kept.size == a.size:
        return _pgm.Noisy((a.name,), y, sigma)
    rest = np.setdiff1d(np.arange(a.size), kept)
    w = np.ones(kept.size + 1)
    w[-1] = 1 / math.sqrt(rest.size)
    values = np.append(y[kept], y[rest].sum()) * w
    return _pgm.Noisy((a.name,), values, sigma, w)


def _unweighted(m: _pgm.Noisy) -> np.ndarray:
    return m.values if m.weights is None else m.values / m.weights
