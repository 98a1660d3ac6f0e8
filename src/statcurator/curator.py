"""The :class:`Curator`: the one object users hold.

It keeps the catalog (registered private tables with their metadata, and public tables), an
engine (DuckDB by default) and a privacy ledger, and answers DP queries along DESIGN.md's
path::

    SQL ──sqlglot──▶ plan ──rewrite──▶ clamped, bounded plan ──compile──▶ (engine plan,
    measurements) ──ledger.charge(cost)──▶ engine (exact aggregates) ──▶ noise ──▶ Release

The cost charged is computed from the *same* compiled object whose mechanisms add the noise;
the ledger decides the charge before the engine runs (the engine reads the data while a
durable ledger writes the debit, and nothing is noised before the debit is committed); a
refused or over-budget query touches no data and costs nothing; a replayed request id
returns the stored answer and never fresh noise.

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
>>> cur.dataset_budget("adult").remaining                   # all analysts together: ε=10
ApproxDP(epsilon=Fraction(9, 1), delta=Fraction(1, 100000))

Budget policy. Every dataset has a **dataset-wide budget**, the bound on the privacy loss of
its data across all analysts (who may collude); every charge debits it and the analyst's own
grant together. With the in-memory ledger (the demo), a dataset registered without
``budget=`` gets :data:`DEFAULT_DATASET_BUDGET` (ε = 10, δ = 10⁻⁵), and an analyst without a
grant gets ``default_budget`` (:data:`DEFAULT_BUDGET`, ε = 1, δ = 10⁻⁶) the first time one is
needed — so any number of fresh analyst names spend at most the dataset-wide budget. With a
persistent ledger nothing is implicit: the data owner sets each dataset's budget
(``register(..., budget=...)``, :meth:`Curator.set_dataset_budget` or ``statcurator budget
set``) and grants each analyst a budget (:meth:`Curator.set_budget`); an analyst without a
grant spends nothing. Analyst names are identities normalized by
:func:`statcurator.accounting.analyst_id` ("Alice" and "alice " are one analyst).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import threading
import uuid
import warnings
import weakref
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .core.errors import (
    DataError,
    InvalidParameterError,
    MetadataError,
    UnsupportedQueryError,
)
from .core.measures import ApproxDP, PrivacyLoss, loss_from_parameters
from .core.numbers import exact, exact_probability, round_up_decimal
from .core.schema import Column, TableMeta

if TYPE_CHECKING:
    from .engines.base import Engine
    from .query.binding import BoundQuery
    from .query.release import Release

__all__ = ["Curator", "Query", "DEFAULT_BUDGET", "DEFAULT_DATASET_BUDGET"]

#: The grant an analyst gets on a dataset the first time one is needed, with an in-memory
#: ledger only (see the module docs).
DEFAULT_BUDGET: PrivacyLoss = ApproxDP(1, Fraction(1, 10**6))
#: The dataset-wide budget of a dataset registered without ``budget=``, with an in-memory
#: ledger only: what all analysts together may spend on it.
DEFAULT_DATASET_BUDGET: PrivacyLoss = ApproxDP(10, Fraction(1, 10**5))
_DEMO: Any = object()  # "the demo default with an in-memory ledger, none with a persistent one"


class Curator:
    """A privacy-preserving curator: catalog + engine + ledger + entry points.

    ``engine`` is ``"duckdb"`` (default), ``"spark"``, ``"memory"`` or an engine object;
    ``ledger`` is None (in memory), a path to a SQLite ledger file, or a ``Ledger`` (for
    PostgreSQL, ``Ledger(backend=PostgresBackend(dsn))``); ``default_budget`` is the grant an
    analyst gets on first use and ``dataset_budget`` the dataset-wide budget of a dataset
    registered without ``budget=`` — by default :data:`DEFAULT_BUDGET` and
    :data:`DEFAULT_DATASET_BUDGET` with an in-memory ledger, and None (set explicitly) with
    a persistent one, which refuses implicit grants;
    ``alpha`` is the default error rate of the released confidence intervals.
    """

    def __init__(self, engine: Any = "duckdb", ledger: Any = None, *,
                 default_budget: PrivacyLoss | None = _DEMO,
                 dataset_budget: PrivacyLoss | None = _DEMO, alpha: float = 0.05,
                 options: Any = None, **engine_options: Any) -> None:
        from .accounting import Ledger
        from .engines import get_engine
        from .query.catalog import DictCatalog
        from .query.compiler import CompileOptions

        self.engine: Engine = (get_engine(engine, **engine_options) if isinstance(engine, str)
                               else engine)
        if ledger is None or isinstance(ledger, str | Path):
            self.ledger = Ledger(None if ledger is None else str(ledger))
        else:
            self.ledger = ledger
        persistent = self.ledger.persistent
        if default_budget is _DEMO:
            default_budget = None if persistent else DEFAULT_BUDGET
        if dataset_budget is _DEMO:
            dataset_budget = None if persistent else DEFAULT_DATASET_BUDGET
        for name, value in (("default_budget", default_budget),
                            ("dataset_budget", dataset_budget)):
            if value is not None and not isinstance(value, PrivacyLoss):
                raise InvalidParameterError(f"{name} must be a privacy loss or None",
                                            remedy=f"e.g. {name}=sc.ApproxDP(1, 1e-6)")
        if default_budget is not None and persistent:
            raise InvalidParameterError(
                "a persistent ledger gives no implicit budgets: default_budget must be None",
                remedy="grant each analyst a budget with curator.set_budget(analyst, dataset, "
                       "epsilon=...) (or `statcurator budget set --analyst A --dataset D "
                       "--epsilon E`)")
        self.default_budget = default_budget
        self.dataset_budget_default = dataset_budget
        self.alpha = float(alpha)
        self.options = options or CompileOptions()
        self.catalog = DictCatalog()
        self._data: dict[str, Any] = {}  # name -> TableSource (None: metadata only)
        self._version = 0
        #: ((catalog version, compile options), text) -> its Query
        self._cache: dict[tuple[Any, str], Any] = {}
        #: ((catalog version, compile options), shape key) -> _SEEN (once), _FIXED (no free
        #: constant), or what was learnt of the shape with the query it was learnt on
        self._shapes: dict[tuple[Any, Any], Any] = {}
        #: (analyst, dataset) -> the ledger known to hold that grant (see _ensure_budget)
        self._granted: dict[tuple[str, str], weakref.ref[Any]] = {}
        self._lock = threading.Lock()

    # -- catalog ------------------------------------------------------------------------
    def register(self, name: str, data: Any = None, metadata: Any = None, *,
                 separator: str | None = None, budget: Any = None) -> Any:
        """Register a private table under ``name``.

        ``data``: a :class:`~statcurator.io.dataset.Dataset` (data and metadata), a path (CSV,
        Parquet, DuckDB file — read in place; ``FILE.duckdb:TABLE`` picks a table), the name
        of a bundled dataset (``"adult"``), a pandas/Polars DataFrame or Arrow table, or None
        to register the metadata alone (dry runs only). ``metadata``: a TOML path or a
        :class:`~statcurator.core.schema.TableMeta` (for a file ``x.csv`` a sibling
        ``x.toml`` is used when none is given). Undeclared columns have no bounds or
        categories: they can be filtered on and counted, not summed or grouped publicly.
        ``budget``: the dataset-wide (lifetime) privacy budget of the data across all
        analysts, a loss or a number (pure ε) — see :meth:`set_dataset_budget`; without it an
        in-memory curator applies its ``dataset_budget`` default, and a persistent ledger keeps
        whatever budget it holds for ``name``.

        >>> import pyarrow as pa
        >>> from statcurator.core.schema import Column, TableMeta
        >>> cur = Curator()
        >>> meta = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),))
        >>> cur.register("t", pa.table({"x": [0.5, 0.25]}), meta, budget=3).kind("x")
        'real'
        >>> cur.tables, cur.dataset_budget("t").total
        (('t',), PureDP(epsilon=Fraction(3, 1)))
        """
        from .query.catalog import TableInfo

        total = None if budget is None else _loss(budget, None, None, None)
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
            # queries compiled for the table before are stale from here (one step for the whole
            # registration: no query compiles while this lock is held)
            self._version += 1
            if source is not None:
                self.engine.register(name, source)
                try:
                    info = _check_kinds(self.engine, name, info)
                except DataError:
                    self._data.pop(name, None)  # refused: the name is registered no more
                    raise
                _declare_types(self.engine, name, meta)
            self.catalog.tables[name] = info
            self._data[name] = source
        self._init_dataset_budget(name, total)
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
            self.catalog.tables.pop(name, None)
            self._data.pop(name, None)
            self._version += 1  # queries compiled for the table before are stale from here
            self.engine.register(name, TableSource.from_arrow(table))
            info = _check_kinds(self.engine, name, info)
            _declare_types(self.engine, name, meta)
            self.catalog.tables[name] = info
            self._data[name] = None  # public: joined by DP queries, never anonymized
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

    def attack(self, release: Any, attack: Any, **options: Any) -> Any:
        """Run an attack of the lab (:mod:`statcurator.attacks`) against ``release`` and return
        its :class:`~statcurator.attacks.Risk`.

        ``release`` is what the attack reads: an anonymization result (or a list of them for
        composition), a DP histogram release, or, for the query-interface attacks, the oracle
        answering queries (e.g. a function releasing ``cur.sql(...)`` answers). ``options``
        are the attack's ``run`` options (``targets``, ``truth``, ``epsilon``, ``detail``...).

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> kw = dict(qi=["age", "sex"], sensitive=["occupation"])
        >>> a = cur.anonymize("adult", sc.KAnonymity(10), **kw)
        >>> b = cur.anonymize("adult", sc.KAnonymity(10), algorithm="mondrian", **kw)
        >>> risk = cur.attack(a, sc.attacks.Composition(b))
        >>> risk.attack, risk.targets
        ('composition', 30162)
        """
        return attack.run(release, **options)

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
        """A DP query from SQL (parsed now; nothing runs until :meth:`Query.release`).

        A text asked before is the same (immutable) Query. A new text that differs from an
        earlier one only in constants of its WHERE clause starts from that query's
        compiled form, mechanisms and certificate, with its own constants put in place
        (:mod:`~statcurator.query.shapes`: which constants those are is learnt the second
        time a shape is seen, by parsing the text again with each constant changed).

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> q = [cur.sql(f"SELECT COUNT(*) AS n FROM adult WHERE age > {a}") for a in (30, 31, 32)]
        >>> q[2].compile().measures == q[1].compile().measures  # the shape's compiled form
        True
        >>> q[2].plan == sc.query.sql.parse_sql(q[2].text, cur.catalog)  # its own constant
        True
        """
        version = (self._version, self.options)  # the compiler's inputs besides the text
        key = (version, text)
        query = self._cache.get(key)
        if query is not None:  # a Query is immutable and caches its compiled form: share it
            return query
        from .query.shapes import learn, shape_of

        shape = shape_of(text)
        skey = None if shape is None else (version, shape.key)
        entry = None if skey is None else self._shapes.get(skey)
        if shape is not None and isinstance(entry, tuple):
            learnt, template = entry
            plan = learnt.plan_for(shape)
            if plan is not None:
                query = Query(self, plan, text, template=(template, learnt.paths))
        if query is None:
            from .query.sql import parse_sql

            query = Query(self, parse_sql(text, self.catalog), text)
            if shape is not None and skey is not None and (entry is None or entry is _SEEN):
                if len(self._shapes) > 256:
                    self._shapes.clear()
                if entry is None:
                    self._shapes[skey] = _SEEN
                else:  # seen before: learn which of its constants are free
                    learnt = learn(shape, text, query.plan,
                                   lambda t: parse_sql(t, self.catalog))
                    self._shapes[skey] = (learnt, query) if learnt.free else _FIXED
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
    def set_dataset_budget(self, dataset: str, total: PrivacyLoss | None = None, *,
                           epsilon: Any = None, delta: Any = None, rho: Any = None) -> Any:
        """Set the dataset-wide (lifetime) budget of ``dataset``: the bound on the privacy
        loss of its data summed over **every** analyst. Each charge debits it and the
        analyst's grant in one transaction. It may be raised, or lowered to no less than
        what is spent (spent budget is never refunded).

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> cur.set_dataset_budget("adult", epsilon=4).total
        PureDP(epsilon=Fraction(4, 1))
        """
        self.catalog.table_info(dataset)
        return self.ledger.set_dataset_budget(dataset, _loss(total, epsilon, delta, rho))

    def dataset_budget(self, dataset: str) -> Any:
        """The dataset-wide budget status of ``dataset`` (total, spent by all analysts,
        remaining); :class:`~statcurator.accounting.NoBudgetError` when none is set."""
        return self.ledger.dataset_status(dataset)

    def set_budget(self, analyst: str, dataset: str, total: PrivacyLoss | None = None, *,
                   epsilon: Any = None, delta: Any = None, rho: Any = None) -> Any:
        """Grant ``analyst`` a total budget on ``dataset`` (a loss, or epsilon/delta/rho).

        The grant is spent only within the dataset-wide budget: a charge must fit in both.
        ``analyst`` is normalized (:func:`~statcurator.accounting.analyst_id`).

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> cur.set_budget("Alice", "adult", epsilon=3).total
        PureDP(epsilon=Fraction(3, 1))
        >>> cur.budget("alice", "adult").remaining
        PureDP(epsilon=Fraction(3, 1))
        """
        self.catalog.table_info(dataset)
        return self.ledger.set_budget(analyst, dataset, _loss(total, epsilon, delta, rho))

    def budget(self, analyst: str, dataset: str) -> Any:
        """The grant status (total, spent, remaining) of ``analyst`` on ``dataset``."""
        self._ensure_budget(analyst, dataset)
        return self.ledger.status(analyst, dataset)

    def _ensure_budget(self, analyst: str, dataset: str) -> None:
        """The in-memory demo's policy: a grant of ``default_budget`` on first use (capped
        in use by the dataset-wide budget). A persistent ledger grants nothing implicitly."""
        from .accounting import NoBudgetError

        if self.default_budget is None:
            return
        known = self._granted.get((analyst, dataset))
        if known is not None and known() is self.ledger:
            return  # grants are append-only rows in this ledger: once there, always there
        try:
            self.ledger.status(analyst, dataset)
        except NoBudgetError:
            self.ledger.set_budget(analyst, dataset, self.default_budget)
        self._granted[(analyst, dataset)] = weakref.ref(self.ledger)

    def _init_dataset_budget(self, dataset: str, total: PrivacyLoss | None) -> None:
        from .accounting import NoBudgetError

        if total is not None:
            self.ledger.set_dataset_budget(dataset, total)
            return
        if self.dataset_budget_default is None:
            return
        try:
            self.ledger.dataset_status(dataset)
        except NoBudgetError:
            self.ledger.set_dataset_budget(dataset, self.dataset_budget_default)

    # -- DP estimators ------------------------------------------------------------------
    def estimate(self, dataset: str, estimator: Any, *, epsilon: Any = None, delta: Any = None,
                 rho: Any = None, analyst: str = "default",
                 request_id: str | None = None) -> Any:
        """Run a DP estimator (``sc.estimators``) on ``dataset``, charging ``analyst``.

        The estimator's measurement is built from the *declared* metadata (bounds,
        categories, privacy unit, neighbours); its cost is charged before any data is read
        (refused: nothing read, nothing spent); only the columns it needs are read; the
        answer is stored so that a replayed ``request_id`` returns it for free. Without
        epsilon/delta/rho the estimator's own ε is used. See
        :mod:`statcurator.estimators._protocol` for what an estimator provides.

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> med = cur.estimate("adult", sc.estimators.Median("age"), epsilon=0.5, analyst="bob")
        >>> 35 <= med.value <= 39, med.cost
        (True, PureDP(epsilon=Fraction(1, 2)))
        """
        from .estimators._protocol import loss_from, prepare, result_from_json, result_to_json

        loss = loss_from(epsilon, delta, rho)
        with self._lock:
            meta = self.metadata(dataset)
            source = self._data.get(dataset)
            if source is None:
                raise DataError(f"table {dataset!r} was registered without data",
                                remedy="register it with its data to run estimators")
            job = prepare(estimator, meta, loss)
            cost = job.measurement.cost
            if loss is not None and not cost.fits(loss):  # the map must honour the request
                raise InvalidParameterError(
                    f"{job.mechanism} would cost {cost}, more than the {loss} asked for",
                    remedy="ask for a larger budget, or report this estimator as a bug")
            rid = request_id if request_id is not None else uuid.uuid4().hex
            self._ensure_budget(analyst, dataset)
            charge = self.ledger.charge(analyst, dataset, cost, request_id=rid,
                                        query=job.query, mechanism=job.mechanism)
            if charge.replayed:
                return result_from_json(estimator, self.ledger.replay(analyst, rid))
            with _abandoned_on_error(self.ledger, analyst, rid):  # charged: see release()
                table = source.to_arrow().select(list(job.columns))
        with _abandoned_on_error(self.ledger, analyst, rid):
            cert = _estimator_certificate(estimator, job, meta, dataset, charge)
            cert["ledger"]["location"] = self.ledger.location
            result = _with_certificate(job.measurement(table), cert)
            payload = result_to_json(estimator, result)
        self.ledger.store_answer(analyst, rid, payload)
        return result

    def synthesize(self, dataset: str, synthesizer: Any, *, rows: int | None = None,
                   **options: Any) -> Any:
        """A DP synthetic table (pyarrow) of ``dataset`` from ``synthesizer`` (``sc.synth.MST``
        or ``AIM``), charged like :meth:`estimate` (same options: epsilon/delta/rho, analyst,
        request_id; a replay refits the model from the stored noisy measurements, no new
        noise). ``rows`` defaults to the model's noisy estimate of the table size.

        >>> import statcurator as sc
        >>> cur = Curator()
        >>> _ = cur.register("adult", sc.datasets.adult())
        >>> synth = sc.synth.MST(columns=["sex", "race"], iters=50)
        >>> cur.synthesize("adult", synth, epsilon=1, delta=1e-6, rows=10).num_rows
        10
        """
        return self.estimate(dataset, synthesizer, **options).sample(rows)

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


#: markers of Curator._shapes: a shape seen once, and a shape with no free constant
_SEEN = object()
_FIXED = object()


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

    def __init__(self, curator: Curator, plan: Any, text: str | None = None, *,
                 template: tuple[Query, tuple[Any, ...]] | None = None) -> None:
        self.curator = curator
        self.plan = plan
        self.text = text
        self._compiled: Any = None
        self._version = -1
        #: bound queries (mechanisms, cost, certificate) per budget asked, for this compilation
        self._bound: dict[Any, BoundQuery] = {}
        #: the query of the same shape this one's plan was made from (Curator.sql), the paths
        #: of the constants that differ, and the compiled form this one's was derived from
        self._template, self._paths = template if template is not None else (None, ())
        self._derived_from: Any = None

    @functools.cached_property
    def _plan_sql(self) -> str:
        """The plan rendered as SQL (once: the plan is immutable)."""
        return self.plan.sql()  # type: ignore[no-any-return]

    @property
    def query_text(self) -> str:
        """The SQL text (the plan rendered as SQL for builder queries)."""
        return self.text if self.text is not None else self.plan.sql()

    def compile(self) -> Any:
        """The compiled query (cached): engine plan and measurements, independent of ε."""
        if self._compiled is None or self._version != self.curator._version:
            version = self.curator._version
            compiled = self._derived()
            if compiled is None:
                from .query.compiler import compile_query

                compiled = compile_query(self.plan, self.curator.catalog,
                                         options=self.curator.options, text=self.query_text)
            self._compiled, self._version, self._bound = compiled, version, {}
        return self._compiled

    def _derived(self) -> Any:
        """The compiled form of this query made from its template's (Curator.sql): the
        template's, with this query's plan (its WHERE constants) and text; None when there
        is no template or it does not compile (this query then compiles, or fails, alone)."""
        t = self._template
        self._derived_from = None
        if t is None:
            return None
        from .core.errors import StatcuratorError

        try:
            tc = t.compile()
        except StatcuratorError:
            return None
        from .engines import sqlgen
        from .query.shapes import check

        check(t.plan, self.plan, self._paths)  # only WHERE constants differ, or refused
        ep = dataclasses.replace(tc.engine_plan, relation=self.plan.relation)
        # the SQL engines' statements: the template's, with this query's constants
        sqlgen.link(ep, tc.engine_plan, tuple(p[1:] for p in self._paths))
        self._derived_from = tc
        return dataclasses.replace(tc, plan=self.plan, engine_plan=ep, text=self.query_text)

    def bind(self, epsilon: Any = None, delta: Any = None, *,
             weights: Mapping[str, Any] | None = None, rho: Any = None) -> BoundQuery:
        """The compiled query with its mechanisms for this ε (and δ), or for ρ (zCDP:
        Gaussian noise). A query asked again at the same budget reuses its bound form (the
        mechanisms are stateless: every release draws fresh noise from the OS CSPRNG)."""
        compiled = self.compile()
        key = _bound_key(epsilon, delta, rho, weights)
        bound = self._bound.get(key) if key is not None else None
        if bound is None and key is not None and self._derived_from is not None:
            # the template's bound query at this budget, certified: the same mechanisms
            t = self._template
            assert t is not None
            known = t._bound.get(key)
            if known is not None and known.compiled is self._derived_from \
                    and known.certificate is not None:
                # (the plan's SQL, rendered once for its certificate and its provenance)
                bound = known.derived(compiled, plan_sql=self._plan_sql)
                self._keep(bound, key)
        if bound is None:
            from .query.binding import BoundQuery

            bound = BoundQuery(compiled, epsilon, delta, weights, rho=rho)
        return bound

    def _keep(self, bound: BoundQuery, key: Any) -> None:
        """Remember a bound query that passed its cost checks, for the next release, under
        the key of its budget (:func:`_bound_key`)."""
        if key is None or bound.compiled is not self._compiled:
            return
        if len(self._bound) >= 16 and key not in self._bound:
            self._bound.pop(next(iter(self._bound)))
        self._bound.setdefault(key, bound)  # (one bound query per budget: the first kept)

    # -- dry runs -----------------------------------------------------------------------
    def cost(self, epsilon: Any = None, delta: Any = None, *,
             weights: Mapping[str, Any] | None = None, rho: Any = None) -> PrivacyLoss:
        """The privacy loss a release at ``epsilon`` (and ``delta``), or ``rho``, would be
        charged: the query Measurement's privacy map at one privacy unit (with ``rho`` and
        ``delta``, its (ε, δ) conversion at that δ)."""
        bound = self.bind(epsilon, delta, weights=weights, rho=rho)
        return bound.charge_for(bound.cost)

    def accuracy(self, epsilon: Any = None, alpha: float | None = None, delta: Any = None, *,
                 rows: int | None = None, weights: Mapping[str, Any] | None = None,
                 rho: Any = None) -> list[dict[str, Any]]:
        """Per aggregate, the (1 - alpha) half-width of its interval (see
        :meth:`~statcurator.query.binding.BoundQuery.accuracy`)."""
        a = self.curator.alpha if alpha is None else alpha
        return self.bind(epsilon, delta, weights=weights, rho=rho).accuracy(a, rows)

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
        main, hists = self.curator.engine.sql(cq.engine_plan, "0" * 32)
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

    def limit(self, n: int | None, offset: int = 0) -> Query:
        """Keep ``n`` released rows after ``offset`` (``LIMIT n OFFSET m``; post-processing,
        free: every group is still measured and charged)."""
        from .query.builder import with_limit

        return Query(self.curator, with_limit(self.plan, n, offset))

    # -- the release --------------------------------------------------------------------
    def release(self, epsilon: Any = None, delta: Any = None, *, analyst: str = "default",
                request_id: str | None = None, alpha: float | None = None,
                weights: Mapping[str, Any] | None = None, rho: Any = None,
                nonnegative: bool = False) -> Release:
        """Charge ``analyst``'s budget, run the query, and return the noisy :class:`Release`.

        ``nonnegative=True`` clamps released counts (and their intervals) at 0 — free
        post-processing, stated in the release.

        ``epsilon`` (with ``delta`` for partition selection) gives Laplace noise; ``rho``
        gives Gaussian noise under zCDP, charged as ρ to a zCDP budget — or, with ``delta``
        too, as its (ε, δ) conversion at that δ, for a budget stated in (ε, δ).

        Order of events: compile and bind (no data) → the cost to charge is the query
        Measurement's privacy map, checked against what was asked → refuse now if anything
        is wrong → the ledger decides the charge (refused: nothing touched, nothing spent; a
        replayed ``request_id`` returns its stored answer) → the engine computes exact
        aggregates while the ledger writes the debit (durable ledgers; in-memory ones write
        first), and nothing goes further until the debit is committed → the Measurement's
        function (the same mechanisms whose cost was charged) adds the noise → the answer
        is stored for replays (on a file or PostgreSQL by the ledger's writer thread while
        this returns: see :meth:`Ledger.store_answer`) and returned. A query that releases only
        public keys (``GROUP BY`` without aggregates over declared categories) reads no data
        and costs nothing.
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
            a = _checked_alpha(cur.alpha if alpha is None else float(alpha), alpha)
            bound = self.bind(epsilon, delta, weights=weights, rho=rho)
            cost = bound.check_cost()
            # Kerckhoffs: the release's certificate, and the cost derived again from it by a
            # second, independent analysis; a compiler that under-charges is refused here
            cached = bound.certificate  # certified on the bound query's first release
            if cached is None:
                from .query.certificate import certify

                cached = certify(bound, cur.catalog.table_info(table).meta, cur.catalog)
                bound.certificate = cached
                self._keep(bound, _bound_key(epsilon, delta, rho, weights))
            cert = dict(cached)
            rid = request_id if request_id is not None else uuid.uuid4().hex
            if cq.measures_nothing:  # the declared key set: public, nothing to charge
                from .query.relational import ExactResult

                return self._build(bound, bound.noise(ExactResult(cq.engine_plan.key_names), a),
                                   analyst, rid, a, nonnegative, cert)
            cur._ensure_budget(analyst, table)
            # a query the data's types cannot run: refused uncharged
            cur.engine.validate(cq.engine_plan)
            ran: list[Any] = []

            def run() -> None:  # the engine reads the data while the debit is written
                try:
                    salt = rng.random_bytes(16).hex()
                    ran.append(cur.engine.execute(cq.engine_plan, salt=salt))
                except Exception as e:  # noqa: BLE001 - raised below, once charged
                    ran.append(e)

            try:
                charge = cur.ledger.charge(analyst, table, cost, request_id=rid,
                                           query=self.query_text,
                                           mechanism=bound.mechanism_summary(),
                                           alongside=run, new_id=request_id is None)
            except BaseException:
                ran.clear()  # not charged: drop the exact answer (nothing keeps it alive)
                raise
            if charge.replayed:
                ran.clear()
                return Release.from_json(cur.ledger.replay(analyst, rid), replayed=True)
            # from here on the request is charged: whatever fails, its answer is lost
            with _abandoned_on_error(cur.ledger, analyst, rid):
                cert["ledger"] = {"location": cur.ledger.location, "seq": charge.seq,
                                  "request_id": rid, "analyst": charge.analyst,
                                  "charged": str(charge.cost),
                                  "at": charge.timestamp.isoformat(timespec="seconds")}
                if not ran:  # a ledger that does not take alongside= work (a third party's)
                    run()
                exact_result = ran.pop()
                if isinstance(exact_result, Exception):
                    raise exact_result
        # the query Measurement's function is the noise: the same object whose map was charged
        with _abandoned_on_error(cur.ledger, analyst, rid):
            rel = self._build(bound, bound.measurement.function(exact_result, a), analyst,
                              rid, a, nonnegative, cert)
            payload = rel.to_json()
        cur.ledger.store_answer(analyst, rid, payload)
        return rel

    def _build(self, bound: BoundQuery, noisy: Any, analyst: str, rid: str,
               alpha: float, nonnegative: bool = False,
               certificate: dict[str, Any] | None = None) -> Release:
        from . import __version__
        from .accounting import analyst_id
        from .query.release import Release

        cq = bound.compiled
        noisy.nonnegative = bool(nonnegative)
        provenance = {
            "query": self.query_text, "plan": self._plan_sql, "dataset": cq.table,
            "analyst": analyst_id(analyst), "request_id": rid,
            "engine": self.curator.engine.name,
            "released_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "epsilon": bound.epsilon, "delta": bound.delta, "rho": bound.rho, "alpha": alpha,
            "neighbours": cq.neighbourhood.describe(),
            "group_keys": ("none" if not cq.plan.group_by else
                           "public key sets" if cq.public_keys else "partition selection"),
            "statcurator": __version__,
        }
        if nonnegative:
            provenance["post_processing"] = "counts clamped at 0 (free post-processing)"
        if certificate is not None:
            provenance["certificate"] = certificate
        return Release.build(bound, noisy, provenance)

    def __repr__(self) -> str:
        return f"<Query {self.query_text!r}>"


