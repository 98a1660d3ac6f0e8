"""The compiler: a logical :class:`~.plan.QueryPlan` → an :class:`EnginePlan` for the engine and
the set of noisy measurements, each with its sensitivity and (once ε is chosen) its mechanism
and privacy map.

Rewrite rules applied here (from :mod:`.rewrite`; nothing reads the data):

1. **Clamping.** Every numeric aggregate argument is clamped to its public bounds (declared
   in metadata, or derived by interval arithmetic over CASE and ``+ - * /``) and rounded onto
   the grid 2^-k (k chosen so the range spans at most 2^30 grid steps; integer columns keep
   k ≤ 0). NULL and NaN contribute nothing; ±∞ are clamped.
2. **Contribution bounding.** With a person id, at most ``max_rows`` rows per person (and at
   most ``max_groups`` groups) reach the aggregation, chosen at random (salted hashes).
3. **Public key sets.** Group keys with a public set of values (declared ``categories``,
   booleans, CASE on constants, BIN / WIDTH_BUCKET, columns of public tables) restrict the
   rows to those keys, and *every* key appears in the answer — zero rows included — so a
   group's absence leaks nothing.
4. **Partition selection.** Any other group key is released only when the noisy number of
   units in its group passes a threshold (δ is charged).
5. **Aggregates.** COUNT and SUM get one Laplace measurement each; AVG is
   ``midpoint + noisy centred sum / noisy count``; VARIANCE and STDDEV add a noisy centred sum
   of squares; quantiles (MEDIAN, PERCENTILE_CONT, MIN = p 0, MAX = p 1) are the exponential
   mechanism over public bins of the declared range, scored from a per-bin histogram.

The sensitivity of each measurement comes from :class:`~.sensitivity.Neighbourhood`
(stability × per-row contribution). ε is split equally between the aggregates of a query
(each output aggregate and, if any, the partition selection get one share; inside AVG or
VARIANCE the share is split equally between its sums and count) unless ``weights`` says
otherwise; the split is shown by :meth:`BoundQuery.describe` and in each release.

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.sql import parse_sql
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)),
...                        Column("sex", categories=("F", "M"))))
>>> cat = DictCatalog({"t": TableInfo.from_meta(meta)})
>>> cq = compile_query(parse_sql("SELECT sex, COUNT(*) AS n, AVG(age) AS a FROM t GROUP BY sex", cat), cat)
>>> [(m.label, m.sensitivity, m.weight) for m in cq.measures]
[('n', Fraction(1, 1), Fraction(1, 2)), ('a: count', Fraction(1, 1), Fraction(1, 4)), ('a: centred sum', Fraction(60, 1), Fraction(1, 4))]
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidParameterError, UnsupportedQueryError
from ..core.measures import PrivacyLoss, PureDP
from ..core.numbers import exact, exact_probability
from .analysis import Analyzer, Bounds
from .catalog import Catalog, TableInfo
from .expr import Agg, Col, Compare, Expr, walk
from .plan import Filter, Join, QueryPlan, Relation, Scan
from .relational import EnginePlan, ExactResult, Histogram, Quantized, Term
from .rewrite import clamp_to_grid, contribution_bounding, public_key_sets
from .scope import Scope, agg_name
from .sensitivity import Neighbourhood

if TYPE_CHECKING:
    from .postprocess import NoisyAnswer

__all__ = ["CompileOptions", "Measure", "Atom", "CompiledQuery", "BoundQuery", "compile_query",
]



@dataclass(frozen=True)
class CompileOptions:
    """Knobs of the compiler (all public; none depends on data).

    ``quantile_bins`` — number of equal candidate bins over the declared range for quantiles
    (integer columns with at most ``max_point_bins`` values get one bin per value);
    ``max_public_keys`` — the largest product of public key sets accepted.
    """

    quantile_bins: int = 1024
    max_point_bins: int = 4096
    max_public_keys: int = 1_000_000


@dataclass(frozen=True)
class Measure:
    """One noisy measurement: which exact aggregate it reads, its sensitivity, its ε weight.

    ``role`` is ``count``, ``sum``, ``centred sum``, ``centred sum of squares``, ``quantile``
    or ``selection``. ``index`` points into the engine plan's terms (histograms for
    quantiles). The exact engine integer times ``value_scale`` is the value the mechanism
    sees; ``integral`` says that value and the sensitivity are integers (integer-valued
    discrete Laplace); ``sensitivity`` is in those value units.
    """

    label: str
    role: str
    index: int
    sensitivity: Fraction
    value_scale: Fraction
    integral: bool
    weight: Fraction
    p: Fraction | None = None


@dataclass(frozen=True)
class Atom:
    """One distinct aggregate of the query, released from one or more measurements."""

    agg: Agg
    name: str
    kind: str  # count, sum, avg, var, quantile
    measures: tuple[int, ...]
    quantized: Quantized | None = None
    histogram: Histogram | None = None
    sample: bool = False
    sqrt: bool = False


@dataclass
class CompiledQuery:
    """The compiled form of one query: what runs and what is measured.

    Nothing in it depends on ε; :meth:`bind` attaches the mechanisms for a given ε (and δ).
    """

    plan: QueryPlan
    engine_plan: EnginePlan
    atoms: tuple[Atom, ...]
    measures: tuple[Measure, ...]
    neighbourhood: Neighbourhood
    key_sets: tuple[tuple[Any, ...] | None, ...]
    selection: int | None
    table: str
    text: str | None = None
    stability: int = 1
    notes: tuple[str, ...] = ()
    public_rows: int | None = None

    @property
    def needs_delta(self) -> bool:
        return self.selection is not None

    @property
    def public_keys(self) -> bool:
        return self.selection is None

    def bind(self, epsilon: Any, delta: Any = None, *,
             weights: Mapping[str, Any] | None = None) -> BoundQuery:
        """Attach mechanisms for a total ``epsilon`` (and ``delta`` for partition selection)."""
        return BoundQuery(self, epsilon, delta, weights)

    def explain(self) -> str:
        """The rewritten plan, the engine's work and the sensitivity of every measurement."""
        lines = [f"query: {self.text or self.plan.sql()}",
                 f"private table: {self.table}",
                 f"neighbours: {self.neighbourhood.describe()}"]
        if self.stability != 1:
            lines.append(f"join stability: {self.stability}")
        lines.append(self.engine_plan.describe())
        lines.append("group keys: " + ("public key sets" if self.public_keys else
                                       "released by DP partition selection (needs δ)"))
        for m in self.measures:
            lines.append(f"measure {m.label}: {m.role}, sensitivity {_show(m.sensitivity)}, "
                         f"ε weight {_show(m.weight)}")
        lines.extend(self.notes)
        return "\n".join(lines)


