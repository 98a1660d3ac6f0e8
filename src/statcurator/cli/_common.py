"""Helpers shared by the CLI commands: printing, JSON output, error handling, exact numbers.

Printing. Every text a command prints goes through :func:`emit` (lines) or
:func:`print_table` (tables). On a terminal they use rich, with every dynamic text escaped
(:func:`escape`), tables never cutting a cell; when stdout is not a terminal (a pipe, a file,
a test) they print plain, unwrapped lines with no markup and no box drawing.

Errors. :func:`handle_errors` turns statcurator's errors into one line (or one JSON object)
and exit code 2. Remedies are written for Python callers (``pass delta=1e-6``); under the CLI
they are rewritten with the command's own flags (``pass --delta 1e-6``): each keyword that
names one of the command's options becomes that option (:func:`cli_remedy`).
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import re
import sys
import tempfile
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, TypeVar

import typer

from ..core.errors import DataError, InvalidParameterError, StatcuratorError
from ..core.numbers import exact

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["console", "escape", "is_terminal", "emit", "print_table", "to_jsonable",
           "print_json", "exact_option", "fraction_option", "output_path", "TABLE_SUFFIXES",
           "writing", "analyst_of", "register_data", "show_ledger", "INPUT_SEPARATOR_ALIAS",
           "cli_remedy", "api_remedy", "keyword_form", "handle_errors", "JSON_OPTION"]


# -- printing -------------------------------------------------------------------------------
def console(stderr: bool = False) -> Any:
    """A rich console on stdout (or stderr) that soft-wraps instead of inserting newlines."""
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, highlight=False)


def escape(text: Any) -> str:
    """``text`` with rich markup escaped, so that ``[spark]`` prints as ``[spark]``.

    >>> escape("pip install 'statcurator[spark]'")
    "pip install 'statcurator\\\\[spark]'"
    """
    from rich.markup import escape as _escape

    return _escape(str(text))


def is_terminal(stderr: bool = False) -> bool:
    """Is stdout (stderr) a terminal? (rich's test, so ``TTY_COMPATIBLE=1`` forces it.)"""
    return bool(console(stderr).is_terminal)


def emit(*parts: str | tuple[str, str], stderr: bool = False) -> None:
    """Print one line made of ``parts``: plain strings, or ``(text, style)`` pairs.

    No part is read as markup. On a terminal the styles apply; elsewhere the line is written
    as plain text, unwrapped.
    """
    texts = [p if isinstance(p, str) else p[0] for p in parts]
    if not is_terminal(stderr):
        (sys.stderr if stderr else sys.stdout).write("".join(texts) + "\n")
        return
    from rich.text import Text

    console(stderr).print(Text.assemble(*((p, "") if isinstance(p, str) else p for p in parts)))


def print_table(columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
                title: str | None = None, show_header: bool = True,
                stderr: bool = False) -> None:
    """Print a table whose cells are never cut.

    On a terminal: a rich table (escaped text), widened past the terminal rather than
    truncating a cell. Elsewhere: the title, then one line per row, columns padded with
    spaces to a common width.
    """
    cells = [[str(c) for c in row] for row in rows]
    if not is_terminal(stderr):
        lines = ([list(columns)] if show_header else []) + cells
        widths = [max((len(r[i]) for r in lines if i < len(r)), default=0)
                  for i in range(len(columns))]
        out = sys.stderr if stderr else sys.stdout
        if title:
            out.write(title + "\n")
        for r in lines:
            out.write("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)).rstrip()
                      + "\n")
        return
    from rich.console import Console
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    table = Table(*(escape(c) for c in columns), title=escape(title) if title else None,
                  show_header=show_header)
    for col in table.columns:
        col.no_wrap = True
    for r in cells:
        table.add_row(*(Text(c) for c in r))
    con = console(stderr)
    need = Measurement.get(con, con.options.update_width(1 << 16), table).maximum
    if need > con.width:  # wider than the terminal: let the terminal wrap, cut nothing
        con = Console(stderr=stderr, width=need, highlight=False)
    con.print(table)


# -- JSON -----------------------------------------------------------------------------------
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


# -- arguments ------------------------------------------------------------------------------
def exact_option(text: str | None, name: str, **kw: Any) -> Fraction | None:
    """Parse a numeric CLI option exactly ("0.1" is 1/10, "1/3" is one third)."""
    if text is None:
        return None
    return exact(text, name, strings=True, **kw)


def fraction_option(text: str, flag: str, example: str) -> Fraction:
    """A fraction in [0, 1] given as ``0.02``, ``1/50`` or ``2%``.

    >>> fraction_option("2%", "--suppression", "0.02"), fraction_option("0.02", "--suppression", "0.02")
    (Fraction(1, 50), Fraction(1, 50))
    """
    raw = text.strip()
    scale = Fraction(1, 100) if raw.endswith("%") else Fraction(1)
    try:
        value = exact(raw.removesuffix("%"), flag, strings=True, allow_zero=True) * scale
    except InvalidParameterError:
        value = None
    if value is None or value > 1:
        raise InvalidParameterError(f"{flag} must be a fraction between 0 and 1, got {text!r}",
                                    remedy=f"pass e.g. {flag} {example} (or "
                                           f"{format(float(Fraction(example) * 100), 'g')}%)")
    return value


#: file name endings of the tables a command can write (io.write_table, plus Arrow/Feather)
TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".psv", ".dat", ".parquet", ".pq", ".duckdb", ".ddb",
                  ".db", ".arrow", ".feather")