# -- helpers --------------------------------------------------------------------------------

def _checked_alpha(a: float, asked: Any) -> float:
    """``a`` (``asked`` as a float), once it is a level the intervals accept, checked before
    the charge: in (0, 1), and by the intervals' own rule (``as_alpha``: a subnormal alpha
    used to be refused by the noise step, after the budget was spent).

    >>> _checked_alpha(0.05, None)
    0.05
    >>> _checked_alpha(1.0, 1)
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: alpha must be in (0, 1), got 1; alpha=0.05 gives 95% intervals
    """
    if a in _ALPHAS:  # a level accepted before (the same float: the same checks pass)
        return a
    if not 0 < a < 1:
        raise InvalidParameterError(f"alpha must be in (0, 1), got {asked}",
                                    remedy="alpha=0.05 gives 95% intervals")
    exact_probability(a, "alpha", allow_zero=False)
    if len(_ALPHAS) < 64:
        _ALPHAS.add(a)
    return a


#: the alpha levels that passed _checked_alpha (floats; a NaN never gets here)
_ALPHAS: set[float] = set()


@contextlib.contextmanager
def _abandoned_on_error(ledger: Any, analyst: str, rid: str) -> Iterator[None]:
    """Around the work after a charge: if it fails, the ledger is told that this charge's
    answer will never be stored (the budget stays spent; a replay then says the answer was
    lost, instead of waiting for it)."""
    try:
        yield
    except BaseException:
        abandon = getattr(ledger, "abandon", None)  # a ledger of another package may lack it
        if abandon is not None:
            abandon(analyst, rid)
        raise