def compile_query(plan: QueryPlan, catalog: Catalog, *, options: CompileOptions | None = None,
                  text: str | None = None) -> CompiledQuery:
    """Compile a plan against the catalog's metadata (never its private data)."""
    return _Compiler(plan, catalog, options or CompileOptions(), text).run()


class _Compiler:
    def __init__(self, plan: QueryPlan, catalog: Catalog, options: CompileOptions,
                 text: str | None) -> None:
        self.plan = plan
        self.catalog = catalog
        self.options = options
        self.text = text
        scans = plan.relation.scans()
        self.scope = Scope(catalog, scans)
        self.analyzer = Analyzer(self.scope)
        self.private_alias = scans[0].alias
        self.private: TableInfo = self.scope.tables[self.private_alias]
        self.terms: dict[Term, int] = {}
        self.histograms: dict[Histogram, int] = {}
        self.notes: list[str] = []

    # -- relation ---------------------------------------------------------------------
    def check_relation(self, rel: Relation) -> int:
        """Type-check the relation and return its stability (rows per input row)."""
        if isinstance(rel, Scan):
            info = self.scope.tables[rel.alias]
            if info.public:
                raise UnsupportedQueryError(
                    f"table {rel.table!r} is public: it needs no DP query",
                    remedy="DP queries read a private table (register_public tables can only "
                           "be joined)")
            return 1
        if isinstance(rel, Filter):
            s = self.check_relation(rel.input)
            self._check_row_expr(rel.predicate, "WHERE")
            if self.analyzer.kind(rel.predicate) not in ("boolean", "null"):
                raise UnsupportedQueryError(f"WHERE {rel.predicate.sql()} is not a condition",
                                            remedy="write a comparison, e.g. WHERE age >= 18")
            return s
        if isinstance(rel, Join):
            s = self.check_relation(rel.left)
            info = self.scope.tables[rel.right.alias]
            if not info.public:
                raise UnsupportedQueryError(
                    f"a join with the private table {rel.right.table!r}",
                    remedy="join only with public tables (register them with register_public)")
            for a, b in rel.on:
                self.analyzer.kind(Compare("=", a, b))
                if not (isinstance(b, Col) and b.table == rel.right.alias):
                    raise UnsupportedQueryError("a join condition must compare with a column of "
                                                "the joined public table", remedy="ON a.x = p.y")
            if rel.kind == "left":
                self.analyzer.left_joined = (*getattr(self.analyzer, "left_joined", ()),
                                             rel.right.alias)
            # compared as doubles where either side is real, as the engines compare them
            doubles = tuple("real" in (self.analyzer.kind(a), self.analyzer.kind(b))
                            for a, b in rel.on)
            mult = info.max_multiplicity(tuple(b.name for _, b in rel.on), doubles)  # type: ignore[union-attr]
            c = max(mult, 1)
            if c > 1:
                self.notes.append(f"join with {rel.right.table!r}: a key repeats up to {c} times "
                                  f"in the public table, so each row may count {c} times")
            return s * c
        raise UnsupportedQueryError(f"unsupported relation {type(rel).__name__}",  # pragma: no cover
                                    remedy="use FROM, JOIN and WHERE")

    def _check_row_expr(self, e: Expr, where: str) -> None:
        for node in walk(e):
            if isinstance(node, Agg):
                raise UnsupportedQueryError(f"an aggregate in {where}",
                                            remedy="aggregates belong in SELECT or HAVING")
        self.analyzer.kind(e)

    # -- the whole query --------------------------------------------------------------
    def run(self) -> CompiledQuery:
        plan = self.plan
        if not plan.aggregates():
            raise UnsupportedQueryError("the query computes no aggregate",
                                        remedy="add COUNT(*), SUM(x), AVG(x), ...")
        stability = self.check_relation(plan.relation)
        meta = self.private.meta
        unit = meta.privacy_unit
        grouped = bool(plan.group_by)
        bounding, r, g = contribution_bounding(self.private, self.private_alias, grouped,
                                               stability)
        nb = Neighbourhood(bounded=meta.neighbours.value == "bounded",  # type: ignore[union-attr]
                           rows_per_unit=r, groups_per_unit=g, grouped=grouped)
        for k in plan.group_by:
            self._check_row_expr(k.expr, "GROUP BY")
        key_sets = public_key_sets(self.analyzer, plan.group_by, self.options.max_public_keys)
        selection = None
        public = all(s is not None for s in key_sets)

        atoms: list[Atom] = []
        measures: list[Measure] = []
        names = {o.expr: o.name for o in plan.outputs}
        taken = set(names.values())
        for agg in plan.aggregates():
            name = names.get(agg)
            if name is None:  # an aggregate used only inside an expression or HAVING
                name = agg_name(agg)
                if name in taken:
                    name = agg.sql()
                taken.add(name)
            atoms.append(self.atom(agg, name, nb, measures))
        if not public:
            if unit.is_row and stability > 1:
                raise UnsupportedQueryError(
                    "group keys without a public key set, after a join whose key repeats in "
                    "the public table",
                    remedy="declare the keys' categories, or join on a unique key, or declare "
                           "a person id privacy unit")
            t = self.term(Term("rows") if unit.is_row else Term("units"))
            selection = len(measures)
            measures.append(Measure("partition selection", "selection", t,
                                    Fraction(1), Fraction(1), True, Fraction(1)))
            missing = [k.name for k, s in zip(plan.group_by, key_sets, strict=True) if s is None]
            self.notes.append(f"keys without a public key set: {', '.join(missing)} "
                              "(released by partition selection)")
        measures = self.weigh(atoms, measures, selection)
        engine_plan = EnginePlan(
            relation=plan.relation, keys=plan.group_by, key_values=tuple(key_sets),
            bounding=bounding, terms=tuple(self.terms), histograms=tuple(self.histograms),
            real_keys=tuple(self.analyzer.kind(k.expr) == "real" for k in plan.group_by),
            real_unit=bounding is not None and self.analyzer.kind(bounding.unit) == "real")
        # the declared (public) table size is the n of an unfiltered, ungrouped aggregate
        rows = meta.rows if (not grouped and isinstance(plan.relation, Scan)) else None
        return CompiledQuery(plan, engine_plan, tuple(atoms), tuple(measures), nb,
                             tuple(key_sets), selection, self.private.name, self.text,
                             stability, tuple(self.notes), rows)

    @staticmethod
    def weigh(atoms: list[Atom], measures: list[Measure], selection: int | None) -> list[Measure]:
        """Equal shares per aggregate (and selection); equal shares within an aggregate."""
        shares = len(atoms) + (1 if selection is not None else 0)
        out = list(measures)
        for a in atoms:
            for i in a.measures:
                out[i] = _replace(out[i], weight=Fraction(1, shares * len(a.measures)))
        if selection is not None:
            out[selection] = _replace(out[selection], weight=Fraction(1, shares))
        return out

    def term(self, t: Term) -> int:
        return self.terms.setdefault(t, len(self.terms))

    def atom(self, agg: Agg, name: str, nb: Neighbourhood, measures: list[Measure]) -> Atom:
        def add(label: str, role: str, index: int, sens: Fraction, scale: Fraction,
                integral: bool, p: Fraction | None = None) -> int:
            measures.append(Measure(label, role, index, sens, scale, integral, Fraction(1), p))
            return len(measures) - 1

        unit = self.private.meta.privacy_unit
        if agg.func == "count":
            if agg.arg is None:
                t = self.term(Term("rows"))
            else:
                self._check_row_expr(agg.arg, "COUNT")
                t = self.term(Term("nonnull", agg.arg))
            i = add(name, "count", t, nb.linear(0, 1), Fraction(1), True)
            return Atom(agg, name, "count", (i,))
        if agg.func == "count_distinct":
            if unit.is_row:
                raise UnsupportedQueryError(
                    f"{agg.sql()}: the table's privacy unit is a row, so there is no person to "
                    "count",
                    remedy="use COUNT(*) (one row is one person), or declare privacy_unit = "
                           "{ column = \"person_id\", max_rows = m } in the metadata")
            if agg.arg != Col(unit.column, self.private_alias):  # type: ignore[arg-type]
                raise UnsupportedQueryError(
                    f"{agg.sql()}: COUNT(DISTINCT ...) is supported only on the privacy unit "
                    f"column {unit.column!r}",
                    remedy=f"write COUNT(DISTINCT {unit.column}), or GROUP BY the column with "
                           "public keys and count the groups")
            t = self.term(Term("units"))
            i = add(name, "count", t, nb.distinct_units(), Fraction(1), True)
            return Atom(agg, name, "count", (i,))
        assert agg.arg is not None
        self._check_row_expr(agg.arg, agg.func.upper())
        q = self.quantized(agg.arg, agg)
        if agg.func == "sum":
            t = self.term(Term("sum", q))
            sens = nb.linear(q.lq * q.scale, q.uq * q.scale)
            integral = q.bits <= 0 and sens.denominator == 1
            i = add(name, "sum", t, sens, q.scale, integral)
            return Atom(agg, name, "sum", (i,), quantized=q)
        half = Fraction(q.uq - q.lq, 2) * q.scale
        if agg.func in ("avg", "var_samp", "var_pop", "stddev_samp", "stddev_pop"):
            idx = [add(f"{name}: count", "count", self.term(Term("valid", q)),
                       nb.linear(0, 1), Fraction(1), True),
                   add(f"{name}: centred sum", "centred sum", self.term(Term("centered", q)),
                       nb.linear(-half, half), q.scale / 2, False)]
            if agg.func == "avg":
                return Atom(agg, name, "avg", tuple(idx), quantized=q)
            idx.append(add(f"{name}: centred sum of squares", "centred sum of squares",
                           self.term(Term("centered_sq", q)), nb.linear(0, half * half),
                           q.scale * q.scale / 4, False))
            return Atom(agg, name, "var", tuple(idx), quantized=q,
                        sample=agg.func.endswith("samp"), sqrt=agg.func.startswith("stddev"))
        if agg.func == "quantile":
            p = Fraction(agg.p)  # type: ignore[arg-type]
            span = q.uq - q.lq
            if q.bits <= 0 and span + 1 <= self.options.max_point_bins:
                bins = span + 1
            else:
                bins = max(1, min(self.options.quantile_bins, span))
            h = Histogram(q, bins)
            hi = self.histograms.setdefault(h, len(self.histograms))
            # scores are scaled by 2·den(p) so they are integers; the sensitivity with them
            i = add(name, "quantile", hi, nb.quantile(p) * 2 * p.denominator, Fraction(1), True, p)
            return Atom(agg, name, "quantile", (i,), quantized=q, histogram=h)
        raise UnsupportedQueryError(f"unsupported aggregate {agg.func}",  # pragma: no cover
                                    remedy="see docs/queries.md")

    def quantized(self, e: Expr, agg: Agg) -> Quantized:
        kind = self.analyzer.kind(e)
        if kind not in ("integer", "real"):
            raise UnsupportedQueryError(
                f"{agg.sql()} needs a numeric argument, got a {kind} one",
                remedy="aggregate a numeric column (COUNT works on any column)")
        b: Bounds = self.analyzer.bounds(e, within=agg)
        return clamp_to_grid(e, b, kind)


