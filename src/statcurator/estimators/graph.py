"""Graph statistics under edge privacy, on a graph given as an edge table.

Each row of the table is an (undirected) edge ``(source, target)``; the privacy unit is an
edge (Dwork & Smith's "relation privacy"): neighbouring graphs differ in one edge row.
Self-loops are dropped and repeated edges counted once (both are 1-stable).

* :class:`EdgeCount` — the number of edges, discrete Laplace noise (sensitivity 1).
* :class:`DegreeHistogram` — how many nodes have degree 1, 2, ..., ``max_degree`` (the
  last bin is "at least"); an edge moves its two endpoints one bin each: L1 sensitivity 4.
* :class:`TriangleCount` — the number of triangles with smooth sensitivity (Nissim,
  Raskhodnikova & Smith 2007, §3.2): the local sensitivity at flip distance k is
  max over node pairs i ≠ j of a_ij + ⌊(k + min(k, b_ij))/2⌋, with a_ij the common
  neighbours of i and j and b_ij the nodes adjacent to exactly one of them (the node
  universe is unbounded, so NRS's cap n - 2 is not applied). A changed edge row is two
  flips: the bound then uses 2·U(2k + 1).

>>> import warnings
>>> from statcurator.mechanisms import rng
>>> edges = {"src": [1, 2, 3, 1, 4, 5], "dst": [2, 3, 1, 4, 5, 1]}   # two triangles
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(0):
...         est = edge_count(edges, epsilon=1)
>>> 0 <= est.value <= 15
True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PrivacyLoss, PureDP
from ..core.relations import ChangeOne, Relation
from ..core.schema import Column, TableMeta
from ..mechanisms import GeometricMechanism, VectorLaplaceMechanism
from ..mechanisms.smooth import SmoothSensitivityMechanism, smooth_upper_bound
from ._common import Statistic, pure_or_approx, raw_values
from ._protocol import Estimate

__all__ = ["EdgeCount", "DegreeHistogram", "TriangleCount", "edge_count",
           "degree_histogram", "triangle_count", "edge_set", "triangle_local_bounds",
           "triangle_smooth_bound"]


def edge_set(table: Any, source: str, target: str) -> tuple[np.ndarray, int]:
    """The distinct undirected edges as an (m, 2) int array over node codes, and the
    number of nodes that appear.

    >>> e, n = edge_set({"s": ["a", "b", "b", "c"], "t": ["b", "a", "c", "c"]}, "s", "t")
    >>> e.tolist(), n
    ([[0, 1], [1, 2]], 3)
    """
    s, t = raw_values(table, source), raw_values(table, target)
    codes: dict[Any, int] = {}
    pairs = set()
    for a, b in zip(s.tolist(), t.tolist(), strict=True):
        if a is None or b is None or a == b:
            continue
        i = codes.setdefault(a, len(codes))
        j = codes.setdefault(b, len(codes))
        pairs.add((min(i, j), max(i, j)))
    arr = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    used = np.unique(arr) if arr.size else np.zeros(0, np.int64)
    remap = np.full(len(codes), -1, dtype=np.int64)
    remap[used] = np.arange(used.size)
    return remap[arr] if arr.size else arr, int(used.size)


class _Graph(Statistic):
    source: str
    target: str

    def _columns(self) -> tuple[str, ...]:
        return (self.source, self.target)

    def _meta(self, meta: Any) -> TableMeta:
        if meta is None:
            return TableMeta("edges", (Column(self.source), Column(self.target)))
        return meta

    def _steps(self, relation: Relation) -> int:
        return 2 if isinstance(relation, ChangeOne) else 1


@dataclass(frozen=True)
class EdgeCount(_Graph):
    """The number of distinct edges, ε-DP under edge privacy, with a (1 - alpha) interval.

    >>> EdgeCount(epsilon=1).columns()
    ('src', 'dst')
    """

    epsilon: Any = None
    source: str = "src"
    target: str = "dst"
    alpha: float = 0.05

    statistic = "edge count"
    measures = (PureDP,)

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        return "geometric mechanism, sensitivity 1 edge"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        mech = GeometricMechanism(1, loss.epsilon)  # type: ignore[attr-defined]
        alpha = Fraction(str(self.alpha))

        def run(table: Any, size: int | None = None) -> Any:
            m = edge_set(table, self.source, self.target)[0].shape[0]
            if size is not None:
                return mech.release(np.full(size, m))
            v = int(mech.release(m))
            h = mech.accuracy(alpha)
            return Estimate("edge count", v, (v - h, v + h), self.alpha, loss,
                            self._mechanism_name(loss))

        return run


@dataclass(frozen=True)
class DegreeHistogram(_Graph):
    """Node counts by degree 1..``max_degree`` (last bin: at least ``max_degree``), ε-DP.

    >>> DegreeHistogram(epsilon=1, max_degree=3).statistic
    'degree histogram'
    """

    epsilon: Any = None
    max_degree: int = 20
    source: str = "src"
    target: str = "dst"
    alpha: float = 0.05

    statistic = "degree histogram"
    measures = (PureDP,)

    def __post_init__(self) -> None:
        d = self.max_degree
        if isinstance(d, bool) or not isinstance(d, int) or not 1 <= d <= 100_000:
            raise InvalidParameterError("max_degree must be an integer in 1..100000",
                                        remedy="pass max_degree=20")

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        return "vector Laplace, L1 sensitivity 4 per edge"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        mech = VectorLaplaceMechanism(4 * self._steps(relation), loss.epsilon)  # type: ignore[attr-defined]
        alpha = Fraction(str(self.alpha))

        def run(table: Any, size: int | None = None) -> Any:
            edges, n = edge_set(table, self.source, self.target)
            deg = np.bincount(edges.ravel(), minlength=n) if n else np.zeros(0, np.int64)
            hist = np.bincount(np.minimum(deg, self.max_degree),
                               minlength=self.max_degree + 1)[1:]
            if size is not None:
                return mech.release(np.tile(hist, (size, 1)))
            v = tuple(int(c) for c in mech.release(hist))
            h = mech.accuracy(alpha)
            return Estimate("degree histogram", v, tuple((c - h, c + h) for c in v),
                            self.alpha, loss, self._mechanism_name(loss),
                            details={"degrees": list(range(1, self.max_degree + 1))})

        return run


def triangle_local_bounds(edges: np.ndarray, n: int
                          ) -> tuple[int, Callable[[np.ndarray], np.ndarray], int]:
    """(triangles, U, A) for an edge array (see the module docs): U(k) = the largest local
    sensitivity of the triangle count within k edge flips, A = the largest number of common
    neighbours of a pair (U(k) <= A + k).

    >>> t, U, a = triangle_local_bounds(np.array([[0, 1], [1, 2], [0, 2]]), 3)
    >>> t, U(np.array([0, 1, 2])).tolist(), a
    (1, [1.0, 1.0, 2.0], 1)
    """
    from scipy import sparse

    if n == 0:  # every pair has a = b = 0: U(k) = ⌊k/2⌋
        return 0, lambda ks: (ks // 2).astype(np.float64), 0
    adj = sparse.coo_matrix((np.ones(edges.shape[0]), (edges[:, 0], edges[:, 1])),
                            shape=(n, n)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.int64)
    common = (adj @ adj).tocoo()
    triangles = int(round(float(adj.multiply(adj @ adj).sum()) / 6))
    deg = np.asarray(adj.sum(axis=1)).ravel()
    keep = common.row < common.col
    i, j, a = common.row[keep], common.col[keep], common.data[keep].astype(np.int64)
    linked = np.asarray(adj[i, j]).ravel() if i.size else np.zeros(0)
    b = deg[i] + deg[j] - 2 * a - 2 * linked
    b0 = _largest_b_without_common_neighbours(adj, deg, set(zip(i.tolist(), j.tolist(),
                                                               strict=True)))

    def local(ks: np.ndarray) -> np.ndarray:
        out = np.empty(ks.shape[0])
        for t, k in enumerate(ks.tolist()):
            best = (k + min(k, b0)) // 2
            if a.size:
                best = max(best, int((a + (k + np.minimum(k, b)) // 2).max()))
            out[t] = float(best)
        return out

    return triangles, local, int(a.max(initial=0))


def _largest_b_without_common_neighbours(adj: Any, deg: np.ndarray,
                                         with_common: set[tuple[int, int]]) -> int:
    """max b_ij over the pairs with no common neighbour, exactly: b = deg i + deg j for an
    unlinked pair, minus 2 for an edge; a node outside the graph pairs with any i at b =
    deg i. Unlinked pairs are scanned in decreasing degree, stopping once no pair can win."""
    n = deg.shape[0]
    best = int(deg.max(initial=0))
    coo = sparse_triu(adj)
    for x, y in zip(coo.row.tolist(), coo.col.tolist(), strict=True):  # edges
        if (x, y) not in with_common:
            best = max(best, int(deg[x] + deg[y] - 2))
    order = np.argsort(-deg, kind="stable").tolist()
    neighbours = [set(adj.indices[adj.indptr[v]:adj.indptr[v + 1]].tolist()) for v in range(n)]
    for pos, x in enumerate(order):
        if pos + 1 < n and int(deg[x] + deg[order[pos + 1]]) <= best:
            break
        for y in order[pos + 1:]:
            if int(deg[x] + deg[y]) <= best:
                break
            if y not in neighbours[x] and (min(x, y), max(x, y)) not in with_common:
                best = int(deg[x] + deg[y])
                break
    return best


def sparse_triu(adj: Any) -> Any:
    """The strictly upper triangle of a sparse matrix, as COO."""
    from scipy import sparse

    return sparse.triu(adj, k=1).tocoo()


def triangle_smooth_bound(edges: np.ndarray, n: int, beta: Fraction, change: bool
                          ) -> tuple[int, Fraction]:
    """(triangles, S): the β-smooth bound of the triangle count's local sensitivity, per
    edge flip (``change=False``) or per changed edge row (two flips: 2·U(2k + 1)).

    U(k) grows without bound (≈ A + k), so the scan stops at a *public* distance K past 2/β
    and U is extended beyond K by its bound A + k (one flip moves A by at most 1, so the
    extension keeps U(k) <= U(k+1) at neighbours); from K + 1 on e^(-βk)·U(k) decreases, so
    the scan up to K + 1 finds the maximum.

    >>> triangle_smooth_bound(np.array([[0, 1], [1, 2], [0, 2]]), 3, Fraction(1, 10),
    ...                       False)[0]
    1
    """
    count, local, top = triangle_local_bounds(edges, n)
    big_k = math.ceil(2 / beta) + 2

    def u(ks: np.ndarray) -> np.ndarray:
        inner = np.minimum(ks, big_k)
        exact_u = 2 * local(2 * inner + 1) if change else local(inner)
        beyond = 2 * (top + 2 * ks + 1) if change else top + ks
        return np.where(ks <= big_k, exact_u, beyond.astype(np.float64))

    cap = float(2 * (top + 2 * big_k + 3)) if change else float(top + big_k + 1)
    return count, smooth_upper_bound(u, beta, cap, big_k + 1)


@dataclass(frozen=True)
class TriangleCount(_Graph):
    """The number of triangles with smooth-sensitivity noise (NRS 2007), under edge
    privacy; pure ε (heavy-tailed noise) or (ε, δ) (Laplace-type).

    >>> TriangleCount(epsilon=1).measurement().cost
    PureDP(epsilon=Fraction(1, 1))
    """

    epsilon: Any = None
    delta: Any = None
    source: str = "src"
    target: str = "dst"

    statistic = "triangle count"

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        noise = "heavy-tailed noise" if isinstance(loss, PureDP) else "Laplace noise"
        return f"smooth sensitivity (NRS 2007), {noise}"

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        eps, delta = pure_or_approx(loss, self.statistic)
        grid = Fraction(1, 256)
        mech = SmoothSensitivityMechanism(eps, delta, grid,
                                          "cauchy" if delta == 0 else "laplace")
        change = isinstance(relation, ChangeOne)

        def run(table: Any, size: int | None = None) -> Any:
            edges, n = edge_set(table, self.source, self.target)
            count, smooth = triangle_smooth_bound(edges, n, mech.beta, change)
            if size is not None:
                return mech.release(count, smooth, size)
            v = float(mech.release(count, smooth))
            return Estimate("triangle count", v, None, None, loss, self._mechanism_name(loss),
                            details={"noise": mech.noise})

        return run


def edge_count(edges: Any, *, epsilon: Any, source: str = "src", target: str = "dst",
               alpha: float = 0.05) -> Estimate:
    """The DP edge count of an edge table (local use; see :class:`EdgeCount`).

    >>> edge_count({"src": [1], "dst": [2]}, epsilon=1).statistic
    'edge count'
    """
    return EdgeCount(epsilon, source, target, alpha).run(edges)


def degree_histogram(edges: Any, *, epsilon: Any, max_degree: int = 20, source: str = "src",
                     target: str = "dst", alpha: float = 0.05) -> Estimate:
    """The DP degree histogram of an edge table (local use).

    >>> len(degree_histogram({"src": [1, 2], "dst": [2, 3]}, epsilon=1, max_degree=3).value)
    3
    """
    return DegreeHistogram(epsilon, max_degree, source, target, alpha).run(edges)


def triangle_count(edges: Any, *, epsilon: Any, delta: Any = None, source: str = "src",
                   target: str = "dst") -> Estimate:
    """The DP triangle count of an edge table with smooth sensitivity (local use).

    >>> import numpy as np
    >>> rng_ = np.random.default_rng(0)
    >>> e = rng_.integers(0, 200, (3000, 2))
    >>> est = triangle_count({"src": e[:, 0], "dst": e[:, 1]}, epsilon=1)
    >>> est.statistic
    'triangle count'
    """
    return TriangleCount(epsilon, delta, source, target).run(edges)
