"""The independent re-check of a release's cost, from its certificate.

A release's cost comes from the compiler (:mod:`.compiler`, :mod:`.aggregates`,
:mod:`.sensitivity`). This module derives it again, apart from that code — it imports
none of it —, from what the certificate states about what actually runs and what the noise
was: the engine's contribution bounds, the clamp of every aggregated value (in the engine's
integers), the declared neighbour relation, the public tables' join multiplicities (read
again from the public tables), and each mechanism's parameters. Its sensitivity table is a
second, simpler one, written from the textbook facts:

=====================  ====================================  =============================
per-row contribution    add/remove a unit (r rows)            change a unit (r rows)
in [a, b] ∋ 0
=====================  ====================================  =============================
one sum                 r·max(−a, b)                          r·(b − a)
per-group sums (L1)     r·max(−a, b)                          2·r·max(−a, b)
per-group sums (L2)     r·max(−a, b)                          √2·r·max(−a, b)
=====================  ====================================  =============================

and a mechanism's loss from its noise: Laplace ε = Δ₁/b; Gaussian ρ = Δ₂²/(2σ²); the
exponential mechanism, calibrated to a score sensitivity Δu at ε, costs ε·Δu′/Δu when the
true score sensitivity is Δu′; partition selection, calibrated for ℓ partitions per unit,
costs (ε, δ)·ℓ′/ℓ when a unit may touch ℓ′. Under a Blowfish policy (bounded neighbours,
one row per unit, an unfiltered, ungrouped scan of the policy column alone — checked again
here), a sum of the column moves by at most the policy's longest clamped edge plus one grid
step. The curator refuses a release whose charged cost
is below what this module derives (the compiler must never under-charge); the tests run it
over every query of the SQL corpus and show that a compiler whose sensitivity is halved is
caught.

>>> from fractions import Fraction
>>> contribution_l1(Fraction(-1), Fraction(3), rows=2, bounded=False, grouped=True)
Fraction(6, 1)
>>> contribution_l1(Fraction(-1), Fraction(3), rows=1, bounded=True, grouped=False)
Fraction(4, 1)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..core.errors import InvalidParameterError

__all__ = ["Recheck", "recheck", "contribution_l1"]


def _f(x: Any) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(str(x))


def contribution_l1(a: Fraction, b: Fraction, *, rows: int, bounded: bool,
                    grouped: bool) -> Fraction:
    """L1 sensitivity of (per-group) sums of per-row contributions in ``[a, b]`` when one
    unit of ``rows`` rows is added or removed (or changed, ``bounded``)."""
    a, b = min(a, Fraction(0)), max(b, Fraction(0))  # a filtered or NULL row contributes 0
    reach = max(-a, b)
    if not bounded:
        return rows * reach
    return rows * (2 * reach if grouped else b - a)


def _l2_squared(l1: Fraction, *, bounded: bool, grouped: bool) -> Fraction:
    """The squared L2 sensitivity, exactly: a changed unit moves its rows from one group to
    another — two groups, each by half the L1 —; otherwise one group moves by all of it."""
    return l1 * l1 / 2 if (bounded and grouped) else l1 * l1


@dataclass(frozen=True)
class Recheck:
    """What the re-check derived: the loss per measurement and in total, and the reasons
    for any disagreement with the compiler (each naming the measurement)."""

    epsilon: Fraction = Fraction(0)
    delta: Fraction = Fraction(0)
    rho: Fraction = Fraction(0)
    per_measure: tuple[dict[str, Any], ...] = ()
    problems: tuple[str, ...] = field(default=())

    @property
    def passed(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict[str, Any]:
        return {"epsilon": str(self.epsilon), "delta": str(self.delta), "rho": str(self.rho),
                "passed": self.passed, "problems": list(self.problems)}


def _int_range(kind: str, clamp: Sequence[int] | None,
               clamp2: Sequence[int] | None) -> tuple[Fraction, Fraction]:
    """The range of one row's contribution to an engine term, in the engine's integers."""
    if kind in ("rows", "nonnull", "valid", "units", "distinct"):
        return Fraction(0), Fraction(1)
    if clamp is None:
        raise InvalidParameterError(f"the certificate gives no clamp for a {kind!r} term",
                                    remedy="report this: certificates state every clamp")
    lq, uq = (Fraction(v) for v in clamp)
    width = uq - lq
    if kind in ("sum", "distinct_sum"):  # a unit's rows add at most one value each
        return lq, uq
    if kind == "centered":  # 2q − (lq + uq)
        return -width, width
    if kind == "centered_sq":
        return Fraction(0), width * width
    if kind == "cross":
        if clamp2 is None:
            raise InvalidParameterError("the certificate gives no second clamp for a cross term",
                                        remedy="report this: certificates state every clamp")
        w2 = Fraction(clamp2[1]) - Fraction(clamp2[0])
        return -width * w2, width * w2
    raise InvalidParameterError(f"unknown term kind {kind!r} in the certificate",
                                remedy="re-check with the statcurator version that wrote it")


def recheck(cert: Mapping[str, Any], multiplicity: Any = None) -> Recheck:
    """Derive the cost of the release described by certificate ``cert``.

    ``multiplicity(table, columns)`` (optional) reads a public table's most repeated join key
    again; without it the certificate's stated multiplicities are used.
    """
    unit = cert["privacy_unit"]
    bounded = cert["neighbours"] == "bounded"
    grouped = bool(cert["grouped"])
    bounding = cert.get("bounding")
    problems: list[str] = []
    stability = 1
    for j in cert.get("joins", []):
        m = int(j["multiplicity"])
        if multiplicity is not None:
            again = int(multiplicity(j["table"], tuple(j["columns"])))
            if again > m:
                problems.append(f"join with {j['table']!r}: a key repeats {again} times in the "
                                f"public table, the certificate says {m}")
            m = max(m, again)
        stability *= max(m, 1)
    if unit.get("column") is not None:
        if bounding is None:
            problems.append("a person-level privacy unit without contribution bounding")
            rows, groups = 10**9, 10**9
        else:
            rows = int(bounding["max_rows"])
            groups = min(int(bounding.get("max_groups") or rows), rows)
            if rows > int(unit["max_rows"]):
                problems.append(f"bounding keeps {rows} rows per unit, more than the declared "
                                f"{unit['max_rows']}")
    else:
        size = int(unit.get("group_size") or 1)  # correlated rows with only a size bound
        rows = groups = stability * size
    if not grouped:
        groups = 1
    policy = cert.get("policy")
    if policy is not None and (not bounded or grouped or cert.get("joins") or cert.get("filtered")
                               or unit.get("column") is not None
                               or int(unit.get("group_size") or 1) > 1):
        problems.append("a policy's sensitivity was used outside its scope (it needs bounded "
                        "neighbours, one row per unit, no join, filter or group)")
        policy = None
    eps = dlt = rho = Fraction(0)
    per: list[dict[str, Any]] = []
    for m in cert["measurements"]:
        label, mech = m["label"], m["mechanism"]
        kind = m.get("term")
        if m["role"] == "selection":
            # a unit adds 1 to each of at most `groups` partitions' unit (or row) counts
            per_partition = 1 if kind == "units" or rows == 1 else rows
            ell = groups * (2 if bounded else 1) * per_partition
            stated = int(m["max_partitions"])
            e, d = _f(m["epsilon"]), _f(m["delta"])
            if ell > stated:
                e, d = e * ell / stated, d * ell / stated
            eps, dlt = eps + e, dlt + d
            per.append({"measure": label, "epsilon": e, "delta": d})
            continue
        if m["role"] == "quantile":
            p = _f(m["p"])
            reach = max(p, 1 - p)
            du = (rows * reach if not bounded else
                  Fraction(rows) if not grouped else 2 * rows * reach) * int(m["score_unit"])
            e = _f(m["epsilon"]) * du / _f(m["sensitivity"])
            if m.get("rho") is not None:
                rho += e * e / 2
                per.append({"measure": label, "rho": e * e / 2})
            else:
                eps += e
                per.append({"measure": label, "epsilon": e})
            continue
        a, b = _int_range(kind, m.get("clamp"), m.get("clamp2"))
        scale_v = _f(m["value_scale"])
        if kind == "units":
            l1 = groups * (2 if bounded and grouped else 1) * scale_v
        else:
            l1 = contribution_l1(a * scale_v, b * scale_v, rows=rows, bounded=bounded,
                                 grouped=grouped)
        if policy is not None and kind in ("sum", "centered") \
                and m.get("column") == policy["column"]:
            l1 = min(l1, _policy_edge(policy, m))
        grid = m.get("grid")
        if grouped and grid is not None and not m.get("integral"):
            # each changed group's value is rounded to the grid before the noise: one step more
            l1 += _f(grid) * groups * (2 if bounded else 1)
        if mech.startswith("laplace"):
            e = l1 / _f(m["scale"])
            eps += e
            per.append({"measure": label, "epsilon": e, "sensitivity": l1})
        elif mech.startswith("gaussian"):
            sigma = _f(m["scale"])
            r = _l2_squared(l1, bounded=bounded, grouped=grouped) / (2 * sigma * sigma)
            rho += r
            per.append({"measure": label, "rho": r, "sensitivity": l1})
        else:
            problems.append(f"{label}: unknown mechanism {mech!r}")
    return Recheck(eps, dlt, rho, tuple(per), tuple(problems))


def _policy_edge(policy: Mapping[str, Any], m: Mapping[str, Any]) -> Fraction:
    """How far one policy edge moves a clamped value of the policy's column: θ under a
    threshold, the widest block under a partition (each within the clamp), plus one grid
    step for the rounding — none for integers on the unit grid moved by an integer θ."""
    step = _f(m["step"])
    lq, uq = (Fraction(v) for v in m["clamp"])
    lo, hi = lq * step, uq * step
    if policy["graph"] == "threshold":
        theta = _f(policy["theta"])
        edge = min(theta, hi - lo)
        exact_grid = bool(m.get("input_integral")) and step == 1 and theta.denominator == 1
    elif policy["graph"] == "partition":
        widths = [min(max(_f(v) for v in block), hi) - max(min(_f(v) for v in block), lo)
                  for block in policy["blocks"]]
        edge, exact_grid = max([Fraction(0), *widths]), False
    else:
        return hi - lo
    return edge + (0 if exact_grid else step)


def exceeds(derived: Recheck, charged: Mapping[str, Any]) -> list[str]:
    """Where the charged loss (``{"epsilon", "delta", "rho"}``) is below the derived one."""
    out = []
    for key in ("epsilon", "delta", "rho"):
        mine = getattr(derived, key)
        theirs = _f(charged.get(key) or 0)
        if mine > theirs:
            out.append(f"{key}: the re-check derives {float(mine):.6g}, the compiler charged "
                       f"{float(theirs):.6g}")
    return out