def _replace(m: Measure, **changes: Any) -> Measure:
    from dataclasses import replace
    return replace(m, **changes)


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x} (≈{float(x):.6g})"


# =========================================================================================
# Binding ε: mechanisms, cost, accuracy, and the noisy answer
# =========================================================================================

@dataclass
class MeasureInfo:
    """What a release says about one measurement (shown in ``Release.mechanisms``)."""

    label: str
    role: str
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    sensitivity: Fraction
    scale: Fraction | None
    grid: Fraction | None
    mechanism_object: Any = field(repr=False, default=None)

    def as_dict(self) -> dict[str, Any]:
        d = {"measure": self.label, "role": self.role, "mechanism": self.mechanism,
             "epsilon": self.epsilon, "sensitivity": self.sensitivity, "scale": self.scale}
        if self.delta:
            d["delta"] = self.delta
        if self.grid is not None:
            d["grid"] = self.grid
        return d


class BoundQuery:
    """A compiled query with its mechanisms for one (ε, δ): its cost and accuracy are known
    without touching any data, and :meth:`noise` turns the engine's exact answer into the
    release.

    >>> from statcurator.core.schema import Column, TableMeta
    >>> from statcurator.query.catalog import DictCatalog, TableInfo
    >>> from statcurator.query.relational import ExactResult
    >>> from statcurator.query.sql import parse_sql
    >>> cat = DictCatalog({"t": TableInfo.from_meta(TableMeta("t", (Column("a"),)))})
    >>> b = compile_query(parse_sql("SELECT COUNT(*) AS n FROM t", cat), cat).bind(1)
    >>> b.cost, b.infos[0].scale, b.accuracy(0.05)[0]["halfwidth"]
    (PureDP(epsilon=Fraction(1, 1)), Fraction(1, 1), 3.0)
    >>> names, rows, _ = b.noise(ExactResult((), {(): (100,)})).rows()
    >>> names, abs(rows[0][0] - 100) < 40, rows[0][2] - rows[0][1]
    (['n', 'n_low', 'n_high'], True, 6.0)
    """

    def __init__(self, compiled: CompiledQuery, epsilon: Any, delta: Any = None,
                 weights: Mapping[str, Any] | None = None) -> None:
        from .. import mechanisms as mech

        self.compiled = compiled
        self.epsilon = exact(epsilon, "epsilon")
        self.delta = exact_probability(delta, "delta") if delta is not None else Fraction(0)
        if compiled.needs_delta and self.delta == 0:
            missing = [k.name for k, s in zip(compiled.plan.group_by, compiled.key_sets, strict=True)
                       if s is None]
            raise UnsupportedQueryError(
                f"group key(s) {', '.join(missing)} have no public key set, so the groups "
                "themselves must be released by DP partition selection, which needs δ > 0",
                remedy="pass delta=1e-6 (charged), or declare categories = [...] for the "
                       "key(s) in the metadata, or bin them with BIN/WIDTH_BUCKET")
        measures = list(compiled.measures)
        if weights:
            measures = _reweigh(compiled, measures, weights)
        total = sum((m.weight for m in measures), Fraction(0))
        self.measures = measures
        self._halfwidths: dict[tuple[int, float], float] = {}
        self.infos: list[MeasureInfo] = []
        self.mechanisms: list[Any] = []
        for m in measures:
            eps = self.epsilon * m.weight / total
            if m.role == "selection":
                obj = mech.PartitionSelection(epsilon=eps, delta=self.delta,
                                              max_partitions=compiled.neighbourhood.partitions())
                info = MeasureInfo(m.label, m.role, "partition selection (thresholded Laplace)",
                                   eps, self.delta, m.sensitivity, getattr(obj, "scale", None),
                                   None, obj)
            elif m.role == "quantile":
                obj = mech.ExponentialMechanism(epsilon=eps, sensitivity=m.sensitivity)
                info = MeasureInfo(m.label, m.role, "exponential", eps, Fraction(0),
                                   m.sensitivity / (2 * m.p.denominator), None, None, obj)  # type: ignore[union-attr]
            else:
                if m.integral:
                    # integers; when they are multiples of a coarse quantization grid 2^k
                    # (bounds beyond 2^30), that grid is the release grid, so the mechanism
                    # works on the engine's own small integers (sums of |q| <= 2^30) and a
                    # huge total never overflows its arithmetic
                    grid = m.value_scale if m.value_scale > 1 else None
                else:
                    grid = _release_grid(m.sensitivity / eps)
                if compiled.plan.group_by:
                    # one vector release over all groups, calibrated to its L1 sensitivity;
                    # off-grid inputs are rounded, which moves at most one step per changed group
                    obj = mech.VectorLaplaceMechanism(
                        sensitivity=m.sensitivity, epsilon=eps, grid=grid,
                        max_changed=None if grid is None or m.integral
                        else compiled.neighbourhood.partitions())
                else:
                    obj = mech.LaplaceMechanism(sensitivity=m.sensitivity, epsilon=eps, grid=grid)
                info = MeasureInfo(m.label, m.role, "laplace" if grid is None else
                                   "laplace (grid)", eps, Fraction(0), m.sensitivity,
                                   Fraction(obj.scale), grid, obj)
            self.mechanisms.append(obj)
            self.infos.append(info)

    # -- privacy --------------------------------------------------------------------------
    @property
    def cost(self) -> PrivacyLoss:
        """The total privacy loss: the sum of every mechanism's cost (sequential composition)."""
        total: PrivacyLoss = PureDP(0)
        for obj in self.mechanisms:
            total = total + obj.cost
        return total

    def privacy_map(self, distance: int = 1) -> PrivacyLoss:
        """The loss for datasets ``distance`` units apart (group privacy).

        Every Laplace and exponential measurement is pure ε_i-DP with a linear map, so d units
        cost d·ε_i; partition selection uses its own (ε, δ) group-privacy map.
        """
        d = exact(distance, "distance")
        total: PrivacyLoss = PureDP(0)
        for m, obj in zip(self.measures, self.mechanisms, strict=True):
            if m.role == "selection":
                total = total + obj.privacy_map(d)
            else:
                total = total + obj.cost.scale(d)
        return total

    def describe(self) -> str:
        """The ε split and every mechanism's scale (text)."""
        lines = [f"total: {self.cost}"]
        for info in self.infos:
            scale = f", scale {float(info.scale):.6g}" if info.scale is not None else ""
            lines.append(f"  {info.label}: {info.mechanism}, ε={float(info.epsilon):.6g}"
                         f"{scale}, sensitivity {_show(info.sensitivity)}")
        return "\n".join(lines)

    # -- accuracy -------------------------------------------------------------------------
    def halfwidth(self, i: int, alpha: float) -> float:
        """The (1 - alpha) half-width of measurement ``i`` (cached: it is exact but slow)."""
        key = (i, alpha)
        h = self._halfwidths.get(key)
        if h is None:
            h = self._halfwidths[key] = _accuracy(self.mechanisms[i], alpha)
        return h

    def accuracy(self, alpha: float = 0.05, rows: int | None = None) -> list[dict[str, Any]]:
        """Per aggregate: the (1 - α) interval half-width, from the mechanisms alone.

        Counts and sums have a fixed half-width. AVG/VARIANCE depend on the (private) number
        of rows n: with ``rows`` (or the table's declared public size) an approximate
        half-width at that n is given. Quantiles report the rank error instead.
        """
        alpha = _alpha(alpha)
        n = rows if rows is not None else self.compiled_rows()
        out = []
        for atom in self.compiled.atoms:
            entry: dict[str, Any] = {"output": atom.name, "aggregate": atom.agg.sql()}
            if atom.kind in ("count", "sum"):
                i = atom.measures[0]
                entry.update(mechanism=self.infos[i].mechanism, halfwidth=self.halfwidth(i, alpha))
            elif atom.kind in ("avg", "var"):
                hs = [self.halfwidth(i, alpha / len(atom.measures)) for i in atom.measures]
                entry.update(mechanism="laplace (sum and count)",
                             components={self.infos[i].label: h
                                         for i, h in zip(atom.measures, hs, strict=True)})
                entry["halfwidth"] = (_mean_halfwidth(atom, hs, n) if n else None)
                if n:
                    entry["at_rows"] = n
            elif atom.kind == "quantile":
                i = atom.measures[0]
                h = atom.histogram
                scaled = self.measures[i].sensitivity
                eps = self.infos[i].epsilon
                # utility theorem: P[score < best - 2Δ/ε·ln(B/α)] <= α, in score units
                rank = float(2 * scaled / eps) * math.log(h.bins / alpha) / (2 * atom.agg.p.denominator)  # type: ignore[union-attr]
                entry.update(mechanism="exponential", halfwidth=None, rank_error=rank,
                             bins=h.bins)  # type: ignore[union-attr]
            out.append(entry)
        if self.compiled.selection is not None:
            obj = self.mechanisms[self.compiled.selection]
            out.append({"output": "(groups)", "aggregate": "partition selection",
                        "mechanism": "partition selection", "halfwidth": None,
                        "threshold": float(getattr(obj, "threshold", float("nan")))})
        return out

    def compiled_rows(self) -> int | None:
        """The public n of this query's rows, when the metadata declares it and it applies."""
        return self.compiled.public_rows

    # -- the noisy answer -----------------------------------------------------------------
    def noise(self, exact_result: ExactResult, alpha: float = 0.05) -> NoisyAnswer:
        """Add noise to the engine's exact answer: the only place exact values are read."""
        return self.noise_many(exact_result, 1, alpha)[0]

    def noise_many(self, exact_result: ExactResult, n: int,
                   alpha: float = 0.05) -> list[NoisyAnswer]:
        """``n`` independent releases of one exact answer, drawn in vectorized form from the
        very mechanisms whose cost is charged (a release is ``n = 1``; tests and accuracy
        simulations use more). Only the curator ever holds an exact answer."""
        import numpy as np

        from .postprocess import NoisyAnswer

        alpha = _alpha(alpha)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidParameterError(f"n must be a positive integer, got {n!r}",
                                        remedy="pass n=1")
        cq = self.compiled
        ex = exact_result
        candidates = self._candidate_keys(ex)
        zeros = (0,) * len(cq.engine_plan.terms)
        rows = [ex.groups.get(k, zeros) for k in candidates]
        keep = None
        if cq.selection is not None:
            m = self.measures[cq.selection]
            counts = np.array([r[m.index] for r in rows], dtype=np.int64)
            if counts.size:
                keep, _ = self.mechanisms[cq.selection].release(np.tile(counts, (n, 1)))
            else:
                keep = np.zeros((n, 0), dtype=bool)
        vector = bool(cq.plan.group_by)
        draws: list[list[list[Any]] | None] = []
        for i, m in enumerate(self.measures):
            obj = self.mechanisms[i]
            if m.role == "selection":
                draws.append(None)
            elif m.role == "quantile":
                hist = ex.histograms[m.index]
                atom = next(a for a in cq.atoms if i in a.measures)
                cols = [_quantiles(obj, atom, hist.get(k, {}), n) for k in candidates]
                draws.append([[c[d] for c in cols] for d in range(n)])
            else:
                draws.append(_laplace(obj, [r[m.index] for r in rows], m, vector, n))
        answers = []
        for d in range(n):
            idx = range(len(candidates)) if keep is None else np.flatnonzero(keep[d]).tolist()
            keys = [candidates[j] for j in idx]
            values = [[] if dr is None else [dr[d][j] for j in idx] for dr in draws]
            answers.append(NoisyAnswer(self, keys, values, alpha))
        return answers

    def _candidate_keys(self, ex: ExactResult) -> list[tuple]:
        """Every public key (absent groups included), or the present keys for selection."""
        cq = self.compiled
        if not cq.plan.group_by:
            return [()]
        if cq.public_keys:
            return list(itertools.product(*cq.key_sets))  # type: ignore[arg-type]
        return sorted(ex.groups, key=lambda k: tuple(
            (v is None, str(type(v)), v if v is not None else 0) for v in k))


