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
