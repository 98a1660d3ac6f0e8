"""Read and write dataset metadata files (TOML).

A metadata file declares, for one table, everything that is public about it. Example::

    [table]
    name = "patients"
    source = "patients.csv"          # relative to this file; optional
    separator = ";"                  # CSV separator; default ","
    neighbours = "unbounded"         # or "bounded" (change one record; size public)
    privacy_unit = "row"             # or { column = "patient_id", max_rows = 5, max_groups = 2 }
                                     # or { group_size = 4 }: groups of <= 4 rows, no key
    rows = 1000                      # optional: the table size, if it is public

    [columns.age]
    type = "integer"                 # integer | real | string | boolean
    role = "quasi-identifier"        # identifier | quasi-identifier | sensitive | insensitive
    hierarchy = { intervals = [5, 10, 20] }   # or "age.csv" (ARX format), see below
    bounds = [0, 120]                # public clamping range for DP aggregates
    policy = { graph = "threshold", theta = 5 }   # optional Blowfish policy (docs/policies.md)

    [columns.zip]
    type = "string"
    role = "quasi-identifier"
    hierarchy = { masking = 5 }      # right-to-left masking of 5-character codes

    [columns.disease]
    type = "string"
    role = "sensitive"
    categories = ["flu", "gastritis", "pneumonia"]   # public category set (GROUP BY keys)

    [columns.disease.hierarchy.tree]  # an inline tree; the root "*" is implicit
    "stomach disease" = ["gastritis"]
    "lung disease" = ["flu", "pneumonia"]

Hierarchies may be written as a path string (an ARX-format CSV relative to the metadata
file), or as a table with one of the keys ``file``, ``intervals``, ``masking``, ``tree``
(plus ``separator``, ``origin``, ``mask`` where they apply). ``categories = "hierarchy"``
takes the public categories from the first column of a file or tree hierarchy.

Columns are quasi-identifiers only when declared so; undeclared columns of the data are
insensitive.

>>> text = '''
... [table]
... name = "t"
... [columns.age]
... type = "integer"
... role = "qi"
... hierarchy = { intervals = [10, 20] }
... bounds = [0, 100]
... '''
>>> meta = parse_metadata(text)
>>> meta["age"].hierarchy.widths, meta.quasi_identifiers
((10, 20), ('age',))
"""

from __future__ import annotations

import csv
import tomllib
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.errors import InvalidParameterError, MetadataError
from ..core.numbers import exact
from ..core.policy import Policy
from ..core.schema import Column, HierarchySpec, PrivacyUnit, TableMeta

__all__ = ["load_metadata", "parse_metadata", "dump_metadata", "hierarchy_leaves"]

_TABLE_KEYS = {"name", "source", "separator", "neighbours", "privacy_unit", "rows",
               "description", "attribution"}
_COLUMN_KEYS = {"type", "role", "hierarchy", "bounds", "categories", "nullable", "description",
                "policy"}


