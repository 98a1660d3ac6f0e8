"""Correlated records (issue 13): DP's limitation on correlated tuples, and its two remedies.

The lectures (database-privacy-lectures, "Limitations of Differential Privacy", after Kifer
and Machanavajjhala 2011): when Bob's whole family catches a contagious disease if one member
does, a per-record ε-DP count of the sick leaks the family's value at the rate of the whole
family. Dwork–Smith (group privacy): an ε-DP release protects a group of k rows only at kε.

Simulated households (sizes 1..4) whose members all share ``disease``. The attacker knows
every household except one, H of size k, and wants H's value: the two worlds D_Y (H's members
all 'Y') and D_N (all 'N') differ by the whole household. With ``neighbours = "bounded"``
they are neighbours for a household privacy unit (one unit's data changed), and k rows apart
for a per-record unit.

* the per-record release (``privacy_unit = "row"``) FAILS ``check_dp`` at ε on these worlds
  for k >= 2 (the control: the test can fail), and passes at kε but fails at (k - 1)ε — it
  leaks ≈ kε;
* the household-unit release (``{ column = "household", max_rows = 4 }``) and the
  group-privacy release (``{ group_size = 4 }``) pass at ε;
* mutants (the group size, or the rows per household, left out of the sensitivity) fail.

Each ``check_dp`` runs at α = 1e-6: a correct release fails it with probability at most 1e-6
(the false-failure rate of every "passes" below); the "fails" assertions are about mechanisms
whose true log-ratio (kε) is at least ε beyond the level tested: measured at 50,000 trials,
their p-values sit at check_dp's floor (1e-30, three repeats each), far below α.

Draws come from ``BoundQuery.noise_many`` (the vectorized form of the code every release
runs), on the exact answer computed once by DuckDB with a fixed bounding salt.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from statcurator.core.errors import MetadataError, UnsupportedQueryError
from statcurator.core.relations import PersonLevel
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.curator import Curator
from statcurator.engines import sqlgen
from statcurator.io.metadata import dump_metadata, parse_metadata
from statcurator.query import compiler, rewrite
from statcurator.testing.dp import check_dp

TRIALS = 50_000
K = 4  # the largest household

COLUMNS = (Column("household", type="integer"), Column("age", type="integer", bounds=(0, 100)),
           Column("disease", categories=("Y", "N")))
PER_RECORD = TableMeta("t", COLUMNS, neighbours="bounded")
HOUSEHOLD = PER_RECORD.replace(privacy_unit=PrivacyUnit("household", max_rows=K))
GROUP = PER_RECORD.replace(privacy_unit=PrivacyUnit(group_size=K))
UNBOUNDED_GROUP = GROUP.replace(neighbours="unbounded")

COUNT = "SELECT COUNT(*) AS n FROM t WHERE disease = 'Y'"
HISTOGRAM = "SELECT disease, COUNT(*) AS n FROM t GROUP BY disease"
SUM = "SELECT SUM(age) AS s FROM t"


def households(n: int = 30, seed: int = 13) -> list[tuple[int, int, str]]:
    """``n`` households of 1..K members who share one disease value (the correlation).
    Seeded data, not noise: the data is public to the test."""
    gen = np.random.default_rng(seed)
    rows = []
    for h in range(1, n + 1):
        size = int(gen.integers(1, K + 1))
        value = "Y" if gen.random() < 0.3 else "N"
        rows += [(h, int(gen.integers(0, 101)), value) for _ in range(size)]
    return rows


OTHERS = households()


def with_target(k: int, value: str, age: int = 40) -> list[tuple[int, int, str]]:
    """The known households plus the target household H (id 0) of ``k`` members."""
    return OTHERS + [(0, age, value)] * k


def table(rows):
    return pa.table({"household": [r[0] for r in rows], "age": [r[1] for r in rows],
                     "disease": [r[2] for r in rows]})


@pytest.fixture(autouse=True)
def fresh_sql():
    """Generated SQL is cached per plan; a mutant must not reuse another test's."""
    sqlgen.clear_cache()
    yield
    sqlgen.clear_cache()


def curator(rows, meta):
    cur = Curator(engine="duckdb")
    cur.register("t", table(rows), meta)
    return cur


def sampler(rows, sql, epsilon, meta):
    cur = curator(rows, meta)
    q = cur.sql(sql)
    bound = q.bind(epsilon)
    exact = cur.engine.execute(q.compile().engine_plan, salt="5eed")
    exprs = [o.expr for o in q.plan.outputs if o.expr.aggregates()]

    def sample(n):
        out = np.array([[float(a.point(e, g)) for g in range(len(a.keys)) for e in exprs]
                        for a in bound.noise_many(exact, n)])
        return out[:, 0] if out.shape[1] == 1 else out

    return sample


def household_dp(k, meta, sql=COUNT, epsilon=1, tested=None, trials=TRIALS):
    """check_dp of the release at ``epsilon`` on D_Y, D_N (H of size k), at level ``tested``."""
    return check_dp(sampler(with_target(k, "Y"), sql, epsilon, meta),
                    sampler(with_target(k, "N"), sql, epsilon, meta),
                    epsilon if tested is None else tested, trials=trials)


