"""Helpers shared by the CLI commands: console, JSON output, error handling, exact numbers."""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import typer

from ..core.errors import StatcuratorError
from ..core.numbers import exact

F = TypeVar("F", bound=Callable[..., Any])


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=stderr)


def to_jsonable(value: Any) -> Any:
    """Make a value JSON-serializable: Fractions become floats (and keep an exact string)."""
    if isinstance(value, Fraction):
        return float(value)
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return value.item()
    if hasattr(value, "value") and hasattr(value, "name") and type(value).__module__ != "builtins":
        return value.value  # enums
    return value


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable(obj), indent=2, ensure_ascii=False) + "\n")


def exact_option(text: str | None, name: str, **kw: Any) -> Fraction | None:
    """Parse a numeric CLI option exactly ("0.1" is 1/10, "1/3" is one third)."""
    if text is None:
        return None
    return exact(text, name, strings=True, **kw)


def handle_errors(fn: F) -> F:
    """Turn statcurator's errors into a one-line message and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StatcuratorError as e:
            if kwargs.get("json_output"):
                print_json({"error": type(e).__name__, "message": str(e),
                            "problem": e.problem, "remedy": e.remedy})
            else:
                console(stderr=True).print(f"[bold red]error:[/] {e}", highlight=False)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


JSON_OPTION = typer.Option(False, "--json", help="Print one JSON object instead of tables.")
