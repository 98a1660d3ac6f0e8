"""Dataset metadata: what is *declared* public about a table.

One :class:`TableMeta` describes a table for both pillars: the anonymization side reads
column roles and generalization hierarchies; the DP side reads types, bounds, public
categories, the privacy unit and the neighbour relation. Nothing here is ever read from the
private data — that is the point (DESIGN.md, "What is public is declared").

The values are parsed from a TOML file by :mod:`statcurator.io.metadata`; this module holds
only the frozen values and their validation.

>>> age = Column("age", type="integer", role=Role.QUASI_IDENTIFIER, bounds=(0, 120))
>>> sex = Column("sex", type="string", categories=("Female", "Male"))
>>> meta = TableMeta("people", (age, sex))
>>> meta.quasi_identifiers
('age',)
>>> meta["sex"].categories
('Female', 'Male')
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from .errors import InvalidParameterError, MetadataError
from .numbers import exact
from .policy import Policy

__all__ = [
    "Role",
    "ColumnType",
    "HierarchySpec",
    "Column",
    "PrivacyUnit",
    "Neighbours",
    "TableMeta",
]


class Role(enum.StrEnum):
    """The role a column plays in anonymization (Sweeney; Machanavajjhala et al.)."""

    IDENTIFIER = "identifier"  # removed from every release (name, SSN)
    QUASI_IDENTIFIER = "quasi-identifier"  # generalized; linkable to outside data
    SENSITIVE = "sensitive"  # protected by l-diversity / t-closeness, kept as is
    INSENSITIVE = "insensitive"  # kept as is

    @classmethod
    def parse(cls, text: str, column: str) -> Role:
        aliases = {"qi": cls.QUASI_IDENTIFIER, "quasi_identifier": cls.QUASI_IDENTIFIER,
                   "quasi-identifying": cls.QUASI_IDENTIFIER, "id": cls.IDENTIFIER,
                   "identifying": cls.IDENTIFIER}
        key = str(text).strip().lower()
        if key in aliases:
            return aliases[key]
        try:
            return cls(key)
        except ValueError:
            raise MetadataError(
                f"column {column!r} has an unknown role {text!r}",
                remedy="use one of: " + ", ".join(r.value for r in cls)) from None


class ColumnType(enum.StrEnum):
    """Logical column types. Hierarchies and categories are matched on the text form."""

    INTEGER = "integer"
    REAL = "real"
    STRING = "string"
    BOOLEAN = "boolean"

    @classmethod
    def parse(cls, text: str, column: str) -> ColumnType:
        aliases = {"int": cls.INTEGER, "float": cls.REAL, "double": cls.REAL,
                   "numeric": cls.REAL, "str": cls.STRING, "text": cls.STRING,
                   "categorical": cls.STRING, "bool": cls.BOOLEAN}
        key = str(text).strip().lower()
        if key in aliases:
            return aliases[key]
        try:
            return cls(key)
        except ValueError:
            raise MetadataError(
                f"column {column!r} has an unknown type {text!r}",
                remedy="use one of: " + ", ".join(t.value for t in cls)) from None

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.REAL)


@dataclass(frozen=True)
class HierarchySpec:
    """How to obtain a column's generalization hierarchy (built by ``anonymize.hierarchy``).

    ``kind`` is one of

    * ``"file"`` — an ARX-format CSV (``path``; ``separator`` defaults to ``;``): one row per
      value, column i = level i, last column the most general;
    * ``"intervals"`` — numeric intervals: ``widths`` of the levels above the raw value, each a
      multiple of the previous one, aligned at ``origin`` (default 0), then ``*``;
    * ``"masking"`` — right-to-left masking of fixed-length codes (zip codes): level i masks
      the last i characters with ``mask`` (default ``*``), up to ``length`` characters;
    * ``"tree"`` — an inline tree, ``tree`` a nested mapping whose leaves are lists of values;
      the root ``*`` is implicit.
    """

    kind: str
    path: str | None = None
    separator: str = ";"
    widths: tuple[int | Fraction, ...] = ()
    origin: int | Fraction = 0
    length: int | None = None
    mask: str = "*"
    tree: Any = None  # nested dict (kept as given; frozen dataclass does not deep-freeze)

    KINDS = ("file", "intervals", "masking", "tree")

    def __post_init__(self) -> None:
        if self.kind not in self.KINDS:
            raise MetadataError(f"unknown hierarchy kind {self.kind!r}",
                                remedy="use one of: " + ", ".join(self.KINDS))

    def __hash__(self) -> int:  # tree is a dict: hash by identity of the spec's scalar parts
        return hash((self.kind, self.path, self.separator, self.widths, self.origin,
                     self.length, self.mask))


@dataclass(frozen=True)
class Column:
    """One column's declared metadata.

    ``bounds`` (numeric columns) are the public clamping range used by DP aggregates;
    ``categories`` are the public set of values (the group-by keys DP may release without
    partition selection). ``nullable`` says whether NULLs may occur. ``policy`` is the
    column's Blowfish policy (:class:`~statcurator.core.policy.Policy`, or its metadata form
    ``{"graph": "threshold", "theta": 5}``): which of its values are secrets; None is plain DP.
    """

    name: str
    type: ColumnType | str = ColumnType.STRING
    role: Role | str = Role.INSENSITIVE
    hierarchy: HierarchySpec | None = None
    bounds: tuple[Fraction, Fraction] | None = None
    categories: tuple[Any, ...] | None = None
    nullable: bool = False
    description: str = ""
    policy: Policy | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise MetadataError("a column has no name", remedy="give every column a name")
        self._check_policy()
        if not isinstance(self.type, ColumnType):
            object.__setattr__(self, "type", ColumnType.parse(self.type, self.name))
        if not isinstance(self.role, Role):
            object.__setattr__(self, "role", Role.parse(self.role, self.name))
        if self.bounds is not None:
            if self.type not in (ColumnType.INTEGER, ColumnType.REAL):
                raise MetadataError(f"column {self.name!r} has bounds but type {self.type}",
                                    remedy="declare type = \"integer\" or \"real\", or drop bounds")
            try:
                lo, hi = self.bounds
            except (TypeError, ValueError):
                raise MetadataError(f"column {self.name!r}: bounds must be a pair [low, high]",
                                    remedy="write bounds = [0, 120]") from None
            try:
                lo = exact(lo, f"column {self.name!r} bounds low", positive=False, strings=False)
                hi = exact(hi, f"column {self.name!r} bounds high", positive=False, strings=False)
            except InvalidParameterError as e:
                raise MetadataError(e.problem, remedy="write bounds = [0, 120]") from None
            if not lo <= hi:
                raise MetadataError(f"column {self.name!r}: bounds [{lo}, {hi}] are reversed",
                                    remedy="write bounds = [low, high] with low <= high")
            object.__setattr__(self, "bounds", (lo, hi))
        if self.categories is not None:
            cats = tuple(self.categories)
            if len(set(cats)) != len(cats):
                raise MetadataError(f"column {self.name!r} lists a category twice",
                                    remedy="list each public category once")
            object.__setattr__(self, "categories", cats)

    def _check_policy(self) -> None:
        if self.policy is None:
            return
        if not isinstance(self.policy, Policy):
            object.__setattr__(self, "policy", Policy.from_spec(self.policy, self.name))
        policy = self.policy
        assert isinstance(policy, Policy)
        kind = ColumnType.parse(self.type, self.name) if not isinstance(
            self.type, ColumnType) else self.type
        if policy.graph == "threshold" and not kind.numeric:
            raise MetadataError(f"column {self.name!r}: a distance-threshold policy needs an "
                                f"ordered (numeric) column, not {kind.value}",
                                remedy='declare type = "integer" or "real", or use '
                                       'graph = "partition"')
        if policy.graph == "partition" and self.categories is not None:
            listed = {v for block in policy.blocks or () for v in block}
            missing = [c for c in self.categories if c not in listed]
            if missing:
                raise MetadataError(f"column {self.name!r}: the policy's blocks leave out "
                                    f"categories {missing}",
                                    remedy="put every category in one block")

    def with_role(self, role: Role | str) -> Column:
        return replace(self, role=role)


class Neighbours(enum.StrEnum):
    """Which datasets count as neighbours.

    ``UNBOUNDED``: D' is D with one privacy unit added or removed.
    ``BOUNDED``: D' is D with one privacy unit's data changed (same size; the size is public).
    """

    UNBOUNDED = "unbounded"
    BOUNDED = "bounded"


@dataclass(frozen=True)
class PrivacyUnit:
    """Whom the guarantee protects: a row; a person — or a household, a family — whose key
    ``column`` identifies its up to ``max_rows`` rows; or a group of up to ``group_size``
    correlated rows that no column identifies.

    ``column`` is ``None`` for "one row is one person". ``max_groups`` bounds how many
    groups of a GROUP BY one person may contribute to (None: at most ``max_rows``).

    ``group_size`` = k is *group privacy* where only a bound on the size of the groups is
    known (Dwork–Smith: a group of k rows is protected at kε by an ε-DP release). No
    contribution bounding is possible without a key, so every sensitivity is multiplied by
    k and the ε charged protects a whole group; ``max_rows`` is then k too. With a key
    column, declare ``max_rows`` instead (the rows beyond it are dropped).

    >>> PrivacyUnit().is_row
    True
    >>> PrivacyUnit("patient_id", max_rows=5).max_rows
    5
    >>> u = PrivacyUnit(group_size=4)
    >>> (u.is_row, u.is_group, u.max_rows), u.describe()
    ((False, True, 4), 'a group of up to 4 correlated rows (no key column: group privacy)')
    """

    column: str | None = None
    max_rows: int = 1
    max_groups: int | None = None
    group_size: int | None = None

    def __post_init__(self) -> None:
        if self.group_size is not None:
            self._check_group_size()
        for name in ("max_rows", "max_groups"):
            v = getattr(self, name)
            if v is None:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise MetadataError(f"privacy unit {name} must be a positive integer, got {v!r}",
                                    remedy=f"write {name} = 1 (or the largest number a person may have)")
        if self.column is None and self.max_rows != 1 and self.group_size is None:
            raise MetadataError("max_rows > 1 needs a person id column",
                                remedy='write privacy_unit = { column = "person_id", max_rows = 5 }'
                                       ', or { group_size = 5 } when no column identifies '
                                       "the groups")

    def _check_group_size(self) -> None:
        k = self.group_size
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise MetadataError(f"privacy unit group_size must be a positive integer, got {k!r}",
                                remedy="write group_size = 4 (the largest group of correlated rows)")
        if self.column is not None:
            raise MetadataError(
                f"privacy unit declares both a key column {self.column!r} and group_size",
                remedy=f'the key identifies each unit, so max_rows is the bound: write '
                       f'privacy_unit = {{ column = "{self.column}", max_rows = {k} }}')
        if self.max_groups is not None:
            raise MetadataError(
                "privacy unit declares max_groups with group_size: without a key column "
                "nothing bounds the groups a unit touches",
                remedy="drop max_groups (a group of k rows may touch k groups), or declare "
                       "the group's key column with max_rows and max_groups")
        if self.max_rows not in (1, k):
            raise MetadataError(
                f"privacy unit declares max_rows = {self.max_rows} and group_size = {k}",
                remedy=f"write only group_size = {k}: a group of up to {k} rows")
        if k == 1:  # a group of one row is a row
            object.__setattr__(self, "group_size", None)
        else:
            object.__setattr__(self, "max_rows", k)

    @property
    def is_row(self) -> bool:
        """One row is one unit (no key column, no group)."""
        return self.column is None and self.group_size is None

    @property
    def is_group(self) -> bool:
        """A group of up to ``group_size`` rows that no column identifies."""
        return self.column is None and self.group_size is not None

    def describe(self) -> str:
        """The unit in words (for explanations and release provenance).

        >>> PrivacyUnit("household", max_rows=6).describe()
        "a unit of column 'household' with up to 6 rows"
        """
        if self.is_row:
            return "one row"
        if self.is_group:
            return (f"a group of up to {self.group_size} correlated rows "
                    "(no key column: group privacy)")
        return f"a unit of column {self.column!r} with up to {self.max_rows} rows"


@dataclass(frozen=True)
class TableMeta:
    """Metadata of one table: its columns and its privacy unit.

    ``rows`` is the table size when it is declared public (bounded neighbours need it for
    some queries); it is never read from the data.
    """

    name: str
    columns: tuple[Column, ...]
    privacy_unit: PrivacyUnit = field(default_factory=PrivacyUnit)
    neighbours: Neighbours | str = Neighbours.UNBOUNDED
    rows: int | None = None
    source: str | None = None
    separator: str | None = None
    description: str = ""
    attribution: str = ""

    def __post_init__(self) -> None:
        cols = tuple(self.columns)
        object.__setattr__(self, "columns", cols)
        names = [c.name for c in cols]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise MetadataError(f"table {self.name!r} declares column(s) {dupes} twice",
                                remedy="declare each column once")
        if not isinstance(self.neighbours, Neighbours):
            try:
                object.__setattr__(self, "neighbours", Neighbours(str(self.neighbours).lower()))
            except ValueError:
                raise MetadataError(f"unknown neighbour relation {self.neighbours!r}",
                                    remedy='use neighbours = "unbounded" or "bounded"') from None
        pu = self.privacy_unit
        if pu.column is not None and pu.column not in names:
            raise MetadataError(f"privacy unit column {pu.column!r} is not a declared column",
                                remedy=f"declare [columns.{pu.column}] or fix privacy_unit")
        if self.rows is not None and (isinstance(self.rows, bool) or not isinstance(self.rows, int)
                                      or self.rows < 0):
            raise MetadataError(f"rows must be a non-negative integer, got {self.rows!r}",
                                remedy="declare the public table size, or leave rows out")

    # -- lookup ---------------------------------------------------------------------------
    def __getitem__(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise MetadataError(f"table {self.name!r} has no declared column {name!r}",
                            remedy="declared columns are: " + ", ".join(self.names))

    def __contains__(self, name: object) -> bool:
        return any(c.name == name for c in self.columns)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def with_role(self, role: Role) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns if c.role == role)

    @property
    def quasi_identifiers(self) -> tuple[str, ...]:
        return self.with_role(Role.QUASI_IDENTIFIER)

    @property
    def sensitive(self) -> tuple[str, ...]:
        return self.with_role(Role.SENSITIVE)

    @property
    def identifiers(self) -> tuple[str, ...]:
        return self.with_role(Role.IDENTIFIER)

    # -- derived metadata -----------------------------------------------------------------
    def replace(self, **changes: Any) -> TableMeta:
        return replace(self, **changes)

    def with_roles(self, roles: Mapping[str, Role | str]) -> TableMeta:
        """A copy where the named columns take new roles (e.g. a run's ``--sensitive``).

        >>> m = TableMeta("t", (Column("a", role="qi"), Column("b", role="qi")))
        >>> m.with_roles({"b": "sensitive"}).quasi_identifiers
        ('a',)
        """
        for name in roles:
            self[name]  # raises a MetadataError naming the declared columns
        cols = tuple(c.with_role(roles[c.name]) if c.name in roles else c for c in self.columns)
        return replace(self, columns=cols)

    def restrict_quasi_identifiers(self, keep: Iterable[str]) -> TableMeta:
        """Keep only ``keep`` as quasi-identifiers; other QIs become insensitive."""
        keep = list(keep)
        for name in keep:
            if self[name].role != Role.QUASI_IDENTIFIER:
                raise MetadataError(f"column {name!r} is not a declared quasi-identifier",
                                    remedy="declare role = \"quasi-identifier\" in the metadata "
                                           "or drop it from the QI list")
        roles = {c.name: Role.INSENSITIVE for c in self.columns
                 if c.role == Role.QUASI_IDENTIFIER and c.name not in keep}
        return self.with_roles(roles)
