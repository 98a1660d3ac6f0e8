"""Hierarchy builders, validation and the errors bad hierarchies get."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from statcurator.anonymize import Hierarchy, KAnonymity, anonymize
from statcurator.core.errors import DataError, HierarchyError, MetadataError
from statcurator.core.schema import Column, HierarchySpec, TableMeta


def test_file_hierarchy_of_adult_age(shared_data):
    h = Hierarchy.from_csv("age", shared_data / "adult" / "adult_hierarchy_age.csv")
    assert len(h) == 100 and h.levels == 5
    assert h.generalize("39", 1) == "35-39" and h.generalize("40", 2) == "30-39"  # ARX's labels
    assert h.generalize("39", 4) == "*"
    # shares: a 5-year band covers 5 of the 100 rows
    assert h.share(1)[h.index(["39"])[0]] == pytest.approx(0.05)
    assert h.cardinalities == (100, 20, 10, 5, 1)


def test_codes_generalize_by_gather():
    h = Hierarchy.from_rows("x", [["a", "g1", "*"], ["b", "g1", "*"], ["c", "g2", "*"]])
    idx = h.index(["c", "a", "a"])
    assert [h.labels(1)[c] for c in h.codes[1][idx]] == ["g2", "g1", "g1"]
    assert h.group_sizes[1].tolist() == [2, 2, 1]
    assert h.children(1) == [[0, 1], [2]]


def test_intervals():
    h = Hierarchy.from_intervals("age", ["17", "39", "40", "2.5"], widths=[5, 10], origin=0)
    assert h.generalize("39", 1) == "[35, 40)"
    assert h.generalize("40", 2) == "[40, 50)"
    assert h.generalize("2.5", 1) == "[0, 5)"
    assert h.generalize("17", 3) == "*"
    with pytest.raises(HierarchyError, match="not a multiple"):
        Hierarchy.from_intervals("age", ["1"], widths=[5, 7])
    with pytest.raises(DataError, match="'abc', which is not a number"):
        Hierarchy.from_intervals("age", ["abc"], widths=[5])


def test_masking():
    h = Hierarchy.from_masking("zip", ["47677", "47602"], length=5)
    assert [h.generalize("47677", i) for i in range(6)] == \
        ["47677", "4767*", "476**", "47***", "4****", "*****"]
    with pytest.raises(DataError, match="'476' of 3 characters"):
        Hierarchy.from_masking("zip", ["476"], length=5)


def test_tree():
    h = Hierarchy.from_tree("disease", {
        "digestive": {"stomach": ["gastric ulcer", "gastritis"]},
        "lung": {"infection": ["flu", "pneumonia"]},
    })
    assert h.rows[0] == ("gastric ulcer", "stomach", "digestive", "*")
    with pytest.raises(HierarchyError, match="different depths"):
        Hierarchy.from_tree("d", {"a": {"b": ["x"]}, "c": ["y"]})


def test_validation_errors_name_column_value_and_remedy():
    with pytest.raises(HierarchyError) as e:
        Hierarchy.from_rows("zip", [["1", "1*", "*"], ["2", "*"]])
    assert "column 'zip'" in str(e.value) and "'2'" in str(e.value)
    assert e.value.remedy and "same number of columns" in e.value.remedy
    with pytest.raises(HierarchyError, match="'g' at level 1 generalizes to both 'A' and 'B'"):
        Hierarchy.from_rows("x", [["a", "g", "A"], ["b", "g", "B"]])
    with pytest.raises(HierarchyError, match="lists the value 'a' twice"):
        Hierarchy.from_rows("x", [["a", "*"], ["a", "*"]])
    with pytest.raises(HierarchyError, match="is empty"):
        Hierarchy.from_rows("x", [])


def test_value_missing_from_hierarchy_is_a_data_error():
    meta = TableMeta("t", (Column("sex", role="qi", hierarchy=HierarchySpec(
        "tree", tree={"any": ["Male", "Female"]})),))
    table = pa.table({"sex": ["Male", "Female", "Other"]})
    with pytest.raises(DataError) as e:
        anonymize(table, KAnonymity(1), meta=meta)
    msg = str(e.value)
    assert "column 'sex'" in msg and "'Other'" in msg and "add a row for 'Other'" in msg


def test_missing_hierarchy_file(tmp_path):
    meta = TableMeta("t", (Column("a", role="qi", hierarchy=HierarchySpec(
        "file", path=str(tmp_path / "nope.csv"))),))
    with pytest.raises(HierarchyError, match="does not exist"):
        anonymize(pa.table({"a": ["x"]}), KAnonymity(1), meta=meta)


def test_qi_without_hierarchy_needs_one_for_the_optimal_search():
    meta = TableMeta("t", (Column("a", role="qi"),))
    with pytest.raises(MetadataError, match="no generalization hierarchy"):
        anonymize(pa.table({"a": ["x", "y"]}), KAnonymity(1), meta=meta)


def test_values_are_matched_on_their_text_form():
    h = Hierarchy.from_rows("age", [["39", "30-39", "*"], ["40", "40-49", "*"]])
    meta = TableMeta("t", (Column("age", type="integer", role="qi", hierarchy=None),))
    table = pa.table({"age": pa.array([39, 40, 39], pa.int64())})
    from statcurator.anonymize._engine import column_codes

    assert column_codes(table, "age", h.index).tolist() == [0, 1, 0]
    assert meta["age"].type.numeric
    floats = pa.table({"age": pa.array([39.0, 40.0])})
    assert column_codes(floats, "age", h.index).tolist() == [0, 1]
    assert np.array_equal(h.index(["40"]), [1])