def output_path(path: Path | None, flag: str, suffixes: Sequence[str]) -> Path | None:
    """Check an output path before any work: a known suffix, not a directory, and a folder
    that exists (or can be created) and is writable."""
    if path is None:
        return None
    if path.is_dir():
        raise DataError(f"{flag} {str(path)!r} is a directory",
                        remedy=f"give a file name, e.g. {flag} {path / ('out' + suffixes[0])}")
    if path.suffix.lower() not in suffixes:
        raise InvalidParameterError(
            f"{flag} {str(path)!r}: cannot tell the output format from "
            f"{path.suffix or 'a name without extension'!r}",
            remedy=f"end the file name in one of {', '.join(suffixes)}")
    folder = path.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the folders that are missing are created when writing
    problem = None
    if not folder.is_dir():
        problem = f"{str(folder)!r} is not a folder"
    elif path.exists() and not os.access(path, os.W_OK):
        problem = "the file is read-only"
    else:
        try:  # what the OS says, not what permission bits suggest (root, read-only mounts)
            with tempfile.TemporaryFile(dir=folder):
                pass
        except OSError as e:
            problem = f"cannot create files in {str(folder)!r} ({e.strerror or e})"
    if problem:
        raise DataError(f"cannot write {flag} {str(path)!r}: {problem}",
                        remedy=f"choose another path for {flag}")
    return path


def writing(path: Path, flag: str, write: Callable[[], Any]) -> Any:
    """Run ``write()``; an OS error becomes a :class:`DataError` naming ``flag``."""
    try:
        return write()
    except OSError as e:
        raise DataError(f"cannot write {flag} {str(path)!r}: {e.strerror or e}",
                        remedy=f"choose another path for {flag}") from None


# -- data, identity and ledger of the commands that charge a budget ---------------------------
#: the library's ``separator=`` of a read error is the ``--input-separator`` of a command
INPUT_SEPARATOR_ALIAS = {"separator": "--input-separator"}


def analyst_of(option: str | None) -> str:
    """The CLI's analyst identity: ``--analyst``, else the operating-system user (normalized)."""
    import getpass

    from ..accounting import analyst_id

    if option is not None:
        return analyst_id(option)
    try:
        return analyst_id(getpass.getuser())
    except (InvalidParameterError, KeyError, OSError) as e:
        raise InvalidParameterError("the operating-system user name cannot be used as the "
                                    f"analyst identity ({e})", remedy="pass --analyst NAME"
                                    ) from None


def register_data(cur: Any, data: str, metadata: Path | None, *, dry_run: bool = False,
                  separator: str | None = None) -> str:
    """Register DATA with the curator ``cur`` and return its table name.

    DATA is a bundled dataset's name, a CSV/Parquet/DuckDB file (``FILE.duckdb:TABLE`` picks
    a table; a sibling ``FILE.toml`` is its metadata unless ``--metadata`` is given), or a
    metadata TOML whose ``source`` names the data. A dry run registers the metadata alone.
    """
    from .. import datasets
    from ..core.errors import MetadataError
    from ..io.metadata import load_metadata

    given = load_metadata(metadata) if metadata is not None else None
    if datasets.is_bundled(data):
        ds = datasets.load(data)
        meta = given or ds.meta
        if dry_run:
            cur.register(data, None, meta.replace(source=None))
        else:
            cur.register(data, ds.with_meta(meta))
        return data
    source, file = data, Path(data)
    if not file.exists() and ":" in file.name:  # FILE.duckdb:TABLE
        file = Path(data.rpartition(":")[0])
    if file.suffix.lower() == ".toml":  # a metadata file that names its data
        own = load_metadata(file)
        if own.source is None:
            raise MetadataError(f"{data!r} is a metadata file that names no data",
                                remedy='add source = "FILE.csv" under [table] in it, or pass '
                                       f"the data file as DATA with --metadata {data}")
        meta: Any = given or own
        source, file = own.source, Path(own.source)
    else:
        sibling = file.with_suffix(".toml")
        meta = given or (load_metadata(sibling) if sibling.is_file() else None)
    if file.is_dir():
        raise DataError(f"DATA {str(file)!r} is a directory, not a data file",
                        remedy="name a CSV, Parquet or DuckDB file (or a metadata TOML)")
    name = meta.name if meta is not None else file.stem
    if dry_run:
        if meta is None:
            raise MetadataError("a dry run needs the dataset's metadata (it reads no data)",
                                remedy="pass --metadata M.toml")
        cur.register(name, None, meta.replace(source=None))
    else:
        cur.register(name, source, meta, separator=separator)
    return name


