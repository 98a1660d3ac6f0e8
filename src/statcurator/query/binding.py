"""Binding a privacy budget to a compiled query: its mechanisms, its one core Measurement,
its accuracy before any data is seen, and the noise on the engine's exact answer.

For each measure of a :class:`~.compiler.CompiledQuery` the binding chooses the mechanism
(by its :class:`~.aggregates.MeasureRole`) and chains the measure's *stability* — a core
:class:`~statcurator.core.measurement.Transformation` from the dataset's neighbour relation
to the measure's output metric, ``d ↦ d·sensitivity`` — into the mechanism's
:class:`~statcurator.core.measurement.Measurement`; the measures compose sequentially into
**one** Measurement for the query. Its privacy map is what the ledger charges
(``BoundQuery.cost`` is ``measurement.map(1)``), and its function is the release itself
(the noise on the engine's exact answer), so the charged cost is computed from the very
object that runs. Nothing here sums costs by hand.

With ``rho`` (zCDP) counts and sums get discrete Gaussian noise calibrated to their L2
sensitivity and quantiles the exponential mechanism at ε = √(2ρ_i) (ε-DP implies ε²/2-zCDP);
partition selection has no zCDP form and is refused.

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.compiler import compile_query
>>> from statcurator.query.relational import ExactResult
>>> from statcurator.query.sql import parse_sql
>>> cat = DictCatalog({"t": TableInfo.from_meta(TableMeta("t", (Column("a"),)))})
>>> b = BoundQuery(compile_query(parse_sql("SELECT COUNT(*) AS n FROM t", cat), cat), 1)
>>> b.cost, b.infos[0].scale, b.accuracy(0.05)[0]["halfwidth"]
(PureDP(epsilon=Fraction(1, 1)), Fraction(1, 1), 3.0)
>>> b.measurement.map(2)                         # two units apart: group privacy, 2ε
PureDP(epsilon=Fraction(2, 1))
>>> names, rows, _ = b.noise(ExactResult((), {(): (100,)})).rows()
>>> names, abs(rows[0][0] - 100) < 40, rows[0][2] - rows[0][1]
(['n', 'n_low', 'n_high'], True, 6.0)
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.composition import sequential
from ..core.errors import InvalidParameterError, PrivacyAccountingError, UnsupportedQueryError
from ..core.measurement import Measurement, Transformation
from ..core.measures import ZCDP, PrivacyLoss, PureDP
from ..core.numbers import exact, exact_probability, round_down, sqrt_bounds
from ..core.relations import AbsoluteDistance, L1Distance, L2Distance, LInfDistance
from ..mechanisms import GaussianMechanism, LaplaceMechanism, samplers
from ..mechanisms._base import to_grid_units
from ..mechanisms.laplace import VectorLaplaceMechanism
from .aggregates import Measure, MeasureRole, Quantile
from .compiler import CompiledQuery, weigh
from .postprocess import NoisyAnswer
from .relational import ExactResult
from .shapes import same_but

__all__ = ["BoundQuery", "MeasureInfo"]


@dataclass
class MeasureInfo:
    """What a release says about one measurement (shown in ``Release.mechanisms``)."""

    label: str
    role: MeasureRole
    mechanism: str
    epsilon: Fraction | None
    delta: Fraction
    sensitivity: Fraction
    scale: Fraction | None
    grid: Fraction | None
    rho: Fraction | None = None
    mechanism_object: Any = field(repr=False, default=None)

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"measure": self.label, "role": str(self.role),
                             "mechanism": self.mechanism, "sensitivity": self.sensitivity,
                             "scale": self.scale}
        if self.epsilon is not None:
            d["epsilon"] = self.epsilon
        if self.rho is not None:
            d["rho"] = self.rho
        if self.delta:
            d["delta"] = self.delta
        if self.grid is not None:
            d["grid"] = self.grid
        return d


class BoundQuery:
    """A compiled query with its mechanisms for one budget — ``epsilon`` (and ``delta`` for
    partition selection) or ``rho`` (zCDP, Gaussian noise). Its cost and accuracy are known
    without touching any data; :meth:`noise` (the function of :attr:`measurement`) turns the
    engine's exact answer into the release.
    """

    def __init__(self, compiled: CompiledQuery, epsilon: Any = None, delta: Any = None,
                 weights: Mapping[str, Any] | None = None, *, rho: Any = None) -> None:
        self.compiled = compiled
        if (epsilon is None) == (rho is None):
            raise InvalidParameterError("give exactly one of epsilon and rho",
                                        remedy="epsilon=1 for Laplace noise, rho=0.125 for "
                                               "Gaussian (zCDP) noise")
        self.zcdp = rho is not None
        self.epsilon = exact(epsilon, "epsilon") if epsilon is not None else None
        self.rho = exact(rho, "rho") if rho is not None else None
        self.delta = exact_probability(delta, "delta") if delta is not None else Fraction(0)
        if compiled.needs_delta:
            missing = [k.name for k, s in zip(compiled.plan.group_by, compiled.key_sets,
                                              strict=True) if s is None]
            if self.zcdp:
                raise UnsupportedQueryError(
                    f"group key(s) {', '.join(missing)} need DP partition selection, which "
                    "has no zCDP form",
                    remedy="declare categories = [...] for the key(s), bin them with "
                           "BIN/WIDTH_BUCKET, or release with epsilon and delta")
            if self.delta == 0:
                raise UnsupportedQueryError(
                    f"group key(s) {', '.join(missing)} have no public key set, so the groups "
                    "themselves must be released by DP partition selection, which needs δ > 0",
                    remedy="pass delta=1e-6 (charged), or declare categories = [...] for the "
                           "key(s) in the metadata, or bin them with BIN/WIDTH_BUCKET")
        self.measures = list(compiled.measures)
        if weights:
            self.measures = weigh(list(compiled.atoms), self.measures, compiled.selection,
                                  _weights(compiled, weights))
        self._halfwidths: dict[tuple[int, float], float] = {}
        self._halfwidth_fractions: dict[tuple[int, float], Fraction] = {}
        self.infos: list[MeasureInfo] = []
        self.mechanisms: list[Any] = []
        for m in self.measures:
            obj, info = self._mechanism(m)
            self.mechanisms.append(obj)
            self.infos.append(info)
        self.measurement = self._measurement()
        #: every public key of a grouped query (a product of public key sets: built once)
        self._public_candidates: list[tuple[Any, ...]] | None = None
        #: the release certificate with its re-check (the curator sets it on first release)
        self.certificate: dict[str, Any] | None = None

    def derived(self, compiled: CompiledQuery, plan_sql: str | None = None) -> BoundQuery:
        """This bound query for ``compiled``, a query of the same shape that differs only in
        constants of its WHERE clause (:mod:`~statcurator.query.shapes`, whose ``check``
        guards that): the same measures, hence the same mechanisms, cost and certificate
        (with the other query's text, and ``plan_sql``, its plan's ``sql()`` when the caller
        has it). ``compiled`` must measure exactly what this query's compiled form measures
        (it is derived from it): otherwise this refuses, with
        :class:`PrivacyAccountingError`."""
        mine = self.compiled
        if (compiled.measures != mine.measures or compiled.atoms != mine.atoms
                or compiled.neighbourhood != mine.neighbourhood
                or compiled.key_sets != mine.key_sets or compiled.selection != mine.selection
                or compiled.stability != mine.stability or compiled.policy != mine.policy
                or compiled.notes != mine.notes
                # the engine plan is mine but for its relation (whose constants check guards)
                or not same_but(mine.engine_plan, compiled.engine_plan, (("relation",),))):
            raise PrivacyAccountingError(
                "a query of a known shape was compiled to other measurements than its shape",
                remedy="this is a defect of statcurator: nothing was charged or released; "
                       "report the two queries")
        new = object.__new__(type(self))  # a shallow copy (copy.copy's, without its dispatch)
        new.__dict__.update(self.__dict__)
        new.compiled = compiled
        if plan_sql is None:
            plan_sql = compiled.plan.sql()
        # the same privacy map (the same chains, composed); the function is new.noise, which
        # reads new.compiled, and the name is the other query's text
        m = self.measurement
        new.measurement = Measurement(
            m.input_space, m.output_measure, new.noise, m.privacy_map,
            name=(compiled.text or plan_sql) if self.measures else m.name)
        if self.certificate is not None:
            new.certificate = {**self.certificate, "query": compiled.text or plan_sql,
                               "plan": plan_sql}
        return new

    # -- mechanisms ---------------------------------------------------------------------
    def _mechanism(self, m: Measure) -> tuple[Any, MeasureInfo]:
        from .. import mechanisms as mech

        obj: Any
        cq = self.compiled
        if m.role == MeasureRole.SELECTION:
            eps = self.epsilon * m.weight  # type: ignore[operator]
            obj = mech.PartitionSelection(epsilon=eps, delta=self.delta,
                                          max_partitions=cq.neighbourhood.partitions())
            return obj, MeasureInfo(m.label, m.role, "partition selection (thresholded Laplace)",
                                    eps, self.delta, m.sensitivity, obj.noise_scale, None,
                                    mechanism_object=obj)
        if m.role == MeasureRole.QUANTILE:
            if self.zcdp:  # ε-DP is ε²/2-zCDP: the largest ε within this share of ρ
                eps = round_down(sqrt_bounds(2 * self.rho * m.weight, 64)[0], 60)  # type: ignore[operator]
            else:
                eps = self.epsilon * m.weight  # type: ignore[operator]
            obj = mech.ExponentialMechanism(epsilon=eps, sensitivity=m.sensitivity)
            assert m.p is not None
            return obj, MeasureInfo(m.label, m.role, "exponential", eps, Fraction(0),
                                    m.sensitivity, m.sensitivity / (2 * m.p.denominator), None,
                                    mechanism_object=obj)
        vector = bool(cq.plan.group_by)
        if self.zcdp:
            share: Fraction = self.rho * m.weight  # type: ignore[operator]
            sens = m.l2 if vector and m.l2 is not None else m.sensitivity
            scale = sqrt_bounds(sens * sens / (2 * share), 32)[1]
        else:
            share = self.epsilon * m.weight  # type: ignore[operator]
            sens = m.sensitivity
            scale = sens / share
        if m.integral:
            # integers; when they are multiples of a coarse quantization grid 2^k (bounds
            # beyond 2^30), that grid is the release grid, so the mechanism works on the
            # engine's own small integers and a huge total never overflows its arithmetic
            grid = m.value_scale if m.value_scale > 1 else None
        else:
            grid = _release_grid(scale)
        if vector and grid is not None and not m.integral:
            # one vector release over all groups: the values are rounded to the grid first,
            # which moves each changed group by at most one step, so that much is added to
            # the sensitivity the noise is calibrated to (and the stability is charged with)
            sens = sens + grid * _changed(cq)
        if self.zcdp:
            cls = mech.VectorGaussianMechanism if vector else mech.GaussianMechanism
            obj = cls(sensitivity=sens, rho=share, grid=grid)
            return obj, MeasureInfo(m.label, m.role, "gaussian" if grid is None else
                                    "gaussian (grid)", None, Fraction(0), sens, obj.scale, grid,
                                    rho=share, mechanism_object=obj)
        cls_l = mech.VectorLaplaceMechanism if vector else mech.LaplaceMechanism
        obj = cls_l(sensitivity=sens, epsilon=share, grid=grid)
        return obj, MeasureInfo(m.label, m.role, "laplace" if grid is None else "laplace (grid)",
                                share, Fraction(0), sens, Fraction(obj.scale), grid,
                                mechanism_object=obj)

    def _measurement(self) -> Measurement:
        """The query's one Measurement: each measure's stability chained into its
        mechanism's measurement, composed sequentially; its function is the release."""
        cq = self.compiled
        relation = cq.relation
        if not self.measures:  # only public keys are released: nothing is measured
            return Measurement(relation, PureDP, self.noise, lambda d: PureDP(Fraction(0)),
                               name="public keys")
        chains = []
        for m, obj in zip(self.measures, self.mechanisms, strict=True):
            if m.role == MeasureRole.SELECTION:
                chains.append(obj.measurement(relation))
                continue
            metric = _metric(m, bool(cq.plan.group_by), self.zcdp)
            # the sensitivity the mechanism is calibrated to: the measure's (L1, L2 or the
            # scores' L∞), plus the grid rounding of a vector release
            stability = Transformation(relation, metric, _identity,
                                       functools.partial(_times, obj.sensitivity), name=m.label)
            chains.append(stability >> obj.measurement(metric))
        if self.zcdp:
            # an exponential-mechanism quantile is pure ε-DP, hence ε²/2-zCDP: each one is
            # stated in the currency asked for before the zCDP composition (converting the
            # composed ε instead would charge (Σε)²/2, more than Σ ε²/2)
            chains = [c if c.output_measure is ZCDP else
                      Measurement(c.input_space, ZCDP, c.function,
                                  functools.partial(_as_zcdp, c.privacy_map), name=c.name)
                      for c in chains]
        composed = sequential(chains, name=cq.text or cq.plan.sql())
        return Measurement(relation, composed.output_measure, self.noise,
                           composed.privacy_map, name=composed.name)

    # -- privacy --------------------------------------------------------------------------
    @functools.cached_property
    def cost(self) -> PrivacyLoss:
        """The privacy loss of the query: its Measurement's map at one privacy unit (what is
        charged, converted to (ε, δ) at the stated δ when ``rho`` comes with ``delta``)."""
        return self.measurement.cost

    def privacy_map(self, distance: int = 1) -> PrivacyLoss:
        """The loss for datasets ``distance`` units apart (group privacy)."""
        return self.measurement.map(distance)

    def requested(self) -> PrivacyLoss:
        """The loss the caller asked for: ε (with δ when partition selection spends it),
        or ρ."""
        from ..core.measures import ApproxDP

        if self.compiled.measures_nothing:
            return PureDP(Fraction(0))
        if self.zcdp:
            return ZCDP(self.rho)  # type: ignore[arg-type]
        if self.compiled.needs_delta:
            return ApproxDP(self.epsilon, self.delta)  # type: ignore[arg-type]
        return PureDP(self.epsilon)  # type: ignore[arg-type]

    def check_cost(self) -> PrivacyLoss:
        """The cost to charge — the Measurement's map —, after checking it against what was
        asked for: the same kind of loss, and within it (equal for ε; ρ can be a hair less,
        where a quantile's ε = √(2ρ_i) is rounded down). Otherwise the release refuses to
        run: a difference is a defect. Checked once per bound query (its parts are fixed)."""
        checked = self.__dict__.get("_checked_cost")
        if checked is not None:
            return checked  # type: ignore[no-any-return]
        from ..core.measures import kind_of

        cost, asked = self.cost, self.requested()
        if kind_of(cost) != kind_of(asked) or not cost.fits(asked) \
                or (not self.zcdp and cost != asked):
            raise PrivacyAccountingError(
                f"the query's measurement costs {cost}, not the {asked} asked for",
                remedy="this is a defect of statcurator: nothing was charged or released; "
                       "report the query")
        checked = self.__dict__["_checked_cost"] = self.charge_for(cost)
        return checked

    def charge_for(self, cost: PrivacyLoss) -> PrivacyLoss:
        """The loss the ledger is charged for a measurement cost: the cost itself, or — with
        ``rho`` and a stated ``delta`` — its (ε, δ) conversion at that δ, for analysts whose
        budget is stated in (ε, δ) (by the core's one conversion table).

        >>> from statcurator.core.measures import ZCDP
        >>> b = BoundQuery.__new__(BoundQuery); b.zcdp, b.delta = True, Fraction(1, 10**6)
        >>> b.charge_for(ZCDP(Fraction(1, 8))).delta
        Fraction(1, 1000000)
        """
        from ..core.measures import convert

        if self.zcdp and self.delta:
            return convert(cost, "approx", delta=self.delta)
        return cost

    def describe(self) -> str:
        """The budget split and every mechanism's scale (text)."""
        lines = [f"total: {self.cost}"]
        for info in self.infos:
            scale = f", scale {float(info.scale):.6g}" if info.scale is not None else ""
            share = (f"ρ={float(info.rho):.6g}" if info.rho is not None
                     else f"ε={float(info.epsilon):.6g}")  # type: ignore[arg-type]
            lines.append(f"  {info.label}: {info.mechanism}, {share}{scale}, "
                         f"sensitivity {_show(info.sensitivity)}")
        return "\n".join(lines)

    def mechanism_summary(self) -> str:
        """One line naming every measurement's mechanism and share (for the ledger; written
        once per bound query, whose mechanisms are fixed)."""
        summary = self.__dict__.get("_summary")
        if summary is None:
            summary = self.__dict__["_summary"] = "; ".join(
                f"{i.label}: {i.mechanism} "
                + (f"ρ={i.rho}" if i.rho is not None else f"ε={i.epsilon}")
                for i in self.infos) or "public keys only"
        return summary

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
        n = rows if rows is not None else self.compiled.public_rows
        out = []
        for atom in self.compiled.atoms:
            entry: dict[str, Any] = {"output": atom.name, "aggregate": atom.agg.sql(),
                                     "mechanism": self.infos[atom.measures[0]].mechanism}
            if isinstance(atom, Quantile):
                i = atom.measures[0]
                h = atom.histogram
                p = self.measures[i].p
                assert h is not None and p is not None
                eps = self.infos[i].epsilon
                # utility theorem: P[score < best - 2Δ/ε·ln(B/α)] <= α, in score units
                rank = float(2 * self.measures[i].sensitivity / eps) * math.log(  # type: ignore[operator]
                    h.bins / alpha) / (2 * p.denominator)
                entry.update(halfwidth=None, rank_error=rank, bins=h.bins)
            elif len(atom.measures) == 1:
                entry["halfwidth"] = self.halfwidth(atom.measures[0], alpha)
            else:
                hs = [self.halfwidth(i, alpha / len(atom.measures)) for i in atom.measures]
                entry["mechanism"] += " (parts)"
                entry["components"] = {self.infos[i].label: h
                                       for i, h in zip(atom.measures, hs, strict=True)}
                entry["halfwidth"] = atom.halfwidth(hs, n)
                if n:
                    entry["at_rows"] = n
            out.append(entry)
        if self.compiled.selection is not None:
            obj = self.mechanisms[self.compiled.selection]
            out.append({"output": "(groups)", "aggregate": "partition selection",
                        "mechanism": "partition selection", "halfwidth": None,
                        "threshold": float(obj.threshold)})
        return out

    # -- the noisy answer -----------------------------------------------------------------
    def noise(self, exact_result: ExactResult, alpha: float = 0.05) -> NoisyAnswer:
        """Add noise to the engine's exact answer: the only place exact values are read."""
        return self.noise_many(exact_result, 1, alpha)[0]

    def noise_many(self, exact_result: ExactResult, n: int,
                   alpha: float = 0.05) -> list[NoisyAnswer]:
        """``n`` independent releases of one exact answer, drawn in vectorized form from the
        very mechanisms whose cost is charged (a release is ``n = 1``; tests and accuracy
        simulations use more). Only the curator ever holds an exact answer."""
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
        owner = {i: a for a in cq.atoms for i in a.measures}
        draws: list[list[list[Any]] | None] = []
        for i, m in enumerate(self.measures):
            obj = self.mechanisms[i]
            if m.role == MeasureRole.SELECTION:
                draws.append(None)
            elif m.role == MeasureRole.QUANTILE:
                hist = ex.histograms[m.index]
                atom = owner[i]
                assert isinstance(atom, Quantile)
                cols = [_quantiles(obj, atom, hist.get(k, {}), n, m,
                                   alpha / atom.end_alpha_divisor) for k in candidates]
                draws.append([[c[d] for c in cols] for d in range(n)])
            else:
                draws.append(_noisy(obj, [r[m.index] for r in rows], m, vector, n))
        answers = []
        for d in range(n):
            if keep is None:  # every candidate key (the draws are fresh lists)
                keys = list(candidates)
                values = [[] if dr is None else dr[d] for dr in draws]
                answers.append(NoisyAnswer(cq.plan, cq.atoms, keys, values, alpha,
                                           self._halfwidth_fraction))
                continue
            idx = np.flatnonzero(keep[d]).tolist()
            keys = [candidates[j] for j in idx]
            values = [[] if dr is None else [dr[d][j] for j in idx] for dr in draws]
            answers.append(NoisyAnswer(cq.plan, cq.atoms, keys, values, alpha,
                                       self._halfwidth_fraction))
        return answers

    def _halfwidth_fraction(self, i: int, alpha: float) -> Fraction:
        key = (i, alpha)
        h = self._halfwidth_fractions.get(key)
        if h is None:
            h = self._halfwidth_fractions[key] = Fraction(self.halfwidth(i, alpha))
        return h

    def _candidate_keys(self, ex: ExactResult) -> list[tuple[Any, ...]]:
        """Every public key (absent groups included), or the present keys for selection."""
        cq = self.compiled
        if not cq.plan.group_by:
            return [()]
        if cq.public_keys:  # the same list for every release (callers only index it)
            if self._public_candidates is None:
                self._public_candidates = list(itertools.product(*cq.key_sets))  # type: ignore[arg-type]
            return self._public_candidates
        return sorted(ex.groups, key=lambda k: tuple(
            (v is None, str(type(v)), v if v is not None else 0) for v in k))


