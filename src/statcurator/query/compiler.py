"""The compiler: a logical :class:`~.plan.QueryPlan` → a :class:`CompiledQuery`: the
:class:`~.relational.EnginePlan` the engine runs and the noisy measurements, each with its
sensitivity. Nothing here depends on ε or reads data; :class:`~.binding.BoundQuery` attaches
the mechanisms for an ε and builds the query's one core Measurement.

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
5. **Aggregates.** Each aggregate is one class of :mod:`.aggregates` (its measures and their
   sensitivities, from :class:`~.sensitivity.Neighbourhood`: stability × per-row
   contribution, by the core's one sensitivity table).

ε is split equally between the aggregates of a query (each output aggregate and, if any, the
partition selection get one share; inside AVG or VARIANCE the share is split equally between
its sums and count) unless ``weights`` says otherwise.

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

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from ..core.errors import UnsupportedQueryError
from ..core.relations import AddRemove, ChangeOne, PersonLevel, Relation
from .aggregates import Atom, Measure, MeasureRole, atom_for
from .analysis import Analyzer, Bounds
from .catalog import Catalog, TableInfo
from .expr import Agg, Col, Compare, Expr, depth, walk
from .plan import Filter, Join, QueryPlan, Scan
from .plan import Relation as PlanRelation
from .relational import EnginePlan, Histogram, Quantized, Term
from .rewrite import clamp_to_grid, contribution_bounding, public_key_sets
from .scope import Scope, agg_name
from .sensitivity import Neighbourhood

__all__ = ["CompileOptions", "CompiledQuery", "compile_query", "dataset_relation"]


def _unit_kind(analyzer: Analyzer, unit: Col) -> str:
    """The kind of the privacy unit's column, ``other`` included."""
    return analyzer.scope.info_of(unit).kind(unit.name)


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
class CompiledQuery:
    """The compiled form of one query: what runs and what is measured, independent of ε
    (:class:`~.binding.BoundQuery` attaches the mechanisms)."""

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
    #: the (column, policy) whose Blowfish sensitivities calibrated SUM/AVG of the column
    policy: tuple[str, Any] | None = None

    @property
    def needs_delta(self) -> bool:
        """Partition selection is needed, and with it δ > 0."""
        return self.selection is not None

    @property
    def public_keys(self) -> bool:
        """Every group key has a public key set (no partition selection)."""
        return self.selection is None

    @property
    def relation(self) -> Relation:
        """The dataset's neighbour relation: the input space of the query's Measurement."""
        return self.neighbourhood.relation

    @property
    def measures_nothing(self) -> bool:
        """Only public keys are released (``GROUP BY`` over public keys without aggregates):
        the answer is the declared key set and costs nothing."""
        return not self.measures

    def explain(self) -> str:
        """The rewritten plan, the engine's work and the sensitivity of every measurement."""
        lines = [f"query: {self.text or self.plan.sql()}",
                 f"private table: {self.table}",
                 f"neighbours: {self.neighbourhood.describe()}"]
        if self.neighbourhood.group_size is not None:
            lines.append(f"privacy unit: a group of up to {self.neighbourhood.group_size} "
                         "correlated rows (group privacy): every sensitivity below is "
                         f"{self.neighbourhood.group_size}× the per-row one, so ε protects "
                         "the whole group")
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


#: the deepest expression a query may hold, in levels of nesting: far beyond what analysts
#: write, and shallow enough for every stage that walks a plan recursively (the analysis, the
#: certificate and its re-check, SQL generation, hashing) to stay within Python's recursion
#: limit, so that a query is refused here, before any charge, rather than fail after one
MAX_DEPTH = 100


def compile_query(plan: QueryPlan, catalog: Catalog, *, options: CompileOptions | None = None,
                  text: str | None = None) -> CompiledQuery:
    """Compile a plan against the catalog's metadata (never its private data)."""
    deepest = max((depth(e) for e in _expressions(plan)), default=0)
    if deepest > MAX_DEPTH:
        raise UnsupportedQueryError(
            f"an expression nested {deepest} levels deep (at most {MAX_DEPTH})",
            remedy="write it with fewer levels: a long sum of terms can be split into "
                   "several outputs added together after release, and AND/OR lists, IN "
                   "lists and BIN edges nest nothing")
    return _Compiler(plan, catalog, options or CompileOptions(), text).run()


