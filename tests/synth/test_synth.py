"""Marginal workloads, consistency, the synthesizers' budgets, and synthesis end to end."""

from __future__ import annotations

import warnings
from fractions import Fraction

import numpy as np
import pytest

from statcurator import datasets
from statcurator.core.errors import InvalidParameterError, MetadataError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP
from statcurator.estimators.learning import categorical
from statcurator.estimators.learning._domain import encode
from statcurator.io.dataset import Dataset
from statcurator.mechanisms import rng
from statcurator.synth import AIM, MST, MarginalWorkload, _pgm, average_tv, make_consistent, rho_for
from statcurator.synth.marginals import contingency

DOM = (categorical("a", [0, 1]), categorical("b", [0, 1, 2]), categorical("c", [0, 1]))


def seeded(seed: int):  # type: ignore[no-untyped-def]
    warnings.simplefilter("ignore")
    return rng.seeded(seed)


@pytest.fixture(scope="module")
def adult_small() -> Dataset:
    a = datasets.adult()
    return Dataset("adult", a.table.slice(0, 4000), a.meta)


# -- budgets -------------------------------------------------------------------------------

def test_epsilon_delta_converts_to_the_largest_fitting_rho() -> None:
    rho = rho_for(1, Fraction(1, 10**9))
    assert ZCDP(rho).to_approx(Fraction(1, 10**9)).epsilon <= 1
    assert ZCDP(rho * Fraction(101, 100)).to_approx(Fraction(1, 10**9)).epsilon > 1


def test_synthesizer_cost_is_reported_in_the_budget_asked(adult_small: Dataset) -> None:
    meta = adult_small.meta
    m = MST(epsilon=1, delta=1e-9).measurement(meta)
    assert isinstance(m.cost, ApproxDP) and m.cost.epsilon <= 1
    assert m.cost.delta == Fraction(1, 10**9)
    assert MST(rho=Fraction(1, 10)).measurement(meta).cost == ZCDP(Fraction(1, 10))
    # bounded neighbours: a change is two rows, ρ per row is a quarter, the cost the same
    bounded = meta.replace(neighbours="bounded")
    assert AIM(rho=Fraction(1, 10)).measurement(bounded).cost == ZCDP(Fraction(1, 10))
    with pytest.raises(InvalidParameterError, match="δ > 0"):
        MST().measurement(meta, PureDP(1))
    with pytest.raises(InvalidParameterError):
        MST(epsilon=1, rho=1)


def test_synthesizer_needs_a_declared_domain() -> None:
    with pytest.raises(MetadataError):
        MST(rho=1).measurement(None)


# -- marginals and consistency ---------------------------------------------------------------

def test_workload_shares_sum_to_the_budget() -> None:
    w = MarginalWorkload([("a", "b"), ("b", "c"), ("a",)], weights=(1, 2, 1))
    assert sum(w.shares(Fraction(1))) == 1
    assert w.measurement(DOM, Fraction(1, 2)).map(2) == ZCDP(2)  # group privacy d²ρ
    with pytest.raises(InvalidParameterError):
        MarginalWorkload([("a", "a")])
    with pytest.raises(InvalidParameterError, match="outside the domain"):
        MarginalWorkload([("a", "z")]).measurement(DOM, 1)


def test_least_squares_consistency_agrees_on_shared_marginals_and_is_non_negative() -> None:
    gen = np.random.default_rng(0)  # the test's noisy inputs, not a release
    codes = gen.integers(0, 2, size=(200, 3))
    codes[:, 1] = gen.integers(0, 3, 200)
    sizes = [2, 3, 2]
    truth = {c: contingency(codes, sizes, idx).astype(float)
             for c, idx in ((("a", "b"), [0, 1]), (("b", "c"), [1, 2]), (("a", "c"), [0, 2]))}
    noisy = {c: v + gen.normal(0, 5, v.shape) for c, v in truth.items()}
    out = make_consistent(noisy, {c: 25.0 for c in noisy}, {"a": 2, "b": 3, "c": 2})
    assert all((v >= 0).all() for v in out.values())
    assert np.allclose(out["a", "b"].sum(axis=0), out["b", "c"].sum(axis=1), atol=1e-6)
    assert np.allclose(out["a", "b"].sum(axis=1), out["a", "c"].sum(axis=1), atol=1e-6)
    assert np.allclose(out["b", "c"].sum(axis=0), out["a", "c"].sum(axis=0), atol=1e-6)
    totals = [v.sum() for v in out.values()]
    assert max(totals) - min(totals) < 1e-6
    # post-processing helps: closer to the truth than the raw noisy marginals (in L2),
    # here by a wide margin (control: the raw marginals themselves are inconsistent)
    err = sum(((out[c] - truth[c]) ** 2).sum() for c in truth)
    raw = sum(((noisy[c] - truth[c]) ** 2).sum() for c in truth)
    assert err < raw
    assert not np.allclose(noisy["a", "b"].sum(axis=0), noisy["b", "c"].sum(axis=1))