# -- helpers --------------------------------------------------------------------------------

def _identity(x: Any) -> Any:
    return x


def _times(sensitivity: Fraction, d: Fraction) -> Fraction:
    """The stability map of a measure: ``d`` units apart, the aggregate moves ``d·Δ``."""
    return d * sensitivity


def _metric(m: Measure, vector: bool, zcdp: bool) -> Any:
    if m.role == MeasureRole.QUANTILE:
        return LInfDistance()
    if zcdp:
        return L2Distance() if vector else AbsoluteDistance()
    return L1Distance() if vector else AbsoluteDistance()


def _as_zcdp(privacy_map: Any, d: Fraction) -> PrivacyLoss:
    from ..core.measures import convert

    return convert(privacy_map(d), "zcdp")


def _changed(cq: CompiledQuery) -> int:
    """How many groups one unit can change (the rounding to a grid moves each by a step)."""
    return cq.neighbourhood.partitions()


def _weights(cq: CompiledQuery, weights: Mapping[str, Any]) -> dict[str, Fraction]:
    names = [a.name for a in cq.atoms]
    unknown = [k for k in weights if k not in names and k != "partition selection"]
    if unknown:
        raise InvalidParameterError(f"weights name unknown output(s) {unknown}",
                                    remedy="use output names: " + ", ".join(names))
    return {k: exact(v, f"weight of {k}") for k, v in weights.items()}


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
#: grouped counts of at most this many groups are released without numpy's fixed costs
_SMALL_VECTOR = 64


