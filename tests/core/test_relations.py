"""Neighbour relations evaluated on concrete datasets, and output metrics."""

from __future__ import annotations

import csv
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from statcurator.core.errors import DataError, InvalidParameterError
from statcurator.core.relations import (
    AbsoluteDistance,
    AddRemove,
    ChangeOne,
    L1Distance,
    L2Distance,
    PersonLevel,
    rows_of,
)


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f, delimiter=";"))


def test_diabetes_tables_are_change_one_neighbours(textbook: Path) -> None:
    d1, d2 = _read(textbook / "diabetes.csv"), _read(textbook / "diabetes_neighbour.csv")
    assert ChangeOne().distance(d1, d2) == 1  # Chris's record changed
    assert ChangeOne().are_neighbours(d1, d2)
    assert AddRemove().distance(d1, d2) == 2  # = remove his old row, add the new one
    assert not AddRemove().are_neighbours(d1, d2)
    assert AddRemove().distance(d1, d1[:-1]) == 1
    assert ChangeOne().distance(d1, d1[:-1]) == math.inf
    # person-level, keyed by name: Chris is removed and added back
    assert PersonLevel(key="Name", max_rows=1).distance(d1, d2) == 2


def test_datasets_in_any_container() -> None:
    rows = [(1, "a"), (2, "b")]
    table = pa.table({"x": [1, 2], "y": ["a", "b"]})
    assert rows_of(np.array([[1, 2], [3, 4]])) == [[1, 2], [3, 4]]
    assert rows_of(table) == [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]
    assert AddRemove().distance(rows, [(2, "b"), (1, "a")]) == 0  # order does not matter
    assert AddRemove().distance(table, table.slice(0, 1)) == 1
    with pytest.raises(DataError):
        rows_of(3)


def test_multisets_count_duplicates_and_missing_values() -> None:
    assert AddRemove().distance([1, 1, 2], [1, 2]) == 1
    assert AddRemove().distance([float("nan")], [float("nan")]) == 0
    assert ChangeOne().distance([{"a": 1}], [{"a": 2}]) == 1


def test_person_level_relation() -> None:
    rel = PersonLevel(key=lambda r: r[0], max_rows=2)
    d = [("p1", 1), ("p1", 2), ("p2", 3)]
    assert rel.distance(d, d) == 0
    assert rel.distance(d, d[:2]) == 1  # p2 removed
    assert rel.distance(d, [("p1", 1), ("p2", 3)]) == 2  # p1 changed: removed and re-added
    assert rel.add_remove_distance(3) == 6  # three people own at most six rows
    with pytest.raises(DataError, match="bound each person"):
        rel.distance(d + [("p1", 9)], d)
    with pytest.raises(InvalidParameterError):
        PersonLevel(max_rows=0)


rows = st.lists(st.tuples(st.integers(0, 5), st.sampled_from("xyz")), max_size=12)


@given(rows, st.data())
def test_random_neighbours_are_at_distance_one(data_rows: list, draw: st.DataObject) -> None:
    # add a row
    extra = draw.draw(st.tuples(st.integers(0, 5), st.sampled_from("xyz")))
    added = data_rows + [extra]
    assert AddRemove().distance(data_rows, added) == 1
    if data_rows:
        i = draw.draw(st.integers(0, len(data_rows) - 1))
        removed = data_rows[:i] + data_rows[i + 1:]
        assert AddRemove().distance(data_rows, removed) == 1
        changed = list(data_rows)
        changed[i] = extra
        expected = 0 if extra == data_rows[i] else 1
        assert ChangeOne().distance(data_rows, changed) == expected
        assert AddRemove().distance(data_rows, changed) == 2 * expected


@given(rows, rows)
def test_distances_are_symmetric_metrics(a: list, b: list) -> None:
    for rel in (AddRemove(), ChangeOne()):
        assert rel.distance(a, b) == rel.distance(b, a)
        assert rel.distance(a, a) == 0
    # change-one steps convert to add/remove steps, never fewer
    if len(a) == len(b):
        assert AddRemove().distance(a, b) == ChangeOne().add_remove_distance(
            ChangeOne().distance(a, b))


def test_output_metrics_are_exact() -> None:
    assert AbsoluteDistance().distance(0.1, 0.2) == Fraction(0.2) - Fraction(0.1)
    assert L1Distance().distance(np.array([1, 2]), np.array([3, 1])) == 3
    assert L2Distance().distance([0, 0], [1, 1]) >= Fraction(14142135623730950, 10**16)
    assert L2Distance().squared([0, 0], [1, 1]) == 2
    with pytest.raises(DataError):
        L1Distance().distance([1], [1, 2])
