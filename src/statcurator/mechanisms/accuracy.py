"""From a target accuracy to a privacy parameter: "±x with 95% confidence" → ε (or ρ).

The analyst's question is usually the reverse of the mechanism's: not "what does ε = 0.5
give me?" but "what must I spend to get my count within ±10, 95% of the time?". For the
exact discrete noise laws, :func:`epsilon_for_accuracy` returns the smallest privacy
parameter, rounded *up* to six significant digits, for which the mechanism's
``accuracy(alpha)`` is at most the half-width asked for — and checks it on the mechanism
itself, so the promise holds for exactly the mechanism that will run.

>>> epsilon_for_accuracy(10, alpha=0.05)          # a count within ±10 at 95%
Fraction(284349, 1000000)
>>> LaplaceMechanism(1, Fraction(284349, 1000000)).accuracy(0.05)
10.0
>>> LaplaceMechanism(1, Fraction(284348, 1000000)).accuracy(0.05)   # one digit less: ±11
11.0

(The continuous Laplace would need ln(20)/10 = 0.2996: integer noise within ±10 means
|noise| < 11, a slightly easier target.)
"""

from __future__ import annotations

import math
from fractions import Fraction

from ..core.errors import InvalidParameterError
from ..core.numbers import exact, round_up_decimal
from ._base import as_alpha, dgauss_tail, dlap_tail, grid_sensitivity, grid_value
from .gaussian import GaussianMechanism
from .laplace import LaplaceMechanism

__all__ = ["epsilon_for_accuracy"]

_MECHANISMS = ("laplace", "geometric", "gaussian")


def epsilon_for_accuracy(halfwidth: object, alpha: object = Fraction(1, 20),
                         sensitivity: object = 1, mechanism: str = "laplace",
                         grid: object = None) -> Fraction:
    """The smallest ε (ρ for ``mechanism="gaussian"``) giving ``accuracy(alpha) <= halfwidth``.

    ``halfwidth`` is in output units; ``sensitivity`` is Δ (L2 for the Gaussian); ``grid`` as
    for the mechanisms (None: integer outputs). The result is rounded up to 6 significant
    digits, so it is the smallest such *six-digit* value.

    >>> epsilon_for_accuracy(10, alpha=0.05, sensitivity=2)
    Fraction(284349, 500000)
    >>> rho = epsilon_for_accuracy(10, alpha=0.05, mechanism="gaussian")
    >>> GaussianMechanism(1, rho).accuracy(0.05) <= 10
    True
    """
    if mechanism not in _MECHANISMS:
        raise InvalidParameterError(f"unknown mechanism {mechanism!r} for epsilon_for_accuracy",
                                    remedy="use one of: " + ", ".join(_MECHANISMS))
    h = exact(halfwidth, "halfwidth")
    a = as_alpha(alpha)
    delta_s = exact(sensitivity, "sensitivity")
    g = grid_value(grid)
    step = g if g is not None else Fraction(1)
    units = grid_sensitivity(delta_s, step)
    hmax = int(h / step)  # the largest half-width in grid units that is still <= h
    if mechanism == "gaussian":
        return _rho_for(hmax, a, units, delta_s, g, h)
    return _epsilon_for(hmax, a, units, delta_s, g, h)


def _epsilon_for(hmax: int, a: Fraction, units: int, sens: Fraction, grid: Fraction | None,
                 h: Fraction) -> Fraction:
    # P(|X| > hmax) = 2 q^(hmax+1)/(1+q), q = e^(-ε/units): solve in floats, then verify
    # exactly on the mechanism and nudge upwards if needed
    def tail(eps: float) -> float:
        q = math.exp(-eps / units)
        return 2 * q ** (hmax + 1) / (1 + q)

    lo, hi = 1e-12, 1.0
    while tail(hi) > float(a):
        hi *= 2
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if tail(mid) > float(a):
            lo = mid
        else:
            hi = mid
    eps = round_up_decimal(Fraction(hi), 6)
    while dlap_tail(Fraction(units) / eps, hmax) > a:
        eps = round_up_decimal(eps * Fraction(1000001, 1000000), 6)
    mech = LaplaceMechanism(sens, eps, grid)
    if mech.accuracy(a) > h:  # pragma: no cover - guarded by the exact tail above
        raise AssertionError("epsilon_for_accuracy failed to certify its result")
    return eps


def _rho_for(hmax: int, a: Fraction, units: int, sens: Fraction, grid: Fraction | None,
             h: Fraction) -> Fraction:
    # the tail decreases with ρ (σ² = units²/(2ρ)); bisection on log ρ
    def tail(rho: float) -> float:
        return dgauss_tail(Fraction(units**2) / (2 * Fraction(rho)), hmax)

    target = float(a) * (1 - 1e-9)
    lo, hi = 1e-12, 1.0
    while tail(hi) > target:
        hi *= 4
    for _ in range(100):
        mid = math.sqrt(lo * hi)
        if tail(mid) > target:
            lo = mid
        else:
            hi = mid
    rho = round_up_decimal(Fraction(hi), 6)
    while GaussianMechanism(sens, rho, grid).accuracy(a) > h:
        rho = round_up_decimal(rho * Fraction(1000001, 1000000), 6)
    return rho
