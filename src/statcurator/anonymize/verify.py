"""Independent verification of a release, from the released table itself.

Before a release is returned or written, its equivalence classes are recomputed from the
released rows (grouping on the released quasi-identifier values) and every criterion is
checked again here, by straightforward Python over the rows with exact
:class:`~fractions.Fraction` arithmetic. Nothing here calls the vectorized checks, the
integer codes or the class tables of the search: a bug there cannot hide itself.

Also checked: the number of suppressed records is within the limit, and every released
value is a truthful generalization of the input value it replaces (the hierarchy's label at
the released level for full-domain releases; a range or hierarchy group containing the
value for Mondrian).

>>> import pyarrow as pa
>>> from statcurator.anonymize.criteria import KAnonymity
>>> original = pa.table({"age": [21, 23, 35, 38], "disease": ["flu", "cold", "flu", "ulcer"]})
>>> release = pa.table({"age": ["[20, 29]"] * 2 + ["[30, 39]"] * 2,
...                     "disease": ["flu", "cold", "flu", "ulcer"]})
>>> verify(release, [KAnonymity(2)], original=original, qi=["age"])
{'2-anonymity': True, 'suppression limit': True, 'truthful generalization': True}
>>> verify(release, [KAnonymity(3)], original=original, qi=["age"])["3-anonymity"]
False
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..core.errors import VerificationError
from .criteria import Criterion, DeltaPresence, KAnonymity, LDiversity, TCloseness
from .hierarchy import Hierarchy

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["verify", "check_verified"]


def _text_array(column: Any) -> Any:
    """A column as an Arrow string array (how hierarchies and releases spell values);
    nulls become ``""``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        column = pc.cast(column, pa.string())
    return pc.fill_null(column, "")


def _texts(column: Any) -> list[str]:
    """Values as text, as a Python list."""
    return _text_array(column).to_pylist()


def _distinct(columns: Sequence[Any]) -> list[tuple[tuple[str, ...], int]]:
    """The distinct rows of some text columns with their multiplicities.

    Arrow's hash grouping does the counting: a library implementation that shares nothing
    with the search's integer codes and mixed-radix keys, and keeps the checks below to a
    loop over distinct rows instead of over every record.
    """
    import pyarrow as pa

    if not columns:
        return []
    names = [f"c{i}" for i in range(len(columns))]
    grouped = pa.table(dict(zip(names, columns, strict=True))).group_by(names).aggregate(
        [([], "count_all")])
    keys = list(zip(*(grouped.column(n).to_pylist() for n in names), strict=True))
    return list(zip(keys, grouped.column("count_all").to_pylist(), strict=True))


