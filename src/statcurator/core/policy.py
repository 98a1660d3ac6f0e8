"""Blowfish privacy policies: the secrets of one column as a discriminative graph.

Blowfish privacy (He, Machanavajjhala & Ding, SIGMOD 2014) refines differential privacy with
a *policy*: which pairs of values of an individual's record must be indistinguishable (the
*discriminative secret graph* G over the domain), and which facts about the data are known
publicly (constraints). Two datasets are **policy neighbours** when they have the same
individuals and differ in one individual's value, changed from ``x`` to ``y`` along an edge
``(x, y)`` of G. A mechanism is ε-Blowfish-private when, for all policy neighbours D, D' and
every output set S, ``P[M(D) ∈ S] <= e^ε · P[M(D') ∈ S]``.

Three graphs are supported, each over one column's domain:

* :meth:`Policy.complete` — every two values are neighbours: bounded (change-one) ε-DP;
* :meth:`Policy.threshold` — on an ordered (numeric) domain, values within distance θ are
  neighbours. An adversary cannot tell a value from one within ±θ, but *can* tell values far
  apart: ages 40 and 41 are secret under θ = 1 (the line graph on the integers), 40 against
  60 only at 20·ε (the graph distance ⌈20/θ⌉ times ε);
* :meth:`Policy.partition` — values in the same block are neighbours: which value inside a
  block is secret, which block is not (a value's block is public).

Only policies **without public constraints** are supported (Blowfish's ``I_n``: any dataset of
the public size is possible); a policy given constraints is refused.

The sensitivities under a policy are the largest change of a query over one edge of G
(policy-specific global sensitivity): :meth:`Policy.histogram_sensitivity`,
:meth:`Policy.cumulative_sensitivity`, :meth:`Policy.sum_sensitivity`,
:meth:`Policy.cell_sums_sensitivity`. For the complete graph they are the plain bounded-DP
sensitivities.

>>> line = Policy.threshold(1)
>>> line.neighbours(40, 41), line.neighbours(40, 42), line.graph_distance(40, 60)
(True, False, 20)
>>> line.sum_sensitivity(0, 120), Policy.complete().sum_sensitivity(0, 120)
(Fraction(1, 1), Fraction(120, 1))
>>> line.cumulative_sensitivity(range(1, 121))      # 120 unit bins: one count moves
Fraction(1, 1)
>>> Policy.partition([["flu", "cold"], ["cancer"]]).neighbours("flu", "cancer")
False
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .errors import DataError, InvalidParameterError, MetadataError
from .numbers import ceil_fraction, exact, exact_value
from .relations import Relation, rows_of

__all__ = ["Policy", "PolicyNeighbours", "GRAPHS"]

#: the discriminative graphs supported, by their metadata names
GRAPHS = ("complete", "threshold", "partition")

_ALIASES = {"complete": "complete", "full": "complete", "dp": "complete",
            "threshold": "threshold", "distance-threshold": "threshold",
            "distance_threshold": "threshold", "line": "threshold",
            "partition": "partition"}


def _number(x: object, what: str) -> Fraction:
    try:
        return exact_value(x, what)
    except (DataError, InvalidParameterError):
        raise DataError(f"{what} {x!r} is not a finite number",
                        remedy="a distance-threshold policy needs a numeric column") from None


@dataclass(frozen=True)
class Policy:
    """A Blowfish policy on one column: the discriminative secret graph, no constraints.

    Build it with :meth:`complete`, :meth:`threshold` (``line`` is θ = 1), :meth:`partition`,
    or :meth:`from_spec` (the dataset-metadata form). ``constraints`` must be empty: policies
    with public constraints (known marginals) are not supported.

    >>> Policy.threshold(5)
    Policy(graph='threshold', theta=Fraction(5, 1), blocks=None, constraints=())
    >>> Policy.complete().neighbours("a", "b")
    True
    >>> Policy.threshold(5, constraints=["marginal of age"])
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: Blowfish policies with public constraints are not supported (got ['marginal of age']); drop the constraints: only the policy's secret graph (no known marginals or counts) is supported
    """

    graph: str
    theta: Fraction | None = None
    blocks: tuple[tuple[Hashable, ...], ...] | None = None
    constraints: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.constraints:
            raise InvalidParameterError(
                f"Blowfish policies with public constraints are not supported "
                f"(got {list(self.constraints)})",
                remedy="drop the constraints: only the policy's secret graph (no known "
                       "marginals or counts) is supported")
        if str(self.graph).strip().lower() == "line" and self.theta is None:
            object.__setattr__(self, "theta", Fraction(1))
        graph = _ALIASES.get(str(self.graph).strip().lower())
        if graph is None:
            raise InvalidParameterError(f"unknown policy graph {self.graph!r}",
                                        remedy="use one of: " + ", ".join(GRAPHS))
        object.__setattr__(self, "graph", graph)
        if graph == "threshold":
            if self.theta is None:
                raise InvalidParameterError("a distance-threshold policy needs theta",
                                            remedy="pass theta=1 (the line graph) or larger")
            object.__setattr__(self, "theta", exact(self.theta, "theta"))
        elif self.theta is not None:
            raise InvalidParameterError(f"theta is only for the threshold graph, not {graph}",
                                        remedy="drop theta, or use graph='threshold'")
        if graph == "partition":
            object.__setattr__(self, "blocks", self._checked_blocks(self.blocks))
        elif self.blocks is not None:
            raise InvalidParameterError(f"blocks are only for the partition graph, not {graph}",
                                        remedy="drop blocks, or use graph='partition'")

    @staticmethod
    def _checked_blocks(blocks: object) -> tuple[tuple[Hashable, ...], ...]:
        remedy = 'pass blocks=[["flu", "cold"], ["cancer"]] (each value in one block)'
        if blocks is None or isinstance(blocks, str | bytes) or not isinstance(blocks, Iterable):
            raise InvalidParameterError("a partition policy needs a list of blocks",
                                        remedy=remedy)
        out: list[tuple[Hashable, ...]] = []
        seen: set[Hashable] = set()
        for block in blocks:
            if isinstance(block, str | bytes) or not isinstance(block, Iterable):
                raise InvalidParameterError(f"a partition block must be a list, got {block!r}",
                                            remedy=remedy)
            values = tuple(block)
            if not values:
                raise InvalidParameterError("a partition block is empty", remedy=remedy)
            for v in values:
                try:
                    hash(v)
                except TypeError:
                    raise InvalidParameterError(f"a partition value must be a scalar, got {v!r}",
                                                remedy=remedy) from None
                if v in seen:
                    raise InvalidParameterError(f"value {v!r} is in two partition blocks",
                                                remedy=remedy)
                seen.add(v)
            out.append(values)
        if not out:
            raise InvalidParameterError("a partition policy needs at least one block",
                                        remedy=remedy)
        return tuple(out)

    # -- constructors ---------------------------------------------------------------------
    @classmethod
    def complete(cls) -> Policy:
        """The complete graph: every pair of values is a secret (bounded ε-DP)."""
        return cls("complete")

    @classmethod
    def threshold(cls, theta: object, *, constraints: Sequence[Any] = ()) -> Policy:
        """The distance-threshold graph: values within ``theta`` of each other are secrets."""
        return cls("threshold", theta=theta, constraints=tuple(constraints))  # type: ignore[arg-type]

    @classmethod
    def line(cls) -> Policy:
        """The line graph on the integers: θ = 1 (each value is hidden among its neighbours)."""
        return cls.threshold(1)

    @classmethod
    def partition(cls, blocks: Iterable[Iterable[Hashable]]) -> Policy:
        """The partition graph: values in one block are secrets; a value's block is public."""
        return cls("partition", blocks=blocks)  # type: ignore[arg-type]

    @classmethod
    def from_spec(cls, spec: object, column: str = "?") -> Policy:
        """A policy from its metadata form (a TOML inline table).

        >>> Policy.from_spec({"graph": "threshold", "theta": 5}).theta
        Fraction(5, 1)
        >>> Policy.from_spec({"graph": "partition", "blocks": [[1, 2], [3]]}).blocks
        ((1, 2), (3,))
        >>> Policy.from_spec({"graph": "threshold", "theta": 5, "constraints": ["n"]}, "age")
        Traceback (most recent call last):
        ...
        statcurator.core.errors.MetadataError: column 'age': policies with public constraints are not supported; remove constraints from the policy (only the secret graph is supported)
        """
        if isinstance(spec, str):
            spec = {"graph": spec}
        if not isinstance(spec, Mapping):
            raise MetadataError(f"column {column!r}: policy must be a table",
                                remedy='write policy = { graph = "threshold", theta = 5 }')
        extra = set(spec) - {"graph", "theta", "blocks", "constraints"}
        if extra:
            raise MetadataError(f"column {column!r}: unknown policy key(s) {sorted(extra)}",
                                remedy="use graph, theta (threshold) or blocks (partition)")
        if spec.get("constraints"):
            raise MetadataError(f"column {column!r}: policies with public constraints are not "
                                "supported",
                                remedy="remove constraints from the policy (only the secret "
                                       "graph is supported)")
        if "graph" not in spec:
            raise MetadataError(f"column {column!r}: the policy names no graph",
                                remedy='write graph = "complete", "threshold" or "partition"')
        theta = spec.get("theta")
        if isinstance(theta, str):
            theta = exact(theta, "theta", strings=True)
        blocks = spec.get("blocks")
        if blocks is not None:
            blocks = [tuple(b) if isinstance(b, list | tuple) else b for b in blocks]
        try:
            return cls(str(spec["graph"]), theta=theta, blocks=blocks)  # type: ignore[arg-type]
        except InvalidParameterError as e:
            raise MetadataError(f"column {column!r}: {e.problem}", remedy=e.remedy) from None

    def to_spec(self) -> dict[str, Any]:
        """The metadata form (inverse of :meth:`from_spec`); θ is an int, a float that
        reads back exactly, or a "p/q" string.

        >>> Policy.threshold(Fraction(1, 3)).to_spec()
        {'graph': 'threshold', 'theta': '1/3'}
        """
        out: dict[str, Any] = {"graph": self.graph}
        if self.theta is not None:
            t = self.theta
            if t.denominator == 1:
                out["theta"] = t.numerator
            elif Fraction(repr(float(t))) == t:
                out["theta"] = float(t)
            else:
                out["theta"] = f"{t.numerator}/{t.denominator}"
        if self.blocks is not None:
            out["blocks"] = [list(b) for b in self.blocks]
        return out

    # -- the graph ------------------------------------------------------------------------
    def _block_of(self, x: Hashable) -> int | None:
        assert self.blocks is not None
        for i, block in enumerate(self.blocks):
            if x in block:
                return i
        return None

    def neighbours(self, x: Hashable, y: Hashable) -> bool:
        """True when ``(x, y)`` is an edge of the secret graph (x != y): a dataset where one
        individual's value is x must look like the one where it is y.

        Under a partition, a value in no block is an isolated vertex (not a secret at all).

        >>> Policy.threshold(5).neighbours(10, 15), Policy.threshold(5).neighbours(10, 15.5)
        (True, False)
        """
        return self.graph_distance(x, y) == 1

    def graph_distance(self, x: Hashable, y: Hashable) -> int | float:
        """The number of edges on a shortest path from x to y (0 when equal, ∞ when none):
        a mechanism ε-private under the policy protects the pair at graph_distance·ε.

        >>> Policy.threshold(5).graph_distance(0, 11), Policy.complete().graph_distance(0, 11)
        (3, 1)
        >>> Policy.partition([[1, 2], [3]]).graph_distance(1, 3)
        inf
        """
        if self.graph == "threshold":
            assert self.theta is not None
            gap = abs(_number(x, "value") - _number(y, "value"))
            return ceil_fraction(gap / self.theta)
        if x == y:
            return 0
        if self.graph == "complete":
            return 1
        bx, by = self._block_of(x), self._block_of(y)
        return 1 if bx is not None and bx == by else math.inf

    def relation(self) -> PolicyNeighbours:
        """The neighbour relation on datasets of this column's values."""
        return PolicyNeighbours(self)

    # -- policy-specific sensitivities ----------------------------------------------------
    def _numeric_blocks(self) -> list[tuple[Fraction, Fraction]]:
        assert self.blocks is not None
        return [(min(vals), max(vals)) for vals in
                ([_number(v, "partition value") for v in b] for b in self.blocks)]

    def histogram_sensitivity(self, *, bins: Sequence[Iterable[Hashable]] | None = None,
                              edges: Sequence[object] | None = None) -> Fraction:
        """L1 sensitivity of a histogram: 2 when some edge of the graph has its ends in
        different bins (one count -1, another +1), 0 when every edge stays inside one bin
        (the histogram is then public under the policy).

        ``bins`` are the bins as collections of values (every value of the domain in one
        bin); ``edges`` the interior cut points of numeric bins [e_{j-1}, e_j).

        >>> Policy.partition([["flu", "cold"], ["cancer"]]).histogram_sensitivity(
        ...     bins=[["flu", "cold"], ["cancer"]])
        Fraction(0, 1)
        >>> Policy.threshold(1).histogram_sensitivity(edges=[10, 20])
        Fraction(2, 1)
        """
        if (bins is None) == (edges is None):
            raise InvalidParameterError("pass exactly one of bins= or edges=",
                                        remedy="bins for categorical values, edges for numbers")
        if edges is not None:
            cuts = sorted({_number(e, "bin edge") for e in edges})
            if not cuts:
                return Fraction(0)
            if self.graph != "partition":
                # intervals touch: a value just below a cut and the cut itself are within any
                # θ > 0 (and neighbours in the complete graph)
                return Fraction(2)
            crosses = any(lo < c <= hi for lo, hi in self._numeric_blocks() for c in cuts)
            return Fraction(2 if crosses else 0)
        assert bins is not None
        groups = [list(b) for b in bins]
        where: dict[Hashable, int] = {}
        for i, group in enumerate(groups):
            for v in group:
                if v in where:
                    raise InvalidParameterError(f"value {v!r} is in two bins",
                                                remedy="give each value one bin")
                where[v] = i
        if self.graph == "partition":
            assert self.blocks is not None
            for block in self.blocks:
                if len({where.get(v, -1) for v in block}) > 1:
                    return Fraction(2)
            return Fraction(0)
        nonempty = [g for g in groups if g]
        if len(nonempty) < 2:
            return Fraction(0)
        if self.graph == "complete":
            return Fraction(2)
        values = sorted((_number(v, "bin value"), i) for v, i in where.items())
        assert self.theta is not None
        for (a, i), (b, j) in zip(values, values[1:], strict=False):
            if i != j and b - a <= self.theta:
                return Fraction(2)
        # the domain is the listed values: if some pair within θ lies in two bins, so does a
        # pair of consecutive values between them (checked above)
        return Fraction(0)

    def cumulative_sensitivity(self, edges: Iterable[object]) -> Fraction:
        """L1 sensitivity of the cumulative counts C_j = #(x < e_j) at the cut points
        ``edges`` (the ordered mechanism's vector). Changing x to y moves exactly the counts
        whose cut lies in (min(x, y), max(x, y)], each by 1, so the sensitivity is the most
        cuts one edge of the graph can straddle:

        * threshold θ: the most cuts in a half-open window of length θ (θ for unit-width
          bins on the integers, 1 when bins are at least θ wide);
        * complete: every cut (the number of interior edges, = domain size - 1 for unit
          bins): plain bounded DP;
        * partition: the most cuts inside one block's range.

        >>> Policy.threshold(5).cumulative_sensitivity(range(1, 101))
        Fraction(5, 1)
        >>> Policy.threshold(5).cumulative_sensitivity(range(0, 100, 10))
        Fraction(1, 1)
        >>> Policy.complete().cumulative_sensitivity(range(1, 101))
        Fraction(100, 1)
        """
        cuts = sorted({_number(e, "cut point") for e in edges})
        if not cuts:
            return Fraction(0)
        if self.graph == "complete":
            return Fraction(len(cuts))
        if self.graph == "partition":
            return Fraction(max(sum(1 for c in cuts if lo < c <= hi)
                                for lo, hi in self._numeric_blocks()))
        assert self.theta is not None
        # cuts e_i..e_j fit in some (x, x + θ] exactly when e_j - e_i < θ
        best, i = 0, 0
        for j, c in enumerate(cuts):
            while c - cuts[i] >= self.theta:
                i += 1
            best = max(best, j - i + 1)
        return Fraction(best)

    def sum_sensitivity(self, lower: object, upper: object) -> Fraction:
        """Sensitivity of the sum of a column clamped to [lower, upper]: the longest edge of
        the graph after clamping (clamping is 1-Lipschitz): θ (at most upper - lower) under
        a threshold, upper - lower for the complete graph (plain bounded DP), the widest
        block's clamped range under a partition.

        >>> Policy.threshold(5).sum_sensitivity(0, 100), Policy.complete().sum_sensitivity(0, 100)
        (Fraction(5, 1), Fraction(100, 1))
        """
        lo = exact(lower, "lower bound", positive=False)
        hi = exact(upper, "upper bound", positive=False)
        if lo > hi:
            raise InvalidParameterError(f"the bounds [{lo}, {hi}] are reversed",
                                        remedy="pass lower <= upper")
        if self.graph == "complete":
            return hi - lo
        if self.graph == "threshold":
            assert self.theta is not None
            return min(self.theta, hi - lo)
        widths = [min(b, hi) - max(a, lo) for a, b in self._numeric_blocks()]
        return max([Fraction(0), *widths])

    def cell_sums_sensitivity(self, lower: object, upper: object) -> Fraction:
        """L1 sensitivity of the *cell sums* of a 1-d clustering with cells
        [b_0, b_1), [b_1, b_2), …, [b_{k-1}, b_k] (b_0 = lower, b_k = upper):
        the vector A_i = Σ_x (clip(x, b_{i-1}, b_i) - b_{i-1}), i = 1..k.

        The cells tile [lower, upper], so Σ_i |clip_i(x) - clip_i(y)| = |clamp(x) - clamp(y)|
        for every pair of values: a change along one edge moves the whole vector by at most
        the edge's length — :meth:`sum_sensitivity`, θ per coordinate under a threshold,
        *even when the value changes cluster*. Plain per-cluster sums Σ_{x in cell i} x do
        not have this property: a value moving from one cluster to the next changes two
        sums by about |x| each, whatever θ (see PolicyKMeans, which releases these cell sums
        and recovers the per-cluster sums from them and the cumulative counts).

        >>> Policy.threshold(1).cell_sums_sensitivity(0, 120)
        Fraction(1, 1)
        """
        return self.sum_sensitivity(lower, upper)


