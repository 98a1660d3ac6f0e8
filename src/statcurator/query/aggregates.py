"""One class per aggregate: what it measures, with which sensitivity, and how its noisy parts
combine into a value and an interval. :data:`REGISTRY` maps the IR's aggregate functions to
them; adding an aggregate is one class here and its tests.

=================  =====================================  ======================================
aggregate          measures (noisy, each with a mechanism)  released value
=================  =====================================  ======================================
COUNT              count of rows (or non-NULL values)       the noisy count
COUNT(DISTINCT)    count of distinct units / values         the noisy count
SUM                clamped sum on the grid 2^-k              the noisy sum
AVG                count, centred sum                        midpoint + sum/count, clamped
VARIANCE, STDDEV   count, centred sum, centred squares       Σc²/n - (Σc/n)², clamped (√ for SD)
MEDIAN, QUANTILE   per-bin histogram → exponential mech.     the chosen bin's value (and ends)
IQR                the two quartiles, as quantiles           Q3 − Q1
REGR_*, CORR       n, Σx, Σy, Σx², Σxy (Σy²) of the pairs    slope, intercept, correlation
=================  =====================================  ======================================

Intervals: a count or sum is ``value ± h`` (h the mechanism's (1 - α) half-width); AVG is the
range of ``mid + s/c`` over the box of its parts' intervals at α/2 each (Bonferroni), so it
covers the exact mean of the clamped data with probability at least 1 - α; VARIANCE and
STDDEV use interval arithmetic over three intervals at α/3. Quantiles have no value interval
(only a rank accuracy).

>>> sorted(REGISTRY)[:5]
['avg', 'corr', 'count', 'count_distinct', 'iqr']
>>> REGISTRY["stddev_samp"].kind
<AggregateKind.VARIANCE: 'variance'>
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from ..core.errors import UnsupportedQueryError
from .expr import Agg, Case, Col, Expr, IsNull, Lit
from .relational import Histogram, Quantized, Term

if TYPE_CHECKING:
    from ..core.schema import PrivacyUnit
    from .sensitivity import Neighbourhood

__all__ = ["AggregateKind", "MeasureRole", "Measure", "Atom", "Count", "CountDistinct", "Sum",
           "Mean", "Variance", "Quantile", "REGISTRY", "Interval", "CompileContext"]

Interval = tuple[Fraction, Fraction]


class AggregateKind(StrEnum):
    """The kinds of aggregate a query can release."""

    COUNT = "count"
    COUNT_DISTINCT = "count distinct"
    SUM = "sum"
    SUM_DISTINCT = "sum distinct"
    AVG = "avg"
    VARIANCE = "variance"
    QUANTILE = "quantile"
    IQR = "interquartile range"
    REGRESSION = "regression"


class MeasureRole(StrEnum):
    """What one noisy measurement measures (it decides the mechanism)."""

    COUNT = "count"
    SUM = "sum"
    CENTRED_SUM = "centred sum"
    CENTRED_SQUARES = "centred sum of squares"
    CENTRED_CROSS = "centred cross products"
    QUANTILE = "quantile"
    SELECTION = "selection"


@dataclass(frozen=True)
class Measure:
    """One noisy measurement: which exact aggregate it reads, its sensitivity, its share.

    ``index`` points into the engine plan's terms (histograms for quantiles). The exact
    engine integer times ``value_scale`` is the value the mechanism sees; ``integral`` says
    that value and the sensitivity are integers (integer-valued discrete Laplace);
    ``sensitivity`` is in those value units — the L1 sensitivity over all groups (L∞ of the
    scores for a quantile); ``l2`` the L2 sensitivity, for Gaussian noise.
    """

    label: str
    role: MeasureRole
    index: int
    sensitivity: Fraction
    value_scale: Fraction
    integral: bool
    weight: Fraction
    p: Fraction | None = None
    l2: Fraction | None = None
    #: for the interval ends of a quantile: "lower" or "upper" (None: the point)
    side: str | None = None


class CompileContext(Protocol):
    """What an aggregate needs from the compiler to describe its measures."""

    nb: Neighbourhood
    unit: PrivacyUnit
    #: the number of rows when it is public and fixed (bounded neighbours, declared size,
    #: an unfiltered, ungrouped scan), else None
    fixed_rows: int | None
    unit_column: Col | None
    quantile_bins: int
    max_point_bins: int

    def term(self, t: Term) -> int: ...

    def histogram(self, h: Histogram) -> int: ...

    def quantized(self, e: Expr, agg: Agg) -> Quantized: ...

    def value_sensitivity(self, q: Quantized, low: Fraction, high: Fraction) -> Fraction:
        """L1 sensitivity of per-group sums of ``q``'s contributions in [low, high] (the
        neighbourhood's, or a declared policy's when it applies)."""
        ...

    def check_row_expr(self, e: Expr, where: str) -> None: ...

    def add(self, label: str, role: MeasureRole, index: int, sensitivity: Fraction,
            value_scale: Fraction, integral: bool, *, p: Fraction | None = None,
            l2: Fraction | None = None, side: str | None = None) -> int: ...


def _frac(x: Any) -> Fraction:
    return x if isinstance(x, Fraction) else Fraction(x)


def _exact(x: Any) -> tuple[int, int]:
    """``x`` (as :func:`_frac` reads it) as a numerator and a positive denominator."""
    if type(x) is int:
        return x, 1
    f = _frac(x)
    return f.numerator, f.denominator


def _around(x: Any, h: Any) -> tuple[int, int, int]:
    """The numerators of ``x - h`` and ``x + h`` over one positive denominator, and it."""
    xn, xd = _exact(x)
    hn, hd = _exact(h)
    return xn * hd - hn * xd, xn * hd + hn * xd, xd * hd


def _clamp(x: Fraction, lo: Fraction, hi: Fraction) -> Fraction:
    return min(max(x, lo), hi)


def iv_mul(a: Interval, b: Interval) -> Interval:
    """Product of two intervals.

    >>> iv_mul((Fraction(-1), Fraction(2)), (Fraction(3), Fraction(4)))
    (Fraction(-4, 1), Fraction(8, 1))
    """
    c = [x * y for x in a for y in b]
    return (min(c), max(c))


def iv_div(a: Interval, b: Interval) -> Interval | None:
    """Quotient of two intervals (None when the divisor's interval holds 0).

    >>> iv_div((Fraction(-1), Fraction(2)), (Fraction(2), Fraction(4)))
    (Fraction(-1, 2), Fraction(1, 1))
    >>> iv_div((Fraction(-1), Fraction(2)), (Fraction(-4), Fraction(-2)))
    (Fraction(-1, 1), Fraction(1, 2))
    >>> iv_div((Fraction(1), Fraction(2)), (Fraction(-1), Fraction(1))) is None
    True
    """
    b0, b1 = b
    if b0 <= 0 <= b1:
        return None
    a0, a1 = a
    if b0 > 0:  # a positive divisor: the ends of a over the ends of b, by their signs
        return (a0 / (b1 if a0 >= 0 else b0), a1 / (b0 if a1 >= 0 else b1))
    return (a1 / (b1 if a1 >= 0 else b0), a0 / (b0 if a0 >= 0 else b1))


def sqrt_fraction(x: Fraction) -> Fraction:
    """√x for display values (post-processing: a float square root is fine here)."""
    return Fraction(math.sqrt(float(x))) if x > 0 else Fraction(0)


@dataclass(frozen=True)
class Atom:
    """One distinct aggregate of a query, released from one or more measurements."""

    agg: Agg
    name: str
    measures: tuple[int, ...]

    kind: ClassVar[AggregateKind]
    #: the IR functions (``Agg.func``) this class releases
    functions: ClassVar[tuple[str, ...]] = ()

    # -- compilation --------------------------------------------------------------------
    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:  # pragma: no cover
        """Describe the measures of ``agg`` in ``ctx`` and return the atom."""
        raise NotImplementedError

    def shares(self) -> tuple[Fraction, ...]:
        """How this aggregate's share of the budget is split between its measures."""
        return tuple(Fraction(1, len(self.measures)) for _ in self.measures)

    #: the interval is released at the release's α itself (not rebuilt from half-widths at
    #: any α), so an expression combining it with others gets no interval
    fixed_interval: ClassVar[bool] = False

    # -- post-processing (noisy values only) ----------------------------------------------
    def point(self, v: Sequence[Any]) -> Any:
        """The released value from the noisy values ``v`` of this atom's measures."""
        return v[0]

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        """A (1 - α) interval from the noisy values and their half-widths at α/len(v)."""
        x = _frac(v[0])
        return (x - hs[0], x + hs[0])

    @property
    def has_interval(self) -> bool:
        return True

    def halfwidth(self, hs: Sequence[float], rows: int | None) -> float | None:
        """The half-width of the released value from its parts' half-widths (``rows``: a
        public estimate of n where the width depends on it)."""
        return hs[0]


@dataclass(frozen=True)
class Count(Atom):
    """``COUNT(*)`` and ``COUNT(x)``: per row, a contribution in {0, 1}."""

    kind: ClassVar[AggregateKind] = AggregateKind.COUNT
    functions: ClassVar[tuple[str, ...]] = ("count",)

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        if agg.arg is None:
            t = ctx.term(Term("rows"))
        else:
            ctx.check_row_expr(agg.arg, "COUNT")
            t = ctx.term(Term("nonnull", agg.arg))
        i = ctx.add(name, MeasureRole.COUNT, t, ctx.nb.linear(0, 1), Fraction(1), True,
                    l2=ctx.nb.l2(0, 1))
        return cls(agg, name, (i,))


@dataclass(frozen=True)
class CountDistinct(Atom):
    """``COUNT(DISTINCT x)``: of the privacy unit (a unit is in at most G groups), or of any
    other column (a unit's r rows create or remove at most r distinct values)."""

    kind: ClassVar[AggregateKind] = AggregateKind.COUNT_DISTINCT
    functions: ClassVar[tuple[str, ...]] = ("count_distinct",)

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        assert agg.arg is not None
        ctx.check_row_expr(agg.arg, "COUNT(DISTINCT ...)")
        if ctx.unit_column is not None and agg.arg == ctx.unit_column:
            t = ctx.term(Term("units"))
            sens = ctx.nb.distinct_units()
        else:
            t = ctx.term(Term("distinct", agg.arg))
            sens = ctx.nb.distinct_values()
        i = ctx.add(name, MeasureRole.COUNT, t, sens, Fraction(1), True, l2=ctx.nb.l2_of(sens))
        return cls(agg, name, (i,))


@dataclass(frozen=True)
class Sum(Atom):
    """``SUM(x)``: x clamped to its public bounds on the grid 2^-k."""

    quantized: Quantized | None = None

    kind: ClassVar[AggregateKind] = AggregateKind.SUM
    functions: ClassVar[tuple[str, ...]] = ("sum",)
    #: the engine term it reads, and how the SQL names it in messages
    term_kind: ClassVar[str] = "sum"
    spelling: ClassVar[str] = "SUM"

    @classmethod
    def sensitivity(cls, ctx: CompileContext, q: Quantized, low: Fraction,
                    high: Fraction) -> Fraction:
        """The clamped sum's sensitivity (a declared policy's where it applies)."""
        return ctx.value_sensitivity(q, low, high)

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        assert agg.arg is not None
        ctx.check_row_expr(agg.arg, cls.spelling)
        q = ctx.quantized(agg.arg, agg)
        t = ctx.term(Term(cls.term_kind, q))
        lo, hi = q.lq * q.scale, q.uq * q.scale
        sens = cls.sensitivity(ctx, q, lo, hi)
        integral = q.bits <= 0 and sens.denominator == 1
        i = ctx.add(name, MeasureRole.SUM, t, sens, q.scale, integral,
                    l2=min(ctx.nb.l2(lo, hi), sens))
        return cls(agg, name, (i,), q)


@dataclass(frozen=True)
class DistinctSum(Sum):
    """``SUM(DISTINCT x)``: the sum of the distinct values of x clamped to its public bounds
    on the grid. A unit's r rows can add (or remove) at most r distinct values, each within
    the bounds, so it has a clamped sum's sensitivity — but never a policy's: moving one
    value can remove it (when it was unique) while its new value was already present."""

    kind: ClassVar[AggregateKind] = AggregateKind.SUM_DISTINCT
    functions: ClassVar[tuple[str, ...]] = ("sum_distinct",)
    term_kind: ClassVar[str] = "distinct_sum"
    spelling: ClassVar[str] = "SUM(DISTINCT ...)"

    @classmethod
    def sensitivity(cls, ctx: CompileContext, q: Quantized, low: Fraction,
                    high: Fraction) -> Fraction:
        return ctx.nb.linear(low, high)


@dataclass(frozen=True)
class Mean(Atom):
    """``AVG(x)`` = midpoint + (noisy centred sum)/(noisy count), clamped to the bounds.

    When the number of rows is public and fixed — bounded neighbours, a declared table size,
    no filter, join or grouping — the count is not measured: the whole share goes to the
    centred sum, divided by the declared n (``fixed_rows``).
    """

    quantized: Quantized | None = None
    fixed_rows: int | None = None

    kind: ClassVar[AggregateKind] = AggregateKind.AVG
    functions: ClassVar[tuple[str, ...]] = ("avg",)

    @classmethod
    def _parts(cls, ctx: CompileContext, agg: Agg, name: str) -> tuple[Quantized, list[int]]:
        assert agg.arg is not None
        ctx.check_row_expr(agg.arg, agg.func.upper())
        q = ctx.quantized(agg.arg, agg)
        half = Fraction(q.uq - q.lq, 2) * q.scale
        idx = [ctx.add(f"{name}: count", MeasureRole.COUNT, ctx.term(Term("valid", q)),
                       ctx.nb.linear(0, 1), Fraction(1), True, l2=ctx.nb.l2(0, 1)),
               ctx.add(f"{name}: centred sum", MeasureRole.CENTRED_SUM,
                       ctx.term(Term("centered", q)), ctx.value_sensitivity(q, -half, half),
                       q.scale / 2, False,
                       l2=min(ctx.nb.l2(-half, half), ctx.value_sensitivity(q, -half, half)))]
        return q, idx

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        if ctx.fixed_rows:
            assert agg.arg is not None
            ctx.check_row_expr(agg.arg, agg.func.upper())
            q = ctx.quantized(agg.arg, agg)
            half = Fraction(q.uq - q.lq, 2) * q.scale
            sens = ctx.value_sensitivity(q, -half, half)
            i = ctx.add(f"{name}: centred sum", MeasureRole.CENTRED_SUM,
                        ctx.term(Term("centered", q)), sens, q.scale / 2, False,
                        l2=min(ctx.nb.l2(-half, half), sens))
            return cls(agg, name, (i,), q, ctx.fixed_rows)
        q, idx = cls._parts(ctx, agg, name)
        return cls(agg, name, tuple(idx), q)

    @functools.cached_property
    def _range(self) -> tuple[Fraction, Fraction]:
        """The declared bounds of the clamped input (computed once: the atom is frozen)."""
        q = self.quantized
        assert q is not None
        return q.lq * q.scale, q.uq * q.scale

    @functools.cached_property
    def _centre(self) -> tuple[int, int, int, int]:
        """The midpoint of the bounds, about which the sum is centred, and the half-range,
        each as a numerator and a denominator."""
        lo, hi = self._range
        mid, half = (lo + hi) / 2, (hi - lo) / 2
        return mid.numerator, mid.denominator, half.numerator, half.denominator

    def _centred(self, num: int, den: int) -> Fraction:
        """The midpoint plus ``num/den`` (``den > 0``), clamped to the bounds: the exact value
        Fraction arithmetic gives, from a few operations on integers (the ratio compared with
        the half-range by cross-multiplying) instead of as many on Fractions."""
        lo, hi = self._range
        mid_n, mid_d, half_n, half_d = self._centre
        if num * half_d <= -half_n * den:
            return lo
        if num * half_d >= half_n * den:
            return hi
        return Fraction(mid_n * den + num * mid_d, mid_d * den)

    def point(self, v: Sequence[Any]) -> Any:
        if self.fixed_rows:  # midpoint + sum/n for the declared n
            s, sd = _exact(v[0])
            return self._centred(s, sd * self.fixed_rows)
        n, nd = _exact(v[0])
        s, sd = _exact(v[1])
        if n < nd:  # a noisy count below 1 counts as 1
            n = nd = 1
        return self._centred(s * nd, sd * n)

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        if self.fixed_rows:  # midpoint + (sum ∓ h)/n for the declared n
            s_lo, s_hi, sd = _around(v[0], hs[0])
            return (self._centred(s_lo, sd * self.fixed_rows),
                    self._centred(s_hi, sd * self.fixed_rows))
        n_lo, n_hi, nd = _around(v[0], hs[0])
        s_lo, s_hi, sd = _around(v[1], hs[1])
        if n_lo <= 0:
            lo, hi = self._range
            return (lo, hi)
        # the quotient of the two intervals (iv_div, by a positive one): each end of the sum
        # over the end of the count that takes it furthest; (s/sd) / (n/nd) = s·nd / (sd·n)
        return (self._centred(s_lo * nd, sd * (n_hi if s_lo >= 0 else n_lo)),
                self._centred(s_hi * nd, sd * (n_lo if s_hi >= 0 else n_hi)))

    def halfwidth(self, hs: Sequence[float], rows: int | None) -> float | None:
        if not rows:
            return None
        lo, hi = self._range
        half = float((hi - lo) / 2)
        if self.fixed_rows:
            return min(hs[0] / self.fixed_rows, half)
        h_count, h_sum = hs[0], hs[1]
        return min((h_sum + half * h_count) / max(rows - h_count, 1.0), half)


@dataclass(frozen=True)
class Variance(Mean):
    """``VARIANCE``/``VAR_POP``/``STDDEV``/``STDDEV_POP`` from a noisy count, centred sum and
    centred sum of squares: Σc²/n - (Σc/n)², clamped to [0, half-range²] (× n/(n-1) for the
    sample versions, √ for standard deviations)."""

    sample: bool = False
    sqrt: bool = False

    kind: ClassVar[AggregateKind] = AggregateKind.VARIANCE
    functions: ClassVar[tuple[str, ...]] = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        q, idx = cls._parts(ctx, agg, name)
        half = Fraction(q.uq - q.lq, 2) * q.scale
        idx.append(ctx.add(f"{name}: centred sum of squares", MeasureRole.CENTRED_SQUARES,
                           ctx.term(Term("centered_sq", q)), ctx.nb.linear(0, half * half),
                           q.scale * q.scale / 4, False, l2=ctx.nb.l2(0, half * half)))
        return cls(agg, name, tuple(idx), q, sample=agg.func.endswith("samp"),
                   sqrt=agg.func.startswith("stddev"))

    def point(self, v: Sequence[Any]) -> Any:
        lo, hi = self._range
        half = (hi - lo) / 2
        n = max(_frac(v[0]), Fraction(1))
        var = _frac(v[2]) / n - (_frac(v[1]) / n) ** 2
        cap = half * half
        if self.sample:
            n2 = max(n, Fraction(2))
            var, cap = var * n2 / (n2 - 1), cap * n2 / (n2 - 1)
        var = _clamp(var, Fraction(0), cap)
        return sqrt_fraction(var) if self.sqrt else var

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        lo, hi = self._range
        half = (hi - lo) / 2
        x = [_frac(a) for a in v]
        n_iv = (x[0] - hs[0], x[0] + hs[0])
        if n_iv[0] <= 0:
            whole = (Fraction(0), half * half * (2 if self.sample else 1))
            return (sqrt_fraction(whole[0]), sqrt_fraction(whole[1])) if self.sqrt else whole
        ratio = iv_div((x[1] - hs[1], x[1] + hs[1]), n_iv)
        first = iv_div((x[2] - hs[2], x[2] + hs[2]), n_iv)
        assert ratio is not None and first is not None
        r0, r1 = ratio
        second = (Fraction(0) if r0 <= 0 <= r1 else min(r0 * r0, r1 * r1), max(r0 * r0, r1 * r1))
        var_lo = max(first[0] - second[1], Fraction(0))
        var_hi = max(first[1] - second[0], Fraction(0))
        cap = half * half
        if self.sample:
            # n/(n-1) decreases in n: the low end uses the largest n, the high end the smallest
            f_lo = n_iv[1] / (n_iv[1] - 1) if n_iv[1] > 1 else Fraction(2)
            f_hi = n_iv[0] / (n_iv[0] - 1) if n_iv[0] > 1 else Fraction(2)
            var_lo, var_hi, cap = var_lo * f_lo, var_hi * f_hi, cap * f_hi
        var_lo, var_hi = min(var_lo, cap), min(var_hi, cap)
        if self.sqrt:
            return (sqrt_fraction(var_lo), sqrt_fraction(var_hi))
        return (var_lo, var_hi)

    def halfwidth(self, hs: Sequence[float], rows: int | None) -> float | None:
        if not rows:
            return None
        lo, hi = self._range
        half = float((hi - lo) / 2)
        h_count, h_sum, h_sq = hs
        bound = min((h_sq + 2 * half * h_sum + 2 * half * half * h_count)
                    / max(rows - h_count, 1.0), half * half)
        return math.sqrt(bound) if self.sqrt else bound


@dataclass(frozen=True)
class Quantile(Atom):
    """``MEDIAN``, ``QUANTILE``/``PERCENTILE_CONT``, ``MIN`` (p = 0), ``MAX`` (p = 1): the
    exponential mechanism over public bins of the declared range, from a per-bin histogram.

    Three releases share the aggregate's budget: the point (half), scored
    ``-|#below + #in/2 - p·n|``, and the two ends of a value interval (a quarter each), each
    scored by the distance of a target rank to the bin's rank interval
    ``[#below, #below + #in]`` on the counts padded with E public rows at each end of the
    range: the lower end targets p·n, the upper p·n + 2E, with E = ⌈ln(2B/α)/c⌉ rows for
    B bins and the mechanism's coefficient c. A bin beyond the empirical quantile Q (the
    smallest value with #{x ≤ v} ≥ p·n, of the clamped data) is then at least E rows from
    its end's target, so it is chosen with probability at most α/2, and [low edge of the
    lower bin, high edge of the upper bin] contains Q with probability at least 1 - α,
    whatever the data.
    """

    quantized: Quantized | None = None
    histogram: Histogram | None = None

    kind: ClassVar[AggregateKind] = AggregateKind.QUANTILE
    functions: ClassVar[tuple[str, ...]] = ("quantile",)
    fixed_interval: ClassVar[bool] = True

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        assert agg.arg is not None and agg.p is not None
        ctx.check_row_expr(agg.arg, agg.func.upper())
        q = ctx.quantized(agg.arg, agg)
        p = Fraction(agg.p)
        span = q.uq - q.lq
        if q.bits <= 0 and span + 1 <= ctx.max_point_bins:
            bins = span + 1
        else:
            bins = max(1, min(ctx.quantile_bins, span))
        h = Histogram(q, bins)
        hi = ctx.histogram(h)
        # scores are scaled so they are integers: by 2·den(p) for the point (its midpoint
        # rank has halves), by den(p) for the ends
        point = ctx.add(name, MeasureRole.QUANTILE, hi, ctx.nb.quantile(p) * 2 * p.denominator,
                        Fraction(1), True, p=p)
        ends = [ctx.add(f"{name}: {side} end", MeasureRole.QUANTILE, hi,
                        ctx.nb.quantile(p) * p.denominator, Fraction(1), True, p=p, side=side)
                for side in ("lower", "upper")]
        return cls(agg, name, (point, *ends), q, h)

    def shares(self) -> tuple[Fraction, ...]:
        return (Fraction(1, 2), Fraction(1, 4), Fraction(1, 4))

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        return (_frac(v[1]), _frac(v[2]))

    def halfwidth(self, hs: Sequence[float], rows: int | None) -> float | None:
        return None

    #: the interval ends of each quantile are released at α divided by this (Bonferroni
    #: over the quantiles an aggregate combines)
    end_alpha_divisor: ClassVar[int] = 1

    def scores(self, counts: Sequence[int], p: Fraction | None = None) -> list[int]:
        """The integer scores of the point's candidate bins from one group's bin counts."""
        p = Fraction(self.agg.p if p is None else p)  # type: ignore[arg-type]
        total = sum(counts)
        num, den = p.numerator, p.denominator
        out, below = [], 0
        for c in counts:
            out.append(-abs(2 * den * below + den * c - 2 * num * total))
            below += c
        return out

    def end_scores(self, counts: Sequence[int], side: str, pad: int,
                   p: Fraction | None = None) -> list[int]:
        """The integer scores (×den(p)) of the bins for one interval end: minus the distance
        of the end's target rank to each bin's rank interval, on the counts padded with
        ``pad`` rows at each end of the range (see the class docs).

        >>> from statcurator.query.expr import Agg, Col
        >>> q = Quantile(Agg("quantile", Col("x"), p=Fraction(1, 2)), "m", (0, 1, 2))
        >>> q.end_scores([0, 4, 0, 0], "lower", 1), q.end_scores([0, 4, 0, 0], "upper", 1)
        ([-2, 0, -6, -6], [-6, 0, -2, -2])
        """
        p = Fraction(self.agg.p if p is None else p)  # type: ignore[arg-type]
        num, den = p.numerator, p.denominator
        padded = list(counts)
        padded[0] += pad
        padded[-1] += pad
        target = num * sum(counts) + (2 * pad * den if side == "upper" else 0)
        out, below = [], 0
        for c in padded:
            lo, hi = below * den, (below + c) * den
            out.append(-(lo - target if target < lo else target - hi if target > hi else 0))
            below += c
        return out


@dataclass(frozen=True)
class Iqr(Quantile):
    """``IQR(x)``: the third quartile minus the first, each released like a quantile (its
    point and the two ends of its interval) from one histogram; its interval is
    [lower end of Q3 − upper end of Q1, upper end of Q3 − lower end of Q1], the quartiles'
    intervals at α/2 each, so it covers the empirical IQR with probability at least 1 − α.
    """

    kind: ClassVar[AggregateKind] = AggregateKind.IQR
    functions: ClassVar[tuple[str, ...]] = ("iqr",)
    end_alpha_divisor: ClassVar[int] = 2

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        assert agg.arg is not None
        ctx.check_row_expr(agg.arg, "IQR")
        q = ctx.quantized(agg.arg, agg)
        span = q.uq - q.lq
        if q.bits <= 0 and span + 1 <= ctx.max_point_bins:
            bins = span + 1
        else:
            bins = max(1, min(ctx.quantile_bins, span))
        h = Histogram(q, bins)
        hi = ctx.histogram(h)
        idx: list[int] = []
        for p in (Fraction(1, 4), Fraction(3, 4)):
            label = f"{name}: Q{int(4 * p)}"
            idx.append(ctx.add(label, MeasureRole.QUANTILE, hi,
                               ctx.nb.quantile(p) * 2 * p.denominator, Fraction(1), True, p=p))
            idx += [ctx.add(f"{label} {side} end", MeasureRole.QUANTILE, hi,
                            ctx.nb.quantile(p) * p.denominator, Fraction(1), True, p=p,
                            side=side) for side in ("lower", "upper")]
        return cls(agg, name, tuple(idx), q, h)

    def shares(self) -> tuple[Fraction, ...]:
        return (Fraction(1, 4), Fraction(1, 8), Fraction(1, 8)) * 2

    def point(self, v: Sequence[Any]) -> Any:
        return _frac(v[3]) - _frac(v[0])

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        return (max(_frac(v[4]) - _frac(v[2]), Fraction(0)), _frac(v[5]) - _frac(v[1]))


def iv_square(a: Interval) -> Interval:
    """{x² : x in a}."""
    lo = Fraction(0) if a[0] <= 0 <= a[1] else min(a[0] * a[0], a[1] * a[1])
    return (lo, max(a[0] * a[0], a[1] * a[1]))


def _iv_sub(a: Interval, b: Interval) -> Interval:
    return (a[0] - b[1], a[1] - b[0])


@dataclass(frozen=True)
class Regression(Atom):
    """``REGR_SLOPE(y, x)``, ``REGR_INTERCEPT(y, x)`` and ``CORR(y, x)`` from noisy sufficient
    statistics of the pairs where both are non-NULL: their number n and the centred sums
    Σx, Σy, Σx², Σxy (and Σy² for CORR), each clamped to the declared bounds.

    slope = (n·Σxy − Σx·Σy)/(n·Σx² − (Σx)²) (centring does not change it); intercept =
    ȳ − slope·x̄; corr = (n·Σxy − Σx·Σy)/√((n·Σx² − (Σx)²)(n·Σy² − (Σy)²)), in [−1, 1]. The
    released value is NULL when the noisy denominators are not positive. Intervals: interval
    arithmetic over the parts' intervals at α/k each (Bonferroni), when the denominators'
    intervals exclude 0 (else NULL; [−1, 1] for CORR).
    """

    qx: Quantized | None = None
    qy: Quantized | None = None

    kind: ClassVar[AggregateKind] = AggregateKind.REGRESSION
    functions: ClassVar[tuple[str, ...]] = ("regr_slope", "regr_intercept", "corr")

    @classmethod
    def build(cls, ctx: CompileContext, agg: Agg, name: str) -> Atom:
        y, x = agg.arg, agg.arg2
        if y is None or x is None:
            raise UnsupportedQueryError(f"{agg.func.upper()} takes two arguments (y, x)",
                                        remedy=f"write {agg.func.upper()}(y, x)")
        for e in (y, x):
            ctx.check_row_expr(e, agg.func.upper())
        # the pairs where both are non-NULL: each side is masked by the other's NULL
        xm = Case(((IsNull(y), Lit(None)),), x)
        ym = Case(((IsNull(x), Lit(None)),), y)
        qx, qy = ctx.quantized(xm, agg), ctx.quantized(ym, agg)
        hx = Fraction(qx.uq - qx.lq, 2) * qx.scale
        hy = Fraction(qy.uq - qy.lq, 2) * qy.scale
        nb = ctx.nb

        def add(label: str, role: MeasureRole, term: Term, lo: Fraction, hi: Fraction,
                scale: Fraction, integral: bool = False) -> int:
            return ctx.add(f"{name}: {label}", role, ctx.term(term), nb.linear(lo, hi), scale,
                           integral, l2=nb.l2(lo, hi))

        idx = [add("count", MeasureRole.COUNT, Term("valid", qx), Fraction(0), Fraction(1),
                   Fraction(1), True),
               add("Σx", MeasureRole.CENTRED_SUM, Term("centered", qx), -hx, hx, qx.scale / 2),
               add("Σy", MeasureRole.CENTRED_SUM, Term("centered", qy), -hy, hy, qy.scale / 2),
               add("Σx²", MeasureRole.CENTRED_SQUARES, Term("centered_sq", qx), Fraction(0),
                   hx * hx, qx.scale * qx.scale / 4),
               add("Σxy", MeasureRole.CENTRED_CROSS, Term("cross", qx, qy), -hx * hy, hx * hy,
                   qx.scale * qy.scale / 4)]
        if agg.func == "corr":
            idx.append(add("Σy²", MeasureRole.CENTRED_SQUARES, Term("centered_sq", qy),
                           Fraction(0), hy * hy, qy.scale * qy.scale / 4))
        return cls(agg, name, tuple(idx), qx, qy)

    def _mids(self) -> tuple[Fraction, Fraction]:
        assert self.qx is not None and self.qy is not None
        return ((self.qx.lq + self.qx.uq) * self.qx.scale / 2,
                (self.qy.lq + self.qy.uq) * self.qy.scale / 2)

    def point(self, v: Sequence[Any]) -> Any:
        n, sx, sy, sxx, sxy = (_frac(a) for a in v[:5])
        num = n * sxy - sx * sy
        dx = n * sxx - sx * sx
        if n <= 0 or dx <= 0:
            return None
        if self.agg.func == "corr":
            syy = _frac(v[5])
            dy = n * syy - sy * sy
            if dy <= 0:
                return None
            return max(min(Fraction(float(num) / math.sqrt(float(dx) * float(dy))),
                           Fraction(1)), Fraction(-1))
        slope = num / dx
        if self.agg.func == "regr_slope":
            return slope
        mx, my = self._mids()
        return (my + sy / n) - slope * (mx + sx / n)

    def interval(self, v: Sequence[Any], hs: Sequence[Fraction]) -> Interval | None:
        ivs = [(_frac(a) - h, _frac(a) + h) for a, h in zip(v, hs, strict=True)]
        n, sx, sy, sxx, sxy = ivs[:5]
        num = _iv_sub(iv_mul(n, sxy), iv_mul(sx, sy))
        dx = _iv_sub(iv_mul(n, sxx), iv_square(sx))
        if self.agg.func == "corr":
            dy = _iv_sub(iv_mul(n, ivs[5]), iv_square(sy))
            if n[0] <= 0 or dx[0] <= 0 or dy[0] <= 0:
                return (Fraction(-1), Fraction(1))
            den = iv_mul(dx, dy)
            roots = (sqrt_fraction(den[0]), sqrt_fraction(den[1]))
            r = iv_div(num, roots) if roots[0] > 0 else None
            if r is None:
                return (Fraction(-1), Fraction(1))
            return (max(r[0], Fraction(-1)), min(r[1], Fraction(1)))
        if n[0] <= 0 or dx[0] <= 0:
            return None
        slope = iv_div(num, dx)
        if slope is None or self.agg.func == "regr_slope":
            return slope
        mx, my = self._mids()
        xbar, ybar = iv_div(sx, n), iv_div(sy, n)
        assert xbar is not None and ybar is not None
        shifted = iv_mul(slope, (mx + xbar[0], mx + xbar[1]))
        return (my + ybar[0] - shifted[1], my + ybar[1] - shifted[0])

    def halfwidth(self, hs: Sequence[float], rows: int | None) -> float | None:
        return None


#: The IR aggregate function → its class.
REGISTRY: dict[str, type[Atom]] = {f: cls for cls in (Count, CountDistinct, Sum, DistinctSum,
                                                      Mean, Variance, Quantile, Iqr,
                                                      Regression)
                                   for f in cls.functions}


def atom_for(ctx: CompileContext, agg: Agg, name: str) -> Atom:
    """Compile one aggregate through the registry."""
    cls = REGISTRY.get(agg.func)
    if cls is None:
        raise UnsupportedQueryError(f"unsupported aggregate {agg.func}",
                                    remedy="see docs/queries.md for the supported aggregates")
    return cls.build(ctx, agg, name)
