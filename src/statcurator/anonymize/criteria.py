"""Privacy criteria (privacy models) for generalized microdata.

Each criterion is a frozen value that states its properties — whether it stays satisfied
when a release is generalized further (``monotone_generalization``) and when records are
suppressed (``monotone_suppression``) — and checks *all* equivalence classes of a release at
once from a :class:`ClassSummary` (class sizes, per-class counts of each sensitive value,
population counts), with numpy. The checks are exact: thresholds are
:class:`~fractions.Fraction` and comparisons are done in integer arithmetic, so a class sitting
exactly on a threshold is decided correctly.

* :class:`KAnonymity` — every class has at least ``k`` records (Samarati & Sweeney 1998).
* :class:`LDiversity` — distinct, entropy or recursive (c,l)-diversity of a sensitive
  attribute (Machanavajjhala et al. 2007).
* :class:`TCloseness` — the Earth Mover's Distance between a class's sensitive distribution
  and the whole table's is at most ``t``, with equal, ordered or hierarchical ground distance
  (Li, Li & Venkatasubramanian 2007).
* :class:`DeltaPresence` — the share of a population class that is in the released sample lies
  in ``[dmin, dmax]`` (Nergiz, Atzori & Clifton 2007).

>>> s = ClassSummary.from_records([0, 0, 0, 1, 1, 1],
...                               {"disease": ["flu", "flu", "ulcer", "flu", "cold", "ulcer"]})
>>> KAnonymity(3).check(s).tolist()
[True, True]
>>> LDiversity("disease", 3).check(s).tolist()
[False, True]
>>> str(TCloseness("disease", 0.2))
'0.2-closeness (equal distance) of disease'
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np

from ..core.errors import InvalidParameterError, UnsatisfiableError
from ..core.numbers import exact
from .hierarchy import Hierarchy, format_number

__all__ = [
    "Criterion",
    "KAnonymity",
    "LDiversity",
    "TCloseness",
    "DeltaPresence",
    "ClassSummary",
    "SensitiveDomain",
]

_INT64_SAFE = 2**62


@dataclass(frozen=True)
class SensitiveDomain:
    """What the criteria need to know about one sensitive attribute of the whole table.

    ``values`` are the distinct values present in the data, in the *order* used by the ordered
    ground distance; ``totals`` their counts in the whole table (the distribution every class is
    compared to by t-closeness); ``hierarchy`` the attribute's generalization hierarchy, if
    declared (needed by the hierarchical ground distance).
    """

    column: str
    values: tuple[str, ...]
    totals: np.ndarray
    hierarchy: Hierarchy | None = None

    @property
    def size(self) -> int:
        """Number of distinct values ``m``."""
        return len(self.values)

    @classmethod
    def from_values(cls, column: str, values: Sequence[Any],
                    hierarchy: Hierarchy | None = None,
                    order: Sequence[str] | None = None) -> SensitiveDomain:
        """The domain of a column from its values; the order is numeric when every value is a
        number, else the hierarchy's row order, else ``order``, else alphabetical — in each
        case without the missing value (NULL, ``""``), which comes last.

        >>> SensitiveDomain.from_values("salary", [10, 3, 5, 3]).values
        ('3', '5', '10')
        >>> SensitiveDomain.from_values("salary", [10, None, 3, 20]).values  # not '', '10', ..
        ('3', '10', '20', '')
        """
        texts = ["" if v is None else str(v) for v in values]
        present = set(texts)
        ordered = value_order(present, hierarchy, order)
        idx = {v: i for i, v in enumerate(ordered)}
        totals = np.bincount(np.array([idx[t] for t in texts], dtype=np.int64),
                             minlength=len(ordered)).astype(np.int64)
        return cls(column, tuple(ordered), totals, hierarchy)


def value_order(present: set[str], hierarchy: Hierarchy | None = None,
                order: Sequence[str] | None = None) -> list[str]:
    """The order of a sensitive attribute's values for the ordered ground distance."""
    def number(t: str) -> Fraction | None:
        try:
            return Fraction(t)
        except (ValueError, ZeroDivisionError):
            return None

    # the missing value is no value of the order: it goes last, whatever the order of the
    # others (one NULL among numbers used to turn the order alphabetical: '10' before '2')
    missing = [""] if "" in present else []
    present = set(present) - {""}
    nums = {t: number(t) for t in present}
    if present and all(v is not None for v in nums.values()):
        return sorted(present, key=lambda t: (nums[t], t)) + missing
    for ref in (hierarchy.values if hierarchy is not None else None, order):
        if ref is not None:
            pos = {v: i for i, v in enumerate(str(r) for r in ref)}
            if all(t in pos for t in present):
                return sorted(present, key=pos.__getitem__) + missing
    return sorted(present) + missing


