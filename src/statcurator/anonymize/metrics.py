"""Utility and risk metrics of anonymized releases, and the objectives of the optimal search.

All utility metrics are *losses*: lower is better. With N input records, D quasi-identifiers,
released equivalence classes E (suppressed records excluded) and S suppressed records:

``loss`` (ARX's default)
    For QI d with a hierarchy of |dom_d| rows, the *share* of a generalized value is the
    number of hierarchy rows (raw values) it covers divided by |dom_d| (a raw value has share
    1/|dom_d|, ``*`` has share 1). L_d = Σ over records of the share of the record's value, a
    suppressed record counting 1. Normalized, L'_d = max(0, (L_d − N/|dom_d|) / (N − N/|dom_d|)),
    and aggregated by the geometric mean: loss = Π_d (1 + L'_d)^(1/D) − 1.
``ncp``
    Normalized certainty penalty (generalization loss, GCP): the arithmetic mean of the L'_d.
    L'_d is the average over records of (covered values − 1)/(|dom_d| − 1).
``dm``
    Discernibility (Bayardo & Agrawal): Σ_E |E|² + N·S.
``dmstar``
    DM* (ARX's monotone discernibility): Σ |E|² over all classes of the generalization,
    suppressed classes included at their size.
``aecs``
    Average equivalence class size: N / (number of classes), the suppressed records counting as
    one class.
``precision``
    Sweeney's precision loss (full-domain only): the mean over QIs of
    (Σ_records level/height, a suppressed record counting 1) / N.
``entropy``
    Non-uniform entropy (Gionis & Tassa), in bits: Σ_d Σ_records −log2 P(raw value | released
    value), with P estimated from the input (a suppressed value is ``*``).

Prosecutor re-identification risk (an attacker who knows the target is in the release): a
record of class E is re-identified with probability 1/|E|; reported are the maximum, the
average over released records, and the share of records whose risk exceeds a threshold.

>>> rs = ReleaseStructure(records=6, sizes=np.array([2, 4]), suppressed_sizes=np.array([], int),
...                       shares=np.array([[1.0], [1.0]]), cell_counts=np.array([[6], [6]]),
...                       value_entropy=np.array([4.0]), domain_sizes=np.array([2]))
>>> round(loss(rs), 6), dm(rs), aecs(rs)
(1.0, 20, 3.0)
>>> prosecutor_risk(rs.sizes, threshold=0.3)["records_at_risk"]
0.3333333333333333
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.errors import InvalidParameterError

__all__ = [
    "ReleaseStructure",
    "loss",
    "ncp",
    "dm",
    "dmstar",
    "aecs",
    "precision",
    "entropy",
    "utility",
    "prosecutor_risk",
    "Objective",
    "objective",
    "METRICS",
]

METRICS = ("loss", "dm", "dmstar", "aecs", "entropy", "precision")


@dataclass(frozen=True)
class ReleaseStructure:
    """The shape of a release that the metrics need (computed by the algorithms).

    ``sizes[i]`` are the sizes of the released classes; ``suppressed_sizes`` the sizes the
    suppressed classes had; per released class and QI, ``shares`` is the domain share of the
    released value, ``cell_counts`` the number of input records whose value it covers and
    ``level_ratios`` (full-domain only) its level divided by the hierarchy's height.
    ``value_entropy[d]`` is Σ_v n_v·log2(n_v) over the raw values of QI d, ``domain_sizes[d]``
    the number of rows of its hierarchy.
    """

    records: int
    sizes: np.ndarray
    suppressed_sizes: np.ndarray
    shares: np.ndarray
    cell_counts: np.ndarray
    value_entropy: np.ndarray
    domain_sizes: np.ndarray
    level_ratios: np.ndarray | None = None

    @property
    def suppressed(self) -> int:
        return int(self.suppressed_sizes.sum())

    @property
    def classes(self) -> int:
        return len(self.sizes)

    @property
    def dims(self) -> int:
        return len(self.domain_sizes)


def _normalized_shares(rs: ReleaseStructure) -> list[float]:
    N = rs.records
    out = []
    for d in range(rs.dims):
        dom = int(rs.domain_sizes[d])
        total = float(np.dot(rs.sizes, rs.shares[:, d])) + rs.suppressed
        lo = N / dom
        out.append(0.0 if N - lo <= 0 else max(0.0, (total - lo) / (N - lo)))
    return out


def loss(rs: ReleaseStructure) -> float:
    """ARX's loss: the geometric mean of the per-QI normalized shares (see the module doc)."""
    parts = _normalized_shares(rs)
    if not parts:
        return 0.0
    return _geometric(parts)


def _geometric(parts: Sequence[float]) -> float:
    result = 1.0
    for v in parts:
        result *= (v + 1.0) ** (1.0 / len(parts))
    return result - 1.0


