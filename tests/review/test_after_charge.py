"""Nothing fails after the charge, and what does fail says so (findings of the 2026-11-26
reviews).

* A post-processed value beyond a double's range (``ROUND(SUM(x) * 1e308 * 10)``) raised
  OverflowError after the charge: the budget was spent and no answer came. Released values
  are now NULL where a double cannot hold them, as for any undefined value.
* A subnormal ``alpha`` (1e-300) passed the ``0 < alpha < 1`` check, was charged, and was
  refused by the intervals afterwards: it is now refused first, by the same rule.
* A release that fails after its charge left the request "still being computed in this
  process" forever (and its entry in the ledger object's pending set): the ledger is now
  told the answer is lost, and a replay says so.
"""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

from statcurator.accounting import AnswerLostError
from statcurator.core.errors import InvalidParameterError
from statcurator.core.schema import Column, TableMeta

from .conftest import make_curator

META = TableMeta("t", (Column("x", type="real", bounds=(0, 1000)),))


def curator():
    return make_curator("duckdb", pa.table({"x": [1.0, 2.0, 3.0]}), META)


@pytest.mark.parametrize("sql", ["SELECT ROUND(SUM(x) * 1e308 * 10) AS v FROM t",
                                 "SELECT CEIL(SUM(x) * 1e308) AS v FROM t",
                                 "SELECT POWER(SUM(x) * 1e300, 1.5) AS v FROM t"])
def test_a_value_beyond_a_double_is_released_as_null(sql: str) -> None:
    cur = curator()
    rel = cur.sql(sql).release(epsilon=1, analyst="eve")
    row = rel.rows()[0]
    assert row["v"] is None or abs(row["v"]) < float("inf")
    assert cur.ledger.charges()[0].answered
    with pytest.raises(OverflowError):  # control: what the release used to do with it
        float(Fraction(10) ** 400)


def test_a_subnormal_alpha_is_refused_before_the_charge() -> None:
    cur = curator()
    for alpha in (1e-300, 5e-324):
        with pytest.raises(InvalidParameterError, match="alpha is too small"):
            cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=1, analyst="eve",
                                                           alpha=alpha)
    assert cur.ledger.charges() == []


def test_a_release_failing_after_its_charge_is_an_answer_lost(monkeypatch) -> None:
    from statcurator import curator as curator_module

    cur = curator()

    def broken(*args, **kwargs):
        raise RuntimeError("the noise step failed")

    monkeypatch.setattr(curator_module.Query, "_build", broken)
    with pytest.raises(RuntimeError, match="noise step failed"):
        cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=1, analyst="eve",
                                                       request_id="r1")
    monkeypatch.undo()
    assert cur.ledger._pending == {}
    with pytest.raises(AnswerLostError, match="its release failed after the charge"):
        cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=1, analyst="eve",
                                                       request_id="r1")
    assert len(cur.ledger.charges()) == 1          # charged once; nothing fresh released


def test_an_engine_failing_after_the_charge_is_an_answer_lost_too(monkeypatch) -> None:
    """helper-34: the engine's own failure (out of memory, a lost Spark executor) was raised
    outside the guard, and the request stayed 'still being computed' forever."""
    from statcurator.engines.duckdb import DuckDBEngine

    cur = curator()

    def broken(self, plan, *, salt):
        raise MemoryError("the engine ran out of memory")

    monkeypatch.setattr(DuckDBEngine, "execute", broken)
    with pytest.raises(MemoryError):
        cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=1, analyst="eve",
                                                       request_id="r2")
    monkeypatch.undo()
    assert cur.ledger._pending == {} and len(cur.ledger.charges()) == 1
    with pytest.raises(AnswerLostError, match="its release failed after the charge"):
        cur.sql("SELECT COUNT(*) AS n FROM t").release(epsilon=1, analyst="eve",
                                                       request_id="r2")


@pytest.mark.parametrize("exponent", ["1e10", "1000000"])
def test_a_huge_power_of_a_noisy_value_is_released_at_once(exponent: str) -> None:
    """helper-34: the interval of POWER(SUM(x), 1e10) was computed with exact fractions,
    after the charge: 1e6 took 14 s and 1e10 never returned. Beyond an exponent of 64 the
    value has no interval (NULL ends); its point is a double, NULL if it overflows."""
    cur = curator()
    rel = cur.sql(f"SELECT POWER(SUM(x), {exponent}) AS v FROM t").release(epsilon=1,
                                                                         analyst="eve")
    assert rel.rows()[0]["v_low"] is None and cur.ledger.charges()[0].answered


def test_a_quantile_order_is_read_as_a_parameter_is() -> None:
    """helper-34: PERCENTILE_CONT(1e-99999999) built 10^99999999 at compilation (and
    1e-9999 hit Python's 4300-digit limit: a 500 in the service)."""
    from statcurator.core.errors import UnsupportedQueryError

    cur = curator()
    for order in ("1e-99999999", "1e-9999", "1e-99_999_999"):
        with pytest.raises(UnsupportedQueryError, match="quantile order"):
            cur.sql(f"SELECT PERCENTILE_CONT({order}) WITHIN GROUP (ORDER BY x) AS q "
                    "FROM t").cost(epsilon=1)
