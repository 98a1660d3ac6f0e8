"""Release certificates and the independent re-check (issue 13).

The re-check derives every release's cost again from its certificate, apart from the
compiler. It must (1) agree with the compiler over every query the tests know — the SQL
corpus and the engine-parity queries, under every privacy unit, both neighbour relations,
ε and ρ —, never deriving more than is charged and, for Laplace releases, deriving exactly
the charge (so that it is not vacuous); and (2) refuse, uncharged, a compiler that
under-charges: each mutant below halves one sensitivity of the compiler and is caught.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tomllib
from fractions import Fraction
from pathlib import Path

import pyarrow as pa
import pytest

from statcurator.core.errors import PrivacyAccountingError
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.curator import Curator
from statcurator.io.metadata import load_metadata
from statcurator.query import sensitivity
from statcurator.query.binding import BoundQuery
from statcurator.query.catalog import DictCatalog, TableInfo
from statcurator.query.certificate import certify
from statcurator.query.compiler import compile_query
from statcurator.query.recheck import recheck
from statcurator.query.sql import parse_sql

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "engines"))
from test_parity import QUERIES, UNITS, catalog  # noqa: E402

CORPUS = TESTS / "data" / "sql_corpus"
with open(CORPUS / "queries.toml", "rb") as f:
    CORPUS_SQL = [q["sql"] for q in tomllib.load(f)["query"] if q["expect"] == "answer"]
LOSSES = {"epsilon": {"epsilon": 1, "delta": Fraction(1, 10**6)}, "rho": {"rho": Fraction(1, 2)}}


def bounded(cat: DictCatalog) -> DictCatalog:
    info = cat.tables["people"]
    cat.tables["people"] = dataclasses.replace(info, meta=info.meta.replace(neighbours="bounded"))
    return cat


def pums_catalog() -> DictCatalog:
    meta = load_metadata(CORPUS / "pums.toml")
    import pyarrow.csv as pcsv

    data = pcsv.read_csv(CORPUS / "pums.csv")
    return DictCatalog({"pums": TableInfo.from_schema("pums", meta, data.schema)})


def bound_or_none(sql: str, cat: DictCatalog, loss: str) -> BoundQuery | None:
    try:
        return BoundQuery(compile_query(parse_sql(sql, cat), cat), **LOSSES[loss])
    except Exception:  # a query this loss cannot run (e.g. partition selection under ρ)
        return None


def check(bq: BoundQuery, cat: DictCatalog, table: str, exact_for_laplace: bool) -> None:
    cert = certify(bq, cat.table_info(table).meta, cat)
    json.dumps(cert)  # machine-readable as it is
    derived = cert["recheck"]
    assert derived["passed"], derived
    cost = cert["cost"]
    for key in ("epsilon", "delta", "rho"):
        assert Fraction(derived[key]) <= Fraction(cost.get(key) or 0)
    if exact_for_laplace and "epsilon" in cost:
        # Laplace shares: ε′ = Δ′/b = the share, exactly, when both analyses agree on Δ;
        # the only slack is a clamp narrower than the declared bounds (grid rounding)
        assert Fraction(derived["epsilon"]) >= Fraction(cost["epsilon"]) * Fraction(999, 1000)


@pytest.mark.parametrize("loss", sorted(LOSSES))
@pytest.mark.parametrize("neighbours", ["unbounded", "bounded"])
@pytest.mark.parametrize("unit", sorted(UNITS))
def test_recheck_agrees_on_the_parity_queries(unit, neighbours, loss):
    cat = catalog(unit)
    if neighbours == "bounded":
        cat = bounded(cat)
    checked = 0
    for sql in QUERIES:
        bq = bound_or_none(sql, cat, loss)
        if bq is None:
            continue
        check(bq, cat, "people", exact_for_laplace=True)
        checked += 1
    assert checked >= len(QUERIES) - 6


@pytest.mark.parametrize("loss", sorted(LOSSES))
def test_recheck_agrees_on_the_sql_corpus(loss):
    cat = pums_catalog()
    checked = 0
    for sql in CORPUS_SQL:
        bq = bound_or_none(sql, cat, loss)
        if bq is not None:
            check(bq, cat, "pums", exact_for_laplace=True)
            checked += 1
    assert checked >= len(CORPUS_SQL) * 3 // 4


# -- mutants: a compiler that under-charges is refused ------------------------------------------

def _half(original):
    return lambda self, *a: original(self, *a) / 2


# (a halved sensitivity of 1 is no mutant for an integer count: the discrete mechanism rounds
# an integer sensitivity up, so those are taken where a unit has 3 rows or groups)
@pytest.mark.parametrize("method, sql, unit", [
    ("linear", "SELECT SUM(age) FROM people", "row"),
    ("linear", "SELECT SUM(age) FROM people", "person"),
    ("linear", "SELECT sex, AVG(income) FROM people GROUP BY sex", "row"),
    ("linear", "SELECT sex, AVG(income) FROM people GROUP BY sex", "person3"),
    ("linear", "SELECT CORR(income, age) FROM people", "row"),
    ("linear", "SELECT COUNT(*) FROM people", "person3"),
    ("quantile", "SELECT MEDIAN(age) FROM people", "row"),
    ("quantile", "SELECT sex, MEDIAN(age) FROM people GROUP BY sex", "person"),
    ("distinct_values", "SELECT COUNT(DISTINCT city) FROM people", "person3"),
    ("distinct_units", "SELECT sex, COUNT(DISTINCT pid) FROM people GROUP BY sex", "person3"),
])
def test_a_compiler_with_a_halved_sensitivity_is_refused(monkeypatch, method, sql, unit):
    cat = catalog(unit)
    monkeypatch.setattr(sensitivity.Neighbourhood, method,
                        _half(getattr(sensitivity.Neighbourhood, method)))
    bq = BoundQuery(compile_query(parse_sql(sql, cat), cat), 1)
    with pytest.raises(PrivacyAccountingError, match="re-check"):
        certify(bq, cat.table_info("people").meta, cat)


def test_a_compiler_that_forgets_a_partition_is_refused(monkeypatch):
    cat = catalog("person")
    monkeypatch.setattr(sensitivity.Neighbourhood, "partitions", lambda self: 1)
    sql = "SELECT city, COUNT(*) FROM people GROUP BY city"
    cat.tables["people"] = dataclasses.replace(
        cat.tables["people"], meta=cat.tables["people"].meta.replace(
            privacy_unit=PrivacyUnit("pid", max_rows=3, max_groups=3)))
    bq = BoundQuery(compile_query(parse_sql(sql, cat), cat), 1, Fraction(1, 10**6))
    with pytest.raises(PrivacyAccountingError, match="re-check"):
        certify(bq, cat.table_info("people").meta, cat)


def test_a_join_whose_stability_was_ignored_is_refused(monkeypatch):
    cat = catalog("row")
    bq = BoundQuery(compile_query(parse_sql(
        "SELECT COUNT(*) FROM people p JOIN dups d ON p.city = d.city", cat), cat), 1)
    assert certify(bq, cat.table_info("people").meta, cat)["recheck"]["passed"]
    # the same query compiled as if the public table's keys were unique
    monkeypatch.setattr(TableInfo, "max_multiplicity", lambda self, *a, **k: 1)
    lying = BoundQuery(compile_query(parse_sql(
        "SELECT COUNT(*) FROM people p JOIN dups d ON p.city = d.city", cat), cat), 1)
    monkeypatch.undo()
    with pytest.raises(PrivacyAccountingError, match="re-check derives 2"):
        certify(lying, cat.table_info("people").meta, cat)


# -- through the curator ------------------------------------------------------------------------

META = TableMeta("t", (Column("age", type="integer", bounds=(0, 100)),
                       Column("sex", categories=("F", "M"))))


@pytest.fixture
def cur():
    c = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    c.register("t", pa.table({"age": [30, 40, 50], "sex": ["F", "M", "F"]}), META)
    c.set_dataset_budget("t", epsilon=10)
    c.set_budget("ana", "t", epsilon=10)
    yield c
    c.close()


def test_every_release_carries_its_certificate_with_the_ledger_entry(cur):
    rel = cur.sql("SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM t GROUP BY sex").release(
        1, analyst="ana")
    cert = rel.provenance["certificate"]
    assert cert["recheck"]["passed"] and cert["cost"] == {"epsilon": "1"}
    assert cert["ledger"]["seq"] >= 1 and cert["ledger"]["analyst"] == "ana"
    assert {m["mechanism"] for m in cert["measurements"]} <= {"laplace", "laplace (grid)"}
    assert recheck(cert).epsilon == 1  # anyone can re-derive it from the JSON alone
    again = type(rel).from_json(rel.to_json())
    assert again.provenance["certificate"] == json.loads(json.dumps(cert))


def test_a_refused_recheck_charges_nothing(cur, monkeypatch):
    monkeypatch.setattr(sensitivity.Neighbourhood, "linear",
                        _half(sensitivity.Neighbourhood.linear))
    with pytest.raises(PrivacyAccountingError):
        cur.sql("SELECT SUM(age) FROM t").release(1, analyst="ana")
    assert cur.budget("ana", "t").spent.epsilon == 0


def test_the_recheck_is_independent_of_the_compiler():
    """The re-check imports nothing of the compiler's sensitivity analysis."""
    import ast

    import statcurator.query.recheck as mod

    tree = ast.parse(Path(mod.__file__).read_text())
    imported = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not any(x in m for m in imported
                   for x in ("sensitivity", "compiler", "aggregates", "binding", "rewrite"))


