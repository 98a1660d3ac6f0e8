"""Property tests: on random neighbouring datasets (with NULL, NaN, ±∞, huge values, and
person ids owning many rows), the sensitivity the compiler derives from the plan bounds how
much the engine's exact aggregates can move. The exact aggregates come from the reference
engine; nothing here trusts the compiler's arithmetic."""

from __future__ import annotations

import math
from fractions import Fraction

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statcurator.core.schema import PrivacyUnit
from statcurator.engines.base import TableSource
from statcurator.engines.memory import MemoryEngine
from statcurator.query.compiler import compile_query
from statcurator.query.sql import parse_sql

from .conftest import DUPLICATED, PEOPLE_SCHEMA, REGIONS, catalog

FLOATS = st.one_of(
    st.none(),
    st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, -0.0, 199999.99]),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False),
)
INTS = st.one_of(st.none(), st.integers(min_value=-200, max_value=400))


def row(pid: st.SearchStrategy) -> st.SearchStrategy:
    return st.fixed_dictionaries({
        "pid": pid, "age": INTS, "income": FLOATS,
        "sex": st.sampled_from(["F", "M", "X"]),
        "city": st.sampled_from(["a", "b", "c", "d"]),
        "smoker": st.one_of(st.none(), st.booleans()),
    })


ROWS = st.lists(row(st.integers(min_value=0, max_value=5)), min_size=0, max_size=25)

QUERIES = [
    "SELECT COUNT(*), COUNT(income), SUM(age), SUM(income), AVG(income), VAR_POP(age), "
    "MEDIAN(income), QUANTILE(age, 0.9), MIN(age) FROM people WHERE age > 10 OR income < 0",
    "SELECT sex, COUNT(*), SUM(income), AVG(age), STDDEV(income), MEDIAN(age) "
    "FROM people GROUP BY sex",
    "SELECT BIN(age, 0, 30, 60, 120) AS band, smoker, COUNT(*), "
    "SUM(CASE WHEN sex = 'F' THEN income / 1000 ELSE -age END) FROM people GROUP BY band, smoker",
    "SELECT r.region, COUNT(*), SUM(age) FROM people p JOIN regions r ON p.city = r.city "
    "GROUP BY r.region",
    "SELECT COUNT(*), SUM(income * 2 - 5) FROM people p JOIN dups d ON p.city = d.city",
    "SELECT city, COUNT(*), SUM(age) FROM people GROUP BY city",
]


def engine_for(rows: list[dict]) -> MemoryEngine:
    eng = MemoryEngine()
    eng.register("people", TableSource.from_arrow(pa.Table.from_pylist(rows, PEOPLE_SCHEMA)))
    eng.register("regions", TableSource.from_arrow(REGIONS))
    eng.register("dups", TableSource.from_arrow(DUPLICATED))
    return eng


def quantile_scores(atom, hist: dict[int, int]) -> list[int]:
    h, p = atom.histogram, atom.agg.p
    counts = [hist.get(b, 0) for b in range(h.bins)]
    n, below, out = sum(counts), 0, []
    for c in counts:
        out.append(-abs(2 * p.denominator * below + p.denominator * c - 2 * p.numerator * n))
        below += c
    return out


def check(cq, r1, r2) -> None:
    """Every measurement moves by at most its sensitivity (L1 over groups)."""
    keys = set(r1.groups) | set(r2.groups)
    zeros = (0,) * len(cq.engine_plan.terms)
    for i, m in enumerate(cq.measures):
        if m.role == "quantile":
            atom = next(a for a in cq.atoms if i in a.measures)
            h1, h2 = r1.histograms[m.index], r2.histograms[m.index]
            total = 0
            for k in keys | set(h1) | set(h2):
                if m.side is None:
                    s1 = quantile_scores(atom, h1.get(k, {}))
                    s2 = quantile_scores(atom, h2.get(k, {}))
                else:  # an interval end: any public padding (here 3 rows)
                    bins = range(atom.histogram.bins)
                    s1 = atom.end_scores([h1.get(k, {}).get(b, 0) for b in bins], m.side, 3)
                    s2 = atom.end_scores([h2.get(k, {}).get(b, 0) for b in bins], m.side, 3)
                total += max(abs(a - b) for a, b in zip(s1, s2, strict=True))
            assert total <= m.sensitivity, (m.label, total, m.sensitivity)
        elif m.role == "selection":
            diffs = [abs(r1.groups.get(k, zeros)[m.index] - r2.groups.get(k, zeros)[m.index])
                     for k in keys]
            assert max(diffs, default=0) <= 1
            assert sum(1 for d in diffs if d) <= cq.neighbourhood.partitions()
        else:
            l1 = sum(abs(Fraction(r1.groups.get(k, zeros)[m.index])
                         - Fraction(r2.groups.get(k, zeros)[m.index])) for k in keys)
            assert l1 * m.value_scale <= m.sensitivity, (m.label, l1 * m.value_scale, m.sensitivity)


