"""Suppressed records kept as rows of ``*`` reveal nothing but their existence (finding of
the 2026-11-26 anonymization review).

A starred row is a group that no criterion checks, and its members can be named: whoever
knows the published levels knows that the people who fall in no released class are the
starred ones. With k = 3, l = 2 and a 10% suppression limit, the one person aged 87 is
suppressed; ARX's output keeps the row ``*, *, cancer``, and an attacker who knows that Max
is 87 reads his diagnosis. The release now empties every column of a starred row that is
not a quasi-identifier, and the independent verification checks it.
"""

from __future__ import annotations

import pyarrow as pa

from statcurator.anonymize import KAnonymity, LDiversity, anonymize, verify
from statcurator.anonymize import release as release_module
from statcurator.io import load_dataset

PEOPLE = pa.table({
    "age": [21, 22, 23, 24, 25, 26, 31, 32, 33, 87],
    "sex": ["F", "F", "F", "M", "M", "M", "F", "F", "F", "M"],
    "diagnosis": ["flu", "cold", "hiv", "flu", "cold", "flu", "cold", "flu", "hiv", "cancer"]})


def attack(table: pa.Table) -> str | None:
    """Max is 87 and male: he falls in no released class, so he is a starred row; with one
    starred row, its diagnosis is his."""
    starred = [r for r in table.to_pylist() if r["age"] == "*" and r["sex"] == "*"]
    return starred[0]["diagnosis"] if len(starred) == 1 else None


def release(**kw):
    return anonymize(load_dataset(PEOPLE), KAnonymity(3), LDiversity("diagnosis", 2),
                     qi=["age", "sex"], suppression=0.1, **kw)


def test_a_starred_row_tells_nothing_of_the_person_it_is() -> None:
    res = release()
    assert res.suppressed == 1 and all(res.verified.values())
    assert res.verified["suppressed records reveal nothing"]
    assert attack(res.table) is None
    assert res.table.num_rows == PEOPLE.num_rows            # one row per record, still


def test_control_arx_style_starred_rows_reveal_the_diagnosis(monkeypatch) -> None:
    import pyarrow.compute as pc

    plain = release_module.assemble

    def arx_style(table, meta, generalized, suppressed, mode, marker="*"):
        out = plain(table, meta, generalized, suppressed, mode, marker)
        if mode != "keep" or not suppressed.any():
            return out
        keep_values = table.column("diagnosis")                # ARX keeps the other columns
        return out.set_column(out.column_names.index("diagnosis"), "diagnosis", keep_values)

    from statcurator.anonymize import api

    monkeypatch.setattr(release_module, "assemble", arx_style)
    monkeypatch.setattr(api, "check_verified", lambda verified: None)
    res = release()
    assert attack(res.table) == "cancer"
    # and the independent verification refuses such a release
    checked = verify(res.table, [KAnonymity(3), LDiversity("diagnosis", 2)], original=PEOPLE,
                     qi=["age", "sex"], suppression=0.1)
    assert checked["suppressed records reveal nothing"] is False
    assert pc.sum(pc.equal(res.table.column("age"), "*")).as_py() == 1


def test_a_class_generalized_to_star_everywhere_is_a_class_not_suppressed_rows() -> None:
    """Review helper-35: the verification took every row that is * in all its QIs for a
    suppressed one, so a Mondrian release whose only class is the hierarchy's root was
    refused (the 'suppressed' rows broke the limit) instead of checked. It now reads which
    rows were suppressed from the algorithm's row list. Control: without the list, the old
    reading counts the whole class against the limit."""
    from statcurator.core.schema import Column, HierarchySpec, TableMeta

    tree = {"north": ["a", "b"], "south": ["c", "d", "e"]}
    meta = TableMeta("t", (Column("region", role="qi", hierarchy=HierarchySpec("tree", tree=tree)),
                           Column("dx", role="sensitive")))
    table = pa.table({"region": list("aabbccddee"), "dx": list("xyxyxyxyxy")})
    res = anonymize(table, KAnonymity(5), meta=meta, algorithm="mondrian", suppression=0.3)
    assert set(res.table.column("region").to_pylist()) == {"*"} and res.suppressed == 0
    assert all(res.verified.values())
    inputs = {k: v for k, v in res.verification_inputs.items() if k != "suppressed_rows"}
    old = verify(res.table, [KAnonymity(5)], **inputs)
    assert old["suppression limit"] is False                    # control
