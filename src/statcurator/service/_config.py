"""The service's configuration: a TOML file, overridable by environment variables.

Every key is checked at start; a bad one is refused with a :class:`ConfigError` that names
the key (``server.port``) and the remedy. Without a file the configuration is the demo's:
localhost, DuckDB, the command line's SQLite ledger in the user's data directory, and the
bundled Adult data with a dataset-wide budget and a grant for each new analyst.

>>> cfg = ServiceConfig.parse({"server": {"port": 9000},
...                            "datasets": [{"name": "adult", "data": "adult",
...                                          "budget": {"epsilon": 4}}]}, env={})
>>> cfg.server.port, cfg.datasets[0].budget
(9000, PureDP(epsilon=Fraction(4, 1)))
>>> ServiceConfig.parse({"server": {"prot": 9000}}, env={})
Traceback (most recent call last):
...
statcurator.service._config.ConfigError: unknown configuration key 'server.prot'; did you mean 'server.port'? (keys of [server]: host, port, workers, max_body_bytes, max_sql_chars, max_groups, requests_per_second, burst, console)
>>> ServiceConfig.parse({}, env={"STATCURATOR_SERVER__PORT": "70000"})
Traceback (most recent call last):
...
statcurator.service._config.ConfigError: server.port (from STATCURATOR_SERVER__PORT) must be a whole number in [0, 65535], got 70000; set server.port = 8750 (0 picks a free port)
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from pathlib import Path
from typing import Any

from ..core.errors import InvalidParameterError, StatcuratorError
from ..core.measures import ApproxDP, PrivacyLoss, loss_from_parameters

__all__ = ["ServiceConfig", "ServerConfig", "LedgerConfig", "DatasetConfig", "ConfigError",
           "ENV_PREFIX", "DEFAULT_PORT", "DEMO_DATASET_BUDGET", "DEMO_GRANT"]

#: prefix of the environment variables that override keys: STATCURATOR_SERVER__PORT=9000
ENV_PREFIX = "STATCURATOR_"
DEFAULT_PORT = 8750
#: the demo's budgets for the bundled Adult data (ε = 10 for everyone together; each new
#: analyst gets ε = 1): the same figures as the in-memory Curator's defaults
DEMO_DATASET_BUDGET: PrivacyLoss = ApproxDP(10, Fraction(1, 10**5))
DEMO_GRANT: PrivacyLoss = ApproxDP(1, Fraction(1, 10**6))


class ConfigError(InvalidParameterError):
    """A configuration key is missing, unknown or has a bad value (the message names it)."""


ConfigError.__module__ = "statcurator.service._config"


@dataclass(frozen=True)
class ServerConfig:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    workers: int = 1
    max_body_bytes: int = 64 * 1024
    max_sql_chars: int = 20_000
    #: the most groups one answer may have (the product of its GROUP BY key sets): a query
    #: that reads no data costs no budget, so this is what bounds its memory and time
    max_groups: int = 100_000
    #: each identity's request rate limit (one token bucket, shared by the workers): this many
    #: requests per second on average, ``burst`` at once; 0 turns the limit off
    requests_per_second: float = 50.0
    burst: int = 100
    console: bool = True


@dataclass(frozen=True)
class LedgerConfig:
    """Where the ledger (and the analysts' token hashes) live: a SQLite ``path`` or a
    PostgreSQL ``dsn`` (with ``schema``)."""

    path: str | None = None
    dsn: str | None = None
    schema: str = "public"
    timeout: float = 30.0
    tokens: str | None = None  # SQLite file of the token hashes (default: beside the ledger)

    @property
    def postgres(self) -> bool:
        return self.dsn is not None


@dataclass(frozen=True)
class DatasetConfig:
    name: str
    data: str
    metadata: str | None = None
    budget: PrivacyLoss | None = None
    grant: PrivacyLoss | None = None


@dataclass(frozen=True)
class ServiceConfig:
    """The whole configuration (see docs/service.md for every key)."""

    server: ServerConfig = field(default_factory=ServerConfig)
    engine: str = "duckdb"
    ledger: LedgerConfig = field(default_factory=LedgerConfig)
    repeat: str = "fresh"  # "stored": an identical repeated query returns the stored answer
    alpha: float = 0.05
    datasets: tuple[DatasetConfig, ...] = ()
    analysts: Mapping[str, Mapping[str, PrivacyLoss]] = field(default_factory=dict)
    source: str = "(defaults)"

    # -- loading --------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None, *,
             env: Mapping[str, str] | None = None) -> ServiceConfig:
        """The configuration in ``path`` (None: the demo's), with ``env``'s overrides."""
        env = os.environ if env is None else env
        if path is None:
            return cls.parse(demo_document(), env=env, source="(defaults)")
        p = Path(path).expanduser()
        try:
            doc = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"configuration file {str(p)!r} does not exist",
                              remedy="pass --config FILE of an existing TOML file, or leave "
                                     "--config out for the demo configuration") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read configuration file {str(p)!r}: {e}",
                              remedy="check its path and permissions") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"configuration file {str(p)!r} is not valid TOML: {e}",
                              remedy="fix the TOML syntax at the position shown") from None
        return cls.parse(doc, env=env, source=str(p), base=p.parent)

    @classmethod
    def parse(cls, doc: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
              source: str = "(document)", base: Path | None = None) -> ServiceConfig:
        """Check a parsed TOML document (and the environment's overrides)."""
        doc = _apply_env(dict(doc), os.environ if env is None else env)
        _known(doc, "", _SECTIONS)
        server = _section(doc, "server", ServerConfig)
        _check_server(server, doc)
        ledger = _section(doc, "ledger", LedgerConfig)
        if ledger.path is not None and ledger.dsn is not None:
            raise ConfigError("ledger.path and ledger.dsn are both set",
                              remedy="keep ledger.path for SQLite (one machine) or ledger.dsn "
                                     "for PostgreSQL (several processes or machines), not both")
        if not ledger.schema.isidentifier():
            raise ConfigError(f"ledger.schema must be a plain identifier (letters, digits, "
                              f"underscores), got {ledger.schema!r}",
                              remedy='set ledger.schema = "statcurator"')
        if ledger.dsn is not None and not ledger.dsn.startswith(("postgresql://",
                                                                  "postgres://")):
            raise ConfigError("ledger.dsn must be a PostgreSQL URL (postgresql://...; not "
                              "shown: it may hold a password)",
                              remedy='set ledger.dsn = "postgresql://user@host:5432/db"')
        if ledger.timeout <= 0:
            raise ConfigError("ledger.timeout must be positive", remedy="set ledger.timeout = 30")
        if base is not None:
            ledger = replace(ledger, path=_resolve(ledger.path, base),
                             tokens=_resolve(ledger.tokens, base))
        engine = _section(doc, "engine", _EngineSection).name
        if engine not in ("duckdb", "spark", "memory"):
            raise ConfigError(f"engine.name must be duckdb, spark or memory, got {engine!r}",
                              remedy='set engine.name = "duckdb"')
        queries = _section(doc, "queries", _QueriesSection)
        if queries.repeat not in ("fresh", "stored"):
            raise ConfigError(f"queries.repeat must be \"fresh\" or \"stored\", got "
                              f"{queries.repeat!r}",
                              remedy='set queries.repeat = "stored" to answer an identical '
                                     'repeated query with the stored answer, free')
        if not 0 < queries.alpha < 1:
            raise ConfigError(f"queries.alpha must be in (0, 1), got {queries.alpha}",
                              remedy="set queries.alpha = 0.05 (95% intervals)")
        datasets = _datasets(doc.get("datasets", []), base)
        analysts = _analysts(doc.get("analysts", {}), {d.name for d in datasets})
        return cls(server=server, engine=engine, ledger=ledger, repeat=queries.repeat,
                   alpha=queries.alpha, datasets=datasets, analysts=analysts, source=source)

    def with_ledger_path(self, path: str) -> ServiceConfig:
        return replace(self, ledger=replace(self.ledger, path=path, dsn=None))

    # -- derived --------------------------------------------------------------------------
    def ledger_location(self) -> str:
        """The SQLite file (or the PostgreSQL DSN without its password) of the ledger."""
        if self.ledger.dsn is not None:
            from ..accounting._postgres import _redacted

            return _redacted(self.ledger.dsn, self.ledger.schema)
        return str(self.sqlite_path())

    def sqlite_path(self) -> Path:
        from ..cli.ledger import ledger_path

        return Path(self.ledger.path or ledger_path(None)).expanduser()

    def tokens_path(self) -> Path:
        """The SQLite file of the token hashes (beside a SQLite ledger; ``ledger.tokens``)."""
        if self.ledger.tokens:
            return Path(self.ledger.tokens).expanduser()
        led = self.sqlite_path()
        if str(led) == ":memory:":  # a throwaway ledger: throwaway tokens, no file anywhere
            return led
        return led.with_name(led.stem + ".tokens.db")


@dataclass(frozen=True)
class _EngineSection:
    name: str = "duckdb"


@dataclass(frozen=True)
class _QueriesSection:
    repeat: str = "fresh"
    alpha: float = 0.05


_SECTIONS: dict[str, Any] = {"server": ServerConfig, "engine": _EngineSection,
                             "ledger": LedgerConfig, "queries": _QueriesSection,
                             "datasets": list, "analysts": dict}
_DATASET_KEYS = ("name", "data", "metadata", "budget", "grant")


def demo_document() -> dict[str, Any]:
    """The configuration of ``statcurator serve`` without ``--config``."""
    return {"datasets": [{"name": "adult", "data": "adult",
                          "budget": {"epsilon": 10, "delta": "1e-5"},
                          "grant": {"epsilon": 1, "delta": "1e-6"}}]}


def _known(table: Mapping[str, Any], prefix: str, keys: Any) -> None:
    names = [k for k in keys if not k.startswith("__")]
    for key in table:
        if key == "__env__":
            continue
        if key not in names:
            where = f"{prefix}{key}"
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"did you mean '{prefix}{close[0]}'? " if close else ""
            section = f"[{prefix[:-1]}]" if prefix else "the top level"
            raise ConfigError(f"unknown configuration key {where!r}",
                              remedy=f"{hint}(keys of {section}: {', '.join(names)})")


def _section(doc: Mapping[str, Any], name: str, kind: type) -> Any:
    raw = doc.get(name, {})
    if not isinstance(raw, Mapping):
        raise ConfigError(f"[{name}] must be a table", remedy=f"write it as [{name}] key = value")
    fields = kind.__dataclass_fields__
    _known(raw, f"{name}.", fields)
    values = {}
    for key, value in raw.items():
        default = fields[key].default
        values[key] = _typed(value, default, f"{name}.{key}", doc.get("__env__", {}))
    return kind(**values)


def _typed(value: Any, default: Any, key: str, env_keys: Mapping[str, str]) -> Any:
    origin = f" (from {env_keys[key]})" if key in env_keys else ""
    want = type(default) if default is not None else str
    if want is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{key}{origin} must be true or false, got {value!r}",
                          remedy=f"set {key} = true (or false)")
    if want is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}{origin} must be a whole number, got {value!r}",
                          remedy=f"set {key} = {default}")
    if want is float:
        if isinstance(value, int | float) and not isinstance(value, bool) \
                and value == value and abs(value) != float("inf"):
            return float(value)
        raise ConfigError(f"{key}{origin} must be a finite number, got {value!r}",
                          remedy=f"set {key} = {default}")
    if isinstance(value, str) and value.strip():
        return value
    raise ConfigError(f"{key}{origin} must be a non-empty string, got {value!r}",
                      remedy=f'set {key} = "..."')