def _check_kinds(engine: Any, name: str, info: Any) -> Any:
    """``info`` with the kinds the engine reads: a query well-typed for the compiler must
    never make the engine convert values as it runs (a conversion failing on some rows only
    is an error that says whether a row exists, at no cost). A column the engine reads as
    none of the query kinds (a UUID the schema calls text) becomes ``other``, which no query
    may use; a column the engine reads as another query kind (text for an integer) refuses
    the table (unregistered). Numeric kinds agree with each other."""
    read = getattr(engine, "column_kinds", None)
    if read is None:  # an engine that does not say: the compiler's kinds stand
        return info
    found = read(name)
    numeric = ("integer", "real")
    unusable, wrong = [], []
    for c, k in info.kinds.items():
        seen = found.get(c, "missing")
        if k == "other" or k == seen or (k in numeric and seen in numeric):
            continue
        if seen == "other":
            unusable.append(c)
        else:
            wrong.append(f"{c!r} ({k} from the data's schema, {seen} in the engine)")
    if wrong:
        engine.unregister(name)
        raise DataError(f"the engine reads column(s) {', '.join(wrong)} of {name!r} with "
                        "another type than the data's schema says",
                        remedy="convert those columns in the data to a plain integer, real, "
                               "text or boolean type and register it again")
    if unusable:
        info = dataclasses.replace(info, kinds={c: "other" if c in unusable else k
                                                for c, k in info.kinds.items()})
    return info


