"""Differentially private k-means: DP Lloyd iterations, and a sample-and-aggregate variant.

**DP Lloyd** (Blum, Dwork, McSherry & Nissim 2005, the SuLQ k-means; Su et al. 2016): the
points live in a *declared* box (public bounds per feature), centred and divided by its
largest half-width H, so that distances keep their proportions and coordinate j lies within
±r_j = half_j/H <= 1. Each of ``n_iter`` iterations assigns the points to their nearest
centre and releases, per cluster, a noisy count (vector Laplace, L1 sensitivity 1) and a
noisy sum of the scaled points (vector Laplace on a public grid, L1 sensitivity Σ_j r_j: one
row moves one cluster's sum by at most r_j per coordinate); the new centre is sum/count, and
a cluster whose noisy count is within noise of empty restarts beside the largest one
(post-processing). The budget is split evenly over the iterations and, within one, between
counts and sums in the ratio that minimizes the centre's error, ε_sum/ε_count = (3d²)^(1/3).
The initial centres are a shifted Halton point set over the box: they depend on nothing but
the public bounds, so initialization spends no privacy.

**Sample and aggregate** (Nissim, Raskhodnikova & Smith 2007): the rows are split into
``blocks`` disjoint random parts (each row to one part, chosen independently), plain Lloyd
runs on each part, each part's centres are put in a canonical order and the *average* of
the parts' centre vectors is released with Laplace noise: one row changes one part's output,
by at most 2r_j in coordinate j, so the L1 sensitivity of the average is 2·k·Σ_j r_j/blocks
in scaled units.

>>> import numpy as np
>>> from statcurator.mechanisms import rng
>>> import warnings
>>> pts = np.concatenate([np.full((500, 2), 2.0), np.full((500, 2), 8.0)])
>>> km = KMeans(2, epsilon=1, bounds=[(0, 10), (0, 10)], n_iter=3)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(4):
...         centres = np.sort(km.fit(pts).cluster_centers_[:, 0])
>>> bool(abs(centres[0] - 2) < 1 and abs(centres[1] - 8) < 1)
True
>>> km.cost_
PureDP(epsilon=Fraction(1, 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import DataError, InvalidParameterError, MetadataError, StatcuratorError
from ...core.measurement import Measurement
from ...core.measures import PrivacyLoss
from ...core.numbers import exact
from ...core.relations import AddRemove
from ...mechanisms import VectorLaplaceMechanism
from ._base import Described, epsilon_of, pure_measurement
from ._domain import as_floats, columns_of, relation_of

__all__ = ["KMeans", "SampleAggregateKMeans", "lloyd_step_release", "lloyd_statistics",
           "lloyd_mechanisms", "halton_centres", "intra_cluster_variance"]

#: the public grid of released sums and centres, in scaled units ([-1, 1] per feature)
GRID = Fraction(1, 2**12)


def halton_centres(k: int, d: int, shift: np.ndarray | None = None) -> np.ndarray:
    """k points of the Halton sequence in [-1, 1]^d, optionally shifted modulo 1
    (Cranley–Patterson) — a data-independent, well-spread start.

    >>> halton_centres(2, 2).tolist()
    [[0.0, -0.33333333333333337], [-0.5, 0.33333333333333326]]
    """
    primes = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71]
    if d > len(primes):
        raise InvalidParameterError(f"at most {len(primes)} features are supported",
                                    remedy="reduce the number of features")
    pts = np.empty((k, d))
    for j in range(d):
        b = primes[j]
        for i in range(k):
            f, r, n = 1.0, 0.0, i + 1
            while n:
                f /= b
                r += f * (n % b)
                n //= b
            pts[i, j] = r
    if shift is not None:
        pts = (pts + shift) % 1.0
    return 2 * pts - 1


def _assign(x: np.ndarray, centres: np.ndarray) -> np.ndarray:
    d2 = ((x[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d2, axis=1)


def lloyd_statistics(x: np.ndarray, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The exact per-cluster counts (k) and sums (k × d) of scaled points ``x``.

    >>> c, s = lloyd_statistics(np.array([[0.5, 0.5], [-1.0, 1.0]]), np.array([[1.0, 1.0]]))
    >>> c.tolist(), s.tolist()
    ([2], [[-0.5, 1.5]])
    """
    k, d = centres.shape
    label = _assign(x, centres)
    counts = np.bincount(label, minlength=k)
    sums = np.zeros((k, d))
    for j in range(d):
        sums[:, j] = np.bincount(label, weights=x[:, j], minlength=k)
    return counts, sums