def load_metadata(path: str | Path) -> TableMeta:
    """Read a metadata TOML file; relative paths inside it are resolved against its folder."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise MetadataError(f"metadata file {str(p)!r} does not exist",
                            remedy="check the path, or pass the bundled name 'adult'") from None
    return parse_metadata(text, base=p.parent, origin=str(p))


def parse_metadata(text: str, *, base: str | Path | None = None,
                   origin: str = "<metadata>") -> TableMeta:
    """Parse metadata TOML text into a :class:`~statcurator.core.schema.TableMeta`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise MetadataError(f"{origin} is not valid TOML ({e})",
                            remedy="fix the syntax; see docs/metadata.md for the format") from None
    base_dir = Path(base) if base is not None else None
    table = doc.get("table", {})
    if not isinstance(table, Mapping):
        raise MetadataError(f"{origin}: [table] must be a table", remedy="write a [table] section")
    unknown = set(table) - _TABLE_KEYS
    if unknown:
        raise MetadataError(f"{origin}: unknown key(s) {sorted(unknown)} in [table]",
                            remedy="allowed keys: " + ", ".join(sorted(_TABLE_KEYS)))
    columns_doc = doc.get("columns", {})
    if not isinstance(columns_doc, Mapping) or not columns_doc:
        raise MetadataError(f"{origin} declares no columns",
                            remedy="add a [columns.NAME] section for each column")
    columns = tuple(_parse_column(name, spec, base_dir, origin)
                    for name, spec in columns_doc.items())
    source = table.get("source")
    if source is not None and base_dir is not None and not Path(source).is_absolute():
        source = str((base_dir / source).resolve())
    return TableMeta(
        name=str(table.get("name") or (Path(origin).stem if origin != "<metadata>" else "data")),
        columns=columns,
        privacy_unit=_parse_unit(table.get("privacy_unit", "row"), origin),
        neighbours=str(table.get("neighbours", "unbounded")),
        rows=table.get("rows"),
        source=source,
        separator=table.get("separator"),
        description=str(table.get("description", "")),
        attribution=str(table.get("attribution", "")),
    )


def _parse_unit(value: Any, origin: str) -> PrivacyUnit:
    if value in (None, "row", "record"):
        return PrivacyUnit()
    if isinstance(value, str):
        return PrivacyUnit(column=value)
    if isinstance(value, Mapping):
        extra = set(value) - {"column", "max_rows", "max_groups", "group_size"}
        if extra:
            raise MetadataError(f"{origin}: unknown privacy_unit key(s) {sorted(extra)}",
                                remedy="use column, max_rows and max_groups (or group_size)")
        return PrivacyUnit(column=value.get("column"), max_rows=value.get("max_rows", 1),
                           max_groups=value.get("max_groups"),
                           group_size=value.get("group_size"))
    raise MetadataError(f"{origin}: privacy_unit must be \"row\" or a table, got {value!r}",
                        remedy='write privacy_unit = { column = "person_id", max_rows = 5 }')


def _parse_column(name: str, spec: Any, base: Path | None, origin: str) -> Column:
    if not isinstance(spec, Mapping):
        raise MetadataError(f"{origin}: [columns.{name}] must be a table",
                            remedy=f'write [columns.{name}] with type = "..." and role = "..."')
    unknown = set(spec) - _COLUMN_KEYS
    if unknown:
        raise MetadataError(f"{origin}: column {name!r} has unknown key(s) {sorted(unknown)}",
                            remedy="allowed keys: " + ", ".join(sorted(_COLUMN_KEYS)))
    hierarchy = _parse_hierarchy(name, spec["hierarchy"], base, origin) \
        if "hierarchy" in spec else None
    categories = spec.get("categories")
    if categories == "hierarchy":
        if hierarchy is None or hierarchy.kind not in ("file", "tree"):
            raise MetadataError(
                f"column {name!r}: categories = \"hierarchy\" needs a file or tree hierarchy",
                remedy="list the categories explicitly: categories = [\"a\", \"b\"]")
        categories = hierarchy_leaves(hierarchy)
    elif categories is not None and not isinstance(categories, list):
        raise MetadataError(f"column {name!r}: categories must be a list or \"hierarchy\"",
                            remedy='write categories = ["a", "b"]')
    bounds = spec.get("bounds")
    if bounds is not None:
        if not isinstance(bounds, list):
            raise MetadataError(f"column {name!r}: bounds must be a pair [low, high]",
                                remedy="write bounds = [0, 120]")
        bounds = [_number(b, f"column {name!r} bounds") for b in bounds]
    return Column(name=name, type=spec.get("type", "string"), role=spec.get("role", "insensitive"),
                  hierarchy=hierarchy,
                  bounds=tuple(bounds) if bounds is not None else None,  # type: ignore[arg-type]
                  categories=tuple(categories) if categories is not None else None,
                  nullable=bool(spec.get("nullable", False)),
                  description=str(spec.get("description", "")),
                  policy=Policy.from_spec(spec["policy"], name) if "policy" in spec else None)


