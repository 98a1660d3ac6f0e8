"""Optimal full-domain generalization: the Flash algorithm over the generalization lattice.

Flash (Kohlmayer, Prasser, Eckert, Kemper & Kuhn 2012, as implemented in ARX) walks the
lattice level by level from the bottom. From each unresolved node it builds a path upwards,
always taking the successor preferred by its strategy, and binary-searches that path for the
lowest acceptable node; every checked node *tags* others by monotonicity (an acceptable node
makes its whole up-set acceptable, an unacceptable one its down-set unacceptable), so most
nodes are never checked. When the utility metric is not monotone (e.g. ARX's loss with a
suppression limit), a second, depth-first phase scores the acceptable nodes above each
binary-search result, and nodes are *pruned* as soon as a lower bound of their loss (their
loss ignoring suppression, which can only grow with generalization) cannot beat the best
node found.

The traversal follows ARX's six configurations (privacy model fully / partially / not
monotone × metric monotone or not), its strategy (level, then average relative height, then
share of distinct values kept) and its tie rule (equal loss: the lower level sum wins, then
the node found first), so that it returns the same optimum as ARX's Flash. It returns the
true optimum for the metric: a node is only skipped when monotonicity proves it unacceptable
or its lower bound proves it cannot be better.

>>> from statcurator.anonymize.search import prepare
>>> from statcurator.anonymize.criteria import KAnonymity
>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, HierarchySpec, TableMeta
>>> meta = TableMeta("t", (Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),))
>>> table = pa.table({"zip": ["123", "124", "125", "133"]})
>>> problem = prepare(table, meta, [KAnonymity(2)], suppression=0, metric="loss")
>>> best, lattice = flash(problem)
>>> best.levels, best.classes, lattice.counts()["checked"]
((2,), 1, 2)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .lattice import DOWN, NONE, UP, Lattice

if TYPE_CHECKING:
    from ._engine import NodeResult
    from .search import Problem

__all__ = ["flash", "privacy_monotonicity", "Flash"]

Node = tuple[int, ...]


def privacy_monotonicity(criteria: Sequence[Any], suppression: bool) -> str:
    """``"full"``, ``"partial"`` (only the minimal class size is monotone) or ``"none"``.

    Without suppression a criterion needs to be monotone under generalization; with a
    suppression limit also under suppression.
    """
    min_size = any(c.min_class_size for c in criteria)
    for c in criteria:
        ok = c.monotone_generalization and (c.monotone_suppression or not suppression)
        if not ok:
            return "partial" if min_size else "none"
    return "full"


class _JavaHeap:
    """A binary heap with the exact sift rules of ``java.util.PriorityQueue``.

    Nodes that compare equal under the strategy leave the queue in the order these rules
    give, which decides between equally good generalizations just as ARX does.
    """

    def __init__(self, cmp: Callable[[Node, Node], int]) -> None:
        self.q: list[Node] = []
        self.cmp = cmp

    def add(self, x: Node) -> None:
        q = self.q
        q.append(x)
        k = len(q) - 1
        while k > 0:
            parent = (k - 1) >> 1
            if self.cmp(x, q[parent]) >= 0:
                break
            q[k] = q[parent]
            k = parent
        q[k] = x

    def poll(self) -> Node:
        q = self.q
        result = q[0]
        x = q.pop()
        n = len(q)
        if n:
            k, half = 0, n >> 1
            while k < half:
                child = 2 * k + 1
                c = q[child]
                right = child + 1
                if right < n and self.cmp(c, q[right]) > 0:
                    child = right
                    c = q[child]
                if self.cmp(x, c) <= 0:
                    break
                q[k] = c
                k = child
            q[k] = x
        return result

    def __bool__(self) -> bool:
        return bool(self.q)


@dataclass
class _Phase:
    """One of Flash's two phases: which nodes it skips, checks and how it tags them.

    A node is skipped when it has any property in ``skip`` (or is pruned by a bound); it is
    checked when not skipped and, if ``check`` is given, has none of those properties.
    """

    anonymity: str                      # property that ends a binary search: anonymous / k_anonymous
    skip: tuple[str, ...]
    tag: Callable[[Node], None]
    check: tuple[str, ...] | None = None


class Flash:
    """One run of Flash on a prepared problem (see :func:`flash`)."""

    def __init__(self, problem: Problem, lattice: Lattice | None = None,
                 progress: Callable[[float], None] | None = None,
                 privacy: str | None = None, utility_monotone: bool | None = None,
                 bounds_before_check: bool = True) -> None:
        self.problem = problem
        self.evaluator = problem.evaluator
        self.objective = problem.objective
        enc = problem.encoded
        self.lattice = lattice if lattice is not None else \
            Lattice(enc.qi, tuple(h.levels for h in enc.hierarchies))
        suppression = problem.limit > 0
        self.privacy = privacy or privacy_monotonicity(problem.criteria, suppression)
        self.utility_monotone = self.objective.monotone(suppression) \
            if utility_monotone is None else utility_monotone
        self.progress = progress
        self.best: Node | None = None
        self.best_value = np.inf
        self._results: dict[Node, NodeResult] = {}
        self._candidates: list[Node] | None = None
        self._succ: dict[Node, list[Node]] = {}
        self._init_strategy([enc.distinct_per_level(d) for d in range(enc.dims)])
        self._configure()
        # Lower bounds known before a node is checked prune more nodes. ARX knows them only
        # for its precision metric; `bounds_before_check=False` reproduces ARX step by step.
        self.bounds = None
        if bounds_before_check or self.objective.arx_node_bound:
            self.bounds = self.objective.bounds(enc, self.lattice.shape)
            if self.bounds is not None:
                self.lattice.bound[...] = self.bounds
        # an unacceptable node may be decided without its classes unless pruning needs a
        # lower bound that only its classes give (DM, AECS)
        self.evaluator.shortcuts = not (self.prune_with_bounds
                                        and self.objective.bound_needs_classes)

    # -- strategy ---------------------------------------------------------------------------
    def _init_strategy(self, distinct: list[list[int]]) -> None:
        memo = self.problem.encoded.memo
        key = ("flash-strategy", self.lattice.shape)
        if key not in memo:
            memo[key] = self._strategy(distinct)
        self._rank, self._levels = memo[key]

    def _strategy(self, distinct: list[list[int]]) -> tuple[np.ndarray, list[np.ndarray]]:
        shape = self.lattice.shape
        tops = [s - 1 for s in shape]
        idx = np.indices(shape)
        level = idx.sum(axis=0)
        maxlevel = max(sum(tops), 1)
        dd = np.zeros(shape)
        prec = np.zeros(shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            # the same floating-point operations, in the same order, as ARX's FLASHStrategy
            for i in range(len(shape)):
                ratio = np.asarray(distinct[i], dtype=np.float64) / float(distinct[i][0])
                dd = dd + ratio[idx[i]]
                prec = prec + idx[i] / np.float64(tops[i])
        dd = 1.0 - dd / len(shape)
        prec = prec / len(shape)
        use_prec = not np.isnan(prec).any()
        # Java compares the three doubles in turn; a dense rank of the triples compares alike
        # (NaN, from a QI with a single level, compares as equal in Java: leave it out)
        crit = [(level / maxlevel).ravel()] + ([prec.ravel()] if use_prec else []) + [dd.ravel()]
        by = np.lexsort(crit[::-1])
        triples = np.stack([c[by] for c in crit], axis=1)
        new = np.ones(len(by), dtype=bool)
        new[1:] = (triples[1:] != triples[:-1]).any(axis=1)
        rank = np.empty(len(by), dtype=np.int64)
        rank[by] = np.cumsum(new) - 1
        rank = rank.reshape(shape)
        jhpl = np.ravel_multi_index(tuple(idx[::-1]), shape[::-1])  # JHPL's node order
        keys = [jhpl.ravel(), dd.ravel()] + ([prec.ravel()] if use_prec else []) + [level.ravel()]
        order = np.lexsort(keys)
        levels = level.ravel()[order]
        coords = np.stack([i.ravel()[order] for i in idx], axis=1)
        bounds = np.searchsorted(levels, np.arange(sum(tops) + 2))
        return rank, [coords[bounds[lv]:bounds[lv + 1]] for lv in range(sum(tops) + 1)]

    def _cmp(self, a: Node, b: Node) -> int:
        x, y = self._rank[a], self._rank[b]
        return -1 if x < y else (1 if x > y else 0)

    def sorted_successors(self, node: Node) -> list[Node]:
        s = self._succ.get(node)
        if s is None:
            rank = self._rank
            s = sorted(self.lattice.successors(node), key=lambda n: rank[n])  # stable
            self._succ[node] = s
        return s

    # -- configuration ----------------------------------------------------------------------
    def _configure(self) -> None:
        lat = self.lattice
        has = lat.has
        full_full = self.privacy == "full" and self.utility_monotone
        full_none = self.privacy == "full" and not self.utility_monotone
        # ARX turns predictive tagging of anonymity on only for the fully monotone cases
        predictable = full_full or full_none
        lat.define("anonymous", UP if predictable else NONE)
        lat.define("not_anonymous", DOWN if predictable else NONE)
        lat.define("k_anonymous", UP)
        lat.define("not_k_anonymous", DOWN)
        lat.define("checked", NONE)
        lat.define("visited", NONE)
        lat.define("pruned", UP)               # ARX: insufficient utility
        lat.define("successors_pruned", UP)
        self.prune_with_bounds = not full_full
        if self.prune_with_bounds:
            self._candidates = []

        def nothing(n: Node) -> None:
            return None

        def visit(n: Node) -> None:
            lat.set("visited", n)

        def prune_above(n: Node) -> None:
            if has("anonymous", n):
                for succ in lat.successors(n):
                    lat.set("pruned", succ)
                lat.set("successors_pruned", n)

        def visit_and_prune_above(n: Node) -> None:
            lat.set("visited", n)
            prune_above(n)

        def mark_successors(n: Node) -> None:
            if has("anonymous", n):
                lat.set("successors_pruned", n)

        known = ("anonymous", "not_anonymous")
        known_k = ("k_anonymous", "not_k_anonymous")
        self.binary: _Phase | None = None
        self.linear: _Phase | None = None
        if full_full:
            self.binary = _Phase("anonymous", known, mark_successors)
        elif full_none:
            self.binary = _Phase("anonymous", known, nothing)
            self.linear = _Phase("anonymous", ("not_anonymous", "visited"), visit,
                                 check=("checked", "not_anonymous"))
        elif self.privacy == "none":
            if self.utility_monotone:
                self.linear = _Phase("anonymous", known + ("pruned",), prune_above)
            else:
                self.linear = _Phase("anonymous", known, nothing)
        elif self.utility_monotone:  # partial / monotone metric
            self.binary = _Phase("k_anonymous", known_k + ("pruned",), prune_above)
            self.linear = _Phase("anonymous", ("visited", "not_k_anonymous", "pruned"),
                                 visit_and_prune_above,
                                 check=("visited", "not_k_anonymous", "pruned", "checked"))
        else:  # partial / non-monotone metric
            self.binary = _Phase("k_anonymous", known_k, nothing)
            self.linear = _Phase("anonymous", ("visited", "not_k_anonymous"), visit,
                                 check=("checked", "not_k_anonymous"))
        self._arrays = lat.arrays

    # -- the traversal ----------------------------------------------------------------------
    def run(self) -> Node | None:
        outer = self.binary if self.binary is not None else self.linear
        assert outer is not None
        for coords in self._levels:
            # vectorized first pass over the properties, then the full test (which may prune)
            known = np.zeros(len(coords), dtype=bool)
            index = tuple(coords.T)
            for name in outer.skip:
                known |= self._arrays[name][index]
            todo = [n for n in map(tuple, coords[~known].tolist()) if not self._skip(outer, n)]
            for node in todo:
                if self.binary is not None:
                    self._binary_search(node)
                else:
                    self._linear_search(node)
        self.lattice.optimum = self.best
        return self.best

    def _skip(self, phase: _Phase, n: Node) -> bool:
        arrays = self._arrays
        for name in phase.skip:
            if arrays[name][n]:
                return True
        if not self.prune_with_bounds or self.best is None:
            return False
        lat = self.lattice
        if arrays["pruned"][n]:
            return True
        bound = self._bound(n)
        if bound is not None and self.best_value <= bound:
            lat.set("pruned", n)
            lat.set("successors_pruned", n)
            return True
        return False

    def _bound(self, n: Node) -> float | None:
        b = self.lattice.bound[n]
        return None if np.isnan(b) else float(b)

    def _check(self, n: Node) -> None:
        lat = self.lattice
        res = self.evaluator.evaluate(n)
        self._results[n] = res
        lat.record(res)
        if self.bounds is not None:
            lat.bound[n] = self.bounds[n]
        lat.set("checked", n)
        lat.set("anonymous" if res.anonymous else "not_anonymous", n)
        if res.k_anonymous is not None:
            lat.set("k_anonymous" if res.k_anonymous else "not_k_anonymous", n)
        if self.progress is not None and len(lat.checked) % 16 == 0:
            self.progress(self.resolved())

    def resolved(self) -> float:
        """Share of nodes whose fate is known (checked, tagged or pruned)."""
        lat = self.lattice
        known = lat.mask("anonymous") | lat.mask("not_anonymous") | lat.mask("pruned") \
            | lat.mask("checked")
        if self.privacy != "full":
            known = known | lat.mask("not_k_anonymous")
        return float(known.mean())

    def _check_and_tag(self, n: Node, phase: _Phase) -> None:
        if phase.check is None:
            self._check(n)  # called only for nodes the phase does not skip
        elif not any(self._arrays[name][n] for name in phase.check):
            self._check(n)
        self._track(n)
        phase.tag(n)
        self._prune(n)

    def _track(self, n: Node) -> None:
        res = self._results.get(n)
        if res is None or not self.lattice.has("anonymous", n):
            return
        if self.best is None or res.value < self.best_value or (
                res.value == self.best_value and sum(n) < sum(self.best)):
            self.best = n
            self.best_value = res.value

    def _prune(self, n: Node) -> None:
        if self._candidates is None:
            return
        bound = self._bound(n)
        if bound is None:
            return
        lat = self.lattice
        if n != self.best and lat.has("successors_pruned", n):
            return
        if self.best is None:
            self._candidates.append(n)
            return
        if n != self.best:
            if self.best_value <= bound:
                lat.set("pruned", n)
                lat.set("successors_pruned", n)
            else:
                self._candidates.append(n)
            return
        keep = []
        for c in self._candidates:
            if lat.has("successors_pruned", c):
                continue
            cb = self._bound(c)
            if cb is not None and self.best_value <= cb:
                lat.set("pruned", c)
                lat.set("successors_pruned", c)
                continue
            keep.append(c)
        self._candidates = keep
        if not lat.has("successors_pruned", n):
            self._candidates.append(n)

    def _binary_search(self, start: Node) -> None:
        assert self.binary is not None
        phase = self.binary
        queue = _JavaHeap(self._cmp)
        queue.add(start)
        while queue:
            node = queue.poll()
            if self._skip(phase, node):
                continue
            path = [node]
            current = node
            while True:
                for s in self.sorted_successors(current):
                    if not self._skip(phase, s):
                        current = s
                        path.append(s)
                        break
                else:
                    break
            found = self._check_path(path, queue)
            if self.linear is not None and found is not None:
                self._linear_search(found)

    def _check_path(self, path: list[Node], queue: _JavaHeap) -> Node | None:
        assert self.binary is not None
        phase = self.binary
        low, high = 0, len(path) - 1
        last = None
        while low <= high:
            mid = (low + high) // 2
            node = path[mid]
            if not self._skip(phase, node):
                self._check_and_tag(node, phase)
                good = self.lattice.has(phase.anonymity, node)
                if not good:
                    for up in self.sorted_successors(node):
                        if not self._skip(phase, up):
                            queue.add(up)
                if good:
                    last = node
                    high = mid - 1
                else:
                    low = mid + 1
            else:
                high = mid - 1
        return last

    def _linear_search(self, node: Node) -> None:
        assert self.linear is not None
        phase = self.linear
        if not self._skip(phase, node):
            self._check_and_tag(node, phase)
            for child in self.sorted_successors(node):
                if not self._skip(phase, child):
                    self._linear_search(child)
        self.lattice.set("successors_pruned", node)

    def result(self, node: Node) -> NodeResult:
        res = self._results.get(node)
        if res is None:
            res = self.evaluator.evaluate(node)
            self._results[node] = res
        return res


    def may_have_ties(self) -> bool:
        """Could another node be as good as the optimum? (Then ARX's tie rules decide.)

        Pruning with bounds known before a check may skip a node whose loss *equals* the best
        one, where ARX would have checked it; only then can the two traversals disagree.
        """
        if self.best is None or not self.prune_with_bounds:
            return False
        lat = self.lattice
        b = self.best_value
        checked = lat.result >= 0
        same = checked & (lat.result == 1) & (lat.value == b)
        same[self.best] = False
        if same.any():
            return True
        open_ = ~checked & ~lat.mask("not_anonymous") & ~lat.mask("not_k_anonymous")
        bound = lat.bound
        return bool((open_ & ~(bound > b)).any())


def flash(problem: Problem, progress: Callable[[float], None] | None = None,
          arx_ties: bool = True) -> tuple[NodeResult | None, Lattice]:
    """Run Flash on a prepared problem; returns the optimal node's result (or ``None`` if no
    generalization is acceptable) and the lattice with everything the search learned.

    The search prunes with lower bounds known before checking a node, which ARX does not; if
    that leaves a node possibly tied with the optimum and ``arx_ties`` is true, the search is
    re-run exactly as ARX does it, so that ties are broken the same way.
    """
    f = Flash(problem, progress=progress)
    best = f.run()
    if arx_ties and f.may_have_ties():
        f = Flash(problem, progress=progress, bounds_before_check=False)
        best = f.run()
    lattice = f.lattice
    lattice.set_resolver(functools.partial(_resolve, problem))
    return (f.result(best) if best is not None else None), lattice


def _resolve(problem: Problem, lattice: Lattice) -> None:
    """Decide the acceptability of every node the search left open (for ``minimal``).

    With fully monotone criteria a second Flash pass in its monotone configuration tags the
    rest of the lattice cheaply; otherwise every open node is checked.
    """
    mono = privacy_monotonicity(problem.criteria, problem.limit > 0) == "full"
    known = lattice.result >= 0
    if mono:
        side = Lattice(lattice.qi, lattice.shape)
        f = Flash(problem, lattice=side, privacy="full", utility_monotone=True)
        for node in lattice.checked:
            side.result[node] = lattice.result[node]
            side.set("anonymous" if lattice.result[node] == 1 else "not_anonymous", node)
        f.run()
        for node in side.checked:
            if not known[node]:
                lattice.record(f.result(node))
        lattice.merge("anonymous", side.mask("anonymous"))
        lattice.merge("not_anonymous", side.mask("not_anonymous"))
        return
    for node in lattice.nodes():
        if lattice.result[node] < 0:
            lattice.record(problem.evaluator.evaluate(node))
