"""Composition of measurements: sequential (costs add), parallel (max), group privacy.

* **Sequential composition** (Dwork, McSherry, Nissim & Smith 2006; Bun & Steinke 2016 for
  zCDP): running several measurements on the same data costs the sum of their losses.
* **Parallel composition** (McSherry 2009): measurements on *disjoint* parts of the data,
  where one privacy unit falls in one part, cost the maximum of their losses. Under
  add/remove neighbours, d units land in at most d parts, and every privacy map here is
  superadditive (linear or quadratic in d), so the loss is at most max_i map_i(d).
* **Group privacy**: datasets k units apart are protected with kε (pure), (kε,
  k·e^((k-1)ε)δ) (approximate) or k²ρ (zCDP) — see
  :meth:`~statcurator.core.measures.PrivacyLoss.group`.
* **Post-processing** is free: :meth:`~statcurator.core.measurement.Measurement.then`.

>>> from fractions import Fraction
>>> from statcurator.core.measures import PureDP, ZCDP
>>> compose_losses([PureDP(0.1)] * 10 + [PureDP(0.001)] * 1000)
PureDP(epsilon=Fraction(2, 1))
>>> parallel_loss([PureDP(0.5), PureDP(0.25)])
PureDP(epsilon=Fraction(1, 2))
>>> group_privacy(ZCDP(Fraction(1, 8)), 2)
ZCDP(rho=Fraction(1, 2))
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from .errors import InvalidParameterError
from .measurement import Measurement
from .measures import ZERO, PrivacyLoss, maximum
from .relations import AddRemove, rows_of

__all__ = [
    "compose_losses",
    "parallel_loss",
    "group_privacy",
    "sequential",
    "parallel",
    "postprocess",
]


def compose_losses(losses: Iterable[PrivacyLoss]) -> PrivacyLoss:
    """Sequential (basic) composition of losses: they add, exactly.

    >>> from fractions import Fraction
    >>> from statcurator.core.measures import ApproxDP, PureDP
    >>> compose_losses([PureDP(1), ApproxDP(1, Fraction(1, 10**6))])
    ApproxDP(epsilon=Fraction(2, 1), delta=Fraction(1, 1000000))
    """
    total: PrivacyLoss = ZERO
    for loss in losses:
        total = total + loss
    return total


def parallel_loss(losses: Iterable[PrivacyLoss]) -> PrivacyLoss:
    """Parallel composition of losses over disjoint parts: the component-wise maximum.

    >>> from fractions import Fraction
    >>> from statcurator.core.measures import ApproxDP, PureDP
    >>> parallel_loss([PureDP(1), ApproxDP(Fraction(1, 2), Fraction(1, 10**9))])
    ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000000))
    """
    out: PrivacyLoss = ZERO
    for loss in losses:
        out = maximum(out, loss)
    return out


def group_privacy(loss: PrivacyLoss, k: int) -> PrivacyLoss:
    """The loss towards datasets ``k`` privacy units apart (see ``PrivacyLoss.group``).

    >>> from statcurator.core.measures import PureDP
    >>> from fractions import Fraction
    >>> group_privacy(PureDP(Fraction(1, 10)), 4)
    PureDP(epsilon=Fraction(2, 5))
    """
    return loss.group(k)


def sequential(measurements: Sequence[Measurement], name: str = "sequential") -> Measurement:
    """Run every measurement on the same data; the privacy map is the sum of the maps.

    >>> from statcurator.core.measures import PureDP
    >>> from statcurator.core.relations import AbsoluteDistance
    >>> m = Measurement(AbsoluteDistance(), PureDP, lambda x: x, lambda d: PureDP(d))
    >>> both = sequential([m, m])
    >>> both(7), both.cost
    ((7, 7), PureDP(epsilon=Fraction(2, 1)))
    """
    ms = list(measurements)
    if not ms:
        raise InvalidParameterError("nothing to compose", remedy="pass at least one measurement")
    space = ms[0].input_space
    for m in ms[1:]:
        if type(m.input_space) is not type(space) or m.input_space != space:
            raise InvalidParameterError(
                f"{m.name} reads {m.input_space}, {ms[0].name} reads {space}",
                remedy="compose measurements over the same input relation")
    measure = type(compose_losses(m.cost for m in ms))
    return Measurement(space, measure, lambda data: tuple(m(data) for m in ms),
                       lambda d: compose_losses(m.map(d) for m in ms), name)


def parallel(partition: Callable[[Any], Hashable],
             measurements: Measurement | Mapping[Hashable, Measurement],
             keys: Sequence[Hashable], name: str = "parallel") -> Measurement:
    """Split the rows by ``partition(row)`` over the public ``keys`` and measure each part.

    ``measurements`` is one measurement for every part, or one per key. Rows whose key is
    not listed are dropped (the keys are public, so this leaks nothing). Input relation:
    add/remove rows; the privacy map is max over parts of their maps (parallel composition).

    >>> from statcurator.core.measures import PureDP
    >>> from statcurator.core.measurement import make_count
    >>> from statcurator.core.relations import AbsoluteDistance
    >>> count = make_count(AddRemove()) >> Measurement(
    ...     AbsoluteDistance(), PureDP, lambda x: x, lambda d: PureDP(d / 2))
    >>> by_sex = parallel(lambda row: row[0], count, keys=["F", "M"])
    >>> by_sex([("F", 1), ("M", 2), ("M", 3)]), by_sex.cost
    ({'F': 1, 'M': 2}, PureDP(epsilon=Fraction(1, 2)))
    """
    keys = list(keys)
    if len(set(keys)) != len(keys):
        raise InvalidParameterError("a partition key is listed twice",
                                    remedy="list each public key once")
    per_key = ({k: measurements for k in keys} if isinstance(measurements, Measurement)
               else {k: measurements[k] for k in keys})
    for m in per_key.values():
        if not isinstance(m.input_space, AddRemove):
            raise InvalidParameterError(
                f"parallel composition needs add/remove measurements; {m.name} reads "
                f"{m.input_space}", remedy="build the per-part measurements under AddRemove()")
    measure = type(parallel_loss(m.cost for m in per_key.values()))

    def run(data: Any) -> dict[Hashable, Any]:
        parts: dict[Hashable, list[Any]] = {k: [] for k in keys}
        for row in rows_of(data):
            part = parts.get(partition(row))
            if part is not None:
                part.append(row)
        return {k: per_key[k](parts[k]) for k in keys}

    return Measurement(AddRemove(), measure, run,
                       lambda d: parallel_loss(m.map(d) for m in per_key.values()), name)


def postprocess(measurement: Measurement, function: Callable[[Any], Any]) -> Measurement:
    """Post-processing: ``function(measurement(data))`` with the same privacy map.

    >>> from statcurator.core.measures import PureDP
    >>> from statcurator.core.relations import AbsoluteDistance
    >>> m = Measurement(AbsoluteDistance(), PureDP, lambda x: x, lambda d: PureDP(d))
    >>> postprocess(m, lambda v: max(v, 0))(-3)
    0
    """
    return measurement.then(function)
