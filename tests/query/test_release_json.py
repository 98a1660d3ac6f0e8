"""A release's JSON (what the ledger stores, and what a replay returns) round-trips exactly,
whichever encoder wrote it: orjson for plain numbers, the standard library when a value is
NaN, ±∞, NULL or an integer beyond 64 bits (orjson would write null or refuse)."""

from __future__ import annotations

import json
import math

import pytest

from statcurator.core.measures import PureDP
from statcurator.query.release import Release


def _release(rows: list[list]) -> Release:
    return Release(["k", "n", "n_low", "n_high"], ["string", "int64", "double", "double"],
                   rows, PureDP(1), {"n": [{"mechanism": "laplace", "scale": 2.0}]},
                   {"query": "SELECT k, COUNT(*) AS n FROM t GROUP BY k", "épsilon": "1/2"})


@pytest.mark.parametrize("rows", [
    [[f"k{i}", i * 7 - 300, i * 7 - 321.283, i * 7 - 278.717] for i in range(1000)],
    [["a", 5, float("nan"), float("inf")], ["b", 6, -float("inf"), 1e308]],
    [[None, 3, 0.1, 0.30000000000000004], ["null", 4, -0.0, 5e-324]],
    [["big", 2**70, 1.0, 2.0]],
])
def test_the_stored_json_round_trips(rows) -> None:
    rel = _release(rows)
    back = Release.from_json(rel.to_json())
    assert back.columns == rel.columns and back.types == rel.types
    assert back.mechanisms == rel.mechanisms and back.provenance == rel.provenance
    for got, want in zip(back.data, rel.data, strict=True):
        for g, w in zip(got, want, strict=True):
            assert g == w or (isinstance(w, float) and math.isnan(w)
                              and isinstance(g, float) and math.isnan(g)), (g, w)
            assert type(g) is type(w) or w is None
    # the standard library reads it too (a replay, an export)
    assert json.loads(rel.to_json(), parse_constant=float)["columns"] == rel.columns


@pytest.mark.parametrize("mechanisms, provenance", [
    ({"n": [{"mechanism": "laplace", "scale": float("inf")}]}, {"x": None, "y": [None, 1]}),
    ({"n": [{"mechanism": "laplace", "threshold": None}]}, {"x": float("nan"), "y": None}),
    ({"n": [{"mechanism": "laplace", "scale": None}]}, {"x": None, "nested": {"z": None}}),
])
def test_nan_and_infinity_outside_the_rows_survive_too(mechanisms, provenance) -> None:
    """The Nones of the mechanisms and the provenance are counted as they are copied: a NaN
    or ±∞ there (which orjson would write as null) still sends the release through json."""
    rel = Release(["n"], ["int64"], [[1], [None]], PureDP(1), mechanisms, provenance)
    back = json.loads(rel.to_json(), parse_constant=float)
    assert json.dumps(back["mechanisms"]) == json.dumps(mechanisms)
    assert json.dumps(back["provenance"]) == json.dumps(provenance)