# -- declaring the unit (fast) ----------------------------------------------------------------

def test_group_size_is_a_unit_of_k_rows():
    u = PrivacyUnit(group_size=4)
    assert (u.is_row, u.is_group, u.max_rows, u.column) == (False, True, 4, None)
    assert PrivacyUnit(group_size=1) == PrivacyUnit()  # a group of one row is a row
    assert PrivacyUnit(max_rows=4, group_size=4) == u


@pytest.mark.parametrize(("kwargs", "remedy"), [
    ({"column": "household", "group_size": 4}, 'column = "household", max_rows = 4'),
    ({"group_size": 4, "max_groups": 2}, "drop max_groups"),
    ({"group_size": 4, "max_rows": 3}, "write only group_size = 4"),
    ({"group_size": 0}, "group_size = 4"),
    ({"group_size": True}, "group_size = 4"),
    ({"max_rows": 4}, "{ group_size = 5 }"),
])
def test_combinations_that_make_no_sense_are_refused(kwargs, remedy):
    with pytest.raises(MetadataError) as e:
        PrivacyUnit(**kwargs)
    assert remedy in e.value.remedy


def test_metadata_declares_a_group_size_and_round_trips():
    meta = parse_metadata('[table]\nname = "t"\nprivacy_unit = { group_size = 4 }\n'
                          '[columns.disease]\ncategories = ["Y", "N"]\n')
    assert meta.privacy_unit == PrivacyUnit(group_size=4)
    assert "[table.privacy_unit]\ngroup_size = 4\n" in dump_metadata(meta)
    assert parse_metadata(dump_metadata(meta)) == meta
    with pytest.raises(MetadataError, match="both a key column"):
        parse_metadata('[table]\nname = "t"\nprivacy_unit = { column = "h", group_size = 4 }\n'
                       '[columns.h]\ntype = "integer"\n')


def sensitivities(meta, sql):
    return {m.label: m.sensitivity for m in curator(OTHERS, meta).sql(sql).compile().measures}


@pytest.mark.parametrize(("meta", "count", "histogram", "total"), [
    (PER_RECORD, 1, 2, 100),          # bounded: a changed row moves two groups
    (GROUP, K, 2 * K, K * 100),       # k rows changed
    (UNBOUNDED_GROUP, K, K, K * 100),  # k rows added or removed
    (HOUSEHOLD, K, 2 * K, K * 100),   # the key bounds each household to K rows
])
def test_every_sensitivity_is_multiplied_by_the_group_size(meta, count, histogram, total):
    assert sensitivities(meta, COUNT) == {"n": count}
    assert sensitivities(meta, HISTOGRAM) == {"n": histogram}
    assert sensitivities(meta, SUM) == {"s": total}


def test_a_distinct_count_and_a_quantile_see_k_rows():
    s = sensitivities(UNBOUNDED_GROUP, "SELECT COUNT(DISTINCT age) AS d FROM t")
    assert s == {"d": K}  # k rows create or remove at most k distinct values
    row = sensitivities(UNBOUNDED_GROUP.replace(privacy_unit=PrivacyUnit()),
                        "SELECT MEDIAN(age) AS m FROM t")
    grp = sensitivities(UNBOUNDED_GROUP, "SELECT MEDIAN(age) AS m FROM t")
    assert all(grp[k] == K * row[k] for k in row)


def test_a_join_whose_key_repeats_multiplies_the_group_size():
    cur = curator(OTHERS, UNBOUNDED_GROUP)
    cur.register_public("p", pa.table({"d": ["Y", "Y", "Y", "N"], "w": [1, 2, 3, 4]}))
    cq = cur.sql("SELECT COUNT(*) AS n FROM t JOIN p ON t.disease = p.d").compile()
    assert cq.stability == 3
    assert cq.neighbourhood.rows_per_unit == 3 * K
    assert [m.sensitivity for m in cq.measures] == [3 * K]


def test_the_explanation_and_the_release_state_the_group():
    cur = curator(OTHERS, UNBOUNDED_GROUP)
    q = cur.sql(COUNT)
    assert f"a group of up to {K} correlated rows" in q.explain()
    assert q.cost(epsilon=1).epsilon == 1  # ε for the whole group
    cq = q.compile()
    assert cq.relation == PersonLevel(None, max_rows=K)
    assert q.bind(1).privacy_map(2).epsilon == 2  # two groups: group privacy again
    rel = q.release(epsilon=1, analyst="alice")
    assert f"a group of up to {K} correlated rows" in rel.provenance["neighbours"]
    assert rel.mechanisms["n"][0]["sensitivity"] == K
    cert = rel.provenance["certificate"]  # the independent re-check sees the group too
    assert cert["privacy_unit"]["group_size"] == K
    assert Fraction(str(cert["recheck"]["epsilon"])) == 1 and cert["recheck"]["passed"]


