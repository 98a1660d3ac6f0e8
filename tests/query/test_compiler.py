"""The compiler: rewrite rules, sensitivities from the plan, the ε split, key sets."""

from __future__ import annotations

from fractions import Fraction

import pytest

from statcurator.core.errors import UnsupportedQueryError
from statcurator.core.measures import ApproxDP, PureDP
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.query.analysis import Bounds
from statcurator.query.binding import BoundQuery
from statcurator.query.catalog import DictCatalog, TableInfo
from statcurator.query.compiler import compile_query
from statcurator.query.expr import Col
from statcurator.query.rewrite import GRID_SPAN_BITS
from statcurator.query.rewrite import clamp_to_grid as quantize
from statcurator.query.sql import parse_sql

from .conftest import catalog


def compiled(sql, cat):
    return compile_query(parse_sql(sql, cat), cat, text=sql)


def sens(cq):
    return {m.label: m.sensitivity for m in cq.measures}


# -- the textbook facts ------------------------------------------------------------------

def diabetes_catalog(neighbours="bounded"):
    meta = TableMeta("diabetes", (Column("Name"), Column("Gender", categories=("F", "M")),
                                  Column("Age", type="integer", bounds=(0, 120)),
                                  Column("Diabetes", categories=("Y", "N"))),
                     neighbours=neighbours)
    return DictCatalog({"diabetes": TableInfo.from_meta(meta)})


@pytest.mark.parametrize("neighbours", ["bounded", "unbounded"])
def test_diabetes_count_has_sensitivity_one(neighbours):
    # the textbook: D and D' differ in Chris's record; the count moves by at most 1
    cq = compiled("SELECT COUNT(*) AS n FROM diabetes WHERE Diabetes = 'Y'",
                  diabetes_catalog(neighbours))
    assert sens(cq) == {"n": 1}


def test_histogram_sensitivity_one_unbounded_two_bounded():
    sql = "SELECT Diabetes, COUNT(*) AS n FROM diabetes GROUP BY Diabetes"
    assert sens(compiled(sql, diabetes_catalog("unbounded"))) == {"n": 1}
    assert sens(compiled(sql, diabetes_catalog("bounded"))) == {"n": 2}


def test_clamped_sum_and_mean_sensitivities(cat, bounded_cat):
    s = sens(compiled("SELECT SUM(age) AS s, AVG(income) AS a FROM people", cat))
    assert s == {"s": 120, "a: count": 1, "a: centred sum": 100000}
    # bounded neighbours, one group: the contribution moves within [min(L,0), max(U,0)]
    b = sens(compiled("SELECT SUM(age) AS s, AVG(income) AS a FROM people", bounded_cat))
    assert b == {"s": 120, "a: count": 1, "a: centred sum": 200000}
    g = sens(compiled("SELECT sex, SUM(age) AS s FROM people GROUP BY sex", bounded_cat))
    assert g == {"s": 240}


def test_negative_bounds_widen_to_include_zero():
    meta = TableMeta("t", (Column("x", type="integer", bounds=(-5, 20)),))
    cat = DictCatalog({"t": TableInfo.from_meta(meta)})
    assert sens(compiled("SELECT SUM(x) AS s FROM t", cat)) == {"s": 20}
    bounded = DictCatalog({"t": TableInfo.from_meta(meta.replace(neighbours="bounded"))})
    assert sens(compiled("SELECT SUM(x) AS s FROM t", bounded)) == {"s": 25}


def test_variance_measures(cat):
    s = sens(compiled("SELECT VARIANCE(age) AS v FROM people", cat))
    assert s == {"v: count": 1, "v: centred sum": 60, "v: centred sum of squares": 3600}


def test_person_units_multiply_by_max_rows(person_cat):
    cq = compiled("SELECT sex, COUNT(*) AS n, SUM(age) AS s, COUNT(DISTINCT pid) AS u "
                  "FROM people GROUP BY sex", person_cat)
    assert sens(cq) == {"n": 3, "s": 360, "u": 2}  # u: min(max_groups, max_rows) groups
    b = cq.engine_plan.bounding
    assert (b.unit, b.max_rows, b.max_groups) == (Col("pid", "people"), 3, 2)


def test_count_distinct_of_any_column_is_bounded_by_the_contributions(cat, person_cat):
    # one row adds at most one distinct value; a person's m rows at most m (issue 14)
    assert sens(compiled("SELECT COUNT(DISTINCT city) AS c FROM people", cat)) == {"c": 1}
    assert sens(compiled("SELECT COUNT(DISTINCT pid) AS c FROM people", cat)) == {"c": 1}
    m = person_cat.table_info("people").meta.privacy_unit.max_rows
    assert sens(compiled("SELECT COUNT(DISTINCT city) AS c FROM people", person_cat)) == {"c": m}
    # the person id itself: a person is one unit in each of at most max_groups groups
    assert sens(compiled("SELECT COUNT(DISTINCT pid) AS c FROM people", person_cat)) == {"c": 1}