@functools.lru_cache(maxsize=4096)
def _accuracy(mechanism: Any, alpha: float) -> float:
    """A mechanism's half-width, cached across queries (mechanisms are frozen values)."""
    return float(mechanism.accuracy(alpha))


def _alpha(alpha: Any) -> float:
    a = float(alpha)
    if not 0 < a < 1:
        raise InvalidParameterError(f"alpha must be in (0, 1), got {alpha}",
                                    remedy="alpha=0.05 gives 95% intervals")
    return a


def _release_grid(scale: Fraction) -> Fraction:
    """A power of two about 2^-20 of the noise scale: fine enough that rounding onto it costs
    nothing visible (one grid step of sensitivity), coarse enough that float64 holds every
    released value exactly."""
    s = Fraction(scale)
    e = s.numerator.bit_length() - s.denominator.bit_length() - 20
    return Fraction(2) ** e


#: Exact aggregates are clamped to +-2^61 grid units of their mechanism before the noise is
#: added. The clamp is a public, data-independent 1-Lipschitz map of the aggregate (it never
#: raises the sensitivity), and it keeps every input inside the range the mechanisms'
#: vectorized int64 arithmetic accepts: an error raised only for some data would release a
#: bit of the data with no noise at all.
_MAX_UNITS = 2**61


