"""How close a synthetic table is to the real one (evaluation only: it reads both tables).

>>> import numpy as np
>>> real = np.array([[0, 0], [1, 1]]); synth = np.array([[0, 0], [0, 0]])
>>> round(marginal_tv(real, synth, [2, 2], [0, 1]), 3)
0.5
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from .marginals import contingency

__all__ = ["marginal_tv", "average_tv"]


def marginal_tv(real: np.ndarray, synth: np.ndarray, sizes: Sequence[int],
                columns: Sequence[int]) -> float:
    """Total-variation distance between the normalized marginals of two code tables."""
    p = contingency(real, sizes, columns).ravel().astype(np.float64)
    q = contingency(synth, sizes, columns).ravel().astype(np.float64)
    p /= max(p.sum(), 1.0)
    q /= max(q.sum(), 1.0)
    return float(0.5 * np.abs(p - q).sum())


def average_tv(real: np.ndarray, synth: np.ndarray, sizes: Sequence[int], k: int = 3) -> float:
    """The mean total-variation distance over every k-way marginal.

    >>> average_tv(np.array([[0, 1, 0]]), np.array([[0, 1, 0]]), [2, 2, 2], 2)
    0.0
    """
    cols = list(itertools.combinations(range(len(sizes)), k))
    return float(np.mean([marginal_tv(real, synth, sizes, c) for c in cols]))