def ncp(rs: ReleaseStructure) -> float:
    """Normalized certainty penalty (GCP): the arithmetic mean of the normalized shares."""
    parts = _normalized_shares(rs)
    return float(sum(parts) / len(parts)) if parts else 0.0


def dm(rs: ReleaseStructure) -> int:
    """Discernibility: Σ|E|² over released classes plus N for every suppressed record."""
    return int(np.dot(rs.sizes, rs.sizes)) + rs.records * rs.suppressed


def dmstar(rs: ReleaseStructure) -> int:
    """DM*: Σ|E|² over all classes, suppressed ones included."""
    return int(np.dot(rs.sizes, rs.sizes)) + int(np.dot(rs.suppressed_sizes, rs.suppressed_sizes))


def aecs(rs: ReleaseStructure) -> float:
    """Average class size N / classes, the suppressed records counting as one class."""
    classes = rs.classes + (1 if rs.suppressed else 0)
    return rs.records / classes if classes else 0.0


def precision(rs: ReleaseStructure) -> float | None:
    """Precision loss: mean over QIs of the average level/height (suppressed = 1)."""
    if rs.level_ratios is None:
        return None
    N = rs.records
    parts = [(float(np.dot(rs.sizes, rs.level_ratios[:, d])) + rs.suppressed) / N
             for d in range(rs.dims)]
    return sum(parts) / len(parts) if parts else 0.0


def entropy(rs: ReleaseStructure) -> float:
    """Non-uniform entropy in bits (a suppressed value is ``*``: it covers all N records)."""
    total = 0.0
    for d in range(rs.dims):
        cells = rs.cell_counts[:, d].astype(np.float64)
        total += float(np.dot(rs.sizes, np.log2(np.maximum(cells, 1.0))))
        total += rs.suppressed * math.log2(rs.records) if rs.records else 0.0
        total -= float(rs.value_entropy[d])
    return max(total, 0.0)


def utility(rs: ReleaseStructure) -> dict[str, Any]:
    """All utility figures of a release as a dict (``None`` where a metric does not apply)."""
    sizes = rs.sizes
    return {
        "loss": loss(rs),
        "ncp": ncp(rs),
        "dm": dm(rs),
        "dmstar": dmstar(rs),
        "aecs": aecs(rs),
        "precision": precision(rs),
        "entropy": entropy(rs),
        "classes": rs.classes,
        "suppressed": rs.suppressed,
        "min_class_size": int(sizes.min()) if len(sizes) else 0,
        "max_class_size": int(sizes.max()) if len(sizes) else 0,
    }


