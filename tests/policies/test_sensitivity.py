"""Policy-specific sensitivities, checked as properties (hypothesis) on random data.

For random datasets and random *policy neighbours* — one value moved along one edge of the
policy's secret graph — the query moves by at most its declared sensitivity
(|f(D) - f(D')|₁ <= Δ_policy). For the complete graph the declared sensitivity is plain
bounded DP's (core.aggregates), and the bounds are attained (they are not loose).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from statcurator.core.aggregates import clamped_sum, histogram_sensitivity, sum_sensitivity
from statcurator.core.errors import InvalidParameterError, MetadataError
from statcurator.core.policy import Policy, PolicyNeighbours
from statcurator.core.relations import ChangeOne
from statcurator.core.schema import Column
from statcurator.estimators.learning.policy_kmeans import PolicyLloydStep
from statcurator.io.metadata import dump_metadata, parse_metadata
from statcurator.mechanisms.policy import OrderedMechanism, PolicyHistogram

LO, HI = 0, 120  # the integer domain of the property tests (ages)

data = st.lists(st.integers(LO, HI), min_size=1, max_size=40)
thetas = st.integers(1, 15)
cut_sets = st.lists(st.integers(LO + 1, HI), min_size=1, max_size=30, unique=True).map(sorted)


@st.composite
def threshold_neighbours(draw: st.DrawFn) -> tuple[Policy, list[int], list[int]]:
    """(policy, D, D'): D' moves one value of D by at most θ, inside the domain."""
    theta = draw(thetas)
    d = draw(data)
    i = draw(st.integers(0, len(d) - 1))
    new = draw(st.integers(max(LO, d[i] - theta), min(HI, d[i] + theta)))
    d2 = list(d)
    d2[i] = new
    return Policy.threshold(theta), d, d2


@st.composite
def complete_neighbours(draw: st.DrawFn) -> tuple[Policy, list[int], list[int]]:
    d = draw(data)
    i = draw(st.integers(0, len(d) - 1))
    d2 = list(d)
    d2[i] = draw(st.integers(LO, HI))
    return Policy.complete(), d, d2


any_neighbours = st.one_of(threshold_neighbours(), complete_neighbours())


def _l1(a: object, b: object) -> int:
    return int(np.abs(np.asarray(a, dtype=np.int64) - np.asarray(b, dtype=np.int64)).sum())


@settings(max_examples=300, deadline=None)
@given(any_neighbours, cut_sets)
def test_histogram_sensitivity_bounds_policy_neighbours(case, cuts) -> None:  # type: ignore[no-untyped-def]
    policy, d1, d2 = case
    h = PolicyHistogram(policy, 1, edges=cuts)
    assert PolicyNeighbours(policy).distance(d1, d2) <= 1
    assert _l1(h.counts(d1), h.counts(d2)) <= h.sensitivity


@settings(max_examples=300, deadline=None)
@given(any_neighbours, cut_sets)
def test_cumulative_sensitivity_bounds_policy_neighbours(case, cuts) -> None:  # type: ignore[no-untyped-def]
    policy, d1, d2 = case
    om = OrderedMechanism(policy, 1, edges=cuts)
    assert _l1(om.cumulative(d1), om.cumulative(d2)) <= om.sensitivity


@settings(max_examples=200, deadline=None)
@given(st.floats(0.1, 20), st.lists(st.floats(-50, 150), min_size=1, max_size=30),
       st.data())
def test_cumulative_sensitivity_on_real_values(theta, d1, draw) -> None:  # type: ignore[no-untyped-def]
    # real values and real cut points: θ-windows are half-open, so an exact-θ move counts
    cuts = sorted(set(draw.draw(st.lists(st.integers(-100, 300), min_size=1, max_size=40))))
    cuts = [c / 2 for c in cuts]
    i = draw.draw(st.integers(0, len(d1) - 1))
    d2 = list(d1)
    d2[i] = d1[i] + draw.draw(st.sampled_from([-theta, theta, theta / 3, -theta / 2]))
    policy = Policy.threshold(Fraction(theta))  # θ at the float's exact value
    # float addition may round past θ: then the pair is not a policy neighbour
    assume(policy.neighbours(d1[i], d2[i]) or d1[i] == d2[i])
    om = OrderedMechanism(policy, 1, edges=cuts)
    assert _l1(om.cumulative(d1), om.cumulative(d2)) <= om.sensitivity


@settings(max_examples=300, deadline=None)
@given(any_neighbours, st.integers(LO, 60), st.integers(61, HI))
def test_sum_sensitivity_bounds_policy_neighbours(case, lo, hi) -> None:  # type: ignore[no-untyped-def]
    policy, d1, d2 = case
    change = abs(clamped_sum(d1, lo, hi) - clamped_sum(d2, lo, hi))
    assert change <= policy.sum_sensitivity(lo, hi)


@settings(max_examples=300, deadline=None)
@given(any_neighbours, st.lists(st.integers(LO + 1, HI - 1), min_size=0, max_size=6,
                                unique=True).map(sorted))
def test_cell_sums_sensitivity_bounds_policy_neighbours(case, inner) -> None:  # type: ignore[no-untyped-def]
    # the k-means cell sums move by at most the policy's longest edge, even when the value
    # changes cluster; the counts vector by at most its declared sensitivity
    policy, d1, d2 = case
    step = PolicyLloydStep(policy, (LO, *inner, HI), Fraction(1), Fraction(1))
    c1, s1 = step.statistics(np.array(d1))
    c2, s2 = step.statistics(np.array(d2))
    assert sum(abs(a - b) for a, b in zip(s1, s2, strict=True)) <= step.sum_sensitivity
    assert _l1(c1, c2) <= step.count_sensitivity


def test_plain_per_cluster_sums_do_not_get_theta() -> None:
    # why PolicyKMeans releases cell sums: a value crossing a boundary by θ = 1 moves the
    # plain per-cluster sums by about twice its value
    x1, x2 = np.array([10, 59, 100]), np.array([10, 60, 100])
    cells = np.searchsorted([60], x1, side="right"), np.searchsorted([60], x2, side="right")
    sums1 = np.bincount(cells[0], weights=x1, minlength=2)
    sums2 = np.bincount(cells[1], weights=x2, minlength=2)
    assert np.abs(sums1 - sums2).sum() == 119 > Policy.line().sum_sensitivity(0, 120)


@st.composite
def partition_case(draw: st.DrawFn) -> tuple[Policy, list[list[str]], list[str], list[str]]:
    values = [f"v{i}" for i in range(draw(st.integers(2, 10)))]
    labels = draw(st.lists(st.integers(0, 3), min_size=len(values), max_size=len(values)))
    blocks = [[v for v, b in zip(values, labels, strict=True) if b == j] for j in range(4)]
    blocks = [b for b in blocks if b]
    policy = Policy.partition(blocks)
    d1 = draw(st.lists(st.sampled_from(values), min_size=1, max_size=30))
    i = draw(st.integers(0, len(d1) - 1))
    block = next(b for b in blocks if d1[i] in b)
    d2 = list(d1)
    d2[i] = draw(st.sampled_from(block))
    return policy, blocks, d1, d2


@settings(max_examples=300, deadline=None)
@given(partition_case(), st.data())
def test_partition_histograms(case, draw) -> None:  # type: ignore[no-untyped-def]
    policy, blocks, d1, d2 = case
    # over the blocks (or coarser): nothing secret, sensitivity 0 and no change at all
    merged = [blocks[0] + (blocks[1] if len(blocks) > 1 else []), *blocks[2:]]
    for bins in (blocks, merged):
        h = PolicyHistogram(policy, 1, bins=bins)
        assert h.sensitivity == 0
        assert _l1(h.counts(d1), h.counts(d2)) == 0
    # over any finer binning: at most 2
    values = sorted({v for b in blocks for v in b})
    labels = draw.draw(st.lists(st.integers(0, 2), min_size=len(values), max_size=len(values)))
    fine = [[v for v, b in zip(values, labels, strict=True) if b == j] for j in range(3)]
    h = PolicyHistogram(policy, 1, bins=[b for b in fine if b])
    assert _l1(h.counts(d1), h.counts(d2)) <= h.sensitivity


# -- the complete graph is plain bounded DP ----------------------------------------------------

def test_complete_graph_equals_plain_bounded_dp() -> None:
    full = Policy.complete()
    assert full.histogram_sensitivity(edges=[30, 60]) == histogram_sensitivity(ChangeOne()) == 2
    assert full.sum_sensitivity(0, 120) == sum_sensitivity(0, 120, "bounded") == 120
    # cumulative counts: a change from the lowest to the highest bin moves every one of them
    cuts = list(range(1, 121))
    om = OrderedMechanism(full, 1, edges=cuts)
    assert om.sensitivity == 120 == _l1(om.cumulative([0]), om.cumulative([120]))
    assert PolicyNeighbours(full).distance([1, 2, 3], [1, 99, 3]) == ChangeOne().distance(
        [1, 2, 3], [1, 99, 3]) == 1


@pytest.mark.parametrize("theta", [1, 3, 7])
def test_threshold_bounds_are_attained(theta: int) -> None:
    cuts = list(range(1, 121))
    om = OrderedMechanism(Policy.threshold(theta), 1, edges=cuts)
    assert om.sensitivity == theta == _l1(om.cumulative([50]), om.cumulative([50 + theta]))
    assert Policy.threshold(theta).sum_sensitivity(0, 120) == theta
    # bins at least θ wide: one cumulative count at most
    assert Policy.threshold(theta).cumulative_sensitivity(range(0, 121, theta)) == 1


# -- the graph, the relation, the metadata ---------------------------------------------------

def test_graph_and_distances() -> None:
    p = Policy.threshold(5)
    assert p.neighbours(10, 15) and not p.neighbours(10, 16) and not p.neighbours(10, 10)
    assert p.graph_distance(10, 30) == 4
    rel = PolicyNeighbours(p)
    assert rel.distance([1, 2], [1, 2, 3]) == float("inf")
    part = Policy.partition([["a", "b"], ["c"]])
    assert part.neighbours("a", "b") and not part.neighbours("a", "c")
    assert PolicyNeighbours(part).distance(["a"], ["c"]) == float("inf")


@pytest.mark.parametrize("bad", [
    {"graph": "threshold"}, {"graph": "threshold", "theta": 0}, {"graph": "threshold", "theta": -1},
    {"graph": "partition"}, {"graph": "partition", "blocks": [["a"], ["a"]]},
    {"graph": "complete", "theta": 2}, {"graph": "mystery"}, {"theta": 1},
    {"graph": "threshold", "theta": 1, "constraints": ["count(*) = 100"]},
    {"graph": "threshold", "theta": 1, "extra": 1},
])
def test_bad_policies_are_refused(bad: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(MetadataError):
        Policy.from_spec(bad, "age")


def test_constraints_are_refused_in_python() -> None:
    with pytest.raises(InvalidParameterError, match="constraints are not supported"):
        Policy("threshold", theta=Fraction(1), constraints=("marginal",))


TOML = '''
[table]
name = "people"
neighbours = "bounded"
[columns.age]
type = "integer"
bounds = [0, 120]
policy = { graph = "threshold", theta = 5 }
[columns.disease]
type = "string"
categories = ["flu", "cold", "cancer"]
policy = { graph = "partition", blocks = [["flu", "cold"], ["cancer"]] }
[columns.income]
type = "real"
bounds = [0, 1000]
policy = { graph = "threshold", theta = "1/3" }
'''


def test_metadata_declares_policies() -> None:
    meta = parse_metadata(TOML)
    assert meta["age"].policy == Policy.threshold(5)
    assert meta["disease"].policy == Policy.partition([["flu", "cold"], ["cancer"]])
    assert meta["income"].policy == Policy.threshold(Fraction(1, 3))
    assert parse_metadata(dump_metadata(meta)) == meta


def test_column_validates_its_policy() -> None:
    with pytest.raises(MetadataError, match="ordered"):
        Column("sex", type="string", policy={"graph": "threshold", "theta": 1})
    with pytest.raises(MetadataError, match="leave out"):
        Column("d", categories=("flu", "cold"), policy={"graph": "partition",
                                                          "blocks": [["flu"]]})
    assert Column("age", type="integer", policy={"graph": "line"}).policy == Policy.line()