@dataclass(frozen=True)
class ClassSummary:
    """Everything a criterion needs about the equivalence classes of one release.

    ``sizes[i]`` is the number of released records of class ``i``; ``sensitive[col][i, j]`` the
    number of them whose ``col`` is ``domains[col].values[j]``; ``population[i]`` (δ-presence)
    the number of population records in the class.
    """

    sizes: np.ndarray
    sensitive: Mapping[str, np.ndarray] = field(default_factory=dict)
    domains: Mapping[str, SensitiveDomain] = field(default_factory=dict)
    population: np.ndarray | None = None

    @property
    def classes(self) -> int:
        return len(self.sizes)

    @classmethod
    def from_records(cls, class_of: Sequence[int], sensitive: Mapping[str, Sequence[Any]] | None
                     = None, *, population: Sequence[int] | None = None,
                     hierarchies: Mapping[str, Hierarchy] | None = None) -> ClassSummary:
        """A summary from per-record class ids and sensitive values (handy in tests and docs).

        The whole-table distribution of each sensitive attribute is that of the given records.
        """
        ids = np.asarray(class_of, dtype=np.int64)
        n_classes = int(ids.max()) + 1 if len(ids) else 0
        sizes = np.bincount(ids, minlength=n_classes).astype(np.int64)
        counts: dict[str, np.ndarray] = {}
        domains: dict[str, SensitiveDomain] = {}
        for col, vals in (sensitive or {}).items():
            dom = SensitiveDomain.from_values(col, vals, (hierarchies or {}).get(col))
            idx = {v: i for i, v in enumerate(dom.values)}
            codes = np.array([idx["" if v is None else str(v)] for v in vals], dtype=np.int64)
            m = np.zeros((n_classes, dom.size), dtype=np.int64)
            np.add.at(m, (ids, codes), 1)
            counts[col] = m
            domains[col] = dom
        pop = None if population is None else np.asarray(population, dtype=np.int64)
        return cls(sizes, counts, domains, pop)


class Criterion:
    """Base of all privacy criteria.

    Subclasses are frozen dataclasses that define ``check(summary) -> numpy bool array`` (one
    entry per equivalence class: does the class satisfy the criterion?) and declare:

    * ``monotone_generalization`` — if all classes of a release satisfy it, so do all classes of
      any further generalization of that release;
    * ``monotone_suppression`` — with a suppression limit, if a generalization is acceptable
      (the records of failing classes fit in the limit) so is every further generalization;
    * ``min_class_size`` — a class smaller than this can never satisfy it (0 if none);
    * ``sensitive_column`` — the sensitive attribute it protects (``None`` if none).
    """

    monotone_generalization: ClassVar[bool] = True
    monotone_suppression: ClassVar[bool] = True
    sensitive_column: str | None = None

    @property
    def min_class_size(self) -> int:
        return 0

    def check(self, summary: ClassSummary) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def validate(self, records: int, domains: Mapping[str, SensitiveDomain]) -> None:
        """Refuse configurations that can never be satisfied (raises ``UnsatisfiableError``)."""


