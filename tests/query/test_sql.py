"""The SQL front end and the builder: the supported subset, the refusals, and plan equality."""

from __future__ import annotations

from fractions import Fraction

import pytest

from statcurator.core.errors import UnsupportedQueryError
from statcurator.query import builder as B
from statcurator.query.builder import Frame, col, count, when, with_having, with_order
from statcurator.query.expr import (
    Agg,
    And,
    Arith,
    Between,
    Bin,
    Case,
    Col,
    Compare,
    InList,
    IsNull,
    KeyRef,
    Lit,
    Not,
    WidthBucket,
)
from statcurator.query.plan import Filter, GroupKey, Join, Output, Scan
from statcurator.query.sql import parse_sql

P = "people"


def c(name: str, table: str = P) -> Col:
    return Col(name, table)


def test_grouped_count_plan(cat):
    plan = parse_sql("SELECT sex, COUNT(*) AS n FROM people WHERE age >= 18 GROUP BY sex", cat)
    assert plan.relation == Filter(Scan(P, P), Compare(">=", c("age"), Lit(18)))
    assert plan.group_by == (GroupKey("sex", c("sex")),)
    assert plan.outputs == (Output("sex", KeyRef("sex")), Output("n", Agg("count")))
    assert plan.private_table == P


@pytest.mark.parametrize("sql, agg", [
    ("SELECT COUNT(*) FROM people", Agg("count")),
    ("SELECT COUNT(1) FROM people", Agg("count")),
    ("SELECT COUNT(city) FROM people", Agg("count", c("city"))),
    ("SELECT COUNT(DISTINCT pid) FROM people", Agg("count_distinct", c("pid"))),
    ("SELECT SUM(income) FROM people", Agg("sum", c("income"))),
    ("SELECT AVG(age) FROM people", Agg("avg", c("age"))),
    ("SELECT MEAN(age) FROM people", Agg("avg", c("age"))),
    ("SELECT VARIANCE(age) FROM people", Agg("var_samp", c("age"))),
    ("SELECT VAR_SAMP(age) FROM people", Agg("var_samp", c("age"))),
    ("SELECT VAR_POP(age) FROM people", Agg("var_pop", c("age"))),
    ("SELECT STDDEV(age) FROM people", Agg("stddev_samp", c("age"))),
    ("SELECT STDDEV_POP(age) FROM people", Agg("stddev_pop", c("age"))),
    ("SELECT MEDIAN(age) FROM people", Agg("quantile", c("age"), Fraction(1, 2))),
    ("SELECT MIN(age) FROM people", Agg("quantile", c("age"), Fraction(0))),
    ("SELECT MAX(age) FROM people", Agg("quantile", c("age"), Fraction(1))),
    ("SELECT QUANTILE(age, 0.25) FROM people", Agg("quantile", c("age"), Fraction(1, 4))),
    ("SELECT QUANTILE_CONT(age, 0.25) FROM people", Agg("quantile", c("age"), Fraction(1, 4))),
    ("SELECT PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY age) FROM people",
     Agg("quantile", c("age"), Fraction(9, 10))),
])
def test_aggregates(cat, sql, agg):
    assert parse_sql(sql, cat).outputs[0].expr == agg


def test_default_names_are_unique_and_readable(cat):
    plan = parse_sql("SELECT COUNT(*), SUM(age), SUM(age) + 1, MEDIAN(age), COUNT(*) FROM people", cat)
    assert [o.name for o in plan.outputs] == ["count", "sum_age", "col_3", "median_age", "count_2"]


def test_predicates(cat):
    plan = parse_sql(
        "SELECT COUNT(*) FROM people WHERE sex IN ('F') AND age NOT BETWEEN 10 AND 20 "
        "AND NOT (city = 'a' OR city IS NULL) AND income IS NOT NULL AND city NOT IN ('b', 'c')",
        cat)
    pred = plan.relation.predicate
    assert isinstance(pred, And)
    assert pred.terms[0] == InList(c("sex"), (Lit("F"),))
    assert pred.terms[1] == Between(c("age"), Lit(10), Lit(20), negated=True)
    assert isinstance(pred.terms[2], Not)
    assert pred.terms[3] == IsNull(c("income"), negated=True)
    assert pred.terms[4] == InList(c("city"), (Lit("b"), Lit("c")), negated=True)