def _declare_types(engine: Any, name: str, meta: TableMeta) -> None:
    """Tell the engine a table's metadata (engines that check types ahead, like DuckDB,
    then skip the preparation before each charge) and warn the data owner of mismatches."""
    declare = getattr(engine, "declare_types", None)
    if declare is None:  # an engine of another package: it validates every plan
        return
    wrong = declare(name, meta)
    if wrong:
        warnings.warn(f"the data of {name!r} does not match its metadata: " + "; ".join(wrong)
                      + ". Each query on it is bound before its charge (slower); fix the "
                      "metadata's types, or the data's", stacklevel=3)


def _estimator_certificate(estimator: Any, job: Any, meta: TableMeta, dataset: str,
                           charge: Any) -> dict[str, Any]:
    """The certificate of an estimator's release (Kerckhoffs): the estimator with all its
    parameters, its mechanism, the declared metadata it was built from (bounds, categories,
    privacy unit, neighbours), the cost and the ledger entry. Unlike a SQL release's, its
    cost is not re-derived by a second analysis (each estimator states its own privacy map)."""
    from . import __version__
    from .query.certificate import FORMAT, loss_dict, unit_dict

    columns = {}
    for c in job.columns:
        col = meta[c]
        columns[c] = {"type": str(col.type),
                      "bounds": None if col.bounds is None else [str(b) for b in col.bounds],
                      "categories": None if col.categories is None else len(col.categories)}
    return {"format": FORMAT, "kind": "estimator", "statcurator": __version__,
            "dataset": dataset, "estimator": repr(estimator), "mechanism": job.mechanism,
            "query": job.query, "columns": columns,
            "privacy_unit": unit_dict(meta.privacy_unit),
            "neighbours": str(meta.neighbours), "cost": loss_dict(job.measurement.cost),
            "ledger": {"location": None, "seq": charge.seq, "request_id": charge.request_id,
                       "analyst": charge.analyst, "charged": str(charge.cost),
                       "at": charge.timestamp.isoformat(timespec="seconds")}}


