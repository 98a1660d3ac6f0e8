"""Post-processing of noisy measurements: output values, confidence intervals, HAVING,
ORDER BY and LIMIT. Everything here reads only noisy values and public keys, so it is free
(the post-processing property of differential privacy).

Each aggregate's value and interval come from its class in :mod:`.aggregates`. An output
combining k aggregates with ``+ - * /`` gets interval arithmetic over their intervals at α/k
(Bonferroni). Quantiles from the exponential mechanism have no value interval (only a rank
error, shown by ``accuracy``); their ``_low``/``_high`` are NULL.

>>> iv_add((Fraction(1), Fraction(2)), (Fraction(3), Fraction(4)))
(Fraction(4, 1), Fraction(6, 1))
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from operator import itemgetter
from typing import Any

from .aggregates import AggregateKind, Atom, Interval, iv_div, iv_mul, sqrt_fraction
from .expr import (
    Agg,
    And,
    Arith,
    Between,
    Case,
    Compare,
    Expr,
    Func,
    InList,
    IsNull,
    KeyRef,
    Lit,
    Neg,
    Not,
    Or,
)
from .plan import QueryPlan

__all__ = ["NoisyAnswer", "iv_add", "iv_sub"]


#: id(expression) -> (the expression, its aggregates), shared by every answer: a compiled
#: query keeps its plan's expressions from one release to the next, and an expression is
#: immutable, so its aggregates are found once; an entry holds its expression, so that id is
#: no other's while the entry lives (cleared when full)
_AGGREGATES: dict[int, tuple[Expr, tuple[Agg, ...]]] = {}
_MAX_AGGREGATES = 4096


def iv_add(a: Interval, b: Interval) -> Interval:
    """Sum of two intervals."""
    return (a[0] + b[0], a[1] + b[1])


def iv_sub(a: Interval, b: Interval) -> Interval:
    """Difference of two intervals."""
    return (a[0] - b[1], a[1] - b[0])


def _frac(x: Any) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(x)


class NoisyAnswer:
    """Noisy values per measurement and group, turned into output rows.

    ``values[i][g]`` is the noisy value of measurement ``i`` in group ``g``; ``halfwidth(i,
    alpha)`` the (1 - alpha) half-width of measurement ``i`` (from its mechanism).
    """

    def __init__(self, plan: QueryPlan, atoms: Sequence[Atom], keys: list[tuple[Any, ...]],
                 values: list[list[Any]], alpha: float,
                 halfwidth: Callable[[int, float], Fraction]) -> None:
        self.plan = plan
        self.keys = keys
        self.values = values
        self.alpha = alpha
        self.key_index = {k.name: i for i, k in enumerate(plan.group_by)}
        self.atom_index = {a.agg: a for a in atoms}
        self._halfwidth = halfwidth
        self._h: dict[tuple[int, float], Fraction] = {}
        #: post-processing: counts (and their intervals) clamped at 0
        self.nonnegative = False

    # -- one aggregate ----------------------------------------------------------------
    def h(self, measure: int, alpha: float) -> Fraction:
        key = (measure, alpha)
        if key not in self._h:
            self._h[key] = self._halfwidth(measure, alpha)
        return self._h[key]

    def _clamps(self, atom: Atom) -> bool:
        return self.nonnegative and atom.kind in (AggregateKind.COUNT,
                                                  AggregateKind.COUNT_DISTINCT)

    def atom_point(self, atom: Atom, g: int) -> Any:
        v = atom.point([self.values[i][g] for i in atom.measures])
        return max(v, 0) if self._clamps(atom) else v

    def atom_interval(self, atom: Atom, g: int, alpha: float) -> Interval | None:
        if not atom.has_interval:
            return None
        a = alpha / len(atom.measures)
        iv = atom.interval([self.values[i][g] for i in atom.measures],
                           [self.h(i, a) for i in atom.measures])
        if iv is not None and self._clamps(atom):
            iv = (max(iv[0], Fraction(0)), max(iv[1], Fraction(0)))
        return iv

    # -- expressions ------------------------------------------------------------------
    def point(self, e: Expr, g: int) -> Any:
        if isinstance(e, Agg):
            return self.atom_point(self.atom_index[e], g)
        if isinstance(e, KeyRef):
            return self.keys[g][self.key_index[e.name]]
        if isinstance(e, Lit):
            return e.value
        if isinstance(e, Neg):
            v = self.point(e.expr, g)
            return None if v is None else -v
        if isinstance(e, Arith):
            a, b = self.point(e.left, g), self.point(e.right, g)
            if a is None or b is None:
                return None
            a, b = _num(a), _num(b)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            return None if b == 0 else a / b
        if isinstance(e, Compare):
            a, b = self.point(e.left, g), self.point(e.right, g)
            if a is None or b is None:
                return None
            return _compare(e.op, a, b)
        if isinstance(e, Between):
            x, lo, hi = (self.point(p, g) for p in (e.expr, e.low, e.high))
            if x is None or lo is None or hi is None:
                return None
            r = lo <= x <= hi
            return not r if e.negated else r
        if isinstance(e, InList):
            x = self.point(e.expr, g)
            if x is None:
                return None
            r = any(x == v.value for v in e.values)
            return not r if e.negated else r
        if isinstance(e, IsNull):
            r = self.point(e.expr, g) is None
            return not r if e.negated else r
        if isinstance(e, And):
            vals = [self.point(t, g) for t in e.terms]
            if any(v is False for v in vals):
                return False
            return None if any(v is None for v in vals) else True
        if isinstance(e, Or):
            vals = [self.point(t, g) for t in e.terms]
            if any(v is True for v in vals):
                return True
            return None if any(v is None for v in vals) else False
        if isinstance(e, Not):
            v = self.point(e.expr, g)
            return None if v is None else not v
        if isinstance(e, Case):
            for c, v in e.whens:
                if self.point(c, g) is True:
                    return self.point(v, g)
            return self.point(e.default, g) if e.default is not None else None
        if isinstance(e, Func):
            args = [self.point(a, g) for a in e.args]
            if any(a is None or isinstance(a, bool) for a in args):
                return None
            floats = _floats(args)
            return None if floats is None else apply_function(e.name, floats)
        raise TypeError(f"cannot post-process {e.sql()}")  # pragma: no cover

    def aggregates(self, e: Expr) -> tuple[Agg, ...]:
        """The aggregates of ``e`` (:meth:`Expr.aggregates`), asked once per expression, not
        once per group or per release."""
        hit = _AGGREGATES.get(id(e))
        if hit is None or hit[0] is not e:
            if len(_AGGREGATES) >= _MAX_AGGREGATES:
                _AGGREGATES.clear()
            hit = _AGGREGATES[id(e)] = (e, e.aggregates())
        return hit[1]

    def interval(self, e: Expr, g: int, alpha: float) -> Interval | None:
        aggs = self.aggregates(e)
        if not aggs:
            return None
        if isinstance(e, Agg):
            return self.atom_interval(self.atom_index[e], g, alpha)
        if any(self.atom_index[agg].fixed_interval for agg in aggs):
            return None  # an interval released at α itself cannot be split α/k ways
        a = alpha / len(aggs)
        ivs = {agg: self.atom_interval(self.atom_index[agg], g, a) for agg in aggs}
        return self._iv(e, g, ivs)

    def _iv(self, e: Expr, g: int, ivs: dict[Agg, Interval | None]) -> Interval | None:
        if isinstance(e, Agg):
            return ivs[e]
        if isinstance(e, Lit | KeyRef):
            v = self.point(e, g)
            if isinstance(v, bool) or not isinstance(v, int | float | Fraction):
                return None
            f = _num(v)
            return (f, f)
        if isinstance(e, Neg):
            x = self._iv(e.expr, g, ivs)
            return None if x is None else (-x[1], -x[0])
        if isinstance(e, Arith):
            a, b = self._iv(e.left, g, ivs), self._iv(e.right, g, ivs)
            if a is None or b is None:
                return None
            return {"+": iv_add, "-": iv_sub, "*": iv_mul, "/": iv_div}[e.op](a, b)
        if isinstance(e, Func):
            parts = [self._iv(a, g, ivs) for a in e.args]
            if any(p is None for p in parts):
                return None
            return function_interval(e.name, parts)  # type: ignore[arg-type]
        return None

    # -- the table --------------------------------------------------------------------
    def rows(self) -> tuple[list[str], list[list[Any]], list[bool]]:
        """Column names, rows, and which outputs are noisy (they get ``_low``/``_high``)."""
        names, columns, noisy, _ = self.columns()
        return names, transpose(columns), noisy

    def columns(self) -> tuple[list[str], list[list[Any]], list[bool], list[set[type] | None]]:
        """Column names, the table column by column, which outputs are noisy, and the types
        of each column's values where they are known as it is built (None: not known)."""
        plan = self.plan
        outputs = plan.outputs
        noisy = [bool(self.aggregates(o.expr)) for o in outputs]
        # the groups released, in order: a range until HAVING or ORDER BY makes it a list
        groups: Sequence[int] = range(len(self.keys))
        if plan.having is not None:
            groups = [g for g in groups if self.point(plan.having, g) is True]
        for k in reversed(plan.order_by):
            def sort_key(g: int, e: Expr = k.expr) -> Any:
                return _order_key(self.point(e, g))

            groups = sorted(groups, key=sort_key, reverse=k.descending)
            # NULLs last whatever the direction
            nulls = [g for g in groups if self.point(k.expr, g) is None]
            groups = [g for g in groups if self.point(k.expr, g) is not None] + nulls
        stop = None if plan.limit is None else plan.offset + plan.limit
        groups = groups[plan.offset:stop]
        every = isinstance(groups, range) and len(groups) == len(self.keys)  # 0, 1, 2, ...
        names: list[str] = []
        for o, n in zip(outputs, noisy, strict=True):
            names.append(o.name)
            if n:
                names += [f"{o.name}_low", f"{o.name}_high"]
        columns: list[list[Any]] = []
        found: list[set[type] | None] = []
        for o, n in zip(outputs, noisy, strict=True):
            cols, types = self._column(o.expr, n, groups, every)
            columns += cols
            found += types
        return names, columns, noisy, found

    def _column(self, e: Expr, noisy: bool, groups: Sequence[int],
                every: bool) -> tuple[list[list[Any]], list[set[type] | None]]:
        """The columns ``[values]`` or ``[values, lows, highs]`` of one output, for every
        group (``every``: the groups are all the answer's, in order), and the types of their
        values where known."""
        if isinstance(e, KeyRef):
            i = self.key_index[e.name]
            keys = self.keys
            return [list(map(itemgetter(i), keys)) if every else
                    [keys[g][i] for g in groups]], [None]
        if isinstance(e, Agg):
            atom = self.atom_index[e]
            if (atom.kind in (AggregateKind.COUNT, AggregateKind.COUNT_DISTINCT,
                              AggregateKind.SUM, AggregateKind.SUM_DISTINCT)
                    and not self._clamps(atom)):  # fast path
                (m,) = atom.measures
                h = float(self.h(m, self.alpha))
                vals = self.values[m]
                picked = list(vals) if every else [vals[g] for g in groups]
                points = list(map(float, picked))
                found: set[type] | None = set(map(type, picked))
                if found and found != {int}:
                    picked = [v if type(v) is int else _out(v) for v in picked]
                    found = None
                bounds: set[type] = {float} if points else set()  # a double ± a double
                return [picked, [p - h for p in points], [p + h for p in points]], [
                    found, bounds, bounds]
            # one aggregate: its value and interval straight from its atom (as point and
            # interval find them), not looked up again for each group
            point: Callable[[int], Any] = functools.partial(self.atom_point, atom)
            interval: Callable[[int], Interval | None] = functools.partial(
                self.atom_interval, atom, alpha=self.alpha)
        else:
            point = functools.partial(self.point, e)
            interval = functools.partial(self.interval, e, alpha=self.alpha)
        values, lows, highs = [], [], []
        for g in groups:
            values.append(_out(point(g)))
            if noisy:
                iv = interval(g)
                lows.append(None if iv is None else _float(iv[0]))
                highs.append(None if iv is None else _float(iv[1]))
        return ([values, lows, highs], [None] * 3) if noisy else ([values], [None])