def test_partition_selection_is_refused_with_a_remedy():
    cur = curator(OTHERS, UNBOUNDED_GROUP)
    with pytest.raises(UnsupportedQueryError) as e:
        cur.sql("SELECT age, COUNT(*) FROM t GROUP BY age").compile()
    assert 'privacy_unit = { column = "household", max_rows = 4 }' in e.value.remedy


def test_the_row_estimators_refuse_a_group_unit():
    """An estimator that protects one row is refused (uncharged) on a group unit."""
    from statcurator import estimators

    cur = curator(OTHERS, GROUP)
    with pytest.raises(UnsupportedQueryError, match="up to 4 rows"):
        cur.estimate("t", estimators.Median("age"), epsilon=1)
    assert cur.budget("default", "t").spent.epsilon == 0


# -- the limitation and the remedies, measured (slow) -------------------------------------------

@pytest.mark.slow
def test_a_household_of_one_is_a_row():
    """Sanity: per-record DP protects a household of one (false-failure rate 1e-6)."""
    assert household_dp(1, PER_RECORD).passed


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 3, 4])
def test_per_record_dp_leaks_a_household(k):
    """The control: per-record ε-DP is not ε-DP for the household's value (fails at ε)..."""
    result = household_dp(k, PER_RECORD)
    assert not result.passed, result


@pytest.mark.slow
@pytest.mark.parametrize("k", [3, 4])
def test_per_record_dp_leaks_k_epsilon(k):
    """... it leaks ≈ kε: it passes at kε (group privacy; false-failure rate 1e-6) and fails
    at (k - 1)ε (the true log-ratio of a count k apart under Laplace(1/ε) is exactly kε)."""
    assert household_dp(k, PER_RECORD, tested=k).passed
    result = household_dp(k, PER_RECORD, tested=k - 1)
    assert not result.passed, result


@pytest.mark.slow
@pytest.mark.parametrize("meta", [HOUSEHOLD, GROUP], ids=["household-key", "group-size"])
@pytest.mark.parametrize("k", [3, 4])
def test_a_household_unit_protects_the_household(meta, k):
    """The remedies pass at ε on the same worlds (false-failure rate 1e-6 each)."""
    assert household_dp(k, meta).passed


@pytest.mark.slow
def test_a_group_unit_protects_the_household_in_a_histogram():
    """Both counts move by k; the bounded histogram's sensitivity is 2k (rate 1e-6)."""
    assert household_dp(K, GROUP, sql=HISTOGRAM).passed


@pytest.mark.slow
def test_a_group_unit_protects_a_household_added_to_a_sum():
    """Unbounded: D vs D + H (four members of age 100); SUM moves by k·100 (rate 1e-6)."""
    assert check_dp(sampler(OTHERS, SUM, 1, UNBOUNDED_GROUP),
                    sampler(OTHERS + [(0, 100, "Y")] * K, SUM, 1, UNBOUNDED_GROUP),
                    1, trials=TRIALS).passed


# -- mutants ------------------------------------------------------------------------------------

def _ignore_group_size(private, alias, grouped, stability):
    unit = private.meta.privacy_unit
    if unit.is_group:  # the mutant: the group's rows counted as one row
        return None, stability, stability
    return rewrite.contribution_bounding(private, alias, grouped, stability)


def _one_row_per_household(private, alias, grouped, stability):
    bounding, _, _ = rewrite.contribution_bounding(private, alias, grouped, stability)
    return bounding, 1, 1  # the mutant: bounded to K rows, calibrated for one


@pytest.mark.slow
@pytest.mark.parametrize("mutant, unit", [
    (_ignore_group_size, GROUP),                # group_size ignored
    (_one_row_per_household, HOUSEHOLD),        # bounded to K rows, calibrated for one
], ids=["ignoring-the-group-size", "one-row-per-household"])
def test_a_mutant_calibrated_for_one_row_is_caught(monkeypatch, mutant, unit):
    monkeypatch.setattr(compiler, "contribution_bounding", mutant)
    assert sensitivities(unit, COUNT) == {"n": 1}
    result = household_dp(K, unit)
    assert not result.passed, result


@pytest.mark.slow
def test_mutant_sum_ignoring_the_group_size_is_caught(monkeypatch):
    monkeypatch.setattr(compiler, "contribution_bounding", _ignore_group_size)
    result = check_dp(sampler(OTHERS, SUM, 1, UNBOUNDED_GROUP),
                      sampler(OTHERS + [(0, 100, "Y")] * K, SUM, 1, UNBOUNDED_GROUP),
                      1, trials=TRIALS)
    assert not result.passed, result


def test_the_sampler_sees_the_group_size():
    """The statistical tests above sample the very mechanisms a release uses."""
    cur = curator(with_target(K, "Y"), GROUP)
    bound = cur.sql(COUNT).bind(1)
    assert [dataclasses.asdict(i)["sensitivity"] for i in bound.infos] == [Fraction(K)]