def _positive_int(value: Any, name: str, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        if isinstance(value, float | Fraction) and value == int(value):
            value = int(value)
        else:
            raise InvalidParameterError(f"{name} must be an integer, got {value!r}",
                                        remedy=f"pass a whole number such as {name}=5")
    if value < minimum:
        raise InvalidParameterError(f"{name} must be at least {minimum}, got {value}",
                                    remedy=f"pass {name} >= {minimum}")
    return int(value)


def _column(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidParameterError(f"{what} needs the name of the sensitive column, got {value!r}",
                                    remedy=f'pass it first, e.g. {what}("disease", ...)')
    return value


def _domain(summary_or_domains: Any, column: str, who: str) -> SensitiveDomain:
    domains = summary_or_domains.domains if isinstance(summary_or_domains, ClassSummary) \
        else summary_or_domains
    try:
        return domains[column]
    except KeyError:
        raise InvalidParameterError(
            f"{who} protects the column {column!r}, which is not a sensitive attribute of this run",
            remedy=f'declare role = "sensitive" for {column!r} in the metadata or pass '
                   f'sensitive=[{column!r}]') from None


def _le_scaled(lhs: np.ndarray, ratio: Fraction, rhs: np.ndarray) -> np.ndarray:
    """Exactly ``lhs <= ratio * rhs`` for non-negative integer arrays (int64 when safe)."""
    a, b = ratio.denominator, ratio.numerator
    big = max(int(lhs.max(initial=0)) * a, int(rhs.max(initial=0)) * b)
    if big < _INT64_SAFE:
        return lhs.astype(np.int64) * a <= rhs.astype(np.int64) * b
    return np.array([int(x) * a <= int(y) * b for x, y in zip(lhs.tolist(), rhs.tolist(),
                                                              strict=True)], dtype=bool)


def _scaled_differences(counts: np.ndarray, sizes: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """``(p_ij - q_j) * n_i * N`` as integers: ``counts_ij * N - totals_j * n_i``."""
    N = int(totals.sum())
    if N * max(int(sizes.max(initial=0)), 1) * 4 < _INT64_SAFE:
        return counts.astype(np.int64) * N - totals[None, :].astype(np.int64) * sizes[:, None]
    return (counts.astype(object) * N - totals[None, :].astype(object) * sizes[:, None].astype(object))


@dataclass(frozen=True)
class KAnonymity(Criterion):
    """Every equivalence class has at least ``k`` records.

    >>> KAnonymity(2).check(ClassSummary(np.array([1, 2, 5]))).tolist()
    [False, True, True]
    >>> KAnonymity(0)
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: k must be at least 1, got 0; pass k >= 1
    """

    k: int
    monotone_generalization: ClassVar[bool] = True
    monotone_suppression: ClassVar[bool] = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _positive_int(self.k, "k"))

    @property
    def min_class_size(self) -> int:
        return self.k

    def check(self, summary: ClassSummary) -> np.ndarray:
        return summary.sizes >= self.k

    def validate(self, records: int, domains: Mapping[str, SensitiveDomain]) -> None:
        if self.k > records:
            raise UnsatisfiableError(f"{self.k}-anonymity needs classes of {self.k} records but the "
                                     f"table has only {records}",
                                     remedy=f"lower k to at most {records}")

    def __str__(self) -> str:
        return f"{self.k}-anonymity"


@dataclass(frozen=True)
class LDiversity(Criterion):
    """Each class holds at least ``l`` "well-represented" values of a sensitive attribute.

    ``variant`` is

    * ``"distinct"`` — at least ``l`` distinct values (``l`` an integer);
    * ``"entropy"`` — the entropy of the class's values is at least ``log(l)`` (``l`` real ≥ 1);
    * ``"recursive"`` — recursive (c,l)-diversity: with the value counts sorted decreasingly,
      ``r_1 < c · (r_l + r_{l+1} + … + r_m)``.

    Distinct l-diversity is monotone under generalization and suppression; entropy and
    recursive l-diversity are monotone under generalization only (merging a failing class into
    a passing one can make it fail).

    >>> s = ClassSummary.from_records([0, 0, 0, 0], {"d": ["a", "a", "b", "c"]})
    >>> [LDiversity("d", 3, v, c=3 if v == "recursive" else None).check(s).tolist() for v in ("distinct", "entropy", "recursive")]
    [[True], [False], [True]]
    """

    column: str
    l: Fraction | int  # noqa: E741 - the literature's name
    variant: str = "distinct"
    c: Fraction | None = None

    VARIANTS: ClassVar[tuple[str, ...]] = ("distinct", "entropy", "recursive")

    def __post_init__(self) -> None:
        _column(self.column, "LDiversity")
        if self.variant not in self.VARIANTS:
            raise InvalidParameterError(f"unknown l-diversity variant {self.variant!r}",
                                        remedy="use one of: " + ", ".join(self.VARIANTS))
        if self.variant == "entropy":
            value = exact(self.l, "l")
            if value < 1:
                raise InvalidParameterError(f"l must be at least 1, got {format_number(value)}",
                                            remedy="pass l >= 1")
            object.__setattr__(self, "l", value)
        else:
            object.__setattr__(self, "l", _positive_int(self.l, "l"))
        if self.variant == "recursive":
            if self.c is None:
                raise InvalidParameterError("recursive (c,l)-diversity needs the constant c",
                                            remedy="pass c, e.g. LDiversity(col, 3, 'recursive', c=4)")
            object.__setattr__(self, "c", exact(self.c, "c"))
        elif self.c is not None:
            raise InvalidParameterError(f"c only applies to recursive l-diversity, not {self.variant}",
                                        remedy="drop c=..., or use variant='recursive'")

    @property
    def sensitive_column(self) -> str:  # type: ignore[override]
        return self.column

    @property
    def monotone_generalization(self) -> bool:  # type: ignore[override]
        return True

    @property
    def monotone_suppression(self) -> bool:  # type: ignore[override]
        return self.variant == "distinct"

    @property
    def min_class_size(self) -> int:
        return math.ceil(self.l)

    def check(self, summary: ClassSummary) -> np.ndarray:
        _domain(summary, self.column, str(self))  # names the remedy if the column is missing
        counts = summary.sensitive[self.column]
        distinct = (counts > 0).sum(axis=1)
        need = math.ceil(self.l)
        if self.variant == "distinct":
            return distinct >= need
        if self.variant == "recursive":
            assert isinstance(self.c, Fraction)
            ordered = -np.sort(-counts, axis=1)
            top = ordered[:, 0] if counts.shape[1] else np.zeros(len(counts), dtype=np.int64)
            tail = ordered[:, need - 1:].sum(axis=1) if counts.shape[1] >= need \
                else np.zeros(len(counts), dtype=np.int64)
            ok = top.astype(np.int64) * self.c.denominator < tail.astype(np.int64) * self.c.numerator
            return ok & (distinct >= need)
        return self._entropy(counts, summary.sizes) & (distinct >= need)

    def _entropy(self, counts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
        # H(class) >= log(l)  <=>  n log n - sum f log f >= n log l; float first, then the exact
        # comparison n^n * den^n >= num^n * prod f^f for the classes within rounding of the edge.
        n = sizes.astype(np.float64)
        f = counts.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            flogf = np.where(f > 0, f * np.log(np.where(f > 0, f, 1.0)), 0.0).sum(axis=1)
            nlogn = np.where(n > 0, n * np.log(np.where(n > 0, n, 1.0)), 0.0)
        diff = nlogn - flogf - n * math.log(float(self.l))
        ok = diff >= 0
        edge = np.abs(diff) <= 1e-9 * np.maximum(1.0, nlogn)
        l_frac = Fraction(self.l)
        for i in np.flatnonzero(edge):
            ni = int(sizes[i])
            lhs = ni**ni * l_frac.denominator**ni
            rhs = l_frac.numerator**ni
            for v in counts[i][counts[i] > 0].tolist():
                rhs *= int(v) ** int(v)
            ok[i] = lhs >= rhs
        return ok

    def validate(self, records: int, domains: Mapping[str, SensitiveDomain]) -> None:
        m = _domain(domains, self.column, str(self)).size
        if self.l > m:
            raise UnsatisfiableError(
                f"{self} can never hold: the column {self.column!r} has only {m} distinct value(s)",
                remedy=f"lower l to at most {m}, or protect another column")

    def __str__(self) -> str:
        ltxt = format_number(Fraction(self.l))
        if self.variant == "recursive":
            return f"recursive ({format_number(self.c)},{ltxt})-diversity of {self.column}"  # type: ignore[arg-type]
        return f"{self.variant} {ltxt}-diversity of {self.column}"


@dataclass(frozen=True)
class TCloseness(Criterion):
    """The distribution of a sensitive attribute in each class is within EMD ``t`` of the table's.

    ``distance`` is the ground distance of the Earth Mover's Distance (Li et al. 2007):

    * ``"equal"`` — all values are at distance 1: EMD = ½ Σ|p_i − q_i|;
    * ``"ordered"`` — values in their order v_1 < … < v_m are at distance |i − j|/(m − 1):
      EMD = (1/(m−1)) Σ_i |Σ_{j≤i} (p_j − q_j)|;
    * ``"hierarchical"`` — the distance of two values is the level of their lowest common
      ancestor in the attribute's hierarchy divided by its height.

    ``p`` is the class's distribution and ``q`` the whole table's (all records of the input,
    before suppression). Monotone under generalization, not under suppression.

    >>> s = ClassSummary.from_records([0, 0, 0, 1, 1, 1, 1, 1, 1],
    ...                               {"salary": [3, 4, 5, 6, 11, 8, 7, 9, 10]})
    >>> TCloseness("salary", 0.375, "ordered").emd(s)[0]
    Fraction(3, 8)
    """

    column: str
    t: Fraction
    distance: str = "equal"

    DISTANCES: ClassVar[tuple[str, ...]] = ("equal", "ordered", "hierarchical")
    monotone_generalization: ClassVar[bool] = True
    monotone_suppression: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _column(self.column, "TCloseness")
        t = exact(self.t, "t", allow_zero=True)
        if t > 1:
            raise InvalidParameterError(f"t must be in [0, 1], got {format_number(t)}",
                                        remedy="the EMD is at most 1; pass e.g. t=0.2")
        object.__setattr__(self, "t", t)
        if self.distance not in self.DISTANCES:
            raise InvalidParameterError(f"unknown t-closeness distance {self.distance!r}",
                                        remedy="use one of: " + ", ".join(self.DISTANCES))

    @property
    def sensitive_column(self) -> str:  # type: ignore[override]
        return self.column

    def _scaled(self, summary: ClassSummary) -> tuple[Any, Any]:
        """Per class, ``(EMD numerator, denominator)`` as integers (EMD = num / den)."""
        dom = _domain(summary, self.column, str(self))
        counts = summary.sensitive[self.column]
        sizes = summary.sizes.astype(np.int64)
        N = int(dom.totals.sum())
        diff = _scaled_differences(counts, sizes, dom.totals)
        if self.distance == "equal":
            return np.abs(diff).sum(axis=1), 2 * N * sizes
        if self.distance == "ordered":
            m = dom.size
            if m < 2:
                return np.zeros(len(sizes), dtype=np.int64), np.ones(len(sizes), dtype=np.int64)
            return np.abs(np.cumsum(diff, axis=1)).sum(axis=1), (m - 1) * N * sizes
        h = dom.hierarchy
        if h is None:
            raise InvalidParameterError(
                f"hierarchical t-closeness of {self.column!r} needs a hierarchy for that column",
                remedy=f"declare a hierarchy for {self.column!r} in the metadata, or use "
                       f"distance='equal' or 'ordered'")
        rows = h.index(dom.values)
        extra = np.zeros((len(sizes), len(h)), dtype=diff.dtype)
        extra[:, rows] = diff
        cost = np.zeros(len(sizes), dtype=diff.dtype)
        for level in range(1, h.levels):
            child = h.codes[level - 1]
            parent = h.codes[level]
            link = np.zeros((h.cardinalities[level - 1], h.cardinalities[level]), dtype=np.int64)
            link[child, parent] = 1
            if diff.dtype == object:
                link = link.astype(object)
            pos = np.maximum(extra, 0) @ link
            neg = np.maximum(-extra, 0) @ link
            cost = cost + level * np.minimum(pos, neg).sum(axis=1)
            extra = pos - neg
        return cost, h.height * N * sizes

    def emd(self, summary: ClassSummary) -> list[Fraction]:
        """The exact EMD of each class (for reports and tests; ``check`` avoids Fractions)."""
        num, den = self._scaled(summary)
        return [Fraction(int(a), int(b)) if b else Fraction(0) for a, b in zip(num, den, strict=True)]

    def check(self, summary: ClassSummary) -> np.ndarray:
        num, den = self._scaled(summary)
        if num.dtype == object or den.dtype == object:
            t = self.t
            return np.array([int(a) * t.denominator <= int(b) * t.numerator
                             for a, b in zip(num, den, strict=True)], dtype=bool)
        return _le_scaled(num, self.t, den)

    def validate(self, records: int, domains: Mapping[str, SensitiveDomain]) -> None:
        dom = _domain(domains, self.column, str(self))
        if self.distance == "hierarchical":
            if dom.hierarchy is None:
                raise InvalidParameterError(
                    f"hierarchical t-closeness of {self.column!r} needs a hierarchy for that column",
                    remedy=f"declare a hierarchy for {self.column!r} in the metadata, or use "
                           f"distance='equal' or 'ordered'")
            for v in dom.values:
                if v not in dom.hierarchy:
                    raise dom.hierarchy.missing(v)

    def __str__(self) -> str:
        return f"{format_number(self.t)}-closeness ({self.distance} distance) of {self.column}"


@dataclass(frozen=True)
class DeltaPresence(Criterion):
    """Each class of the population contains a share in ``[dmin, dmax]`` of released records.

    The released table is a research sample of ``population`` (a table with the same
    quasi-identifiers; the sample must be a sub-multiset of it). For a class with ``n`` sample
    and ``P`` population records, δ = n/P must satisfy ``dmin <= δ <= dmax``. Population
    classes without any sample record have δ = 0 and cannot be suppressed.

    >>> s = ClassSummary(np.array([1, 2]), population=np.array([4, 3]))
    >>> DeltaPresence(0, 0.5, population=None).check(s).tolist()
    [True, False]
    """

    dmin: Fraction
    dmax: Fraction
    population: Any = field(default=None, compare=False, hash=False, repr=False)

    monotone_generalization: ClassVar[bool] = True
    monotone_suppression: ClassVar[bool] = False

    def __post_init__(self) -> None:
        lo = exact(self.dmin, "dmin", allow_zero=True)
        hi = exact(self.dmax, "dmax", allow_zero=True)
        if not lo <= hi <= 1:
            raise InvalidParameterError(
                f"δ-presence needs 0 <= dmin <= dmax <= 1, got dmin={format_number(lo)}, "
                f"dmax={format_number(hi)}", remedy="pass e.g. DeltaPresence(0.1, 0.6, population)")
        object.__setattr__(self, "dmin", lo)
        object.__setattr__(self, "dmax", hi)

    def check(self, summary: ClassSummary) -> np.ndarray:
        if summary.population is None:
            raise InvalidParameterError("δ-presence needs population counts",
                                        remedy="pass the population table to DeltaPresence")
        n = summary.sizes.astype(np.int64)
        p = summary.population.astype(np.int64)
        return _le_scaled(p, 1 / self.dmin, n) & _le_scaled(n, self.dmax, p) \
            if self.dmin > 0 else _le_scaled(n, self.dmax, p)

    def __str__(self) -> str:
        return f"({format_number(self.dmin)},{format_number(self.dmax)})-presence"