def _check_server(s: ServerConfig, doc: Mapping[str, Any]) -> None:
    env_keys = doc.get("__env__", {})

    def origin(key: str) -> str:
        return f" (from {env_keys[key]})" if key in env_keys else ""

    if not 0 <= s.port <= 65535:
        raise ConfigError(f"server.port{origin('server.port')} must be a whole number in "
                          f"[0, 65535], got {s.port}",
                          remedy=f"set server.port = {DEFAULT_PORT} (0 picks a free port)")
    if not 1 <= s.workers <= 64:
        raise ConfigError(f"server.workers{origin('server.workers')} must be in [1, 64], got "
                          f"{s.workers}", remedy="set server.workers = 2 (about one per core)")
    if not 1024 <= s.max_body_bytes <= 64 * 2**20:
        raise ConfigError(f"server.max_body_bytes{origin('server.max_body_bytes')} must be in "
                          f"[1024, 67108864], got {s.max_body_bytes}",
                          remedy="set server.max_body_bytes = 65536")
    if not 16 <= s.max_sql_chars <= s.max_body_bytes:
        raise ConfigError(f"server.max_sql_chars must be in [16, server.max_body_bytes], got "
                          f"{s.max_sql_chars}", remedy="set server.max_sql_chars = 20000")
    if not 1 <= s.max_groups <= 1_000_000:
        raise ConfigError(f"server.max_groups{origin('server.max_groups')} must be in "
                          f"[1, 1000000], got {s.max_groups}",
                          remedy="set server.max_groups = 100000")
    if not (s.requests_per_second == 0 or 0.001 <= s.requests_per_second <= 1_000_000):
        raise ConfigError(f"server.requests_per_second{origin('server.requests_per_second')} "
                          f"must be 0 (no limit) or in [0.001, 1000000], got "
                          f"{s.requests_per_second}",
                          remedy="set server.requests_per_second = 50 (0 turns the limit off)")
    if not 1 <= s.burst <= 1_000_000:
        raise ConfigError(f"server.burst{origin('server.burst')} must be in [1, 1000000], got "
                          f"{s.burst}", remedy="set server.burst = 100")
    if not s.host or any(c.isspace() for c in s.host):
        raise ConfigError(f"server.host{origin('server.host')} is not a host name or address: "
                          f"{s.host!r}", remedy='set server.host = "127.0.0.1"')


