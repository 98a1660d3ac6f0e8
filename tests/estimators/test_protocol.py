"""The estimator protocol and Curator.estimate: charge first, read only declared columns,
replays free, refusals before any charge."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.core.errors import (
    BudgetExceededError,
    MetadataError,
    UnsupportedQueryError,
)
from statcurator.core.measures import ApproxDP, PureDP
from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.estimators import Estimate, Estimator, Median
from statcurator.estimators._protocol import prepare


def _curator(rows: int = 1001, unit: PrivacyUnit | None = None) -> sc.Curator:
    cur = sc.Curator(engine="memory")
    cols = (Column("pid", type="integer"), Column("x", type="real", bounds=(0, 100)),
            Column("secret", type="string"))
    meta = TableMeta("t", cols, privacy_unit=unit or PrivacyUnit())
    table = pa.table({"pid": np.arange(rows), "x": np.linspace(0, 100, rows),
                      "secret": ["s"] * rows})
    cur.register("t", table, meta)
    return cur


class _Spy:
    """A table source that records reads (and fails when it has no data)."""

    def __init__(self, source: object, seen: list[int]) -> None:
        self.source, self.seen = source, seen

    def to_arrow(self):  # type: ignore[no-untyped-def]
        if self.source is None:
            raise AssertionError("data read before the charge was accepted")
        self.seen.append(1)
        return self.source.to_arrow()  # type: ignore[attr-defined]


def test_estimate_charges_reads_needed_columns_and_replays() -> None:
    cur = _curator()
    seen: list[int] = []
    cur._data["t"] = _Spy(cur._data["t"], seen)
    est = cur.estimate("t", Median("x"), epsilon=Fraction(1, 2), analyst="ann",
                       request_id="r1")
    # the median is 50; its heavy-tailed noise here exceeds 50 in 1 release of 1,000 (the
    # test failed once in a fresh clone) and 500 with probability about 1e-6 (tail ~ h^-3)
    assert isinstance(est, Estimate) and -450 <= est.value <= 550
    assert cur.budget("ann", "t").spent == ApproxDP(Fraction(1, 2), 0)
    again = cur.estimate("t", Median("x"), epsilon=Fraction(1, 2), analyst="ann",
                         request_id="r1")
    assert again.replayed and again.value == est.value and again.cost == est.cost
    assert cur.budget("ann", "t").spent == ApproxDP(Fraction(1, 2), 0)   # replay is free
    assert len(seen) == 1
    charge = cur.ledger.charges("ann")[0]
    assert "median" in charge.query and "smooth sensitivity" in charge.mechanism


def test_refused_charge_reads_nothing() -> None:
    cur = _curator()

    cur._data["t"] = _Spy(None, [])   # reading raises
    with pytest.raises(BudgetExceededError):
        cur.estimate("t", Median("x"), epsilon=5, analyst="bob")


def test_person_level_units_are_refused_before_charging() -> None:
    cur = _curator(unit=PrivacyUnit("pid", max_rows=3))
    with pytest.raises(UnsupportedQueryError, match="privacy unit"):
        cur.estimate("t", Median("x"), epsilon=1, analyst="cy")
    assert cur.ledger.charges("cy") == []


def test_undeclared_bounds_and_columns_are_refused() -> None:
    meta = TableMeta("t", (Column("x", type="real"),))
    with pytest.raises(MetadataError, match="bounds"):
        prepare(Median("x"), meta, PureDP(1))
    with pytest.raises(MetadataError, match="declare"):
        prepare(Median("y"), meta, PureDP(1))


def test_the_cost_is_the_measurement_of_the_neighbour_relation() -> None:
    meta = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),), neighbours="bounded")
    job = prepare(Median("x"), meta, PureDP(1))
    assert type(job.measurement.input_space).__name__ == "ChangeOne"
    assert job.measurement.cost == PureDP(1)
    assert job.measurement.map(2) == PureDP(2)        # group privacy beyond one step
    assert isinstance(Median("x"), Estimator)


def test_estimate_json_round_trip() -> None:
    e = Estimate("quantiles", (1.0, 2.0), ((0.5, 1.5), (1.5, 2.5)), 0.05,
                 ApproxDP(1, Fraction(1, 10**6)), "m", details={"levels": [0.25, 0.75]})
    back = Estimate.from_json(e.to_json())
    assert back == e and back.cost == e.cost
    assert "interval" in str(e)
