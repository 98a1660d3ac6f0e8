"""Estimators: coverage of the value intervals, exactness of the joint-quantile sampler,
refusals, sample-and-aggregate with scikit-learn, regression, graphs, the CLI."""

from __future__ import annotations

import itertools
import json
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import binom, chi2

import statcurator as sc
from statcurator.core.schema import Column, TableMeta
from statcurator.estimators.graph import edge_set
from statcurator.mechanisms import samplers
from statcurator.mechanisms.quantile import JointQuantiles, QuantileMechanism

# -- value intervals ---------------------------------------------------------------------------


def _coverage(values: np.ndarray, q: Fraction, runs: int) -> int:
    """Misses of the (1 - 0.05) interval of the q-quantile in ``runs`` releases."""
    mech = QuantileMechanism(Fraction(1, 4), 0, 100, Fraction(1, 64))
    units = mech.to_units(values)
    e = mech.margin(Fraction(1, 20))
    t = q * units.size
    low = mech.sample_units(units, t, runs, pad=e)
    high = np.maximum(low, mech.sample_units(units, t + 2 * e, runs, pad=e))
    target = units[math.ceil(q * units.size) - 1]   # the quantile of the data on the grid
    return int(((low > target) | (high < target)).sum())


@pytest.mark.parametrize("data", ["ties", "continuous", "extreme"])
def test_value_intervals_have_their_coverage(data: str) -> None:
    # misses ~ Bin(2000, p <= 0.05): more than the 1e-6 upper quantile is a failure
    # (false-failure rate <= 1e-6)
    values = {"ties": np.concatenate([np.full(400, 30.0), np.full(200, 37.0),
                                      np.full(400, 45.0)]),
              "continuous": np.linspace(10, 90, 1000),
              "extreme": np.linspace(0, 1, 1000) ** 8 * 100}[data]
    q = Fraction(1, 2) if data != "extreme" else Fraction(1, 100)
    limit = binom.isf(1e-6, 2000, 0.05)
    assert _coverage(values, q, 2000) <= limit


def test_intervals_without_the_margin_are_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # mutant: both endpoints aimed at the quantile itself (no margin, no padding)
    monkeypatch.setattr(QuantileMechanism, "margin", lambda self, alpha: 0)
    limit = binom.isf(1e-6, 2000, 0.05)
    assert _coverage(np.linspace(10, 90, 1000), Fraction(1, 2), 2000) > limit


# -- the joint exponential mechanism is sampled exactly ----------------------------------------


def _joint_law(jq: JointQuantiles, counts: np.ndarray) -> dict[tuple[int, ...], float]:
    pos, targets, end, c = jq._utility_parts(counts)
    law = {}
    for t in itertools.combinations_with_replacement(range(counts.size), len(jq.qs)):
        u = abs(pos[t[0]] - targets[0]) + abs(end - pos[t[-1]] - targets[-1]) + sum(
            abs(pos[t[i + 1]] - pos[t[i]] - targets[i + 1]) for i in range(len(t) - 1))
        law[t] = math.exp(-float(c) * u)
    z = sum(law.values())
    return {k: v / z for k, v in law.items()}


def _chi2_ok(draws: np.ndarray, law: dict[tuple[int, ...], float]) -> bool:
    counts: dict[tuple[int, ...], int] = {}
    for row in map(tuple, draws.tolist()):
        counts[row] = counts.get(row, 0) + 1
    n = draws.shape[0]
    keys = list(law)
    obs = np.array([counts.get(k, 0) for k in keys], dtype=float)
    exp = np.array([law[k] for k in keys]) * n
    small = exp < 5  # pool the rare cells
    obs = np.append(obs[~small], obs[small].sum())
    exp = np.append(exp[~small], exp[small].sum())
    stat = float(((obs - exp) ** 2 / np.maximum(exp, 1e-12)).sum())
    return stat < chi2.isf(1e-6, obs.size - 1)   # false failure 1e-6


JQ = JointQuantiles(2, (Fraction(1, 3), Fraction(2, 3)), 0, 6, bins=6)
COUNTS = np.array([3, 0, 5, 2, 1, 4])


def test_joint_sampler_follows_its_law() -> None:
    assert _chi2_ok(JQ.sample_bins(COUNTS, 100_000), _joint_law(JQ, COUNTS))


