"""DESIGN.md's import rule, as a test.

A package may import only from the packages above it in the list below; pandas, DuckDB,
PySpark, FastAPI and matplotlib appear only where DESIGN.md allows them; and importing
statcurator (or any layer up to the curator) loads none of them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "statcurator"

# DESIGN.md's order; `datasets` (bundled data) sits just below io (it reads its files with
# io; io knows nothing of it), `testing` (the DP test bench) may use anything above the curator.
ORDER = ["core", "mechanisms", "accounting", "query", "engines", "anonymize", "attacks",
         "estimators", "synth", "io", "datasets", "report", "testing", "curator", "cli", "service"]
# the two user interfaces over the curator: `statcurator serve` starts the service, and the
# service shares the CLI's ledger location and remedy wording
SAME_LEVEL: set[tuple[str, str]] = {("cli", "service"), ("service", "cli")}
HEAVY = {"pandas", "duckdb", "pyspark", "fastapi", "matplotlib"}
HEAVY_ALLOWED = {"engines", "io", "report", "service"}


def _package(rel: Path) -> str:
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _imports(path: Path) -> list[tuple[str, int]]:
    """Absolute names of the modules a file imports (relative imports resolved)."""
    rel = path.relative_to(SRC)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                out.append((node.module or "", node.lineno))
                continue
            parts = list(rel.parts[:-1])
            base = parts[:len(parts) - (node.level - 1)]
            if node.module:
                out.append((".".join(["statcurator", *base, node.module]), node.lineno))
            else:  # `from .. import x`: each name may be a module
                out += [(".".join(["statcurator", *base, a.name]), node.lineno)
                        for a in node.names]
    return out


FILES = sorted(p for p in SRC.rglob("*.py"))


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_layer_rule(path: Path) -> None:
    rel = path.relative_to(SRC)
    pkg = _package(rel)
    if pkg == "__init__":
        return  # the package's own lazy export table may name every layer
    assert pkg in ORDER, f"{rel}: package {pkg!r} is not in DESIGN.md's layer list"
    for module, line in _imports(path):
        top = module.split(".")[0]
        if top in HEAVY:
            assert pkg in HEAVY_ALLOWED, (
                f"{rel}:{line} imports {module}; DESIGN.md allows it only in "
                f"{sorted(HEAVY_ALLOWED)}")
        if top == "statcurator" and module.count(".") >= 1:
            target = module.split(".")[1]
            if target in ("__init__", "") or target == pkg or (pkg, target) in SAME_LEVEL:
                continue
            if target not in ORDER:
                continue  # a name imported from the top-level package
            assert ORDER.index(target) < ORDER.index(pkg), (
                f"{rel}:{line} imports statcurator.{target}, which is below {pkg!r} in "
                "DESIGN.md's layer list")


def test_core_imports_only_the_standard_library_and_numpy() -> None:
    allowed = set(sys.stdlib_module_names) | {"numpy", "statcurator"}
    for path in sorted((SRC / "core").rglob("*.py")):
        for module, line in _imports(path):
            top = module.split(".")[0]
            assert top in allowed, f"core/{path.name}:{line} imports {module}"
            if top == "statcurator":
                assert module.startswith("statcurator.core"), f"core/{path.name}:{line}"


def test_importing_the_layers_loads_no_heavy_library() -> None:
    code = (
        "import sys, statcurator, statcurator.core.measures, statcurator.mechanisms, "
        "statcurator.accounting, statcurator.query, statcurator.engines, "
        "statcurator.anonymize, statcurator.io, statcurator.datasets, statcurator.report, "
        "statcurator.curator\n"
        f"print(sorted(m for m in {sorted(HEAVY)!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", f"heavy libraries loaded at import time: {out}"