def _with_certificate(result: Any, cert: dict[str, Any]) -> Any:
    """Attach ``cert`` to an estimator's result: in an Estimate's details, else as the
    ``certificate_`` attribute of a fitted model (scikit-learn's naming for fitted facts)."""
    from .estimators._protocol import Estimate

    if isinstance(result, Estimate):
        return dataclasses.replace(result, details={**result.details, "certificate": cert})
    # a result that takes no attribute (a plain value): the ledger entry stands alone
    with contextlib.suppress(AttributeError, TypeError, dataclasses.FrozenInstanceError):
        result.certificate_ = cert
    return result


def _bound_key(epsilon: Any, delta: Any, rho: Any, weights: Mapping[str, Any] | None) -> Any:
    """A cache key for a budget as asked (types kept: 1 and 1.0 may be refused differently),
    or None when a parameter is unhashable."""
    key = tuple((type(v).__name__, v) for v in (epsilon, delta, rho)) + (
        None if not weights else tuple(sorted(weights.items())),)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _loss(total: Any, epsilon: Any, delta: Any, rho: Any) -> PrivacyLoss:
    """A budget from a loss value, a bare number (pure ε) or epsilon/delta/rho keywords."""
    if total is None:
        return loss_from_parameters(epsilon=epsilon, delta=delta, rho=rho)
    if epsilon is not None or delta is not None or rho is not None:
        raise InvalidParameterError("give either a loss or epsilon/delta/rho, not both",
                                    remedy="e.g. epsilon=1, delta=1e-6")
    return total if isinstance(total, PrivacyLoss) else loss_from_parameters(epsilon=total)


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