def _noisy(obj: Any, raw: list[int], m: Measure, vector: bool, n: int) -> list[list[Any]]:
    """``n`` draws of the noisy values of every group (an ``n × groups`` list): each draw is
    one vector release (grouped) or one scalar release."""
    if not raw:
        return [[] for _ in range(n)]
    if n == 1 and not vector:  # one scalar release: exact Python numbers, no numpy batch
        return [[_noisy_scalar(obj, raw[0], m)]]
    if n == 1 and len(raw) <= _SMALL_VECTOR and _small_vector(obj, m) \
            and all(type(r) is int for r in raw):
        # a few groups' counts or integer sums: the mechanism's release in Python integers
        # (the same clamp, the same single draw of len(raw) noise units; a test holds them
        # equal)
        noise = np.asarray(samplers.discrete_laplace(obj.noise_scale, len(raw))).tolist()
        return [[min(max(r, -_MAX_UNITS), _MAX_UNITS) + z
                 for r, z in zip(raw, noise, strict=True)]]
    if obj.grid is None and m.value_scale == 1:  # counts: int64 all the way (the common case)
        try:
            ints = np.asarray(raw, dtype=np.int64)
        except OverflowError:
            ints = None
        if ints is not None:
            base = np.clip(ints, -_MAX_UNITS, _MAX_UNITS)
            out = obj.release(np.tile(base, (n, 1)) if vector else np.full(n, base[0]))
            return np.asarray(out).reshape(n, len(raw)).tolist()
    vals = [_clamped(obj, x, m) for x in raw]
    if vector and obj.grid is not None and not m.integral:  # see BoundQuery._mechanism
        vals = [Fraction(to_grid_units(v, obj.grid)) * obj.grid for v in vals]
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


