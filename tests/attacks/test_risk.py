"""The Risk value: Wilson intervals, validation, rendering."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from statcurator.attacks import Risk, wilson
from statcurator.core.errors import InvalidParameterError


def _wilson_by_roots(s: int, n: int, z: float) -> tuple[float, float]:
    # independent derivation: the interval's ends solve (s/n - p)^2 = z^2 p (1 - p) / n
    ph = s / n
    a = 1 + z * z / n
    b = -(2 * ph + z * z / n)
    c = ph * ph
    disc = math.sqrt(b * b - 4 * a * c)
    return (-b - disc) / (2 * a), (-b + disc) / (2 * a)


@pytest.mark.parametrize(("s", "n"), [(0, 10), (2, 10), (10, 10), (37, 120), (1, 1)])
def test_wilson_matches_the_quadratic_roots(s: int, n: int) -> None:
    lo, hi = wilson(s, n, 0.05)
    rlo, rhi = _wilson_by_roots(s, n, 1.959963984540054)
    assert lo == pytest.approx(max(rlo, 0.0), abs=1e-12)
    assert hi == pytest.approx(min(rhi, 1.0), abs=1e-12)


def test_wilson_known_value() -> None:
    # 2 of 10 at 95%: 5.67%–50.98% (textbook value of the Wilson score interval)
    lo, hi = wilson(2, 10)
    assert (round(lo, 4), round(hi, 4)) == (0.0567, 0.5098)


@pytest.mark.parametrize("bad", [dict(successes=3, targets=2), dict(successes=-1, targets=2)])
def test_risk_refuses_impossible_counts(bad: dict) -> None:
    with pytest.raises(InvalidParameterError):
        Risk("x", "y", baseline=0.0, **bad)


def test_risk_refuses_a_bad_alpha() -> None:
    with pytest.raises(InvalidParameterError, match="alpha"):
        Risk("x", "y", 1, 2, 0.0, alpha=1.5)


def test_risk_renders_and_serializes() -> None:
    r = Risk("linkage", "holds a voter list", 3, 4, 0.1, measures={"x": np.float64(0.5)},
             detail=({"target": "Bob", "breached": True},))
    c = Risk("linkage", "holds a voter list", 0, 4, 0.1, release="DP")
    r = r.with_contrast(c)
    doc = json.loads(json.dumps(r.to_dict()))
    assert doc["rate"] == 0.75 and doc["contrast"]["rate"] == 0.0
    assert doc["detail"] == [{"target": "Bob", "breached": True}]
    assert "<table>" in r._repr_html_() and "DP contrast" in r._repr_html_()
    assert str(r).startswith("linkage: 3 of 4 targets breached (75.0%")
    assert r.excess == pytest.approx(0.65)
