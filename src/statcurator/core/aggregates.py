"""Clamped aggregates whose sensitivity is what it is declared to be.

A DP sum is only as private as its sensitivity bound. Three classic ways to break it
(Casacuberta, Shoemate, Vadhan & Wagaman, *Widespread Underestimation of Sensitivity in
Differentially Private Libraries*, CCS 2022) are handled here:

* **values outside the bounds** — every value is clamped to the public ``[lower, upper]``
  before aggregation; ±∞ clamp to the bounds;
* **missing values** — NaN is refused (``nan="reject"``, the default) or replaced by a
  *public* constant inside the bounds, never dropped silently (dropping would change the
  count under bounded neighbours);
* **floating-point rounding and overflow** — sums are computed *exactly* (as rationals, from
  the binary mantissas of the floats), so they never overflow and never round: the difference
  between neighbours is exactly bounded by the sensitivity. The mechanisms then round the
  exact value to their public grid, which they account for.

The sensitivities: a clamped sum moves by at most max(|lower|, |upper|) when a row is added
or removed and by at most upper - lower when a row changes; a count moves by 1 (add/remove)
or 0 (change-one: the size is public); a histogram over public bins moves by 1 in L1
(add/remove) or 2 (change-one). A person with up to m rows multiplies the add/remove
sensitivities by m.

>>> import numpy as np
>>> clamped_sum(np.array([1.5, 1e308, -np.inf, 2.0]), 0, 10)
Fraction(27, 2)
>>> sum_sensitivity(0, 10, "bounded"), sum_sensitivity(-5, 10, "unbounded")
(Fraction(10, 1), Fraction(10, 1))
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import DataError, InvalidParameterError
from .numbers import ceil_fraction, exact, exact_value, floor_fraction
from .relations import AddRemove, ChangeOne, PersonLevel, Relation

__all__ = [
    "clamp",
    "exact_sum",
    "clamped_sum",
    "clamped_count",
    "histogram",
    "sum_sensitivity",
    "count_sensitivity",
    "histogram_sensitivity",
    "bound_contributions",
]

NanPolicy = str | int | float | Fraction


def _bound(x: object, name: str) -> Fraction:
    # bounds are public numbers of any magnitude (±1e308 included), at their exact value
    if isinstance(x, str | bool):
        return exact(x, name, positive=False)
    try:
        return exact_value(x, name)
    except DataError as e:
        raise InvalidParameterError(f"{name} must be a finite number, got {x!r}",
                                    remedy="declare finite bounds, e.g. bounds = [0, 200000]") from e


def _bounds(lower: object, upper: object) -> tuple[Fraction, Fraction]:
    lo = _bound(lower, "lower bound")
    hi = _bound(upper, "upper bound")
    if lo > hi:
        raise InvalidParameterError(f"the bounds [{lo}, {hi}] are reversed",
                                    remedy="pass lower <= upper")
    return lo, hi


def _relation(relation: Relation | str) -> Relation:
    if isinstance(relation, Relation):
        return relation
    key = str(relation).lower()
    if key in ("unbounded", "add/remove", "add_remove", "addremove"):
        return AddRemove()
    if key in ("bounded", "change-one", "change_one", "changeone"):
        return ChangeOne()
    raise InvalidParameterError(f"unknown neighbour relation {relation!r}",
                                remedy='use "unbounded" (add/remove) or "bounded" (change one)')


def clamp(values: Any, lower: object, upper: object, *, nan: NanPolicy = "reject") -> np.ndarray:
    """Clamp values to ``[lower, upper]`` (as float64; ±∞ go to the bounds).

    ``nan`` says what a missing value becomes: ``"reject"`` (raise
    :class:`~statcurator.core.errors.DataError`), ``"lower"``, ``"upper"``, or a public number
    inside the bounds.

    >>> clamp([-3.0, 0.5, float("inf")], 0, 1).tolist()
    [0.0, 0.5, 1.0]
    >>> clamp([float("nan"), 2.0], 0, 10, nan=5).tolist()
    [5.0, 2.0]
    >>> clamp([float("nan")], 0, 1)
    Traceback (most recent call last):
    ...
    statcurator.core.errors.DataError: 1 value(s) are missing (NaN); pass nan="lower", nan="upper" or a public replacement value inside the bounds, or drop the rows before counting them
    """
    lo, hi = _bounds(lower, upper)
    arr = np.asarray(values, dtype=np.float64)
    missing = np.isnan(arr)
    if missing.any():
        arr = arr.copy()
        arr[missing] = float(_nan_value(nan, lo, hi, int(missing.sum())))
    # float(lo) may round outward of the exact bound; clamp to floats inside [lo, hi]
    flo, fhi = _inner_float(lo, up=True), _inner_float(hi, up=False)
    return np.clip(arr, flo, fhi)


def _inner_float(x: Fraction, up: bool) -> float:
    """The float nearest to x that lies inside the bounds (rounded towards the interval)."""
    f = float(x)
    if up and Fraction(f) < x:
        f = np.nextafter(f, np.inf)
    if not up and Fraction(f) > x:
        f = np.nextafter(f, -np.inf)
    return float(f)


def _nan_value(nan: NanPolicy, lo: Fraction, hi: Fraction, count: int) -> Fraction:
    if isinstance(nan, str):
        if nan == "lower":
            return lo
        if nan == "upper":
            return hi
        raise DataError(f"{count} value(s) are missing (NaN)",
                        remedy='pass nan="lower", nan="upper" or a public replacement value '
                               "inside the bounds, or drop the rows before counting them")
    v = exact_value(nan, "nan replacement")
    if not lo <= v <= hi:
        raise InvalidParameterError(f"the NaN replacement {v} is outside the bounds [{lo}, {hi}]",
                                    remedy="pick a public replacement value inside the bounds")
    return v


def exact_sum(values: Any) -> Fraction:
    """The exact sum of finite numbers (floats at their binary value): no rounding, no overflow.

    >>> exact_sum([0.1, 0.2]) == Fraction(0.1) + Fraction(0.2)
    True
    >>> exact_sum([1e308, 1e308, -1e308]) == Fraction(1e308)
    True
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        if arr.dtype.kind == "u" and arr.dtype.itemsize == 8:
            return Fraction(sum(int(v) for v in arr.ravel().tolist()))
        return _exact_int_sum(arr.astype(np.int64, copy=False))
    if arr.dtype.kind == "f":
        return _exact_float_sum(arr.astype(np.float64, copy=False).ravel())
    return sum((exact_value(v) for v in arr.ravel().tolist()), Fraction(0))