def test_noisy_marginals_report_their_error_per_marginal() -> None:
    codes = np.array([[0, 1, 0], [1, 2, 1]] * 50)
    m = MarginalWorkload([("a", "b"), ("c",)]).measurement(DOM, Fraction(1))
    with seeded(0):
        noisy = m(codes)
    errs = noisy.errors(0.05)
    assert [e["marginal"] for e in errs] == ["a × b", "c"]
    assert errs[0]["cells"] == 6 and errs[0]["sigma"] == pytest.approx(1.0)  # ρ_i = 1/2
    assert all(e["halfwidth"] >= 1 and 0 < e["expected_tv"] < 1 for e in errs)
    assert 90 < noisy.total() < 110


# -- synthesis end to end (mbi) -------------------------------------------------------------

needs_mbi = pytest.mark.skipif(not _pgm.available(), reason="needs the mbi library (synth extra)")


@needs_mbi
@pytest.mark.slow
def test_mst_synthesizes_a_table_with_the_original_schema(adult_small: Dataset) -> None:
    cols = ["sex", "age", "race", "education", "salary-class"]
    mst = MST(epsilon=2, delta=1e-9, columns=cols, bins={"age": 8}, iters=200)
    stages = []
    with seeded(4):
        mst.fit(adult_small, progress=lambda stage, f: stages.append(f))
        table = mst.sample(2000)
    assert table.column_names == cols and table.num_rows == 2000
    assert str(table.schema.field("age").type) == "int64"
    ages = table.column("age").to_numpy()
    assert ages.min() >= 0 and ages.max() <= 120
    assert set(table.column("sex").to_pylist()) <= {"Male", "Female"}
    assert stages[-1] == 1.0 and len(mst.model_.cliques) == len(cols) + len(cols) - 1
    # the synthetic 2-way marginals are close to the real ones: observed TV ~0.05; the bound
    # 0.2 is far; control: a table of uniform codes is far worse (TV ~0.5)
    dom = mst.model_.domain
    real, synth = encode(adult_small, dom), encode(table, dom)
    sizes = [a.size for a in dom]
    assert average_tv(real, synth, sizes, 2) < 0.2
    uniform = np.stack([np.arange(2000) % s for s in sizes], axis=1)
    assert average_tv(real, uniform, sizes, 2) > 0.3


@needs_mbi
@pytest.mark.slow
def test_aim_synthesizes_within_its_budget(adult_small: Dataset) -> None:
    cols = ["sex", "race", "salary-class"]
    aim = AIM(rho=Fraction(1, 2), columns=cols, workload=2, rounds=4, round_iters=50,
              iters=100)
    with seeded(1):
        aim.fit(adult_small)
        table = aim.sample(500)
    assert aim.cost_ == ZCDP(Fraction(1, 2))
    assert table.num_rows == 500 and table.column_names == cols


@needs_mbi
@pytest.mark.slow
def test_pgm_consistency_of_a_workload() -> None:
    codes = np.array([[0, 1, 0], [1, 2, 1], [1, 0, 1]] * 40)
    m = MarginalWorkload([("a", "b"), ("b", "c")]).measurement(DOM, Fraction(2))
    with seeded(0):
        fixed = m(codes).consistent("pgm", iters=200)
    assert np.allclose(fixed["a", "b"].sum(axis=0), fixed["b", "c"].sum(axis=1), atol=1e-3)
    assert (fixed["a", "b"] >= -1e-9).all()