def test_case_bins_and_arithmetic(cat):
    plan = parse_sql(
        "SELECT CASE WHEN age < 30 THEN 'young' ELSE 'old' END AS g, WIDTH_BUCKET(age, 0, 100, 10) AS w,"
        " BIN(income, 0, 50000, 200000) AS b, SUM(income / 1000) AS k, SUM(age) / COUNT(*) AS m "
        "FROM people GROUP BY g, w, b", cat)
    keys = {k.name: k.expr for k in plan.group_by}
    assert keys["g"] == Case(((Compare("<", c("age"), Lit(30)), Lit("young")),), Lit("old"))
    assert keys["w"] == WidthBucket(c("age"), 0, 100, 10)
    assert keys["b"] == Bin(c("income"), (0, 50000, 200000))
    outs = {o.name: o.expr for o in plan.outputs}
    assert outs["k"] == Agg("sum", Arith("/", c("income"), Lit(1000)))
    assert outs["m"] == Arith("/", Agg("sum", c("age")), Agg("count"))
    assert plan.aggregates() == (Agg("sum", Arith("/", c("income"), Lit(1000))),
                                 Agg("sum", c("age")), Agg("count"))


def test_simple_case_and_group_by_ordinal_and_alias(cat):
    a = parse_sql("SELECT CASE sex WHEN 'F' THEN 1 ELSE 0 END AS f, COUNT(*) FROM people GROUP BY 1", cat)
    b = parse_sql("SELECT CASE WHEN sex = 'F' THEN 1 ELSE 0 END AS f, COUNT(*) FROM people GROUP BY f", cat)
    assert a == b


def test_having_and_order_by_on_outputs(cat):
    plan = parse_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING n > 10 "
                     "AND AVG(age) < 50 ORDER BY n DESC, 1", cat)
    assert plan.having == And((Compare(">", Agg("count"), Lit(10)),
                               Compare("<", Agg("avg", c("age")), Lit(50))))
    assert [(k.expr, k.descending) for k in plan.order_by] == [(Agg("count"), True),
                                                               (KeyRef("sex"), False)]
    # HAVING-only aggregates are measured too
    assert Agg("avg", c("age")) in plan.aggregates()


def test_join_with_public_table(cat):
    plan = parse_sql("SELECT r.region, COUNT(*) FROM people p JOIN regions r ON p.city = r.city "
                     "GROUP BY r.region", cat)
    assert plan.relation == Join(Scan(P, "p"), Scan("regions", "r"),
                                 ((Col("city", "p"), Col("city", "r")),), "inner")
    left = parse_sql("SELECT COUNT(*) FROM people LEFT JOIN regions ON regions.city = people.city", cat)
    assert left.relation.kind == "left"
    assert left.relation.on == ((Col("city", P), Col("city", "regions")),)


REFUSALS = [
    ("SELECT * FROM people", "SELECT *"),
    ("SELECT age FROM people", "row by row"),
    ("SELECT age, COUNT(*) FROM people", "row by row"),
    ("SELECT sex, COUNT(*) FROM people GROUP BY sex ORDER BY age", "row by row"),
    ("SELECT SUM(age) OVER (PARTITION BY sex) FROM people", "window"),
    ("SELECT COUNT(*) FROM people WHERE age > (SELECT 1)", "subquery"),
    ("WITH x AS (SELECT 1) SELECT COUNT(*) FROM people", "WITH"),
    ("SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", "UNION"),
    ("SELECT COUNT(*) FROM people p JOIN people q ON p.pid = q.pid", "two private tables"),
    ("SELECT COUNT(*) FROM people CROSS JOIN regions", "CROSS"),
    ("SELECT COUNT(*) FROM people JOIN regions ON people.age > 3", "join condition"),
    ("SELECT COUNT(*) FROM regions", "public"),
    ("SELECT AVG(DISTINCT age) FROM people", "DISTINCT inside"),
    ("SELECT COUNT(*) FROM people WHERE COUNT(*) > 1", "aggregate in WHERE"),
    ("SELECT COUNT(*) FILTER (WHERE age > 1) FROM people", "FILTER"),
    ("SELECT CAST(age AS DOUBLE), COUNT(*) FROM people GROUP BY 1", "CAST"),
    ("SELECT COUNT(*) FROM people WHERE lower(city) = 'a'", "LOWER"),
    ("SELECT QUANTILE(age, 2) FROM people", "quantile order"),
    ("SELECT COUNT(*) FROM nowhere", "no registered table"),
    ("SELECT COUNT(*) FROM people WHERE nope = 1", "unknown column"),
    ("DELETE FROM people", "not one"),
    ("SELECT COUNT(*) FROM people; SELECT 1", "statements"),
    ("SELEC COUNT(*) FROM people", "parse"),
    ("SELECT COUNT(*) FROM people WHERE city = 'it's'", "parse"),  # a string left open
    ('SELECT COUNT(*) FROM "people', "parse"),  # a name left open
    ("SELECT COUNT(*) FROM people WHERE ->> 1", "parse"),  # a TypeError inside sqlglot
    ("SELECT COUNT(*) FROM people WHERE " + "(" * 600 + "age > 1" + ")" * 600, "nested"),
    ("SELECT BIN(age, 10, 5) FROM people GROUP BY 1", "BIN"),
]


