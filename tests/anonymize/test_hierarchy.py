"""Hierarchy builders, validation and the errors bad hierarchies get."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from statcurator.anonymize import Hierarchy, KAnonymity, LDiversity, anonymize
from statcurator.core.errors import DataError, HierarchyError, MetadataError
from statcurator.core.schema import Column, HierarchySpec, TableMeta
from statcurator.datasets import data_path


def test_file_hierarchy_of_adult_age():
    h = Hierarchy.from_csv("age", data_path("adult").parent / "adult_hierarchy_age.csv")
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


# -- automatic hierarchies (a QI named in qi= without a declared one) -----------------------

def test_automatic_hierarchies():
    ages = Hierarchy.automatic("age", [str(a) for a in range(17, 91)], numeric=True)
    assert ages.source == "automatic: intervals of width 5, 10, 20, 40, then *"
    assert [ages.generalize("39", lv) for lv in range(ages.levels)] == \
        ["39", "[35, 40)", "[30, 40)", "[20, 40)", "[0, 40)", "*"]
    reals = Hierarchy.automatic("x", ["0.1", "0.25", "3.7"], numeric=True)
    assert reals.source == "automatic: intervals of width 0.5, 1, 2, then *"
    for values, numeric in ((["M", "F"], False), (["1", "2"], True), (["7"], True),
                            (["3", "x"], True), (["1", None], True)):
        h = Hierarchy.automatic("c", values, numeric=numeric)
        assert h.source == "automatic: suppression only (the value, then *)" and h.levels == 2


def test_named_qis_get_automatic_hierarchies_and_declared_ones_do_not():
    table = pa.table({"age": [21, 22, 35, 34, 48, 49], "sex": ["F", "F", "M", "M", "F", "F"]})
    meta = TableMeta("t", (Column("age", type="integer"), Column("sex")))  # nothing is a QI
    res = anonymize(table, KAnonymity(2), meta=meta, qi=["age", "sex"])
    assert res.automatic == {"age": "automatic: intervals of width 2, 4, 8, 16, then *",
                             "sex": "automatic: suppression only (the value, then *)"}
    assert res.levels == {"age": 2, "sex": 0} and res.verified["2-anonymity"]
    assert "automatic: intervals" in str(res) and res.to_dict()["automatic_hierarchies"]
    declared = TableMeta("t", (Column("age", type="integer", role="qi"), Column("sex")))
    with pytest.raises(MetadataError, match="has no generalization hierarchy") as info:
        anonymize(table, KAnonymity(2), meta=declared)
    assert "qi=" in info.value.remedy
    ident = TableMeta("t", (Column("age", type="integer", role="identifier"), Column("sex")))
    with pytest.raises(MetadataError, match="not a declared quasi-identifier"):
        anonymize(table, KAnonymity(2), meta=ident, qi=["age"])


def test_a_sensitive_value_missing_from_its_hierarchy_is_refused():
    tree = HierarchySpec("tree", tree={"respiratory": ["flu", "cold"]})
    meta = TableMeta("t", (Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),
                           Column("disease", role="sensitive", hierarchy=tree)))
    table = pa.table({"zip": ["121", "122", "131", "132"],
                      "disease": ["flu", "cold", "flu", "measles"]})
    with pytest.raises(DataError) as info:
        anonymize(table, KAnonymity(2), LDiversity("disease", 2), meta=meta)
    assert "column 'disease' has the value 'measles'" in info.value.problem
    assert "add a row for 'measles'" in info.value.remedy
    ok = table.set_column(1, "disease", pa.array(["flu", "cold", "flu", "cold"]))
    assert anonymize(ok, KAnonymity(2), LDiversity("disease", 2), meta=meta).verified


def test_unprotected_sensitive_attributes_are_reported():
    from statcurator import datasets

    res = anonymize(datasets.adult(), KAnonymity(5), qi=["sex", "race"],
                    sensitive=["occupation"])
    assert res.sensitive == ("occupation",) and res.unprotected == ("occupation",)
    assert "occupation (no criterion protects it: released as is)" in str(res)
    guarded = anonymize(datasets.adult(), KAnonymity(5), LDiversity("occupation", 2),
                        qi=["sex", "race"])
    assert guarded.sensitive == ("occupation",) and guarded.unprotected == ()
