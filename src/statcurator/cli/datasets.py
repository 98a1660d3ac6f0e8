"""``statcurator datasets``: list the bundled demo datasets."""

from __future__ import annotations

import typer

from ._common import JSON_OPTION, handle_errors, print_json, print_table


def register(app: typer.Typer) -> None:
    @app.command("datasets")
    @handle_errors
    def datasets_command(json_output: bool = JSON_OPTION) -> None:
        """List the bundled datasets, their size, quasi-identifiers and metadata file."""
        from .. import datasets

        rows = []
        for name in datasets.names():
            ds = datasets.load(name)
            rows.append({"name": name, "rows": ds.num_rows, "columns": list(ds.meta.names),
                         "quasi_identifiers": list(ds.meta.quasi_identifiers),
                         "metadata": str(datasets.metadata_path(name)),
                         "attribution": ds.meta.attribution})
        if json_output:
            print_json({"datasets": rows})
            return
        print_table(("name", "rows", "quasi-identifiers", "metadata"),
                    [(r["name"], f"{r['rows']:,}", ", ".join(r["quasi_identifiers"]) or "none",
                      r["metadata"]) for r in rows], title="bundled datasets")