def test_join_stability_multiplies_row_sensitivity(cat):
    unique = compiled("SELECT r.region, COUNT(*) AS n FROM people p JOIN regions r "
                      "ON p.city = r.city GROUP BY r.region", cat)
    assert unique.stability == 1 and sens(unique) == {"n": 1}
    dup = compiled("SELECT COUNT(*) AS n, SUM(age) AS s FROM people p JOIN dups d "
                   "ON p.city = d.city", cat)
    assert dup.stability == 2 and sens(dup) == {"n": 2, "s": 240}


def test_bounding_absorbs_join_duplication_for_person_units(person_cat):
    cq = compiled("SELECT COUNT(*) AS n FROM people p JOIN dups d ON p.city = d.city", person_cat)
    assert sens(cq) == {"n": 3}


def test_quantile_sensitivity_in_scaled_scores(cat, bounded_cat):
    cq = compiled("SELECT MEDIAN(age) AS m, QUANTILE(age, 0.9) AS q FROM people", cat)
    # the point's scores are multiplied by 2·den(p): median 2·2·max(1/2, 1/2) = 2;
    # p=9/10: 2·10·9/10 = 18; the interval ends' by den(p)
    assert sens(cq) == {"m": 2, "m: lower end": 1, "m: upper end": 1,
                        "q": 18, "q: lower end": 9, "q: upper end": 9}
    b = compiled("SELECT MEDIAN(age) AS m FROM people", bounded_cat)
    assert sens(b) == {"m": 4, "m: lower end": 2, "m: upper end": 2}
    h = cq.atoms[0].histogram
    assert h.bins == 121 and h.per_point


def test_real_quantiles_use_public_bins(cat):
    cq = compiled("SELECT MEDIAN(income) FROM people", cat)
    h = cq.atoms[0].histogram
    assert h.bins == 1024 and not h.per_point
    lo, hi = h.bin_range(0)
    assert lo == 0 and hi == Fraction(200000, 1024)


def test_equal_split_and_weights(cat):
    cq = compiled("SELECT COUNT(*) AS n, AVG(age) AS a, MEDIAN(age) AS m FROM people", cat)
    # a median gives half its share to its point, a quarter to each end of its interval
    assert [m.weight for m in cq.measures] == [Fraction(1, 3), Fraction(1, 6), Fraction(1, 6),
                                               Fraction(1, 6), Fraction(1, 12), Fraction(1, 12)]
    b = BoundQuery(cq, Fraction(3, 2))
    assert b.cost == PureDP(Fraction(3, 2))
    assert [i.epsilon for i in b.infos] == [Fraction(1, 2), Fraction(1, 4), Fraction(1, 4),
                                            Fraction(1, 4), Fraction(1, 8), Fraction(1, 8)]
    w = BoundQuery(cq, 1, weights={"n": 2, "a": 1, "m": 1})
    assert [i.epsilon for i in w.infos] == [Fraction(1, 2), Fraction(1, 8), Fraction(1, 8),
                                            Fraction(1, 8), Fraction(1, 16), Fraction(1, 16)]
    assert w.cost == PureDP(1)


def test_cost_is_the_sum_of_the_mechanisms_costs(cat):
    cq = compiled("SELECT sex, COUNT(*), SUM(income), STDDEV(age) FROM people GROUP BY sex", cat)
    b = BoundQuery(cq, Fraction(7, 10))
    assert b.cost == sum((m.cost for m in b.mechanisms), PureDP(0)) == PureDP(Fraction(7, 10))
    assert b.privacy_map(1) == b.cost
    assert b.privacy_map(2) == PureDP(Fraction(7, 5))  # group privacy


def test_public_key_sets(cat):
    cq = compiled("SELECT sex, smoker, CASE WHEN age < 18 THEN 'minor' END AS m, "
                  "BIN(age, 0, 65, 120) AS b, COUNT(*) FROM people GROUP BY sex, smoker, m, b", cat)
    assert cq.key_sets == (("F", "M"), (False, True), ("minor", None), ("[0, 65)", "[65, 120]"))
    assert cq.public_keys and not cq.needs_delta
    assert cq.engine_plan.key_values == cq.key_sets


def test_keys_from_a_joined_public_table_are_public(cat):
    cq = compiled("SELECT r.region, COUNT(*) FROM people p JOIN regions r ON p.city = r.city "
                  "GROUP BY r.region", cat)
    assert cq.key_sets == (("north", "south"),)


def test_private_keys_need_partition_selection_and_delta(cat):
    cq = compiled("SELECT city, COUNT(*) AS n FROM people GROUP BY city", cat)
    assert cq.needs_delta and cq.selection is not None
    with pytest.raises(UnsupportedQueryError, match="partition selection, which needs δ"):
        BoundQuery(cq, 1)
    b = BoundQuery(cq, 1, Fraction(1, 10**6))
    assert b.cost == ApproxDP(1, Fraction(1, 10**6))
    assert [m.role for m in b.measures] == ["count", "selection"]