def transpose(columns: list[list[Any]]) -> list[list[Any]]:
    """The rows of a table given column by column (one list per row: few allocations, as a
    release may have many groups). A released table has at least one column.

    >>> transpose([["a", "b"], [1, 2]])
    [['a', 1], ['b', 2]]
    """
    return list(map(list, zip(*columns, strict=True)))


def _num(v: Any) -> Any:
    if isinstance(v, float):
        return Fraction(v) if math.isfinite(v) else v
    return v


def _out(v: Any) -> Any:
    if type(v) is int or type(v) is float:  # the common cases, without an ABC check
        return v
    return _float(v) if isinstance(v, Fraction) else v


def _float(v: Any) -> float | None:
    """``float(v)``, or NULL for an exact value beyond a double's range (a post-processed
    ``SUM(x) * 1e308 * 10``): released values never raise, even after the charge.

    >>> _float(Fraction(1, 4)), _float(Fraction(10) ** 400)
    (0.25, None)
    """
    try:
        return float(v)
    except OverflowError:
        return None


def _floats(values: Sequence[Any]) -> list[float] | None:
    """Every value as a double (:func:`_float`), or None when one is beyond a double's range.

    >>> _floats([Fraction(1, 2), 3]), _floats([1, Fraction(10) ** 400])
    ([0.5, 3.0], None)
    """
    out = [_float(v) for v in values]
    return None if None in out else out  # type: ignore[return-value]


