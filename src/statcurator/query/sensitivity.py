"""Sensitivity from the compiled plan: stability of the relational part × the sensitivity of
each aggregate, under the table's neighbour relation. Never from the data.

The relational part is summarized by a :class:`Neighbourhood`:

* ``rows_per_unit`` (r) — how many rows one privacy unit can put into the aggregation. With a
  person id, contribution bounding keeps at most ``max_rows`` = m rows per person (after any
  join), so r = m. With one row per person, r is the stability of the joins: the most
  repeated join key of the public tables (1 without joins).
* ``groups_per_unit`` (G) — how many groups one unit can touch: min(max_groups, m) for a
  person id (bounding enforces it), r for rows.
* ``bounded`` — neighbours differ by changing one unit's rows (bounded) or by adding or
  removing one unit (unbounded).

For a sum of per-row contributions in ``[low, high]`` (a NULL, a filtered row or a row in
another group contributes 0, so the range is widened to include 0: ``a = min(low, 0)``,
``b = max(high, 0)``, ``M = max(-a, b)``), the L1 sensitivity over all groups is

===========  ==============  =====================
neighbours   one group       GROUP BY (L1 over groups)
===========  ==============  =====================
unbounded    r·M             r·M
bounded      r·(b − a)       2·r·M
===========  ==============  =====================

so a count has sensitivity r unbounded, and a histogram has 1 unbounded and 2 bounded (the
textbook facts), a clamped sum over ``[0, U]`` has r·U.

>>> nb = Neighbourhood(bounded=False, rows_per_unit=1, groups_per_unit=1, grouped=True)
>>> nb.linear(0, 1), nb.replace(bounded=True).linear(0, 1)
(Fraction(1, 1), Fraction(2, 1))
>>> Neighbourhood(False, 5, 5, False).linear(0, 120)
Fraction(600, 1)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

__all__ = ["Neighbourhood"]


@dataclass(frozen=True)
class Neighbourhood:
    """How far apart the aggregation's inputs on neighbouring datasets can be."""

    bounded: bool
    rows_per_unit: int
    groups_per_unit: int
    grouped: bool

    def replace(self, **changes: object) -> Neighbourhood:
        return replace(self, **changes)  # type: ignore[arg-type]

    def linear(self, low: Fraction | int, high: Fraction | int) -> Fraction:
        """L1 sensitivity of per-group sums of a per-row contribution in ``[low, high]``."""
        a, b = min(Fraction(low), Fraction(0)), max(Fraction(high), Fraction(0))
        m = max(-a, b)
        r = self.rows_per_unit
        if not self.bounded:
            return r * m
        if not self.grouped:
            return r * (b - a)
        return 2 * r * m

    def distinct_units(self) -> Fraction:
        """L1 sensitivity of COUNT(DISTINCT unit) per group: a unit is in at most G groups."""
        g = self.groups_per_unit if self.grouped else 1
        return Fraction(g * (2 if self.bounded and self.grouped else 1))

    def quantile(self, p: Fraction) -> Fraction:
        """Sensitivity of the quantile score ``-|#below + #at/2 - p·n|`` of each candidate.

        Adding a row moves ``#below + #at/2 - p·n`` by 1 - p, 1/2 - p or -p, so at most
        max(p, 1 - p); changing a row within a group moves it by at most 1. Per group, the
        scores of different groups see disjoint rows, so one calibration covers them all.
        """
        s = max(Fraction(p), 1 - Fraction(p))
        r = self.rows_per_unit
        if not self.bounded:
            return r * s
        if not self.grouped:
            return Fraction(r)
        return 2 * r * s

    def partitions(self) -> int:
        """How many groups one unit can add or remove (partition selection's ℓ0 bound)."""
        return self.groups_per_unit * (2 if self.bounded else 1)

    def describe(self) -> str:
        kind = "bounded (change one unit)" if self.bounded else "unbounded (add/remove one unit)"
        return (f"{kind}; at most {self.rows_per_unit} row(s) per unit"
                + (f", {self.groups_per_unit} group(s) per unit" if self.grouped else ""))
