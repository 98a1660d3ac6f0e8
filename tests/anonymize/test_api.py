"""The one-call API and its result object."""

from __future__ import annotations

import json
from fractions import Fraction

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import statcurator as sc
from statcurator.anonymize import AnonymizationResult, KAnonymity, LDiversity, anonymize
from statcurator.core.errors import DataError, InvalidParameterError, MetadataError
from statcurator.core.schema import Column, HierarchySpec, TableMeta

META = TableMeta("toy", (
    Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),
    Column("age", type="integer", role="qi", hierarchy=HierarchySpec("intervals", widths=(10, 20))),
    Column("disease", role="sensitive"),
))
ROWS = {"zip": ["121", "122", "123", "124", "131", "132", "133", "134"],
        "age": [21, 25, 33, 38, 41, 45, 52, 58],
        "disease": ["flu", "cold", "flu", "ulcer", "cold", "flu", "ulcer", "flu"]}


@pytest.fixture(scope="module")
def result() -> AnonymizationResult:
    return anonymize(pa.table(ROWS), KAnonymity(2), LDiversity("disease", 2), meta=META)


def test_result_fields(result):
    assert isinstance(result, AnonymizationResult)
    assert set(result.levels) == {"zip", "age"}
    assert result.classes >= 1 and result.min_class_size >= 2
    assert set(result.metrics) >= {"loss", "ncp", "dm", "dmstar", "aecs", "entropy", "precision"}
    assert set(result.risk) == {"max", "average", "threshold", "records_at_risk",
                                "classes_at_risk"}
    assert result.verified == {"2-anonymity": True, "distinct 2-diversity of disease": True,
                               "suppression limit": True, "truthful generalization": True}
    with pytest.raises(AttributeError):
        result.suppressed = 3  # frozen


def test_result_renders(result):
    text = str(result)
    assert "levels" in text and "verified" in text
    html = result._repr_html_()
    assert html.startswith("<div>") and "<table>" in html
    doc = result.to_dict()
    for key in ("algorithm", "levels", "suppressed", "classes", "min_class_size", "metrics",
                "verified"):
        assert key in doc
    json.dumps(doc)


def test_result_conversions(result):
    assert result.to_pandas().shape == (8, 3)
    assert result.to_polars().shape == (8, 3)


def test_write_formats(result, tmp_path):
    csv = result.write(tmp_path / "r.csv", separator=";")
    assert csv.read_text().splitlines()[0] == "zip;age;disease"
    assert pq.read_table(result.write(tmp_path / "r.parquet")).num_rows == 8
    assert result.write(tmp_path / "r.arrow").exists()
    with pytest.raises(DataError, match="cannot write"):
        result.write(tmp_path / "r.xlsx")


def test_inputs_pandas_polars_and_dataset():
    import pandas as pd
    import polars as pl

    a = anonymize(pd.DataFrame(ROWS), KAnonymity(2), meta=META)
    b = anonymize(pl.DataFrame(ROWS), KAnonymity(2), meta=META)
    c = anonymize(sc.Dataset("toy", pa.table(ROWS), META), KAnonymity(2))
    assert a.levels == b.levels == c.levels
    assert c.dataset == "toy"


def test_criteria_may_be_given_as_a_list():
    a = anonymize(pa.table(ROWS), [KAnonymity(2), LDiversity("disease", 2)], meta=META)
    assert len(a.criteria) == 2


def test_errors():
    with pytest.raises(MetadataError, match="no metadata"):
        anonymize(pa.table(ROWS), KAnonymity(2))
    with pytest.raises(InvalidParameterError, match="no privacy criterion"):
        anonymize(pa.table(ROWS), meta=META)
    with pytest.raises(InvalidParameterError, match="suppression"):
        anonymize(pa.table(ROWS), KAnonymity(2), meta=META, suppression=2)
    with pytest.raises(InvalidParameterError, match="suppressed"):
        anonymize(pa.table(ROWS), KAnonymity(2), meta=META, suppressed="hide")
    with pytest.raises(MetadataError, match="no quasi-identifiers"):
        anonymize(pa.table(ROWS), KAnonymity(2), meta=META, qi=[])


def test_qi_and_sensitive_of_a_run(adult):
    res = anonymize(adult, KAnonymity(5), qi=["sex", "age", "race"])
    assert res.qi == ("sex", "age", "race")
    assert sorted(res.table.column("education").to_pylist()) == \
        sorted(adult.table.column("education").to_pylist())  # released as it is
    res = anonymize(adult, KAnonymity(5), LDiversity("occupation", 3), sensitive="occupation",
                    qi="sex,age")
    assert res.qi == ("sex", "age") and res.sensitive == ("occupation",)


def test_progress_bar_runs(adult, capsys):
    res = anonymize(adult, KAnonymity(5), progress=True)
    assert res.levels["age"] == 4
    assert capsys.readouterr().out == ""  # the bar goes to stderr


def test_suppression_is_exact(adult):
    res = anonymize(adult, KAnonymity(5), suppression=Fraction(1, 50))
    assert res.suppression == Fraction(1, 50) and res.suppression_limit == 603