def verify(release: pa.Table, criteria: Sequence[Criterion], *, original: pa.Table,
           qi: Sequence[str], hierarchies: Mapping[str, Hierarchy] | None = None,
           levels: Mapping[str, int] | None = None, suppression: Fraction | int = 0,
           kept: Sequence[int] | None = None, marker: str = "*",
           sensitive_hierarchies: Mapping[str, Hierarchy] | None = None,
           sensitive_orders: Mapping[str, Sequence[str]] | None = None,
           suppressed_rows: Sequence[int] | None = None) -> dict[str, bool]:
    """Check every criterion on ``release``; returns ``{criterion: holds}`` plus the
    suppression limit and the truthfulness of the released values.

    ``original`` is the input table (the whole-table distributions of t-closeness come from
    it); ``kept`` lists the input row of each released row (rows align one to one without
    it); ``levels`` are the full-domain levels (``None`` for Mondrian). ``suppressed_rows``,
    the input rows the algorithm suppressed, says which released rows are suppressed ones
    (they must be ``*`` in every quasi-identifier); without it, a row that is ``*`` in every
    quasi-identifier is taken for one — and a class generalized to ``*`` everywhere (a
    Mondrian partition at the root) would be counted against the limit instead of checked.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    hierarchies = dict(hierarchies or {})
    qi = list(qi)
    n_in = original.num_rows
    if kept is None:
        if release.num_rows != n_in:
            raise VerificationError(
                f"the release has {release.num_rows} rows but the input {n_in}, and no row map",
                remedy="pass kept= (the input row of each released row)")
        kept = range(n_in)
    kept = pa.array(list(kept), type=pa.int64())
    if len(kept) != release.num_rows:
        raise VerificationError(f"the row map has {len(kept)} entries for {release.num_rows} rows",
                                remedy="pass kept= with the input row of each released row")
    dropped = release.num_rows < n_in

    # -- which released rows are suppressed ------------------------------------------------
    released_qi = [_text_array(release.column(q)) for q in qi]
    starred = pa.array([True] * release.num_rows, pa.bool_())
    for col in released_qi:
        starred = pc.and_(starred, pc.equal(col, marker))
    top_is_marker = levels is not None and all(
        _generalize_any(hierarchies[q], levels[q]) == {marker} for q in qi)
    n_starred = pc.sum(starred).as_py() or 0
    if qi and n_starred == release.num_rows and top_is_marker:
        # the most general node: one class, nothing suppressed
        starred = pa.array([False] * release.num_rows, pa.bool_())
        n_starred = 0
    if not qi:
        starred = pa.array([False] * release.num_rows, pa.bool_())
        n_starred = 0
    all_marked = starred
    if suppressed_rows is not None and not dropped:
        # the rows the algorithm suppressed, wherever the release put them
        listed = pa.array(sorted({int(i) for i in suppressed_rows}), pa.int64())
        starred = pc.is_in(kept, value_set=listed)
        n_starred = pc.sum(starred).as_py() or 0
    suppressed = (n_in - release.num_rows) if dropped else n_starred
    limit = math.floor(Fraction(suppression) * n_in)
    result: dict[str, bool] = {}

    # -- classes of the released table: size and sensitive-value counts -----------------------
    sensitive = sorted({c.column for c in criteria if isinstance(c, LDiversity | TCloseness)})
    keep = pc.invert(starred)
    columns = [pc.filter(c, keep) for c in released_qi]
    columns += [pc.filter(_text_array(release.column(s)), keep) for s in sensitive]
    if not qi:  # no quasi-identifier: the whole table is one class
        columns.insert(0, pa.array([""] * (release.num_rows - n_starred)))
    width = max(len(qi), 1)
    sizes: Counter[tuple[str, ...]] = Counter()
    values: dict[str, dict[tuple[str, ...], Counter[str]]] = {
        s: defaultdict(Counter) for s in sensitive}
    for row, n in _distinct(columns):
        key = row[:width]
        sizes[key] += n
        for j, s in enumerate(sensitive):
            values[s][key][row[width + j]] += n

    for c in criteria:
        key = str(c)
        if isinstance(c, KAnonymity):
            result[key] = all(n >= c.k for n in sizes.values())
        elif isinstance(c, LDiversity):
            result[key] = all(_l_diverse(values[c.column][k], c) for k in sizes)
        elif isinstance(c, TCloseness):
            whole = Counter(_texts(original.column(c.column)))
            order = _order(whole, (sensitive_hierarchies or {}).get(c.column),
                           (sensitive_orders or {}).get(c.column))
            h = (sensitive_hierarchies or {}).get(c.column)
            result[key] = all(_emd(values[c.column][k], whole, order, c.distance, h) <= c.t
                              for k in sizes)
        elif isinstance(c, DeltaPresence):
            result[key] = _delta_present(c, sizes, original, qi, hierarchies, levels,
                                         suppressed)
        else:  # pragma: no cover - every criterion type is handled above
            raise VerificationError(f"no independent check for {c}",
                                    remedy="add one to statcurator.anonymize.verify")
    result["suppression limit"] = suppressed <= limit
    if n_starred:
        # a starred row is a group no criterion checks, whose members an attacker who knows
        # the levels can name (whoever falls in no released class): it may reveal nothing
        # but the record's existence, so every column that is not a QI must be empty
        others = [c for c in release.column_names if c not in qi]
        result["suppressed records reveal nothing"] = all(
            pc.sum(pc.and_(starred, pc.is_valid(release.column(c)))).as_py() in (0, None)
            for c in others) and not pc.any(pc.and_(starred, pc.invert(all_marked))).as_py()
    result["truthful generalization"] = _truthful(released_qi, keep, kept, original, qi,
                                                  hierarchies, levels)
    return result


def check_verified(verified: Mapping[str, bool]) -> None:
    """Raise :class:`VerificationError` naming every check that failed."""
    failed = [k for k, ok in verified.items() if not ok]
    if failed:
        raise VerificationError(
            "the release failed its independent verification: " + ", ".join(failed),
            remedy="nothing was written; please report this as a bug with the data and settings")


def _generalize_any(h: Hierarchy, level: int) -> set[str]:
    return {row[level] for row in h.rows}


def _l_diverse(counts: Counter[str], c: LDiversity) -> bool:
    n = sum(counts.values())
    if c.variant == "distinct":
        return len(counts) >= c.l
    if len(counts) < math.ceil(c.l):
        return False
    if c.variant == "recursive":
        r = sorted(counts.values(), reverse=True)
        li = int(c.l)
        return Fraction(r[0]) < Fraction(c.c) * sum(r[li - 1:])  # type: ignore[arg-type]
    # entropy: -sum p log p >= log l  <=>  n^n / prod f^f >= l^n  (exact, in integers)
    lf = Fraction(c.l)
    lhs = n**n * lf.denominator**n
    rhs = lf.numerator**n
    for f in counts.values():
        rhs *= f**f
    return lhs >= rhs


def _order(whole: Counter[str], h: Hierarchy | None, declared: Sequence[str] | None) -> list[str]:
    """The values in the ordered distance's order: numbers by value, else as the hierarchy
    or the declared categories list them, else alphabetically; a missing value (``""``) is
    none of them and comes last."""
    values = [v for v in whole if v != ""]
    tail = [""] if "" in whole else []
    try:
        return sorted(values, key=lambda v: (Fraction(v), v)) + tail
    except (ValueError, ZeroDivisionError):
        pass
    for ref in ([row[0] for row in h.rows] if h is not None else None, declared):
        if ref is not None:
            pos = {str(v): i for i, v in enumerate(ref)}
            if all(v in pos for v in values):
                return sorted(values, key=pos.__getitem__) + tail
    return sorted(values) + tail


def _emd(cls: Counter[str], whole: Counter[str], order: list[str], distance: str,
         h: Hierarchy | None) -> Fraction:
    n = sum(cls.values())
    N = sum(whole.values())
    diff = {v: Fraction(cls.get(v, 0), n) - Fraction(whole[v], N) for v in order}
    if distance == "equal":
        return sum((abs(x) for x in diff.values()), Fraction(0)) / 2
    if distance == "ordered":
        m = len(order)
        if m < 2:
            return Fraction(0)
        total, running = Fraction(0), Fraction(0)
        for v in order:
            running += diff[v]
            total += abs(running)
        return total / (m - 1)
    assert h is not None
    # hierarchical: move mass up the tree; at each inner node the matched part of the
    # positive and negative extras costs level/height per unit
    height = len(h.rows[0]) - 1
    extra: dict[str, Fraction] = {row[0]: diff.get(row[0], Fraction(0)) for row in h.rows}
    cost = Fraction(0)
    for level in range(1, height + 1):
        parent_of = {row[level - 1]: row[level] for row in h.rows}
        pos: dict[str, Fraction] = defaultdict(Fraction)
        neg: dict[str, Fraction] = defaultdict(Fraction)
        for label, e in extra.items():
            if e > 0:
                pos[parent_of[label]] += e
            elif e < 0:
                neg[parent_of[label]] -= e
        parents = set(parent_of.values())
        cost += sum((Fraction(level, height) * min(pos[p], neg[p]) for p in parents), Fraction(0))
        extra = {p: pos[p] - neg[p] for p in parents}
    return cost


def _generalizer(h: Hierarchy) -> dict[str, tuple[str, ...]]:
    return {row[0]: tuple(row) for row in h.rows}


def _delta_present(c: DeltaPresence, sizes: Mapping[tuple[str, ...], int],
                   original: pa.Table, qi: Sequence[str], hierarchies: Mapping[str, Hierarchy],
                   levels: Mapping[str, int] | None, suppressed: int = 0) -> bool:
    """Every released class's δ in [dmin, dmax], and the suppressed records' too: they are
    one more class, of the population members that fall in no released class. (A population
    class whose sample records were all suppressed used to pass unchecked, though its members
    are then the only people outside the released classes: with all of them in the sample,
    the suppression count said so.)"""
    if levels is None:
        return False  # δ-presence is only defined here for full-domain releases
    from .search import as_table

    population = as_table(c.population)
    maps = [_generalizer(hierarchies[q]) for q in qi]

    def gen(table: Any) -> Counter[tuple[str, ...]]:
        cols = [_texts(table.column(q)) for q in qi]
        return Counter(tuple(maps[d][cols[d][i]][levels[q]] for d, q in enumerate(qi))
                       for i in range(table.num_rows))

    pop = gen(population)
    for key, m in sizes.items():
        p = pop.get(key, 0)
        if p == 0 or not c.dmin <= Fraction(m, p) <= c.dmax:
            return False
    # the population outside every released class, and the records of it in the sample:
    # the suppressed ones (a class with no sample record at all has δ = 0)
    outside = sum(p for key, p in pop.items() if key not in sizes)
    if outside == 0:
        return suppressed == 0
    return c.dmin <= Fraction(suppressed, outside) <= c.dmax


def _truthful(released: Sequence[Any], keep: Any, kept: Any, original: pa.Table,
              qi: Sequence[str], hierarchies: Mapping[str, Hierarchy],
              levels: Mapping[str, int] | None) -> bool:
    import pyarrow.compute as pc

    for d, q in enumerate(qi):
        # each distinct (input value, released value) pair is checked once
        inputs = pc.filter(pc.take(_text_array(original.column(q)), kept), keep)
        pairs = [pair for pair, _ in _distinct([inputs, pc.filter(released[d], keep)])]
        if levels is not None:
            gen = _generalizer(hierarchies[q])
            if any(gen.get(value, ("",) * (levels[q] + 1))[levels[q]] != out
                   for value, out in pairs):
                return False
        else:
            ancestors = _ancestors(hierarchies[q]) if q in hierarchies else None
            if not all(_contains(out, value, ancestors) for value, out in pairs):
                return False
    return True


def _ancestors(h: Hierarchy) -> dict[str, set[str]]:
    return {row[0]: set(row) for row in h.rows}


def _contains(cell: str, value: str, ancestors: dict[str, set[str]] | None) -> bool:
    """Does a Mondrian cell (a value, a range ``[lo, hi]`` or a hierarchy label) hold value?"""
    if cell == value:
        return True
    if cell.startswith("[") and cell.endswith("]") and ", " in cell:
        lo, hi = cell[1:-1].split(", ", 1)
        try:
            return Fraction(lo) <= Fraction(value) <= Fraction(hi)
        except (ValueError, ZeroDivisionError):
            return False
    return ancestors is not None and cell in ancestors.get(value, set())
