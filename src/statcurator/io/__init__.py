"""Data in and out, and dataset metadata files."""

from .dataset import Dataset, infer_meta, load_dataset
from .metadata import dump_metadata, load_metadata, parse_metadata
from .tables import read_table, to_format, write_table

__all__ = ["Dataset", "load_dataset", "infer_meta", "load_metadata", "parse_metadata",
           "dump_metadata", "read_table", "write_table", "to_format"]
