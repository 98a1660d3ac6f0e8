"""Transformations and measurements: privacy as a property of values, checked by their maps.

In the style of OpenDP's programming framework (Gaboardi, Hay & Vadhan 2020):

* a :class:`Transformation` is a function from datasets (or answers) to answers, with an
  input relation/metric, an output metric, and a **stability map** ``d_in -> d_out``: inputs
  at distance ``d_in`` give outputs at distance at most ``d_out`` (a sensitivity is the
  stability map at 1);
* a :class:`Measurement` is a randomized function with an input relation, an output privacy
  measure, and a **privacy map** ``d_in -> loss``: inputs at distance ``d_in`` give output
  distributions within ``loss``.

``transformation >> measurement`` chains them (the privacy map of the chain is the
measurement's map of the transformation's stability map); ``measurement.then(f)`` is
post-processing, free of charge. All maps work on exact :class:`~fractions.Fraction`
distances and return exact losses.

>>> from statcurator.core.relations import AddRemove, AbsoluteDistance
>>> from statcurator.core.measures import PureDP
>>> count = make_count(AddRemove())
>>> noisy = Measurement(AbsoluteDistance(), PureDP, lambda x: x + 0,     # (noise elided)
...                     lambda d: PureDP(2 * d), name="toy")
>>> (count >> noisy).map(1)
PureDP(epsilon=Fraction(2, 1))
>>> (count >> noisy)([4, 5, 6])
3
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .aggregates import clamped_sum, histogram, histogram_sensitivity, sum_sensitivity
from .errors import InvalidParameterError
from .measures import PrivacyLoss
from .numbers import exact
from .relations import (
    AbsoluteDistance,
    AddRemove,
    ChangeOne,
    L1Distance,
    Metric,
    PersonLevel,
    Relation,
    rows_of,
)

__all__ = [
    "Transformation",
    "Measurement",
    "chain",
    "make_count",
    "make_clamped_sum",
    "make_histogram",
]

Space = Relation | Metric


def _same_space(a: Space, b: Space) -> bool:
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Transformation:
    """A deterministic function with a stability map ``d_in -> d_out``.

    >>> from statcurator.core.relations import AddRemove, AbsoluteDistance
    >>> t = Transformation(AddRemove(), AbsoluteDistance(), len, lambda d: d, name="count")
    >>> t([1, 2, 3]), t.map(2)
    (3, Fraction(2, 1))
    """

    input_space: Space
    output_space: Space
    function: Callable[[Any], Any] = field(repr=False)
    stability_map: Callable[[Fraction], Fraction] = field(repr=False)
    name: str = "transformation"

    def __call__(self, data: Any) -> Any:
        return self.function(data)

    def map(self, d_in: object) -> Fraction:
        """The output distance bound for inputs at distance ``d_in``."""
        return exact(self.stability_map(exact(d_in, "d_in", allow_zero=True)), "d_out",
                     allow_zero=True)

    @property
    def sensitivity(self) -> Fraction:
        """The stability map at input distance 1."""
        return self.map(1)

    def __rshift__(self, other: Transformation | Measurement) -> Any:
        return chain(self, other)


@dataclass(frozen=True)
class Measurement:
    """A randomized function with a privacy map ``d_in -> loss``.

    ``output_measure`` is the loss type (PureDP, ApproxDP or ZCDP). ``cost`` is the map at
    distance 1 (one neighbour step of the input relation).

    >>> from statcurator.core.relations import AbsoluteDistance
    >>> from statcurator.core.measures import PureDP
    >>> m = Measurement(AbsoluteDistance(), PureDP, lambda x: x, lambda d: PureDP(d / 2))
    >>> m.cost, m.check(1, PureDP(1))
    (PureDP(epsilon=Fraction(1, 2)), True)
    >>> m.then(lambda x: x * 10)(3)            # post-processing keeps the map
    30
    """

    input_space: Space
    output_measure: type[PrivacyLoss]
    function: Callable[[Any], Any] = field(repr=False)
    privacy_map: Callable[[Fraction], PrivacyLoss] = field(repr=False)
    name: str = "measurement"

    def __call__(self, data: Any) -> Any:
        return self.function(data)

    def map(self, d_in: object) -> PrivacyLoss:
        """The privacy loss for inputs at distance ``d_in``."""
        loss = self.privacy_map(exact(d_in, "d_in", allow_zero=True))
        if not isinstance(loss, PrivacyLoss):
            raise InvalidParameterError(f"the privacy map of {self.name} returned {loss!r}",
                                        remedy="privacy maps must return PureDP/ApproxDP/ZCDP")
        return loss

    @property
    def cost(self) -> PrivacyLoss:
        """The loss for neighbouring inputs (distance 1)."""
        return self.map(1)

    def check(self, d_in: object, budget: PrivacyLoss) -> bool:
        """True when inputs at ``d_in`` are protected within ``budget``."""
        return self.map(d_in).fits(budget)

    def then(self, postprocess: Callable[[Any], Any], name: str | None = None) -> Measurement:
        """Post-processing: any function of the output costs nothing more."""
        fn = self.function
        return Measurement(self.input_space, self.output_measure,
                           lambda data: postprocess(fn(data)), self.privacy_map,
                           name or f"{self.name} then {getattr(postprocess, '__name__', 'f')}")

    def under(self, relation: Relation) -> Measurement:
        """The same measurement read under another dataset relation.

        Valid when this measurement's input relation is :class:`AddRemove`: a distance in
        ``relation`` is converted into rows added/removed (a change-one step is two), so an
        ε-DP add/remove mechanism is 2ε-DP under change-one — bounded ε-DP from unbounded ε/2.

        >>> from statcurator.core.relations import AddRemove, ChangeOne
        >>> from statcurator.core.measures import PureDP
        >>> m = Measurement(AddRemove(), PureDP, len, lambda d: PureDP(d / 2))
        >>> m.under(ChangeOne()).cost
        PureDP(epsilon=Fraction(1, 1))
        """
        if not isinstance(self.input_space, AddRemove):
            raise InvalidParameterError(
                f"{self.name} is defined under {self.input_space}, not add/remove",
                remedy="build the measurement under AddRemove() first")
        pmap = self.privacy_map
        return Measurement(relation, self.output_measure, self.function,
                           lambda d: pmap(relation.add_remove_distance(d)),
                           f"{self.name} under {relation}")


def chain(first: Transformation, second: Transformation | Measurement) -> Any:
    """``second ∘ first``: maps compose (``second.map(first.map(d))``).

    The output space of ``first`` must be the input space of ``second``.

    >>> double = Transformation(AbsoluteDistance(), AbsoluteDistance(), lambda x: 2 * x,
    ...                         lambda d: 2 * d, name="double")
    >>> chain(make_count(AddRemove()), double).map(1)
    Fraction(2, 1)
    """
    if not _same_space(first.output_space, second.input_space):
        raise InvalidParameterError(
            f"cannot chain {first.name} (output: {first.output_space}) into {second.name} "
            f"(input: {second.input_space})",
            remedy="insert a transformation whose output metric matches the next input")
    f1, f2 = first.function, second.function
    if isinstance(second, Transformation):
        s1, s2 = first.stability_map, second.stability_map
        return Transformation(first.input_space, second.output_space,
                              lambda data: f2(f1(data)), lambda d: s2(s1(d)),
                              f"{first.name} >> {second.name}")
    smap, pmap = first.stability_map, second.privacy_map
    return Measurement(first.input_space, second.output_measure, lambda data: f2(f1(data)),
                       lambda d: pmap(smap(d)), f"{first.name} >> {second.name}")


def _rows_per_unit(relation: Relation) -> int:
    return relation.max_rows if isinstance(relation, PersonLevel) else 1


def _column(column: Any) -> Callable[[Any], Any]:
    if column is None:
        return lambda row: row
    if callable(column):
        fn: Callable[[Any], Any] = column
        return fn
    return lambda row: row[column]


def make_count(relation: Relation) -> Transformation:
    """Count the rows. Stability: d under add/remove, 0 under change-one (the size is
    public), m·d for persons with up to m rows.

    >>> make_count(ChangeOne()).map(1), make_count(PersonLevel(0, max_rows=3)).map(1)
    (Fraction(0, 1), Fraction(3, 1))
    """
    if isinstance(relation, ChangeOne):
        smap: Callable[[Fraction], Fraction] = lambda d: Fraction(0)  # noqa: E731
    else:
        m = _rows_per_unit(relation)
        smap = lambda d: m * d  # noqa: E731
    return Transformation(relation, AbsoluteDistance(), lambda data: len(rows_of(data)), smap,
                          "count")


def make_clamped_sum(lower: object, upper: object, relation: Relation,
                     column: Any = None, nan: Any = "reject") -> Transformation:
    """The exact sum of a column clamped to public bounds (see :mod:`.aggregates`).

    Stability: d·max(|lower|, |upper|) (add/remove; ×m per person), d·(upper - lower)
    (change-one).

    >>> s = make_clamped_sum(0, 10, AddRemove())
    >>> s([3, 50, 2]), s.map(1)
    (Fraction(15, 1), Fraction(10, 1))
    """
    per_step = sum_sensitivity(lower, upper, relation)
    get = _column(column)
    return Transformation(relation, AbsoluteDistance(),
                          lambda data: clamped_sum([get(r) for r in rows_of(data)], lower, upper,
                                                   nan=nan),
                          lambda d: per_step * d, f"clamped sum [{lower}, {upper}]")


def make_histogram(categories: Sequence[Hashable], relation: Relation,
                   column: Any = None) -> Transformation:
    """Counts over public categories (an int64 vector) with L1 stability 1·d (add/remove),
    2·d (change-one), m·d (persons).

    >>> h = make_histogram(["F", "M"], ChangeOne())
    >>> h(["F", "M", "M"]).tolist(), h.map(1)
    ([1, 2], Fraction(2, 1))
    """
    per_step = histogram_sensitivity(relation)
    get = _column(column)
    cats = tuple(categories)
    return Transformation(relation, L1Distance(),
                          lambda data: histogram([get(r) for r in rows_of(data)], cats),
                          lambda d: per_step * d, "histogram")