def _laplace(obj: Any, raw: list[int], m: Measure, vector: bool, n: int) -> list[list[Any]]:
    """``n`` draws of the noisy values of every group (an ``n × groups`` list): each draw is
    one vector release (grouped) or one scalar release."""
    import numpy as np

    if not raw:
        return [[] for _ in range(n)]
    limit = _MAX_UNITS * obj.step
    vals = [min(max(Fraction(x) * m.value_scale, -limit), limit) for x in raw]
    if obj.grid is None:  # integers released as integers
        base = np.array([int(v) for v in vals], dtype=np.int64)
        out = obj.release(np.tile(base, (n, 1)) if vector else np.full(n, base[0]))
        return np.asarray(out).reshape(n, len(raw)).tolist()
    floats = [float(v) for v in vals]
    if all(Fraction(f) == v for f, v in zip(floats, vals, strict=True)):
        base = np.array(floats, dtype=np.float64)
    else:
        base = np.array(vals, dtype=object)
    inp = np.tile(base, (n, 1)) if vector else np.repeat(base[:1], n)
    out = np.asarray(obj.release(inp)).reshape(n, len(raw))
    if m.integral:  # multiples of an integer grid 2^k: integers
        return [[int(v) for v in row] for row in out.tolist()]
    return [[Fraction(v) for v in row] for row in out.tolist()]


