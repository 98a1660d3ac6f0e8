"""A refused query charges nothing, whatever the query: random aggregate queries (random
expressions, constants of every kind and size, filters and groupings) are either released,
charged once, or refused with one of statcurator's errors, the ledger unchanged."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import statcurator as sc
from statcurator.core.errors import StatcuratorError

CONSTS = ["0", "1", "-1", "2", "1000", "99999999999", "1e300", "1e-300", "0.1",
          "9223372036854775807", "18446744073709551616",
          "10000000000000000000000000000000000000", "'x'", "NULL", "TRUE"]
AGGS = ["COUNT(*)", "SUM({e})", "AVG({e})", "VARIANCE({e})", "STDDEV({e})", "MEDIAN({e})",
        "MIN({e})", "MAX({e})", "COUNT(DISTINCT {e})", "SUM(DISTINCT {e})",
        "QUANTILE({e}, 0.3)", "CORR({e}, {f})"]

const = st.sampled_from(CONSTS)
expr = st.recursive(
    st.sampled_from(["age", "age"]) | const,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(const, inner, inner).map(
            lambda t: f"CASE WHEN age > {t[0]} THEN {t[1]} ELSE {t[2]} END"),
        st.tuples(const, const, st.sampled_from(["1", "5", "100000"])).map(
            lambda t: f"WIDTH_BUCKET(age, {t[0]}, {t[1]}, {t[2]})"),
        inner.map(lambda e: f"-{e}")),
    max_leaves=8)


@st.composite
def queries(draw: st.DrawFn) -> str:
    agg = draw(st.sampled_from(AGGS)).format(e=draw(expr), f=draw(expr))
    where = draw(st.sampled_from(["", " WHERE {e} > {c}", " WHERE age IN ({c}, {d})"])).format(
        e=draw(expr), c=draw(const), d=draw(const))
    group = draw(st.sampled_from(["", " GROUP BY sex", " GROUP BY WIDTH_BUCKET(age, 0, {c}, 4)"]))
    group = group.format(c=draw(const))
    return f"SELECT {'sex, ' if group == ' GROUP BY sex' else ''}{agg} AS v FROM adult{where}{group}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries())
def test_a_query_is_released_once_or_refused_uncharged(sql):
    cur = sc.Curator(default_budget=None, dataset_budget=None)
    cur.register("adult", sc.datasets.adult(), budget=sc.ApproxDP(10**6, 0.5))
    cur.set_budget("a", "adult", sc.ApproxDP(10**6, 0.5))
    try:
        cur.sql(sql).release(epsilon=1, delta=1e-6, analyst="a")
    except StatcuratorError:
        assert cur.budget("a", "adult").spent.epsilon == 0, sql
        assert cur.ledger.entries(types=("charge",)) == [], sql
    else:
        assert len(cur.ledger.entries(types=("charge",))) == 1