def lloyd_mechanisms(radius: Sequence[Fraction], eps_count: Fraction, eps_sum: Fraction
                     ) -> tuple[VectorLaplaceMechanism, VectorLaplaceMechanism]:
    """The mechanisms of one DP Lloyd step: counts (L1 sensitivity 1) and sums of points with
    |x_j| <= radius_j (L1 sensitivity Σ radius_j, released on the public grid; one row changes
    d coordinates).

    >>> c, s = lloyd_mechanisms([Fraction(1), Fraction(1, 2)], Fraction(1), Fraction(1))
    >>> c.sensitivity, s.sensitivity
    (Fraction(1, 1), Fraction(3, 2))
    """
    return (VectorLaplaceMechanism(1, eps_count),
            VectorLaplaceMechanism(sum(radius, Fraction(0)), eps_sum, grid=GRID,
                                   max_changed=len(radius)))


def lloyd_step_release(x: np.ndarray, centres: np.ndarray, eps_count: Fraction,
                       eps_sum: Fraction, radius: Sequence[Fraction] | None = None
                       ) -> tuple[np.ndarray, np.ndarray]:
    """One DP Lloyd step on scaled points ``x`` (coordinate j within ±radius_j, default 1):
    the noisy per-cluster counts (ε_count-DP) and sums (ε_sum-DP, on the public grid), per
    added or removed row.

    >>> import warnings
    >>> from statcurator.mechanisms import rng
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         c, s = lloyd_step_release(np.zeros((10, 2)), np.zeros((1, 2)), Fraction(1),
    ...                                   Fraction(1))
    >>> c.shape, s.shape
    ((1,), (1, 2))
    """
    k, d = centres.shape
    counts, sums = lloyd_statistics(x, centres)
    count_m, sum_m = lloyd_mechanisms(radius or [Fraction(1)] * d, eps_count, eps_sum)
    return count_m.release(counts), sum_m.release(sums.ravel()).reshape(k, d)


def _update(centres: np.ndarray, counts: np.ndarray, sums: np.ndarray,
            eps_count: float, r: np.ndarray) -> np.ndarray:
    """New centres from the noisy counts and sums (post-processing). A cluster whose noisy
    count is within noise of empty (a start far from the data) restarts next to the most
    populous cluster, jittered by the secure generator, instead of staying idle."""
    from ...mechanisms import rng

    out = centres.copy()
    ok = counts >= max(1.0, 3.0 / eps_count)
    out[ok] = np.clip(sums[ok] / counts[ok, None], -r, r)
    idle = np.flatnonzero(~ok)
    if idle.size and ok.any():
        big = int(np.argmax(np.where(ok, counts, -np.inf)))
        u = (rng.words64(idle.size * centres.shape[1]) >> np.uint64(11)).astype(np.float64)
        jitter = (u * 2.0**-53 - 0.5).reshape(idle.size, -1) * 0.2
        out[idle] = np.clip(out[big] + jitter * r, -r, r)
    return out


def _split(eps_iter: Fraction, d: int) -> tuple[Fraction, Fraction]:
    """ε_count, ε_sum with ε_sum/ε_count ≈ (3d²)^(1/3) (a public, rational ratio)."""
    ratio = Fraction(round((3 * d * d) ** (1 / 3) * 64), 64)
    eps_count = eps_iter / (1 + ratio)
    return eps_count, eps_iter - eps_count


def intra_cluster_variance(x: np.ndarray, centres: np.ndarray) -> float:
    """Within-cluster sum of squares over the total sum of squares (0 best, about 1 bad).

    >>> intra_cluster_variance(np.array([[0.0], [0.0], [2.0], [2.0]]), np.array([[0.0], [2.0]]))
    0.0
    """
    x = np.asarray(x, dtype=np.float64)
    within = ((x - np.asarray(centres)[_assign(x, np.asarray(centres))]) ** 2).sum()
    total = ((x - x.mean(axis=0)) ** 2).sum()
    return float(within / total) if total > 0 else 0.0


class _Box:
    """The declared box, and the scaled space the algorithms work in: x' = (x - mid)/H with
    H the largest half-width, so distances keep their proportions (k-means' objective is in
    data units) and coordinate j lies within ±radius_j = half_j/H <= 1."""

    def __init__(self, pairs: tuple[tuple[Fraction, Fraction], ...],
                 names: tuple[str, ...] | None) -> None:
        self.names = names
        self.d = len(pairs)
        halves = [(b - a) / 2 for a, b in pairs]
        top = max(halves)
        self.radius_exact = tuple(h / top for h in halves)
        self.radius = np.array([float(r) for r in self.radius_exact])
        self.mid = np.array([float((a + b) / 2) for a, b in pairs])
        self.h = float(top)

    def scale(self, x: np.ndarray) -> np.ndarray:
        return np.clip((x - self.mid) / self.h, -self.radius, self.radius)

    def unscale(self, c: np.ndarray) -> np.ndarray:
        return self.mid + self.h * np.clip(c, -self.radius, self.radius)


