"""Workloads of marginals measured with Gaussian noise, made consistent by post-processing.

A *marginal* (contingency table) on a clique of attributes counts the rows per combination
of their codes. Under add/remove neighbours one row changes every marginal in exactly one
cell, by 1, so each marginal has L2 sensitivity 1 and is measured with the exact discrete
Gaussian mechanism at its share ρ_i of the budget (ρ = Σρ_i, zCDP composition).

Noisy marginals disagree with each other where they overlap and have negative cells.
:meth:`NoisyMarginals.consistent` repairs both by post-processing (free of privacy cost):

* ``"least-squares"`` — the weighted least-squares consistency of Qardaji, Yang & Li
  (PriView, SIGMOD 2014) and Hay et al. (2010): for every intersection A of cliques,
  smallest first, the marginals containing A are projected on A, their inverse-variance
  weighted mean is computed, and each marginal is shifted uniformly so that its projection
  becomes that mean; negative cells are then clipped and consistency restored, a few rounds.
* ``"pgm"`` — graphical-model inference (Private-PGM with the ``mbi`` library): the
  marginals of one distribution fitted to all measurements, consistent and non-negative by
  construction.

:meth:`NoisyMarginals.errors` reports, per marginal, what is known *before* looking at the
data: the noise standard deviation, the per-cell half-width at level α and the expected
total-variation error.

>>> import warnings
>>> from fractions import Fraction
>>> from statcurator.estimators.learning import categorical
>>> from statcurator.mechanisms import rng
>>> dom = (categorical("a", [0, 1]), categorical("b", [0, 1, 2]), categorical("c", [0, 1]))
>>> codes = np.array([[0, 0, 1], [1, 2, 0], [1, 1, 1]] * 100)
>>> work = MarginalWorkload([("a", "b"), ("b", "c")])
>>> m = work.measurement(dom, rho=Fraction(1))
>>> m.cost
ZCDP(rho=Fraction(1, 1))
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(2):
...         noisy = m(codes)
>>> fixed = noisy.consistent()
>>> bool(np.allclose(fixed["a", "b"].sum(axis=0), fixed["b", "c"].sum(axis=1)))
True
>>> bool((fixed["a", "b"] >= 0).all())
True
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measurement import Measurement
from ..core.numbers import exact
from ..core.relations import AddRemove, Relation
from ..estimators.learning._base import zcdp_measurement
from ..estimators.learning._domain import Attribute, encode
from ..mechanisms import VectorGaussianMechanism

__all__ = ["MarginalWorkload", "NoisyMarginals", "contingency", "kway", "make_consistent"]

Clique = tuple[str, ...]


def kway(names: Sequence[str], k: int) -> list[Clique]:
    """All k-way cliques of ``names`` (in order).

    >>> kway(["a", "b", "c"], 2)
    [('a', 'b'), ('a', 'c'), ('b', 'c')]
    """
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= len(names):
        raise InvalidParameterError(f"k must be between 1 and {len(names)}, got {k!r}",
                                    remedy="pass k=2 or k=3")
    return list(itertools.combinations(names, k))


def contingency(codes: np.ndarray, sizes: Sequence[int], columns: Sequence[int]) -> np.ndarray:
    """The exact counts of ``codes`` on ``columns`` (an int64 array of shape sizes[columns]).

    >>> contingency(np.array([[0, 1], [0, 1], [1, 0]]), [2, 2], [0, 1]).tolist()
    [[0, 2], [1, 0]]
    """
    shape = tuple(int(sizes[c]) for c in columns)
    if not columns:
        return np.array(codes.shape[0], dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in columns), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).reshape(shape)


@dataclass(frozen=True)
class MarginalWorkload:
    """A workload of marginals (cliques of attribute names), each with a budget ``weight``
    (default equal): marginal i gets ρ_i = ρ·w_i/Σw.

    >>> MarginalWorkload.all_kway(["a", "b", "c"], 2).cliques
    (('a', 'b'), ('a', 'c'), ('b', 'c'))
    """

    cliques: tuple[Clique, ...]
    weights: tuple[Fraction, ...] | None = None

    def __post_init__(self) -> None:
        cl = tuple(tuple(c) for c in self.cliques)
        if not cl or any(len(set(c)) != len(c) or not c for c in cl):
            raise InvalidParameterError("a workload needs cliques of distinct attributes",
                                        remedy="pass e.g. [(\"sex\", \"race\"), (\"age\",)]")
        if len(set(cl)) != len(cl):
            raise InvalidParameterError("the workload lists a marginal twice",
                                        remedy="list each marginal once")
        object.__setattr__(self, "cliques", cl)
        if self.weights is not None:
            w = tuple(exact(x, "weight") for x in self.weights)
            if len(w) != len(cl):
                raise InvalidParameterError("one weight per marginal",
                                            remedy="give as many weights as cliques")
            object.__setattr__(self, "weights", w)

    @classmethod
    def all_kway(cls, names: Sequence[str], k: int) -> MarginalWorkload:
        """Every k-way marginal of ``names``."""
        return cls(tuple(kway(list(names), k)))

    def shares(self, rho: Fraction) -> list[Fraction]:
        """ρ_i of each marginal (they sum to ρ)."""
        w = self.weights or tuple(Fraction(1) for _ in self.cliques)
        total = sum(w, Fraction(0))
        return [rho * x / total for x in w]

    def mechanisms(self, rho: Fraction) -> list[VectorGaussianMechanism]:
        """The Gaussian mechanism of each marginal (L2 sensitivity 1 per added row)."""
        return [VectorGaussianMechanism(1, r) for r in self.shares(rho)]

    def measurement(self, domain: Sequence[Attribute], rho: object,
                    relation: Relation | None = None) -> Measurement:
        """The workload as a ρ-zCDP Measurement: a table (or a code matrix over
        ``domain``) -> :class:`NoisyMarginals`."""
        budget = exact(rho, "rho")
        names = [a.name for a in domain]
        missing = sorted({a for c in self.cliques for a in c} - set(names))
        if missing:
            raise InvalidParameterError(f"the workload names attributes outside the domain: "
                                        f"{missing}", remedy="domain attributes are: "
                                        + ", ".join(names))
        sizes = [a.size for a in domain]
        index = {n: i for i, n in enumerate(names)}

        def build(rho_row: Fraction) -> Any:
            mechs = self.mechanisms(rho_row)

            def run(data: Any) -> NoisyMarginals:
                codes = data if isinstance(data, np.ndarray) and data.dtype.kind in "iu" \
                    else encode(data, domain)
                values, variance = {}, {}
                for clique, mech in zip(self.cliques, mechs, strict=True):
                    exact_counts = contingency(codes, sizes, [index[a] for a in clique])
                    noisy = mech.release(exact_counts.ravel()).reshape(exact_counts.shape)
                    values[clique] = noisy.astype(np.float64)
                    variance[clique] = float(mech.sigma2)
                return NoisyMarginals(tuple(domain), values, variance, tuple(mechs))
            return run

        return zcdp_measurement(relation or AddRemove(), budget, build, "marginal workload")


@dataclass(frozen=True)
class NoisyMarginals:
    """Noisy marginals (``values[clique]``: float arrays shaped by the attributes' sizes)
    with their per-cell noise variance; ``consistent()`` repairs them (post-processing)."""

    domain: tuple[Attribute, ...]
    values: Mapping[Clique, np.ndarray]
    variance: Mapping[Clique, float]
    mechanisms: tuple[VectorGaussianMechanism, ...] = field(default=(), repr=False)

    def __getitem__(self, clique: Iterable[str]) -> np.ndarray:
        return self.values[tuple(clique)]

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return tuple(self.values)

    def total(self) -> float:
        """The inverse-variance weighted estimate of the number of rows."""
        est = [(float(v.sum()), self.variance[c] * v.size) for c, v in self.values.items()]
        w = sum(1 / var for _, var in est)
        return sum(t / var for t, var in est) / w

    def consistent(self, method: str = "least-squares", **options: Any) -> NoisyMarginals:
        """Consistent, non-negative marginals (``"least-squares"`` or ``"pgm"``)."""
        if method == "least-squares":
            fixed = make_consistent(dict(self.values), dict(self.variance),
                                    {a.name: a.size for a in self.domain}, **options)
        elif method == "pgm":
            from . import _pgm

            sizes = {a.name: a.size for a in self.domain}
            model = _pgm.estimate(sizes, [
                _pgm.Noisy(c, v.ravel(), math.sqrt(self.variance[c]))
                for c, v in self.values.items()], iters=options.get("iters", 1000))
            fixed = {c: _pgm.marginal(model, c).reshape(v.shape)
                     for c, v in self.values.items()}
        else:
            raise InvalidParameterError(f"unknown consistency method {method!r}",
                                        remedy="use \"least-squares\" or \"pgm\"")
        return NoisyMarginals(self.domain, fixed, self.variance, self.mechanisms)

    def errors(self, alpha: float = 0.05) -> list[dict[str, Any]]:
        """Per marginal, the error known before the data are seen: noise σ per cell, the
        per-cell (1-α) half-width, and the expected L1 and total-variation errors of the
        raw noisy marginal (E|N(0,σ²)| = σ√(2/π) per cell; TV = L1 / (2n̂))."""
        n_hat = max(self.total(), 1.0)
        out = []
        for (clique, v), mech in itertools.zip_longest(self.values.items(), self.mechanisms):
            sigma = math.sqrt(self.variance[clique])
            l1 = v.size * sigma * math.sqrt(2 / math.pi)
            out.append({"marginal": " × ".join(clique), "cells": int(v.size),
                        "sigma": sigma,
                        "halfwidth": mech.accuracy(alpha) if mech is not None else None,
                        "expected_l1": l1, "expected_tv": l1 / (2 * n_hat)})
        return out


def _closure(cliques: Iterable[Clique]) -> list[frozenset[str]]:
    sets = {frozenset(c) for c in cliques}
    frontier = set(sets)
    while frontier:
        new = set()
        for a in frontier:
            for b in sets:
                x = a & b
                if x not in sets:
                    new.add(x)
        sets |= new
        frontier = new
    return sorted(sets, key=lambda s: (len(s), sorted(s)))


def _project(values: np.ndarray, clique: Clique, onto: Sequence[str]) -> np.ndarray:
    drop = tuple(i for i, a in enumerate(clique) if a not in onto)
    kept = [a for a in clique if a in onto]
    p = values.sum(axis=drop) if drop else values
    return np.transpose(p, [kept.index(a) for a in onto]) if onto else np.asarray(p)


def _expand(delta: np.ndarray, onto: Sequence[str], clique: Clique,
            shape: tuple[int, ...]) -> np.ndarray:
    order = [a for a in clique if a in onto]
    d = np.transpose(delta, [list(onto).index(a) for a in order]) if onto else delta
    idx = tuple(slice(None) if a in onto else None for a in clique)
    return np.broadcast_to(d[idx] if onto else d, shape)


def _reconcile(values: dict[Clique, np.ndarray], variance: dict[Clique, float],
               order: list[frozenset[str]]) -> None:
    for a in order:
        holders = [c for c in values if a <= frozenset(c)]
        if len(holders) < 2:
            continue
        onto = sorted(a)
        projs, weights, factors = [], [], []
        for c in holders:
            p = _project(values[c], c, onto)
            factor = values[c].size / max(p.size, 1)  # cells summed per projected cell
            projs.append(p)
            factors.append(factor)
            weights.append(1.0 / (variance[c] * factor))
        mean = sum(w * p for w, p in zip(weights, projs, strict=True)) / sum(weights)
        for c, p, f in zip(holders, projs, factors, strict=True):
            values[c] = values[c] + _expand((mean - p) / f, onto, c, values[c].shape)


def make_consistent(values: dict[Clique, np.ndarray], variance: dict[Clique, float],
                    sizes: Mapping[str, int], *, rounds: int = 50,
                    tolerance: float = 1e-9) -> dict[Clique, np.ndarray]:
    """Weighted least-squares consistency, then non-negativity by alternating clipping and
    re-consistency (at most ``rounds`` rounds); cells still negative by less than
    ``tolerance``·n are set to 0.

    >>> v = {("a",): np.array([3.0, -1.0]), ("a", "b"): np.array([[1.0, 1.0], [1.0, 1.0]])}
    >>> out = make_consistent(v, {("a",): 1.0, ("a", "b"): 1.0}, {"a": 2, "b": 2})
    >>> bool(np.allclose(out["a",], out["a", "b"].sum(axis=1))), bool((out["a",] >= 0).all())
    (True, True)
    """
    out = {tuple(c): np.asarray(v, dtype=np.float64).copy() for c, v in values.items()}
    var = {tuple(c): float(x) for c, x in variance.items()}
    order = _closure(out)
    _reconcile(out, var, order)
    for _ in range(rounds):
        if min(float(v.min()) for v in out.values()) >= 0:
            break
        for c in out:
            out[c] = np.maximum(out[c], 0.0)
        _reconcile(out, var, order)
    n = max(max(float(v.sum()) for v in out.values()), 1.0)
    for c in out:
        v = out[c]
        v[(v < 0) & (v > -tolerance * n)] = 0.0
        # anything still negative after the rounds is clipped (tiny in practice)
        out[c] = np.maximum(v, 0.0)
    return out