def show_ledger(led: Any, *, stderr: bool = True) -> None:
    """Say which ledger is charged (or that a throwaway one forgets the charge)."""
    if led.persistent:
        emit("ledger: ", led.location, stderr=stderr)
    else:
        emit(("ledger: throwaway, in memory (--ledger :memory:): ", "bold yellow"),
             "this charge is forgotten when the command exits", stderr=stderr)


# -- errors ---------------------------------------------------------------------------------
_VALUE = r"""'[^']*'|"[^"]*"|\[[^\]]*\]|\.\.\.|[^\s,;()\[\]]*"""
_PYTHON_ONLY = re.compile(r"\s*\(Python:(?:[^()]|\([^()]*\))*\)")
_CLI_FORM = re.compile(rf"\b[a-z_]+=(?:{_VALUE})\s*\(CLI:\s*((?:[^()]|\([^()]*\))*)\)")


def cli_remedy(text: str, flags: Mapping[str, str]) -> str:
    """Rewrite a remedy written for Python callers in a command's terms.

    ``flags`` maps keyword names to the command's options. ``name=value`` becomes
    ``--flag value`` (a list ``[a, b]`` becomes ``a,b``); a ``(Python: ...)`` aside is dropped;
    ``name=value (CLI: X)`` becomes ``X``.

    >>> f = {"delta": "--delta", "algorithm": "--algorithm", "qi": "--qi"}
    >>> cli_remedy("pass delta=1e-6 (or the δ of your budget)", f)
    'pass --delta 1e-6 (or the δ of your budget)'
    >>> cli_remedy("use algorithm='optimal' or algorithm='mondrian'", f)
    'use --algorithm optimal or --algorithm mondrian'
    >>> cli_remedy("pass qi=['age', 'sex']; or qi=[...] (CLI: --qi a,b)", f)
    'pass --qi age,sex; or --qi a,b'
    >>> cli_remedy("run `x --epsilon E` (Python: c.set(epsilon=E))", f)
    'run `x --epsilon E`'
    >>> cli_remedy("no request 'delta=1' of yours", f)  # an echoed value stays as it is
    "no request 'delta=1' of yours"
    """
    text = _PYTHON_ONLY.sub("", text)
    text = _CLI_FORM.sub(lambda m: m.group(1).strip(), text)

    def flag(name: str, value: str) -> str:
        if value[:1] in "'\"":
            value = value[1:-1]
        elif value.startswith("["):
            value = ",".join(v.strip().strip("'\"") for v in value[1:-1].split(","))
        return f"{flags[name]} {value}".rstrip()

    return _keywords(text, flags, flag)


def _keywords(text: str, names: Iterable[str], render: Callable[[str, str], str]) -> str:
    """``text`` with each ``name=value`` (of ``names``, not part of a longer word) replaced
    by ``render(name, value)``."""
    names = sorted(names, key=len, reverse=True)
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in names)
    # not right after a quote: 'analyst=bob' is a value echoed back, not a keyword
    return re.sub(rf"(?<![\w.'\"-])({alternatives})=({_VALUE})",
                  lambda m: render(m.group(1), m.group(2)), text)


_CLI_ASIDE = re.compile(r"\s*\(CLI:(?:[^()]|\([^()]*\))*\)")


