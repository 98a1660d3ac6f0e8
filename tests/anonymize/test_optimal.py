"""The optimal search equals brute force over the whole lattice; its lattice is truthful."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statcurator.anonymize import DeltaPresence, KAnonymity, LDiversity, TCloseness, anonymize
from statcurator.anonymize.metrics import METRICS
from statcurator.anonymize.optimal import Flash, flash, privacy_monotonicity
from statcurator.anonymize.search import prepare
from statcurator.core.schema import Column, HierarchySpec, TableMeta

TREE = {"low": {"l1": ["a", "b"], "l2": ["c"]}, "high": {"h1": ["d", "e"], "h2": ["f"]}}
DISEASES = {"infection": ["flu", "cold"], "other": ["ulcer", "cancer"]}


@st.composite
def problems(draw):
    n = draw(st.integers(6, 40))
    zips = draw(st.lists(st.sampled_from(["11", "12", "21", "22", "23", "31"]), min_size=n,
                         max_size=n))
    ages = draw(st.lists(st.integers(0, 15), min_size=n, max_size=n))
    cats = draw(st.lists(st.sampled_from(list("abcdef")), min_size=n, max_size=n))
    sens = draw(st.lists(st.sampled_from(["flu", "cold", "ulcer", "cancer"]), min_size=n,
                         max_size=n))
    use = draw(st.sets(st.sampled_from(["zip", "age", "cat"]), min_size=1))
    cols = [Column("zip", role="qi" if "zip" in use else "insensitive",
                   hierarchy=HierarchySpec("masking", length=2)),
            Column("age", type="integer", role="qi" if "age" in use else "insensitive",
                   hierarchy=HierarchySpec("intervals", widths=(2, 4, 8))),
            Column("cat", role="qi" if "cat" in use else "insensitive",
                   hierarchy=HierarchySpec("tree", tree=TREE)),
            Column("disease", role="sensitive", hierarchy=HierarchySpec("tree", tree=DISEASES))]
    table = pa.table({"zip": zips, "age": ages, "cat": cats, "disease": sens})
    criteria = [KAnonymity(draw(st.integers(1, 4)))]
    extra = draw(st.sampled_from(["none", "distinct", "entropy", "recursive", "equal", "ordered",
                                  "hierarchical", "presence"]))
    distinct = len(set(sens))
    if extra in ("distinct", "entropy", "recursive") and distinct >= 2:
        criteria.append(LDiversity("disease", 2, extra, c=2 if extra == "recursive" else None))
    elif extra in ("equal", "ordered", "hierarchical"):
        criteria.append(TCloseness("disease", Fraction(draw(st.integers(1, 6)), 10), extra))
    elif extra == "presence":
        more = draw(st.integers(0, 30))
        population = pa.concat_tables([table, pa.table({
            "zip": draw(st.lists(st.sampled_from(["11", "12", "21", "22", "23", "31"]),
                                 min_size=more, max_size=more)),
            "age": draw(st.lists(st.integers(0, 15), min_size=more, max_size=more)),
            "cat": draw(st.lists(st.sampled_from(list("abcdef")), min_size=more, max_size=more)),
            "disease": ["flu"] * more}, schema=table.schema)])
        criteria.append(DeltaPresence(Fraction(draw(st.integers(0, 2)), 10),
                                      Fraction(draw(st.integers(5, 10)), 10), population))
    suppression = draw(st.sampled_from([0, Fraction(1, 10), Fraction(1, 4)]))
    metric = draw(st.sampled_from(METRICS))
    return table, TableMeta("t", tuple(cols)), criteria, suppression, metric


def brute_force(problem):
    shape = tuple(h.levels for h in problem.encoded.hierarchies)
    results = {}
    for node in itertools.product(*[range(s) for s in shape]):
        results[node] = problem.evaluator.evaluate(node)
    return results


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_optimal_search_equals_brute_force(case):
    check_against_brute_force(case)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_optimal_search_equals_brute_force_thoroughly(case):
    check_against_brute_force(case)


def check_against_brute_force(case):
    table, meta, criteria, suppression, metric = case
    problem = prepare(table, meta, criteria, suppression=suppression, metric=metric)
    everything = brute_force(prepare(table, meta, criteria, suppression=suppression,
                                     metric=metric))
    acceptable = {n: r for n, r in everything.items() if r.anonymous}
    problem.evaluator.shortcut_min_source = 0  # exercise the join shortcut on small tables
    best, lattice = flash(problem)
    if not acceptable:
        assert best is None
        return
    optimum = min(r.value for r in acceptable.values())
    assert best is not None and best.anonymous
    assert best.value == optimum
    optimal_nodes = [n for n, r in acceptable.items() if r.value == optimum]
    # the release of the optimum passes the independent verification
    res = anonymize(table, criteria, meta=meta, suppression=suppression, metric=metric)
    assert all(res.verified.values()) and tuple(res.levels.values()) == best.levels
    if len(optimal_nodes) == 1:
        assert best.levels == optimal_nodes[0]
    else:  # among equally good nodes ARX keeps a lowest one it meets first
        assert sum(best.levels) <= max(sum(n) for n in optimal_nodes)
    # what the lattice claims is true
    mono = privacy_monotonicity(problem.criteria, problem.limit > 0) == "full"
    for node in lattice.nodes():
        known = lattice.anonymity(node)
        if known is not None:
            assert known == everything[node].anonymous, node
        if lattice.status(node) == "pruned":
            assert everything[node].bound >= optimum or not mono
    # the minimal acceptable generalizations
    minimal = {n for n in acceptable
               if not any(everything[p].anonymous for p in lattice.predecessors(n))}
    assert set(lattice.minimal) == minimal


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_fast_pruning_finds_the_same_node_as_arx_traversal(case):
    """Bounds known before checking prune more; the optimum (and, thanks to the tie check,
    the node) stays the one ARX's step-by-step traversal finds."""
    table, meta, criteria, suppression, metric = case
    problem = prepare(table, meta, criteria, suppression=suppression, metric=metric)
    fast, _ = flash(problem)
    arx = Flash(problem, bounds_before_check=False)
    node = arx.run()
    assert (fast is None) == (node is None)
    if node is not None:
        assert fast.levels == node


