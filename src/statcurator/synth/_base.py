"""What the synthesizers share: the ρ budget, the public domain, measurements, the model.

Budgets are ρ-zCDP (Gaussian noise composes best there). A request in (ε, δ) is converted
to the largest ρ whose (ε, δ) conversion (:meth:`~statcurator.core.measures.ZCDP.to_approx`,
the Canonne–Kamath–Steinke bound, rounded up) fits: ε = 1, δ = 1e-9 gives ρ ≈ 0.0150. The
measurement then reports the (ε, δ) it guarantees, so a ledger holding an (ε, δ) budget
charges the same object that runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError, MetadataError, StatcuratorError
from ..core.measurement import Measurement
from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from ..core.numbers import exact, exact_probability, round_down, sqrt_bounds
from ..core.relations import AddRemove
from ..estimators.learning._base import Described, zcdp_measurement
from ..estimators.learning._domain import (
    Attribute,
    categorical,
    decode,
    domain_from_meta,
    encode,
    relation_of,
)
from ..mechanisms import ExponentialMechanism, VectorGaussianMechanism
from . import _pgm
from .marginals import contingency

__all__ = ["rho_for", "Synthesizer", "SyntheticModel", "em_epsilon_for_rho", "Compression",
           "selection_mechanism"]

#: float scores (L1 distances to a model's float marginals) are declared with this slack
_FLOAT_SLACK = Fraction(1) + Fraction(1, 2**30)


def rho_for(epsilon: object, delta: object) -> Fraction:
    """The largest ρ (6 significant digits, rounded down) whose (ε, δ) conversion fits.

    >>> rho = rho_for(1, 1e-9)
    >>> ZCDP(rho).to_approx(1e-9).epsilon <= 1, round(float(rho), 4)
    (True, 0.015)
    """
    from ..mechanisms import GaussianMechanism

    return GaussianMechanism.from_epsilon_delta(1, epsilon, delta).rho


def em_epsilon_for_rho(rho: Fraction) -> Fraction:
    """The largest ε (rational, rounded down) of an exponential mechanism costing at most ρ:
    an ε-DP exponential mechanism is ε²/8-zCDP (Cesar & Rogers 2021, bounded range).

    >>> em_epsilon_for_rho(Fraction(1, 8))
    Fraction(1, 1)
    """
    return round_down(sqrt_bounds(8 * rho, 64)[0], 48)


def em_cost(epsilon: Fraction) -> Fraction:
    """ρ of an ε-DP exponential mechanism: ε²/8."""
    return epsilon * epsilon / 8


def selection_mechanism(epsilon: Fraction, sensitivity: Fraction) -> ExponentialMechanism:
    """The exponential mechanism that chooses a marginal by float scores of sensitivity Δ
    (declared with a slack of 2^-30 for the float rounding of the scores; not monotone).

    >>> selection_mechanism(Fraction(1), Fraction(1)).coefficient < Fraction(1, 2)
    True
    """
    return ExponentialMechanism(epsilon, sensitivity * _FLOAT_SLACK)


def select(scores: np.ndarray, epsilon: Fraction, sensitivity: Fraction) -> int:
    """Exponential-mechanism choice among float scores (see :func:`selection_mechanism`)."""
    return selection_mechanism(epsilon, sensitivity).release(scores)


@dataclass(frozen=True)
class Compression:
    """Per attribute, the codes kept (noisy count >= 3σ) and one merged code for the rest
    (MST's domain compression, McKenna et al. 2021): ``maps[a][code] = new code``."""

    maps: Mapping[str, np.ndarray]
    kept: Mapping[str, np.ndarray]

    def sizes(self, domain: Sequence[Attribute]) -> dict[str, int]:
        return {a.name: int(self.maps[a.name].max()) + 1 for a in domain}

    def apply(self, codes: np.ndarray, domain: Sequence[Attribute]) -> np.ndarray:
        return np.stack([self.maps[a.name][codes[:, j]] for j, a in enumerate(domain)], axis=1)

    def undo(self, codes: np.ndarray, domain: Sequence[Attribute],
             weights: Mapping[str, np.ndarray]) -> np.ndarray:
        """Back to the original codes: a merged code becomes one of the values it merged,
        drawn in proportion to their (clipped) noisy counts with the secure generator."""
        from ..mechanisms import samplers

        out = np.empty_like(codes)
        for j, a in enumerate(domain):
            kept = self.kept[a.name]
            col = codes[:, j]
            res = np.empty(col.size, dtype=np.int64)
            small = col < kept.size
            res[small] = kept[col[small]]
            rest = np.setdiff1d(np.arange(a.size), kept)
            if (~small).any():
                w = np.maximum(np.asarray(weights[a.name], dtype=np.float64)[rest], 0.0) + 1e-9
                cdf = np.cumsum(w / w.sum())
                u = samplers.uniform_int(2**53, int((~small).sum())).astype(np.float64) / 2**53
                res[~small] = rest[np.minimum(np.searchsorted(cdf, u, side="right"),
                                              rest.size - 1)]
            out[:, j] = res
        return out


def compress(domain: Sequence[Attribute], oneway: Mapping[str, np.ndarray],
             sigma: Mapping[str, float]) -> Compression:
    """MST's compression from the noisy one-way counts (post-processing)."""
    maps, kept = {}, {}
    for a in domain:
        y = np.asarray(oneway[a.name], dtype=np.float64)
        keep = np.flatnonzero(y >= 3 * sigma[a.name])
        if keep.size < 2 or keep.size >= a.size - 1:
            keep = np.arange(a.size)
        m = np.full(a.size, keep.size, dtype=np.int64)
        m[keep] = np.arange(keep.size)
        maps[a.name], kept[a.name] = m, keep
    return Compression(maps, kept)


@dataclass
class SyntheticModel:
    """A fitted synthesizer: the graphical model over (compressed) codes and what is needed
    to turn its samples back into a table with the original schema."""

    domain: tuple[Attribute, ...]
    model: Any
    compression: Compression
    oneway: Mapping[str, np.ndarray]
    types: Mapping[str, str]
    cliques: tuple[tuple[str, ...], ...]
    rho: Fraction
    measurements: tuple[_pgm.Noisy, ...] = ()

    @property
    def rows(self) -> int:
        """The model's (noisy) estimate of the number of rows."""
        return max(1, int(round(_pgm.total(self.model))))

    def to_json(self) -> str:
        """The release as JSON: the noisy measurements (everything else is post-processing
        of them), the public domain and the compression."""
        import json

        return json.dumps({
            "domain": [a.to_dict() for a in self.domain],
            "measurements": [{"clique": list(m.clique), "values": np.asarray(m.values).tolist(),
                              "stddev": m.stddev,
                              "weights": None if m.weights is None else m.weights.tolist()}
                             for m in self.measurements],
            "maps": {k: v.tolist() for k, v in self.compression.maps.items()},
            "kept": {k: v.tolist() for k, v in self.compression.kept.items()},
            "oneway": {k: np.asarray(v).tolist() for k, v in self.oneway.items()},
            "types": dict(self.types), "cliques": [list(c) for c in self.cliques],
            "rho": str(self.rho)})

    @classmethod
    def from_json(cls, text: str, iters: int = 1000) -> SyntheticModel:
        """The model refitted from the stored measurements (no new noise)."""
        import json

        d = json.loads(text)
        domain = tuple(Attribute.from_dict(a) for a in d["domain"])
        ms = tuple(_pgm.Noisy(tuple(m["clique"]), np.array(m["values"]), m["stddev"],
                              None if m["weights"] is None else np.array(m["weights"]))
                   for m in d["measurements"])
        comp = Compression({k: np.array(v, dtype=np.int64) for k, v in d["maps"].items()},
                           {k: np.array(v, dtype=np.int64) for k, v in d["kept"].items()})
        model = _pgm.estimate(comp.sizes(domain), ms, iters=iters)
        return cls(domain, model, comp, {k: np.array(v) for k, v in d["oneway"].items()},
                   d["types"], tuple(tuple(c) for c in d["cliques"]), Fraction(d["rho"]), ms)

    def sample_codes(self, rows: int | None = None) -> np.ndarray:
        """Synthetic rows as original codes (rows × attributes)."""
        names = [a.name for a in self.domain]
        codes = _pgm.sample(self.model, rows or self.rows, names)
        return self.compression.undo(codes, self.domain, self.oneway)

    def sample(self, rows: int | None = None) -> Any:
        """A synthetic table (pyarrow) with the original columns and types."""
        import pyarrow as pa

        cols = decode(self.sample_codes(rows), self.domain)
        arrays = {}
        for a in self.domain:
            values = cols[a.name]
            kind = self.types.get(a.name, "string")
            if kind == "integer" and a.numeric:
                arrays[a.name] = pa.array(values.astype(np.int64))
            elif kind == "real" and a.numeric:
                arrays[a.name] = pa.array(values.astype(np.float64))
            else:
                arrays[a.name] = pa.array([v if isinstance(v, str) else _native(v)
                                           for v in values.tolist()])
        return pa.table(arrays)


def _native(v: Any) -> Any:
    return v.item() if hasattr(v, "item") else v


class Synthesizer(Described):
    """Base of the synthesizers: budget, domain, the Measurement, ``fit`` and ``sample``.

    Subclasses implement ``_run(codes, domain, rho_row, progress) -> SyntheticModel``.
    """

    name = "synthesizer"

    def __init__(self, epsilon: object = None, *, delta: object = Fraction(1, 10**9),
                 rho: object = None, columns: Sequence[str] | None = None,
                 bins: int | Mapping[str, int] = 16, domain: Sequence[Attribute] | None = None,
                 iters: int = 1000) -> None:
        if rho is not None and epsilon is not None:
            raise InvalidParameterError("give either rho or epsilon, not both",
                                        remedy="use rho for a zCDP budget, epsilon (and delta) "
                                               "otherwise")
        self.epsilon, self.delta, self.rho = epsilon, delta, rho
        self.columns, self.bins, self.domain, self.iters = columns, bins, domain, iters
        if isinstance(iters, bool) or not isinstance(iters, int) or not 1 <= iters <= 100_000:
            raise InvalidParameterError("iters must be an integer in 1..100000",
                                        remedy="pass iters=1000")

    # -- budget -------------------------------------------------------------------------
    def budget(self, loss: PrivacyLoss | None = None) -> tuple[Fraction, Fraction | None]:
        """(ρ, δ): the zCDP budget, and the δ to report the cost in when the request is in
        (ε, δ) (None for a ρ request)."""
        if loss is None:
            if self.rho is not None:
                return exact(self.rho, "rho", maximum=100), None
            if self.epsilon is None:
                raise InvalidParameterError("no privacy budget given",
                                            remedy="pass epsilon=1 (and delta) or rho=...")
            loss = ApproxDP(exact(self.epsilon, "epsilon", maximum=100),
                            exact_probability(self.delta, "delta", allow_zero=False))
        if isinstance(loss, ZCDP):
            return exact(loss.rho, "rho", maximum=100), None
        if isinstance(loss, PureDP) or (isinstance(loss, ApproxDP) and loss.delta == 0):
            raise InvalidParameterError(
                "the synthesizers use Gaussian noise: they need δ > 0 or a ρ budget",
                remedy="pass delta=1e-9 with epsilon, or rho=...")
        assert isinstance(loss, ApproxDP)
        return rho_for(loss.epsilon, loss.delta), loss.delta

    # -- the public problem -------------------------------------------------------------
    def _domain(self, meta: Any) -> tuple[tuple[Attribute, ...], dict[str, str]]:
        if self.domain is not None:
            dom = tuple(a if isinstance(a, Attribute) else categorical(*a) for a in self.domain)
            return dom, {a.name: "string" for a in dom}
        if meta is None:
            raise MetadataError("the synthesizer needs the table's declared domain",
                                remedy="fit a statcurator Dataset (data + metadata), or pass "
                                       "domain=[Attribute, ...]")
        dom = domain_from_meta(meta, self.columns, bins=self.bins)
        return dom, {a.name: meta[a.name].type.value for a in dom}

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None, *,
                    progress: Callable[[str, float], None] | None = None) -> Measurement:
        """The synthesizer as a Measurement: a table -> a :class:`SyntheticModel`.

        Its privacy map is ρ·d² (zCDP), or that converted to (ε, δ) when the budget was
        asked for in (ε, δ)."""
        rho, delta = self.budget(loss)
        domain, types = self._domain(meta)
        if len(domain) < 2:
            raise InvalidParameterError("a synthesizer needs at least two columns",
                                        remedy="add columns (or release the one-way "
                                               "marginal with a query instead)")
        relation = relation_of(meta) if meta is not None else AddRemove()
        report = progress or (lambda stage, fraction: None)

        def build(rho_row: Fraction) -> Any:
            def run(data: Any) -> SyntheticModel:
                codes = data if isinstance(data, np.ndarray) else encode(data, domain)
                model = self._run(codes, domain, rho_row, report)
                model.types = types
                return model
            return run

        m = zcdp_measurement(relation, rho, build, self.name)
        m = m if delta is None else _as_approx(m, delta)
        return m.then(self._fitted_copy(m.cost), m.name)

    def _fitted_copy(self, cost: PrivacyLoss) -> Callable[[SyntheticModel], Synthesizer]:
        import copy

        def fitted(model: SyntheticModel) -> Synthesizer:
            new = copy.copy(self)
            new.model_, new.cost_ = model, cost
            return new

        return fitted

    # -- the estimator protocol (Curator.estimate) -----------------------------------------
    def columns(self, meta: Any) -> tuple[str, ...]:
        """The columns the synthesizer reads (its domain)."""
        return tuple(a.name for a in self._domain(meta)[0])

    def result_to_json(self, result: Synthesizer) -> str:
        """The fitted synthesizer's release (its noisy measurements) as JSON."""
        import json

        return json.dumps({"model": result.model_.to_json(), "cost": _loss_json(result.cost_)})

    def result_from_json(self, text: str) -> Synthesizer:
        """The fitted synthesizer, its model refitted from the stored measurements."""
        import json

        d = json.loads(text)
        return self._fitted_copy(_loss_from_json(d["cost"]))(
            SyntheticModel.from_json(d["model"], self.iters))

    def _run(self, codes: np.ndarray, domain: tuple[Attribute, ...], rho: Fraction,
             progress: Callable[[str, float], None]) -> SyntheticModel:  # pragma: no cover
        raise NotImplementedError

    # -- fit and sample -----------------------------------------------------------------
    def fit(self, data: Any, meta: Any = None, *,
            progress: Callable[[str, float], None] | None = None) -> Synthesizer:
        """Fit on a table (a statcurator Dataset, or data with ``meta``); spends the budget."""
        meta = meta if meta is not None else getattr(data, "meta", None)
        fitted = self.measurement(meta, progress=progress)(data)
        self.model_, self.cost_ = fitted.model_, fitted.cost_
        return self

    def sample(self, rows: int | None = None) -> Any:
        """A synthetic table (pyarrow) with the original schema; ``rows`` defaults to the
        model's noisy estimate of the table size."""
        if not hasattr(self, "model_"):
            raise StatcuratorError("the synthesizer is not fitted yet", remedy="call fit first")
        return self.model_.sample(rows)

    # -- shared steps ---------------------------------------------------------------------
    @staticmethod
    def measure(codes: np.ndarray, sizes: Sequence[int], names: Sequence[str],
                clique: tuple[str, ...], rho: Fraction) -> tuple[np.ndarray, float]:
        """A Gaussian measurement of one marginal (L2 sensitivity 1) at ρ: (noisy, σ)."""
        mech = VectorGaussianMechanism(1, rho)
        cols = [list(names).index(a) for a in clique]
        x = contingency(codes, sizes, cols).ravel()
        return mech.release(x).astype(np.float64), math.sqrt(float(mech.sigma2))


def _loss_json(loss: PrivacyLoss) -> dict[str, str]:
    return {"kind": type(loss).__name__,
            **{k: str(getattr(loss, k)) for k in loss.__dataclass_fields__}}  # type: ignore[attr-defined]


def _loss_from_json(d: Mapping[str, str]) -> PrivacyLoss:
    kinds = {"PureDP": PureDP, "ApproxDP": ApproxDP, "ZCDP": ZCDP}
    cls = kinds[d["kind"]]
    return cls(*(Fraction(d[k]) for k in cls.__dataclass_fields__))  # type: ignore[attr-defined]


def _as_approx(m: Measurement, delta: Fraction) -> Measurement:
    pmap = m.privacy_map
    return Measurement(m.input_space, ApproxDP, m.function,
                       lambda d: pmap(d).to_approx(delta), m.name)  # type: ignore[attr-defined]
