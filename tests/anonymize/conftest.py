"""Fixtures of the anonymization tests: the Adult table with its ARX hierarchies (the bundled
copy, byte-identical to ARX's files) and the t-closeness toy table test2 (``tests/data``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pytest

from statcurator.core.schema import Column, HierarchySpec, TableMeta
from statcurator.datasets import data_path, metadata_path
from statcurator.io.dataset import Dataset
from statcurator.io.metadata import parse_metadata


def read_semicolon(path: Path, **types: pa.DataType) -> pa.Table:
    return pacsv.read_csv(path, parse_options=pacsv.ParseOptions(delimiter=";"),
                          convert_options=pacsv.ConvertOptions(column_types=types,
                                                               strings_can_be_null=False))


@pytest.fixture(scope="session")
def adult() -> Dataset:
    """ARX's Adult table read as ARX reads it (only ``age`` typed), with the bundled
    metadata's roles and hierarchies."""
    path = data_path("adult")
    meta = parse_metadata(metadata_path("adult").read_text(), base=path.parent)
    table = read_semicolon(path, age=pa.int64())
    return Dataset("adult", table, meta, path)


@pytest.fixture(scope="session")
def test2(data_dir: Path) -> Dataset:
    """The nine-patient table of the t-closeness paper with ZIPCode and Age as QIs."""
    folder = data_dir / "test2"

    def spec(name: str) -> HierarchySpec:
        return HierarchySpec("file", path=str(folder / f"test2_hierarchy_{name}.csv"))

    meta = TableMeta("test2", (
        Column("ZIPCode", type="integer", role="qi", hierarchy=spec("ZIPCode")),
        Column("Age", type="integer", role="qi", hierarchy=spec("Age")),
        Column("Salary", type="integer", role="sensitive"),
        Column("Disease", role="sensitive", hierarchy=spec("Disease")),
    ))
    return Dataset("test2", read_semicolon(folder / "test2.csv"), meta)
