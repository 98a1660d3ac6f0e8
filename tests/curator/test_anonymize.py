"""Curator.anonymize: the anonymization pillar through the one object users hold."""

from __future__ import annotations

from pathlib import Path

import pytest

import statcurator as sc
from statcurator.core.errors import DataError


def test_anonymize_a_registered_dataset_matches_the_direct_call() -> None:
    cur = sc.Curator()
    cur.register("adult", sc.datasets.adult())
    via_curator = cur.anonymize("adult", sc.KAnonymity(5), suppression=0.02)
    direct = sc.anonymize(sc.datasets.adult(), sc.KAnonymity(5), suppression=0.02)
    assert via_curator.levels == direct.levels
    assert (via_curator.suppressed, via_curator.classes) == (direct.suppressed, direct.classes)
    # the same rows, each release in its own random order
    def rows(t):
        return sorted(map(tuple, zip(*(c.to_pylist() for c in t.columns), strict=True)),
                      key=lambda r: tuple("" if v is None else str(v) for v in r))

    assert via_curator.table.column_names == direct.table.column_names
    assert rows(via_curator.table) == rows(direct.table)
    # anonymization is not a DP release: no budget is touched
    assert cur.ledger.charges() == []


def test_anonymize_a_table_read_in_place_from_csv(tmp_path: Path, textbook: Path) -> None:
    meta = tmp_path / "hospital.toml"
    meta.write_text(
        '[table]\nname = "hospital"\nseparator = ";"\n'
        '[columns.ZIP]\ntype = "string"\nrole = "qi"\nhierarchy = { masking = 5 }\n'
        '[columns.Age]\ntype = "integer"\nrole = "qi"\nhierarchy = { intervals = [10, 20] }\n'
        '[columns.Nationality]\ntype = "string"\nrole = "qi"\n'
        'hierarchy.tree = { "*" = ["Russian", "American", "Japanese", "Indian"] }\n'
        '[columns.Condition]\ntype = "string"\nrole = "sensitive"\n')
    cur = sc.Curator()
    cur.register("hospital", textbook / "hospital.csv", meta)
    res = cur.anonymize("hospital", sc.KAnonymity(4))
    assert res.min_class_size >= 4 and all(res.verified.values())
    assert res.table.num_rows == 12


def test_public_and_metadata_only_tables_are_refused() -> None:
    cur = sc.Curator()
    cur.register_public("regions", {"city": ["a", "b"], "region": ["N", "S"]})
    with pytest.raises(DataError, match="registered as public"):
        cur.anonymize("regions", sc.KAnonymity(2))
    cur.register("shape", None, sc.datasets.adult().meta.replace(source=None))
    with pytest.raises(DataError, match="registered without data"):
        cur.anonymize("shape", sc.KAnonymity(2))
