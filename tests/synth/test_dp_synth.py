"""Empirical DP tests of the synthesizers' noisy steps, each with a mutant that is caught.

Marginals are measured with the discrete Gaussian (ρ-zCDP); the test checks the (ε, δ)
guarantee that ρ implies (:meth:`ZCDP.to_approx`). Marginal selection (MST's and AIM's
exponential mechanism) is checked in pure ε. A correct step fails with probability at most
α = 1e-6 (stated at each test); the mutants fail by a wide margin.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.measures import ZCDP
from statcurator.estimators.learning import categorical
from statcurator.mechanisms import ExponentialMechanism, VectorGaussianMechanism
from statcurator.synth import MarginalWorkload
from statcurator.synth._base import selection_mechanism
from statcurator.synth.marginals import contingency
from statcurator.synth.mst import pair_scores
from statcurator.testing.dp import check_dp

pytestmark = pytest.mark.slow

ALPHA = 1e-6  # the false-failure rate of every check below

DOMAIN = (categorical("a", [0, 1]), categorical("b", [0, 1]), categorical("c", [0, 1, 2]))
D1 = np.array([[0, 0, 0], [0, 1, 2], [1, 1, 1], [1, 0, 0], [0, 0, 1]])
D2 = np.vstack([D1, [[1, 1, 2]]])  # one added row: one cell of every marginal moves by 1
WORK = MarginalWorkload([("a", "b"), ("b", "c")])


def _select(mech, s1, s2, eps):  # type: ignore[no-untyped-def]
    """check_dp of a selection mechanism on the scores of two neighbouring datasets."""
    return check_dp(lambda n: mech.sample(s1, n), lambda n: mech.sample(s2, n), eps,
                    trials=100_000, alpha=ALPHA)


def _marginals(mechs, codes):  # type: ignore[no-untyped-def]
    """n independent releases of the workload's marginals, concatenated (one row a trial)."""
    sizes = [a.size for a in DOMAIN]
    names = [a.name for a in DOMAIN]
    stats = [contingency(codes, sizes, [names.index(x) for x in c]).ravel()
             for c in WORK.cliques]

    def run(n: int) -> np.ndarray:
        return np.column_stack([m.release(np.tile(s, n)).reshape(n, s.size)
                                for m, s in zip(mechs, stats, strict=True)])
    return run


def test_marginal_workload_measurement_meets_its_zcdp_guarantee() -> None:
    # α = 1e-6. ρ = 1/2 for the workload (1/4 per marginal), checked as (ε(δ), δ)-DP at
    # δ = 0.01.
    rho = Fraction(1, 2)
    m = WORK.measurement(DOMAIN, rho)
    assert m.cost == ZCDP(rho)
    eps = float(ZCDP(rho).to_approx(Fraction(1, 100)).epsilon)
    mechs = WORK.mechanisms(rho)
    res = check_dp(_marginals(mechs, D1), _marginals(mechs, D2), eps, 0.01, trials=100_000,
                   alpha=ALPHA)
    assert res.passed, str(res)


def test_marginal_workload_mutant_with_halved_sensitivity_is_caught() -> None:
    # α = 1e-6: each marginal's noise as for sensitivity 1/2 (σ halved: really ρ ×4; on
    # integer counts a declared 1/2 would round back up to 1, so the mutant scales ρ)
    rho = Fraction(1, 2)
    eps = float(ZCDP(rho).to_approx(Fraction(1, 100)).epsilon)
    bad = [VectorGaussianMechanism(1, 4 * r) for r in WORK.shares(rho)]
    # at 100,000 trials the mutant's p-value sat near α and it escaped in 2 of 30 runs (a
    # fresh clone's CI run caught one); at 400,000 it reached check_dp's floor of 1e-30 in
    # 8 of 8 runs
    res = check_dp(_marginals(bad, D1), _marginals(bad, D2), eps, 0.01, trials=400_000,
                   alpha=ALPHA)
    assert not res.passed


def _mst_scores(codes: np.ndarray) -> np.ndarray:
    prob = [np.array([0.5, 0.5]), np.array([0.5, 0.5]), np.array([0.2, 0.3, 0.5])]
    return pair_scores(codes, [2, 2, 3], prob, 5.0, [(0, 1), (0, 2), (1, 2)])


def test_mst_pair_selection_is_epsilon_dp_and_the_monotone_shortcut_is_caught() -> None:
    # α = 1e-6 for both checks. The added row raises some pairs' L1 scores and lowers others
    # (so the factor 2 of the exponential mechanism is needed); the mutant drops it.
    s1, s2 = _mst_scores(D1), _mst_scores(D2)
    d = s2 - s1
    assert d.max() > 0 > d.min() and np.abs(d).max() <= 1 + 1e-9
    em = selection_mechanism(Fraction(2), Fraction(1))
    ok = check_dp(lambda n: em.sample(s1, n), lambda n: em.sample(s2, n), 2, trials=100_000,
                  alpha=ALPHA)
    assert ok.passed, str(ok)
    bad = ExponentialMechanism(2, 1, monotonic=True)
    res = _select(bad, s1, s2, 2)
    assert not res.passed


def test_aim_selection_scores_have_the_declared_sensitivity() -> None:
    # α = 1e-6. AIM's score w·(L1 - bias) moves by at most w = the declared sensitivity; the
    # mutant declares the sensitivity without the weight.
    sizes = [a.size for a in DOMAIN]
    model = {("a", "b"): np.full(4, 1.2), ("b", "c"): np.full(6, 0.8)}
    weights = {("a", "b"): 2, ("b", "c"): 3}

    def scores(codes: np.ndarray) -> np.ndarray:
        out = []
        for c, w in weights.items():
            x = contingency(codes, sizes, [["a", "b", "c"].index(a) for a in c]).ravel()
            out.append(w * (np.abs(x - model[c]).sum() - 0.5 * x.size))
        return np.array(out)

    s1, s2 = scores(D1), scores(D2)
    em = selection_mechanism(Fraction(1), Fraction(max(weights.values())))
    ok = check_dp(lambda n: em.sample(s1, n), lambda n: em.sample(s2, n), 1, trials=100_000,
                  alpha=ALPHA)
    assert ok.passed, str(ok)
    bad = ExponentialMechanism(1, 1, monotonic=True)
    res = _select(bad, s1, s2, 1)
    assert not res.passed
