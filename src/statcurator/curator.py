"""The :class:`Curator`: the one object users hold.

It keeps the catalog (registered private tables with their metadata, and public tables), an
engine (DuckDB by default) and a privacy ledger, and answers DP queries along DESIGN.md's
path::

    SQL ──sqlglot──▶ plan ──rewrite──▶ clamped, bounded plan ──compile──▶ (engine plan,
    measurements) ──ledger.charge(cost)──▶ engine (exact aggregates) ──▶ noise ──▶ Release

The cost charged is computed from the *same* compiled object whose mechanisms add the noise;
the ledger charges before the engine runs; a refused or over-budget query touches no data
and costs nothing; a replayed request id returns the stored answer and never fresh noise.

>>> import statcurator as sc
>>> cur = Curator()
>>> _ = cur.register("adult", sc.datasets.adult())
>>> q = cur.sql("SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex")
>>> q.cost(epsilon=1)
PureDP(epsilon=Fraction(1, 1))
>>> round(q.accuracy(epsilon=1)[0]["halfwidth"], 1)      # ±3 at 95%: discrete Laplace, scale 1
3.0
>>> ans = q.release(epsilon=1, analyst="alice")
>>> ans.table.column_names
['sex', 'n', 'n_low', 'n_high']
>>> cur.budget("alice", "adult").remaining                  # the default budget: ε=1, δ=1e-6
ApproxDP(epsilon=Fraction(0, 1), delta=Fraction(1, 1000000))

Default budget policy: an analyst without a budget on a dataset gets ``default_budget`` the
first time it is needed (by default ε = 1, δ = 10⁻⁶ — deliberately small; raise it with
:meth:`Curator.set_budget`). With ``default_budget=None`` nothing is answered until the data
owner sets a budget.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import Any

from .core.errors import (
    DataError,
    InvalidParameterError,
    MetadataError,
    UnsupportedQueryError,
)
from .core.measures import ApproxDP, PrivacyLoss, loss_from_parameters
from .core.numbers import exact, round_up_decimal
from .core.schema import Column, TableMeta

__all__ = ["Curator", "Query", "DEFAULT_BUDGET"]

#: The budget an analyst gets on a dataset the first time one is needed (see the module docs).
DEFAULT_BUDGET: PrivacyLoss = ApproxDP(1, Fraction(1, 10**6))


class Curator:
    """A privacy-preserving curator: catalog + engine + ledger + entry points.

    ``engine`` is ``"duckdb"`` (default), ``"spark"``, ``"memory"`` or an engine object;
    ``ledger`` is None (in memory), a path to a SQLite ledger file, or a ``Ledger``;
    ``default_budget`` is the budget policy (None: budgets must be set explicitly);
    ``alpha`` is the default error rate of the released confidence intervals.
    """

    def __init__(self, engine: Any = "duckdb", ledger: Any = None, *,
                 default_budget: PrivacyLoss | None = DEFAULT_BUDGET, alpha: float = 0.05,
                 options: Any = None, **engine_options: Any) -> None:
        from .accounting import Ledger
        from .engines import get_engine
        from .query.catalog import DictCatalog
        from .query.compiler import CompileOptions

        self.engine = get_engine(engine, **engine_options) if isinstance(engine, str) else engine
        if ledger is None or isinstance(ledger, str | Path):
            self.ledger = Ledger(None if ledger is None else str(ledger))
        else:
            self.ledger = ledger
        if default_budget is not None and not isinstance(default_budget, PrivacyLoss):
            raise InvalidParameterError("default_budget must be a privacy loss or None",
                                        remedy="e.g. default_budget=sc.ApproxDP(1, 1e-6)")
        self.default_budget = default_budget
        self.alpha = float(alpha)
        self.options = options or CompileOptions()
        self.catalog = DictCatalog()
        self._data: dict[str, Any] = {}  # name -> TableSource (None: metadata only)
        self._version = 0
        self._cache: dict[tuple[int, str], Any] = {}
        self._lock = threading.Lock()

    # -- catalog ------------------------------------------------------------------------
    def register(self, name: str, data: Any = None, metadata: Any = None, *,
                 separator: str | None = None) -> Any:
        """Register a private table under ``name``.

        ``data``: a :class:`~statcurator.io.dataset.Dataset` (data and metadata), a path (CSV,
        Parquet, DuckDB file — read in place; ``FILE.duckdb:TABLE`` picks a table), the name
        of a bundled dataset (``"adult"``), a pandas/Polars DataFrame or Arrow table, or None
        to register the metadata alone (dry runs only). ``metadata``: a TOML path or a
        :class:`~statcurator.core.schema.TableMeta` (for a file ``x.csv`` a sibling
        ``x.toml`` is used when none is given). Undeclared columns have no bounds or
        categories: they can be filtered on and counted, not summed or grouped publicly.

        >>> import pyarrow as pa
        >>> from statcurator.core.schema import Column, TableMeta
        >>> cur = Curator()
        >>> meta = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),))
        >>> cur.register("t", pa.table({"x": [0.5, 0.25]}), meta).kind("x")
        'real'
        >>> cur.tables
        ('t',)
        """
        from .query.catalog import TableInfo

        meta, source = self._resolve(name, data, metadata, separator)
        if source is None:
            info = TableInfo.from_meta(meta, name)
        else:
            missing = [c for c in meta.names if c not in source.schema.names]
            if missing:
                raise MetadataError(
                    f"metadata of {name!r} declares column(s) {missing} that the data lacks",
                    remedy="data columns are: " + ", ".join(source.schema.names))
            info = TableInfo.from_schema(name, meta, source.schema)
        with self._lock:
            self.catalog.tables.pop(name, None)
            if source is not None:
                self.engine.register(name, source)
            self.catalog.tables[name] = info
            self._data[name] = source
            self._version += 1
        return info

    def register_public(self, name: str, data: Any, metadata: Any = None) -> Any:
        """Register a *public* table (joins only: it is read freely, as it is public).

        Its distinct values are public key sets, its ranges public bounds, and the
        repetition of its join keys the stability of a join.

        >>> cur = Curator()
        >>> info = cur.register_public("regions", {"city": ["a", "b"], "region": ["N", "S"]})
        >>> info.public, info.public_values("region")
        (True, ('N', 'S'))
        """
        from .io.tables import read_table
        from .query.catalog import TableInfo

        table = _read_public(data, read_table)
        meta = _meta(metadata, name) if metadata is not None else _infer_meta(table.schema, name)
        info = TableInfo.from_schema(name, meta, table.schema, public=True, data=table)
        from .engines import TableSource

        with self._lock:
            self.engine.register(name, TableSource.from_arrow(table))
            self.catalog.tables[name] = info
            self._data[name] = None  # public: joined by DP queries, never anonymized
            self._version += 1
        return info

    def unregister(self, name: str) -> None:
        with self._lock:
            self.catalog.tables.pop(name, None)
            if name in self._data:
                self._data.pop(name)
                self.engine.unregister(name)
            self._version += 1

    @property
    def tables(self) -> tuple[str, ...]:
        """The registered table names."""
        return tuple(self.catalog.tables)

    def metadata(self, name: str) -> TableMeta:
        """The declared metadata of a registered table."""
        return self.catalog.table_info(name).meta

    # -- anonymization ------------------------------------------------------------------
    def anonymize(self, name: str, *criteria: Any, **options: Any) -> Any:
        """Anonymize the registered table ``name`` under ``criteria`` (k-anonymity,
        l-diversity, t-closeness, δ-presence) and return the verified release.

        The options are those of :func:`statcurator.anonymize.anonymize` (``suppression``,
        ``algorithm``, ``metric``, ``qi``, ``sensitive``, ``suppressed``, ``progress``); the
        quasi-identifiers and hierarchies come from the table's declared metadata. An
        anonymized release is microdata under a syntactic privacy model: it is not charged to
        any DP budget, and what it leaks is what the attack lab measures.

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> res = cur.anonymize("adult", sc.KAnonymity(10), sc.LDiversity("occupation", 5))
        >>> res.classes, res.verified["distinct 5-diversity of occupation"]
        (8, True)
        """
        from .anonymize import anonymize
        from .io.dataset import Dataset

        info = self.catalog.table_info(name)
        if info.public:
            raise DataError(f"table {name!r} is registered as public",
                            remedy="anonymize a private table (register it with register())")
        source = self._data.get(name)
        if source is None:
            raise DataError(f"table {name!r} was registered without data",
                            remedy="register it with its data to anonymize it")
        return anonymize(Dataset(name, source.to_arrow(), info.meta), *criteria, **options)

    def _resolve(self, name: str, data: Any, metadata: Any, separator: str | None):
        from .engines import TableSource
        from .io.dataset import Dataset
        from .io.tables import read_table

        meta = _meta(metadata, name) if metadata is not None else None
        if isinstance(data, str) and not Path(data).exists():
            from . import datasets

            if data in datasets.names():
                data = datasets.load(data)
        if isinstance(data, Dataset):
            return meta or data.meta, TableSource.from_arrow(data.table)
        if data is None:
            if meta is None:
                raise MetadataError(f"nothing to register under {name!r}",
                                    remedy="pass data, metadata, or both")
            if meta.source is None:
                return meta, None
            data = meta.source
        if isinstance(data, str | Path):
            path = Path(data)
            if meta is None and path.with_suffix(".toml").exists():
                meta = _meta(path.with_suffix(".toml"), name)
            source = _source_from_path(path, meta, separator)
        else:
            source = TableSource.from_arrow(read_table(data))
        if meta is None:
            meta = _infer_meta(source.schema, name)
        return meta, source

    # -- queries ------------------------------------------------------------------------
    def sql(self, text: str) -> Query:
        """A DP query from SQL (parsed now; nothing runs until :meth:`Query.release`)."""
        from .query.sql import parse_sql

        key = (self._version, text)
        query = self._cache.get(key)
        if query is None:  # a Query is immutable and caches its compiled form: share it
            query = Query(self, parse_sql(text, self.catalog), text)
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = query
        return query

    def table(self, name: str, alias: str | None = None) -> Any:
        """A dataframe-style builder over a registered table; ``.agg(...)`` gives a Query.

        >>> import statcurator as sc
        >>> from statcurator.query.builder import col, count
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> q = cur.table("adult").filter(col("age") >= 18).group_by("sex").agg(count().alias("n"))
        >>> q.plan == cur.sql("SELECT sex, COUNT(*) AS n FROM adult WHERE age >= 18 GROUP BY sex").plan
        True
        """
        from .query.builder import Frame

        return Frame(self.catalog, name, alias, finish=lambda plan: Query(self, plan))

    # -- budgets ------------------------------------------------------------------------
    def set_budget(self, analyst: str, dataset: str, total: PrivacyLoss | None = None, *,
                   epsilon: Any = None, delta: Any = None, rho: Any = None) -> Any:
        """Set ``analyst``'s total budget on ``dataset`` (a loss, or epsilon/delta/rho).

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> cur.set_budget("alice", "adult", epsilon=3).total
        PureDP(epsilon=Fraction(3, 1))
        >>> cur.budget("alice", "adult").remaining
        PureDP(epsilon=Fraction(3, 1))
        """
        if total is None:
            total = loss_from_parameters(epsilon=epsilon, delta=delta, rho=rho)
        self.catalog.table_info(dataset)
        return self.ledger.set_budget(analyst, dataset, total)

    def budget(self, analyst: str, dataset: str) -> Any:
        """The budget status (total, spent, remaining) of ``analyst`` on ``dataset``."""
        self._ensure_budget(analyst, dataset)
        return self.ledger.status(analyst, dataset)

    def _ensure_budget(self, analyst: str, dataset: str) -> None:
        from .accounting import NoBudgetError

        if self.default_budget is None:
            return
        try:
            self.ledger.status(analyst, dataset)
        except NoBudgetError:
            self.ledger.set_budget(analyst, dataset, self.default_budget)

    def close(self) -> None:
        """Release the engine and the ledger."""
        self.engine.close()
        self.ledger.close()

    def __enter__(self) -> Curator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Curator(engine={self.engine.name!r}, tables={list(self.tables)}, "
                f"ledger={getattr(self.ledger, 'location', '?')!r})")


class Query:
    """One DP query, bound to a curator. Dry runs (``cost``, ``accuracy``, ``epsilon_for``,
    ``explain``) never touch data or budget; ``release`` charges and answers.

    >>> import statcurator as sc
    >>> cur = Curator()
    >>> _ = cur.register("adult", sc.datasets.adult())
    >>> q = cur.sql("SELECT AVG(age) AS a FROM adult WHERE sex = 'Female'")
    >>> q.cost(epsilon=0.5)
    PureDP(epsilon=Fraction(1, 2))
    >>> [(m.label, m.sensitivity) for m in q.compile().measures]
    [('a: count', Fraction(1, 1)), ('a: centred sum', Fraction(60, 1))]
    >>> rel = q.release(epsilon=0.5)
    >>> 30 < rel.rows()[0]["a"] < 45
    True
    """

    def __init__(self, curator: Curator, plan: Any, text: str | None = None) -> None:
        self.curator = curator
        self.plan = plan
        self.text = text
        self._compiled: Any = None
        self._version = -1

    @property
    def query_text(self) -> str:
        """The SQL text (the plan rendered as SQL for builder queries)."""
        return self.text if self.text is not None else self.plan.sql()

    def compile(self) -> Any:
        """The compiled query (cached): engine plan and measurements, independent of ε."""
        from .query.compiler import compile_query

        if self._compiled is None or self._version != self.curator._version:
            self._compiled = compile_query(self.plan, self.curator.catalog,
                                           options=self.curator.options, text=self.query_text)
            self._version = self.curator._version
        return self._compiled

    def bind(self, epsilon: Any, delta: Any = None, *,
             weights: Mapping[str, Any] | None = None) -> Any:
        """The compiled query with its mechanisms for this ε (and δ)."""
        return self.compile().bind(epsilon, delta, weights=weights)

    # -- dry runs -----------------------------------------------------------------------
    def cost(self, epsilon: Any, delta: Any = None, *,
             weights: Mapping[str, Any] | None = None) -> PrivacyLoss:
        """The privacy loss a release at ``epsilon`` (and ``delta``) would be charged."""
        return self.bind(epsilon, delta, weights=weights).cost

    def accuracy(self, epsilon: Any, alpha: float | None = None, delta: Any = None, *,
                 rows: int | None = None, weights: Mapping[str, Any] | None = None
                 ) -> list[dict[str, Any]]:
        """Per aggregate, the (1 - alpha) half-width of its interval (see
        :meth:`~statcurator.query.compiler.BoundQuery.accuracy`)."""
        a = self.curator.alpha if alpha is None else alpha
        return self.bind(epsilon, delta, weights=weights).accuracy(a, rows)

    def epsilon_for(self, halfwidth: Any, alpha: float | None = None, delta: Any = None, *,
                    rows: int | None = None, weights: Mapping[str, Any] | None = None) -> Fraction:
        """The smallest ε (6 significant digits, rounded up) for which every output with a
        value interval has half-width at most ``halfwidth`` at level ``alpha``."""
        a = self.curator.alpha if alpha is None else alpha
        h = float(exact(halfwidth, "halfwidth"))

        def worst(eps: Fraction) -> float:
            acc = self.bind(eps, delta, weights=weights).accuracy(a, rows)
            widths = [x["halfwidth"] for x in acc if x.get("aggregate") != "partition selection"]
            if any(w is None for w in widths):
                missing = [x["output"] for x in acc if x["halfwidth"] is None
                           and x.get("aggregate") != "partition selection"]
                raise UnsupportedQueryError(
                    f"output(s) {missing} have no value interval before the data are seen",
                    remedy="pass rows=N (a public estimate of the row count) for AVG/VARIANCE; "
                           "quantiles have only a rank accuracy")
            return max(widths)

        hi = Fraction(1)
        for _ in range(60):
            if worst(hi) <= h:
                break
            hi *= 4
        else:
            raise InvalidParameterError(f"no ε up to {hi} gives ±{halfwidth}",
                                        remedy="ask for a wider interval")
        lo = hi / 4 if hi > 1 else Fraction(0)
        for _ in range(60):  # bisection on [lo, hi] with worst(hi) <= h
            mid = (lo + hi) / 2
            if worst(mid) <= h:
                hi = mid
            else:
                lo = mid
            if hi - lo <= hi * Fraction(1, 10**7):
                break
        eps = round_up_decimal(hi, 6)
        while worst(eps) > h:  # pragma: no cover - rounding up only helps
            eps = round_up_decimal(eps * Fraction(1000001, 1000000), 6)
        return eps

    def explain(self, epsilon: Any = None, delta: Any = None) -> str:
        """The rewritten plan, the engine SQL and the sensitivities (and, with ε, the split)."""
        cq = self.compile()
        lines = [cq.explain()]
        sql_of = getattr(self.curator.engine, "sql", None)
        if sql_of is not None:
            main, hists = sql_of(cq.engine_plan, "0" * 32)
            lines.append(f"engine SQL ({self.curator.engine.name}, salt hidden):\n  " + main)
            lines += ["  " + h for h in hists]
        if epsilon is not None:
            lines.append("ε split:\n" + self.bind(epsilon, delta).describe())
        return "\n".join(lines)

    # -- post-processing clauses ----------------------------------------------------------
    def having(self, predicate: Any) -> Query:
        """A HAVING clause on released outputs (post-processing, free)."""
        from .query.builder import with_having

        return Query(self.curator, with_having(self.plan, predicate))

    def sort(self, *keys: Any, descending: bool | list[bool] = False) -> Query:
        """ORDER BY released outputs (post-processing, free)."""
        from .query.builder import with_order

        return Query(self.curator, with_order(self.plan, *keys, descending=descending))

    # -- the release --------------------------------------------------------------------
    def release(self, epsilon: Any, delta: Any = None, *, analyst: str = "default",
                request_id: str | None = None, alpha: float | None = None,
                weights: Mapping[str, Any] | None = None) -> Any:
        """Charge ``analyst``'s budget, run the query, and return the noisy :class:`Release`.

        Order of events: compile and bind (no data) → refuse now if anything is wrong →
        charge the ledger (refused: nothing touched, nothing spent) → a replayed
        ``request_id`` returns its stored answer → the engine computes exact aggregates →
        the same mechanisms whose cost was charged add the noise → the answer is stored for
        replays and returned.
        """
        from .mechanisms import rng
        from .query.release import Release

        cur = self.curator
        # Nothing may be registered between the compilation (sensitivities, join stabilities,
        # key sets, all read from the catalog) and the engine run: the engine would then
        # run a relation other than the one whose sensitivity calibrated the noise.
        with cur._lock:
            cq = self.compile()
            table = cq.table
            if cur._data.get(table) is None:
                raise DataError(f"table {table!r} was registered without data (dry runs only)",
                                remedy="register it with its data to release answers")
            a = cur.alpha if alpha is None else float(alpha)
            if not 0 < a < 1:
                raise InvalidParameterError(f"alpha must be in (0, 1), got {alpha}",
                                            remedy="alpha=0.05 gives 95% intervals")
            bound = cq.bind(epsilon, delta, weights=weights)
            cost = bound.cost
            rid = request_id if request_id is not None else uuid.uuid4().hex
            cur._ensure_budget(analyst, table)
            validate = getattr(cur.engine, "validate", None)
            if validate is not None:  # a query the data's types cannot run: refused uncharged
                validate(cq.engine_plan)
            mechanism = "; ".join(f"{i.label}: {i.mechanism} ε={i.epsilon}" for i in bound.infos)
            charge = cur.ledger.charge(analyst, table, cost, request_id=rid,
                                       query=self.query_text, mechanism=mechanism)
            if charge.replayed:
                return Release.from_json(cur.ledger.replay(rid), replayed=True)
            salt = rng.random_bytes(16).hex()
            exact_result = cur.engine.execute(cq.engine_plan, salt=salt)
        noisy = bound.noise(exact_result, a)
        from . import __version__

        provenance = {
            "query": self.query_text, "plan": self.plan.sql(), "dataset": table,
            "analyst": analyst, "request_id": rid, "engine": cur.engine.name,
            "released_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "epsilon": bound.epsilon, "delta": bound.delta, "alpha": a,
            "neighbours": cq.neighbourhood.describe(),
            "group_keys": ("none" if not cq.plan.group_by else
                           "public key sets" if cq.public_keys else "partition selection"),
            "statcurator": __version__,
        }
        rel = Release.build(bound, noisy, provenance)
        cur.ledger.store_answer(rid, rel.to_json())
        return rel

    def __repr__(self) -> str:
        return f"<Query {self.query_text!r}>"


# -- helpers --------------------------------------------------------------------------------

def _meta(metadata: Any, name: str) -> TableMeta:
    from .io.metadata import load_metadata

    if isinstance(metadata, TableMeta):
        return metadata
    if isinstance(metadata, str | Path):
        return load_metadata(metadata)
    raise MetadataError(f"cannot use {type(metadata).__name__} as metadata for {name!r}",
                        remedy="pass a TOML path or a TableMeta")


def _infer_meta(schema: Any, name: str) -> TableMeta:
    from .query.catalog import arrow_kind

    cols = []
    for f in schema:
        kind = arrow_kind(f.type)
        cols.append(Column(f.name, type=kind if kind != "other" else "string"))
    return TableMeta(name, tuple(cols))


def _read_public(data: Any, read_table: Any) -> Any:
    from .io.dataset import Dataset

    if isinstance(data, Dataset):
        return data.table
    if isinstance(data, str | Path):
        return read_table(data)
    if isinstance(data, dict):
        import pyarrow as pa

        return pa.table(data)
    return read_table(data)


def _source_from_path(path: Path, meta: TableMeta | None, separator: str | None) -> Any:
    """A table source read in place (only the schema is read here): the declared types and
    the CSV separator come from the metadata (or the header), the rest is the engine's."""
    from .engines import TableSource
    from .io.tables import _arrow_type, sniff_separator

    p = path
    if not p.exists() and ":" in p.name:
        p = Path(str(p).rpartition(":")[0])
    sep = separator or (meta.separator if meta is not None and meta.separator else None)
    if sep is None and p.suffix.lower() in (".csv", ".tsv", ".txt", ".psv", ".dat", "") \
            and p.exists():
        sep = sniff_separator(p)
    types = {c.name: _arrow_type(c.type) for c in meta.columns} if meta is not None else {}
    return TableSource.from_path(path, column_types=types, separator=sep or ",",
                                 prefer_table=meta.name if meta is not None else None)