def _small_vector(obj: Any, m: Measure) -> bool:
    """Whether a grouped measure's release is integer noise units added to the integer
    aggregate itself: the Laplace vector mechanism without a release grid, on a value of
    unit scale."""
    return type(obj) is VectorLaplaceMechanism and obj.grid is None and m.value_scale == 1


def _clamped(obj: Any, raw: int, m: Measure) -> Fraction:
    """An exact aggregate in output units, clamped to +-2^61 grid units (see _MAX_UNITS)."""
    limit: Fraction = _MAX_UNITS * obj.step
    value: Fraction = Fraction(raw) * m.value_scale
    return min(max(value, -limit), limit)


def _noisy_scalar(obj: Any, raw: int, m: Measure) -> Any:
    """One noisy value of an ungrouped aggregate, as :func:`_noisy` computes it (the same
    clamp, the same mechanism) with the mechanism's exact scalar release.

    When the value's unit is a whole number of grid steps (counts; a centred sum on its
    release grid), the value is already on the grid: its grid units are ``raw·k``, clamped
    to ±2^61, plus the mechanism's noise in grid units — what the mechanism's ``release``
    computes from the clamped value, in integers (:func:`_noisy_scalar_generic` is the
    general path; a test holds them equal draw for draw)."""
    k = _units_per_value(obj.step, m.value_scale) if type(obj) in _SCALAR_MECHANISMS \
        and type(raw) is int else None
    if k is None:
        return _noisy_scalar_generic(obj, raw, m)
    noisy = min(max(raw * k, -_MAX_UNITS), _MAX_UNITS) + obj.sample_noise_units()
    if obj.grid is None:
        return int(noisy)
    out = noisy * obj.grid
    return int(out) if m.integral else out


