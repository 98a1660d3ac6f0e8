"""The SQL that analysts write (issue 14): key-only GROUP BY and SELECT DISTINCT, LIMIT / TOP /
FETCH / OFFSET after ORDER BY, the VAR/STD/STDEV spellings, functions of released values,
two-argument aggregates, constants of another type, schema-qualified names. Each is either a
plan the compiler already proves private, or post-processing of a release: the tests check
the plan, the released table, and the refusals that remain."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from statcurator.core.errors import UnsupportedQueryError
from statcurator.core.schema import Column, TableMeta
from statcurator.curator import Curator
from statcurator.query.compiler import compile_query
from statcurator.query.expr import Agg, Col, Compare, Func, InList, KeyRef, Lit
from statcurator.query.plan import GroupKey
from statcurator.query.postprocess import apply_function, function_interval
from statcurator.query.sql import parse_sql

P = "people"


def c(name: str) -> Col:
    return Col(name, P)


# -- plans ------------------------------------------------------------------------------------

def test_group_by_without_an_aggregate_lists_the_keys(cat):
    plan = parse_sql("SELECT sex FROM people GROUP BY sex", cat)
    assert plan.group_by == (GroupKey("sex", c("sex")),)
    assert [o.expr for o in plan.outputs] == [KeyRef("sex")]
    assert plan.aggregates() == ()


def test_select_distinct_is_the_group_by_of_its_columns(cat):
    a = parse_sql("SELECT DISTINCT sex, smoker FROM people", cat)
    b = parse_sql("SELECT sex, smoker FROM people GROUP BY sex, smoker", cat)
    assert (a.group_by, a.outputs) == (b.group_by, b.outputs)
    assert any("DISTINCT" in n for n in a.notes)


@pytest.mark.parametrize("sql, limit, offset", [
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC LIMIT 1", 1, 0),
    ("SELECT TOP 1 sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC", 1, 0),
    ("SELECT TOP (2) sex, COUNT(*) AS n FROM [people] GROUP BY sex", 2, 0),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n LIMIT 1 OFFSET 1", 1, 1),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n "
     "FETCH FIRST 1 ROWS ONLY", 1, 0),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n OFFSET 1", None, 1),
])
def test_limit_top_fetch_and_offset(cat, sql, limit, offset):
    plan = parse_sql(sql, cat)
    assert (plan.limit, plan.offset) == (limit, offset)


@pytest.mark.parametrize("sql, func", [
    ("SELECT VAR(age) FROM people", "var_samp"),
    ("SELECT VARP(age) FROM people", "var_pop"),
    ("SELECT STDEV(age) FROM people", "stddev_samp"),
    ("SELECT STDEVP(age) FROM people", "stddev_pop"),
    ("SELECT STD(age) FROM people", "stddev_pop"),  # MySQL's STD is the population one
    ("SELECT IQR(age) FROM people", "iqr"),
    ("SELECT SUM(DISTINCT age) FROM people", "sum_distinct"),
])
def test_aggregate_spellings(cat, sql, func):
    assert parse_sql(sql, cat).outputs[0].expr == Agg(func, c("age"))


@pytest.mark.parametrize("sql, func", [("CORR", "corr"), ("REGR_SLOPE", "regr_slope"),
                                       ("REGR_INTERCEPT", "regr_intercept")])
def test_two_argument_aggregates(cat, sql, func):
    plan = parse_sql(f"SELECT {sql}(income, age) FROM people", cat)
    assert plan.outputs[0].expr == Agg(func, c("income"), arg2=c("age"))
    assert plan.outputs[0].name == f"{func}_income_age"


@pytest.mark.parametrize("sql, expr", [
    ("SELECT POWER(STDDEV(age), 2) FROM people",
     Func("power", (Agg("stddev_samp", c("age")), Lit(2)))),
    ("SELECT SQRT(VARIANCE(age)) FROM people", Func("sqrt", (Agg("var_samp", c("age")),))),
    ("SELECT ABS(SUM(income) - 1) FROM people", None),
    ("SELECT ROUND(AVG(age), 1) FROM people", Func("round", (Agg("avg", c("age")), Lit(1)))),
    ("SELECT LOG(SUM(age)) FROM people", Func("log10", (Agg("sum", c("age")),))),
    ("SELECT LN(COUNT(*)), EXP(AVG(age) / 100), FLOOR(AVG(age)), CEIL(AVG(age)) FROM people",
     None),
])
def test_functions_of_released_values(cat, sql, expr):
    plan = parse_sql(sql, cat)
    assert all(isinstance(o.expr, Func) for o in plan.outputs)
    if expr is not None:
        assert plan.outputs[0].expr == expr


def test_constants_are_coerced_to_the_column_type_and_the_coercion_is_stated(cat):
    plan = parse_sql("SELECT COUNT(*) FROM people WHERE age = '30' AND smoker = 1 "
                     "AND age IN ('1', 2) AND income BETWEEN '0' AND 10.5", cat)
    pred = plan.relation.predicate  # type: ignore[attr-defined]
    assert Compare("=", c("age"), Lit(30)) in pred.terms
    assert Compare("=", c("smoker"), Lit(True)) in pred.terms
    assert InList(c("age"), (Lit(1), Lit(2))) in pred.terms
    assert len(plan.notes) == 4 and "'30'" in plan.notes[0] and "30" in plan.notes[0]


def test_schema_qualified_names_and_aliases(cat):
    a = parse_sql("SELECT COUNT(*) FROM census.people AS p WHERE p.age > 3", cat)
    b = parse_sql("SELECT COUNT(*) FROM people AS p WHERE p.age > 3", cat)
    assert a == b


REFUSALS = [
    ("SELECT COUNT(*) FROM people LIMIT age", "LIMIT must be"),
    ("SELECT COUNT(*) FROM people LIMIT 2.5", "LIMIT must be"),
    ("SELECT COUNT(*) FROM people FETCH FIRST 10 PERCENT ROWS ONLY", "PERCENT"),
    ("SELECT DISTINCT sex, COUNT(*) FROM people GROUP BY sex", "DISTINCT with aggregates"),
    ("SELECT DISTINCT ON (sex) sex FROM people", "DISTINCT ON"),
    ("SELECT COUNT(*) FROM people WHERE sex = 8", "cannot compare"),  # '8' vs '08': refused
    ("SELECT COUNT(*) FROM people WHERE age = 'thirty'", "cannot compare"),
    ("SELECT LOG(2, SUM(age)) FROM people", "base"),
    ("SELECT POWER(SUM(age), COUNT(*)) FROM people", "exponent"),
    ("SELECT COVAR_POP(age, income) FROM people", "aggregate"),
    ("SELECT AVG(DISTINCT age) FROM people", "DISTINCT inside"),
    ("SELECT CORR(age) FROM people", "parse"),
    ("SELECT COUNT(*) FROM census.nowhere", "no registered table"),
    ("SELECT SQRT(age), COUNT(*) FROM people GROUP BY age", "SQRT"),
]


@pytest.mark.parametrize("sql, needle", REFUSALS)
def test_what_is_still_refused_is_refused_by_name(cat, sql, needle):
    with pytest.raises(UnsupportedQueryError) as info:  # at parse, or at compile
        compile_query(parse_sql(sql, cat), cat)
    assert needle.lower() in str(info.value).lower()
    assert info.value.remedy


# -- functions and their intervals -------------------------------------------------------------

def test_functions_are_null_where_undefined():
    assert apply_function("sqrt", [-4.0]) is None
    assert apply_function("ln", [0.0]) is None
    assert apply_function("power", [1e300, 2.0]) is None
    assert apply_function("round", [2.345, 1.0]) == pytest.approx(2.3)


@pytest.mark.parametrize("name, extra", [("abs", []), ("sqrt", []), ("power", [2]),
                                         ("power", [3]), ("power", [0.5]), ("exp", []),
                                         ("ln", []), ("log10", []), ("round", []),
                                         ("floor", []), ("ceil", []), ("round", [1])])
def test_function_intervals_contain_the_image(name, extra):
    """Every value of the interval maps inside the function's interval (monotone pieces)."""
    rng = np.random.default_rng(7)
    for _ in range(200):
        lo, hi = sorted(rng.uniform(-5, 5, 2))
        parts = [(Fraction(lo), Fraction(hi))] + [(Fraction(k), Fraction(k)) for k in extra]
        iv = function_interval(name, parts)
        for x in np.linspace(lo, hi, 41):
            y = apply_function(name, [float(x)] + [float(k) for k in extra])
            if y is None:
                continue
            if iv is None:  # only where the image is unbounded: a logarithm near 0
                assert name in ("ln", "log10") and lo <= 0, (name, lo, hi)
                break
            assert float(iv[0]) - 1e-9 <= y <= float(iv[1]) + 1e-9, (name, lo, hi, x, y, iv)


