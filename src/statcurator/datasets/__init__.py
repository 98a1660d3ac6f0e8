"""Bundled demo datasets.

``adult`` is the UCI Adult table (30,162 records) with the ARX generalization hierarchies;
see ``datasets/adult/README.md`` for its attribution (UCI Adult, CC BY 4.0; hierarchies from
ARX, Apache-2.0).

>>> names()
('adult',)
>>> adult().meta["age"].bounds
(Fraction(0, 1), Fraction(120, 1))
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.errors import MetadataError

if TYPE_CHECKING:
    from ..io.dataset import Dataset

__all__ = ["adult", "load", "names", "metadata_path", "data_path"]

_HERE = Path(__file__).parent
_BUNDLED = {"adult": ("adult/adult.csv", "adult/adult.toml")}


def names() -> tuple[str, ...]:
    """Names of the bundled datasets."""
    return tuple(_BUNDLED)


def _check(name: str) -> None:
    if name not in _BUNDLED:
        raise MetadataError(f"there is no bundled dataset {name!r}",
                            remedy="bundled datasets are: " + ", ".join(_BUNDLED))


def data_path(name: str) -> Path:
    """Path of a bundled dataset's data file."""
    _check(name)
    return _HERE / _BUNDLED[name][0]


def metadata_path(name: str) -> Path:
    """Path of a bundled dataset's metadata TOML."""
    _check(name)
    return _HERE / _BUNDLED[name][1]


@cache
def load(name: str) -> Dataset:
    """Load a bundled dataset with its metadata (cached: the table is immutable)."""
    from ..io.dataset import Dataset
    from ..io.metadata import load_metadata
    from ..io.tables import read_table

    meta = load_metadata(metadata_path(name))
    table = read_table(data_path(name), meta=meta)
    return Dataset(name, table, meta, data_path(name))


def adult() -> Dataset:
    """The UCI Adult demo table: 9 quasi-identifiers with ARX hierarchies, ages in [0, 120]."""
    return load("adult")
