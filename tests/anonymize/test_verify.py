"""The independent verification catches wrong releases and wrong implementations."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from statcurator.anonymize import (
    DeltaPresence,
    KAnonymity,
    LDiversity,
    TCloseness,
    anonymize,
    verify,
)
from statcurator.anonymize import criteria as criteria_module
from statcurator.anonymize._engine import NodeEvaluator
from statcurator.core.errors import VerificationError
from statcurator.core.schema import Column, HierarchySpec, TableMeta

META = TableMeta("t", (
    Column("name", role="identifier"),
    Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),
    Column("disease", role="sensitive"),
))
TABLE = pa.table({"name": list("ABCDEFGH"),
                  "zip": ["121", "122", "123", "124", "131", "132", "133", "134"],
                  "disease": ["flu", "cold", "flu", "ulcer", "cold", "flu", "ulcer", "flu"]})


def test_a_tampered_release_is_not_written(tmp_path):
    res = anonymize(TABLE, KAnonymity(4), meta=META)
    assert res.levels == {"zip": 1}
    # replace one released zip: the class structure breaks 4-anonymity
    bad = res.table.set_column(0, "zip", pa.array(["12*"] * 3 + ["999"] + ["13*"] * 4))
    tampered = type(res)(**{**res.__dict__, "table": bad})
    with pytest.raises(VerificationError, match="4-anonymity"):
        tampered.write(tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()
    # an untruthful value (not the input's generalization) is caught too
    lie = res.table.set_column(0, "zip", pa.array(["13*"] * 4 + ["12*"] * 4))
    v = verify(lie, [KAnonymity(4)], **res._check)
    assert v["4-anonymity"] and not v["truthful generalization"]


def test_a_wrong_criterion_implementation_is_caught(monkeypatch):
    """If the search's vectorized check were wrong, the release would fail verification."""
    monkeypatch.setattr(NodeEvaluator, "failing",
                        lambda self, table: np.zeros(table.size, dtype=bool))
    with pytest.raises(VerificationError, match="4-anonymity"):
        anonymize(TABLE, KAnonymity(4), meta=META)


def test_a_wrong_l_diversity_is_caught(monkeypatch):
    monkeypatch.setattr(criteria_module.LDiversity, "check",
                        lambda self, summary: summary.sizes >= 0)
    with pytest.raises(VerificationError, match="3-diversity"):
        anonymize(TABLE, LDiversity("disease", 3), meta=META)


def test_a_wrong_t_closeness_is_caught(monkeypatch):
    monkeypatch.setattr(criteria_module.TCloseness, "check",
                        lambda self, summary: summary.sizes >= 0)
    with pytest.raises(VerificationError, match="closeness"):
        anonymize(TABLE, TCloseness("disease", Fraction(1, 100)), meta=META)


def test_identifiers_are_removed_and_suppressed_rows_starred():
    table = TABLE.set_column(1, "zip", pa.array(["121", "122", "123", "124", "131", "132",
                                                 "133", "999"]))
    res = anonymize(table, KAnonymity(3), meta=META, suppression=Fraction(1, 8))
    assert "name" not in res.table.column_names
    assert res.suppressed == 1 and res.table.num_rows == 8
    assert res.table.column("zip").to_pylist().count("*") == 1
    dropped = anonymize(table, KAnonymity(3), meta=META, suppression=Fraction(1, 8),
                        suppressed="drop")
    assert dropped.table.num_rows == 7 and "*" not in dropped.table.column("zip").to_pylist()
    assert all(dropped.verified.values())
    # sensitive and insensitive columns are released unchanged (rows in a random order)
    assert sorted(dropped.table.column("disease").to_pylist()) == \
        sorted(table.column("disease").to_pylist()[:7])


def test_suppression_over_the_limit_fails_verification():
    table = TABLE.set_column(1, "zip", pa.array(["121", "122", "123", "124", "131", "132",
                                                 "133", "999"]))
    res = anonymize(table, KAnonymity(3), meta=META, suppression=Fraction(1, 8))
    check = dict(res._check)
    check["suppression"] = 0
    assert not verify(res.table, res.criteria, **check)["suppression limit"]


def test_the_top_node_is_a_class_not_a_suppression():
    meta = TableMeta("t", (Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=1)),))
    res = anonymize(pa.table({"zip": ["1", "2", "3"]}), KAnonymity(3), meta=meta)
    assert res.levels == {"zip": 1} and res.suppressed == 0
    assert res.table.column("zip").to_pylist() == ["*"] * 3 and res.verified["3-anonymity"]


def test_delta_presence(adult, data_dir):
    from .conftest import read_semicolon

    sample = read_semicolon(data_dir / "adult" / "adult_subset.csv", age=pa.int64())
    qi = ["sex", "age", "race", "marital-status", "education"]
    dp = DeltaPresence(Fraction(0), Fraction(1, 2), population=adult)
    res = anonymize(sample, KAnonymity(2), dp, meta=adult.meta, qi=qi,
                    suppression=Fraction(1, 50))
    assert res.verified[str(dp)]
    # recount δ by hand on the release
    gen = res._check["hierarchies"]
    pop = {}
    for row in adult.table.select(qi).to_pylist():
        key = tuple(gen[q].generalize(str(row[q]), res.levels[q]) for q in qi)
        pop[key] = pop.get(key, 0) + 1
    rel = {}
    for row in res.table.select(qi).to_pylist():
        if not all(row[q] == "*" for q in qi):
            key = tuple(row[q] for q in qi)
            rel[key] = rel.get(key, 0) + 1
    assert all(n / pop[k] <= 0.5 for k, n in rel.items())


def test_sample_must_be_a_subset_of_the_population(adult):
    from statcurator.core.errors import DataError

    sample = adult.table.slice(0, 10)
    population = adult.table.slice(0, 5)
    with pytest.raises(DataError, match="not a subset of the population"):
        anonymize(sample, DeltaPresence(0, Fraction(1, 2), population=population),
                  meta=adult.meta)


def test_verify_needs_a_row_map_for_dropped_rows():
    release = pc.take(TABLE, pa.array([0, 1])).drop(["name"])
    with pytest.raises(VerificationError, match="row map"):
        verify(release, [KAnonymity(1)], original=TABLE, qi=["zip"])