def _parse_hierarchy(column: str, spec: Any, base: Path | None, origin: str) -> HierarchySpec:
    def resolve(path: str) -> str:
        p = Path(path)
        if not p.is_absolute() and base is not None:
            p = base / p
        return str(p.resolve()) if base is not None else str(p)

    if isinstance(spec, str):
        return HierarchySpec("file", path=resolve(spec))
    if not isinstance(spec, Mapping):
        raise MetadataError(f"column {column!r}: hierarchy must be a path or a table",
                            remedy='write hierarchy = "file.csv" or hierarchy = { masking = 5 }')
    kind = spec.get("kind")
    kinds = [k for k in ("file", "path", "intervals", "masking", "tree") if k in spec]
    if kind is None:
        if len(kinds) != 1:
            raise MetadataError(
                f"column {column!r}: hierarchy must have exactly one of file, intervals, masking, tree",
                remedy='e.g. hierarchy = { intervals = [5, 10, 20] }')
        kind = "file" if kinds[0] == "path" else kinds[0]
    try:
        if kind == "file":
            return HierarchySpec("file", path=resolve(spec.get("file") or spec["path"]),
                                 separator=spec.get("separator", ";"))
        if kind == "intervals":
            widths = spec["intervals"] if "intervals" in spec else spec["widths"]
            if not isinstance(widths, list) or not widths:
                raise MetadataError(f"column {column!r}: intervals must be a non-empty list of widths",
                                    remedy="write hierarchy = { intervals = [5, 10, 20] }")
            what = f"column {column!r} interval"
            return HierarchySpec("intervals", widths=tuple(_number(w, what) for w in widths),
                                 origin=_number(spec.get("origin", 0), what))
        if kind == "masking":
            length = spec.get("masking", spec.get("length"))
            if isinstance(length, bool) or not isinstance(length, int) or length < 1:
                raise MetadataError(f"column {column!r}: masking needs the code length",
                                    remedy="write hierarchy = { masking = 5 } for 5-digit codes")
            return HierarchySpec("masking", length=length, mask=spec.get("mask", "*"))
        if kind == "tree":
            tree = spec["tree"]
            if not isinstance(tree, Mapping):
                raise MetadataError(f"column {column!r}: tree must be a table of subtrees",
                                    remedy="see docs/metadata.md for the inline tree format")
            return HierarchySpec("tree", tree=_plain(tree))
    except KeyError as e:
        raise MetadataError(f"column {column!r}: hierarchy of kind {kind!r} is missing {e}",
                            remedy="see docs/metadata.md for the hierarchy formats") from None
    raise MetadataError(f"column {column!r}: unknown hierarchy kind {kind!r}",
                        remedy="use file, intervals, masking or tree")


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [str(v) for v in value]
    return str(value)


def hierarchy_leaves(spec: HierarchySpec) -> tuple[str, ...]:
    """The raw values (level 0) a file or tree hierarchy lists, in file order."""
    if spec.kind == "file":
        assert spec.path is not None
        try:
            with open(spec.path, newline="", encoding="utf-8") as f:
                return tuple(row[0] for row in csv.reader(f, delimiter=spec.separator) if row)
        except FileNotFoundError:
            raise MetadataError(f"hierarchy file {spec.path!r} does not exist",
                                remedy="fix the path (relative paths are read from the "
                                       "metadata file's folder)") from None
    if spec.kind == "tree":
        out: list[str] = []

        def walk(node: Any) -> None:
            if isinstance(node, Mapping):
                for child in node.values():
                    walk(child)
            elif isinstance(node, list):
                out.extend(node)
            else:
                out.append(node)

        walk(spec.tree)
        return tuple(out)
    raise MetadataError(f"a {spec.kind} hierarchy does not list its values",
                        remedy="declare categories explicitly")