# -- releases ----------------------------------------------------------------------------------

META = TableMeta("people", (
    Column("age", type="integer", bounds=(0, 100)),
    Column("income", type="real", bounds=(0, 100000)),
    Column("sex", categories=("F", "M", "X")),
    Column("city"),
))


@pytest.fixture(scope="module")
def curator():
    rng = np.random.default_rng(3)
    n = 4000
    age = rng.integers(18, 90, n)
    data = pa.table({"age": age, "income": np.clip(age * 800 + rng.normal(0, 5000, n), 0, 1e5),
                     "sex": rng.choice(["F", "M"], n, p=[0.7, 0.3]),
                     "city": rng.choice(["a", "b", "c"], n)})
    cur = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    cur.register("people", data, META)
    cur.set_dataset_budget("people", epsilon=1000, delta=Fraction(1, 1000))
    cur.set_budget("ana", "people", epsilon=1000, delta=Fraction(1, 1000))
    yield cur
    cur.close()


def release(cur, sql, eps=1, delta=None):
    return cur.sql(sql).release(eps, delta, analyst="ana")


def test_key_only_group_by_over_declared_categories_reads_nothing_and_costs_nothing(curator):
    before = curator.ledger.status("ana", "people").remaining
    rel = release(curator, "SELECT DISTINCT sex FROM people")
    assert sorted(r["sex"] for r in rel.rows()) == ["F", "M", "X"]  # the declared key set
    assert curator.ledger.status("ana", "people").remaining == before


