"""k-means of one ordered column under a Blowfish policy (He, Machanavajjhala & Ding 2014).

DP Lloyd releases, per iteration, the number of points of each cluster and the sum of its
points. Under a distance-threshold policy (a value is secret only up to ±θ) one might hope
that the per-cluster sums have sensitivity θ: that holds when the changed value stays in its
cluster, **but not when it crosses a cluster boundary** — x leaving cluster i and arriving
as y in cluster i+1 changes sum_i by -x and sum_{i+1} by +y, |x| + |y| in L1 whatever θ.
Calibrating plain per-cluster sums to θ would not be private (tests/policies shows
check_dp rejecting it).

What this module releases instead, for one column (1-d), with cells
[b_0, b_1), [b_1, b_2), …, [b_{k-1}, b_k] between the midpoints of the current (public)
centres, b_0 and b_k the declared bounds:

* the **cell sums** A_i = Σ_x (clip(x, b_{i-1}, b_i) - b_{i-1}). The cells tile the bounds,
  so for any change x → y, Σ_i |clip_i(x) - clip_i(y)| = |x - y|: the L1 sensitivity is the
  longest edge of the policy graph — θ under a θ-threshold, *whether or not the value changes
  cluster*; the bound's width under the complete graph (plain bounded DP);
* the **counts**, as cumulative counts U_i = #(x >= b_i) at the k-1 inner boundaries when
  that is cheaper — a change x → y moves exactly the U_i whose boundary lies between x and
  y, so under a θ-threshold at most the number of boundaries in a window of width θ (1 when
  the clusters are wider than θ) — or else as the per-cluster histogram, whose L1
  sensitivity is 2 under any value-change policy with an edge between two cells: a value
  moving from cluster i to cluster j is one point fewer in i and one more in j (the size n
  is the same for every policy neighbour, so the two views carry the same information).

The per-cluster sum over cluster i is then A_i - (b_i - b_{i-1})·U_i (a point above cell i
contributes the full width to A_i) and the new centre is b_{i-1} + that / N_i: post-
processing of the two noisy vectors. The budget is split evenly over the start and the
iterations; within one, between the two vectors in the ratio that balances their
contributions to the error.
The initial centres are quantiles of a noisy CDF (:func:`initial_centres`, one share of
the budget, the ordered mechanism when it is cheaper). Each iteration is
(ε_count + ε_sum)-private under the policy; the iterations compose sequentially (each step's
boundaries are a function of the previous releases only).

>>> import numpy as np, warnings
>>> from statcurator.core.policy import Policy
>>> from statcurator.mechanisms import rng
>>> x = np.concatenate([np.full(500, 20), np.full(500, 60)])
>>> km = PolicyKMeans(2, epsilon=1, policy=Policy.line(), bounds=(0, 100), n_iter=4)
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(2):
...         c = km.fit(x).cluster_centers_[:, 0]
>>> bool(abs(c[0] - 20) < 1 and abs(c[1] - 60) < 1), km.cost_
(True, PureDP(epsilon=Fraction(1, 1)))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.aggregates import exact_sum
from ...core.errors import DataError, InvalidParameterError, MetadataError, StatcuratorError
from ...core.measurement import Measurement
from ...core.measures import PrivacyLoss, PureDP
from ...core.numbers import exact
from ...core.policy import Policy, PolicyNeighbours
from ...mechanisms import VectorLaplaceMechanism
from ._base import Described, epsilon_of
from ._domain import as_floats, columns_of

__all__ = ["PolicyKMeans", "PolicyLloydStep", "cell_boundaries", "initial_centres"]


def _grid_for(sensitivity: Fraction) -> Fraction:
    """A power-of-two grid about 1/1024 of the sensitivity: rounding to it adds at most
    k grid units to the L1 sensitivity, well under 1% of the noise for small k."""
    e = math.floor(math.log2(float(sensitivity) / 1024)) if sensitivity else -10
    return Fraction(2) ** e


def cell_boundaries(centres: np.ndarray, lower: float, upper: float) -> np.ndarray:
    """b_0 = lower, the midpoints of consecutive sorted centres, b_k = upper (floats; their
    exact binary values are the public boundaries).

    >>> cell_boundaries(np.array([10.0, 30.0, 70.0]), 0, 100).tolist()
    [0.0, 20.0, 50.0, 100.0]
    """
    c = np.sort(np.asarray(centres, dtype=np.float64).ravel())
    mids = (c[:-1] + c[1:]) / 2
    return np.concatenate([[float(lower)], np.clip(mids, lower, upper), [float(upper)]])


@dataclass(frozen=True)
class PolicyLloydStep:
    """One private Lloyd step on the cells between ``boundaries`` (b_0 … b_k, public).

    ``count_sensitivity`` / ``cumulative``: the counts are released as cumulative counts at
    the inner boundaries when their policy sensitivity is at most the histogram's, else as
    the per-cluster histogram; ``sum_sensitivity``: the cell sums' (the policy's longest
    edge). A sensitivity of 0 means the statistic reveals no secret: it is released exactly.

    >>> step = PolicyLloydStep(Policy.threshold(5), (0.0, 20.0, 50.0, 100.0), Fraction(1, 2),
    ...                        Fraction(1, 2))
    >>> step.count_sensitivity, step.cumulative, step.sum_sensitivity, step.cost
    (Fraction(1, 1), True, Fraction(5, 1), PureDP(epsilon=Fraction(1, 1)))
    >>> counts, sums = step.statistics(np.array([10, 30, 60, 80]))
    >>> counts.tolist(), [str(s) for s in sums]
    ([3, 2], ['70', '70', '40'])
    """

    policy: Policy
    boundaries: tuple[float, ...]
    eps_count: Fraction
    eps_sum: Fraction

    def __post_init__(self) -> None:
        b = tuple(float(v) for v in self.boundaries)
        if len(b) < 2 or any(y < x for x, y in zip(b, b[1:], strict=False)):
            raise InvalidParameterError("the boundaries must be sorted, lower to upper",
                                        remedy="use cell_boundaries(centres, lower, upper)")
        object.__setattr__(self, "boundaries", b)

    @property
    def k(self) -> int:
        return len(self.boundaries) - 1

    @property
    def inner(self) -> tuple[float, ...]:
        return self.boundaries[1:-1]

    @property
    def cumulative(self) -> bool:
        """True when the counts are released as cumulative counts."""
        if not self.inner:
            return True
        return bool(self.policy.cumulative_sensitivity(self.inner)
                    <= self.policy.histogram_sensitivity(edges=self.inner))

    @property
    def count_sensitivity(self) -> Fraction:
        if not self.inner:
            return Fraction(0)  # one cluster: its count is the public size
        if self.cumulative:
            return self.policy.cumulative_sensitivity(self.inner)
        return self.policy.histogram_sensitivity(edges=self.inner)

    @property
    def sum_sensitivity(self) -> Fraction:
        return self.policy.cell_sums_sensitivity(Fraction(self.boundaries[0]),
                                                 Fraction(self.boundaries[-1]))

    @property
    def cost(self) -> PureDP:
        """The loss per policy step: ε_count + ε_sum (0 for a statistic released exactly)."""
        return PureDP((self.eps_count if self.count_sensitivity else 0)
                      + (self.eps_sum if self.sum_sensitivity else 0))

    def mechanisms(self) -> tuple[VectorLaplaceMechanism | None, VectorLaplaceMechanism | None]:
        """The noise of the counts and of the cell sums (None: released exactly)."""
        cs, ss = self.count_sensitivity, self.sum_sensitivity
        count_m = VectorLaplaceMechanism(cs, self.eps_count) if cs else None
        sum_m = VectorLaplaceMechanism(ss, self.eps_sum, grid=_grid_for(ss),
                                       max_changed=self.k) if ss else None
        return count_m, sum_m

    def statistics(self, x: np.ndarray) -> tuple[np.ndarray, list[Fraction]]:
        """The exact counts vector (cumulative U_i = #(x >= b_i), or per-cell counts) and the
        exact cell sums A_i, of values ``x`` already clamped to [b_0, b_k]."""
        b = np.asarray(self.boundaries)
        x = np.asarray(x, dtype=np.float64)
        n = x.shape[0]
        if self.cumulative:
            counts = n - np.searchsorted(np.sort(x), b[1:-1], side="left")
        else:
            counts = np.bincount(np.clip(np.searchsorted(b[1:-1], x, side="right"), 0,
                                         self.k - 1), minlength=self.k)
        # exact: clip returns one of its float inputs, exact_sum is exact, b_{i-1} is the
        # boundary float's exact value
        sums = [exact_sum(np.clip(x, b[i], b[i + 1])) - n * Fraction(float(b[i]))
                for i in range(self.k)]
        return np.asarray(counts, dtype=np.int64), sums

    def release(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The noisy counts vector and the noisy cell sums (floats on the public grid)."""
        counts, sums = self.statistics(x)
        count_m, sum_m = self.mechanisms()
        noisy_counts = count_m.release(counts) if count_m is not None else counts
        noisy_sums = sum_m.release(np.array(sums, dtype=object)) if sum_m is not None \
            else np.array([float(s) for s in sums])
        return np.asarray(noisy_counts, dtype=np.float64), np.asarray(noisy_sums, np.float64)

    def update(self, centres: np.ndarray, counts: np.ndarray, sums: np.ndarray,
               n: int) -> np.ndarray:
        """New centres from the noisy counts and cell sums (post-processing only).

        U_i (points at or above b_i, U_0 = n, U_k = 0) gives N_i = U_{i-1} - U_i; the sum of
        cluster i's points minus b_{i-1} each is A_i - w_i·U_i. A cluster whose noisy count
        is within noise of empty keeps its centre; centres stay inside their cells.
        """
        b = np.asarray(self.boundaries)
        k = self.k
        if self.cumulative:
            upper = np.concatenate([[float(n)], counts, [0.0]])
        else:
            tail = np.cumsum(counts[::-1])[::-1]  # tail[i] = Σ_{j>=i} N_j
            upper = np.concatenate([[float(n)], tail[1:], [0.0]])
        sizes = upper[:-1] - upper[1:]
        widths = b[1:] - b[:-1]
        inside = sums - widths * upper[1:]
        noise_scale = float(self.count_sensitivity / self.eps_count) if \
            self.count_sensitivity else 0.0
        ok = sizes >= max(1.0, 3.0 * noise_scale)
        out = np.sort(np.asarray(centres, dtype=np.float64).ravel()).copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            fresh = b[:-1] + inside / sizes
        out[ok] = np.clip(fresh[ok], b[:-1][ok], b[1:][ok])
        idle = np.flatnonzero(~ok)
        if idle.size and ok.any():
            # an empty cluster (a start far from the data) splits the most populous one: it
            # moves half-way from that centre towards its farther cell boundary
            big = int(np.argmax(np.where(ok, sizes, -np.inf)))
            left, right = out[big] - b[big], b[big + 1] - out[big]
            far = b[big] if left > right else b[big + 1]
            out[idle[0]] = (out[big] + far) / 2
        return np.sort(out[:k])


#: the number of equal-width bins of the bounds whose noisy CDF places the first centres
START_BINS = 32


def initial_centres(x: np.ndarray, policy: Policy, lower: float, upper: float, k: int,
                    epsilon: Fraction) -> np.ndarray:
    """The first centres: the (i + 1/2)/k quantiles of a noisy CDF over ``START_BINS``
    equal-width bins (the ordered mechanism's cumulative counts when they are cheaper under
    the policy, else the policy histogram summed up), interpolated inside a bin.
    ε-private under the policy; Lloyd in one dimension converges slowly from an even spread.

    >>> import warnings
    >>> from statcurator.mechanisms import rng
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(0):
    ...         c = initial_centres(np.arange(100.0), Policy.line(), 0, 128, 2, Fraction(1))
    >>> bool(abs(c[0] - 25) < 5 and abs(c[1] - 75) < 5)
    True
    """
    from ...mechanisms.policy import OrderedMechanism, PolicyHistogram

    n = x.shape[0]
    cuts = [lower + j * (upper - lower) / START_BINS for j in range(1, START_BINS)]
    ordered = OrderedMechanism(policy, epsilon, edges=cuts)
    hist = PolicyHistogram(policy, epsilon, edges=cuts)
    if ordered.sensitivity <= hist.sensitivity:
        cdf = np.array(ordered.release(x).cumulative, dtype=np.float64)
    else:
        cdf = np.cumsum(np.clip(hist.release(x), 0, None))[:-1].astype(np.float64)
        cdf = np.minimum(cdf, n)
    grid = np.array([lower, *cuts, upper])
    full = np.concatenate([[0.0], cdf, [max(float(n), float(cdf[-1]) if cdf.size else 0.0)]])
    full = np.maximum.accumulate(full)
    targets = (np.arange(k) + 0.5) / k * full[-1]
    out = np.empty(k)
    for i, t in enumerate(targets):
        j = int(np.clip(np.searchsorted(full, t, side="left"), 1, len(full) - 1))
        lo_c, hi_c = full[j - 1], full[j]
        frac = (t - lo_c) / (hi_c - lo_c) if hi_c > lo_c else 0.5
        out[i] = grid[j - 1] + frac * (grid[j] - grid[j - 1])
    return np.sort(out)


def _split(eps_iter: Fraction, sum_sens: Fraction, count_sens: Fraction,
           width: Fraction) -> tuple[Fraction, Fraction]:
    """ε_count, ε_sum: the sum of a cluster's points carries noise ~ Δ_sum/ε_sum from the
    cell sums and ~ width·Δ_count/ε_count from the counts; their sum is smallest at
    ε_sum/ε_count = sqrt(Δ_sum/(width·Δ_count)) (a public rational ratio, within [1/16, 16])."""
    if not count_sens:
        return Fraction(0), eps_iter
    if not sum_sens:
        return eps_iter, Fraction(0)
    ratio = math.sqrt(float(sum_sens) / (float(width) * float(count_sens)))
    r = min(max(Fraction(round(ratio * 64), 64), Fraction(1, 16)), Fraction(16))
    eps_count = eps_iter / (1 + r)
    return eps_count, eps_iter - eps_count


class PolicyKMeans(Described):
    """k-means of one ordered column, private under a Blowfish ``policy`` (see the module).

    ``policy``: a :class:`~statcurator.core.policy.Policy` (default: the column's declared
    policy); ``Policy.complete()`` gives plain bounded ε-DP, the baseline. ``bounds``: the
    public ``(low, high)`` (default: the column's declared bounds); ``feature``: the column of
    a Dataset. The privacy map is read under the policy's neighbours: datasets d edges of
    the graph apart are protected at d·ε.

    >>> PolicyKMeans(3, epsilon=1, policy=Policy.threshold(5), bounds=(0, 120)).measurement().cost
    PureDP(epsilon=Fraction(1, 1))
    """

    def __init__(self, n_clusters: int = 3, *, epsilon: object = None,
                 policy: Policy | None = None, bounds: tuple[object, object] | None = None,
                 feature: str | None = None, n_iter: int = 5) -> None:
        if isinstance(n_clusters, bool) or not isinstance(n_clusters, int) or not (
                1 <= n_clusters <= 1000):
            raise InvalidParameterError("n_clusters must be an integer in 1..1000",
                                        remedy="pass n_clusters=3")
        if isinstance(n_iter, bool) or not isinstance(n_iter, int) or not 1 <= n_iter <= 100:
            raise InvalidParameterError("n_iter must be an integer in 1..100",
                                        remedy="pass n_iter=5")
        self.n_clusters, self.epsilon, self.policy = n_clusters, epsilon, policy
        self.bounds, self.feature, self.n_iter = bounds, feature, n_iter

    def _setup(self, meta: Any) -> tuple[Policy, Fraction, Fraction]:
        policy, bounds = self.policy, self.bounds
        if meta is not None and self.feature is not None:
            col = meta[self.feature]
            policy = policy if policy is not None else col.policy
            bounds = bounds if bounds is not None else col.bounds
        if policy is None:
            raise MetadataError("policy k-means needs a Blowfish policy",
                                remedy="pass policy=Policy.threshold(1), or declare policy = "
                                       "{ graph = \"threshold\", theta = 1 } on the column")
        if bounds is None:
            raise MetadataError("policy k-means needs public bounds",
                                remedy="pass bounds=(low, high) or declare them on the column")
        lo = exact(bounds[0], "lower bound", positive=False)
        hi = exact(bounds[1], "upper bound", positive=False)
        if not lo < hi or Fraction(float(lo)) != lo or Fraction(float(hi)) != hi:
            raise MetadataError(f"bounds [{lo}, {hi}] must satisfy low < high and be floats",
                                remedy="declare bounds such as [0, 120]")
        return policy, lo, hi

    def _values(self, data: Any, fill: float | None = None) -> np.ndarray:
        """The column's values as floats. While fitting (``fill`` given: the midpoint of the
        declared bounds) NULL, NaN and values that are not numbers become ``fill``, row by
        row, instead of an error that would reveal a private value after the charge; ±∞
        is clamped to the bounds by the caller. Predicting (public data) refuses them."""
        if self.feature is not None and not isinstance(data, np.ndarray | list | tuple):
            x = as_floats(columns_of(data, [self.feature])[self.feature])
        else:
            x = as_floats(np.asarray(data).ravel())
        if fill is not None:
            return np.where(np.isnan(x), fill, x)
        if not np.isfinite(x).all():
            raise DataError("the values hold NaN, ±∞ or non-numbers",
                            remedy="drop or impute them first")
        return x

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """Policy k-means as a Measurement under the policy's neighbours: values -> the
        sorted centres (k × 1)."""
        policy, lo, hi = self._setup(meta)
        eps = epsilon_of(loss, self.epsilon)
        k, iters = self.n_clusters, self.n_iter
        flo, fhi = float(lo), float(hi)

        eps_step = eps / (iters + 1)  # one share for the start, one per iteration

        def run(data: Any) -> np.ndarray:
            x = np.clip(self._values(data, (flo + fhi) / 2), flo, fhi)
            n = x.shape[0]
            centres = initial_centres(x, policy, flo, fhi, k, eps_step)
            for _ in range(iters):
                b = cell_boundaries(centres, flo, fhi)
                probe = PolicyLloydStep(policy, tuple(b), Fraction(1), Fraction(1))
                eps_count, eps_sum = _split(eps_step, probe.sum_sensitivity,
                                            probe.count_sensitivity, (hi - lo) / k)
                step = PolicyLloydStep(policy, tuple(b), eps_count or Fraction(1),
                                       eps_sum or Fraction(1))
                counts, sums = step.release(x)
                centres = step.update(centres, counts, sums, n)
            return centres.reshape(k, 1)

        # the start and each step cost at most eps/(iters+1) per policy edge (ε_count + ε_sum,
        # a part of it when a statistic is exact); d edges cost d times that (pure DP)
        return Measurement(PolicyNeighbours(policy), PureDP, run,
                           lambda d: PureDP(eps * d), "policy k-means")

    def fit(self, X: Any, y: Any = None) -> PolicyKMeans:
        """Fit the centres on the column's values; spends ε under the policy."""
        m = self.measurement(getattr(X, "meta", None))
        self.cluster_centers_, self.cost_ = m(X), m.cost
        return self

    def predict(self, X: Any) -> np.ndarray:
        """The index of the nearest centre of each value."""
        if not hasattr(self, "cluster_centers_"):
            raise StatcuratorError("the clusterer is not fitted yet", remedy="call fit first")
        x = self._values(X)
        return np.argmin(np.abs(x[:, None] - self.cluster_centers_[:, 0][None, :]), axis=1)