def apply_function(name: str, args: Sequence[float]) -> float | None:
    """A scalar function of released values; NULL where it is undefined (``SQRT`` of a
    negative noisy variance, ``LN`` of a non-positive value), never an error.

    >>> apply_function("power", [3.0, 2.0]), apply_function("sqrt", [-1.0])
    (9.0, None)
    """
    if name == "rand":  # independent of the data: any generator would do; the OS's is used
        import secrets

        return secrets.randbits(53) / 2**53
    x = args[0]
    try:
        if name == "abs":
            return abs(x)
        if name == "sqrt":
            return math.sqrt(x) if x >= 0 else None
        if name == "power":
            r = x ** args[1]
            return r if isinstance(r, float) and math.isfinite(r) else None
        if name == "exp":
            return math.exp(x)
        if name in ("ln", "log10"):
            return (math.log(x) if name == "ln" else math.log10(x)) if x > 0 else None
        if name == "round":  # ROUND(x) or ROUND(x, decimals)
            return float(round(x, int(args[1]))) if len(args) > 1 else float(round(x))
        if name == "floor":
            return float(math.floor(x))
        if name == "ceil":
            return float(math.ceil(x))
    except (OverflowError, ValueError, ZeroDivisionError):
        return None
    raise TypeError(f"unknown function {name}")  # pragma: no cover - the front ends check