@functools.lru_cache(maxsize=256)
def _units_per_value(step: Fraction, value_scale: Fraction) -> int | None:
    """How many grid steps one unit of the engine's value is, when a whole number."""
    k = value_scale / step
    return k.numerator if k.denominator == 1 else None


def _noisy_scalar_generic(obj: Any, raw: int, m: Measure) -> Any:
    v = _clamped(obj, raw, m)
    if obj.grid is None:  # integers released as integers
        return int(obj.release(int(v)))
    out = obj.release(v)  # a Fraction on the grid
    return int(out) if m.integral else Fraction(out)


#: the scalar mechanisms whose release is the value's grid units plus sample_noise_units()
_SCALAR_MECHANISMS = (LaplaceMechanism, GaussianMechanism)


def _quantiles(obj: Any, atom: Quantile, hist: dict[int, int], n: int, m: Measure,
               alpha: float) -> list[Fraction]:
    """``n`` exponential-mechanism draws of a quantile (or of one end of its interval) from
    one group's bin counts; the chosen bin is reported by its value (one-value bins) or its
    midpoint — by its low edge for a lower end, its high edge for an upper end."""
    h = atom.histogram
    assert h is not None
    counts = [hist.get(b, 0) for b in range(h.bins)]
    side, p = m.side, m.p
    assert p is not None
    if side is None:
        scores = atom.scores(counts, p)
    else:  # the padding E that gives coverage 1 - α (Quantile's docs); public, like α
        pad = math.ceil(math.log(2 * h.bins / alpha) / (float(obj.coefficient) * p.denominator))
        scores = atom.end_scores(counts, side, pad + 1, p)
    picks = [int(obj.release(scores))] if n == 1 else np.asarray(obj.sample(scores, n)).tolist()
    out = []
    for index in picks:
        lo, hi = h.bin_range(int(index))
        out.append(lo if side == "lower" else hi if side == "upper" else (lo + hi) / 2)
    return out


def _show(x: Fraction) -> str:
    return str(x.numerator) if x.denominator == 1 else f"{x} (≈{float(x):.6g})"