def test_key_only_group_by_without_a_key_set_uses_partition_selection(curator):
    rel = release(curator, "SELECT city FROM people GROUP BY city", 1, Fraction(1, 10**6))
    assert sorted(r["city"] for r in rel.rows()) == ["a", "b", "c"]  # ~1300 rows each
    assert rel.epsilon_spent == 1


def test_limit_keeps_the_top_released_groups_and_charges_the_whole_query(curator):
    rel = release(curator, "SELECT TOP 1 sex, COUNT(*) AS n FROM people GROUP BY sex "
                           "ORDER BY n DESC")
    assert [r["sex"] for r in rel.rows()] == ["F"]  # 2800 against 1200 at ε = 1
    assert rel.epsilon_spent == 1
    rel = release(curator, "SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n DESC "
                           "LIMIT 2 OFFSET 1")
    assert [r["sex"] for r in rel.rows()] == ["M", "X"]


def test_power_of_a_released_stddev_is_the_square_of_the_same_draw(curator):
    rel = release(curator, "SELECT STDDEV(age) AS s, POWER(STDDEV(age), 2) AS v, "
                           "SQRT(VARIANCE(age)) AS r FROM people")
    row = rel.rows()[0]
    assert row["v"] == pytest.approx(row["s"] ** 2)
    assert row["v_low"] <= row["v"] <= row["v_high"]
    assert row["r"] == pytest.approx(math.sqrt(
        release(curator, "SELECT VARIANCE(age) AS v FROM people").rows()[0]["v"]), rel=0.2)


def test_regression_aggregates_are_close_on_a_linear_relation(curator):
    rel = release(curator, "SELECT REGR_SLOPE(income, age) AS b, REGR_INTERCEPT(income, age) "
                           "AS a, CORR(income, age) AS r FROM people", 10)
    row = rel.rows()[0]
    assert row["b"] == pytest.approx(800, rel=0.1)
    assert -1 <= row["r"] <= 1 and row["r"] > 0.9
    assert row["b_low"] <= row["b"] <= row["b_high"]


def test_coercion_is_stated_in_the_explanation(curator):
    q = curator.sql("SELECT COUNT(*) FROM people WHERE age = '30'")
    assert "read as 30" in q.explain()
    assert release(curator, "SELECT COUNT(*) AS n FROM people WHERE age = '30'").rows()[0]["n"] \
        == pytest.approx(release(curator, "SELECT COUNT(*) AS n FROM people WHERE age = 30")
                         .rows()[0]["n"], abs=40)  # ε = 1 each: |noise| < 20 w.p. 1 - 4e-9


def _first_two_cities(engine: str) -> list[list[str]]:
    """``LIMIT 2`` without ORDER BY on one table in two row orders (c, a, b and b, a, c)."""
    data = pa.table({"age": [30, 40, 50] * 500, "income": [1.0] * 1500,
                     "sex": ["M", "F", "M"] * 500, "city": ["c", "a", "b"] * 500})
    listed = []
    for table in (data, data.take(list(range(len(data)))[::-1])):
        cur = Curator(engine=engine, default_budget=None, dataset_budget=None)
        cur.register("people", table, META)
        cur.set_dataset_budget("people", epsilon=100, delta=Fraction(1, 1000))
        cur.set_budget("ana", "people", epsilon=100, delta=Fraction(1, 1000))
        rel = cur.sql("SELECT city, COUNT(*) AS n FROM people GROUP BY city LIMIT 2").release(
            10, Fraction(1, 10**6), analyst="ana")
        listed.append([r["city"] for r in rel.rows()])
        cur.close()
    return listed


@pytest.mark.parametrize("engine", ["memory", "duckdb"])
def test_limit_without_order_by_never_follows_the_data_order(engine):
    """The attack: if LIMIT 1 kept the first group the engine met, the released key would tell
    which key the table's first row holds. Keys are listed in a canonical order (declared
    categories' order, else sorted), so the same table in two row orders lists the same keys
    in the same order."""
    assert _first_two_cities(engine) == [["a", "b"], ["a", "b"]]


def test_control_listing_keys_in_the_engines_order_reveals_the_first_row(monkeypatch):
    """The same attack against a curator that lists selected keys as the engine met them
    (the reference engine meets them in row order): the first released key is the first
    row's."""
    from statcurator.query.binding import BoundQuery

    monkeypatch.setattr(BoundQuery, "_candidate_keys", lambda self, ex: list(ex.groups))
    assert _first_two_cities("memory") == [["c", "a"], ["b", "a"]]