def test_too_many_public_keys_is_refused():
    meta = TableMeta("t", (Column("a", categories=tuple(range(2000))),
                           Column("b", categories=tuple(range(1000)))))
    cat = DictCatalog({"t": TableInfo.from_meta(meta)})
    with pytest.raises(UnsupportedQueryError, match="2000000 groups"):
        compiled("SELECT a, b, COUNT(*) FROM t GROUP BY a, b", cat)


@pytest.mark.parametrize("sql, needle", [
    ("SELECT SUM(city) FROM people", "needs a numeric argument"),
    ("SELECT SUM(pid) FROM people", "no declared bounds"),
    ("SELECT AVG(age / income) FROM people", "division by a non-constant"),
    ("SELECT COUNT(*) FROM people WHERE age = 'x'", "cannot compare"),
    ("SELECT COUNT(*) FROM people WHERE age + 1", "not a condition"),
    ("SELECT CASE WHEN age > 1 THEN 'a' ELSE 2 END AS k, COUNT(*) FROM people GROUP BY k", "mixes"),
])
def test_semantic_refusals(cat, sql, needle):
    with pytest.raises(UnsupportedQueryError, match=needle) as info:
        compiled(sql, cat)
    assert info.value.remedy


def test_missing_bounds_message_names_the_metadata_fix(cat):
    with pytest.raises(UnsupportedQueryError) as info:
        compiled("SELECT SUM(pid) FROM people", cat)
    assert "add bounds" in info.value.remedy and "[columns.pid]" in info.value.remedy


def test_bounds_by_interval_arithmetic(cat):
    cq = compiled("SELECT SUM(CASE WHEN sex = 'F' THEN age * 2 - 10 ELSE 0 END) AS s FROM people", cat)
    q = cq.atoms[0].quantized
    assert (q.lq * q.scale, q.uq * q.scale) == (-10, 230)
    assert sens(cq) == {"s": 230}


def test_grid_choice():
    q = quantize(Col("x"), Bounds(Fraction(0), Fraction(200000), False), "real")
    assert max(abs(q.lq), abs(q.uq)) <= 2**GRID_SPAN_BITS < 2 * max(abs(q.lq), abs(q.uq))
    i = quantize(Col("x"), Bounds(Fraction(0), Fraction(10**12), True), "integer")
    assert i.bits < 0 and i.uq <= 2**GRID_SPAN_BITS and not i.integral
    t = quantize(Col("x"), Bounds(Fraction(1, 10), Fraction(3, 10), False), "real")
    assert t.lq * t.scale >= Fraction(1, 10) and t.uq * t.scale <= Fraction(3, 10)


def test_explain_shows_rewrites(person_cat):
    cq = compiled("SELECT sex, AVG(income) AS a FROM people GROUP BY sex", person_cat)
    text = cq.explain()
    assert "at most 3 rows per pid" in text
    assert "restricted to its public key set" in text
    assert "clamp" in text and "sensitivity 300000" in text


def test_metadata_only_catalog_compiles(cat):
    meta = TableMeta("m", (Column("v", type="real", bounds=(0, 1)),), rows=1000)
    c = DictCatalog({"m": TableInfo.from_meta(meta)})
    cq = compiled("SELECT AVG(v) AS a FROM m", c)
    acc = BoundQuery(cq, 1).accuracy(0.05)
    assert acc[0]["at_rows"] == 1000 and 0 < acc[0]["halfwidth"] < 0.02


def test_privacy_unit_column_must_exist():
    meta = TableMeta("t", (Column("a", type="integer", bounds=(0, 1)), Column("pid")),
                     privacy_unit=PrivacyUnit("pid", max_rows=2))
    import pyarrow as pa
    info = TableInfo.from_schema("t", meta, pa.schema([("a", pa.int64())]))
    with pytest.raises(UnsupportedQueryError, match="missing from the data"):
        compiled("SELECT SUM(a) FROM t", DictCatalog({"t": info}))


def test_accuracy_of_counts_and_sums(cat):
    b = BoundQuery(compiled("SELECT COUNT(*) AS n, SUM(age) AS s, MEDIAN(age) AS m FROM people",
                            cat), 1)
    acc = {a["output"]: a for a in b.accuracy(0.05)}
    # ε/3 each: count scale 3, sum scale 360
    assert acc["n"]["halfwidth"] == b.mechanisms[0].accuracy(0.05)
    assert acc["s"]["halfwidth"] == pytest.approx(360 * 3.0, rel=0.01)
    assert acc["m"]["halfwidth"] is None and acc["m"]["rank_error"] > 0


def test_catalog_from_a_real_table_keeps_physical_kinds():
    cat = catalog(PEOPLE_MAYBE_FLOAT)
    cq = compiled("SELECT SUM(age) FROM people", cat)
    assert cq.atoms[0].quantized.integral


PEOPLE_MAYBE_FLOAT = TableMeta("people", (Column("age", type="integer", bounds=(0, 120)),))
