"""Permute-and-flip for quantiles: its output law, computed by hand, and its accuracy edge."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.errors import InvalidParameterError
from statcurator.mechanisms.quantile import QuantileMechanism, _permute_and_flip


def test_the_output_law_is_a_uniform_head() -> None:
    # one best point (score 0) and a run of two points at score -1, coefficient c = 1:
    # each of the two flips heads with p = e^-1 and the output is a uniform head, so
    # P(best) = (1-p)^2 + 2p(1-p)/2 + p^2/3. Binomial bound at 5.4 sd: false failure < 1e-7.
    p = math.exp(-1)
    want = (1 - p) ** 2 + p * (1 - p) + p * p / 3
    n = 200_000
    draws = _permute_and_flip(np.array([0, 1]), np.array([1, 2]), np.array([0, -1]),
                              Fraction(1), n)
    got = float(np.mean(draws == 0))
    assert abs(got - want) < 5.4 * math.sqrt(want * (1 - want) / n), (got, want)
    assert set(np.unique(draws)) <= {0, 1, 2}
    # the exponential mechanism would give the best point 1/(1 + 2p) = 0.576 < 0.672
    assert want > 1 / (1 + 2 * p) + 0.05


def test_huge_grids_are_refused_with_the_remedy() -> None:
    with pytest.raises(InvalidParameterError, match="coarser grid"):
        QuantileMechanism(1, 0, 2**23, 1, selection="permute-and-flip")
    with pytest.raises(InvalidParameterError, match="permute-and-flip"):
        QuantileMechanism(1, 0, 10, 1, selection="flip")