def compile_all(cat):
    return [compile_query(parse_sql(q, cat), cat) for q in QUERIES]


ROW_UNBOUNDED = compile_all(catalog())
ROW_BOUNDED = compile_all(catalog(neighbours="bounded"))
PERSON = PrivacyUnit("pid", max_rows=3, max_groups=2)
PERSON_UNBOUNDED = compile_all(catalog(privacy_unit=PERSON))
PERSON_BOUNDED = compile_all(catalog(privacy_unit=PERSON, neighbours="bounded"))

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def run(compiled, d1, d2, salt):
    e1, e2 = engine_for(d1), engine_for(d2)
    for cq in compiled:
        check(cq, e1.execute(cq.engine_plan, salt=salt), e2.execute(cq.engine_plan, salt=salt))


@pytest.mark.slow
@SETTINGS
@given(data=ROWS, extra=row(st.integers(0, 5)), salt=st.sampled_from(["0", "9f", "abc"]),
       drop=st.booleans())
def test_rows_unbounded(data, extra, salt, drop):
    neighbour = data[1:] if (drop and data) else data + [extra]
    run(ROW_UNBOUNDED, data, neighbour, salt)


@pytest.mark.slow
@SETTINGS
@given(data=ROWS.filter(bool), new=row(st.integers(0, 5)), i=st.integers(0, 24),
       salt=st.sampled_from(["0", "9f"]))
def test_rows_bounded(data, new, i, salt):
    neighbour = list(data)
    neighbour[i % len(data)] = new
    run(ROW_BOUNDED, data, neighbour, salt)


@pytest.mark.slow
@SETTINGS
@given(data=ROWS, unit=st.one_of(st.none(), st.integers(0, 6)),
       new_rows=st.lists(row(st.just(0)), max_size=8), salt=st.sampled_from(["0", "77"]))
def test_person_units_unbounded(data, unit, new_rows, salt):
    # remove every row of one person (a NULL id counts as one person) or add a new person
    without = [r for r in data if r["pid"] != unit]
    added = data + [dict(r, pid=99) for r in new_rows]
    run(PERSON_UNBOUNDED, data, without, salt)
    run(PERSON_UNBOUNDED, data, added, salt)


@pytest.mark.slow
@SETTINGS
@given(data=ROWS, unit=st.integers(0, 5), new_rows=st.lists(row(st.just(0)), max_size=8),
       salt=st.sampled_from(["0", "77"]))
def test_person_units_bounded(data, unit, new_rows, salt):
    changed = [r for r in data if r["pid"] != unit] + [dict(r, pid=unit) for r in new_rows]
    run(PERSON_BOUNDED, data, changed, salt)


def test_a_person_with_many_rows_is_bounded():
    # without bounding this person's 10 rows would move COUNT(*) by 10, above m = 3
    base = [{"pid": 1, "age": 30, "income": 1.0, "sex": "F", "city": "a", "smoker": True}]
    many = base + [dict(base[0], pid=2, age=20 + i) for i in range(10)]
    run(PERSON_UNBOUNDED, base, many, "0")


def test_the_check_catches_an_understated_sensitivity():
    # the checker itself has teeth: a halved sensitivity is violated by a plain neighbour
    cq = ROW_UNBOUNDED[0]
    e1 = engine_for([])
    e2 = engine_for([{"pid": 1, "age": 400, "income": 1e9, "sex": "F", "city": "a",
                      "smoker": None}])
    r1, r2 = e1.execute(cq.engine_plan, salt="0"), e2.execute(cq.engine_plan, salt="0")
    check(cq, r1, r2)
    from dataclasses import replace
    halved = replace(cq, measures=tuple(replace(m, sensitivity=m.sensitivity / 2)
                                        for m in cq.measures))
    with pytest.raises(AssertionError):
        check(halved, r1, r2)


def test_the_check_catches_understated_sensitivities_of_quantile_interval_ends():
    cat = catalog()
    cq = compile_query(parse_sql("SELECT MEDIAN(age) AS m FROM people", cat), cat)
    e1 = engine_for([{"pid": i, "age": 30, "income": 1.0, "sex": "F", "city": "a",
                      "smoker": None} for i in range(4)])
    e2 = engine_for([{"pid": i, "age": 30, "income": 1.0, "sex": "F", "city": "a",
                      "smoker": None} for i in range(4)] + [
        {"pid": 9, "age": 0, "income": 1.0, "sex": "F", "city": "a", "smoker": None}])
    r1, r2 = e1.execute(cq.engine_plan, salt="0"), e2.execute(cq.engine_plan, salt="0")
    check(cq, r1, r2)
    from dataclasses import replace
    halved = replace(cq, measures=tuple(
        replace(m, sensitivity=m.sensitivity / 2) if m.side else m for m in cq.measures))
    with pytest.raises(AssertionError, match="end"):
        check(halved, r1, r2)
