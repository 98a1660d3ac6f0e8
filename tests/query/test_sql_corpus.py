"""The SQL corpus (tests/data/sql_corpus): every query an analyst may send is either released
or refused with its reason, and none crashes. benchmarks/sql_corpus.py counts the same corpus
for the record (and for the peer)."""

from __future__ import annotations

import tomllib
from fractions import Fraction
from pathlib import Path

import pytest

from statcurator.core.errors import StatcuratorError
from statcurator.curator import Curator
from statcurator.io.metadata import load_metadata

CORPUS = Path(__file__).resolve().parents[1] / "data" / "sql_corpus"
with open(CORPUS / "queries.toml", "rb") as f:
    QUERIES = tomllib.load(f)["query"]


@pytest.fixture(scope="module")
def curator():
    cur = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    cur.register("pums", str(CORPUS / "pums.csv"), load_metadata(CORPUS / "pums.toml"))
    cur.set_dataset_budget("pums", epsilon=10**6, delta=Fraction(1, 10))
    cur.set_budget("ana", "pums", epsilon=10**6, delta=Fraction(1, 10))
    yield cur
    cur.close()


@pytest.mark.parametrize("q", QUERIES, ids=[q["sql"][:60] for q in QUERIES])
def test_corpus_query(curator, q):
    delta = None if q.get("delta") is None else Fraction(str(q["delta"]))
    before = curator.ledger.status("ana", "pums").remaining
    if q["expect"] == "answer":
        rel = curator.sql(q["sql"]).release(1, delta, analyst="ana")
        assert rel.rows() is not None
        return
    with pytest.raises(StatcuratorError) as info:
        curator.sql(q["sql"]).release(1, delta, analyst="ana")
    assert q["why"].lower() in str(info.value).lower()
    assert info.value.remedy
    assert curator.ledger.status("ana", "pums").remaining == before  # a refusal costs nothing


def test_the_corpus_covers_every_kind():
    kinds = {q["group"] for q in QUERIES}
    assert {"keys only", "post-processing", "names", "regression", "refused"} <= kinds
    assert len(QUERIES) >= 60