def _expressions(plan: QueryPlan) -> list[Expr]:
    """Every expression of a plan: outputs, keys, HAVING, ORDER BY, WHERE and join keys."""
    out = [o.expr for o in plan.outputs] + [k.expr for k in plan.group_by]
    out += [k.expr for k in plan.order_by] + ([plan.having] if plan.having is not None else [])
    rel = plan.relation
    stack = [rel]
    while stack:
        r = stack.pop()
        if isinstance(r, Filter):
            out.append(r.predicate)
            stack.append(r.input)
        elif isinstance(r, Join):
            out += [x for pair in r.on for x in pair]
            stack.append(r.left)
    return out


def dataset_relation(info: TableInfo) -> tuple[Relation, bool]:
    """The neighbour relation a table's metadata declares, and whether it is bounded.

    >>> from statcurator.core.schema import Column, PrivacyUnit, TableMeta
    >>> meta = TableMeta("t", (Column("pid"),), privacy_unit=PrivacyUnit("pid", 3))
    >>> dataset_relation(TableInfo.from_meta(meta))
    (PersonLevel(key='pid', max_rows=3), False)

    A group of up to k rows without a key is a person-level unit that no key identifies
    (its distance cannot be computed from data; the query layer needs only the step):

    >>> meta = TableMeta("t", (Column("x"),), privacy_unit=PrivacyUnit(group_size=4))
    >>> dataset_relation(TableInfo.from_meta(meta))
    (PersonLevel(key=None, max_rows=4), False)
    """
    meta = info.meta
    bounded = str(meta.neighbours) == "bounded"
    unit = meta.privacy_unit
    if not unit.is_row:
        return PersonLevel(key=unit.column, max_rows=unit.max_rows), bounded
    return (ChangeOne() if bounded else AddRemove()), bounded


