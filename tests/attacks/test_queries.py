"""Attacks on query interfaces: reconstruction, averaging, differencing — against a naive
interface (fresh noise, no budget) and against the curator (a budget)."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.attacks import Averaging, Differencing, NaiveInterface, Reconstruction, lp_decode
from statcurator.core.errors import InvalidParameterError
from statcurator.core.schema import Column, TableMeta
from statcurator.mechanisms import rng

SECRET = np.random.default_rng(11).integers(0, 2, 64)


def _curator(secret: np.ndarray, budget: Fraction) -> sc.Curator:
    cur = sc.Curator()
    meta = TableMeta("s", (Column("id", type="integer"),
                           Column("secret", type="integer", bounds=(0, 1))))
    cur.register("s", pa.table({"id": np.arange(len(secret)), "secret": secret}), meta,
                 budget=budget)
    cur.set_budget("eve", "s", epsilon=budget)
    return cur


def _subset_oracle(cur: sc.Curator, eps: Fraction):
    def oracle(rows: np.ndarray) -> float:
        ids = ",".join(str(int(i)) for i in rows) or "-1"
        rel = cur.sql(f"SELECT SUM(secret) AS s FROM s WHERE id IN ({ids})").release(
            epsilon=eps, analyst="eve")
        return float(rel.rows()[0]["s"])
    return oracle


def test_lp_decoder_recovers_exact_answers() -> None:
    risk = Reconstruction(queries=256, seed=0).run(NaiveInterface(SECRET), 64, truth=SECRET)
    assert risk.rate == 1.0 and risk.measures["queries answered"] == 256
    assert risk.baseline == max(SECRET.mean(), 1 - SECRET.mean())


def test_bounded_noise_well_below_sqrt_n() -> None:
    # n = 200, E = 2 (√n ≈ 14): the LP decoder still recovers almost every bit. Deterministic
    # given the seeds but for the interface's noise; E bounds any noise, and the decoded x is
    # within E of every answer, so the proof of Dinur–Nissim applies: with 800 random queries
    # all but a few bits are right whatever the noise (we ask for 90%).
    bits = np.random.default_rng(3).integers(0, 2, 200)
    iface = NaiveInterface(bits, "bounded", bound=2)
    risk = Reconstruction(queries=800, seed=1).run(iface, 200, truth=bits)
    assert risk.rate >= 0.9
    assert risk.measures["largest residual of the decoded x"] <= 2 + 1e-6


def test_l1_decoder() -> None:
    A = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]])
    assert lp_decode(A, A @ np.array([0, 1, 1]), norm="l1").round(6).tolist() == [0, 1, 1]
    with pytest.raises(InvalidParameterError):
        lp_decode(A, A @ np.array([0, 1, 1]), norm="l2")


@pytest.mark.slow
def test_reconstruction_through_the_curator_is_stopped_by_the_budget() -> None:
    # The curator's noise is seeded here (the test switch), so the outcome is deterministic.
    # Control first: with a huge budget (ε = 4 per query) the curator's answers are nearly
    # exact and the attack recovers the column — a DP path with far too little noise would
    # be caught the same way.
    bits = SECRET[:32]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(5):
            cur = _curator(bits, Fraction(1024))
            loose = Reconstruction(queries=96, seed=0).run(
                _subset_oracle(cur, Fraction(4)), 32, truth=bits)
        with rng.seeded(6):
            cur = _curator(bits, Fraction(1))
            tight = Reconstruction(queries=96, seed=0).run(
                _subset_oracle(cur, Fraction(1, 96)), 32, truth=bits)
    assert loose.rate >= 0.95
    # total ε = 1 spread over 96 queries: noise of scale 96 on each answer, against √32 ≈ 6;
    # and ε-DP caps the expected accuracy on each bit at e/(1+e) = 0.73
    assert tight.rate <= 0.8
    assert cur.budget("eve", "s").remaining == sc.PureDP(0)
    # one more query is refused, and the attack decodes from what it got (nothing)
    more = Reconstruction(queries=8, seed=0).run(_subset_oracle(cur, Fraction(1, 96)), 32,
                                                 truth=bits)
    assert more.measures["queries refused"] == 8 and more.measures["queries answered"] == 0


def test_averaging_against_fresh_noise_without_budget() -> None:
    # ε = 1 per answer (scale 1), 400 repeats: the average's sd is ~1.4/20 = 0.07, so rounding
    # is right unless the mean of 400 draws leaves ±0.5 (Hoeffding on a noise clipped... in
    # practice P < 1e-12); seeded to be reproducible
    iface = NaiveInterface(SECRET, "laplace", epsilon=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(2):
            risk = Averaging(repeats=400).run(lambda q: iface(q), [None, np.arange(10)],
                                              truth=[SECRET.sum(), SECRET[:10].sum()])
    assert risk.rate == 1.0 and iface.queries[0] == 800


def test_averaging_against_the_curator_is_bounded_by_the_budget() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(3):
            cur = _curator(SECRET, Fraction(1))
            oracle = _subset_oracle(cur, Fraction(1, 10))
            risk = Averaging(repeats=400).run(oracle, [np.arange(64)], truth=[SECRET.sum()])
    assert risk.measures["mean answers obtained"] == 10  # the budget allows 10 answers
    assert risk.measures["queries refused"] == 1


def test_differencing_exact_and_noisy() -> None:
    # control: exact counts give every bit away
    iface = NaiveInterface(SECRET)
    risk = Differencing().run(lambda t: iface(None, exclude=t), list(range(64)), truth=SECRET)
    assert risk.rate == 1.0


def test_differencing_against_the_curator_stops_at_the_budget() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(4):
            cur = _curator(SECRET, Fraction(1))

            def oracle(t):
                where = "" if t is None else f" AND id <> {int(t)}"
                return cur.sql(f"SELECT COUNT(*) AS n FROM s WHERE secret = 1{where}").release(
                    epsilon=Fraction(1, 4), analyst="eve").rows()[0]["n"]

            risk = Differencing().run(oracle, list(range(64)), truth=SECRET, detail=True)
    # 4 answers fit in the budget: 2 targets attacked, the other 62 get the baseline's guess
    assert risk.measures["targets attacked before a refusal"] == 2
    assert risk.measures["interface refused"] is True
    assert risk.successes <= 2 + int(np.sum(SECRET[2:] == (1 if SECRET.mean() >= 0.5 else 0)))
