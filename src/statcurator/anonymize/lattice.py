"""The generalization lattice of a full-domain search, kept for inspection.

A *node* is a tuple of levels, one per quasi-identifier; node ``a`` is below (more specific
than) ``b`` when every level of ``a`` is at most that of ``b``. The lattice records, for
every node, what the search learned: whether it was *checked* (its classes computed), its
anonymity (checked, or *tagged* by monotonicity from a checked node: above an acceptable
node everything is acceptable, below an unacceptable node everything is unacceptable, when
the criteria are monotone), whether it was *pruned* because a lower bound of its loss could
not beat the best node found, and the values it was scored with.

Properties are stored as boolean arrays shaped like the lattice, so tagging a node's whole
up-set or down-set is one slice assignment.

>>> lat = Lattice(("sex", "age"), (2, 3))
>>> lat.size, lat.top
(6, (1, 2))
>>> lat.tag_anonymous((0, 1)); lat.status((1, 2)), lat.status((0, 0))
('anonymous (tagged)', 'unknown')
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core.errors import InvalidParameterError

if TYPE_CHECKING:
    import pyarrow as pa

    from ._engine import NodeResult

__all__ = ["Lattice", "MAX_NODES"]

#: Lattices with more nodes than this are refused (use Mondrian, fewer QIs or coarser levels).
MAX_NODES = 20_000_000

UP, DOWN, NONE = "up", "down", "none"


class Lattice:
    """All generalizations of the quasi-identifiers and what a search learned about them."""

    def __init__(self, qi: Sequence[str], levels: Sequence[int]) -> None:
        self.qi = tuple(qi)
        self.shape = tuple(int(x) for x in levels)
        size = 1
        for x in self.shape:
            size *= x
        if size > MAX_NODES:
            raise InvalidParameterError(
                f"the generalization lattice has {size:,} nodes (levels per QI: "
                f"{dict(zip(self.qi, self.shape, strict=True))}), too many for the optimal search",
                remedy="use algorithm='mondrian', fewer quasi-identifiers, or hierarchies with "
                       "fewer levels")
        self.size = size
        self._props: dict[str, np.ndarray] = {}
        self._dirs: dict[str, str] = {}
        self.value = np.full(self.shape, np.nan)
        self.bound = np.full(self.shape, np.nan)
        self.suppressed = np.full(self.shape, -1, dtype=np.int64)
        self.classes = np.full(self.shape, -1, dtype=np.int64)
        self.result = np.full(self.shape, -1, dtype=np.int8)  # checked: 1 anonymous, 0 not
        self.checked: list[tuple[int, ...]] = []
        self.optimum: tuple[int, ...] | None = None
        self._minimal: list[tuple[int, ...]] | None = None
        self._resolver: Any = None
        self.define("anonymous", UP)
        self.define("not_anonymous", DOWN)
        self.define("pruned", UP)

    # -- geometry ---------------------------------------------------------------------------
    @property
    def bottom(self) -> tuple[int, ...]:
        return tuple(0 for _ in self.shape)

    @property
    def top(self) -> tuple[int, ...]:
        return tuple(x - 1 for x in self.shape)

    @property
    def height(self) -> int:
        """The level of the top node (sum of the hierarchies' heights)."""
        return sum(self.top)

    def successors(self, node: Sequence[int]) -> list[tuple[int, ...]]:
        """Nodes one level up, in QI order."""
        node = tuple(node)
        return [node[:i] + (node[i] + 1,) + node[i + 1:]
                for i in range(len(node)) if node[i] + 1 < self.shape[i]]

    def predecessors(self, node: Sequence[int]) -> list[tuple[int, ...]]:
        node = tuple(node)
        return [node[:i] + (node[i] - 1,) + node[i + 1:] for i in range(len(node)) if node[i] > 0]

    def nodes(self) -> Iterator[tuple[int, ...]]:
        """All nodes, in row-major order."""
        for flat in range(self.size):
            yield tuple(int(x) for x in np.unravel_index(flat, self.shape))

    def _check_node(self, node: Sequence[int]) -> tuple[int, ...]:
        node = tuple(int(x) for x in node)
        if len(node) != len(self.shape) or any(not 0 <= x < s for x, s in zip(node, self.shape,
                                                                               strict=True)):
            raise InvalidParameterError(
                f"{node} is not a node of this lattice (levels 0..{list(self.top)} for "
                f"{list(self.qi)})", remedy="give one level per quasi-identifier")
        return node

    # -- properties -------------------------------------------------------------------------
    def define(self, name: str, direction: str) -> None:
        """Declare a property; ``up``/``down`` properties spread to the up-/down-set when set."""
        self._props[name] = np.zeros(self.shape, dtype=bool)
        self._dirs[name] = direction

    def set(self, name: str, node: Sequence[int]) -> None:
        arr = self._props[name]
        node = tuple(node)
        if arr[node]:
            return  # set through this node or one below (up) / above (down): nothing new
        d = self._dirs[name]
        if d == UP:
            arr[tuple(slice(x, None) for x in node)] = True
        elif d == DOWN:
            arr[tuple(slice(0, x + 1) for x in node)] = True
        else:
            arr[tuple(node)] = True

    def has(self, name: str, node: Sequence[int]) -> bool:
        return bool(self._props[name][tuple(node)])

    def merge(self, name: str, mask: np.ndarray) -> None:
        """Set a property on every node of ``mask`` (results of another search pass)."""
        self._props[name] |= mask

    @property
    def arrays(self) -> dict[str, np.ndarray]:
        """The property arrays by name, writable: the search's working state (the optimal
        search tags whole up-/down-sets of nodes with vectorized writes)."""
        return self._props

    def set_resolver(self, resolver: Any) -> None:
        """The function that decides every open node when :attr:`minimal` needs them."""
        self._resolver = resolver

    def mask(self, name: str) -> np.ndarray:
        """The boolean array of a property (read-only view)."""
        v = self._props[name].view()
        v.setflags(write=False)
        return v

    def tag_anonymous(self, node: Sequence[int]) -> None:
        self.set("anonymous", node)

    def tag_not_anonymous(self, node: Sequence[int]) -> None:
        self.set("not_anonymous", node)

    def record(self, res: NodeResult) -> None:
        """Store the result of checking a node."""
        node = res.levels
        if self.result[node] < 0:
            self.checked.append(node)
        self.result[node] = 1 if res.anonymous else 0
        self.value[node] = res.value
        self.bound[node] = res.bound
        self.suppressed[node] = res.suppressed
        self.classes[node] = res.classes

    # -- inspection -------------------------------------------------------------------------
    def anonymity(self, node: Sequence[int]) -> bool | None:
        """Whether a node is acceptable: checked, or tagged by monotonicity; ``None`` if unknown."""
        node = self._check_node(node)
        r = int(self.result[node])
        if r >= 0:
            return bool(r)
        if self.has("anonymous", node):
            return True
        if self.has("not_anonymous", node):
            return False
        return None

    def status(self, node: Sequence[int]) -> str:
        """A short description: ``anonymous (checked)``, ``not anonymous (tagged)``, ``pruned``..."""
        node = self._check_node(node)
        a = self.anonymity(node)
        how = "checked" if self.result[node] >= 0 else "tagged"
        if a is None:
            return "pruned" if self.has("pruned", node) else "unknown"
        return f"{'anonymous' if a else 'not anonymous'} ({how})"

    def info(self, node: Sequence[int]) -> dict[str, Any]:
        """Everything known about one node."""
        node = self._check_node(node)
        checked = bool(self.result[node] >= 0)
        return {
            "levels": dict(zip(self.qi, node, strict=True)),
            "level": sum(node),
            "status": self.status(node),
            "checked": checked,
            "anonymous": self.anonymity(node),
            "pruned": self.has("pruned", node),
            "value": float(self.value[node]) if checked else None,
            "bound": float(self.bound[node]) if not np.isnan(self.bound[node]) else None,
            # -1: decided without computing the node's classes (see NodeEvaluator)
            "suppressed": int(self.suppressed[node]) if self.suppressed[node] >= 0 else None,
            "classes": int(self.classes[node]) if self.classes[node] >= 0 else None,
        }

    def counts(self) -> dict[str, int]:
        """How many nodes were checked, tagged either way, pruned, or left unknown."""
        checked = self.result >= 0
        anon = (self.result == 1) | (~checked & self._props["anonymous"])
        not_anon = (self.result == 0) | (~checked & ~anon & self._props["not_anonymous"])
        pruned = ~checked & ~anon & ~not_anon & self._props["pruned"]
        return {
            "nodes": self.size,
            "checked": int(checked.sum()),
            "anonymous": int(anon.sum()),
            "not_anonymous": int(not_anon.sum()),
            "tagged": int((~checked & (anon | not_anon)).sum()),
            "pruned": int(pruned.sum()),
            "unknown": int((~checked & ~anon & ~not_anon & ~pruned).sum()),
        }

    def to_table(self) -> pa.Table:
        """One row per node: its levels, level sum, status, value, bound, suppressed, classes."""
        import pyarrow as pa

        idx = np.indices(self.shape).reshape(len(self.shape), -1)
        cols: dict[str, Any] = {q: pa.array(idx[i], pa.int32()) for i, q in enumerate(self.qi)}
        cols["level"] = pa.array(idx.sum(axis=0), pa.int32())
        cols["status"] = pa.array([self.status(tuple(int(x) for x in idx[:, j]))
                                   for j in range(idx.shape[1])])
        flat = self.result.ravel() >= 0
        v = self.value.ravel()
        cols["value"] = pa.array(v, mask=~flat | np.isnan(v))
        b = self.bound.ravel()
        cols["bound"] = pa.array(b, mask=np.isnan(b))
        sup = self.suppressed.ravel()
        cls = self.classes.ravel()
        cols["suppressed"] = pa.array(sup, mask=sup < 0)
        cols["classes"] = pa.array(cls, mask=cls < 0)
        return pa.table(cols)

    @property
    def minimal(self) -> list[tuple[int, ...]]:
        """The minimal acceptable generalizations (k-minimal for k-anonymity).

        An acceptable node none of whose predecessors is acceptable. Nodes the search did not
        need are checked now (once; the result is cached).
        """
        if self._minimal is None:
            if self._resolver is not None:
                self._resolver(self)
            unknown = [n for n in self.nodes() if self.anonymity(n) is None]
            if unknown:
                raise InvalidParameterError(
                    f"{len(unknown)} node(s) of the lattice were never resolved",
                    remedy="run the search with this lattice's evaluator attached")
            self._minimal = [n for n in self.nodes() if self.anonymity(n)
                             and not any(self.anonymity(p) for p in self.predecessors(n))]
        return list(self._minimal)

    def below(self, a: Sequence[int], b: Sequence[int]) -> bool:
        """``a`` is at most ``b`` in every QI."""
        return all(x <= y for x, y in zip(a, b, strict=True))

    def __repr__(self) -> str:
        c = self.counts()
        return (f"Lattice({dict(zip(self.qi, self.shape, strict=True))}: {c['nodes']} nodes, "
                f"{c['checked']} checked, {c['tagged']} tagged, {c['pruned']} pruned, "
                f"{c['unknown']} unknown; optimum {self.optimum})")

    def __iter__(self) -> Iterator[tuple[int, ...]]:
        return self.nodes()

    def __len__(self) -> int:
        return self.size
