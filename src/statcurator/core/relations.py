"""Neighbour relations between datasets, and distances between query outputs.

A differential-privacy guarantee is relative to *which datasets count as neighbours*:

* :class:`AddRemove` — unbounded DP: D' is D with one row added or removed. Its distance is
  the size of the symmetric difference of the two multisets of rows.
* :class:`ChangeOne` — bounded DP: D and D' have the same (public) size and D' is D with
  one row changed. Its distance is the number of rows to change (∞ between sizes that differ).
* :class:`PersonLevel` — the privacy unit is a person who owns up to ``max_rows`` rows
  (identified by a key); D' adds or removes one person with all their rows. A person whose
  rows differ counts as a removal plus an addition.

Each relation has a ``distance(D, D')`` computed on two concrete datasets — sequences of rows
(tuples, dicts, scalars), 2-d numpy arrays, pyarrow tables or pandas data frames — so tests
can check a mechanism on real neighbours. A change is a removal plus an addition, so
``ChangeOne`` distance d is ``AddRemove`` distance 2d: a mechanism that is ε/2-DP under
add/remove is ε-DP under change-one (:meth:`ChangeOne.add_remove_distance`).

Output metrics (:class:`AbsoluteDistance`, :class:`L1Distance`, :class:`L2Distance`) measure
how far apart two query *answers* are; sensitivities are distances in these metrics.

>>> d1 = [("Alice", "Y"), ("Bob", "Y"), ("Chris", "N"), ("Doug", "N")]
>>> d2 = [("Alice", "Y"), ("Bob", "Y"), ("Chris", "Y"), ("Doug", "N")]
>>> ChangeOne().distance(d1, d2), AddRemove().distance(d1, d2)
(1, 2)
>>> AddRemove().distance(d1, d1[:3])
1
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .errors import DataError, InvalidParameterError
from .numbers import exact, exact_value

__all__ = [
    "Relation",
    "AddRemove",
    "ChangeOne",
    "PersonLevel",
    "Metric",
    "AbsoluteDistance",
    "L1Distance",
    "L2Distance",
    "LInfDistance",
    "DiscreteDistance",
    "rows_of",
]


def _hashable(row: Any) -> Hashable:
    if isinstance(row, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in row.items()))
    if isinstance(row, list | tuple):
        return tuple(_hashable(v) for v in row)
    if hasattr(row, "tolist") and not isinstance(row, str | bytes):
        return _hashable(row.tolist())
    if isinstance(row, float) and math.isnan(row):
        return ("<nan>",)  # NaN != NaN, but two missing values are the same row content
    return row  # type: ignore[no-any-return]  # rows hold hashable scalars


def rows_of(data: Any) -> list[Any]:
    """The rows of a dataset as a list (sequences, numpy arrays, pyarrow, pandas, Dataset).

    >>> rows_of([1, 2, 2])
    [1, 2, 2]
    >>> import numpy as np
    >>> rows_of(np.array([[1, 2], [3, 4]]))
    [[1, 2], [3, 4]]
    """
    if hasattr(data, "to_pylist"):  # pyarrow Table / RecordBatch
        return list(data.to_pylist())
    if hasattr(data, "itertuples"):  # pandas DataFrame
        return [tuple(r) for r in data.itertuples(index=False)]
    table = getattr(data, "table", None)
    if table is not None and hasattr(table, "to_pylist"):  # statcurator Dataset
        return list(table.to_pylist())
    if hasattr(data, "tolist"):  # numpy
        return list(data.tolist())
    if isinstance(data, str | bytes) or not isinstance(data, Iterable):
        raise DataError(f"cannot read rows from a {type(data).__name__}",
                        remedy="pass a list of rows, a numpy array, a pyarrow table or a "
                               "pandas data frame")
    return list(data)


def _multiset(data: Any) -> Counter[Hashable]:
    return Counter(_hashable(r) for r in rows_of(data))


class Relation:
    """A neighbour relation on datasets; ``distance`` is the number of neighbour steps.

    >>> isinstance(AddRemove(), Relation), str(ChangeOne())
    (True, 'change one row')
    """

    name = "relation"

    def distance(self, d1: Any, d2: Any) -> int | float:  # pragma: no cover - abstract
        """The number of neighbour steps from ``d1`` to ``d2`` (∞ if none leads there)."""
        raise NotImplementedError

    def are_neighbours(self, d1: Any, d2: Any) -> bool:
        """True when the two datasets are at distance exactly 1."""
        return self.distance(d1, d2) == 1

    def add_remove_distance(self, d: object) -> Fraction:
        """An upper bound, in rows added or removed, of a distance ``d`` in this relation."""
        raise NotImplementedError  # pragma: no cover

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class AddRemove(Relation):
    """Unbounded neighbours: add or remove one row (the symmetric distance of multisets).

    >>> AddRemove().distance([1, 2, 3], [1, 2, 3, 3])
    1
    """

    name = "add/remove one row"

    def distance(self, d1: Any, d2: Any) -> int:
        a, b = _multiset(d1), _multiset(d2)
        return sum(((a - b) + (b - a)).values())

    def add_remove_distance(self, d: object) -> Fraction:
        return exact(d, "distance", allow_zero=True)


@dataclass(frozen=True)
class ChangeOne(Relation):
    """Bounded neighbours: same size, one row changed (∞ when the sizes differ).

    >>> ChangeOne().distance([1, 2, 3], [1, 2, 4])
    1
    >>> ChangeOne().distance([1, 2], [1, 2, 3])
    inf
    >>> ChangeOne().add_remove_distance(1)    # a change = a removal + an addition
    Fraction(2, 1)
    """

    name = "change one row"

    def distance(self, d1: Any, d2: Any) -> int | float:
        a, b = _multiset(d1), _multiset(d2)
        if sum(a.values()) != sum(b.values()):
            return math.inf
        return sum((a - b).values())

    def add_remove_distance(self, d: object) -> Fraction:
        return 2 * exact(d, "distance", allow_zero=True)


@dataclass(frozen=True)
class PersonLevel(Relation):
    """Person-level neighbours: add or remove one person who owns up to ``max_rows`` rows.

    ``key`` finds the person in a row: a dict key, a tuple index, or a function of the row.
    A person present in both datasets with different rows is at distance 2 (removed, then
    added back). ``distance`` raises :class:`DataError` when someone has more than
    ``max_rows`` rows: bound the contributions first.

    >>> rel = PersonLevel(key=0, max_rows=2)
    >>> d1 = [("p1", "flu"), ("p1", "cold"), ("p2", "flu")]
    >>> rel.distance(d1, d1[2:]), rel.add_remove_distance(1)
    (1, Fraction(2, 1))
    """

    key: Any = 0
    max_rows: int = 1

    name = "add/remove one person"

    def __post_init__(self) -> None:
        if isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int) or self.max_rows < 1:
            raise InvalidParameterError(f"max_rows must be a positive integer, got {self.max_rows!r}",
                                        remedy="pass the largest number of rows a person may own")

    def _key(self) -> Callable[[Any], Hashable]:
        if callable(self.key):
            return lambda row: _hashable(self.key(row))
        return lambda row: _hashable(row[self.key])

    def _people(self, data: Any) -> dict[Hashable, Counter[Hashable]]:
        key = self._key()
        people: dict[Hashable, Counter[Hashable]] = {}
        for row in rows_of(data):
            people.setdefault(key(row), Counter())[_hashable(row)] += 1
        for person, rows in people.items():
            if sum(rows.values()) > self.max_rows:
                raise DataError(f"person {person!r} owns {sum(rows.values())} rows, more than "
                                f"max_rows={self.max_rows}",
                                remedy="bound each person's contributions (keep at most "
                                       "max_rows rows per person) before comparing")
        return people

    def distance(self, d1: Any, d2: Any) -> int:
        a, b = self._people(d1), self._people(d2)
        dist = 0
        for person in a.keys() | b.keys():
            if person not in a or person not in b:
                dist += 1
            elif a[person] != b[person]:
                dist += 2
        return dist

    def add_remove_distance(self, d: object) -> Fraction:
        """d persons added or removed change at most d·max_rows rows."""
        return exact(d, "distance", allow_zero=True) * self.max_rows


# -- output metrics --------------------------------------------------------------------------


class Metric:
    """A distance between query answers (the sensitivity of a query is one).

    >>> isinstance(L1Distance(), Metric), str(L2Distance())
    (True, 'L2 distance')
    """

    name = "metric"

    def distance(self, x: Any, y: Any) -> Fraction:  # pragma: no cover - abstract
        """The exact distance between two answers."""
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


def _vector(x: Any) -> list[Fraction]:
    if hasattr(x, "tolist"):
        x = x.tolist()
    if isinstance(x, list | tuple):
        return [exact_value(v) for v in x]
    return [exact_value(x)]


@dataclass(frozen=True)
class AbsoluteDistance(Metric):
    """|x - y| between two numbers, exactly.

    >>> AbsoluteDistance().distance(2, 3.5)
    Fraction(3, 2)
    """

    name = "absolute distance"

    def distance(self, x: Any, y: Any) -> Fraction:
        return abs(exact_value(x) - exact_value(y))


@dataclass(frozen=True)
class L1Distance(Metric):
    """Σ|x_i - y_i| between two vectors of the same length.

    >>> L1Distance().distance([1, 2, 3], [1, 3, 1])
    Fraction(3, 1)
    """

    name = "L1 distance"

    def distance(self, x: Any, y: Any) -> Fraction:
        a, b = _vector(x), _vector(y)
        if len(a) != len(b):
            raise DataError("vectors of different lengths", remedy="compare equal-length vectors")
        return sum((abs(u - v) for u, v in zip(a, b, strict=True)), Fraction(0))


@dataclass(frozen=True)
class L2Distance(Metric):
    """sqrt(Σ(x_i - y_i)²), returned as the exact *square* via :meth:`squared` and rounded
    up (to 2^-48) by :meth:`distance`.

    >>> L2Distance().distance([0, 0], [3, 4])
    Fraction(5, 1)
    """

    name = "L2 distance"

    def squared(self, x: Any, y: Any) -> Fraction:
        """Σ(x_i - y_i)², exactly."""
        a, b = _vector(x), _vector(y)
        if len(a) != len(b):
            raise DataError("vectors of different lengths", remedy="compare equal-length vectors")
        return sum(((u - v) ** 2 for u, v in zip(a, b, strict=True)), Fraction(0))

    def distance(self, x: Any, y: Any) -> Fraction:
        from .numbers import round_up, sqrt_bounds

        lo, hi = sqrt_bounds(self.squared(x, y), 60)
        return lo if lo == hi else round_up(hi, bits=48)


@dataclass(frozen=True)
class LInfDistance(Metric):
    """max_i |x_i - y_i| between two vectors of the same length (the sensitivity of a vector
    of scores, as the exponential mechanism reads it).

    >>> LInfDistance().distance([1, 2, 3], [1, 4, 2])
    Fraction(2, 1)
    """

    name = "L∞ distance"

    def distance(self, x: Any, y: Any) -> Fraction:
        a, b = _vector(x), _vector(y)
        if len(a) != len(b):
            raise DataError("vectors of different lengths", remedy="compare equal-length vectors")
        return max((abs(u - v) for u, v in zip(a, b, strict=True)), default=Fraction(0))


@dataclass(frozen=True)
class DiscreteDistance(Metric):
    """0 between equal values, 1 between different ones (one respondent's answer).

    >>> DiscreteDistance().distance("yes", "no"), DiscreteDistance().distance(1, 1)
    (Fraction(1, 1), Fraction(0, 1))
    """

    name = "discrete distance"

    def distance(self, x: Any, y: Any) -> Fraction:
        return Fraction(0 if _hashable(x) == _hashable(y) else 1)
