"""Sensitivity from the compiled plan: stability of the relational part × the sensitivity of
each aggregate, under the table's neighbour relation. Never from the data.

The relational part is summarized by a :class:`Neighbourhood`:

* ``relation`` — the dataset's neighbour relation as a core value
  (:class:`~statcurator.core.relations.AddRemove`, ``ChangeOne`` or ``PersonLevel``): what
  one step of privacy is, and what a privacy map's ``d`` counts; ``bounded`` says a step
  *changes* one unit (bounded DP) rather than adding or removing one;
* ``rows_per_unit`` (r) — how many rows one privacy unit can put into the aggregation. With a
  person id, contribution bounding keeps at most ``max_rows`` = m rows per person (after any
  join), so r = m. With one row per person, r is the stability of the joins: the most
  repeated join key of the public tables (1 without joins).
* ``groups_per_unit`` (G) — how many groups one unit can touch: min(max_groups, m) for a
  person id (bounding enforces it), r for rows.
* ``group_size`` (k) — set when the unit is a group of up to k correlated rows that no
  column identifies (``privacy_unit = { group_size = k }``): nothing can be bounded, so each
  of the k rows counts with the stability c of the joins, r = G = k·c, and every sensitivity
  below is k times the per-row one — group privacy (Dwork–Smith): the noise that protects
  one row at kε protects the group at ε.

The per-row sensitivities come from the one table in :func:`statcurator.core.aggregates.
sum_sensitivity`, applied to the *row-level* relation of the aggregation's input (add/remove
or change a row) and multiplied by r. A per-row contribution range is first widened to
contain 0 — a NULL, a filtered row or a row in another group contributes 0 —, so a count has
sensitivity r unbounded, a histogram 1 unbounded and 2 bounded (the textbook facts), and a
clamped sum over ``[0, U]`` has r·U.

>>> from statcurator.core.relations import AddRemove, ChangeOne, PersonLevel
>>> nb = Neighbourhood(AddRemove(), rows_per_unit=1, groups_per_unit=1, grouped=True)
>>> nb.linear(0, 1), nb.replace(relation=ChangeOne(), bounded=True).linear(0, 1)
(Fraction(1, 1), Fraction(2, 1))
>>> Neighbourhood(PersonLevel("pid", max_rows=5), 5, 5, False).linear(0, 120)
Fraction(600, 1)
>>> households = Neighbourhood(PersonLevel(None, max_rows=4), 4, 4, True, group_size=4)
>>> households.linear(0, 1), households.partitions()
(Fraction(4, 1), 4)
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction

from ..core.aggregates import sum_sensitivity
from ..core.numbers import round_up, sqrt_bounds
from ..core.relations import AddRemove, ChangeOne, Relation

__all__ = ["Neighbourhood"]


@dataclass(frozen=True)
class Neighbourhood:
    """How far apart the aggregation's inputs on neighbouring datasets can be."""

    relation: Relation
    rows_per_unit: int
    groups_per_unit: int
    grouped: bool
    bounded: bool = False
    group_size: int | None = None

    @classmethod
    def of(cls, relation: Relation, rows_per_unit: int, groups_per_unit: int,
           grouped: bool) -> Neighbourhood:
        """The neighbourhood of a relation (bounded when it is change-one).

        >>> Neighbourhood.of(ChangeOne(), 1, 1, False).bounded
        True
        """
        return cls(relation, rows_per_unit, groups_per_unit, grouped,
                   isinstance(relation, ChangeOne))

    def replace(self, **changes: object) -> Neighbourhood:
        return replace(self, **changes)  # type: ignore[arg-type]

    def _row_relation(self) -> Relation:
        # after the joins and the bounding, a step of the dataset relation is r steps of
        # its row-level form (rows added/removed, or rows changed)
        return ChangeOne() if self.bounded else AddRemove()

    def linear(self, low: Fraction | int, high: Fraction | int) -> Fraction:
        """L1 sensitivity of per-group sums of a per-row contribution in ``[low, high]``."""
        a, b = min(Fraction(low), Fraction(0)), max(Fraction(high), Fraction(0))
        return self.rows_per_unit * sum_sensitivity(a, b, self._row_relation(),
                                                    groups=self.grouped)

    def l2(self, low: Fraction | int, high: Fraction | int) -> Fraction:
        """L2 sensitivity (rounded up) of the same per-group sums, for Gaussian noise.

        Unbounded: a unit's r rows may all fall in one group, so L2 = L1 = r·M. Bounded and
        grouped: r rows leave one group for another, two groups move by r·M each, so
        L2 = √2·r·M (L1 is 2·r·M). Ungrouped: L2 = L1.

        >>> float(Neighbourhood.of(ChangeOne(), 1, 1, True).l2(0, 1))
        1.4142135623...
        """
        return self.l2_of(self.linear(low, high))

    def l2_of(self, l1: Fraction) -> Fraction:
        """The L2 sensitivity of per-group sums whose L1 sensitivity is ``l1`` (see
        :meth:`l2`): equal when one unit moves one group, l1/√2 when a change moves two."""
        if not (self.bounded and self.grouped):
            return l1
        return round_up(sqrt_bounds(l1 * l1 / 2, 64)[1], 60)

    def distinct_units(self) -> Fraction:
        """L1 sensitivity of COUNT(DISTINCT unit) per group: a unit is in at most G groups,
        where it counts once each (a histogram of units over G groups)."""
        g = self.groups_per_unit if self.grouped else 1
        return g * sum_sensitivity(0, 1, self._row_relation(), groups=self.grouped)

    def distinct_values(self) -> Fraction:
        """L1 sensitivity of COUNT(DISTINCT x) per group for any column x: a unit's r rows
        can create or remove at most r distinct values, each in one group."""
        return self.rows_per_unit * sum_sensitivity(0, 1, self._row_relation(),
                                                    groups=self.grouped)

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
        """The neighbour relation in words.

        >>> from statcurator.core.relations import PersonLevel
        >>> Neighbourhood(PersonLevel(None, max_rows=4), 4, 4, False, group_size=4).describe()
        'unbounded (add/remove one unit); a unit is a group of up to 4 correlated rows (no key column: group privacy, every sensitivity ×4); at most 4 row(s) per unit'
        """
        kind = "bounded (change one unit)" if self.bounded else "unbounded (add/remove one unit)"
        if self.group_size is not None:
            kind += (f"; a unit is a group of up to {self.group_size} correlated rows (no key "
                     f"column: group privacy, every sensitivity ×{self.group_size})")
        return (f"{kind}; at most {self.rows_per_unit} row(s) per unit"
                + (f", {self.groups_per_unit} group(s) per unit" if self.grouped else ""))
