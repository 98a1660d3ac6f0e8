"""Matching targets to released cells from public text only."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import statcurator as sc
from statcurator.anonymize import Hierarchy, KAnonymity, anonymize
from statcurator.attacks._release import classes_of, containment, match, published


@pytest.mark.parametrize(("label", "value", "inside"), [
    ("476**", "47678", True), ("476**", "47978", False), ("476**", "4767", False),
    ("2*", "27", True), ("2*", "2", False), ("3*", "27", False),
    ("[1, 10]", "10", True), ("[1, 10]", "11", False), ("[15, 20[", "20", False),
    ("<30", "29", True), ("<30", "30", False), ("<=40", "40", True), (">=40", "39", False),
    ("≥40", "40", True), ("*", "anything", True), ("*****", "13053", True),
    ("20-24", "24", True), ("20-24", "25", False), ("Male", "Male", True),
    ("Male", "Female", False), ("39", "39.0", True),
])
def test_containment_reads_labels(label: str, value: str, inside: bool) -> None:
    assert bool(containment([label], [value])[0, 0]) is inside


def test_the_hierarchy_decides_for_its_own_labels() -> None:
    # ARX's Adult age labels are off by one at multiples of five: 20 is in "15-19"
    h = Hierarchy.from_rows("age", [["19", "15-19", "*"], ["20", "15-19", "*"],
                                    ["21", "20-24", "*"]])
    got = containment(["15-19", "20-24"], ["20", "21", "22"], h).astype(int).tolist()
    # 22 is not in the hierarchy: its label is read as a range
    assert got == [[1, 0], [0, 1], [0, 1]]


def _brute(table: pa.Table, qi: list[str], targets: dict[str, list[str]]) -> list[set[int]]:
    c = classes_of(published(table, qi=qi))
    out = []
    for i in range(len(targets[qi[0]])):
        hits = set()
        for cls in range(c.size):
            if all(containment([c.labels[d][c.cells[cls, d]]], [targets[q][i]])[0, 0]
                   for d, q in enumerate(qi)):
                hits.add(cls)
        out.append(hits)
    return out


cells = st.sampled_from(["[1, 10]", "[5, 20]", "<30", ">=20", "2*", "*", "15"])
zips = st.sampled_from(["476**", "4790*", "47***", "*", "47678"])


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(cells, zips), min_size=1, max_size=12),
       st.lists(st.tuples(st.integers(0, 40), st.sampled_from(["47678", "47905", "47100"])),
                min_size=1, max_size=8))
def test_match_agrees_with_a_brute_force_loop(rows, people) -> None:
    table = pa.table({"age": [a for a, _ in rows], "zip": [z for _, z in rows]})
    targets = {"age": [str(a) for a, _ in people], "zip": [z for _, z in people]}
    c = classes_of(published(table, qi=["age", "zip"]))
    indptr, indices = match(c, targets)
    got = [set(indices[indptr[i]:indptr[i + 1]].tolist()) for i in range(len(people))]
    assert got == _brute(table, ["age", "zip"], targets)


def test_match_handles_more_than_64_classes() -> None:
    table = pa.table({"age": [str(a) for a in range(200)]})
    c = classes_of(published(table, qi=["age"]))
    indptr, indices = match(c, {"age": ["0", "63", "64", "199", "500"]})
    labels = [c.labels[0][c.cells[i, 0]] for i in indices]
    assert labels == ["0", "63", "64", "199"] and indptr.tolist() == [0, 1, 2, 3, 4, 4]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["optimal", "mondrian"])
def test_every_record_matches_its_own_class_and_no_other(algorithm: str) -> None:
    # releases of partition-based algorithms: the released cells are disjoint, so a record's
    # QIs (read through the public hierarchies) match its own class and only that one
    data = sc.datasets.adult()
    res = anonymize(data, KAnonymity(5), algorithm=algorithm, sensitive=["occupation"])
    pub = published(res)
    c = classes_of(pub)
    sample = np.random.default_rng(0).choice(data.table.num_rows, 2000, replace=False)
    people = data.table.take(sample)
    targets = {q: [str(v) for v in people.column(q).to_pylist()] for q in res.qi}
    indptr, indices = match(c, targets)
    assert np.array_equal(np.diff(indptr), np.ones(len(sample)))
    assert np.array_equal(indices, c.row_class[sample])
