"""The composition experiment and the Adult scenarios."""

from __future__ import annotations

import numpy as np
import pytest

import statcurator as sc
from statcurator.attacks import experiments as ex
from statcurator.core.errors import InvalidParameterError

ADULT = sc.datasets.adult()


def test_split_follows_the_design() -> None:
    a, b, ov = ex.split(30162, 5000, seed=0)
    assert len(ov) == 5000 and set(ov) <= set(a) & set(b)
    assert len(set(a) | set(b)) == 30162
    # the other records are split evenly
    assert abs((len(a) - 5000) - (len(b) - 5000)) <= 1
    a2, b2, ov2 = ex.split(30162, 5000, seed=0)
    assert np.array_equal(ov, ov2)
    assert not np.array_equal(ov, ex.split(30162, 5000, seed=1)[2])


def test_a_small_run() -> None:
    exp = ex.composition(ADULT, k=[50], algorithms=["optimal"], l=[], t=[], epsilon=[0.5], seeds=2,
                         overlap=300, workers=1)
    assert [r["release"] for r in exp.rows] == ["anonymized", "dp histograms"]
    row = exp.rows[0]
    assert row["seeds"] == 2 and row["targets"] == 300
    assert row["perfect_low"] <= row["perfect"] <= row["perfect_high"]
    assert exp.rows[1]["cost"] == "ε=1"  # two releases at ε = 0.5
    assert len(exp.runs) == 4
    assert "optimal" in exp.table()


def test_refuses_a_bad_design() -> None:
    with pytest.raises(InvalidParameterError, match="overlap"):
        ex.composition(ADULT, overlap=10**6, workers=1)
    with pytest.raises(InvalidParameterError, match="algorithm"):
        ex.composition(ADULT, algorithms=["flash"], workers=1)


@pytest.mark.slow
def test_linkage_on_adult_raw_and_k_anonymous() -> None:
    raw, k5 = ex.linkage(ADULT, k=[1, 5], sample=0.5, external=400, seed=0)
    # the de-identified raw sample: many people are unique on the 9 QIs
    assert raw.measures["sample uniques"] > 0.3 and raw.rate > 0.1
    assert k5.successes == 0 and k5.measures["prosecutor risk (max)"] <= 0.2
    assert k5.measures["journalist risk (max)"] <= k5.measures["prosecutor risk (max)"]


@pytest.mark.slow
def test_republication_on_adult() -> None:
    risk = ex.republication(ADULT, k=10, seed=0)
    assert risk.targets > 20000 and risk.measures["k"] == 10
    assert 0 <= risk.rate < 0.5