def prosecutor_risk(sizes: np.ndarray, threshold: float = 0.2) -> dict[str, Any]:
    """Prosecutor re-identification risk of released classes of the given sizes.

    ``max`` = 1/min|E|, ``average`` = mean over released records of 1/|E| (= classes/records),
    ``records_at_risk`` = share of released records whose risk 1/|E| exceeds ``threshold``.

    >>> prosecutor_risk(np.array([1, 3]), threshold=0.5)
    {'max': 1.0, 'average': 0.5, 'threshold': 0.5, 'records_at_risk': 0.25, 'classes_at_risk': 1}
    """
    if not 0 <= threshold <= 1:
        raise InvalidParameterError(f"the risk threshold must be in [0, 1], got {threshold}",
                                    remedy="pass e.g. risk_threshold=0.2 (classes smaller than 5)")
    sizes = np.asarray(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    n = int(sizes.sum())
    if n == 0:
        return {"max": 0.0, "average": 0.0, "threshold": threshold, "records_at_risk": 0.0,
                "classes_at_risk": 0}
    risky = sizes * threshold < 1  # 1/|E| > threshold
    return {"max": 1.0 / int(sizes.min()), "average": len(sizes) / n, "threshold": threshold,
            "records_at_risk": int(sizes[risky].sum()) / n, "classes_at_risk": int(risky.sum())}


# -- search objectives ----------------------------------------------------------------------

def _arx_round(x: float) -> float:
    # ARX keeps ten decimals (floor) of each normalized dimension so that float noise does not
    # decide between generalizations of equal loss; we do the same to find the same optimum.
    return math.floor(x * 1e10) / 1e10


class Objective:
    """A utility metric as the optimal search uses it.

    ``value_and_bound(enc, levels, table, outlier)`` returns the metric of a generalization
    (its class table and the mask of suppressed classes) and a lower bound that ignores
    suppression and is monotone under generalization; ``bounds(enc, shape)`` computes that
    bound for every node at once when it does not need the classes (loss, precision,
    entropy: it depends only on each QI's marginal counts), else returns ``None``. The
    monotonicity flags are those of ARX's implementation of the metric, which decide how Flash
    traverses the lattice.
    """

    name: ClassVar[str] = ""
    monotone_generalization: ClassVar[bool] = True
    monotone_suppression: ClassVar[bool] = False
    #: ARX can bound this metric for a node before checking it (only its precision metric)
    arx_node_bound: ClassVar[bool] = False
    #: the lower bound needs the node's classes (else it follows from marginal counts)
    bound_needs_classes: ClassVar[bool] = False

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        return self.value(enc, levels, table, outlier), self.bound(enc, levels, table)

    def value(self, enc: Any, levels: Sequence[int], table: Any,
              outlier: np.ndarray) -> float:
        return self.value_and_bound(enc, levels, table, outlier)[0]

    def bound(self, enc: Any, levels: Sequence[int], table: Any) -> float:
        empty = np.zeros(table.size, dtype=bool)
        return self.value_and_bound(enc, levels, table, empty)[1]

    def bounds(self, enc: Any, shape: Sequence[int]) -> np.ndarray | None:
        """Lower bounds of every node of the lattice (``None`` if they need the data's classes)."""
        per_dim = self._per_dim(enc, shape)
        if per_dim is None:
            return None
        return self._aggregate(per_dim, shape)

    def _per_dim(self, enc: Any, shape: Sequence[int]) -> list[np.ndarray] | None:
        return None

    def _aggregate(self, per_dim: list[np.ndarray], shape: Sequence[int]) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover

    def monotone(self, suppression: bool) -> bool:
        return self.monotone_suppression if suppression else self.monotone_generalization


class _Loss(Objective):
    name = "loss"

    # In units of 1/|dom_d| every sum is an integer: count × (rows under the label) for kept
    # records, count × |dom_d| for suppressed ones; one division per QI then gives the
    # normalized share, independent of summation order. Without suppression the sum is the
    # marginal Σ_records rows-under-label, so only suppressed classes are ever gathered.

    def value(self, enc: Any, levels: Sequence[int], table: Any,
              outlier: np.ndarray) -> float:
        n = int(enc.n)
        idx = np.flatnonzero(outlier)
        out_count = table.count[idx]
        out_total = int(out_count.sum())
        vals = []
        for d, lv in enumerate(levels):
            dom = len(enc.hierarchies[d])
            total = enc.marginal_share_sum(d, lv)
            if len(idx):
                gs = enc.group_sizes[d][lv].take(table.rep[d].take(idx))
                total += out_total * dom - int(np.dot(out_count, gs))
            vals.append(_normalize(total, n, dom))
        return _geometric(vals)

    def bound(self, enc: Any, levels: Sequence[int], table: Any) -> float:
        per = enc.memo.setdefault("loss-normalized", {})
        parts = []
        for d, lv in enumerate(levels):
            v = per.get((d, lv))
            if v is None:
                v = per[(d, lv)] = _normalize(enc.marginal_share_sum(d, lv), int(enc.n),
                                              len(enc.hierarchies[d]))
            parts.append(v)
        return _geometric(parts)

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        return self.value(enc, levels, table, outlier), self.bound(enc, levels, table)

    def _per_dim(self, enc: Any, shape: Sequence[int]) -> list[np.ndarray] | None:
        n = int(enc.n)
        return [np.array([_normalize(enc.marginal_share_sum(d, lv), n, len(enc.hierarchies[d]))
                          for lv in range(shape[d])]) for d in range(len(shape))]

    def _aggregate(self, per_dim: list[np.ndarray], shape: Sequence[int]) -> np.ndarray:
        return _broadcast(per_dim, shape, _geometric_array)


def _broadcast(per_dim: list[np.ndarray], shape: Sequence[int], agg: Any) -> np.ndarray:
    idx = np.indices(tuple(shape))
    return agg([per_dim[d][idx[d]] for d in range(len(shape))])


def _geometric_array(parts: list[np.ndarray]) -> np.ndarray:
    result = np.ones_like(parts[0], dtype=np.float64)
    for v in parts:
        result = result * np.power(v + 1.0, 1.0 / len(parts))
    return result - 1.0


def _arith_array(parts: list[np.ndarray]) -> np.ndarray:
    result = np.zeros_like(parts[0], dtype=np.float64)
    for v in parts:
        result = result + v / len(parts)
    return result


def _normalize(scaled_total: int, n: int, dom: int) -> float:
    """ARX's normalized share from Σ (count × rows covered): (L − N/dom) / (N − N/dom)."""
    if dom <= 1 or n == 0:
        return 0.0
    return _arx_round(max(0.0, (scaled_total - n) / (n * (dom - 1))))


class _Precision(Objective):
    name = "precision"
    arx_node_bound = True

    def bound(self, enc: Any, levels: Sequence[int], table: Any) -> float:
        parts = []
        for d, lv in enumerate(levels):
            height = enc.hierarchies[d].height
            parts.append(lv / height if height else 0.0)
        return _arith(parts)

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        N = float(enc.n)
        supp = float(table.count[outlier].sum())
        unsupp = float(table.count.sum()) - supp
        vals = []
        for d, lv in enumerate(levels):
            height = enc.hierarchies[d].height
            ratio = lv / height if height else 0.0
            vals.append((unsupp * ratio + supp) / N)
        bound = []
        for d, lv in enumerate(levels):
            height = enc.hierarchies[d].height
            bound.append(lv / height if height else 0.0)
        return _arith(vals), _arith(bound)

    def _per_dim(self, enc: Any, shape: Sequence[int]) -> list[np.ndarray] | None:
        out = []
        for d in range(len(shape)):
            height = enc.hierarchies[d].height
            out.append(np.array([lv / height if height else 0.0 for lv in range(shape[d])]))
        return out

    def _aggregate(self, per_dim: list[np.ndarray], shape: Sequence[int]) -> np.ndarray:
        return _broadcast(per_dim, shape, _arith_array)


def _arith(parts: Sequence[float]) -> float:
    result = 0.0
    for v in parts:
        result += v / len(parts)
    return result


class _DM(Objective):
    bound_needs_classes = True
    name = "dm"

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        c = table.count.astype(np.int64)
        star = int(np.dot(c, c))
        kept = c[~outlier]
        value = int(np.dot(kept, kept)) + enc.n * int(c[outlier].sum())
        return float(value), float(star)


class _DMStar(Objective):
    bound_needs_classes = True
    name = "dmstar"
    monotone_suppression = True

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        c = table.count.astype(np.int64)
        star = float(np.dot(c, c))
        return star, star


class _AECS(Objective):
    bound_needs_classes = True
    name = "aecs"

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        sample = table.count > 0
        groups = int(sample.sum())
        kept = int((sample & ~outlier).sum())
        with_supp = kept + (1 if kept != groups else 0)
        n = float(enc.n)
        return (n / with_supp if with_supp else math.inf), (n / groups if groups else math.inf)


class _Entropy(Objective):
    name = "entropy"

    def bound(self, enc: Any, levels: Sequence[int], table: Any) -> float:
        total = 0.0
        for d, lv in enumerate(levels):
            lc = enc.label_counts(d, lv).astype(np.float64)
            total += float(np.dot(lc, np.log2(np.maximum(lc, 1)))) - _value_entropy(enc, d)
        return total

    def value_and_bound(self, enc: Any, levels: Sequence[int], table: Any,
                        outlier: np.ndarray) -> tuple[float, float]:
        count = table.count.astype(np.float64)
        n_out = float(count[outlier].sum())
        logN = math.log2(enc.n) if enc.n else 0.0
        value = bound = 0.0
        for d, lv in enumerate(levels):
            cells = enc.label_counts(d, lv)[enc.hierarchies[d].codes[lv][table.rep[d]]]
            terms = count * np.log2(np.maximum(cells, 1))
            base = _value_entropy(enc, d)
            b = float(terms.sum()) - base
            bound += b
            value += b - float(terms[outlier].sum()) + n_out * logN
        return value, bound

    def _per_dim(self, enc: Any, shape: Sequence[int]) -> list[np.ndarray] | None:
        out = []
        for d in range(len(shape)):
            vals = []
            for lv in range(shape[d]):
                lc = enc.label_counts(d, lv).astype(np.float64)
                vals.append(float(np.dot(lc, np.log2(np.maximum(lc, 1)))) - _value_entropy(enc, d))
            out.append(np.array(vals))
        return out

    def _aggregate(self, per_dim: list[np.ndarray], shape: Sequence[int]) -> np.ndarray:
        return _broadcast(per_dim, shape, lambda parts: sum(parts[1:], parts[0].copy()))


def _value_entropy(enc: Any, d: int) -> float:
    vc = enc.value_counts[d].astype(np.float64)
    return float(np.dot(vc, np.log2(np.maximum(vc, 1))))


_OBJECTIVES: dict[str, type[Objective]] = {
    "loss": _Loss, "precision": _Precision, "dm": _DM, "dmstar": _DMStar, "aecs": _AECS,
    "entropy": _Entropy,
}


def objective(name: str) -> Objective:
    """The search objective for a metric name (one of :data:`METRICS`).

    >>> objective("dmstar").monotone(suppression=True)
    True
    """
    key = str(name).lower().replace("*", "star").replace("-", "")
    if key in ("discernibility", "discernability"):
        key = "dm"
    if key not in _OBJECTIVES:
        raise InvalidParameterError(f"unknown utility metric {name!r}",
                                    remedy="use one of: " + ", ".join(METRICS))
    return _OBJECTIVES[key]()