class _Compiler:
    """Compiles one plan; it is the :class:`~.aggregates.CompileContext` of its aggregates."""

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
        self.measures: list[Measure] = []
        self.notes: list[str] = list(plan.notes)
        self.unit = self.private.meta.privacy_unit
        self.unit_column = (None if self.unit.column is None
                            else Col(self.unit.column, self.private_alias))
        self.quantile_bins = options.quantile_bins
        self.max_point_bins = options.max_point_bins
        self.nb: Neighbourhood
        self.fixed_rows: int | None = None
        #: the (column, policy) whose Blowfish sensitivity applies, if any (_policy_scope)
        self.policy: tuple[str, Any] | None = None

    # -- the CompileContext of the aggregates -------------------------------------------
    def term(self, t: Term) -> int:
        return self.terms.setdefault(t, len(self.terms))

    def histogram(self, h: Histogram) -> int:
        return self.histograms.setdefault(h, len(self.histograms))

    def add(self, label: str, role: MeasureRole, index: int, sensitivity: Fraction,
            value_scale: Fraction, integral: bool, *, p: Fraction | None = None,
            l2: Fraction | None = None, side: str | None = None) -> int:
        self.measures.append(Measure(label, role, index, sensitivity, value_scale, integral,
                                     Fraction(1), p, l2, side))
        return len(self.measures) - 1

    def _policy_scope(self, bounded: bool, grouped: bool) -> tuple[str, Any] | None:
        """The (column, policy) whose Blowfish sensitivity applies to this query, or None.

        A policy's neighbours change one value of its column along one graph edge, with the
        table size public and nothing else changed. Its sensitivities are used only where
        that is the whole story: bounded neighbours, one row per unit, one table scanned
        without a filter and without groups (a filter or a group key on the column would let
        a θ-move take the row across a boundary, where its whole value counts), and a query
        that reads no other column. Every other query gets the ordinary (stronger)
        bounded-DP sensitivities, which imply the policy's guarantee."""
        from ..core.policy import Policy

        plan = self.plan
        if not bounded or grouped or not self.unit.is_row or not isinstance(plan.relation, Scan):
            return None
        read = {c.name for a in plan.aggregates() if a.arg is not None
                for c in a.columns()}
        if len(read) != 1:
            return None
        (column,) = read
        pol = self.private.meta[column].policy
        if not isinstance(pol, Policy) or pol.graph == "complete":
            return None
        return column, pol

    def value_sensitivity(self, q: Quantized, low: Fraction, high: Fraction) -> Fraction:
        """L1 sensitivity of a sum of the per-row contributions of ``q`` in ``[low, high]``:
        the neighbourhood's, or — when a policy applies and ``q`` is its column — the
        policy's longest clamped edge plus one grid step (a θ-move can change the rounded
        value by one more step; not for integers on the unit grid moved by an integer θ),
        whichever is smaller."""
        sens = self.nb.linear(low, high)
        if self.policy is None:
            return sens
        column, pol = self.policy
        if q.expr != Col(column, self.private_alias):
            return sens
        lo, hi = q.lq * q.scale, q.uq * q.scale
        # an integer column on the unit grid moved by an integer θ stays on the grid
        exact_grid = (q.integral and q.scale == 1 and pol.graph == "threshold"
                      and Fraction(pol.theta).denominator == 1)
        edge: Fraction = pol.sum_sensitivity(lo, hi)
        return min(sens, edge + (0 if exact_grid else q.scale))

    def check_row_expr(self, e: Expr, where: str) -> None:
        for node in walk(e):
            if isinstance(node, Agg):
                raise UnsupportedQueryError(f"an aggregate in {where}",
                                            remedy="aggregates belong in SELECT or HAVING")
        self.analyzer.kind(e)

    def quantized(self, e: Expr, agg: Agg) -> Quantized:
        kind = self.analyzer.kind(e)
        if kind not in ("integer", "real"):
            raise UnsupportedQueryError(
                f"{agg.sql()} needs a numeric argument, got a {kind} one",
                remedy="aggregate a numeric column (COUNT works on any column)")
        b: Bounds = self.analyzer.bounds(e, within=agg)
        return clamp_to_grid(e, b, kind)

    # -- relation ---------------------------------------------------------------------
    def check_relation(self, rel: PlanRelation) -> int:
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
            self.check_row_expr(rel.predicate, "WHERE")
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
                self.analyzer.left_joined = (*self.analyzer.left_joined, rel.right.alias)
            # compared as doubles where either side is real, as the engines compare them
            doubles = tuple("real" in (self.analyzer.kind(a), self.analyzer.kind(b))
                            for a, b in rel.on)
            names = tuple(b.name for _, b in rel.on if isinstance(b, Col))
            c = max(info.max_multiplicity(names, doubles), 1)
            if c > 1:
                self.notes.append(f"join with {rel.right.table!r}: a key repeats up to {c} times "
                                  f"in the public table, so each row may count {c} times")
            return s * c
        raise UnsupportedQueryError(f"unsupported relation {type(rel).__name__}",  # pragma: no cover
                                    remedy="use FROM, JOIN and WHERE")

    # -- the whole query --------------------------------------------------------------
    def run(self) -> CompiledQuery:
        plan = self.plan
        if not plan.aggregates() and not plan.group_by:
            raise UnsupportedQueryError("the query computes no aggregate",
                                        remedy="add COUNT(*), SUM(x), AVG(x), ...")
        stability = self.check_relation(plan.relation)
        grouped = bool(plan.group_by)
        bounding, r, g = contribution_bounding(self.private, self.private_alias, grouped,
                                               stability)
        relation, bounded = dataset_relation(self.private)
        self.nb = Neighbourhood(relation, r, g, grouped, bounded,
                                self.unit.group_size if self.unit.is_group else None)
        declared = self.private.meta.rows
        self.fixed_rows = (declared if bounded and not grouped and declared
                           and isinstance(plan.relation, Scan) and self.unit.is_row else None)
        self.policy = self._policy_scope(bounded, grouped)
        if self.policy is not None:
            column, pol = self.policy
            self.notes.append(
                f"policy on {column!r} ({pol}): its neighbours move one value of {column!r} "
                "along one edge of the policy graph, so SUM and AVG of it are calibrated to the "
                "policy's sensitivity (docs/policies.md)")
        for k in plan.group_by:
            self.check_row_expr(k.expr, "GROUP BY")
        key_sets = public_key_sets(self.analyzer, plan.group_by, self.options.max_public_keys)
        public = all(s is not None for s in key_sets)

        atoms: list[Atom] = []
        names = {o.expr: o.name for o in plan.outputs}
        taken = set(names.values())
        for agg in plan.aggregates():
            name = names.get(agg)
            if name is None:  # an aggregate used only inside an expression or HAVING
                name = agg_name(agg)
                if name in taken:
                    name = agg.sql()
                taken.add(name)
            atoms.append(atom_for(self, agg, name))
        selection = None
        if not public:
            # partition selection counts units, each in one row of one key: rows that a
            # unit repeats (join stability, or a group of rows) are refused
            if self.unit.is_group:
                raise UnsupportedQueryError(
                    f"group keys without a public key set, with a privacy unit of up to "
                    f"{self.unit.group_size} rows that no column identifies (a group may put "
                    f"{r} rows into one key, or into {r} keys)",
                    remedy="declare the keys' categories, or bin them with BIN/WIDTH_BUCKET, "
                           "or declare the group's key column: privacy_unit = { column = "
                           f"\"household\", max_rows = {self.unit.group_size} }}")
            if self.unit.is_row and stability > 1:
                raise UnsupportedQueryError(
                    "group keys without a public key set, after a join whose key repeats in "
                    "the public table",
                    remedy="declare the keys' categories, or join on a unique key, or declare "
                           "a person id privacy unit")
            t = self.term(Term("rows") if self.unit.is_row else Term("units"))
            selection = self.add("partition selection", MeasureRole.SELECTION, t,
                                 Fraction(1), Fraction(1), True)
            missing = [k.name for k, s in zip(plan.group_by, key_sets, strict=True) if s is None]
            self.notes.append(f"keys without a public key set: {', '.join(missing)} "
                              "(released by partition selection)")
        measures = weigh(atoms, self.measures, selection)
        real_distinct = tuple(self.analyzer.kind(t.input) == "real"  # type: ignore[arg-type]
                              for t in self.terms if t.kind == "distinct")
        engine_plan = EnginePlan(
            relation=plan.relation, keys=plan.group_by, key_values=tuple(key_sets),
            bounding=bounding, terms=tuple(self.terms), histograms=tuple(self.histograms),
            real_keys=tuple(self.analyzer.kind(k.expr) == "real" for k in plan.group_by),
            # the unit id is only partitioned on and hashed (as text), never compared or
            # converted: any type will do (a BLOB or UUID id), so its kind is read as is,
            # past the analysis's refusal of kinds that queries cannot use
            real_unit=bounding is not None and _unit_kind(self.analyzer, bounding.unit) == "real",
            real_distinct=real_distinct)
        # the declared (public) table size is the n of an unfiltered, ungrouped aggregate
        meta = self.private.meta
        rows = meta.rows if (not grouped and isinstance(plan.relation, Scan)) else None
        return CompiledQuery(plan, engine_plan, tuple(atoms), tuple(measures), self.nb,
                             tuple(key_sets), selection, self.private.name, self.text,
                             stability, tuple(self.notes), rows, self.policy)


def weigh(atoms: list[Atom], measures: list[Measure], selection: int | None,
          weights: dict[str, Fraction] | None = None) -> list[Measure]:
    """The ε shares: each aggregate (and the selection) gets ``weights[name]`` (default 1),
    split between the aggregate's measures as it says (:meth:`Atom.shares`: equally, but a
    quantile gives half to its point and a quarter to each interval end); shares are
    normalized to sum to 1."""
    w_atom = {a.name: (weights or {}).get(a.name, Fraction(1)) for a in atoms}
    w_sel = (weights or {}).get("partition selection", Fraction(1))
    total = sum(w_atom.values(), Fraction(0)) + (w_sel if selection is not None else 0)
    out = list(measures)
    for a in atoms:
        for i, share in zip(a.measures, a.shares(), strict=True):
            out[i] = replace(out[i], weight=w_atom[a.name] * share / total)
    if selection is not None:
        out[selection] = replace(out[selection], weight=w_sel / total)
    return out


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x} (≈{float(x):.6g})"
