"""Policies in SQL (issue 13): the query layer computes SUM and AVG of a policy column with
the policy's sensitivity, where that is sound — bounded neighbours, one row per unit, an
unfiltered, ungrouped scan reading only that column — and the ordinary bounded-DP
sensitivity everywhere else. The independent re-check derives the same cost from the
certificate, and refuses a compiler that applies a policy outside its scope.

check_dp runs at α = 1e-6 (a false failure at most once in a million runs).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from statcurator.core.errors import PrivacyAccountingError
from statcurator.core.policy import Policy
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.curator import Curator
from statcurator.query.binding import BoundQuery
from statcurator.query.catalog import DictCatalog, TableInfo
from statcurator.query.certificate import certify
from statcurator.query.compiler import _Compiler as Compiler
from statcurator.query.compiler import compile_query
from statcurator.query.sql import parse_sql
from statcurator.testing.dp import check_dp

ROWS = 8
LINE = Policy.threshold(1)


def meta(policy: Policy = LINE, **changes) -> TableMeta:
    m = TableMeta("t", (Column("age", type="integer", bounds=(0, 120), policy=policy),
                        Column("sex", categories=("F", "M"))),
                  neighbours="bounded", rows=ROWS)
    return m.replace(**changes) if changes else m


SCHEMA = pa.schema([("age", pa.int64()), ("sex", pa.string())])


def catalog(m: TableMeta) -> DictCatalog:
    return DictCatalog({"t": TableInfo.from_schema("t", m, SCHEMA)})


def sensitivities(sql: str, m: TableMeta) -> list[Fraction]:
    cat = catalog(m)
    return [x.sensitivity for x in compile_query(parse_sql(sql, cat), cat).measures]


@pytest.mark.parametrize("sql, expected", [
    ("SELECT SUM(age) FROM t", [1]),                      # θ = 1 on the integer grid
    ("SELECT AVG(age) FROM t", [1]),                      # the declared n: the sum alone
    ("SELECT COUNT(*), SUM(age) FROM t", [1, 1]),
    ("SELECT VARIANCE(age) FROM t", [1, 1, 3600]),        # the squares keep DP's
    # outside the policy's scope, bounded DP's sensitivities
    ("SELECT SUM(age) FROM t WHERE age > 30", [120]),     # a θ-move can cross the filter
    ("SELECT sex, SUM(age) FROM t GROUP BY sex", [240]),
    ("SELECT SUM(age) FROM t WHERE sex = 'F'", [120]),    # another column is read
])
def test_sum_and_avg_use_the_policy_where_it_is_sound(sql, expected):
    assert sensitivities(sql, meta()) == [Fraction(e) for e in expected]


def test_other_policies_and_units():
    assert sensitivities("SELECT SUM(age) FROM t", meta(Policy.threshold(5))) == [5]
    assert sensitivities("SELECT SUM(age) FROM t", meta(Policy.threshold(Fraction(5, 2)))) \
        == [Fraction(7, 2)]  # a fractional θ: one grid step for the rounding
    blocks = Policy.partition([[0, 10, 20], [30, 40], [50, 60, 120]])
    m = meta(blocks).replace(columns=(
        Column("age", type="integer", bounds=(0, 120), policy=blocks,
               categories=(0, 10, 20, 30, 40, 50, 60, 120)),
        Column("sex", categories=("F", "M"))))
    assert sensitivities("SELECT SUM(age) FROM t", m) == [71]  # the widest block, + a step
    # unbounded neighbours add or remove a whole row: the policy does not apply
    assert sensitivities("SELECT SUM(age) FROM t", meta(neighbours="unbounded")) == [120]
    assert sensitivities("SELECT SUM(age) FROM t", meta(Policy.complete())) == [120]


def test_the_explanation_states_the_policy():
    cur = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    cur.register("t", pa.table({"age": [30] * ROWS, "sex": ["F"] * ROWS}), meta())
    text = cur.sql("SELECT AVG(age) FROM t").explain()
    assert "policy on 'age'" in text
    cur.close()


# -- the re-check ---------------------------------------------------------------------------

@pytest.mark.parametrize("sql", ["SELECT SUM(age) FROM t", "SELECT AVG(age), COUNT(*) FROM t",
                                 "SELECT VARIANCE(age) FROM t",
                                 "SELECT SUM(age) FROM t WHERE age > 30"])
@pytest.mark.parametrize("loss", [{"epsilon": 1}, {"rho": Fraction(1, 2)}])
def test_the_recheck_derives_the_policy_cost(sql, loss):
    m = meta()
    cat = catalog(m)
    cert = certify(BoundQuery(compile_query(parse_sql(sql, cat), cat), **loss), m, cat)
    assert cert["recheck"]["passed"]
    assert (cert["policy"] is not None) == ("WHERE" not in sql)


def test_a_policy_applied_outside_its_scope_is_refused(monkeypatch):
    """The mutant compiler applies the policy to a filtered query: a θ-move across the
    filter moves the sum by a whole value, which the re-check knows."""
    def careless(self, bounded, grouped):  # ignores the filter and the grouping
        return "age", LINE

    monkeypatch.setattr(Compiler, "_policy_scope", careless)
    m = meta()
    cat = catalog(m)
    bq = BoundQuery(compile_query(parse_sql("SELECT SUM(age) FROM t WHERE age > 30", cat),
                                  cat), 1)
    assert bq.compiled.measures[0].sensitivity == 1
    with pytest.raises(PrivacyAccountingError, match="outside its scope"):
        certify(bq, m, cat)


# -- privacy on policy neighbours ---------------------------------------------------------------

BASE = [20, 31, 44, 52, 60, 67, 75, 88]


def sampler(ages: list[int], sql: str, m: TableMeta):
    cur = Curator(engine="duckdb")
    cur.register("t", pa.table({"age": ages, "sex": ["F"] * len(ages)}), m)
    q = cur.sql(sql)
    bound = q.bind(1)
    exact = cur.engine.execute(q.compile().engine_plan, salt="5eed")
    e = q.plan.outputs[0].expr
    return lambda n: np.array([float(a.point(e, 0)) for a in bound.noise_many(exact, n)])


def dp(other: list[int], sql: str = "SELECT SUM(age) FROM t", m: TableMeta | None = None):
    m = m or meta()
    return check_dp(sampler(BASE, sql, m), sampler(other, sql, m), 1, trials=100_000)


MOVED = BASE[:3] + [53] + BASE[4:]   # one value moved along one edge (52 → 53)


@pytest.mark.slow
@pytest.mark.parametrize("sql", ["SELECT SUM(age) FROM t", "SELECT AVG(age) FROM t"])
def test_sum_and_avg_are_private_on_policy_neighbours(sql):
    assert dp(MOVED, sql).passed


@pytest.mark.slow
def test_mutant_with_half_the_policy_sensitivity_is_caught(monkeypatch):
    original = Policy.sum_sensitivity
    monkeypatch.setattr(Policy, "sum_sensitivity",
                        lambda self, lo, hi: original(self, lo, hi) / 2)
    result = dp(MOVED)
    assert not result.passed, result


@pytest.mark.slow
def test_what_the_policy_does_not_hide():
    """A value moved by 60 (sixty edges) is protected only at 60ε: check_dp flags the pair at
    the policy's ε, where plain DP's sensitivity would pass it."""
    far = BASE[:3] + [112] + BASE[4:]
    assert not dp(far).passed
    plain = meta(Policy.complete())
    assert dp(far, m=plain).passed


def test_group_units_never_use_a_policy():
    m = meta(privacy_unit=PrivacyUnit(group_size=2))
    assert sensitivities("SELECT SUM(age) FROM t", m) == [240]
