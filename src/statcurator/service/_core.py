"""What the service does, as Python calls: :class:`CuratorService`, a thin layer over a
:class:`~statcurator.curator.Curator` and the service's store of analysts.

Every HTTP endpoint is one method here, and every method is a few calls of the Curator, its
ledger and the store. The *principal* (who is asking) always comes from authentication and is
the only analyst identity these methods pass to the ledger: no argument of a request can name
another analyst.

>>> from statcurator.accounting import Ledger
>>> svc = CuratorService.in_memory()
>>> admin, _ = svc.add_analyst(None, "admin", role="admin")
>>> alice, token = svc.add_analyst(admin, "alice")
>>> svc.grant(admin, "alice", "adult", {"epsilon": 1})["remaining"]
{'epsilon': '1'}
>>> out = svc.run(alice, {"sql": "SELECT COUNT(*) AS n FROM adult", "epsilon": 0.5}, "k-1")
>>> out["replayed"], out["budget"]["analyst"]["remaining"]
(False, {'epsilon': '1/2'})
>>> again = svc.run(alice, {"sql": "SELECT COUNT(*) AS n FROM adult", "epsilon": 0.5}, "k-1")
>>> again["replayed"], again["release"]["rows"] == out["release"]["rows"]
(True, True)
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import threading
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any
from urllib.parse import quote

from ..core.errors import (
    InvalidParameterError,
    LedgerError,
    StatcuratorError,
    UnsupportedQueryError,
)
from ._config import ServiceConfig
from ._store import Principal, ServiceStore

__all__ = ["CuratorService", "NotFound", "Forbidden", "Conflict", "jsonable"]


class NotFound(StatcuratorError):
    """The thing asked for does not exist (or is not the caller's)."""


class Forbidden(StatcuratorError):
    """The caller's role may not do this."""


class Conflict(StatcuratorError):
    """The request collides with an earlier one (a reused key, an answer still computing)."""


#: a charged request whose answer is missing after this long was lost (a crash), not slow
_LOST_AFTER = 120.0
_ANON_OPTIONS = ("k", "l", "t", "sensitive", "qi", "suppression", "algorithm", "metric")


class CuratorService:
    """The curator service's operations (see the module docs)."""

    def __init__(self, curator: Any, store: ServiceStore, config: ServiceConfig) -> None:
        self.curator = curator
        self.store = store
        self.config = config
        self._anonymized: dict[str, Any] = {}
        self._sync_lock = threading.Lock()
        self._synced = 0.0
        self._grants = {d.name: d.grant for d in config.datasets if d.grant is not None}

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: ServiceConfig, *, initialize: bool = True) -> CuratorService:
        """Open the ledger and the store the configuration names and register its datasets;
        with ``initialize``, also give datasets and analysts their initial budgets."""
        from ..curator import Curator

        ledger = open_ledger(config)
        store = open_store(config)
        cur = Curator(engine=config.engine, ledger=ledger, default_budget=None,
                      dataset_budget=None, alpha=config.alpha,
                      options=_options(config))
        svc = cls(cur, store, config)
        for d in config.datasets:
            cur.register(d.name, d.data, d.metadata)
        svc._sync_catalog(force=True)
        if initialize:
            svc.initialize()
        return svc

    @classmethod
    def in_memory(cls, config: ServiceConfig | None = None) -> CuratorService:
        """A service on an in-memory ledger and a throwaway store (examples, tests)."""
        import tempfile
        from pathlib import Path

        from ..accounting import Ledger
        from ..curator import Curator

        config = config or ServiceConfig.load(None, env={})
        cur = Curator(engine=config.engine, ledger=Ledger(), default_budget=None,
                      dataset_budget=None, alpha=config.alpha,
                      options=_options(config))
        store = ServiceStore.sqlite(Path(tempfile.mkdtemp()) / "store.db")
        svc = cls(cur, store, config)
        for d in config.datasets:
            cur.register(d.name, d.data, d.metadata)
        svc.initialize()
        return svc

    def initialize(self) -> list[str]:
        """Initial budgets: a dataset's configured budget when it has none yet, and the
        configured analysts' grants when they have none. Returns notices (a configured
        budget that differs from the ledger's is kept as the ledger has it)."""
        from ..accounting import NoBudgetError

        led = self.curator.ledger
        notes = []
        for d in self.config.datasets:
            if d.budget is None:
                continue
            try:
                have = led.dataset_status(d.name).total
            except NoBudgetError:
                led.set_dataset_budget(d.name, d.budget)
                continue
            if have != d.budget:
                notes.append(f"dataset {d.name}: the ledger's budget {have} is kept (the "
                             f"configuration says {d.budget}; change it with the API or "
                             f"`statcurator budget set --dataset {d.name}`)")
        for who, grants in self.config.analysts.items():
            for dataset, total in grants.items():
                self._initial_grant(who, dataset, total)
        return notes

    def close(self) -> None:
        """Close the Curator and the store; a SQLite ledger's anchor is saved for the CLI
        (docs/ledger.md), so that `statcurator ledger verify` checks what the service wrote."""
        from ..cli.ledger import save_anchor

        led = self.curator.ledger
        if led.persistent and led.path is not None:
            save_anchor(led)
        self.curator.close()
        self.store.close()

    # -- authentication -----------------------------------------------------------------
    def authenticate(self, token: str | None) -> Principal | None:
        return self.store.authenticate(token)

    def require_admin(self, who: Principal) -> None:
        """Refuse a caller who is not the admin (403), or whose admin token stopped working
        since its request was authenticated (401: revoked or rotated meanwhile; checked
        again here, just before the change, because a grant or a dataset lives in the
        ledger, another database than the token store, where no one statement can check
        both). The operator at the command line (no token) is the admin."""
        if not who.admin:
            raise Forbidden(f"analyst {who.name!r} is not the curator (admin)",
                            remedy="this endpoint needs the admin token")
        if who.token_digest is not None and not self.store.is_working_admin(who.token_digest):
            from ._problems import Unauthorized

            raise Unauthorized("your admin token was revoked or rotated meanwhile: nothing "
                               "was done", remedy="use your current token, or ask another "
                                                  "admin for a new one")

    # -- datasets -----------------------------------------------------------------------
    def datasets(self, who: Principal) -> list[dict[str, Any]]:
        """The registered datasets with their public schema and metadata."""
        self._sync_catalog()
        return [self.dataset(who, name) for name in self._private_tables()]

    def dataset(self, who: Principal, name: str) -> dict[str, Any]:
        """One dataset's *declared* (public) metadata: never a value read from the data."""
        self._sync_catalog()
        if name not in self._private_tables():
            raise NotFound(f"there is no dataset {name!r}",
                           remedy="registered datasets: " + ", ".join(self._private_tables()))
        info = self.curator.catalog.table_info(name)
        meta = info.meta
        cols = []
        for c in info.columns:
            col = info.column(c)
            cols.append({"name": c, "type": info.kind(c), "role": str(col.role),
                         "bounds": None if col.bounds is None else [str(b) for b in col.bounds],
                         "categories": list(col.categories) if col.categories else None,
                         "hierarchy": col.hierarchy is not None,
                         "description": col.description or None})
        unit = meta.privacy_unit
        out: dict[str, Any] = {
            "name": name, "description": meta.description or None,
            "attribution": meta.attribution or None, "rows": meta.rows,
            "neighbours": str(meta.neighbours),
            "privacy_unit": {"column": unit.column, "max_rows": unit.max_rows,
                             "max_groups": unit.max_groups},
            "columns": cols, "budget": self._budget_view(who, name)}
        return out

    def register(self, who: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Register a dataset (admin): ``name``, ``data`` (a file on the server or a bundled
        name), ``metadata`` (a TOML file on the server), ``budget`` (dataset-wide)."""
        self.require_admin(who)
        name, data, meta = body["name"], body["data"], body.get("metadata")
        if name in self.curator.tables:
            raise Conflict(f"dataset {name!r} is already registered",
                           remedy="choose another name")
        self.curator.register(name, data, meta)  # (reading the file may take a while)
        try:
            self.require_admin(who)  # again: the token may have been revoked meanwhile
            with _refusals_unauthorized():
                self.store.add_dataset(name, data, meta, by=who.token_digest)
        except BaseException:  # refused: the table loaded here is not served either
            self.curator.unregister(name)
            raise
        if body.get("budget") is not None:
            self.require_admin(who)
            self.curator.ledger.set_dataset_budget(name, _loss(body["budget"], "budget"))
        if body.get("grant") is not None:
            self._grants[name] = _loss(body["grant"], "grant")
        return self.dataset(who, name)

    # -- queries ------------------------------------------------------------------------
    def dry_run(self, who: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Cost, accuracy and the remaining budgets of a query: no data read, nothing spent."""
        from ..query.release import loss_to_dict

        q, p = self._query(body)
        bound = q.bind(p["epsilon"], p["delta"], weights=p["weights"], rho=p["rho"])
        cost = bound.charge_for(bound.cost)
        cq = q.compile()
        self.curator.engine.validate(cq.engine_plan)
        budget = self._budget_view(who, cq.table)
        mine = budget.get("analyst")
        fits = self.curator.ledger.can_spend(who.name, cq.table, cost) \
            if not cq.measures_nothing else True
        return jsonable({
            "dry_run": True, "query": q.query_text, "dataset": cq.table,
            "cost": loss_to_dict(cost), "cost_text": str(cost), "alpha": p["alpha"],
            "accuracy": bound.accuracy(p["alpha"]),
            "mechanisms": [i.as_dict() for i in bound.infos],
            "budget": budget, "fits": fits and mine is not None,
            "repeat": self.config.repeat})

    def run(self, who: Principal, body: Mapping[str, Any],
            idempotency_key: str | None = None) -> dict[str, Any]:
        """Charge the caller, run the query and return the noisy answer (the Curator's
        :meth:`~statcurator.curator.Query.release`: the debit is committed before noise is
        drawn). ``idempotency_key`` is the request id (scoped to the caller): a retry returns
        the stored answer, charged once. With ``repeat = "stored"`` an identical query (same
        plan and parameters) by the same analyst returns the stored answer at no cost."""
        from ..accounting import AnswerLostError

        q, p = self._query(body)
        if idempotency_key is not None:
            _check_key(idempotency_key)
        dataset = q.compile().table
        stored = self.config.repeat == "stored"
        rid = self._repeat_id(q, p) if stored else idempotency_key
        for attempt in range(8):
            try:
                # the same plan written differently is the same query: its answer, free
                payload = self.curator.ledger.answer(who.name, rid) if stored else None
                if payload is not None:
                    from ..query.release import Release

                    rel = Release.from_json(payload, replayed=True)
                    break
                rel = q.release(p["epsilon"], p["delta"], analyst=who.name, request_id=rid,
                                alpha=p["alpha"], weights=p["weights"], rho=p["rho"],
                                nonnegative=p["nonnegative"])
                break
            except AnswerLostError as e:
                if not stored or not self._lost(who, dataset, rid):
                    raise Conflict(e.problem, remedy=e.remedy) from None
                rid = f"{self._repeat_id(q, p)}~{attempt + 1}"  # lost in a crash: pay again
        else:  # pragma: no cover - eight crashes on one query
            raise Conflict("the stored answers of this query were lost repeatedly",
                           remedy="change the query (e.g. its ε) to pay for a fresh answer")
        # the answer is in the ledger before it is sent: a retry after a crash replays it
        _flushed(self.curator.ledger)
        rid = rel.provenance.get("request_id", rid)
        return {"request_id": rid, "replayed": rel.replayed, "dataset": dataset,
                "idempotency_key": idempotency_key,
                "release": _seen_by(who, rel.to_dict()),
                "budget": self._budget_view(who, dataset)}

    # -- budgets, history, releases -------------------------------------------------------
    def budget(self, who: Principal) -> dict[str, Any]:
        """The caller's grants, each with what its dataset has left for everyone."""
        self._sync_catalog()
        led = self.curator.ledger
        grants = [{"dataset": d, **_status(s), "dataset_remaining":
                   self._dataset_remaining(d)}
                  for (a, d), s in led.budgets().items() if a == who.name]
        return {"analyst": who.name, "role": who.role, "grants": grants}

    def history(self, who: Principal) -> dict[str, Any]:
        """The caller's grants and charges, oldest first."""
        rows = self.curator.ledger.entries(analyst=who.name, types=("grant", "charge"))
        names = {"grant": "grant set", "charge": "charge"}
        # no ledger position (seq): its gaps would count the other analysts' rows
        return {"analyst": who.name, "events": [
            {"at": e.at, "event": names[e.type], "dataset": e.dataset,
             "amount": str(e.amount), "request_id": e.request_id, "query": e.query}
            for e in rows]}

    def releases(self, who: Principal) -> dict[str, Any]:
        """The caller's charged requests, newest first (``answered``: retrievable)."""
        from ..query.release import loss_to_dict

        out = [{"request_id": c.request_id, "dataset": c.dataset, "query": c.query,
                "cost": loss_to_dict(c.cost), "cost_text": str(c.cost),
                "at": c.timestamp.isoformat(timespec="seconds"), "answered": c.answered}
               for c in self.curator.ledger.charges(analyst=who.name)]
        return {"analyst": who.name, "releases": out[::-1]}

    def stored_release(self, who: Principal, request_id: str) -> str:
        """The stored answer of one of the caller's requests, as JSON text (free)."""
        from ..accounting import AnswerLostError

        _check_key(request_id, new=False)
        try:
            payload = self.curator.ledger.replay(who.name, request_id)
        except AnswerLostError as e:
            raise Conflict(e.problem, remedy=e.remedy) from None
        except LedgerError:
            raise NotFound(f"you have no request {request_id!r}",
                           remedy="list yours with GET /v1/releases") from None
        if not who.admin:
            payload = json.dumps(_seen_by(who, json.loads(payload)))
        return ('{"request_id": ' + json.dumps(request_id) + ', "replayed": true, '
                '"release": ' + payload + "}")

    # -- the curator's (admin) operations -------------------------------------------------
    def add_analyst(self, who: Principal | None, name: str, role: str = "analyst"
                    ) -> tuple[Principal, str]:
        """Create an analyst (``who`` must be the admin; None: the operator at start) and
        give it each dataset's configured grant. Returns it and its token (shown once)."""
        if who is not None:
            self.require_admin(who)
        with _refusals_unauthorized():
            try:
                principal, token = self.store.add(
                    name, role, by=None if who is None else who.token_digest)
            except InvalidParameterError as e:
                if who is None or "already exists" not in e.problem:
                    raise
                from ..accounting import analyst_id

                raise Conflict(e.problem, remedy="give it a new token instead: POST /v1/admin/"
                                                 f"analysts/{quote(analyst_id(name), safe='')}"
                                                 "/rotate") from None
        for dataset, total in self._grants.items():
            self._initial_grant(principal.name, dataset, total)
        return principal, token

    def rotate(self, who: Principal, name: str) -> str:
        """A new token for ``name`` (the admin's, or the caller's own); budgets untouched.

        One's own rotation replaces the token the request came with, and only that one; the
        admin's rotation of someone else needs the admin's token to be still working. So a
        request authenticated just before its token was revoked (or rotated) can neither
        undo that nor take another identity over (401)."""
        from ..accounting import analyst_id

        target = analyst_id(name)
        with _refusals_unauthorized():
            if target == who.name:
                return self.store.rotate(target, replacing=who.token_digest)
            self.require_admin(who)
            if self.store.get(target) is None:
                raise NotFound(f"there is no analyst {target!r}",
                               remedy="create it with POST /v1/admin/analysts")
            return self.store.rotate(target, by=who.token_digest)

    def revoke(self, who: Principal, name: str) -> dict[str, Any]:
        """Revoke ``name``'s token (admin): refused for the last admin with a working token,
        which would leave the service with no one who can manage it."""
        from ..accounting import analyst_id

        self.require_admin(who)
        target = analyst_id(name)
        with _refusals_unauthorized():
            outcome = self.store.revoke(target, by=who.token_digest)
        if outcome == "missing":
            raise NotFound(f"there is no analyst {target!r}",
                           remedy="list them with GET /v1/admin/analysts")
        if outcome == "last admin":
            raise Conflict(f"{target!r} is the last admin with a working token: revoking it "
                           "would leave no one able to manage the service",
                           remedy='create another admin first (POST /v1/admin/analysts with '
                                  '"role": "admin"), or give this one a new token instead '
                                  f"(POST /v1/admin/analysts/{quote(target, safe='')}/rotate)")
        return {"analyst": target, "revoked": True}

    def analysts(self, who: Principal) -> dict[str, Any]:
        self.require_admin(who)
        grants: dict[str, list[dict[str, Any]]] = {}
        for (a, d), s in self.curator.ledger.budgets().items():
            grants.setdefault(a, []).append({"dataset": d, **_status(s)})
        return {"analysts": [{**row, "grants": grants.get(row["analyst"], [])}
                             for row in self.store.list()]}

    def set_dataset_budget(self, who: Principal, dataset: str, body: Mapping[str, Any]
                           ) -> dict[str, Any]:
        self.require_admin(who)
        self._known_dataset(dataset)  # (may load another worker's datasets: a while)
        loss = _loss(body, "budget")
        self.require_admin(who)  # again, just before the change
        status = self.curator.set_dataset_budget(dataset, loss)
        return {"dataset": dataset, **_status(status)}

    def grant(self, who: Principal, analyst: str, dataset: str, body: Mapping[str, Any]
              ) -> dict[str, Any]:
        """Set ``analyst``'s grant on ``dataset`` (admin)."""
        from ..accounting import analyst_id

        self.require_admin(who)
        self._known_dataset(dataset)
        target = analyst_id(analyst)
        if self.store.get(target) is None:
            raise NotFound(f"there is no analyst {target!r}",
                           remedy=f"create it first (POST /v1/admin/analysts, or "
                                  f"`statcurator analysts add {target}`)")
        loss = _loss(body, "grant")
        self.require_admin(who)  # again, just before the change (the lookups may take a while)
        status = self.curator.set_budget(target, dataset, loss)
        return {"analyst": target, "dataset": dataset, **_status(status)}

    def all_budgets(self, who: Principal) -> dict[str, Any]:
        self.require_admin(who)
        led = self.curator.ledger
        return {"datasets": [{"dataset": d, **_status(s)}
                             for d, s in led.dataset_budgets().items()],
                "grants": [{"analyst": a, "dataset": d, **_status(s)}
                           for (a, d), s in led.budgets().items()]}

    def ledger_entries(self, who: Principal, analyst: str | None = None,
                       dataset: str | None = None, limit: int = 1000) -> dict[str, Any]:
        self.require_admin(who)
        from ..accounting import ENTRY_TYPES

        led = self.curator.ledger
        rows = led.entries(analyst=analyst, dataset=dataset, types=ENTRY_TYPES)
        return {"ledger": _location(led), "count": len(rows),
                "entries": jsonable([e.as_dict() for e in rows[-limit:]])}

    def verify(self, who: Principal) -> dict[str, Any]:
        self.require_admin(who)
        led = self.curator.ledger
        v = led.verify()
        return {"ok": True, "ledger": _location(led), "rows": v.rows, "head": v.head,
                "keyed": v.keyed, "anchor": v.anchor, **led.counts()}

    def anonymize(self, who: Principal, dataset: str, body: Mapping[str, Any]
                  ) -> dict[str, Any]:
        """Anonymize a dataset (admin) and return its report; kept for attack reports."""
        self.require_admin(who)
        key = _spec_key(dataset, body)
        result = self._anonymization(dataset, body)
        self.require_admin(who)  # again before the release (the search may take a while)
        report = jsonable(result.to_dict())
        report["id"] = key
        return report

    def anonymized_html(self, who: Principal, key: str) -> str:
        self.require_admin(who)
        from ..report.anonymization import render_html

        if key not in self._anonymized:
            raise NotFound(f"no anonymization {key!r} in this process",
                           remedy="run it again: POST /v1/admin/datasets/{name}/anonymize")
        return render_html(self._anonymized[key])

    def attack(self, who: Principal, body: Mapping[str, Any]) -> dict[str, Any]:
        """Run an attack of the lab against an anonymization of a dataset (admin)."""
        from .. import attacks

        self.require_admin(who)
        dataset = body.get("dataset")
        self._known_dataset(dataset)
        spec = body.get("anonymization") or {}
        result = self._anonymization(dataset, spec)
        kind = body.get("attack")
        eps = _num(body.get("epsilon"), "epsilon") if body.get("epsilon") is not None else None
        if kind == "homogeneity":
            attack: Any = attacks.Homogeneity()
        elif kind == "background":
            attack = attacks.BackgroundKnowledge(b=int(body.get("b", 1)))
        elif kind == "skewness":
            attack = attacks.Skewness(gain=float(body.get("gain", 2.0)))
        elif kind == "composition":
            other = self._anonymization(dataset, {**spec, "algorithm": "mondrian"
                                                  if spec.get("algorithm") != "mondrian"
                                                  else "optimal"})
            attack = attacks.Composition(other)
            eps = None
        else:
            raise InvalidParameterError(f"unknown attack {kind!r}",
                                        remedy='use "homogeneity", "background", "skewness" '
                                               'or "composition"')
        options = {"epsilon": eps} if eps is not None else {}
        self.require_admin(who)  # again before the attack runs (and may charge) and reports
        risk = self.curator.attack(result, attack, **options)
        return jsonable(risk.to_dict(detail=False))

    def estimate(self, who: Principal, body: Mapping[str, Any],
                 idempotency_key: str | None = None) -> dict[str, Any]:
        """A DP estimator (median, quantile, trimmed mean, IQR) on one column, charged to
        the caller (:meth:`~statcurator.curator.Curator.estimate`)."""
        from .. import estimators

        dataset, column = body.get("dataset"), body.get("column")
        self._known_dataset(dataset)
        if not isinstance(column, str):
            raise InvalidParameterError("column is missing", remedy='pass "column": "age"')
        kind = body.get("estimator")
        makers = {"median": lambda: estimators.Median(column),
                  "trimmed_mean": lambda: estimators.TrimmedMean(column),
                  "iqr": lambda: estimators.IQR(column)}
        if kind not in makers:
            raise InvalidParameterError(f"unknown estimator {kind!r}",
                                        remedy="use one of: " + ", ".join(makers))
        if idempotency_key is not None:
            _check_key(idempotency_key)
        p = _params(body, self.config.alpha)
        est = self.curator.estimate(dataset, makers[kind](), epsilon=p["epsilon"],
                                    delta=p["delta"], rho=p["rho"], analyst=who.name,
                                    request_id=idempotency_key)
        _flushed(self.curator.ledger)  # in the ledger before it is sent (see run)
        value = getattr(est, "value", None)
        return jsonable({"dataset": dataset, "estimator": kind, "column": column,
                         "value": value, "interval": getattr(est, "interval", None),
                         "cost": str(getattr(est, "cost", "")),
                         "budget": self._budget_view(who, dataset)})

    # -- helpers ------------------------------------------------------------------------
    def _private_tables(self) -> list[str]:
        cat = self.curator.catalog
        return [n for n in self.curator.tables if not cat.table_info(n).public]

    def _known_dataset(self, name: Any) -> None:
        self._sync_catalog()
        if not isinstance(name, str) or name not in self._private_tables():
            raise NotFound(f"there is no dataset {name!r}",
                           remedy="registered datasets: " + ", ".join(self._private_tables()))

    def _sync_catalog(self, force: bool = False) -> None:
        """Register datasets another process registered through the API (checked at most
        once a second)."""
        now = time.monotonic()
        if not force and now - self._synced < 1.0:
            return
        with self._sync_lock:
            self._synced = now
            for name, data, meta in self.store.datasets():
                if name not in self.curator.tables:
                    try:
                        self.curator.register(name, data, meta)
                    except StatcuratorError:  # its file went away: serve the others
                        continue

    def _query(self, body: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
        sql = body.get("sql")
        if not isinstance(sql, str) or not sql.strip():
            raise UnsupportedQueryError("the query is empty",
                                        remedy='send "sql": "SELECT COUNT(*) FROM adult"')
        limit = self.config.server.max_sql_chars
        if len(sql) > limit:
            raise InvalidParameterError(f"the query has {len(sql)} characters, more than "
                                        f"{limit}", remedy="send a shorter query")
        self._sync_catalog()
        p = _params(body, self.config.alpha)
        return self.curator.sql(sql), p

    def _repeat_id(self, q: Any, p: Mapping[str, Any]) -> str:
        """The request id of a query for ``repeat = "stored"``: the same for the same plan
        and parameters (scoped to the analyst by the ledger)."""
        key = json.dumps([q.plan.sql(), {k: str(v) for k, v in p.items()}], sort_keys=True)
        return "repeat:" + hashlib.sha256(key.encode()).hexdigest()[:40]

    def _lost(self, who: Principal, dataset: str, rid: str) -> bool:
        for c in self.curator.ledger.charges(analyst=who.name, dataset=dataset):
            if c.request_id == rid:
                age = (datetime.now(UTC) - c.timestamp).total_seconds()
                return age > _LOST_AFTER
        return False

    def _anonymization(self, dataset: str, spec: Mapping[str, Any]) -> Any:
        from ..anonymize import KAnonymity, LDiversity, TCloseness

        self._known_dataset(dataset)
        unknown = set(spec) - set(_ANON_OPTIONS)
        if unknown:
            raise InvalidParameterError(f"unknown anonymization option(s) {sorted(unknown)}",
                                        remedy="options: " + ", ".join(_ANON_OPTIONS))
        key = _spec_key(dataset, spec)
        if key in self._anonymized:
            return self._anonymized[key]
        sensitive = spec.get("sensitive")
        crit: list[Any] = []
        if spec.get("k") is not None:
            crit.append(KAnonymity(_int(spec["k"], "k")))
        if spec.get("l") is not None or spec.get("t") is not None:
            if not isinstance(sensitive, str):
                raise InvalidParameterError("l-diversity and t-closeness protect a sensitive "
                                            "column", remedy='name it: "sensitive": "occupation"')
            if spec.get("l") is not None:
                crit.append(LDiversity(sensitive, _int(spec["l"], "l")))
            if spec.get("t") is not None:
                crit.append(TCloseness(sensitive, _num(spec["t"], "t")))
        if not crit:
            raise InvalidParameterError("no privacy criterion given", remedy='pass "k": 5')
        qi = spec.get("qi")
        if qi is not None and (not isinstance(qi, list) or not all(isinstance(x, str)
                                                                   for x in qi)):
            raise InvalidParameterError("qi must be a list of column names",
                                        remedy='e.g. "qi": ["age", "sex"]')
        result = self.curator.anonymize(
            dataset, *crit, qi=qi, sensitive=[sensitive] if sensitive else None,
            suppression=_num(spec.get("suppression", 0), "suppression", zero=True),
            algorithm=str(spec.get("algorithm", "optimal")),
            metric=str(spec.get("metric", "loss")))
        if len(self._anonymized) >= 16:
            self._anonymized.pop(next(iter(self._anonymized)))
        self._anonymized[key] = result
        return result

    def _budget_view(self, who: Principal, dataset: str) -> dict[str, Any]:
        """What the caller may know of the budgets on ``dataset``: its own grant and what
        the dataset has left for everyone (an aggregate: no other analyst's name)."""
        from ..accounting import NoBudgetError

        led = self.curator.ledger
        try:
            mine: dict[str, Any] | None = _status(led.status(who.name, dataset))
        except NoBudgetError:
            mine = None
        view = {"analyst": mine, "dataset_remaining": self._dataset_remaining(dataset)}
        if who.admin:
            try:
                view["dataset"] = _status(led.dataset_status(dataset))
            except NoBudgetError:
                view["dataset"] = None
        return view

    def _dataset_remaining(self, dataset: str) -> dict[str, str] | None:
        from ..accounting import NoBudgetError
        from ..query.release import loss_to_dict

        try:
            return loss_to_dict(self.curator.ledger.dataset_status(dataset).remaining)
        except NoBudgetError:
            return None

    def _initial_grant(self, who: str, dataset: str, total: Any) -> None:
        from ..accounting import NoBudgetError

        led = self.curator.ledger
        try:
            led.status(who, dataset)
        except NoBudgetError:
            led.set_budget(who, dataset, total)


# -- module helpers ---------------------------------------------------------------------------

def open_ledger(config: ServiceConfig) -> Any:
    """The ledger the configuration names (PostgreSQL, or the SQLite file with the CLI's
    anchor check)."""
    from ..accounting import Ledger

    if config.ledger.dsn is not None:
        from ..accounting import PostgresBackend

        return Ledger(backend=PostgresBackend(config.ledger.dsn, schema=config.ledger.schema,
                                              timeout=config.ledger.timeout))
    path = config.sqlite_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    from ..cli.ledger import open_ledger as open_cli_ledger

    return open_cli_ledger(str(path))


def store_exists(config: ServiceConfig) -> bool:
    """Whether the token store the configuration names exists (read only)."""
    if config.ledger.dsn is not None:
        from ..accounting._postgres import table_exists

        return table_exists(config.ledger.dsn, config.ledger.schema, "statcurator_tokens")
    path = config.tokens_path()
    return str(path) != ":memory:" and path.exists()


def open_store(config: ServiceConfig, *, read_only: bool = False) -> ServiceStore:
    if config.ledger.dsn is not None:
        return ServiceStore.postgres(config.ledger.dsn, config.ledger.schema,
                                     read_only=read_only)
    return ServiceStore.sqlite(config.tokens_path(), read_only=read_only)


def _location(led: Any) -> str:
    from ._config import _redact

    return _redact(str(led.location))


def _status(s: Any) -> dict[str, Any]:
    from ..query.release import loss_to_dict

    return {"kind": s.kind, "total": loss_to_dict(s.total), "spent": loss_to_dict(s.spent),
            "remaining": loss_to_dict(s.remaining), "charges": s.charges,
            "exhausted": s.exhausted, "text": str(s)}


def _num(value: Any, name: str, *, zero: bool = False) -> Fraction:
    """A number of a request (JSON number, or text such as "1/3"), exactly."""
    from ..core.numbers import exact

    return exact(value, name, strings=True, allow_zero=zero)


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10**6:
        raise InvalidParameterError(f"{name} must be a whole number in [1, 1000000], got "
                                    f"{value!r}", remedy=f'e.g. "{name}": 5')
    return value


def _options(config: ServiceConfig) -> Any:
    """The compiler's options for the service: at most ``server.max_groups`` groups."""
    from ..query.compiler import CompileOptions

    return CompileOptions(max_public_keys=config.server.max_groups)


def _seen_by(who: Principal, release: dict[str, Any]) -> dict[str, Any]:
    """A release as ``who`` may see it: an analyst does not see where the ledger is nor the
    charge's position in it (between two of one's own charges, the positions count every
    other analyst's rows — activity that is confidential here); the admin sees both.

    >>> cert = {"ledger": {"location": "/srv/l.db", "seq": 41, "request_id": "r"}}
    >>> _seen_by(Principal("ann", "analyst"), {"provenance": {"certificate": cert}})
    {'provenance': {'certificate': {'ledger': {'request_id': 'r'}}}}
    """
    if who.admin:
        return release
    _hide_ledger_position(release)
    return release


def _hide_ledger_position(doc: Any) -> None:
    """Drop ``location`` and ``seq`` from every certificate's ``ledger`` entry in ``doc``
    (a query's release keeps it under ``provenance``, an estimate's under ``details``):
    dictionaries only, since no certificate sits in a list of rows."""
    if not isinstance(doc, dict):
        return
    for key, value in doc.items():
        if key == "certificate" and isinstance(value, dict) \
                and isinstance(value.get("ledger"), dict):
            for hidden in ("location", "seq"):
                value["ledger"].pop(hidden, None)
        _hide_ledger_position(value)


def _params(body: Mapping[str, Any], default_alpha: float) -> dict[str, Any]:
    """The privacy parameters of a request, exact; the ranges are the Curator's to check."""
    opt = {name: None if body.get(name) is None else _num(body[name], name, zero=name == "delta")
           for name in ("epsilon", "delta", "rho")}
    alpha = body.get("alpha")
    if alpha is None:
        alpha = default_alpha
    elif isinstance(alpha, bool) or not isinstance(alpha, int | float) \
            or not 0 < alpha < 1 or not math.isfinite(alpha):
        raise InvalidParameterError(f"alpha must be a number in (0, 1), got {alpha!r}",
                                    remedy="alpha=0.05 gives 95% intervals")
    else:  # the intervals' own rule (a subnormal alpha is not a usable error rate)
        from ..core.numbers import exact_probability

        exact_probability(alpha, "alpha", allow_zero=False)
    weights = body.get("weights")
    if weights is not None:
        if not isinstance(weights, Mapping):
            raise InvalidParameterError("weights must map output names to shares",
                                        remedy='e.g. "weights": {"n": 1, "mean_age": 3}')
        weights = {str(k): _num(v, f"weights.{k}") for k, v in weights.items()}
    nonneg = body.get("nonnegative", False)
    if not isinstance(nonneg, bool):
        raise InvalidParameterError("nonnegative must be true or false",
                                    remedy='"nonnegative": true clamps counts at 0')
    if opt["epsilon"] is None and opt["rho"] is None:
        raise InvalidParameterError("no privacy parameter given",
                                    remedy="pass epsilon=1 (or rho=0.5 for Gaussian noise)")
    return {**opt, "alpha": float(alpha), "weights": weights, "nonnegative": nonneg}


def _loss(body: Any, what: str) -> Any:
    from ..core.measures import loss_from_parameters

    if not isinstance(body, Mapping) or set(body) - {"epsilon", "delta", "rho"}:
        raise InvalidParameterError(f"a {what} is {{epsilon[, delta]}} or {{rho}}",
                                    remedy='e.g. {"epsilon": 1, "delta": 1e-6}')
    return loss_from_parameters(**{k: body.get(k) for k in ("epsilon", "delta", "rho")},
                                strings=True)


@contextlib.contextmanager
def _refusals_unauthorized() -> Iterator[None]:
    """The token store's refusal of a change whose asking token was revoked or rotated
    meanwhile, as 401 (the same as a request arriving with that token now)."""
    from ._problems import Unauthorized
    from ._store import StoreRefusal

    try:
        yield
    except StoreRefusal as e:
        raise Unauthorized(e.problem, remedy="use your current token, or ask the curator for "
                                             "a new one") from None


def _check_key(key: str, *, new: bool = True) -> None:
    """A request id: 1 to 200 printable characters; one being created (``new``) also not
    only dots, which a URL path cannot carry (an older one can still be read)."""
    if not key or len(key) > 200 or not key.isprintable() or (new and not key.strip(".")):
        raise InvalidParameterError("the request id (Idempotency-Key) must be 1 to 200 "
                                    "printable characters, not only dots (a URL path "
                                    "cannot carry those: GET /v1/releases/{id})",
                                    remedy="use a random id such as a UUID")


def _spec_key(dataset: str, spec: Mapping[str, Any]) -> str:
    text = json.dumps([dataset, spec], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def jsonable(value: Any) -> Any:
    """JSON-ready: Fractions as exact text, non-finite floats as None."""
    if isinstance(value, Fraction):
        return str(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return jsonable(value.item())
    if value is None or isinstance(value, str | int | bool):
        return value
    return str(value)


__all__ += ["open_ledger", "open_store"]


def _flushed(ledger: Any) -> None:
    """Wait until the answer just stored is in ``ledger`` (a ledger without ``flush``, a
    third party's, stores it before ``store_answer`` returns)."""
    flush = getattr(ledger, "flush", None)
    if flush is not None:
        flush()