def _number(value: Any, what: str) -> Any:
    """A number of the metadata, exactly: TOML integers stay integers; floats are read as their
    shortest decimal (``0.1`` is 1/10); strings such as ``"1/3"`` carry what no decimal can."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise MetadataError(f"{what} {value!r} is not a number",
                            remedy='write a number such as 5, 2.5 or "1/3"')
    if isinstance(value, int):
        return value
    try:
        return exact(value, what, positive=False, strings=True)
    except InvalidParameterError as e:
        raise MetadataError(e.problem, remedy='write a number such as 5, 2.5 or "1/3"') from None


def _toml_number(x: Any) -> int | float | str:
    """How an exact number is written: an integer, a decimal when the reader gets exactly the
    same value back from it, else the string ``"p/q"`` (TOML has no rationals)."""
    x = Fraction(x)
    if x.denominator == 1:
        return x.numerator
    f = float(x)
    return f if Fraction(repr(f)) == x else f"{x.numerator}/{x.denominator}"


def dump_metadata(meta: TableMeta) -> str:
    """Render metadata as TOML (inverse of :func:`parse_metadata` for every declared field).

    Written with ``tomli-w``, so that any string (quotes, control characters) is valid TOML;
    bounds and interval widths that no decimal represents (1/3) are written as strings.

    >>> m = parse_metadata('[table]\\nname = "t"\\n[columns.a]\\ntype = "real"\\nbounds = [0, "1/3"]\\n')
    >>> print(dump_metadata(m))
    [table]
    name = "t"
    neighbours = "unbounded"
    privacy_unit = "row"
    <BLANKLINE>
    [columns.a]
    type = "real"
    role = "insensitive"
    bounds = [
        0,
        "1/3",
    ]
    <BLANKLINE>
    >>> parse_metadata(dump_metadata(m)) == m
    True
    """
    import tomli_w

    table: dict[str, Any] = {"name": meta.name}
    if meta.source is not None:
        table["source"] = meta.source
    if meta.separator is not None:
        table["separator"] = meta.separator
    table["neighbours"] = meta.neighbours.value  # type: ignore[union-attr]
    pu = meta.privacy_unit
    if pu.is_row:
        table["privacy_unit"] = "row"
    elif pu.is_group:
        table["privacy_unit"] = {"group_size": pu.group_size}
    else:
        unit: dict[str, Any] = {"column": pu.column, "max_rows": pu.max_rows}
        if pu.max_groups is not None:
            unit["max_groups"] = pu.max_groups
        table["privacy_unit"] = unit
    if meta.rows is not None:
        table["rows"] = meta.rows
    for key in ("description", "attribution"):
        if getattr(meta, key):
            table[key] = getattr(meta, key)
    return tomli_w.dumps({"table": table,
                          "columns": {c.name: _column_doc(c) for c in meta.columns}})


def _column_doc(c: Column) -> dict[str, Any]:
    doc: dict[str, Any] = {"type": c.type.value, "role": c.role.value}  # type: ignore[union-attr]
    if c.bounds is not None:
        doc["bounds"] = [_toml_number(b) for b in c.bounds]
    if c.categories is not None:
        doc["categories"] = [_toml_value(v) for v in c.categories]
    if c.nullable:
        doc["nullable"] = True
    if c.description:
        doc["description"] = c.description
    if c.policy is not None:
        doc["policy"] = c.policy.to_spec()
    h = c.hierarchy
    if h is not None:
        if h.kind == "file":
            doc["hierarchy"] = {"file": h.path, "separator": h.separator}
        elif h.kind == "intervals":
            doc["hierarchy"] = {"intervals": [_toml_number(w) for w in h.widths],
                                "origin": _toml_number(h.origin)}
        elif h.kind == "masking":
            doc["hierarchy"] = {"masking": h.length, "mask": h.mask}
        else:
            doc["hierarchy"] = {"tree": h.tree}
    return doc


def _toml_value(v: Any) -> Any:
    return _toml_number(v) if isinstance(v, Fraction) else v
