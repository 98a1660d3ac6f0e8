"""Bundled demo datasets, and :func:`load_dataset`, which also knows them by name.

``adult`` is the UCI Adult table (30,162 records) with the ARX generalization hierarchies;
see ``datasets/adult/README.md`` for its attribution (UCI Adult, CC BY 4.0; hierarchies from
ARX, Apache-2.0). ``diabetes`` and ``diabetes_neighbour`` are the four fictional patients of
the textbook's first differential-privacy example, two neighbouring tables
(``datasets/diabetes/README.md``).

This package sits below :mod:`statcurator.io` (it reads its files with it); ``io`` knows
nothing about bundled names.

>>> names()
('adult', 'diabetes', 'diabetes_neighbour')
>>> adult().meta["age"].bounds
(Fraction(0, 1), Fraction(120, 1))
>>> load("diabetes").table.column("Diabetes").to_pylist()
['Y', 'Y', 'N', 'N']
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

from ..core.errors import MetadataError
from ..core.schema import TableMeta
from ..io import dataset as _io

__all__ = ["adult", "load", "load_dataset", "names", "metadata_path", "data_path"]

_HERE = Path(__file__).parent
# name -> (data file, metadata file); the two diabetes tables share their metadata
_BUNDLED = {"adult": ("adult/adult.csv", "adult/adult.toml"),
            "diabetes": ("diabetes/diabetes.csv", "diabetes/diabetes.toml"),
            "diabetes_neighbour": ("diabetes/diabetes_neighbour.csv", "diabetes/diabetes.toml")}


def names() -> tuple[str, ...]:
    """Names of the bundled datasets."""
    return tuple(_BUNDLED)


def _check(name: str) -> None:
    if name not in _BUNDLED:
        raise MetadataError(f"there is no bundled dataset {name!r}",
                            remedy="bundled datasets are: " + ", ".join(_BUNDLED))


def data_path(name: str) -> Path:
    """Path of a bundled dataset's data file.

    >>> data_path("diabetes").name
    'diabetes.csv'
    """
    _check(name)
    return _HERE / _BUNDLED[name][0]


def metadata_path(name: str) -> Path:
    """Path of a bundled dataset's metadata TOML."""
    _check(name)
    return _HERE / _BUNDLED[name][1]


@cache
def load(name: str) -> _io.Dataset:
    """Load a bundled dataset with its metadata (cached: the table is immutable)."""
    from ..io.metadata import load_metadata

    meta = load_metadata(metadata_path(name))
    return _io.load_dataset(data_path(name), meta, name=name)


def adult() -> _io.Dataset:
    """The UCI Adult demo table: 9 quasi-identifiers with ARX hierarchies, ages in [0, 120]."""
    return load("adult")


def is_bundled(data: Any) -> bool:
    """Does ``data`` name a bundled dataset (and no file of that name exists)?"""
    return isinstance(data, str) and data in _BUNDLED and not Path(data).exists()


def load_dataset(data: Any, metadata: str | Path | TableMeta | None = None, *,
                 name: str | None = None, separator: str | None = None) -> _io.Dataset:
    """:func:`statcurator.io.load_dataset`, plus the bundled names: ``"adult"`` loads the
    bundled table (with ``metadata`` instead of its own, if given).

    >>> load_dataset("adult").num_rows
    30162
    """
    if is_bundled(data):
        ds = load(data)
        if metadata is None:
            return ds
        return _io.load_dataset(ds.table, metadata, name=name or data)
    return _io.load_dataset(data, metadata, name=name, separator=separator)