def _exact_int_sum(arr: np.ndarray) -> Fraction:
    flat = arr.ravel()
    hi = (flat >> 31).sum(dtype=np.int64)  # each part < 2^32 in magnitude: no overflow
    lo = (flat & ((1 << 31) - 1)).sum(dtype=np.int64)
    return Fraction((int(hi) << 31) + int(lo))


def _exact_float_sum(arr: np.ndarray) -> Fraction:
    if not np.isfinite(arr).all():
        raise DataError("cannot sum NaN or ±∞ exactly", remedy="clamp the values first")
    if arr.size == 0:
        return Fraction(0)
    mant, expo = np.frexp(arr)  # arr = mant·2^expo, |mant| in [0.5, 1): mant·2^53 is an integer
    m = (mant * 2.0**53).astype(np.int64)
    e = expo.astype(np.int64) - 53
    order = np.argsort(e, kind="stable")
    m, e = m[order], e[order]
    starts = np.flatnonzero(np.concatenate([[True], e[1:] != e[:-1]]))
    # split the 53-bit mantissas in 27-bit halves so that the int64 sums cannot overflow
    hi = np.add.reduceat(m >> 26, starts)
    lo = np.add.reduceat(m & ((1 << 26) - 1), starts)
    emin = int(e[0])
    total = 0
    for h, low, ex in zip(hi.tolist(), lo.tolist(), e[starts].tolist(), strict=True):
        total += ((h << 26) + low) << (ex - emin)
    return Fraction(total) * Fraction(2) ** emin


