"""The query layer around one Measurement (issue 14): the cost charged is the map of the
query's core Measurement, built by chaining each measure's stability into its mechanism; the
release runs that Measurement's function; a release whose cost would differ from the one
asked for refuses to run; Gaussian (zCDP) queries; the key set of a GROUP BY without
aggregates; COUNT(DISTINCT x) of any column."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from statcurator.core.errors import PrivacyAccountingError, UnsupportedQueryError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP
from statcurator.core.relations import AddRemove, ChangeOne, PersonLevel
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.curator import Curator
from statcurator.query.aggregates import REGISTRY, MeasureRole
from statcurator.query.binding import BoundQuery
from statcurator.query.catalog import DictCatalog, TableInfo
from statcurator.query.compiler import compile_query
from statcurator.query.sql import parse_sql

META = TableMeta("t", (Column("pid", type="integer"), Column("age", type="integer",
                                                              bounds=(0, 100)),
                       Column("sex", categories=("F", "M")), Column("city")))
ROWS = pa.table({"pid": [1, 2, 3, 4, 5, 6], "age": [20, 30, 40, 50, 60, 70],
                 "sex": ["F", "M", "F", "M", "F", "M"], "city": list("aabbcd")})


def bound(sql, meta=META, **kw):
    cat = DictCatalog({"t": TableInfo.from_meta(meta)})
    return BoundQuery(compile_query(parse_sql(sql, cat), cat, text=sql), **kw)


GENEROUS = ApproxDP(100, Fraction(1, 10**3))


def curator(budget=GENEROUS, meta=META):
    cur = Curator()
    cur.register("t", ROWS, meta, budget=budget)
    cur.set_budget("eve", "t", budget)
    return cur


# -- one Measurement per query -----------------------------------------------------------------

@pytest.mark.parametrize("sql", [
    "SELECT COUNT(*) FROM t",
    "SELECT sex, COUNT(*), SUM(age), AVG(age), VARIANCE(age), MEDIAN(age) FROM t GROUP BY sex",
    "SELECT city, COUNT(*) FROM t GROUP BY city",
])
def test_the_cost_is_the_map_of_one_measurement(sql):
    b = bound(sql, epsilon=Fraction(3, 2), delta=Fraction(1, 10**6))
    assert b.measurement.cost == b.cost == b.privacy_map(1)
    assert b.measurement.input_space == AddRemove()
    asked = ApproxDP(Fraction(3, 2), Fraction(1, 10**6)) if b.compiled.needs_delta \
        else PureDP(Fraction(3, 2))
    assert b.cost == asked == b.check_cost()
    # group privacy comes from the composed maps, never from a hand-written sum
    if not b.compiled.needs_delta:
        assert b.privacy_map(3) == PureDP(Fraction(9, 2))
    # the release runs the Measurement's own function
    assert b.measurement.function == b.noise


def test_the_input_space_is_the_declared_relation():
    bounded = META.replace(neighbours="bounded")
    persons = META.replace(privacy_unit=PrivacyUnit("pid", max_rows=2))
    assert bound("SELECT COUNT(*) FROM t", bounded, epsilon=1).measurement.input_space == \
        ChangeOne()
    assert bound("SELECT COUNT(*) FROM t", persons, epsilon=1).measurement.input_space == \
        PersonLevel("pid", max_rows=2)


def test_a_release_whose_cost_differs_from_the_asked_refuses_to_run(monkeypatch):
    """A defect that made a mechanism cheaper than its share (the mutant halves one map)
    is caught before the ledger is touched."""
    from statcurator.mechanisms import LaplaceMechanism

    cur = curator()
    before = cur.ledger.counts()
    original = LaplaceMechanism.privacy_map
    monkeypatch.setattr(LaplaceMechanism, "privacy_map",
                        lambda self, d: PureDP(original(self, d).epsilon / 2))
    with pytest.raises(PrivacyAccountingError):
        cur.sql("SELECT COUNT(*) FROM t").release(epsilon=1, analyst="eve")
    assert cur.ledger.counts() == before
    monkeypatch.undo()
    rel = cur.sql("SELECT COUNT(*) FROM t").release(epsilon=1, analyst="eve")
    assert rel.cost == PureDP(1)


def test_every_aggregate_has_one_class():
    assert set(REGISTRY) >= {"count", "count_distinct", "sum", "avg", "var_samp", "var_pop",
                             "stddev_samp", "stddev_pop", "quantile"}
    assert {cls.kind for cls in REGISTRY.values()} == {
        "count", "count distinct", "sum", "sum distinct", "avg", "variance", "quantile",
        "interquartile range", "regression"}


# -- Gaussian noise and zCDP in SQL -----------------------------------------------------------

def test_rho_gives_gaussian_noise_and_a_zcdp_cost():
    b = bound("SELECT sex, COUNT(*), SUM(age), MEDIAN(age) FROM t GROUP BY sex",
              rho=Fraction(1, 2))
    assert [i.mechanism.split(" ")[0] for i in b.infos] == ["gaussian", "gaussian"] + [
        "exponential"] * 3  # the median's point and the two ends of its interval
    assert isinstance(b.cost, ZCDP) and b.cost.fits(ZCDP(Fraction(1, 2)))
    assert b.check_cost() == b.cost


def test_bounded_histograms_use_their_l2_sensitivity():
    # change one row: two groups move by 1 each, L1 = 2 but L2 = √2
    b = bound("SELECT sex, COUNT(*) FROM t GROUP BY sex", META.replace(neighbours="bounded"),
              rho=1)
    m = b.measures[0]
    assert m.sensitivity == 2 and 1.414 < float(m.l2) < 1.4143
    assert b.mechanisms[0].sensitivity == m.l2


def test_rho_is_charged_to_a_zcdp_budget_or_converted_at_a_stated_delta():
    cur = curator(budget=ZCDP(2))
    rel = cur.sql("SELECT COUNT(*) AS n FROM t").release(rho=Fraction(1, 2), analyst="eve")
    assert rel.cost == ZCDP(Fraction(1, 2))
    assert cur.budget("eve", "t").remaining == ZCDP(Fraction(3, 2))
    approx = curator()  # an (ε, δ) budget: the zCDP cost converts at the δ the caller states
    q = approx.sql("SELECT COUNT(*) AS n FROM t")
    cost = q.cost(rho=Fraction(1, 8), delta=Fraction(1, 10**6))
    assert cost == ZCDP(Fraction(1, 8)).to_approx(Fraction(1, 10**6))
    q.release(rho=Fraction(1, 8), delta=Fraction(1, 10**6), analyst="eve")
    assert approx.budget("eve", "t").spent == cost


def test_partition_selection_has_no_zcdp_form():
    with pytest.raises(UnsupportedQueryError, match="no zCDP form"):
        bound("SELECT city, COUNT(*) FROM t GROUP BY city", rho=1)


# -- the key set of a GROUP BY without aggregates ----------------------------------------------

def keys_only(cur, column):
    """``SELECT column FROM t GROUP BY column`` as a plan (the SQL front end parses it too)."""
    from statcurator.curator import Query
    from statcurator.query.expr import Col, KeyRef
    from statcurator.query.plan import GroupKey, Output, QueryPlan, Scan

    plan = QueryPlan(Scan("t", "t"), group_by=(GroupKey(column, Col(column, "t")),),
                     outputs=(Output(column, KeyRef(column)),))
    return Query(cur, plan)


def test_public_keys_alone_cost_nothing_and_read_no_data():
    cur = curator()
    before = cur.ledger.counts()
    q = keys_only(cur, "sex")
    assert q.cost(epsilon=1) == PureDP(0)
    rel = q.release(epsilon=1, analyst="eve")
    assert sorted(rel["sex"]) == ["F", "M"] and cur.ledger.counts() == before


def test_private_keys_alone_are_released_by_partition_selection():
    cur = curator()
    q = keys_only(cur, "city")
    b = q.bind(1, Fraction(1, 10**6))
    assert [m.role for m in b.measures] == [MeasureRole.SELECTION]
    # at most two people per city: a city survives with probability below e·δ, so δ = 1e-10
    # keeps the false-failure rate of this test below 1.1e-9
    rel = q.release(epsilon=1, delta=Fraction(1, 10**10), analyst="eve")
    assert rel.columns == ["city"] and len(rel) == 0


# -- COUNT(DISTINCT x) of any column -----------------------------------------------------------

def test_count_distinct_of_a_column_moves_by_at_most_its_sensitivity():
    cur = curator()
    q = cur.sql("SELECT COUNT(DISTINCT city) AS c FROM t")
    assert q.compile().measures[0].sensitivity == 1
    exact = cur.engine.execute(q.compile().engine_plan, salt="0").groups[()][0]
    assert exact == 4
    rel = q.release(epsilon=5, analyst="eve")
    assert abs(rel["c"][0] - 4) < 10


def test_noise_is_exact_on_the_grid_for_gaussian_sums():
    b = bound("SELECT SUM(age) AS s FROM t", rho=Fraction(1, 2))
    from statcurator.query.relational import ExactResult

    draws = [a.point(b.compiled.atoms[0].agg, 0)
             for a in b.noise_many(ExactResult((), {(): (270,)}), 2000)]
    assert all(isinstance(v, int) for v in draws)
    assert abs(np.mean(draws) - 270) < 10 * b.infos[0].scale / np.sqrt(2000) + 1


# -- quantiles with value intervals; non-negative counts ---------------------------------------

def test_a_median_comes_with_a_value_interval_of_stated_coverage():
    """Coverage at α: over 300 releases at α = 0.1, the interval misses the empirical median
    at most ~0.1 of the time; the bound is checked with a binomial tail of 1e-6."""
    from scipy import stats

    from statcurator.query.relational import ExactResult

    b = bound("SELECT MEDIAN(age) AS m FROM t", epsilon=1)
    atom = b.compiled.atoms[0]
    ages = [20, 30, 40, 50, 60, 70] * 20  # 120 rows: the empirical median is 40
    hist = {}
    for a in ages:
        hist[a - 0] = hist.get(a, 0) + 1
    exact = ExactResult((), {(): ()}, ({(): hist},))
    misses = 0
    for ans in b.noise_many(exact, 300, alpha=0.1):
        lo, hi = ans.atom_interval(atom, 0, 0.1)
        misses += not (lo <= 40 <= hi)
        assert lo <= hi
    assert stats.binom.sf(misses - 1, 300, 0.1) > 1e-6, misses


def test_nonnegative_counts_are_clamped_post_processing():
    cur = curator()
    q = cur.sql("SELECT sex, COUNT(*) AS n FROM t WHERE age > 1000 GROUP BY sex")
    rel = q.release(epsilon=Fraction(1, 100), analyst="eve", nonnegative=True)
    assert all(r["n"] >= 0 and r["n_low"] >= 0 for r in rel.rows())
    assert "clamped at 0" in str(rel) and rel.cost == PureDP(Fraction(1, 100))


def test_a_mean_over_a_public_fixed_size_measures_only_the_sum():
    fixed = META.replace(neighbours="bounded", rows=6)
    b = bound("SELECT AVG(age) AS a FROM t", fixed, epsilon=1)
    assert [m.label for m in b.measures] == ["a: centred sum"]
    assert b.measures[0].sensitivity == 100  # a changed row moves the centred sum by ≤ U − L
    # not when n is not fixed: a filter, a grouping, add/remove neighbours
    for sql, meta in (("SELECT AVG(age) FROM t WHERE sex = 'F'", fixed),
                      ("SELECT sex, AVG(age) FROM t GROUP BY sex", fixed),
                      ("SELECT AVG(age) FROM t", META.replace(rows=6))):
        assert len(bound(sql, meta, epsilon=1).measures) == 2


def test_iqr_from_two_quartiles_with_an_interval():
    from statcurator.query.expr import Agg, Col
    from statcurator.query.plan import Output, QueryPlan, Scan
    from statcurator.query.relational import ExactResult

    cat = DictCatalog({"t": TableInfo.from_meta(META)})
    plan = QueryPlan(Scan("t", "t"), outputs=(Output("r", Agg("iqr", Col("age", "t"))),))
    b = BoundQuery(compile_query(plan, cat), epsilon=4)
    assert [m.p for m in b.measures] == [Fraction(1, 4)] * 3 + [Fraction(3, 4)] * 3
    assert b.cost == PureDP(4)
    ages = [20, 30, 40, 50, 60, 70] * 40  # Q1 = 30, Q3 = 60: IQR 30
    hist: dict[int, int] = {}
    for a in ages:
        hist[a] = hist.get(a, 0) + 1
    atom = b.compiled.atoms[0]
    misses = 0
    for ans in b.noise_many(ExactResult((), {(): ()}, ({(): hist},)), 200, alpha=0.1):
        lo, hi = ans.atom_interval(atom, 0, 0.1)
        misses += not lo <= 30 <= hi
    from scipy import stats

    # coverage ≥ 0.9: more misses than Binomial(200, 0.1) gives with probability 1e-6 fail
    assert stats.binom.sf(misses - 1, 200, 0.1) > 1e-6, misses
