"""Table I/O: every format in and out, with declared types, and the bundled dataset."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from statcurator import datasets
from statcurator.core.errors import DataError, MetadataError
from statcurator.io import load_dataset, read_table, to_format, write_table
from statcurator.io.metadata import parse_metadata

TABLE = pa.table({"zip": ["02139", "10001"], "age": [34, 71], "income": [1.5, 2.25],
                  "flag": [True, False]})


@pytest.mark.parametrize("suffix", [".csv", ".tsv", ".parquet", ".duckdb"])
def test_write_then_read_round_trips(tmp_path: Path, suffix: str) -> None:
    meta = parse_metadata('[columns.zip]\ntype="string"\n[columns.age]\ntype="integer"\n'
                          '[columns.income]\ntype="real"\n[columns.flag]\ntype="boolean"\n')
    path = write_table(TABLE, tmp_path / f"t{suffix}", separator="\t" if suffix == ".tsv" else ",")
    back = read_table(path, meta=meta)
    assert back.to_pylist() == TABLE.to_pylist()  # "02139" keeps its leading zero


def test_csv_any_separator_is_sniffed(tmp_path: Path) -> None:
    for sep in (",", ";", "|", "\t"):
        p = tmp_path / "x.csv"
        p.write_text(f"a{sep}b\n1{sep}x\n")
        assert read_table(p).column_names == ["a", "b"]


def test_in_memory_frames_are_read() -> None:
    import duckdb
    import polars as pl

    assert read_table(TABLE.to_pandas()).to_pylist() == TABLE.to_pylist()
    assert read_table(pl.from_arrow(TABLE)).to_pylist() == TABLE.to_pylist()
    assert read_table(duckdb.sql("SELECT 1 AS a")).to_pylist() == [{"a": 1}]


def test_to_format() -> None:
    assert list(to_format(TABLE, "pandas").columns) == TABLE.column_names
    assert to_format(TABLE, "polars").shape == (2, 4)
    assert to_format(TABLE, "csv").splitlines()[0] == "zip,age,income,flag"
    with pytest.raises(MetadataError):
        to_format(TABLE, "xlsx")


def test_duckdb_table_selection(tmp_path: Path) -> None:
    db = tmp_path / "d.duckdb"
    write_table(TABLE, db, table_name="one")
    write_table(TABLE, db, table_name="two")
    with pytest.raises(DataError, match="holds 2 tables"):
        read_table(db)
    assert read_table(f"{db}:two").num_rows == 2
    with pytest.raises(DataError, match="no table 'three'"):
        read_table(db, table="three")


def test_bad_inputs_name_the_remedy(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "x.xlsx").write_text("")
    with pytest.raises(DataError, match="unknown data format"):
        read_table(tmp_path / "x.xlsx")
    with pytest.raises(DataError, match="cannot read data from a int"):
        read_table(42)
    p = tmp_path / "bad.csv"
    p.write_text("a;b\nx;1\n")
    meta = parse_metadata('[columns.a]\ntype="integer"\n')
    with pytest.raises(DataError, match="declared column types"):
        read_table(p, meta=meta)
    with pytest.raises(DataError, match="end the file name"):
        write_table(TABLE, tmp_path / "out.weird")


# sha256 of ARX's data/adult/adult.csv (snapshot aacd487fb77b, 2025-09-12), of which the
# bundled file is a byte-for-byte copy (see src/statcurator/datasets/adult/README.md)
ADULT_SHA256 = "c700df9304fbf3c4d4db5938bffc510561bd4a2dfad285a3feef9a20619391c5"


def test_bundled_adult_is_arx_s_file() -> None:
    import hashlib

    adult = datasets.adult()
    assert adult.num_rows == 30162
    assert adult.table.column_names == list(adult.meta.names)
    assert adult.table.schema.field("age").type == pa.int64()
    assert hashlib.sha256(datasets.data_path("adult").read_bytes()).hexdigest() == ADULT_SHA256
    with pytest.raises(MetadataError, match="no bundled dataset"):
        datasets.load("census")


def test_bundled_diabetes_tables_are_neighbours() -> None:
    d, n = datasets.load("diabetes"), datasets.load("diabetes_neighbour")
    assert d.meta == n.meta and d.meta.neighbours.value == "bounded"
    changed = [(a, b) for a, b in zip(d.table.to_pylist(), n.table.to_pylist(), strict=True)
               if a != b]
    assert [a["Name"] for a, _ in changed] == ["Chris"]


def test_load_dataset_variants(tmp_path: Path) -> None:
    assert datasets.load_dataset("adult").num_rows == 30162
    with pytest.raises(DataError, match="does not exist"):  # io knows no bundled names
        load_dataset("adult")
    # a sibling TOML is picked up; undeclared columns become insensitive
    (tmp_path / "t.csv").write_text("age;zip;note\n30;02139;x\n")
    (tmp_path / "t.toml").write_text('[table]\nname="t"\nseparator=";"\nsource="t.csv"\n'
                                     '[columns.age]\ntype="integer"\nrole="qi"\nbounds=[0,120]\n'
                                     '[columns.zip]\ntype="string"\n')
    ds = load_dataset(tmp_path / "t.csv")
    assert ds.meta.quasi_identifiers == ("age",)
    assert ds.meta["note"].role.value == "insensitive"
    assert ds.table.column("zip").to_pylist() == ["02139"]
    # metadata that names a missing column is refused
    with pytest.raises(MetadataError, match="the data lacks"):
        load_dataset(TABLE, parse_metadata('[columns.nope]\n'))
    # no metadata: nothing is declared public
    bare = load_dataset(TABLE)
    assert bare.meta.quasi_identifiers == () and all(c.bounds is None for c in bare.meta.columns)
    # data=None reads the metadata's source, and so does a metadata file given as the data
    assert load_dataset(None, tmp_path / "t.toml").num_rows == 1
    ds = load_dataset(tmp_path / "t.toml")
    assert ds.num_rows == 1 and ds.meta.quasi_identifiers == ("age",)
    # the bundled table under other metadata
    other = datasets.load_dataset("adult", parse_metadata('[columns.age]\ntype="integer"\n'
                                                          'role="qi"\n'))
    assert other.meta.quasi_identifiers == ("age",) and other.num_rows == 30162


def test_csv_is_written_with_minimal_quoting(tmp_path: Path) -> None:
    table = pa.table({"s": ["a,b", 'q"x', "two\nlines", "", None, " pad ", "é"],
                      "n": [1, -2, None, 4, 5, 6, 7], "x": [0.1, 1e-05, None, 2.5, 3.0, -1.0, 1e20],
                      "b": [True, False, None, True, True, False, True]})
    path = write_table(table, tmp_path / "t.csv")
    assert path.read_text(encoding="utf-8") == (
        's,n,x,b\n"a,b",1,0.1,true\n"q""x",-2,1e-05,false\n"two\nlines",,,\n'
        '"",4,2.5,true\n,5,3.0,true\n pad ,6,-1.0,false\né,7,1e+20,true\n')
    back = read_table(path, meta=parse_metadata(
        '[columns.s]\nnullable=true\n[columns.n]\ntype="integer"\n[columns.x]\ntype="real"\n'
        '[columns.b]\ntype="boolean"\n'))
    assert back.column("s").to_pylist()[:4] == ["a,b", 'q"x', "two\nlines", ""]
    assert back.column("b").to_pylist() == table.column("b").to_pylist()
    semi = write_table(table.slice(0, 1), tmp_path / "t.tsv", separator=";")
    assert semi.read_text().splitlines() == ["s;n;x;b", "a,b;1;0.1;true"]
    with pytest.raises(DataError, match="one character"):
        write_table(table, tmp_path / "u.csv", separator=";;")


def test_the_bundled_adult_csv_is_rewritten_byte_for_byte(tmp_path: Path) -> None:
    adult = datasets.adult()
    out = write_table(adult.table, tmp_path / "adult.csv", separator=";")
    # ARX's file has CRLF line ends; the rows and fields are the same bytes
    assert out.read_bytes() == datasets.data_path("adult").read_bytes().replace(b"\r\n", b"\n")


def test_a_directory_is_not_data(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="is a directory"):
        read_table(tmp_path)


def test_polars_is_an_optional_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "polars", None)  # as if it were not installed
    with pytest.raises(DataError, match=r"pip install 'statcurator\[polars\]'"):
        to_format(TABLE, "polars")
    with pytest.raises(DataError, match=r"pip install 'statcurator\[polars\]'"):
        datasets.adult().to_polars()
    from statcurator.anonymize import KAnonymity, anonymize

    res = anonymize(datasets.load("diabetes_neighbour"), KAnonymity(2), qi=["Gender"])
    with pytest.raises(DataError, match=r"pip install 'statcurator\[polars\]'"):
        res.to_polars()