def test_a_zcdp_query_of_quantiles_alone_is_charged_in_rho():
    """Found by the re-check: a ρ query whose only measurements are exponential-mechanism
    quantiles composed their ε first and was refused ((Σε)²/2 > ρ); each quantile is now
    ε_i²/2-zCDP before the zCDP composition."""
    c = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    c.register("t", pa.table({"age": [30, 40, 50], "sex": ["F", "M", "F"]}), META)
    c.set_dataset_budget("t", rho=1)
    c.set_budget("ana", "t", rho=1)
    rel = c.sql("SELECT MEDIAN(age) AS m, QUANTILE(age, 0.9) AS q FROM t").release(
        rho=Fraction(1, 2), analyst="ana")
    spent = c.budget("ana", "t").spent
    assert Fraction(1, 2) * Fraction(999, 1000) <= spent.rho <= Fraction(1, 2)
    assert rel.provenance["certificate"]["recheck"]["passed"]
    c.close()


def test_estimator_releases_carry_a_certificate_too():
    """Kerckhoffs for the estimators: the estimator and its parameters, the mechanism, the
    declared metadata it used, the cost and the ledger entry (no second analysis: each
    estimator states its own privacy map)."""
    import statcurator as sc

    c = Curator(default_budget=None, dataset_budget=None)
    c.register("adult", sc.datasets.adult())
    c.set_dataset_budget("adult", epsilon=10, delta=Fraction(1, 1000))
    c.set_budget("bob", "adult", epsilon=10, delta=Fraction(1, 1000))
    est = c.estimate("adult", sc.estimators.Median("age"), epsilon=Fraction(1, 2),
                     analyst="bob", request_id="m1")
    cert = est.details["certificate"]
    assert cert["kind"] == "estimator" and cert["cost"] == {"epsilon": "1/2"}
    assert cert["columns"]["age"]["bounds"] == ["0", "120"]
    assert cert["ledger"]["request_id"] == "m1" and cert["ledger"]["analyst"] == "bob"
    json.dumps(cert)
    again = c.estimate("adult", sc.estimators.Median("age"), epsilon=Fraction(1, 2),
                       analyst="bob", request_id="m1")
    assert again.replayed and again.details["certificate"] == cert
    model = c.estimate(  # a fitted model takes it as an attribute
        "adult", sc.synth.MST(columns=["sex", "race"], iters=20), epsilon=1,
        delta=Fraction(1, 10**6), analyst="bob")
    assert model.certificate_["kind"] == "estimator"