@dataclass(frozen=True)
class PolicyNeighbours(Relation):
    """Blowfish neighbours under ``policy``: the same individuals, one value changed along
    one edge of the secret graph. Datasets are aligned sequences of one column's values
    (individual i is position i); ``distance`` counts the edges walked, summed over the
    individuals (∞ when sizes differ or a change crosses no path, e.g. between partition
    blocks).

    A policy step is a change-one step, hence at most two rows added and removed: a
    mechanism ε-DP under add/remove is 2ε-private under any policy.

    >>> rel = PolicyNeighbours(Policy.threshold(5))
    >>> rel.distance([30, 40, 50], [30, 44, 50]), rel.distance([30, 40, 50], [30, 52, 50])
    (1, 3)
    >>> rel.are_neighbours([30, 40], [35, 40]), rel.add_remove_distance(1)
    (True, Fraction(2, 1))
    """

    policy: Policy

    name = "Blowfish policy neighbours"

    def distance(self, d1: Any, d2: Any) -> int | float:
        a, b = rows_of(d1), rows_of(d2)
        if len(a) != len(b):
            return math.inf
        total: int | float = 0
        for x, y in zip(a, b, strict=True):
            total += self.policy.graph_distance(x, y)
        return total

    def add_remove_distance(self, d: object) -> Fraction:
        return 2 * exact(d, "distance", allow_zero=True)

    def __str__(self) -> str:
        p = self.policy
        detail = {"complete": "complete graph", "threshold": f"threshold θ={p.theta}",
                  "partition": f"partition into {len(p.blocks or ())} blocks"}[p.graph]
        return f"{self.name} ({detail})"