def test_join_shortcut_changes_nothing(adult):
    """Deciding unacceptable nodes from a coarser join changes no decision of the search."""
    runs = []
    for shortcut in (True, False):
        p = prepare(adult, None, [KAnonymity(5)], suppression=Fraction(2, 100))
        if not shortcut:
            p.evaluator.shortcut_min_source = 10**12
        best, lattice = flash(p)
        runs.append((best.levels, lattice.checked, p.evaluator.shortcut_checks))
    assert runs[0][0] == runs[1][0] and runs[0][1] == runs[1][1]
    assert runs[0][2] > 100 and runs[1][2] == 0


def test_lattice_inspection(adult):
    res = anonymize(adult, KAnonymity(5), suppression=0.02)
    lat = res.lattice
    assert lat.size == 12960 and lat.shape == (2, 5, 2, 3, 4, 3, 3, 3, 2)
    assert lat.optimum == tuple(res.levels.values())
    info = lat.info(lat.optimum)
    assert info["checked"] and info["anonymous"] and info["suppressed"] == 506
    counts = lat.counts()
    assert counts["checked"] + counts["tagged"] + counts["pruned"] + counts["unknown"] == lat.size
    assert lat.status(lat.bottom) == "not anonymous (tagged)" or \
        lat.status(lat.bottom).startswith("not anonymous")
    table = lat.to_table()
    assert table.num_rows == lat.size and "status" in table.column_names
    assert len(lat.checked) == counts["checked"]


@pytest.mark.slow
def test_k_minimal_generalizations_of_adult(adult):
    res = anonymize(adult, KAnonymity(5))
    minimal = res.minimal
    assert len(minimal) == 27
    assert res.levels in minimal
    lat = res.lattice
    for m in minimal:
        node = tuple(m.values())
        assert lat.anonymity(node)
        assert not any(lat.anonymity(p) for p in lat.predecessors(node))


def test_metric_choice_changes_the_optimum(adult):
    loss = anonymize(adult, KAnonymity(5))
    prec = anonymize(adult, KAnonymity(5), metric="precision")
    assert prec.metrics["precision"] <= loss.metrics["precision"]
    assert loss.metrics["loss"] <= prec.metrics["loss"]


def test_unknown_metric_and_algorithm(adult):
    from statcurator.core.errors import InvalidParameterError

    with pytest.raises(InvalidParameterError, match="unknown utility metric"):
        anonymize(adult, KAnonymity(5), metric="utility")
    with pytest.raises(InvalidParameterError, match="unknown algorithm"):
        anonymize(adult, KAnonymity(5), algorithm="datafly")


def test_search_respects_the_suppression_limit(adult):
    for s in (0, Fraction(1, 100), Fraction(5, 100)):
        res = anonymize(adult, KAnonymity(10), suppression=s)
        assert res.suppressed <= int(s * adult.num_rows)
        assert np.all(res.class_sizes >= 10)