@pytest.mark.parametrize("sql, needle", REFUSALS)
def test_refusals_name_the_construct_and_a_remedy(cat, sql, needle):
    with pytest.raises(UnsupportedQueryError) as info:
        parse_sql(sql, cat)
    err = info.value
    assert needle.lower() in str(err).lower()
    assert err.remedy, f"no remedy for {sql!r}"


def test_builder_gives_the_same_plan_as_sql(cat):
    sql = parse_sql("SELECT sex, COUNT(*) AS n, AVG(age) AS mean_age, SUM(income) FROM people "
                    "WHERE age >= 18 AND city IN ('a', 'b') GROUP BY sex", cat)
    built = (Frame(cat, P).filter(col("age") >= 18).filter(col("city").is_in(["a", "b"]))
             .group_by("sex").agg(count().alias("n"), B.avg("age").alias("mean_age"),
                                  B.sum("income")))
    assert built == sql


def test_builder_expressions_match_sql(cat):
    sql = parse_sql(
        "SELECT CASE WHEN age < 30 THEN 'young' WHEN age < 60 THEN 'mid' ELSE 'old' END AS g,"
        " BIN(age, 0, 18, 120) AS band, MEDIAN(income), QUANTILE(age, 0.9) AS q9,"
        " STDDEV(age) AS s, SUM(income * 2 - 1) AS t "
        "FROM people WHERE NOT (sex = 'M') AND age BETWEEN 1 AND 99 AND city IS NOT NULL "
        "GROUP BY g, band", cat)
    g = when(col("age") < 30).then("young").when(col("age") < 60).then("mid").otherwise("old")
    built = (Frame(cat, P)
             .filter(~(col("sex") == "M"), col("age").between(1, 99), col("city").is_not_null())
             .group_by(g.alias("g"), col("age").bin([0, 18, 120]).alias("band"))
             .agg(B.median("income"), B.quantile("age", 0.9).alias("q9"),
                  B.stddev("age").alias("s"), B.sum(col("income") * 2 - 1).alias("t")))
    assert built == sql


def test_builder_join_matches_sql(cat):
    sql = parse_sql("SELECT r.region, COUNT(*) AS n FROM people JOIN regions AS r "
                    "ON people.city = r.city WHERE people.age > 3 GROUP BY r.region", cat)
    built = (Frame(cat, P).join("regions", on="city", alias="r").filter(col("age", P) > 3)
             .group_by(col("region", "r")).agg(n=count()))
    assert built == sql


def test_builder_having_and_sort(cat):
    sql = parse_sql("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING n > 5 "
                    "ORDER BY n DESC", cat)
    built = Frame(cat, P).group_by("sex").agg(n=count())
    built = with_order(with_having(built, col("n") > 5), "n", descending=True)
    assert built == sql


def test_builder_refusals(cat):
    with pytest.raises(UnsupportedQueryError, match="not an aggregate"):
        Frame(cat, P).group_by("sex").agg(col("sex"))
    with pytest.raises(UnsupportedQueryError, match="row by row"):
        Frame(cat, P).group_by("sex").agg(col("age"))
    with pytest.raises(UnsupportedQueryError, match="row by row"):
        Frame(cat, P).agg(col("age") + count())
    with pytest.raises(TypeError):
        bool(col("age") > 3)


def test_plan_sql_rendering_is_readable(cat):
    plan = parse_sql("SELECT sex, COUNT(*) AS n FROM people WHERE age >= 18 GROUP BY sex", cat)
    assert plan.sql() == ('SELECT "sex" AS "sex", COUNT(*) AS "n" FROM "people" AS "people" '
                          'WHERE "people"."age" >= 18 GROUP BY "people"."sex"')


def test_quiet_parser_warnings_drops_only_the_warnings_before_a_refusal(cat, caplog):
    """The command line and the service drop sqlglot's warning before a refusal of
    unreadable SQL, and nothing else: a lossy translation (here to Spark) still warns."""
    import logging

    import sqlglot

    from statcurator.query.sql import quiet_parser_warnings

    quiet_parser_warnings()
    with caplog.at_level(logging.WARNING, logger="sqlglot"):
        with pytest.raises(UnsupportedQueryError):
            parse_sql("FETCH FIRST 1 ROWS ONLY", cat)
        sqlglot.transpile("SELECT ARG_MAX(a, b, 3) FROM t", read="duckdb", write="spark")
    messages = [r.getMessage() for r in caplog.records]
    assert not any("Falling back" in m for m in messages)
    assert any("not supported" in m for m in messages), messages
