"""Accuracy and thresholds are found in O(log) exact tests, whatever the noise scale.

Finding: ``dlap_halfwidth`` (every Laplace interval) and the partition-selection threshold
started from a float guess and then moved *one unit at a time*. The guess's error grows with
the scale (about its relative error times the answer), so at a noise scale of 2^50 — a count
at ε = 1e-15, or a sum of a column bounded by 2^40 at ε = 1e-3 — the first release ran for
billions of exact tail evaluations: the analyst was charged and the answer never came (the
request id is then lost). For ε = 1e-20 and δ partition selection took 40 s, for 1e-30 years;
with several partitions per person and a large ε the float guess divided by zero (after the
charge). Both now gallop from the guess and bisect (``mechanisms._base.smallest_integer``).
"""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

import statcurator.mechanisms._base as base
import statcurator.mechanisms.partition as partition
from statcurator.core.numbers import exp_bounds
from statcurator.core.schema import Column, TableMeta
from statcurator.mechanisms import LaplaceMechanism, PartitionSelection

from .conftest import make_curator


class Budget:
    """Wrap a function so that more than ``limit`` calls fail the test (instead of hanging)."""

    def __init__(self, fn, limit):
        self.fn, self.limit, self.calls = fn, limit, 0

    def __call__(self, *args):
        self.calls += 1
        if self.calls > self.limit:
            raise AssertionError(f"more than {self.limit} exact evaluations")
        return self.fn(*args)


@pytest.mark.parametrize("scale", [Fraction(1, 10**6), Fraction(1), Fraction(10), 2**20,
                                   2**50, 2**64, Fraction(2**200, 3)])
@pytest.mark.parametrize("alpha", [Fraction(1, 20), Fraction(1, 10**9), Fraction(99, 100)])
def test_laplace_halfwidth_is_exact_and_found_quickly(monkeypatch, scale, alpha):
    tail = Budget(base.dlap_tail, 400)
    monkeypatch.setattr(base, "dlap_tail", tail)
    h = base.dlap_halfwidth(Fraction(scale), alpha)
    assert base.dlap_tail(Fraction(scale), h) <= alpha       # it holds ...
    assert h == 0 or base.dlap_tail(Fraction(scale), h - 1) > alpha   # ... and is the smallest


@pytest.mark.parametrize("epsilon", ["1e-30", "1e-20", "1e-6", "1", "1000"])
@pytest.mark.parametrize("m", [1, 3])
def test_partition_threshold_is_exact_and_found_quickly(monkeypatch, epsilon, m):
    monkeypatch.setattr(partition, "exp_bounds", Budget(exp_bounds, 800))
    ps = PartitionSelection(epsilon=Fraction(epsilon), delta=Fraction(1, 10**6), max_partitions=m)
    tau, scale = ps.threshold, Fraction(m) / ps.epsilon
    a_lo = exp_bounds(-1 / scale, 64)[0]

    def ok(k):  # the defining test: m·P(X >= k) <= target, X ~ discrete Laplace(m/ε)
        return m * exp_bounds(-k / scale, 64)[1] / (1 + a_lo) <= ps.delta_per_release

    assert ok(tau - 1) and (tau - 1 == 1 or not ok(tau - 2))


def test_a_release_with_a_tiny_epsilon_answers(monkeypatch):
    monkeypatch.setattr(base, "dlap_tail", Budget(base.dlap_tail, 400))
    cur = make_curator("duckdb", pa.table({"x": [1, 2, 3]}), TableMeta("t", (Column("x", type="integer"),)))
    rel = cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=Fraction(1, 2**60),
                                                          analyst="eve")
    row = rel.rows()[0]
    assert row["n_low"] < row["n"] < row["n_high"]
    assert LaplaceMechanism(1, Fraction(1, 2**60)).accuracy(0.05) > 2**60
