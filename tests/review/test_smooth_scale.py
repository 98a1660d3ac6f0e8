"""The smooth-sensitivity estimators never refuse after the charge because of the data
(finding of the 2026-11-26 service review).

Their noise scale S(x)/α depends on the data, and the heavy-tailed sampler refuses scales
beyond 2^40 grid units: a small ε on the default fine grid was charged, then refused by the
sampler ("a noise scale of 6.09e+17 grid units is too large") — and whether it was refused
depended on S(x), the private data's spread. The largest scale is public (S never exceeds the
bounds' width): the default grid is now coarsened until it fits, and an explicit grid that
cannot fit is refused before the charge, whatever the data.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from statcurator.core.errors import InvalidParameterError
from statcurator.core.schema import Column, TableMeta
from statcurator.estimators import Median

from .conftest import make_curator

META = TableMeta("t", (Column("x", type="real", bounds=(0, 1000)),))
CONSTANT = pa.table({"x": [500.0] * 1001})                # S(x) ≈ 0: the smallest scale
SPREAD = pa.table({"x": [0.0] * 50 + [1000.0] * 51})       # S(x) near the bounds' width


@pytest.mark.parametrize("table", [CONSTANT, SPREAD], ids=["constant", "spread"])
def test_the_default_grid_releases_at_a_small_epsilon(table) -> None:
    cur = make_curator("duckdb", table, META)
    est = cur.estimate("t", Median("x"), epsilon=1e-4, analyst="eve")
    assert est.details["grid"] > 1000 / 2**36            # coarsened, publicly
    assert len(cur.ledger.charges()) == 1


@pytest.mark.parametrize("table", [CONSTANT, SPREAD], ids=["constant", "spread"])
def test_an_explicit_grid_that_cannot_fit_is_refused_before_the_charge(table) -> None:
    cur = make_curator("duckdb", table, META)
    with pytest.raises(InvalidParameterError, match="more than the sampler draws"):
        cur.estimate("t", Median("x", grid=2**-35), epsilon=1, analyst="eve")
    assert cur.ledger.charges() == []


def test_control_without_the_public_check_the_refusal_depends_on_the_data(monkeypatch) -> None:
    import statcurator.estimators.smooth as smooth_module

    monkeypatch.setattr(smooth_module, "HEAVY_TAILED_LIMIT", 2**200)   # the check is off
    outcomes = []
    for table in (CONSTANT, SPREAD):
        cur = make_curator("duckdb", table, META)
        try:
            cur.estimate("t", Median("x", grid=2**-35), epsilon=1, analyst="eve")
            outcomes.append("released")
        except InvalidParameterError as e:
            assert "too large" in str(e)
            outcomes.append("refused")
        assert len(cur.ledger.charges()) == 1                # charged either way
    assert outcomes == ["released", "refused"]