def api_remedy(text: str, fields: Iterable[str]) -> str:
    """Rewrite a remedy written for Python callers for HTTP API callers: ``name=value``
    becomes the JSON member ``"name": value`` for each request field in ``fields`` (strings
    and lists in JSON's quotes); ``(Python: ...)`` and ``(CLI: ...)`` asides are dropped.

    >>> f = ["delta", "algorithm", "qi", "nonnegative"]
    >>> api_remedy("pass delta=1e-6 (charged)", f)
    'pass "delta": 1e-6 (charged)'
    >>> api_remedy("use algorithm='optimal'; pass qi=['age', 'sex'] or qi=[...] (CLI: --qi a,b)", f)
    'use "algorithm": "optimal"; pass "qi": ["age", "sex"] or "qi": [...]'
    >>> api_remedy("pass nonnegative=True (Python: q.release(nonnegative=True))", f)
    'pass "nonnegative": true'
    """
    text = _CLI_ASIDE.sub("", _PYTHON_ONLY.sub("", text))

    def item(v: str) -> str:
        v = v.strip()
        if v[:1] in "'\"" and v[-1:] == v[:1] and len(v) > 1:
            return json.dumps(v[1:-1])
        return {"True": "true", "False": "false", "None": "null"}.get(v, v)

    def member(name: str, value: str) -> str:
        if value.startswith("[") and value != "[...]":
            value = "[" + ", ".join(item(v) for v in value[1:-1].split(",") if v.strip()) + "]"
        else:
            value = item(value)
        return f'"{name}": {value}'.rstrip()

    return _keywords(text, fields, member)


def keyword_form(text: str, names: Iterable[str]) -> str:
    """A server's remedy (written for API callers: ``"delta": 1e-6``) written for Python
    callers again (``delta=1e-6``), for the ``names`` given, so that :func:`cli_remedy` can
    then name the command's flags.

    >>> keyword_form('pass "delta": 1e-6 (charged), or "epsilon": 0.5', ["delta", "epsilon"])
    'pass delta=1e-6 (charged), or epsilon=0.5'
    >>> keyword_form('send {"sql": "SELECT 1"}', ["delta"])
    'send {"sql": "SELECT 1"}'

    A member inside a JSON object (``e.g. {"sql": "...", "epsilon": 0.5}``: a body to send)
    stays as it is:

    >>> keyword_form('send JSON, e.g. {"sql": "SELECT 1", "epsilon": 0.5}', ["epsilon"])
    'send JSON, e.g. {"sql": "SELECT 1", "epsilon": 0.5}'
    """
    names = sorted(names, key=len, reverse=True)
    if not names:
        return text
    alternatives = "|".join(re.escape(n) for n in names)

    def keyword(m: re.Match[str]) -> str:
        before = text[:m.start()]
        if before.count("{") > before.count("}"):  # inside an object: JSON for the API
            return m.group(0)
        return f"{m.group(1)}={m.group(2)}"

    return re.sub(rf'"({alternatives})":\s*({_VALUE})', keyword, text)


def _command_flags(fn: Callable[..., Any]) -> dict[str, str]:
    """Parameter name -> long option of a Typer command (from its signature, as Typer reads
    it: an ``Option`` with its declared names, or any other parameter with a default)."""
    from typer.models import ArgumentInfo, OptionInfo

    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception:  # an unresolvable annotation: fall back to the defaults only
        hints = {}
    out = {}
    for name, param in inspect.signature(fn).parameters.items():
        infos = [param.default, *getattr(hints.get(name), "__metadata__", ())]
        if any(isinstance(i, ArgumentInfo) for i in infos):
            continue
        decls: list[str] = []
        for info in infos:
            if isinstance(info, OptionInfo):
                decls += [info.default] if isinstance(info.default, str) else []
                decls += list(info.param_decls or ())
        longs = [d for d in decls if isinstance(d, str) and d.startswith("--")]
        if longs:
            out[name] = longs[0]
        elif param.default is not inspect.Parameter.empty or decls:
            out[name] = "--" + name.replace("_", "-")
    return out


def handle_errors(fn: F | None = None, *, aliases: Mapping[str, str] | None = None) -> Any:
    """Turn statcurator's errors into a one-line message and exit code 2 (no traceback).

    Used as ``@handle_errors`` or ``@handle_errors(aliases={"meta": "--metadata"})``. Remedies
    are rewritten with :func:`cli_remedy` through the command's own options (a keyword that
    is the name of one of its parameters becomes that parameter's flag) and ``aliases`` (library
    keywords the command calls differently).
    """
    if fn is None:
        return functools.partial(handle_errors, aliases=aliases)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except StatcuratorError as e:
            flags = {**_command_flags(fn), **(aliases or {})}
            remedy = cli_remedy(e.remedy, flags) if e.remedy else None
            problem = cli_remedy(e.problem, flags)
            if kwargs.get("json_output"):
                print_json({"error": type(e).__name__,
                            "message": f"{problem}; {remedy}" if remedy else problem,
                            "problem": problem, "remedy": remedy})
            else:
                emit(("error:", "bold red"), " ", problem + (f"; {remedy}" if remedy else ""),
                     stderr=True)
            raise typer.Exit(2) from None

    return wrapper


JSON_OPTION = typer.Option(False, "--json", help="Print one JSON object instead of tables.")