def _loss(value: Any, key: str) -> PrivacyLoss:
    if isinstance(value, int | float) and not isinstance(value, bool):
        value = {"epsilon": value}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a table such as {{ epsilon = 1, delta = 1e-6 }}, got "
                          f"{value!r}", remedy=f"set {key} = {{ epsilon = 1 }}")
    _known(value, f"{key}.", ("epsilon", "delta", "rho"))
    try:
        return loss_from_parameters(**value, strings=True)
    except StatcuratorError as e:
        raise ConfigError(f"{key}: {e.problem}", remedy=f"set {key} = {{ epsilon = 1 }} "
                          "(or { epsilon = 1, delta = 1e-6 }, or { rho = 0.5 })") from None


def _datasets(raw: Any, base: Path | None) -> tuple[DatasetConfig, ...]:
    if not isinstance(raw, list):
        raise ConfigError("datasets must be an array of tables",
                          remedy='write each as [[datasets]] name = "adult" data = "adult"')
    out: list[DatasetConfig] = []
    for i, d in enumerate(raw):
        key = f"datasets[{i}]"
        if not isinstance(d, Mapping):
            raise ConfigError(f"{key} must be a table", remedy="write it as [[datasets]]")
        _known(d, f"{key}.", _DATASET_KEYS)
        for need in ("name", "data"):
            if not isinstance(d.get(need), str) or not d[need].strip():
                raise ConfigError(f"{key}.{need} is missing or empty",
                                  remedy=f'set {need} = "..." in that [[datasets]] table '
                                         '(data: a CSV/Parquet/DuckDB file or "adult")')
        if d["name"] in {x.name for x in out}:
            raise ConfigError(f"{key}.name {d['name']!r} appears twice",
                              remedy="give every dataset its own name")
        meta = d.get("metadata")
        if meta is not None and not isinstance(meta, str):
            raise ConfigError(f"{key}.metadata must be a path", remedy='metadata = "x.toml"')
        data = d["data"]
        if base is not None and data not in _bundled():
            data = _resolve(data, base)
        out.append(DatasetConfig(
            name=d["name"], data=data, metadata=_resolve(meta, base) if base else meta,
            budget=_loss(d["budget"], f"{key}.budget") if "budget" in d else None,
            grant=_loss(d["grant"], f"{key}.grant") if "grant" in d else None))
    return tuple(out)


