"""Goodness-of-fit tests for discrete samplers (used by the sampler test bench).

:func:`chi2_gof` compares integer draws with a probability mass function by Pearson's χ² test,
pooling the tails so that every cell expects at least ``min_expected`` draws (the χ²
approximation is then accurate enough at the 1e-6 level used by the test bench).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> draws = rng.binomial(10, 0.5, size=50_000)
>>> from math import comb
>>> pmf = lambda k: np.array([comb(10, int(i)) / 2**10 if 0 <= i <= 10 else 0.0 for i in k])
>>> chi2_gof(draws, pmf, support=(0, 10)) > 1e-6
True
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["chi2_gof"]


def chi2_gof(draws: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray],
             support: tuple[int, int], min_expected: float = 20.0) -> float:
    """The p-value of Pearson's χ² test of integer ``draws`` against ``pmf``.

    ``support`` is an integer range wide enough to hold essentially all the mass of the
    claimed law; draws outside it fall into the first or last cell. Consecutive values are
    pooled into cells that each expect at least ``min_expected`` draws.

    >>> draws = np.random.default_rng(1).integers(0, 4, size=4000)
    >>> chi2_gof(draws, lambda k: np.full(len(k), 0.25), (0, 3)) > 1e-6
    True
    """
    from scipy.stats import chi2

    draws = np.asarray(draws)
    n = draws.shape[0]
    lo, hi = support
    ks = np.arange(lo, hi + 1)
    p = np.clip(np.asarray(pmf(ks), dtype=np.float64), 0.0, None)
    p = p / p.sum()  # the support must hold all but a negligible part of the mass
    # cells of consecutive values, closed from the left once they expect enough draws; the
    # first cell also takes draws below the support, the last those above it
    uppers = []  # the largest value of each cell
    acc = 0.0
    for k, pk in zip(ks.tolist(), (p * n).tolist(), strict=True):
        acc += pk
        if acc >= min_expected:
            uppers.append(k)
            acc = 0.0
    if not uppers:
        raise ValueError("no cell expects enough draws: increase the number of draws")
    uppers[-1] = hi  # the remainder joins the last cell
    cell_of_value = np.searchsorted(np.array(uppers), ks, side="left")
    expected = np.bincount(cell_of_value, weights=p * n, minlength=len(uppers))
    cells = np.searchsorted(np.array(uppers), np.clip(draws, lo, hi), side="left")
    observed = np.bincount(cells, minlength=len(uppers)).astype(np.float64)
    if len(uppers) < 2:
        return 1.0
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(chi2.sf(stat, df=len(uppers) - 1))
