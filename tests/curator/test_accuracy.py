"""Accuracy through the whole release path: over 1,000 releases of a noisy count at ε = 1 the
mean absolute error matches the discrete Laplace law at scale 1 (0.851) within 3 standard
errors, and the error has no systematic bias — unlike a count whose noise is floored (as
SmartNoise SQL does: mean error -0.5), which this test catches.

The draws are seeded (``mechanisms.rng.seeded``), so the test is deterministic: it cannot
fail by chance, only because of a wrong implementation."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.errors import PrivacyWarning
from statcurator.core.measures import PureDP
from statcurator.curator import Curator
from statcurator.mechanisms import rng
from statcurator.query import binding

from .conftest import DIABETES_META

pytestmark = pytest.mark.slow

REPS = 1000
A = math.exp(-1.0)  # discrete Laplace at scale b = 1: P(k) ∝ e^{-|k|}
MEAN_ABS = 2 * A / (1 - A * A)  # 0.8509
SECOND_MOMENT = 2 * A / (1 - A) ** 2


def errors(diabetes_csv, seed: int) -> np.ndarray:
    cur = Curator(default_budget=PureDP(REPS), dataset_budget=PureDP(REPS))
    cur.register("diabetes", diabetes_csv, DIABETES_META)
    q = cur.sql("SELECT COUNT(*) AS n FROM diabetes WHERE Diabetes = 'Y'")
    assert q.bind(1).infos[0].scale == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with rng.seeded(seed):
            values = [q.release(epsilon=1, request_id=f"r{i}").rows()[0]["n"] for i in range(REPS)]
    assert cur.budget("default", "diabetes").spent == PureDP(Fraction(REPS))
    return np.array(values, dtype=float) - 2  # the true count of diabetes patients is 2


def check(err: np.ndarray) -> None:
    assert round(MEAN_ABS, 3) == 0.851
    se_abs = math.sqrt((SECOND_MOMENT - MEAN_ABS**2) / REPS)
    assert abs(np.abs(err).mean() - MEAN_ABS) <= 3 * se_abs, np.abs(err).mean()
    se_mean = math.sqrt(SECOND_MOMENT / REPS)
    assert abs(err.mean()) <= 3 * se_mean, err.mean()


def test_noisy_count_error_matches_theory_and_is_unbiased(diabetes_csv):
    check(errors(diabetes_csv, seed=20240611))


def test_a_floored_count_is_caught(diabetes_csv, monkeypatch):
    gen = np.random.default_rng(5)

    def floored(obj, raw, m, vector, n):  # continuous Laplace, then floor: SmartNoise's bias
        return [[math.floor(x + gen.laplace(0, float(obj.scale))) for x in raw] for _ in range(n)]

    monkeypatch.setattr(binding, "_noisy", floored)
    with pytest.raises(AssertionError):
        check(errors(diabetes_csv, seed=20240611))
