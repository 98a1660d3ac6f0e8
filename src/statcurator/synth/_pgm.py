"""Graphical-model inference with the ``mbi`` library (Private-PGM, McKenna et al. 2019).

``mbi`` (>= 2.0) is an optional dependency (the ``synth`` extra): it brings JAX. This module
is the only place that imports it, lazily. (mbi 1.x has another estimation API and, in our
runs, fitted markedly worse models: it is refused with a remedy.)

Everything here is post-processing of noisy measurements: no private data enters.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core.errors import StatcuratorError
from ..estimators._common import silenced

__all__ = ["require_mbi", "Noisy", "estimate", "marginal", "sample", "model_size_mb",
           "available"]


@dataclass(frozen=True)
class Noisy:
    """One noisy measurement: the marginal on ``clique`` (flattened, C order) with Gaussian
    noise of standard deviation ``stddev``; ``weights`` (optional) scales each cell of the
    query and the value alike (a merged cell of several noisy cells is measured with weight
    1/√m so that all cells have the same noise)."""

    clique: tuple[str, ...]
    values: np.ndarray
    stddev: float
    weights: np.ndarray | None = None


class _Weighted:
    """The linear query ``f ↦ w ⊙ vec(f)`` (hashable, as mbi needs static queries)."""

    def __init__(self, weights: np.ndarray) -> None:
        self.weights = np.asarray(weights, dtype=np.float64)
        self._key = self.weights.tobytes()

    def __call__(self, factor: Any) -> Any:
        return factor.datavector(flatten=True) * self.weights

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Weighted) and other._key == self._key


def available() -> bool:
    """True when mbi can be imported."""
    try:
        require_mbi()
    except StatcuratorError:
        return False
    return True


def require_mbi() -> Any:
    """Import mbi (JAX in 64-bit mode), or explain how to install it."""
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        with silenced(streams=False):  # the process-wide filters, under its lock
            import mbi
        if not hasattr(mbi.estimation, "MirrorDescent"):
            raise ImportError
    except ImportError:
        raise StatcuratorError(
            "graphical-model inference needs the mbi library",
            remedy="install mbi 2 with: pip install 'statcurator[synth]'") from None
    return mbi


def _domain(mbi: Any, sizes: dict[str, int]) -> Any:
    return mbi.Domain(list(sizes), [int(v) for v in sizes.values()])


def estimate(sizes: dict[str, int], measurements: Sequence[Noisy], *, iters: int = 1000,
             warm: Any = None, total: float | None = None) -> Any:
    """A graphical model (mbi MarkovRandomField) fitted to the noisy measurements by mirror
    descent on the L2 loss; ``warm`` continues from an earlier model."""
    mbi = require_mbi()
    domain = _domain(mbi, sizes)
    ms = []
    for m in measurements:
        if m.weights is None:
            ms.append(mbi.LinearMeasurement(np.asarray(m.values, dtype=np.float64), m.clique,
                                            stddev=float(m.stddev)))
        else:
            ms.append(mbi.LinearMeasurement(np.asarray(m.values, dtype=np.float64), m.clique,
                                            stddev=float(m.stddev),
                                            query=_Weighted(m.weights)))
    kwargs: dict[str, Any] = {"known_total": total, "iters": iters}
    if warm is not None:
        kwargs["warm_start"] = warm
    with silenced(streams=False):  # the process-wide filters, under its lock
        return mbi.estimation.MirrorDescent().estimate(domain, ms, **kwargs)


def marginal(model: Any, clique: Sequence[str]) -> np.ndarray:
    """The model's marginal on ``clique`` (flattened, C order), as float64.

    Computed in numpy by variable elimination over the model's potentials
    (P(x) ∝ Π_c exp θ_c(x_c); ``numpy.einsum`` chooses the elimination order): exact, and
    without the JAX compilation that ``model.project`` pays for every new clique.
    """
    pots = model.potentials
    names: dict[str, int] = {}
    ops: list[Any] = []
    for cl in pots.cliques:
        f = pots[cl]
        attrs = list(_attributes(f.domain))
        vals = np.asarray(f.values, dtype=np.float64)
        ops += [np.exp(vals - vals.max()), [names.setdefault(a, len(names)) for a in attrs]]
    sizes = dict(zip(_attributes(model.domain), model.domain.shape, strict=True))
    for a in clique:  # an attribute no potential mentions is uniform
        if a not in names:
            ops += [np.ones(sizes[a]), [names.setdefault(a, len(names))]]
    out = np.einsum(*ops, [names[a] for a in clique], optimize="greedy")
    out = np.asarray(out, dtype=np.float64).ravel()
    return out * (total(model) / out.sum())


def _attributes(domain: Any) -> tuple[str, ...]:
    return tuple(domain.attributes)


def total(model: Any) -> float:
    """The number of records the model represents."""
    return float(np.asarray(model.total))


def sample(model: Any, rows: int, names: Sequence[str]) -> np.ndarray:
    """A synthetic table of codes (rows × attributes, in ``names`` order) from the model."""
    with silenced(streams=False):  # the process-wide filters, under its lock
        ds = model.synthetic_data(rows=int(rows))
    cols = ds.to_dict()
    return np.stack([np.asarray(cols[n], dtype=np.int64) for n in names], axis=1)


def model_size_mb(sizes: dict[str, int], cliques: Sequence[tuple[str, ...]]) -> float:
    """The memory (MB) of a junction tree over ``cliques`` (AIM's model-size limit)."""
    mbi = require_mbi()
    from mbi import junction_tree

    return float(junction_tree.hypothetical_model_size(_domain(mbi, sizes), list(cliques)))
