"""Setting up an anonymization run: roles, hierarchies, sensitive domains, criteria, limit.

:func:`prepare` turns a table, its metadata and the chosen criteria into a :class:`Problem`
that the algorithms (``optimal``, ``mondrian``) solve: it decides which columns are
quasi-identifiers and sensitive attributes *for this run*, builds and validates every
hierarchy against the data, refuses impossible configurations with a remedy, codes the data
once, and fixes the suppression limit (⌊fraction × records⌋, as ARX does).

>>> import pyarrow as pa
>>> from statcurator.core.schema import Column, HierarchySpec, TableMeta
>>> from statcurator.anonymize.criteria import KAnonymity, LDiversity
>>> meta = TableMeta("t", (Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),
...                        Column("disease", role="qi")))
>>> table = pa.table({"zip": ["123", "124"], "disease": ["flu", "cold"]})
>>> p = prepare(table, meta, [KAnonymity(2), LDiversity("disease", 2)])
>>> p.qi, p.sensitive, p.limit          # the protected column stops being a QI
(('zip',), ('disease',), 0)
>>> prepare(table, meta, [KAnonymity(2), LDiversity("disease", 2)], qi=["zip", "disease"])
Traceback (most recent call last):
...
statcurator.core.errors.InvalidParameterError: the column 'disease' is a quasi-identifier, so it cannot be the sensitive attribute of distinct 2-diversity of disease; drop 'disease' from the QIs of this run (qi=...), or protect another column
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from ..core.errors import InvalidParameterError, MetadataError
from ..core.numbers import exact
from ..core.schema import ColumnType, Role, TableMeta
from ._engine import Encoded, NodeEvaluator, encode
from .criteria import Criterion, DeltaPresence, SensitiveDomain
from .hierarchy import Hierarchy, text_values
from .metrics import Objective, objective

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Problem", "prepare", "as_table", "effective_meta"]


@dataclass
class Problem:
    """Everything an algorithm needs, validated and coded."""

    table: pa.Table
    meta: TableMeta
    criteria: tuple[Criterion, ...]
    suppression: Fraction
    limit: int
    metric: str
    objective: Objective
    encoded: Encoded
    evaluator: NodeEvaluator
    population: pa.Table | None = None
    #: quasi-identifiers without a declared hierarchy -> what was used instead
    automatic: dict[str, str] = field(default_factory=dict)

    @property
    def qi(self) -> tuple[str, ...]:
        return self.encoded.qi

    @property
    def sensitive(self) -> tuple[str, ...]:
        return self.encoded.sensitive

    @property
    def hierarchies(self) -> dict[str, Hierarchy]:
        return dict(zip(self.encoded.qi, self.encoded.hierarchies, strict=True))


def as_table(data: Any) -> pa.Table:
    """An Arrow table from a pyarrow Table, a pandas/Polars frame, or anything with ``.table``."""
    import pyarrow as pa

    if isinstance(data, pa.Table):
        return data
    inner = getattr(data, "table", None)
    if isinstance(inner, pa.Table):
        return inner
    if type(data).__module__.split(".")[0] == "pandas":
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    if hasattr(data, "to_arrow"):
        return data.to_arrow()
    raise InvalidParameterError(f"cannot anonymize a {type(data).__name__}",
                                remedy="pass a Dataset (e.g. statcurator.datasets.adult()), or a "
                                       "pyarrow/pandas/Polars table together with meta=")


def effective_meta(meta: TableMeta, criteria: Sequence[Criterion], *,
                   qi: Sequence[str] | None = None,
                   sensitive: Sequence[str] | None = None) -> TableMeta:
    """The metadata of this run: ``sensitive`` columns stop being QIs, ``qi`` restricts the QIs,
    and a column a criterion protects becomes sensitive (it may not be an explicit QI)."""
    if isinstance(qi, str):
        qi = _names(qi)
    if isinstance(sensitive, str):
        sensitive = [sensitive]
    explicit_qi = set(qi) if qi is not None else set()
    # A column a criterion protects is sensitive in this run: when the metadata declares it
    # a quasi-identifier (as the bundled Adult metadata does for every column), it stops
    # being one, as in ARX. Asking for it explicitly as a QI of the run is a contradiction.
    protected = [c.sensitive_column for c in criteria if c.sensitive_column]
    for col in protected:
        if col in explicit_qi:
            crit = next(c for c in criteria if c.sensitive_column == col)
            raise InvalidParameterError(
                f"the column {col!r} is a quasi-identifier, so it cannot be the sensitive "
                f"attribute of {crit}",
                remedy=f"drop {col!r} from the QIs of this run (qi=...), or protect another "
                       f"column")
    auto = [c for c in protected if c in meta and meta[c].role == Role.QUASI_IDENTIFIER
            and c not in (sensitive or [])]
    if auto:
        sensitive = list(sensitive or []) + list(dict.fromkeys(auto))
    if sensitive:
        for col in sensitive:
            if meta[col].role == Role.IDENTIFIER:
                raise MetadataError(f"the column {col!r} is an identifier and is removed from "
                                    f"releases; it cannot be a sensitive attribute",
                                    remedy="declare it sensitive or insensitive in the metadata")
        meta = meta.with_roles({c: Role.SENSITIVE for c in sensitive})
    if qi is not None:
        qi = list(qi)
        bad = [q for q in qi if q in meta and meta[q].role == Role.SENSITIVE]
        if bad:
            raise InvalidParameterError(
                f"the column(s) {bad} cannot be quasi-identifiers and sensitive in the same run",
                remedy="drop them from the QI list or from the sensitive columns")
        # naming a column as a QI of the run makes it one (e.g. data without metadata);
        # identifiers stay refused: they are removed from every release
        meta = meta.with_roles({q: Role.QUASI_IDENTIFIER for q in qi
                                if meta[q].role == Role.INSENSITIVE})
        meta = meta.restrict_quasi_identifiers(qi)
    promote = {}
    for c in criteria:
        col = c.sensitive_column
        if col is None:
            continue
        if col not in meta:
            raise MetadataError(f"{c} protects the column {col!r}, which the data does not have",
                                remedy="columns are: " + ", ".join(meta.names))
        role = meta[col].role
        if role == Role.IDENTIFIER:
            raise InvalidParameterError(f"the column {col!r} is an identifier (removed from the "
                                        f"release), so {c} cannot protect it",
                                        remedy="declare it sensitive in the metadata")
        if role == Role.INSENSITIVE:
            promote[col] = Role.SENSITIVE
    return meta.with_roles(promote) if promote else meta


def prepare(data: Any, meta: TableMeta | None, criteria: Sequence[Criterion], *,
            suppression: Any = 0, metric: str = "loss", qi: Sequence[str] | None = None,
            sensitive: Sequence[str] | None = None, need_hierarchies: bool = True) -> Problem:
    """Validate a run and code its data (see the module docstring)."""
    table = as_table(data)
    if meta is None:
        meta = getattr(data, "meta", None)
    if meta is None:
        raise MetadataError("no metadata: the quasi-identifiers and their hierarchies are unknown",
                            remedy="pass meta= (e.g. statcurator.load_metadata('data.toml')) or "
                                   "a Dataset")
    criteria = tuple(criteria)
    if not criteria:
        raise InvalidParameterError("no privacy criterion given",
                                    remedy="pass at least one, e.g. KAnonymity(5)")
    for c in criteria:
        if not isinstance(c, Criterion):
            raise InvalidParameterError(f"{c!r} is not a privacy criterion",
                                        remedy="pass KAnonymity(...), LDiversity(...), "
                                               "TCloseness(...) or DeltaPresence(...)")
    missing = [c for c in meta.names if c not in table.column_names]
    if missing:
        raise MetadataError(f"the metadata declares column(s) {missing} that the data lacks",
                            remedy="data columns are: " + ", ".join(table.column_names))
    meta = effective_meta(meta, criteria, qi=qi, sensitive=sensitive)
    qis = meta.quasi_identifiers
    if not qis:
        raise MetadataError(f"table {meta.name!r} has no quasi-identifiers",
                            remedy='declare role = "quasi-identifier" for the columns an attacker '
                                   'could link on, or pass qi=[...]')
    n = table.num_rows
    if n == 0:
        raise InvalidParameterError("the table is empty", remedy="anonymize a non-empty table")
    frac = exact(suppression, "suppression", allow_zero=True, maximum=1)
    limit = math.floor(frac * n)
    population = None
    for c in criteria:
        if isinstance(c, DeltaPresence):
            if population is not None:
                raise InvalidParameterError("more than one δ-presence criterion",
                                            remedy="combine them into one DeltaPresence")
            if c.population is None:
                raise InvalidParameterError("δ-presence needs the population table",
                                            remedy="pass DeltaPresence(dmin, dmax, population)")
            population = as_table(c.population)
    hierarchies = []
    automatic: dict[str, str] = {}
    named = set(_names(qi))
    for col in qis:
        spec = meta[col].hierarchy
        if spec is None:
            numeric = meta[col].type in (ColumnType.INTEGER, ColumnType.REAL)
            if not need_hierarchies:
                # Mondrian needs no hierarchy: ranges for numbers, one part per value otherwise
                present = {v for v in text_values(table.column(col)) if v is not None}
                values = sorted(present, key=Fraction) if numeric else sorted(present)
                hierarchies.append(Hierarchy.from_rows(col, [[v, "*"] for v in values],
                                                       "values of the data"))
                automatic[col] = ("none declared: the ranges of Mondrian's partitions" if numeric
                                  else "none declared: the value, or * for a mixed partition")
                continue
            if col in named:
                # a QI named for this run without a declared hierarchy: intervals for
                # numbers, suppression only otherwise (the result and its report say so)
                present = set(text_values(table.column(col)))
                if population is not None and col in population.column_names:
                    present |= set(text_values(population.column(col)))
                h = Hierarchy.automatic(col, present, numeric)
                hierarchies.append(h)
                automatic[col] = h.source
                continue
            raise MetadataError(
                f"the quasi-identifier {col!r} has no generalization hierarchy",
                remedy=f"declare one in [columns.{col}], e.g. hierarchy = \"{col}.csv\" or "
                       f"hierarchy = {{ intervals = [5, 10, 20] }}; or name it in qi=[...] for "
                       f"an automatic one; or use algorithm='mondrian'")
        needs_values = spec is not None and spec.kind in ("intervals", "masking")
        values = None
        if needs_values:
            # generated hierarchies cover every value of the data (and of the population)
            values = set(text_values(table.column(col))) - {None}
            if population is not None and col in population.column_names:
                values |= set(text_values(population.column(col))) - {None}
        hierarchies.append(Hierarchy.from_spec(spec, col, values))  # type: ignore[arg-type]
    domains: dict[str, SensitiveDomain] = {}
    used = {c.sensitive_column for c in criteria if c.sensitive_column}
    for col in (c for c in meta.sensitive if c in used):
        spec = meta[col].hierarchy
        values = text_values(table.column(col))
        h = None
        if spec is not None:
            h = Hierarchy.from_spec(spec, col, set(values) - {None})
            h.index(set(values))  # a value its hierarchy lacks is refused, as for QIs
        domains[col] = SensitiveDomain.from_values(col, values, h, meta[col].categories and
                                                   [str(x) for x in meta[col].categories])
    for c in criteria:
        c.validate(n, domains)
    obj = objective(metric)
    enc = encode(table, qis, hierarchies, domains, population)
    evaluator = NodeEvaluator(enc, criteria, limit, obj)
    return Problem(table, meta, criteria, frac, limit, obj.name, obj, enc, evaluator, population,
                   automatic)


def _names(qi: Sequence[str] | str | None) -> list[str]:
    if qi is None:
        return []
    return [q.strip() for q in qi.split(",") if q.strip()] if isinstance(qi, str) else list(qi)
