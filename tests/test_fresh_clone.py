"""What a fresh clone needs (issue 8): nothing outside the repository is read, and what the
README's and the docs' example commands write is ignored by git.

The full check is the README's test command on a clone in a new virtual environment (its
counts and time are in the issue's closing note); these tests keep its preconditions true.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# what this test hunts for, assembled so that this file itself reads nothing outside
_SHARED = "sha" + "red"
OUTSIDE = re.compile(r"\.\./" + _SHARED + "|" + _SHARED + "/data|STATCURATOR_" + _SHARED.upper())


def _files() -> list[Path]:
    out = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for folder in ("src", "tests"):
        out += [p for p in (ROOT / folder).rglob("*")
                if p.is_file() and p.suffix in (".py", ".md", ".toml", ".csv", ".j2", ".html")
                and "__pycache__" not in p.parts]
    return [p for p in out if p.resolve() != Path(__file__).resolve()]


def test_nothing_reads_data_outside_the_repository() -> None:
    offenders = [str(p.relative_to(ROOT)) for p in _files()
                 if OUTSIDE.search(p.read_text(encoding="utf-8", errors="replace"))]
    assert offenders == [], "copy the data into tests/data (with attribution) instead"


def _written_by_examples() -> set[str]:
    names = set()
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in doc.read_text(encoding="utf-8").splitlines():  # commands span lines
            names |= set(re.findall(r"--(?:out|report|plot)\s+([\w.-]+\.\w+)", line))
            if "--json" in line:
                names |= set(re.findall(r">\s*([\w.-]+\.json)\b", line))
    return names


def test_what_the_example_commands_write_is_ignored() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    names = _written_by_examples()
    assert {"adult-k5.html", "release.csv"} <= names  # the README's own examples are seen
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *sorted(names)], cwd=ROOT,
                             capture_output=True, text=True).stdout.split()
    assert sorted(set(names) - set(ignored)) == [], "add these to .gitignore"