def _quantiles(obj: Any, atom: Atom, hist: dict[int, int], n: int) -> list[Fraction]:
    """``n`` exponential-mechanism draws of a quantile from one group's bin counts.

    Candidate bins are scored ``-|#below + #in/2 - p·n|`` (times 2·den(p), so integers); the
    chosen bin is reported by its value (one-value bins) or its midpoint.
    """
    h = atom.histogram
    assert h is not None and atom.agg.p is not None
    p = atom.agg.p
    counts = [hist.get(b, 0) for b in range(h.bins)]
    total = sum(counts)
    num, den = p.numerator, p.denominator
    scores = []
    below = 0
    for c in counts:
        scores.append(-abs(2 * den * below + den * c - 2 * num * total))
        below += c
    picks = [int(obj.release(scores))] if n == 1 else np.asarray(obj.sample(scores, n)).tolist()
    out = []
    for index in picks:
        lo, hi = h.bin_range(int(index))
        out.append((lo + hi) / 2)
    return out


def _mean_halfwidth(atom: Atom, hs: list[float], n: int) -> float:
    q = atom.quantized
    assert q is not None
    half = float(Fraction(q.uq - q.lq, 2) * q.scale)
    h_count, h_sum = hs[0], hs[1]
    denom = max(n - h_count, 1.0)
    if atom.kind == "avg":
        return min((h_sum + half * h_count) / denom, half)
    # variance: first-order bound from the three components
    h_sq = hs[2]
    return min((h_sq + 2 * half * h_sum + 2 * half * half * h_count) / denom, half * half)


def _reweigh(cq: CompiledQuery, measures: list[Measure],
             weights: Mapping[str, Any]) -> list[Measure]:
    names = {a.name: a for a in cq.atoms}
    unknown = [k for k in weights if k not in names and k != "partition selection"]
    if unknown:
        raise InvalidParameterError(f"weights name unknown output(s) {unknown}",
                                    remedy="use output names: " + ", ".join(names))
    w_atom = {a.name: exact(weights.get(a.name, 1), f"weight of {a.name}") for a in cq.atoms}
    out = list(measures)
    for a in cq.atoms:
        for i in a.measures:
            out[i] = _replace(out[i], weight=w_atom[a.name] / len(a.measures))
    if cq.selection is not None:
        out[cq.selection] = _replace(out[cq.selection], weight=exact(
            weights.get("partition selection", 1), "weight of partition selection"))
    return out


