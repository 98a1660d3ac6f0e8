"""Mechanisms under a Blowfish policy: the policy histogram and the ordered mechanism.

Both are the Laplace mechanism calibrated to the *policy-specific* sensitivity
(:mod:`statcurator.core.policy`): the largest change of the query when one individual's value
moves along one edge of the policy's secret graph. Their privacy map is read in the policy's
neighbour relation (:class:`~statcurator.core.policy.PolicyNeighbours`): inputs ``d`` edges
apart are protected at ``d·ε`` — so a pair of values far apart in the graph (ages 40 and 60
under θ = 1) is protected only at 20ε: that is what the policy gives up.

* :class:`PolicyHistogram` — counts over public bins, L1 sensitivity 2 (or 0 when no edge of
  the graph leaves a bin: the histogram over a partition's blocks is public under it).
* :class:`OrderedMechanism` — the ordered mechanism of He, Machanavajjhala & Ding (2014) for
  range queries on an ordered domain: noisy *cumulative* counts C_j = #(x < e_j). Under the
  line graph one value change moves at most one cumulative count by 1 (θ counts under a
  θ-threshold with unit bins), so every range count is the difference of two noisy
  cumulative counts, with error independent of the range's length — where plain DP needs a
  noisy histogram summed over the range, or a hierarchy of them. Post-processing makes the
  counts consistent: non-decreasing (isotonic regression), within [0, n], integers.

>>> from fractions import Fraction
>>> from statcurator.core.policy import Policy
>>> om = OrderedMechanism(Policy.line(), epsilon=1, edges=range(18, 91))
>>> om.sensitivity, om.scale, om.cost
(Fraction(1, 1), Fraction(1, 1), PureDP(epsilon=Fraction(1, 1)))
>>> OrderedMechanism(Policy.complete(), epsilon=1, edges=range(18, 91)).sensitivity
Fraction(73, 1)
>>> ph = PolicyHistogram(Policy.partition([["flu", "cold"], ["cancer"]]), epsilon=1,
...                      bins=[["flu", "cold"], ["cancer"]])
>>> ph.sensitivity, ph.cost, ph.release(["flu", "cold", "cancer"]).tolist()
(Fraction(0, 1), PureDP(epsilon=Fraction(0, 1)), [2, 1])
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measurement import Measurement
from ..core.measures import PureDP
from ..core.numbers import exact, exact_value
from ..core.policy import Policy, PolicyNeighbours
from ._base import Mechanism, as_alpha, distance, dlap_halfwidth
from .laplace import VectorLaplaceMechanism

__all__ = ["PolicyHistogram", "OrderedMechanism", "CumulativeRelease", "isotonic_increasing"]


def _values(x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 1:
        arr = arr.reshape(-1)
    return arr


def _numeric(x: Any) -> np.ndarray:
    """The values as numbers, row by row and never refusing one (they are private): NULL
    and anything that is not a number become NaN, which the bins place above every cut
    point (the last bin; in no cumulative count C_j = #(x < e_j)), like +∞. A fixed public
    place, one row at a time: the sensitivities are unchanged, and no error can reveal a
    value after the charge.

    >>> _numeric(np.array([1, None, "x"], dtype=object)).tolist()
    [1.0, nan, nan]
    """
    arr = _values(x)
    if arr.dtype.kind in "iufb":
        return arr
    out = np.empty(arr.size, dtype=np.float64)
    for i, v in enumerate(arr.tolist()):
        try:
            out[i] = np.nan if v is None else float(v)
        except (TypeError, ValueError, OverflowError):
            out[i] = np.nan
    return out


def _cuts(edges: Iterable[object]) -> tuple[Fraction, ...]:
    cuts = tuple(exact_value(e, "bin edge") for e in edges)
    if any(b <= a for a, b in zip(cuts, cuts[1:], strict=False)):
        raise InvalidParameterError("the bin edges must be strictly increasing",
                                    remedy="pass edges=range(18, 91) (sorted, no repeats)")
    return cuts


def _float_cuts(cuts: Sequence[Fraction]) -> np.ndarray:
    # exact comparisons of data against cuts: a float cut that rounds would move a value to
    # another bin; cuts are public numbers, so refuse those a float cannot hold
    out = np.array([float(c) for c in cuts], dtype=np.float64)
    if any(Fraction(f) != c for f, c in zip(out.tolist(), cuts, strict=True)):
        raise InvalidParameterError("a bin edge is not exactly representable as a float",
                                    remedy="use edges that are integers or binary fractions")
    return out


def isotonic_increasing(y: Sequence[float] | np.ndarray) -> np.ndarray:
    """The least-squares non-decreasing fit of ``y`` (pool-adjacent-violators).

    For a non-decreasing truth t, max|fit - t| <= max|y - t|: making noisy cumulative counts
    consistent never increases their largest error.

    >>> isotonic_increasing([1.0, 3.0, 2.0, 4.0]).tolist()
    [1.0, 2.5, 2.5, 4.0]
    """
    vals: list[float] = []
    sizes: list[int] = []
    for v in np.asarray(y, dtype=np.float64).tolist():
        vals.append(v)
        sizes.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            v2, s2 = vals.pop(), sizes.pop()
            v1, s1 = vals.pop(), sizes.pop()
            vals.append((v1 * s1 + v2 * s2) / (s1 + s2))
            sizes.append(s1 + s2)
    return np.repeat(np.array(vals, dtype=np.float64), sizes)


class _PolicyMechanism(Mechanism):
    """Shared: Laplace noise at the policy sensitivity; privacy map d edges -> d·ε."""

    policy: Policy
    epsilon: Fraction

    @property
    def sensitivity(self) -> Fraction:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    @property
    def noise(self) -> VectorLaplaceMechanism | None:
        """The vector Laplace mechanism that adds the noise (None when the sensitivity is 0:
        the statistic does not depend on any secret of the policy)."""
        s = self.sensitivity
        return VectorLaplaceMechanism(s, self.epsilon) if s else None

    @property
    def scale(self) -> Fraction:
        """The noise scale per count: sensitivity/ε (0 when the statistic is public)."""
        return self.sensitivity / self.epsilon

    @property
    def cost(self) -> PureDP:
        """PureDP(ε) per policy step (PureDP(0) when the sensitivity is 0)."""
        return self.privacy_map(1)

    def privacy_map(self, d: object) -> PureDP:
        """The loss for datasets ``d`` edges of the policy graph apart (PolicyNeighbours
        distance): each edge moves the counts by at most the sensitivity, so d·ε."""
        dist = distance(d)
        return PureDP(self.epsilon * dist if self.sensitivity else Fraction(0))

    def measurement(self, input_space: Any = None) -> Measurement:
        """The mechanism as a Measurement on a column's values under the policy relation."""
        return Measurement(input_space if input_space is not None else
                           PolicyNeighbours(self.policy), PureDP, self.release,
                           self.privacy_map, name=self.name)

    def _noisy(self, counts: np.ndarray) -> np.ndarray:
        noise = self.noise
        return counts.astype(np.int64) if noise is None else np.asarray(noise.release(counts))

    def _halfwidth(self, alpha: Fraction) -> int:
        return dlap_halfwidth(self.scale, alpha) if self.sensitivity else 0


@dataclass(frozen=True)
class PolicyHistogram(_PolicyMechanism):
    """A histogram over public bins, private under a Blowfish policy.

    ``bins``: the bins as collections of values (categorical columns), or ``edges``: the
    interior cut points of numeric bins (-∞, e_1), [e_1, e_2), …, [e_{m-1}, ∞). The L1
    sensitivity is :meth:`Policy.histogram_sensitivity` — 2, or 0 when every edge of the
    graph stays inside one bin (then the counts are released exactly, at no cost: the policy
    does not hide them). ``accuracy(alpha)`` is the per-bin half-width.

    >>> h = PolicyHistogram(Policy.threshold(5), epsilon=1, edges=[30, 50])
    >>> h.counts([20, 35, 49, 70]).tolist(), h.sensitivity, h.accuracy(0.05)
    ([1, 2, 1], Fraction(2, 1), 6.0)
    """

    policy: Policy
    epsilon: Fraction
    edges: tuple[Fraction, ...] | None = None
    bins: tuple[tuple[Hashable, ...], ...] | None = None
    _index: dict[Hashable, int] = field(default_factory=dict, init=False, repr=False,
                                        compare=False)

    name = "policy-histogram"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        if (self.edges is None) == (self.bins is None):
            raise InvalidParameterError("pass exactly one of bins= or edges=",
                                        remedy="bins for categorical values, edges for numbers")
        if self.edges is not None:
            object.__setattr__(self, "edges", _cuts(self.edges))
            _float_cuts(self.edges)
        else:
            assert self.bins is not None
            bins = tuple(tuple(b) for b in self.bins)
            object.__setattr__(self, "bins", bins)
            index = {v: i for i, b in enumerate(bins) for v in b}
            if len(index) != sum(len(b) for b in bins):
                raise InvalidParameterError("a value is in two bins",
                                            remedy="give each value one bin")
            object.__setattr__(self, "_index", index)

    @property
    def sensitivity(self) -> Fraction:
        """The policy-specific L1 sensitivity of the histogram (2 or 0)."""
        if self.edges is not None:
            return self.policy.histogram_sensitivity(edges=self.edges)
        return self.policy.histogram_sensitivity(bins=self.bins)

    def counts(self, values: Any) -> np.ndarray:
        """The exact counts per bin (no noise). A value in no declared bin (NULL, an
        undeclared category) is not counted, and a numeric NULL or non-number counts in the
        last bin, like +∞: never an error, which would reveal a private value (it is no
        vertex of the policy graph, so no neighbour moves it).

        >>> h = PolicyHistogram(Policy.complete(), epsilon=1, bins=[["a"], ["b"]])
        >>> h.counts(["a", None, "z", "b"]).tolist()
        [1, 1]
        """
        if self.edges is not None:
            x = _numeric(values)
            idx = np.searchsorted(_float_cuts(self.edges), x, side="right")
            return np.bincount(idx, minlength=len(self.edges) + 1).astype(np.int64)
        assert self.bins is not None
        out = np.zeros(len(self.bins), dtype=np.int64)
        for v in _values(values).tolist():
            try:
                i = self._index.get(v)
            except TypeError:  # unhashable: in no bin
                i = None
            if i is not None:  # a value in no declared bin (NULL, undeclared) is not counted
                out[i] += 1
        return out

    def release(self, values: Any) -> np.ndarray:
        """The noisy counts (int64) of the column's ``values``."""
        return self._noisy(self.counts(values))

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Per-bin half-width h with P(|noise| > h) <= alpha."""
        return float(self._halfwidth(as_alpha(alpha)))


@dataclass(frozen=True)
class CumulativeRelease:
    """The ordered mechanism's output: consistent cumulative counts C_j = #(x < e_j) at the
    cut points, and the public size n; range counts are differences of two of them.

    >>> r = CumulativeRelease(edges=(Fraction(10), Fraction(20)), cumulative=(3, 7), n=9)
    >>> r.range_count(10, 20), r.range_count(None, 10), r.range_count(20, None), r.histogram()
    (4, 3, 2, [3, 4, 2])
    """

    edges: tuple[Fraction, ...]
    cumulative: tuple[int, ...]
    n: int

    def at(self, cut: object) -> int:
        """C at a cut point (None below every value: 0; None above: n)."""
        if cut is None:
            raise InvalidParameterError("use range_count(None, b) or range_count(a, None)",
                                        remedy="pass a cut point")
        c = exact_value(cut, "cut point")
        try:
            return self.cumulative[self.edges.index(c)]
        except ValueError:
            raise InvalidParameterError(f"{cut} is not one of the released cut points",
                                        remedy="ask for ranges between released edges") from None

    def range_count(self, lo: object, hi: object) -> int:
        """The count of values in [lo, hi) (lo=None: from -∞; hi=None: to +∞)."""
        top = self.n if hi is None else self.at(hi)
        bottom = 0 if lo is None else self.at(lo)
        return top - bottom

    def histogram(self) -> list[int]:
        """The counts per bin (-∞, e_1), [e_1, e_2), …, [e_{m-1}, ∞)."""
        full = [0, *self.cumulative, self.n]
        return [b - a for a, b in zip(full, full[1:], strict=False)]


@dataclass(frozen=True)
class OrderedMechanism(_PolicyMechanism):
    """The ordered mechanism: noisy cumulative counts for range queries under a policy.

    ``edges`` are the cut points e_1 < … < e_{m-1} (``range(18, 91)``: unit bins of ages);
    the released vector is C_j = #(x < e_j) plus discrete Laplace noise of scale
    :meth:`Policy.cumulative_sensitivity`/ε (1/ε under the line graph, θ/ε under a
    θ-threshold with unit bins, (m-1)/ε for the complete graph). With ``consistent`` (the
    default) the noisy vector is post-processed — isotonic regression, clipped to [0, n],
    rounded — which never increases the largest error. ``n`` is the table size, the same for
    every policy neighbour (a value change keeps it), so it is used as is.

    ``accuracy(alpha)``: half-width of one range count (the difference of two noisy
    cumulative counts, each at alpha/2); ``simultaneous_accuracy(alpha)``: one half-width
    for *all* range counts at once.

    >>> import warnings
    >>> from statcurator.mechanisms import rng
    >>> om = OrderedMechanism(Policy.threshold(2), epsilon=1, edges=[20, 30, 40])
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     with rng.seeded(3):
    ...         r = om.release([25, 25, 35, 45])
    >>> r.n, len(r.cumulative), om.sensitivity
    (4, 3, Fraction(1, 1))
    >>> all(a <= b for a, b in zip(r.cumulative, r.cumulative[1:]))
    True
    """

    policy: Policy
    epsilon: Fraction
    edges: tuple[Fraction, ...] = ()
    consistent: bool = True

    name = "ordered"

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        object.__setattr__(self, "edges", _cuts(self.edges))
        _float_cuts(self.edges)
        if not self.edges:
            raise InvalidParameterError("the ordered mechanism needs at least one cut point",
                                        remedy="pass edges=range(18, 91)")

    @property
    def sensitivity(self) -> Fraction:
        """The policy-specific L1 sensitivity of the cumulative counts."""
        return self.policy.cumulative_sensitivity(self.edges)

    def cumulative(self, values: Any) -> np.ndarray:
        """The exact cumulative counts C_j = #(x < e_j) (no noise)."""
        x = np.sort(_numeric(values))
        return np.searchsorted(x, _float_cuts(self.edges), side="left").astype(np.int64)

    def noisy_cumulative(self, values: Any) -> np.ndarray:
        """The raw noisy cumulative counts (before post-processing)."""
        return self._noisy(self.cumulative(values))

    def release(self, values: Any) -> CumulativeRelease:
        """The released cumulative counts of the column's ``values`` (consistent when asked)."""
        n = int(_values(values).shape[0])
        noisy = self.noisy_cumulative(values)
        return CumulativeRelease(self.edges, tuple(int(v) for v in self.postprocess(noisy, n)), n)

    def postprocess(self, noisy: np.ndarray, n: int) -> np.ndarray:
        """Consistency (a function of the noisy output and n only: free of privacy cost)."""
        if not self.consistent:
            return np.asarray(noisy, dtype=np.int64)
        fit = np.clip(isotonic_increasing(noisy), 0, n)
        return np.floor(fit + 0.5).astype(np.int64)

    def accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """Half-width of one range count: 2·h(alpha/2), h the per-count half-width."""
        return float(2 * self._halfwidth(as_alpha(alpha) / 2))

    def simultaneous_accuracy(self, alpha: object = Fraction(1, 20)) -> float:
        """One half-width for every range count at once (union bound over the m-1 counts;
        consistency does not increase the largest error)."""
        return float(2 * self._halfwidth(as_alpha(alpha) / len(self.edges)))

    def range_error_std(self) -> float:
        """Standard deviation of one range count before post-processing (√2 noise std)."""
        if not self.sensitivity:
            return 0.0
        a = math.exp(-1 / float(self.scale))
        return math.sqrt(2) * math.sqrt(2 * a) / (1 - a)