def test_joint_sampler_exact_path_follows_its_law() -> None:
    old = samplers._force_fallback
    samplers._force_fallback = 1.0   # every draw through the rational interval arithmetic
    try:
        draws = JQ.sample_bins(COUNTS, 400)
    finally:
        samplers._force_fallback = old
    assert _chi2_ok(draws, _joint_law(JQ, COUNTS))


def test_a_sampler_without_backward_messages_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import statcurator.mechanisms.quantile as quantile

    original = quantile._JointSampler.__init__

    def forward_only(self, *a, **k):  # type: ignore[no-untyped-def]
        original(self, *a, **k)
        self.msgs = [np.zeros_like(m) for m in self.msgs]   # mutant: greedy forward draws

    monkeypatch.setattr(quantile._JointSampler, "__init__", forward_only)
    assert not _chi2_ok(JQ.sample_bins(COUNTS, 100_000), _joint_law(JQ, COUNTS))


# -- propose-test-release: refusal is an answer, and it is charged -----------------------------


def test_refusal_is_reported_and_charged() -> None:
    cur = sc.Curator(engine="memory")
    meta = TableMeta("t", (Column("x", type="real", bounds=(0, 100)),))
    import pyarrow as pa

    cur.register("t", pa.table({"x": [0.0] * 50 + [100.0] * 51}), meta)
    est = cur.estimate("t", sc.estimators.PTRMedian("x", bound=1), epsilon=1, delta=1e-6,
                       analyst="ann")
    assert est.refused and est.value is None and "⊥" in str(est)
    assert cur.budget("ann", "t").spent == sc.ApproxDP(1, Fraction(1, 10**6))


# -- sample-and-aggregate, regression, graphs ---------------------------------------------------


def test_sample_and_aggregate_runs_a_scikit_learn_estimator() -> None:
    from sklearn.linear_model import LinearRegression as SK

    gen = np.random.default_rng(0)
    x = gen.uniform(0, 1, 40_000)
    y = 2 * x + 1 + gen.normal(0, 0.1, 40_000)
    est = sc.estimators.sample_and_aggregate(
        SK(), {"x": x, "y": y}, ["x"], target="y", epsilon=2, output_bounds=(-5, 5),
        blocks=400, bounds={"x": (0, 1), "y": (-2, 5)})
    slope, icpt = est.value
    assert abs(slope - 2) < 0.3 and abs(icpt - 1) < 0.3


def test_regressions_fit_and_predict() -> None:
    gen = np.random.default_rng(1)
    X = gen.uniform(-1, 1, (20_000, 2))
    y = X @ np.array([1.0, -1.0]) + 0.5
    lin = sc.estimators.LinearRegression(epsilon=1, delta=1e-6,
                                         bounds={"a": (-1, 1), "b": (-1, 1), "y": (-3, 3)})
    lin.fit(X, y)
    assert np.allclose(lin.coef_, [1, -1], atol=0.1) and lin.score(X, y) > 0.95
    labels = (X @ np.array([3.0, -3.0]) > 0).astype(int)
    log = sc.estimators.LogisticRegression(epsilon=1, bounds={"a": (-1, 1), "b": (-1, 1)})
    assert log.fit(X, labels).score(X, labels) > 0.9
    assert log.predict_proba(X[:3]).shape == (3, 2)


def test_graph_statistics_on_an_edge_table() -> None:
    # a triangle, a repeated edge, a self-loop
    edges = {"src": [1, 2, 3, 1, 4], "dst": [2, 3, 1, 2, 4]}
    e, n = edge_set(edges, "src", "dst")
    assert e.shape == (3, 2) and n == 3
    est = sc.estimators.triangle_count(edges, epsilon=5)
    assert abs(est.value - 1) < 50


# -- the CLI -----------------------------------------------------------------------------------


def test_cli_estimate_json() -> None:
    from typer.testing import CliRunner

    from statcurator.cli import app

    res = CliRunner().invoke(app, ["estimate", "adult", "quantiles", "age", "--q", "0.5",
                                   "--epsilon", "1", "--ledger", ":memory:", "--analyst", "t",
                                   "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["statistic"] == "quantile" and out["interval"][0] <= out["value"]
    bad = CliRunner().invoke(app, ["estimate", "adult", "iqr", "age", "--epsilon", "1",
                                   "--ledger", ":memory:", "--analyst", "t"])
    assert bad.exit_code == 2 and "--delta" in bad.output
