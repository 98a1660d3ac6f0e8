"""Quantiles with value intervals of stated coverage, several sharing one budget.

:class:`Quantiles` releases the q-quantiles of a numeric column:

* the point estimates — by the exponential mechanism over the public grid, one per level
  (:class:`~statcurator.mechanisms.quantile.QuantileMechanism`), or all at once by the
  joint exponential mechanism of Gillenwater, Joseph & Kulesza (2021)
  (:class:`~statcurator.mechanisms.quantile.JointQuantiles`) over public bins
  (``method="joint"``);
* for each quantile, a **value interval** [L, U] that holds the empirical q-quantile with
  probability at least 1 - ``alpha`` (two more exponential-mechanism releases on padded
  ranks; the proof is in :mod:`statcurator.mechanisms.quantile`) — an interval in the
  column's units, not a rank accuracy.

The budget ε is split: half for the points, half for the intervals (ε/(4m) per endpoint),
or all for the points with ``interval=False``. Pure ε-DP; under add/remove the score of
level q has sensitivity max(q, 1 - q) (half the noise for the median), under change-one 1.

>>> import numpy as np, warnings
>>> from statcurator.mechanisms import rng
>>> ages = np.arange(18, 90).repeat(50).astype(float)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(1):
...         est = quantiles(ages, [0.25, 0.5, 0.75], epsilon=1, bounds=(0, 120))
>>> [abs(v - t) <= 2 for v, t in zip(est.value, (35, 53, 71))]
[True, True, True]
>>> all(lo <= t <= hi for (lo, hi), t in zip(est.interval, (35, 53, 71)))
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PrivacyLoss, PureDP
from ..core.numbers import exact
from ..core.relations import ChangeOne, Relation
from ..core.schema import TableMeta
from ..mechanisms.quantile import (
    PERMUTE_AND_FLIP_POINTS,
    JointQuantiles,
    QuantileMechanism,
    quantile_levels,
)
from ._common import Statistic, clamp, column_values, default_grid
from ._protocol import Estimate

__all__ = ["Quantiles", "quantiles"]


@dataclass(frozen=True)
class Quantiles(Statistic):
    """DP quantiles of ``column`` at levels ``qs`` with (1 - alpha) value intervals.

    ``method``: ``"independent"`` (default: one selection per level on the fine grid, ε split
    evenly — ``selection="permute-and-flip"`` by default (McKenna & Sheldon 2020), or
    ``"exponential"``; a grid of more than 2^22 points uses the exponential mechanism) or ``"joint"`` (Gillenwater et al.'s joint mechanism on ``bins``
    public bins, default 1024: its error is at least a fraction of a bin, so it pays off
    for many levels or coarse ranges — see BENCHMARKS.md); ``grid`` the grid of the
    single-quantile mechanism and of the intervals (default ≈ range/2^16).

    >>> Quantiles("age", (0.5,), epsilon=1).columns()
    ('age',)
    """

    column: str
    qs: Any = (Fraction(1, 2),)
    epsilon: Any = None
    bounds: Any = None
    grid: Any = None
    alpha: float = 0.05
    interval: bool = True
    method: str = "independent"
    bins: int = 1024
    selection: str = "permute-and-flip"

    statistic = "quantiles"
    measures = (PureDP,)

    def __post_init__(self) -> None:
        if self.method not in ("joint", "independent"):
            raise InvalidParameterError(f"unknown quantile method {self.method!r}",
                                        remedy="use method='joint' or 'independent'")
        if not 0 < float(self.alpha) < 1:
            raise InvalidParameterError("alpha must be in (0, 1)", remedy="alpha=0.05")
        if self.selection not in ("permute-and-flip", "exponential"):
            raise InvalidParameterError(f"unknown selection {self.selection!r}",
                                        remedy="use 'permute-and-flip' or 'exponential'")

    def _columns(self) -> tuple[str, ...]:
        return (self.column,)

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        m = len(quantile_levels(self.qs))
        how = "joint exponential mechanism (Gillenwater et al. 2021)" \
            if m > 1 and self.method == "joint" else \
            "permute-and-flip (McKenna-Sheldon 2020)" if self.selection == "permute-and-flip" \
            else "exponential mechanism"
        return how + (", value intervals" if self.interval else "")

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        levels = quantile_levels(self.qs)
        m = len(levels)
        lo, hi = self._bounds(meta, self.column)
        grid = exact(self.grid, "grid") if self.grid is not None else default_grid(lo, hi, 16)
        eps = loss.epsilon  # type: ignore[attr-defined]
        eps_points = eps / 2 if self.interval else eps
        eps_end = eps / (4 * m)
        alpha = Fraction(str(self.alpha))
        joint = m > 1 and self.method == "joint"
        add_remove = not isinstance(relation, ChangeOne)

        def mech(e: Fraction, q: Fraction, selection: str = "exponential"
                 ) -> QuantileMechanism:
            return QuantileMechanism.for_level(e, lo, hi, grid, q, add_remove, selection)

        selection = self.selection
        if mech(eps_points, levels[0]).points > PERMUTE_AND_FLIP_POINTS:
            selection = "exponential"  # one coin per point would be too many
        single = [mech(eps_points / m, q, selection) for q in levels]
        ends = [mech(eps_end, q) for q in levels]
        joint_mech = JointQuantiles(eps_points, levels, lo, hi, self.bins) if joint else None

        def points(x: np.ndarray, size: int) -> np.ndarray:
            if joint_mech is not None:
                return joint_mech.release(x, size)
            units = single[0].to_units(x)
            cols = [mk.sample_units(units, q * units.size, size)
                    for mk, q in zip(single, levels, strict=True)]
            return np.stack(cols, axis=1).astype(np.float64) * float(grid)

        def run(table: Any, size: int | None = None) -> Any:
            x = clamp(column_values(table, self.column), lo, hi)
            if size is not None:
                return points(x, size)
            values = tuple(float(v) for v in points(x, 1)[0])
            intervals = None
            if self.interval:
                intervals = tuple(tuple(float(v) for v in mk.interval(x, q, alpha))
                                  for mk, q in zip(ends, levels, strict=True))
            details = {"levels": [float(q) for q in levels],
                       "selection": "joint" if joint_mech is not None else selection,
                       "interval_margin_ranks": [mk.margin(alpha) for mk in ends]
                       if self.interval else None}
            if m == 1:
                return Estimate("quantile", values[0],
                                intervals[0] if intervals else None,
                                float(self.alpha) if intervals else None, loss,
                                self._mechanism_name(loss), details=details)
            return Estimate("quantiles", values, intervals,
                            float(self.alpha) if intervals else None, loss,
                            self._mechanism_name(loss), details=details)

        return run


def quantiles(data: Any, qs: Any, column: str | None = None, *, epsilon: Any,
              bounds: Any = None, alpha: float = 0.05, interval: bool = True,
              method: str = "independent", bins: int = 1024, grid: Any = None,
              meta: Any = None) -> Estimate:
    """DP quantiles of ``data`` (a table and ``column``, or a 1-d array), local use.

    >>> import numpy as np
    >>> est = quantiles(np.linspace(0, 100, 5001), [0.5], epsilon=1, bounds=(0, 100))
    >>> abs(est.value - 50) < 2 and est.interval[0] <= 50 <= est.interval[1]
    True
    """
    col = column if column is not None else "x"
    table = {"x": np.asarray(data, dtype=float)} if column is None else data
    return Quantiles(col, tuple(qs), epsilon, bounds, grid, alpha, interval, method,
                     bins).run(table, meta)