class _Clusterer(Described):
    """Shared handling of the box, the data and the fitted centres."""

    n_clusters: int
    epsilon: object
    bounds: Sequence[tuple[object, object]] | None
    features: Sequence[str] | None

    def _check_k(self, n_clusters: int) -> None:
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or not (
                1 <= n_clusters <= 1000):
            raise InvalidParameterError("n_clusters must be an integer in 1..1000",
                                        remedy="pass n_clusters=3")

    def _box(self, meta: Any) -> _Box:
        if self.bounds is not None:
            pairs = [(exact(lo, "lower bound", positive=False),
                      exact(hi, "upper bound", positive=False)) for lo, hi in self.bounds]
            names = tuple(self.features) if self.features is not None else None
        elif meta is not None:
            names = tuple(self.features) if self.features is not None else tuple(
                c.name for c in meta.columns if c.bounds is not None)
            pairs = []
            for n in names:
                b = meta[n].bounds
                if b is None:
                    raise MetadataError(f"column {n!r} has no declared bounds",
                                        remedy=f"declare bounds = [low, high] for {n!r}")
                pairs.append(b)
        else:
            raise MetadataError("k-means needs public bounds for every feature",
                                remedy="pass bounds=[(low, high), ...] or fit a Dataset whose "
                                       "metadata declares bounds")
        if not pairs or any(not lo < hi for lo, hi in pairs):
            raise MetadataError("every feature needs bounds with low < high",
                                remedy="declare bounds = [low, high] with low < high")
        self._box_ = _Box(tuple(pairs), names)
        return self._box_

    def _scaled(self, data: Any, box: _Box) -> np.ndarray:
        """The points in scaled units, row by row and never refusing a value (the values
        are private): ±∞ and values beyond the box are clamped to it, and NULL, NaN or a
        value that is not a number becomes the box's midpoint in that coordinate (a public
        imputation, 1-stable, as for the statistics estimators)."""
        if box.names is not None and not isinstance(data, np.ndarray):
            cols = columns_of(data, list(box.names))
            x = np.stack([as_floats(cols[n]) for n in box.names], axis=1)
        else:
            arr = np.asarray(data)
            x = as_floats(arr).reshape(arr.shape)
            if x.ndim == 1:
                x = x.reshape(-1, 1)
        if x.ndim != 2 or x.shape[1] != box.d:
            raise DataError(f"expected {box.d} feature column(s)",
                            remedy="pass one column per declared bound")
        x = np.where(np.isnan(x), box.mid[None, :], x)
        return box.scale(x)

    def fit(self, X: Any, y: Any = None) -> Any:
        """Fit the centres on ``X`` (a Dataset with bounded columns, or an array with
        ``bounds``); spends the clusterer's ε."""
        fitted = self.measurement(getattr(X, "meta", None))(X)
        self.cluster_centers_, self.cost_ = fitted.cluster_centers_, fitted.cost_
        return self

    # -- the estimator protocol (Curator.estimate) -----------------------------------------
    def columns(self, meta: Any) -> tuple[str, ...]:
        """The columns a fit reads (the bounded features)."""
        names = self._box(meta).names
        if names is None:
            raise MetadataError("name the features read from the table",
                                remedy="pass features=[...] with bounds=[...]")
        return names

    def _measured(self, m: Measurement) -> Measurement:
        """The measurement whose result is a fitted copy (post-processing)."""
        import copy

        cost = m.cost

        def fitted(centres: np.ndarray) -> Any:
            new = copy.copy(self)
            new.cluster_centers_, new.cost_ = centres, cost
            return new

        return m.then(fitted, m.name)

    def result_to_json(self, result: Any) -> str:
        """The fitted centres and cost as JSON."""
        import json

        return json.dumps({"centres": result.cluster_centers_.tolist(),
                           "epsilon": str(result.cost_.epsilon)})

    def result_from_json(self, text: str) -> Any:
        """The fitted clusterer stored by :meth:`result_to_json`."""
        import copy
        import json

        from ...core.measures import PureDP

        d = json.loads(text)
        new = copy.copy(self)
        new.cluster_centers_ = np.array(d["centres"])
        new.cost_ = PureDP(Fraction(d["epsilon"]))
        return new

    def predict(self, X: Any) -> np.ndarray:
        """The index of the nearest centre of each row."""
        if not hasattr(self, "cluster_centers_"):
            raise StatcuratorError("the clusterer is not fitted yet", remedy="call fit first")
        box = self._box_
        return _assign(self._scaled(X, box), box.scale(self.cluster_centers_))

    def _budget(self, loss: PrivacyLoss | None) -> Fraction:
        return epsilon_of(loss, self.epsilon)


