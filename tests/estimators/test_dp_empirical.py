"""Empirical DP tests of every estimator on neighbouring datasets, each with a broken
mutant that must be caught.

:func:`check_dp` fails a correct mechanism with probability at most α = 1e-6 (exact
Clopper–Pearson bounds on a fresh batch after the event is chosen), so each "passes" below
has a false-failure rate of 1e-6; each mutant is chosen so that its violation is far beyond
what the sample size resolves (its observed ratio is printed in the assertion message).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.measures import ApproxDP, PureDP
from statcurator.core.relations import AddRemove, ChangeOne
from statcurator.core.schema import Column, TableMeta
from statcurator.estimators import (
    IQR,
    DegreeHistogram,
    EdgeCount,
    LinearRegression,
    LogisticRegression,
    Median,
    PTRMedian,
    TriangleCount,
    TrimmedMean,
)
from statcurator.estimators.aggregate import winsorized_mean, winsorized_mean_mechanism
from statcurator.estimators.graph import edge_set, triangle_local_bounds
from statcurator.estimators.smooth import median_local_bounds, trimmed_mean_local_bounds
from statcurator.mechanisms.quantile import JointQuantiles, QuantileMechanism
from statcurator.mechanisms.smooth import SmoothSensitivityMechanism
from statcurator.testing.dp import Event, check_dp

pytestmark = pytest.mark.slow

ALPHA = 1e-6  # the false-failure rate of every check_dp call below


def expect(passes: bool, s1, s2, eps, delta=0, trials=50_000, events=None,  # type: ignore[no-untyped-def]
           selection_trials=None):
    res = check_dp(s1, s2, float(eps), float(delta), trials=trials, alpha=ALPHA,
                   events=events, selection_trials=selection_trials)
    assert res.passed is passes, str(res)
    return res


def windows(*centres: float) -> list[Event]:
    """Two-sided windows (where a too-small noise scale concentrates) and one-sided cuts."""
    out = []
    for c in centres:
        for w in (1e-6, 1e-3, 0.1, 1, 5, 20):
            out.append(Event(f"|out - {c}| <= {w}", lambda x, c=c, w=w: np.abs(x - c) <= w))
        for w in (-20, -5, -1, 0, 1, 5, 20):
            out.append(Event(f"out <= {c + w}", lambda x, c=c, w=w: x <= c + w))
    return out


def bounded(lo: float, hi: float, *names: str) -> TableMeta:
    return TableMeta("t", tuple(Column(n, type="real", bounds=(lo, hi)) for n in names),
                     neighbours="bounded")


# -- smooth sensitivity ------------------------------------------------------------------------

# the median is 0 in both, but the local sensitivity is 0 in D1 and 100 in D2
MED_D1 = {"x": np.array([0.0] * 52 + [100.0] * 50)}
MED_D2 = {"x": np.array([0.0] * 51 + [100.0] * 51)}


def _local_median(data: dict, mech: SmoothSensitivityMechanism):  # type: ignore[no-untyped-def]
    x = np.sort(data["x"])
    m, local, _ = median_local_bounds(x, 0.0, 100.0)
    ls = Fraction(float(local(np.array([0]))[0]))
    return lambda n: mech.release(Fraction(float(x[m - 1])), ls, n)


@pytest.mark.parametrize("delta", [0, Fraction(1, 10**6)])
def test_smooth_median_and_the_local_sensitivity_mutant(delta: Fraction) -> None:
    meta = bounded(0, 100, "x")
    est = Median("x", epsilon=1, delta=delta or None)
    expect(True, lambda n: est.sample(MED_D1, n, meta), lambda n: est.sample(MED_D2, n, meta),
           1, delta, events=windows(0.0))
    mech = SmoothSensitivityMechanism(1, delta, Fraction(1, 2**30),
                                      "laplace" if delta else "cauchy")
    expect(False, _local_median(MED_D1, mech), _local_median(MED_D2, mech), 1, delta,
           events=windows(0.0))


def test_smooth_trimmed_mean_and_the_local_sensitivity_mutant() -> None:
    d1 = {"x": np.array([0.0] * 91 + [100.0] * 9)}
    d2 = {"x": np.array([0.0] * 90 + [100.0] * 10)}
    meta = bounded(0, 100, "x")
    est = TrimmedMean("x", trim=Fraction(1, 10), epsilon=1)
    expect(True, lambda n: est.sample(d1, n, meta), lambda n: est.sample(d2, n, meta), 1,
           events=windows(0.0))
    mech = SmoothSensitivityMechanism(1, 0, Fraction(1, 2**30))

    def local(data: dict):  # type: ignore[no-untyped-def]
        x = np.sort(data["x"])
        u, _ = trimmed_mean_local_bounds(x, 0.0, 100.0, 10, ChangeOne())
        return lambda n: mech.release(Fraction(float(x[10:90].mean())),
                                      Fraction(float(u(np.array([0]))[0])), n)

    expect(False, local(d1), local(d2), 1, events=windows(0.0))


def test_triangle_count_and_the_local_sensitivity_mutant() -> None:
    g1 = {"src": [0], "dst": [1]}                 # LS = 0
    g2 = {"src": [0, 1], "dst": [1, 2]}           # one more edge: LS = 1, still 0 triangles
    est = TriangleCount(epsilon=1)
    expect(True, lambda n: est.sample(g1, n), lambda n: est.sample(g2, n), 1,
           events=windows(0.0))
    mech = SmoothSensitivityMechanism(1, 0, Fraction(1, 256))

    def local(g: dict):  # type: ignore[no-untyped-def]
        e, nodes = edge_set(g, "src", "dst")
        count, u, _ = triangle_local_bounds(e, nodes)
        return lambda n: mech.release(count, Fraction(float(u(np.array([0]))[0])), n)

    expect(False, local(g1), local(g2), 1, events=windows(0.0))


# -- quantiles ---------------------------------------------------------------------------------


def test_quantile_exponential_mechanism_and_a_quartered_sensitivity() -> None:
    d1, d2 = [2, 2, 8, 8], [2, 8, 8, 8]               # change one row
    real = QuantileMechanism(1, 0, 10, 1)
    bad = QuantileMechanism(4, 0, 10, 1)             # claims ε = 1, is calibrated for Δ/4
    half = Fraction(1, 2)
    expect(True, lambda n: real.release(d1, half, n), lambda n: real.release(d2, half, n), 1,
           trials=100_000)
    expect(False, lambda n: bad.release(d1, half, n), lambda n: bad.release(d2, half, n), 1,
           trials=100_000)


def test_median_score_sensitivity_one_half_under_add_remove() -> None:
    d1, d2 = [2, 8], [2, 8, 8]                       # add one row
    half = Fraction(1, 2)
    real = QuantileMechanism.for_level(1, 0, 10, 1, half, add_remove=True)
    assert real.sensitivity == half
    bad = QuantileMechanism(1, 0, 10, 1, Fraction(1, 8))
    expect(True, lambda n: real.release(d1, half, n), lambda n: real.release(d2, half, n), 1,
           trials=100_000)
    expect(False, lambda n: bad.release(d1, half, n), lambda n: bad.release(d2, half, n), 1,
           trials=100_000)


def test_joint_quantiles_and_a_quartered_sensitivity() -> None:
    d1 = np.array([0.5, 0.5, 2.5, 2.5, 3.5])
    d2 = np.array([0.5, 2.5, 2.5, 2.5, 3.5])
    qs = (Fraction(1, 3), Fraction(2, 3))
    real = JointQuantiles(1, qs, 0, 4, bins=4)
    bad = JointQuantiles(4, qs, 0, 4, bins=4)
    expect(True, lambda n: real.release(d1, n), lambda n: real.release(d2, n), 1,
           trials=100_000)
    expect(False, lambda n: bad.release(d1, n), lambda n: bad.release(d2, n), 1,
           trials=100_000)


# -- propose-test-release ----------------------------------------------------------------------

REFUSED = -1000.0


def _ptr(est, data, meta):  # type: ignore[no-untyped-def]
    return lambda n: np.nan_to_num(est.sample(data, n, meta), nan=REFUSED)


def test_ptr_median_and_the_mutant_without_test() -> None:
    d1 = {"x": np.array([0.0] * 50 + [100.0] * 51)}   # median 100
    d2 = {"x": np.array([0.0] * 51 + [100.0] * 50)}   # median 0: d = 0 on both
    meta = bounded(0, 100, "x")
    est = PTRMedian("x", bound=1, epsilon=1, delta=Fraction(1, 10**6))
    delta = 1e-6
    expect(True, _ptr(est, d1, meta), _ptr(est, d2, meta), 1, delta, trials=10_000)
    from statcurator.mechanisms import LaplaceMechanism

    mech = LaplaceMechanism(1, Fraction(1, 2))        # releases as if the test had passed
    expect(False, lambda n: mech.release(np.full(n, 100)), lambda n: mech.release(np.zeros(n)),
           1, delta, trials=20_000)


def test_ptr_iqr_and_the_mutant_without_test() -> None:
    d1 = {"x": np.array([0.0] * 5 + [50.0] * 3)}      # IQR 50
    d2 = {"x": np.array([0.0] * 6 + [50.0] * 2)}      # IQR 0
    meta = bounded(0, 100, "x")
    est = IQR("x", epsilon=1, delta=Fraction(1, 10**6))
    expect(True, _ptr(est, d1, meta), _ptr(est, d2, meta), 1, 1e-6, trials=10_000)
    iqr1, iqr2 = 50.0, 0.0                            # the unconditional release of the bin
    expect(False, lambda n: np.full(n, iqr1), lambda n: np.full(n, iqr2), 1, 1e-6,
           trials=20_000)


# -- sample-and-aggregate ----------------------------------------------------------------------


def test_winsorized_mean_and_the_mutant_without_winsorizing() -> None:
    # the range [left, right] is public by then (DP quartiles, tested above); one of the
    # k = 40 block estimates changes, to an outlier
    k = 40
    v1 = np.full(k, 0.5)
    v2 = v1.copy()
    v2[0] = 1000.0
    left, right, g = Fraction(1, 4), Fraction(3, 4), Fraction(1, 2**20)
    mech = winsorized_mean_mechanism(k, left, right, Fraction(1), g)
    expect(True, lambda n: winsorized_mean(v1, left, right, mech, n),
           lambda n: winsorized_mean(v2, left, right, mech, n), 1, events=windows(0.5))
    # mutant: the noise of the winsorized range, but the raw (unclamped) mean
    expect(False, lambda n: mech.release(np.full(n, float(v1.mean()))),
           lambda n: mech.release(np.full(n, float(v2.mean()))), 1, events=windows(0.5))


# -- regression --------------------------------------------------------------------------------


def _regression_data(extra: bool) -> dict:
    x = list(np.linspace(0, 1, 30)) + ([1.0] if extra else [])
    y = [0.5] * 30 + ([-1.0] if extra else [])
    return {"x": np.array(x), "y": np.array(y)}


def test_adassp_and_the_too_little_noise_mutant() -> None:
    meta = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),
                           Column("y", type="real", bounds=(-1, 1))))
    d1, d2 = _regression_data(False), _regression_data(True)

    def sampler(model, data):  # type: ignore[no-untyped-def]
        return lambda n: model.sample(data, n, meta)[:, 0]

    real = LinearRegression(rho=Fraction(1, 2), target="y", features=["x"])
    eps = float(Fraction(1, 2) + 2 * (Fraction(1, 2) * 13.8155) ** 0.5)  # ρ-zCDP ⇒ (ε, 1e-6)
    expect(True, sampler(real, d1), sampler(real, d2), eps, 1e-6, trials=20_000)
    # mutant: ρ = 5000 charged as ρ = 1/2 — far too little noise
    bad = LinearRegression(rho=5000, target="y", features=["x"])
    expect(False, sampler(bad, d1), sampler(bad, d2), eps, 1e-6, trials=20_000)


def test_objective_perturbation_and_the_mutant_without_noise(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    meta = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),
                           Column("y", type="string", categories=("n", "p"))))
    d1 = {"x": np.linspace(0, 1, 20), "y": np.array(["n", "p"] * 10)}
    d2 = {"x": np.append(np.linspace(0, 1, 20), 1.0), "y": np.array(["n", "p"] * 10 + ["n"])}
    model = LogisticRegression(epsilon=1, target="y", features=["x"])

    def sampler(data):  # type: ignore[no-untyped-def]
        m = model.measurement(meta)
        return lambda n: np.array([m(data).coef_[0] for _ in range(n)])

    # fits are slow (an L-BFGS run each): a small test; the mutant is deterministic
    expect(True, sampler(d1), sampler(d2), 1, trials=2000, selection_trials=500)
    import statcurator.estimators.regression as reg

    monkeypatch.setattr(reg, "ball_noise", lambda d, rate: np.zeros(d))   # mutant: no b
    expect(False, sampler(d1), sampler(d2), 1, trials=2000, selection_trials=500)


# -- graphs ------------------------------------------------------------------------------------


def test_edge_count_and_the_halved_sensitivity_mutant() -> None:
    g1 = {"src": [0, 1, 2], "dst": [1, 2, 3]}
    g2 = {"src": [0, 1, 2, 3], "dst": [1, 2, 3, 4]}
    est = EdgeCount(epsilon=1)
    expect(True, lambda n: est.sample(g1, n), lambda n: est.sample(g2, n), 1)
    bad = EdgeCount(epsilon=4)                        # i.e. sensitivity taken as 1/4
    expect(False, lambda n: bad.sample(g1, n), lambda n: bad.sample(g2, n), 1)


def test_degree_histogram_and_the_quartered_sensitivity_mutant() -> None:
    # adding edge 1-2 moves nodes 1 and 2 from degree 1 to 2: L1 distance 4
    g1 = {"src": [0, 2], "dst": [1, 3]}
    g2 = {"src": [0, 2, 1], "dst": [1, 3, 2]}
    est = DegreeHistogram(epsilon=1, max_degree=3)
    expect(True, lambda n: est.sample(g1, n), lambda n: est.sample(g2, n), 1, trials=20_000)
    bad = DegreeHistogram(epsilon=4, max_degree=3)   # i.e. L1 sensitivity taken as 1
    expect(False, lambda n: bad.sample(g1, n), lambda n: bad.sample(g2, n), 1, trials=20_000)


def test_losses_are_the_declared_ones() -> None:
    meta = bounded(0, 1, "x")
    assert Median("x", epsilon=1).measurement(meta).cost == PureDP(1)
    assert PTRMedian("x", bound=1, epsilon=1, delta=1e-6).measurement(meta).cost == \
        ApproxDP(1, Fraction(1, 10**6))
    local = Median("x", epsilon=1, bounds=(0, 1)).measurement()
    assert isinstance(local.input_space, AddRemove)


def test_permute_and_flip_quantile_and_a_quartered_sensitivity() -> None:
    # α = 1e-6 per check_dp call (module docs); the mutant claims ε = 1 at the scale of ε = 4
    d1, d2 = [2, 2, 8, 8], [2, 8, 8, 8]               # change one row
    real = QuantileMechanism(1, 0, 10, 1, selection="permute-and-flip")
    bad = QuantileMechanism(4, 0, 10, 1, selection="permute-and-flip")
    half = Fraction(1, 2)
    expect(True, lambda n: real.release(d1, half, n), lambda n: real.release(d2, half, n), 1,
           trials=100_000)
    expect(False, lambda n: bad.release(d1, half, n), lambda n: bad.release(d2, half, n), 1,
           trials=100_000)