#: integer exponents above this get no interval: the exact power of an interval end would take
#: time and memory growing with the exponent (1e6: 14 s; 1e10: never), after the charge
_MAX_EXACT_POWER = 64


def function_interval(name: str, parts: Sequence[Interval]) -> Interval | None:
    """The image of an interval under a released-value function (each is monotone on the
    pieces where it is defined); None where the function is undefined on part of it.

    >>> function_interval("power", [(Fraction(-2), Fraction(3)), (Fraction(2), Fraction(2))])
    (Fraction(0, 1), Fraction(9, 1))
    >>> function_interval("sqrt", [(Fraction(-1), Fraction(4))])
    (Fraction(0, 1), Fraction(2, 1))
    """
    if name == "rand":
        return None  # a draw, not an estimate: no interval
    lo, hi = parts[0]
    if name == "abs":
        if lo >= 0:
            return (lo, hi)
        if hi <= 0:
            return (-hi, -lo)
        return (Fraction(0), max(-lo, hi))
    if name == "power":
        k_lo, k_hi = parts[1]
        if k_lo != k_hi:
            return None  # an exponent that is itself noisy: no interval
        k = k_lo
        if k.denominator == 1 and k > _MAX_EXACT_POWER:
            return None  # POWER(SUM(x), 1e10): exact powers of that size would never end
        if k.denominator == 1 and k >= 0:
            ends = [lo ** int(k), hi ** int(k)]
            if k % 2 == 0 and lo < 0 < hi:
                return (Fraction(0), max(ends))
            return (min(ends), max(ends))
        if hi < 0 or (k < 0 and lo <= 0):
            return None  # undefined, or unbounded near 0
        lo = max(lo, Fraction(0))  # a fractional power: of the interval's non-negative part
        floats = _floats([lo, hi, k])
        if floats is None:
            return None  # beyond a double's range: no interval (never an error)
        a, b = (apply_function("power", [x, floats[2]]) for x in floats[:2])
        if a is None or b is None:
            return None
        return (Fraction(min(a, b)), Fraction(max(a, b)))
    if name == "sqrt":  # the square root of the interval's non-negative part
        if hi < 0:
            return None
        return (sqrt_fraction(max(lo, Fraction(0))), sqrt_fraction(hi))
    if name in ("ln", "log10") and lo <= 0:
        return None
    floats = _floats([lo, hi, *(p[0] for p in parts[1:])])  # and ROUND's decimals
    if floats is None:
        return None  # beyond a double's range: no interval (never an error)
    a, b = (apply_function(name, [x, *floats[2:]]) for x in floats[:2])  # increasing functions
    if a is None or b is None:
        return None
    return (Fraction(a), Fraction(b))


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "=":
        return bool(a == b)
    if op == "<>":
        return bool(a != b)
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _order_key(v: Any) -> Any:
    return (0, v) if v is not None else (1, 0)
