"""Dataset metadata: the TOML format, its validation, and its errors."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.core.errors import MetadataError
from statcurator.core.policy import Policy
from statcurator.core.schema import (
    Column,
    ColumnType,
    HierarchySpec,
    Neighbours,
    PrivacyUnit,
    Role,
    TableMeta,
)
from statcurator.io.metadata import dump_metadata, load_metadata, parse_metadata

FULL = """
[table]
name = "patients"
source = "patients.csv"
separator = ";"
neighbours = "bounded"
privacy_unit = { column = "pid", max_rows = 5, max_groups = 2 }
rows = 1000

[columns.pid]
type = "integer"
role = "identifier"

[columns.age]
type = "integer"
role = "quasi-identifier"
hierarchy = { intervals = [5, 10, 20] }
bounds = [0, 120]

[columns.zip]
type = "string"
role = "qi"
hierarchy = { masking = 5 }

[columns.income]
type = "real"
bounds = [0, 200000.5]

[columns.disease]
type = "string"
role = "sensitive"
categories = "hierarchy"

[columns.disease.hierarchy.tree]
"digestive" = { "stomach" = ["gastritis", "gastric ulcer"] }
"respiratory" = { "lung" = ["flu", "pneumonia"] }
"""


def test_full_example_parses(tmp_path: Path) -> None:
    f = tmp_path / "patients.toml"
    f.write_text(FULL)
    meta = load_metadata(f)
    assert meta.name == "patients"
    assert meta.source == str((tmp_path / "patients.csv").resolve())
    assert meta.neighbours is Neighbours.BOUNDED
    assert meta.privacy_unit == PrivacyUnit("pid", max_rows=5, max_groups=2)
    assert meta.rows == 1000
    assert meta.quasi_identifiers == ("age", "zip")
    assert meta.identifiers == ("pid",)
    assert meta.sensitive == ("disease",)
    assert meta["income"].role is Role.INSENSITIVE  # undeclared role: never a QI
    assert meta["income"].bounds == (0, Fraction(400001, 2))  # exact, not a float
    assert meta["age"].hierarchy.kind == "intervals" and meta["age"].hierarchy.widths == (5, 10, 20)
    assert meta["zip"].hierarchy.kind == "masking" and meta["zip"].hierarchy.length == 5
    assert meta["disease"].categories == ("gastritis", "gastric ulcer", "flu", "pneumonia")
    assert meta["disease"].hierarchy.tree["digestive"]["stomach"] == ["gastritis", "gastric ulcer"]


def test_round_trip_through_dump(tmp_path: Path) -> None:
    f = tmp_path / "patients.toml"
    f.write_text(FULL)
    meta = load_metadata(f)
    again = parse_metadata(dump_metadata(meta))
    assert again == meta
    assert again["disease"].hierarchy.tree == meta["disease"].hierarchy.tree


def test_file_hierarchy_paths_resolve_against_the_toml(tmp_path: Path) -> None:
    (tmp_path / "h").mkdir()
    (tmp_path / "h" / "sex.csv").write_text("M;*\nF;*\n")
    (tmp_path / "m.toml").write_text(
        '[table]\nname="t"\n[columns.sex]\nrole="qi"\nhierarchy="h/sex.csv"\ncategories="hierarchy"\n')
    meta = load_metadata(tmp_path / "m.toml")
    assert meta["sex"].hierarchy.path == str((tmp_path / "h" / "sex.csv").resolve())
    assert meta["sex"].categories == ("M", "F")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('[table]\nname="t"\n', "declares no columns"),
        ('[table]\nname="t"\nfoo=1\n[columns.a]\n', "unknown key(s) ['foo']"),
        ('[columns.a]\nrole="quasi"\n', "unknown role 'quasi'"),
        ('[columns.a]\ntype="decimal128"\n', "unknown type"),
        ('[columns.a]\ntype="string"\nbounds=[0,1]\n', "has bounds but type string"),
        ('[columns.a]\ntype="integer"\nbounds=[5,1]\n', "reversed"),
        ('[columns.a]\ntype="integer"\nbounds=[0,"x"]\n', "is not a number"),
        ('[columns.a]\nhierarchy={masking=0}\n', "masking needs the code length"),
        ('[columns.a]\nhierarchy={intervals=[]}\n', "non-empty list"),
        ('[columns.a]\nhierarchy={masking=5, intervals=[1]}\n', "exactly one of"),
        ('[columns.a]\ncategories=["x","x"]\n', "lists a category twice"),
        ('[columns.a]\ncategories="hierarchy"\n', "needs a file or tree hierarchy"),
        ('[table]\nneighbours="sideways"\n[columns.a]\n', "unknown neighbour relation"),
        ('[table]\nprivacy_unit={column="pid"}\n[columns.a]\n', "not a declared column"),
        ('[table]\nprivacy_unit={column="a", max_rows=0}\n[columns.a]\n', "positive integer"),
        ('[columns.a\n', "not valid TOML"),
        ('[columns.a]\nextra=1\n', "unknown key(s) ['extra']"),
    ],
)
def test_bad_metadata_is_refused_with_a_remedy(text: str, fragment: str) -> None:
    with pytest.raises(MetadataError) as info:
        parse_metadata(text)
    assert fragment in str(info.value)
    assert info.value.remedy  # every metadata error says what to do


def test_missing_metadata_file() -> None:
    with pytest.raises(MetadataError, match="does not exist"):
        load_metadata("/nonexistent/meta.toml")


def test_missing_hierarchy_file_for_categories(tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text('[columns.a]\nhierarchy="nope.csv"\ncategories="hierarchy"\n')
    with pytest.raises(MetadataError, match="does not exist"):
        load_metadata(tmp_path / "m.toml")


def test_schema_values_validate_directly() -> None:
    with pytest.raises(MetadataError, match="twice"):
        TableMeta("t", (Column("a"), Column("a")))
    with pytest.raises(MetadataError, match="max_rows > 1 needs a person id column"):
        PrivacyUnit(max_rows=3)
    meta = TableMeta("t", (Column("a", role="qi"), Column("b", role="qi"), Column("c")))
    assert meta.restrict_quasi_identifiers(["b"]).quasi_identifiers == ("b",)
    with pytest.raises(MetadataError, match="not a declared quasi-identifier"):
        meta.restrict_quasi_identifiers(["c"])
    with pytest.raises(MetadataError, match="declared columns are: a, b, c"):
        meta["zzz"]
    assert meta.with_roles({"a": Role.SENSITIVE}).sensitive == ("a",)
    assert Column("x", type="float").type is ColumnType.REAL


def test_bundled_adult_metadata() -> None:
    from statcurator import datasets

    meta = load_metadata(datasets.metadata_path("adult"))
    assert meta.quasi_identifiers == ("sex", "age", "race", "marital-status", "education",
                                      "native-country", "workclass", "occupation", "salary-class")
    assert meta["age"].bounds == (0, 120)
    assert meta["workclass"].categories is not None and "Never-worked" in meta["workclass"].categories
    assert len(meta["native-country"].categories) == 41
    for name in meta.quasi_identifiers:
        assert meta[name].hierarchy is not None and Path(meta[name].hierarchy.path).exists()


# -- the writer round-trips every field ---------------------------------------------------

# any text TOML can hold: everything but lone surrogates (not encodable), control characters
# and quotes included
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
NUMBER = st.fractions(min_value=-10**9, max_value=10**9, max_denominator=10**6)
# relative or absolute; no "." or ".." segment (pathlib drops "./": the same file, other text)
PATH = st.from_regex(r"/?[a-z0-9_]{1,6}(/[a-z0-9_][a-z0-9_.-]{0,5}){0,2}\.csv", fullmatch=True)
TREE = st.dictionaries(TEXT, st.recursive(st.lists(TEXT, max_size=3),
                                          lambda inner: st.dictionaries(TEXT, inner, min_size=1,
                                                                        max_size=2),
                                          max_leaves=4), min_size=1, max_size=3)


@st.composite
def hierarchies(draw: st.DrawFn) -> HierarchySpec | None:
    kind = draw(st.sampled_from([None, "file", "intervals", "masking", "tree"]))
    if kind == "file":
        return HierarchySpec("file", path=draw(PATH), separator=draw(TEXT))
    if kind == "intervals":
        return HierarchySpec("intervals", widths=tuple(draw(st.lists(NUMBER, min_size=1,
                                                                     max_size=4))),
                             origin=draw(NUMBER))
    if kind == "masking":
        return HierarchySpec("masking", length=draw(st.integers(1, 12)), mask=draw(TEXT))
    if kind == "tree":
        return HierarchySpec("tree", tree=draw(TREE))
    return None


@st.composite
def columns(draw: st.DrawFn, name: str) -> Column:
    ctype = draw(st.sampled_from(list(ColumnType)))
    bounds = None
    if ctype.numeric and draw(st.booleans()):
        bounds = tuple(sorted(draw(st.lists(NUMBER, min_size=2, max_size=2))))
    categories = draw(st.none() | st.lists(TEXT | st.integers(-10**6, 10**6), max_size=4,
                                           unique=True))
    policy = draw(st.sampled_from([None, Policy.complete()]))
    if ctype.numeric and draw(st.booleans()):
        policy = Policy.threshold(draw(st.sampled_from([1, 5, Fraction(1, 3), Fraction(5, 2)])))
    elif categories and draw(st.booleans()):
        policy = Policy.partition([categories[:1], categories[1:]] if len(categories) > 1
                                  else [categories])
    return Column(name, type=ctype, role=draw(st.sampled_from(list(Role))),
                  hierarchy=draw(hierarchies()), bounds=bounds,
                  categories=tuple(categories) if categories is not None else None,
                  nullable=draw(st.booleans()), description=draw(TEXT), policy=policy)


@st.composite
def metadata(draw: st.DrawFn) -> TableMeta:
    names = draw(st.lists(TEXT.filter(bool), min_size=1, max_size=4, unique=True))
    unit = PrivacyUnit()
    if draw(st.booleans()):
        unit = PrivacyUnit(draw(st.sampled_from(names)), max_rows=draw(st.integers(1, 100)),
                           max_groups=draw(st.none() | st.integers(1, 100)))
    elif draw(st.booleans()):
        unit = PrivacyUnit(group_size=draw(st.integers(1, 100)))
    return TableMeta(
        name=draw(TEXT.filter(bool)), columns=tuple(draw(columns(n)) for n in names),
        privacy_unit=unit, neighbours=draw(st.sampled_from(list(Neighbours))),
        rows=draw(st.none() | st.integers(0, 10**12)), source=draw(st.none() | PATH),
        separator=draw(st.none() | TEXT), description=draw(TEXT), attribution=draw(TEXT))


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(metadata())
def test_dump_then_parse_is_the_identity(meta: TableMeta) -> None:
    text = dump_metadata(meta)
    assert parse_metadata(text) == meta
    again = parse_metadata(text)
    for a, b in zip(again.columns, meta.columns, strict=True):  # trees compare by value
        assert (a.hierarchy.tree if a.hierarchy else None) == \
            (b.hierarchy.tree if b.hierarchy else None)


def test_the_round_trip_draws_every_field() -> None:
    """A field added to the metadata must be drawn above (and written by dump_metadata)."""
    import dataclasses

    drawn = {TableMeta: {"name", "columns", "privacy_unit", "neighbours", "rows", "source",
                         "separator", "description", "attribution"},
             Column: {"name", "type", "role", "hierarchy", "bounds", "categories", "nullable",
                      "description", "policy"},
             PrivacyUnit: {"column", "max_rows", "max_groups", "group_size"},
             HierarchySpec: {"kind", "path", "separator", "widths", "origin", "length", "mask",
                             "tree"}}
    for cls, names in drawn.items():
        assert {f.name for f in dataclasses.fields(cls)} == names, cls.__name__


def test_fractions_are_written_exactly() -> None:
    meta = TableMeta("t", (Column("x", type="real", bounds=(Fraction(1, 3), Fraction(5, 2)),
                                  hierarchy=HierarchySpec("intervals", widths=(Fraction(1, 3),),
                                                          origin=Fraction(-1, 7))),))
    text = dump_metadata(meta)
    assert 'bounds = [\n    "1/3",\n    2.5,\n]' in text  # a decimal where one is exact
    again = parse_metadata(text)
    assert again["x"].bounds == (Fraction(1, 3), Fraction(5, 2))
    assert again["x"].hierarchy.widths == (Fraction(1, 3),)
    assert again["x"].hierarchy.origin == Fraction(-1, 7)


def test_control_characters_make_valid_toml() -> None:
    meta = TableMeta("t\x00\x1b[0m", (Column('a"b\\c', description="line\nbreak\ttab\x7f"),))
    assert parse_metadata(dump_metadata(meta)) == meta


def test_fractions_may_be_written_by_hand() -> None:
    meta = parse_metadata('[columns.a]\ntype="real"\nbounds=["-1/3", 0.1]\n'
                          'hierarchy={intervals=["1/3", 1], origin="1/6"}\n')
    assert meta["a"].bounds == (Fraction(-1, 3), Fraction(1, 10))
    assert meta["a"].hierarchy.widths == (Fraction(1, 3), 1)
    assert meta["a"].hierarchy.origin == Fraction(1, 6)