class KMeans(_Clusterer):
    """ε-DP k-means by DP Lloyd iterations over a declared box (see the module docs).

    ``bounds``: one ``(low, high)`` per feature (default: the declared bounds of the
    table's numeric columns, or of ``features``); ``n_iter``: the number of iterations.
    """

    def __init__(self, n_clusters: int = 3, *, epsilon: object = None,
                 bounds: Sequence[tuple[object, object]] | None = None,
                 features: Sequence[str] | None = None, n_iter: int = 5) -> None:
        self._check_k(n_clusters)
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or not 1 <= n_iter <= 100:
            raise InvalidParameterError("n_iter must be an integer in 1..100",
                                        remedy="pass n_iter=5")
        self.n_clusters, self.epsilon, self.bounds = n_clusters, epsilon, bounds
        self.features, self.n_iter = features, n_iter

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """DP Lloyd as a Measurement: data -> the centres (k × d, in data units)."""
        from ...mechanisms import rng

        box = self._box(meta)
        eps = self._budget(loss)
        k, d, iters = self.n_clusters, box.d, self.n_iter

        def build(eps_row: Fraction) -> Any:
            eps_count, eps_sum = _split(eps_row / iters, d)

            def run(data: Any) -> np.ndarray:
                x = self._scaled(data, box)
                shift = (rng.words64(d) >> np.uint64(11)).astype(np.float64) * 2.0**-53
                centres = halton_centres(k, d, shift) * box.radius
                for _ in range(iters):
                    counts, sums = lloyd_step_release(x, centres, eps_count, eps_sum,
                                                      box.radius_exact)
                    centres = _update(centres, counts, sums, float(eps_count), box.radius)
                return box.unscale(centres)
            return run

        return self._measured(pure_measurement(
            relation_of(meta) if meta is not None else AddRemove(), eps, build,
            "DP Lloyd k-means"))


class SampleAggregateKMeans(_Clusterer):
    """ε-DP k-means by sample and aggregate: plain Lloyd on ``blocks`` disjoint random
    parts, the average of their (canonically ordered) centres released with Laplace noise.

    >>> SampleAggregateKMeans(2, epsilon=1, bounds=[(0, 1)], blocks=50).measurement().cost
    PureDP(epsilon=Fraction(1, 1))
    """

    def __init__(self, n_clusters: int = 3, *, epsilon: object = None,
                 bounds: Sequence[tuple[object, object]] | None = None,
                 features: Sequence[str] | None = None, blocks: int = 100,
                 n_iter: int = 20) -> None:
        self._check_k(n_clusters)
        if isinstance(blocks, bool) or not isinstance(blocks, int) or not 2 <= blocks <= 10**6:
            raise InvalidParameterError("blocks must be an integer >= 2",
                                        remedy="pass blocks=100")
        self.n_clusters, self.epsilon, self.bounds = n_clusters, epsilon, bounds
        self.features, self.blocks, self.n_iter = features, blocks, n_iter

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """Sample and aggregate as a Measurement: data -> the centres."""
        from ...mechanisms import samplers

        box = self._box(meta)
        eps = self._budget(loss)
        k, d, m = self.n_clusters, box.d, self.blocks
        start = halton_centres(k, d) * box.radius

        def build(eps_row: Fraction) -> Any:
            # one row changes one block's centres (coordinate j within ±radius_j): the
            # average moves by at most 2·radius_j/m in each of the k·d coordinates
            sens = 2 * k * sum(box.radius_exact, Fraction(0)) / m
            noise = VectorLaplaceMechanism(sens, eps_row, grid=GRID, max_changed=k * d)

            def run(data: Any) -> np.ndarray:
                x = self._scaled(data, box)
                part = samplers.uniform_int(m, x.shape[0]) if x.shape[0] else \
                    np.zeros(0, dtype=np.int64)
                outs = np.stack([_block_centres(x[part == b], start, self.n_iter, box.radius)
                                 for b in range(m)])
                mean = outs.mean(axis=0)
                return box.unscale(noise.release(mean.ravel()).reshape(k, d))
            return run

        return self._measured(pure_measurement(
            relation_of(meta) if meta is not None else AddRemove(), eps, build,
            "sample-and-aggregate k-means"))


def _block_centres(x: np.ndarray, start: np.ndarray, iters: int, r: np.ndarray) -> np.ndarray:
    """Plain Lloyd from a fixed start on one block, centres in canonical (sorted) order."""
    centres = start.copy()
    if x.shape[0]:
        for _ in range(iters):
            label = _assign(x, centres)
            for c in range(centres.shape[0]):
                sel = label == c
                if sel.any():
                    centres[c] = x[sel].mean(axis=0)
    order = np.lexsort(centres.T[::-1])
    return np.clip(centres[order], -r, r)