def clamped_sum(values: Any, lower: object, upper: object, *,
                nan: NanPolicy = "reject") -> Fraction:
    """The exact sum of the values clamped to ``[lower, upper]`` (see :func:`clamp`).

    >>> clamped_sum([5, 50, -5], 0, 10)
    Fraction(15, 1)
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iub":
        lo, hi = _bounds(lower, upper)
        return _clamped_int_sum(arr, lo, hi)
    return exact_sum(clamp(arr, lower, upper, nan=nan))


def _clamped_int_sum(arr: np.ndarray, lo: Fraction, hi: Fraction) -> Fraction:
    # integers are clamped in exact integer arithmetic: x < lo <=> x < ⌈lo⌉ for integers
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) >= 2**63:
        vals = [min(max(Fraction(int(v)), lo), hi) for v in arr.ravel().tolist()]
        return sum(vals, Fraction(0))
    flat = arr.ravel().astype(np.int64)
    lim = 2**63 - 1
    lo_i = max(min(ceil_fraction(lo), lim), -lim - 1)
    hi_i = max(min(floor_fraction(hi), lim), -lim - 1)
    below, above = flat < lo_i, flat > hi_i
    inside = flat[~below & ~above]
    return _exact_int_sum(inside) + int(below.sum()) * lo + int(above.sum()) * hi


def clamped_count(values: Any) -> int:
    """The number of rows (missing values included: a row is a row).

    >>> clamped_count([1.0, float("nan")])
    2
    """
    return len(values) if not hasattr(values, "shape") else int(np.asarray(values).shape[0])


def histogram(values: Any, categories: Sequence[Hashable]) -> np.ndarray:
    """Counts of each public category (values outside the categories are not counted).

    >>> histogram(["F", "M", "M", "X"], ["F", "M"]).tolist()
    [1, 2]
    """
    index = {c: i for i, c in enumerate(categories)}
    counts = np.zeros(len(index), dtype=np.int64)
    for v in (values.tolist() if hasattr(values, "tolist") else values):
        i = index.get(v)
        if i is not None:
            counts[i] += 1
    return counts


def sum_sensitivity(lower: object, upper: object, relation: Relation | str = "unbounded",
                    *, groups: bool = False) -> Fraction:
    """The one sensitivity table of statcurator: the L1 sensitivity of a sum of per-row
    contributions in ``[lower, upper]`` (over one group, or over all groups of a GROUP BY
    when ``groups``) for one neighbour step of ``relation``.

    ======================  ==========================  ===============================
    neighbours              one sum                      per-group sums (L1 over groups)
    ======================  ==========================  ===============================
    add/remove a row        max(|lower|, |upper|)        max(|lower|, |upper|)
    change a row            upper - lower                2·max(|lower|, |upper|)
    add/remove a person     m·max(|lower|, |upper|)      m·max(|lower|, |upper|)
    ======================  ==========================  ===============================

    (a changed row may leave one group for another, hence the 2; a person owns up to m
    rows). A count is the sum of 1 per row, a histogram the per-group counts. A row that is
    filtered out, NULL or in no group contributes 0, so callers that filter pass a range that
    contains 0.

    >>> sum_sensitivity(-1, 3, "unbounded"), sum_sensitivity(-1, 3, "bounded")
    (Fraction(3, 1), Fraction(4, 1))
    >>> sum_sensitivity(0, 1, "bounded", groups=True)       # a histogram, change-one
    Fraction(2, 1)
    """
    lo, hi = _bounds(lower, upper)
    rel = _relation(relation)
    m = max(abs(lo), abs(hi))
    if isinstance(rel, ChangeOne):
        return 2 * m if groups else hi - lo
    rows = rel.max_rows if isinstance(rel, PersonLevel) else 1
    return rows * m


def count_sensitivity(relation: Relation | str = "unbounded") -> Fraction:
    """Sensitivity of the row count of a whole table: 0 under change-one (the size is
    public), else the sum of 1 per row (1, or m for a person with m rows).

    >>> count_sensitivity("bounded"), count_sensitivity(PersonLevel(0, max_rows=3))
    (Fraction(0, 1), Fraction(3, 1))
    """
    rel = _relation(relation)
    if isinstance(rel, ChangeOne):
        return Fraction(0)
    return sum_sensitivity(0, 1, rel)


def histogram_sensitivity(relation: Relation | str = "unbounded") -> Fraction:
    """L1 sensitivity of a histogram over public bins: per-group counts (1, 2 or m).

    >>> histogram_sensitivity("unbounded"), histogram_sensitivity("bounded")
    (Fraction(1, 1), Fraction(2, 1))
    """
    return sum_sensitivity(0, 1, relation, groups=True)


def bound_contributions(keys: Any, max_rows: int) -> np.ndarray:
    """A mask keeping at most ``max_rows`` rows per privacy unit (the first ones, in order).

    The truncation is stable: removing one person removes at most ``max_rows`` kept rows
    and changes no other person's rows, so the result has the add/remove sensitivity of
    ``max_rows`` rows per person.

    >>> bound_contributions(["a", "a", "b", "a"], 2).tolist()
    [True, True, True, False]
    """
    if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
        raise InvalidParameterError(f"max_rows must be a positive integer, got {max_rows!r}",
                                    remedy="pass max_rows=1 (or the largest rows per person)")
    seen: dict[Any, int] = {}
    keep = []
    for k in (keys.tolist() if hasattr(keys, "tolist") else keys):
        n = seen.get(k, 0)
        keep.append(n < max_rows)
        seen[k] = n + 1
    return np.array(keep, dtype=bool)
