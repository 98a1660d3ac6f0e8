"""Fixtures for the query-layer tests: small catalogs built from declared metadata."""

from __future__ import annotations

import pyarrow as pa
import pytest

from statcurator.core.schema import Column, PrivacyUnit, TableMeta
from statcurator.query.catalog import DictCatalog, TableInfo

PEOPLE = TableMeta("people", (
    Column("pid", type="integer"),
    Column("age", type="integer", bounds=(0, 120)),
    Column("income", type="real", bounds=(0, 200000)),
    Column("sex", categories=("F", "M")),
    Column("city"),
    Column("smoker", type="boolean"),
))

PEOPLE_SCHEMA = pa.schema([("pid", pa.int64()), ("age", pa.int64()), ("income", pa.float64()),
                           ("sex", pa.string()), ("city", pa.string()), ("smoker", pa.bool_())])

REGIONS = pa.table({"city": ["a", "b", "c"], "region": ["north", "south", "north"]})
DUPLICATED = pa.table({"city": ["a", "a", "b"], "tag": ["x", "y", "z"]})


def catalog(meta: TableMeta = PEOPLE, **changes) -> DictCatalog:
    meta = meta.replace(**changes) if changes else meta
    tables = {"people": TableInfo.from_schema("people", meta, PEOPLE_SCHEMA)}
    for name, data in (("regions", REGIONS), ("dups", DUPLICATED)):
        tables[name] = TableInfo.from_schema(name, TableMeta(name, tuple(Column(c) for c in data.column_names)),
                                             data.schema, public=True, data=data)
    return DictCatalog(tables)


@pytest.fixture
def cat() -> DictCatalog:
    return catalog()


@pytest.fixture
def person_cat() -> DictCatalog:
    return catalog(privacy_unit=PrivacyUnit("pid", max_rows=3, max_groups=2))


@pytest.fixture
def bounded_cat() -> DictCatalog:
    return catalog(neighbours="bounded")