def _analysts(raw: Any, datasets: set[str]) -> dict[str, dict[str, PrivacyLoss]]:
    from ..accounting import analyst_id

    if not isinstance(raw, Mapping):
        raise ConfigError("[analysts] must be a table of analysts",
                          remedy="write [analysts.alice] adult = { epsilon = 1 }")
    out: dict[str, dict[str, PrivacyLoss]] = {}
    for name, grants in raw.items():
        try:
            who = analyst_id(name)
        except StatcuratorError as e:
            raise ConfigError(f"analysts.{name}: {e.problem}", remedy=e.remedy) from None
        if not isinstance(grants, Mapping):
            raise ConfigError(f"analysts.{name} must be a table of grants",
                              remedy=f"write [analysts.{name}] adult = {{ epsilon = 1 }}")
        _known(grants, f"analysts.{name}.", sorted(datasets))
        out[who] = {ds: _loss(v, f"analysts.{name}.{ds}") for ds, v in grants.items()}
    return out


def _bundled() -> tuple[str, ...]:
    from .. import datasets

    return datasets.names()


def _resolve(path: str | None, base: Path) -> str | None:
    """A path of the file, relative to the configuration file's folder."""
    if path is None or path == ":memory:":
        return path
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else base / p)


def _redact(dsn: str) -> str:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(dsn)
    if parts.password:
        host = parts.hostname or ""
        netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=netloc)
    return urlunsplit(parts)


def _apply_env(doc: dict[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """Overrides from ``STATCURATOR_<SECTION>__<KEY>`` (two underscores), values read as
    TOML literals (``9000``, ``true``, ``"x"``) or else as text."""
    overrides: dict[str, str] = {}
    for var, value in env.items():
        if not var.startswith(ENV_PREFIX) or "__" not in var:
            continue
        section, _, key = var[len(ENV_PREFIX):].lower().partition("__")
        if section not in ("server", "engine", "ledger", "queries") or not key:
            raise ConfigError(f"environment variable {var} names no configuration key",
                              remedy="use STATCURATOR_<SECTION>__<KEY> with a section of "
                                     "server, engine, ledger, queries (e.g. "
                                     "STATCURATOR_SERVER__PORT=9000), or unset it")
        table = dict(doc.get(section, {}) or {})
        table[key] = _env_value(value)
        doc[section] = table
        overrides[f"{section}.{key}"] = var
    doc["__env__"] = overrides
    return doc


def _env_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


# the marker key is not a configuration key
_SECTIONS["__env__"] = dict
