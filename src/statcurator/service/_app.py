"""The HTTP API and the web console: a FastAPI app over a :class:`CuratorService`.

Every route authenticates the caller (``Authorization: Bearer <token>``), calls one method
of the service with that principal, and returns JSON; every error is a
``application/problem+json`` document with ``detail`` and ``remedy``. The routes are plain
functions (FastAPI runs them in its thread pool): the Curator's calls block.
"""


import json
import os
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
)
from starlette.exceptions import HTTPException as StarletteHTTPException

from .. import __version__
from ..accounting import analyst_id
from ..core.errors import StatcuratorError
from ..query.sql import quiet_parser_warnings
from ._core import CuratorService, NotFound, jsonable
from ._limits import BUCKETS_ENV, RateLimiter, SharedBuckets, TooManyRequests
from ._problems import PROBLEM_TYPE, TooLarge, Unauthorized, problem
from ._store import Principal

__all__ = ["create_app", "app_from_environment", "CONFIG_ENV"]

#: the configuration file a worker process reads (set by ``statcurator serve``)
CONFIG_ENV = "STATCURATOR_SERVICE_CONFIG"
STATIC = Path(__file__).parent / "static"
#: Swagger UI's two files that /docs loads, each served at /docs/<name>: a fixed list, so
#: nothing of a request's path reaches the file system
SWAGGER_UI = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css"}


def swagger_ui_file(name: str) -> Path | None:
    """Where the installed Swagger UI's file ``name`` (a key of ``SWAGGER_UI``) is, or None
    where it is missing (a broken install).

    The files come from the ``fastapi-offline`` package, a dependency of the service, so that
    /docs works without the internet:

    >>> swagger_ui_file("swagger-ui.css").name
    'swagger-ui.css'
    """
    try:
        path = resources.files("fastapi_offline") / "static" / name
    except ImportError:
        return None
    # an installed (not zipped) package is a folder: served as a file, with its validators
    return path if isinstance(path, Path) and path.is_file() else None


def _encodable(text: str) -> str:
    """Text a request may carry: encodable as UTF-8 (JSON's ``\\ud800`` escapes decode to lone
    surrogates, which no database, hash or response can hold: a 500 before this check)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("the text holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff "
                         "escape); send valid Unicode") from None
    return text


#: every text field of a request body: a string, valid as UTF-8
Text = Annotated[StrictStr, AfterValidator(_encodable)]
Number = StrictInt | StrictFloat | Text
_NUM = "a number, or exact text such as \"1/3\""


class QueryBody(BaseModel):
    """A DP query: the SQL and the privacy parameters of ``Query.release``."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"sql": "SELECT sex, COUNT(*) AS n FROM adult GROUP BY sex", "epsilon": 0.5}]})
    sql: Text = Field(description="One aggregate SELECT (docs/queries.md).")
    epsilon: Number | None = Field(None, description=f"ε to spend: {_NUM}.")
    delta: Number | None = Field(None, description="δ (partition selection; with rho, the "
                                                   "(ε, δ) conversion).")
    rho: Number | None = Field(None, description="ρ: Gaussian noise under zCDP.")
    alpha: StrictFloat | StrictInt | None = Field(None, description="Error rate of the "
                                                                    "intervals (0.05).")
    weights: dict[Text, Number] | None = Field(None, description="Share of ε per output.")
    nonnegative: StrictBool = Field(False, description="Clamp counts at 0 (post-processing).")


class LossBody(BaseModel):
    """A privacy budget: ``epsilon`` (with ``delta``), or ``rho``."""

    model_config = ConfigDict(extra="forbid")
    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None


class AnalystBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Text = Field(description="The analyst's name (normalized into its identity).")
    role: Text = Field("analyst", description="analyst or admin")


class DatasetBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Text
    data: Text = Field(description="A CSV/Parquet/DuckDB file on the server, or 'adult'.")
    metadata: Text | None = Field(None, description="A metadata TOML on the server.")
    budget: LossBody | None = Field(None, description="The dataset-wide budget.")
    grant: LossBody | None = Field(None, description="Each new analyst's grant.")


class AnonymizeBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    k: StrictInt | None = Field(5, description="k-anonymity.")
    l: StrictInt | None = Field(None, description="distinct l-diversity of `sensitive`.")  # noqa: E741
    t: Number | None = Field(None, description="t-closeness of `sensitive`.")
    sensitive: Text | None = None
    qi: list[Text] | None = None
    suppression: Number = 0
    algorithm: Text = "optimal"
    metric: Text = "loss"


class AttackBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset: Text
    attack: Text = Field(description="homogeneity, background, skewness or composition.")
    anonymization: AnonymizeBody = Field(default_factory=AnonymizeBody)
    b: StrictInt = 1
    gain: StrictFloat | StrictInt = 2.0
    epsilon: Number | None = Field(None, description="Also attack the ε-DP counterpart.")


class EstimateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dataset: Text
    estimator: Text = Field(description="median or iqr")
    column: Text
    epsilon: Number | None = None
    delta: Number | None = None
    rho: Number | None = None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(exclude_none=False)


# -- the app ----------------------------------------------------------------------------------

def create_app(service: CuratorService, *, buckets: SharedBuckets | None = None) -> FastAPI:
    """The FastAPI app serving ``service`` (API under ``/v1``, console at ``/``); its rate
    limits in ``buckets`` when the server's worker processes share them."""
    # sqlglot's warnings before a refusal of unreadable SQL (the problem response says it,
    # with a remedy) would fill the server's log with analysts' text
    quiet_parser_warnings()
    config = service.config
    app = FastAPI(
        title="statcurator", version=__version__,
        description="A privacy-preserving statistical database: differentially private "
                    "queries charged to a tamper-evident ledger, anonymization and attack "
                    "reports. Authenticate with `Authorization: Bearer <token>`; errors are "
                    "`application/problem+json` with `detail` and `remedy`.",
        docs_url=None, redoc_url=None, openapi_url="/openapi.json")
    app.state.service = service
    bearer = HTTPBearer(auto_error=False, description="An API token (sct_...).")
    limits = RateLimiter(config.server.requests_per_second, config.server.burst,
                         shared=buckets)
    app.state.limits = limits

    def principal(credentials: Annotated[HTTPAuthorizationCredentials | None,
                                         Depends(bearer)]) -> Principal:
        if credentials is None:
            raise Unauthorized("no API token was sent",
                               remedy="send the header `Authorization: Bearer <token>`; the "
                                      "curator creates tokens (`statcurator analysts add NAME`)")
        who = service.authenticate(credentials.credentials)
        if who is None:
            raise Unauthorized("the API token is not valid (unknown, mistyped, rotated or "
                               "revoked)",
                               remedy="use your current token, or ask the curator to rotate "
                                      "it (`statcurator analysts rotate NAME`)")
        limits.check(who.name)  # before the route runs: a refused request does nothing
        return who

    Who = Annotated[Principal, Depends(principal)]
    Key = Annotated[str | None, Header(alias="Idempotency-Key", description=(
        "Request id, scoped to you: a retry with the same key returns the stored answer, "
        "charged once."))]

    # -- errors ---------------------------------------------------------------------------
    @app.exception_handler(StatcuratorError)
    def _statcurator_error(request: Request, exc: StatcuratorError) -> Response:
        status, body = problem(exc, request.url.path)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        if isinstance(exc, TooManyRequests):
            headers = {"Retry-After": str(exc.retry_after)}
        return JSONResponse(body, status, headers=headers, media_type=PROBLEM_TYPE)

    @app.exception_handler(RequestValidationError)
    def _invalid(request: Request, exc: RequestValidationError) -> Response:
        parts, extra = [], False
        for err in exc.errors()[:5]:
            loc = ".".join(str(x) for x in err.get("loc", ()) if x != "body")
            parts.append(f"{loc or 'body'}: {err.get('msg', 'invalid')}")
            extra = extra or err.get("type") == "extra_forbidden"
        remedy = ("send only the fields of the schema (GET /openapi.json); the analyst is "
                  "always the token's, never a field" if extra else
                  "send JSON matching the schema at GET /openapi.json, e.g. "
                  '{"sql": "SELECT COUNT(*) FROM adult", "epsilon": 0.5}')
        body = {"type": "about:blank", "title": "Invalid request", "status": 422,
                "detail": "; ".join(parts) or "the request does not match the schema",
                "remedy": remedy, "error": "RequestValidationError",
                "instance": request.url.path}
        return JSONResponse(body, 422, media_type=PROBLEM_TYPE)

    @app.exception_handler(StarletteHTTPException)
    def _http(request: Request, exc: StarletteHTTPException) -> Response:
        remedy = {404: "see GET /openapi.json (or /docs) for the endpoints",
                  405: "see GET /openapi.json for the methods of this path"}
        body = {"type": "about:blank", "title": str(exc.detail), "status": exc.status_code,
                "detail": f"{exc.detail}: {request.method} {request.url.path}",
                "remedy": remedy.get(exc.status_code, "see docs/service.md"),
                "instance": request.url.path}
        return JSONResponse(body, exc.status_code, headers=getattr(exc, "headers", None),
                            media_type=PROBLEM_TYPE)

    @app.exception_handler(Exception)
    def _unexpected(request: Request, exc: Exception) -> Response:  # a defect: say so, briefly
        body = {"type": "about:blank", "title": "Internal error", "status": 500,
                "detail": f"the curator failed unexpectedly ({type(exc).__name__})",
                "remedy": "retry; if it persists, report it with the server's log",
                "instance": request.url.path}
        return JSONResponse(body, 500, media_type=PROBLEM_TYPE)

    app.add_middleware(BodyLimit, limit=config.server.max_body_bytes)
    responses: dict[int | str, dict[str, Any]] = {
        code: {"description": text, "content": {PROBLEM_TYPE: {}}}
        for code, text in ((400, "Invalid parameters"), (401, "No or bad token"),
                           (403, "Forbidden or over budget"), (404, "Not found"),
                           (409, "Conflict (reused request id, answer not available)"),
                           (413, "Body too large"), (422, "Unsupported query or bad JSON"),
                           (429, "Too many requests (see the Retry-After header)"))}

    # -- public ---------------------------------------------------------------------------
    @app.get("/healthz", tags=["service"], summary="Liveness")
    def healthz() -> dict[str, Any]:
        return {"ok": True, "version": __version__}

    # -- analysts -------------------------------------------------------------------------
    @app.get("/v1/me", tags=["analyst"], summary="Who the token is", responses=responses)
    def me(who: Who) -> dict[str, Any]:
        return {"analyst": who.name, "role": who.role, "repeat": config.repeat}

    @app.post("/v1/me/rotate", tags=["analyst"], summary="Rotate your own token",
              responses=responses)
    def rotate_me(who: Who) -> dict[str, Any]:
        return {"analyst": who.name, "token": service.rotate(who, who.name),
                "note": "the old token no longer works; your budgets are unchanged"}

    @app.get("/v1/datasets", tags=["datasets"], summary="Datasets and their public schema",
             responses=responses)
    def datasets(who: Who) -> dict[str, Any]:
        return {"datasets": service.datasets(who)}

    @app.get("/v1/datasets/{name}", tags=["datasets"], summary="One dataset's public schema",
             responses=responses)
    def dataset(name: str, who: Who) -> dict[str, Any]:
        return service.dataset(who, name)

    @app.post("/v1/queries/dry-run", tags=["queries"], responses=responses,
              summary="Cost, accuracy and remaining budget (no data read, nothing spent)")
    def dry_run(body: QueryBody, who: Who) -> dict[str, Any]:
        return service.dry_run(who, _dump(body))

    @app.post("/v1/queries", tags=["queries"], responses=responses,
              summary="Run a DP query: charged first, then answered")
    def run(body: QueryBody, who: Who, idempotency_key: Key = None) -> Response:
        out = service.run(who, _dump(body), idempotency_key)
        return _json(out)

    @app.post("/v1/estimates", tags=["queries"], responses=responses,
              summary="A DP estimator (median, IQR) on one column")
    def estimate(body: EstimateBody, who: Who, idempotency_key: Key = None) -> Response:
        return _json(service.estimate(who, _dump(body), idempotency_key))

    @app.get("/v1/budget", tags=["budget"], summary="Your grants and what is left",
             responses=responses)
    def budget(who: Who) -> dict[str, Any]:
        return service.budget(who)

    @app.get("/v1/budget/history", tags=["budget"], summary="Your grants and charges",
             responses=responses)
    def history(who: Who) -> dict[str, Any]:
        return service.history(who)

    @app.get("/v1/releases", tags=["releases"], summary="Your past answers",
             responses=responses)
    def releases(who: Who) -> dict[str, Any]:
        return service.releases(who)

    @app.get("/v1/releases/{request_id:path}", tags=["releases"], responses=responses,
             summary="One of your stored answers, again, at no cost")
    def stored(request_id: str, who: Who) -> Response:
        return Response(service.stored_release(who, request_id), media_type="application/json")

    # -- the curator (admin) --------------------------------------------------------------
    @app.get("/v1/admin/analysts", tags=["admin"], responses=responses,
             summary="Analysts, token hints and grants")
    def analysts(who: Who) -> dict[str, Any]:
        return service.analysts(who)

    @app.post("/v1/admin/analysts", tags=["admin"], status_code=201, responses=responses,
              summary="Create an analyst; its token is shown once")
    def add_analyst(body: AnalystBody, who: Who) -> dict[str, Any]:
        p, token = service.add_analyst(who, body.name, body.role)
        return {"analyst": p.name, "role": p.role, "token": token}

    @app.post("/v1/admin/analysts/{name:path}/rotate", tags=["admin"], responses=responses,
              summary="A new token for an analyst (budgets untouched)")
    def rotate(name: str, who: Who) -> dict[str, Any]:
        return {"analyst": analyst_id(name), "token": service.rotate(who, name)}

    @app.post("/v1/admin/analysts/{name:path}/revoke", tags=["admin"], responses=responses,
              summary="Revoke an analyst's token (its spent budget stays; rotate re-enables)")
    def revoke(name: str, who: Who) -> dict[str, Any]:
        return service.revoke(who, name)

    @app.put("/v1/admin/analysts/{name:path}/budgets/{dataset}", tags=["admin"],
             responses=responses, summary="Grant an analyst a budget on a dataset")
    def grant(name: str, dataset: str, body: LossBody, who: Who) -> dict[str, Any]:
        return service.grant(who, name, dataset, _dump(body))

    @app.post("/v1/admin/datasets", tags=["admin"], status_code=201, responses=responses,
              summary="Register a dataset (a file on the server)")
    def register(body: DatasetBody, who: Who) -> dict[str, Any]:
        doc = _dump(body)
        for k in ("budget", "grant"):
            if doc[k] is not None:
                doc[k] = {a: v for a, v in doc[k].items() if v is not None}
        return service.register(who, doc)

    @app.put("/v1/admin/datasets/{name}/budget", tags=["admin"], responses=responses,
             summary="Set a dataset's lifetime budget (all analysts together)")
    def dataset_budget(name: str, body: LossBody, who: Who) -> dict[str, Any]:
        return service.set_dataset_budget(who, name, _dump(body))

    @app.get("/v1/admin/budgets", tags=["admin"], summary="Every budget and grant",
             responses=responses)
    def budgets(who: Who) -> dict[str, Any]:
        return service.all_budgets(who)

    @app.get("/v1/admin/ledger", tags=["admin"], summary="Ledger rows", responses=responses)
    def ledger(who: Who, analyst: str | None = None, dataset: str | None = None,
               limit: Annotated[int, Field(ge=1, le=100_000)] = 1000) -> dict[str, Any]:
        return service.ledger_entries(who, analyst, dataset, limit)

    @app.get("/v1/admin/ledger/verify", tags=["admin"], responses=responses,
             summary="Verify the hash chain and every running total")
    def verify(who: Who) -> dict[str, Any]:
        return service.verify(who)

    @app.post("/v1/admin/datasets/{name}/anonymize", tags=["admin"], responses=responses,
              summary="Anonymize a dataset and return its report")
    def anonymize(name: str, who: Who,
                  body: Annotated[AnonymizeBody | None, Body()] = None) -> Response:
        return _json(service.anonymize(who, name, _dump(body or AnonymizeBody())))

    @app.get("/v1/admin/anonymized/{key}/report.html", tags=["admin"], responses=responses,
             summary="The HTML report of an anonymization", response_class=HTMLResponse)
    def anonymized_report(key: str, who: Who) -> Response:
        return HTMLResponse(service.anonymized_html(who, key), headers={
            "Content-Security-Policy": "default-src 'none'; img-src data:; "
                                       "style-src 'unsafe-inline'"})

    @app.post("/v1/admin/attacks", tags=["admin"], responses=responses,
              summary="Attack an anonymization; the measured risk")
    def attack(body: AttackBody, who: Who) -> Response:
        return _json(service.attack(who, _dump(body)))

    # -- the API's documentation ------------------------------------------------------------
    # Swagger UI from the installed fastapi-offline package, served from this origin (no CDN:
    # /docs works on an air-gapped network) under a policy that lets nothing else run or load:
    # the console keeps its token in this origin's sessionStorage. Swagger UI's stylesheet
    # draws its icons as data: images; its rendering (React) sets styles through the DOM,
    # which a style-src without 'unsafe-inline' allows.
    docs_csp = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src data:; "
                "connect-src 'self'; frame-ancestors 'none'")
    docs_headers = {"Content-Security-Policy": docs_csp, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer"}
    # the files change only when fastapi-offline is upgraded, and their URLs do not: browsers
    # keep them but ask again each time (no-cache), and a file that has not changed is
    # answered 304 from its ETag, so an upgrade reaches them at once and costs nothing else
    vendored_headers = {**docs_headers, "Cache-Control": "no-cache"}

    @app.get("/docs", include_in_schema=False)
    def docs() -> Response:
        return FileResponse(STATIC / "docs.html", headers=docs_headers)

    @app.get("/static/docs.js", include_in_schema=False)
    def docs_js() -> Response:
        return FileResponse(STATIC / "docs.js", media_type="text/javascript",
                            headers=docs_headers)

    def swagger_ui(name: str, request: Request) -> Response:
        path = swagger_ui_file(name)
        if path is None:  # /docs still answers: docs.js says what is wrong and links the schema
            raise NotFound(f"Swagger UI's {name} is missing from this server's Python "
                           "environment (the fastapi-offline package, a dependency of "
                           "statcurator's service)",
                           remedy="reinstall statcurator with its service dependencies "
                                  "(pip install -e '.[service]') and restart the server")
        st = path.stat()
        tag = f'"{st.st_mtime_ns:x}-{st.st_size:x}"'
        headers = {**vendored_headers, "ETag": tag}
        asked = request.headers.get("if-none-match", "")
        if asked.strip() == "*" or tag in (t.strip().removeprefix("W/")
                                           for t in asked.split(",")):
            return Response(status_code=304, headers=headers)
        return FileResponse(path, media_type=SWAGGER_UI[name], headers=headers)

    @app.get("/docs/swagger-ui-bundle.js", include_in_schema=False)
    def swagger_ui_js(request: Request) -> Response:
        return swagger_ui("swagger-ui-bundle.js", request)

    @app.get("/docs/swagger-ui.css", include_in_schema=False)
    def swagger_ui_css(request: Request) -> Response:
        return swagger_ui("swagger-ui.css", request)

    # -- the console ----------------------------------------------------------------------
    if config.server.console:
        csp = ("default-src 'self'; img-src 'self' data:; style-src 'self'; "
               "script-src 'self'; connect-src 'self'; frame-ancestors 'none'")
        headers = {"Content-Security-Policy": csp, "X-Content-Type-Options": "nosniff",
                   "Referrer-Policy": "no-referrer", "Cache-Control": "no-cache"}

        @app.get("/", include_in_schema=False)
        def console() -> Response:
            return FileResponse(STATIC / "index.html", headers=headers)

        @app.get("/static/{name}", include_in_schema=False)
        def static(name: str) -> Response:
            files = {"console.js": "text/javascript", "console.css": "text/css"}
            if name not in files:
                raise StarletteHTTPException(404, "Not Found")
            return FileResponse(STATIC / name, media_type=files[name], headers=headers)

    return app


def _json(obj: Any) -> Response:
    return Response(json.dumps(jsonable(obj), ensure_ascii=False, allow_nan=False),
                    media_type="application/json")


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413 (declared or streamed)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    size = int(value)
                except ValueError:
                    size = self.limit + 1
                if size > self.limit:
                    await self._refuse(scope, send)
                    return
        if not any(name == b"content-length" for name, _ in scope.get("headers", ())):
            # a streamed body: read it whole (it is small, or refused) before the app sees it
            body, more = b"", True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    await self.app(scope, _replay([message], receive), send)
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
                if len(body) > self.limit:
                    await self._refuse(scope, send)
                    return
            receive = _replay([{"type": "http.request", "body": body, "more_body": False}],
                              receive)
        await self.app(scope, receive, send)

    async def _refuse(self, scope: Any, send: Any) -> None:
        _, body = problem(TooLarge(f"the request body is larger than {self.limit} bytes",
                                   remedy="send a smaller body (server.max_body_bytes in the "
                                          "configuration)"), scope.get("path"))
        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", PROBLEM_TYPE.encode()),
                                (b"content-length", str(len(data)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": data})


def _replay(messages: list[Any], receive: Any) -> Any:
    """``messages`` first, then the connection's own ``receive`` (its disconnect)."""
    async def replayed() -> Any:
        return messages.pop(0) if messages else await receive()

    return replayed


def app_from_environment() -> FastAPI:
    """The app of one worker process of ``statcurator serve`` (uvicorn's factory): the
    configuration file named by ``$STATCURATOR_SERVICE_CONFIG`` (empty: the demo's)."""
    from ._config import ServiceConfig
    from ._faults import install_fault

    path = os.environ.get(CONFIG_ENV) or None
    config = ServiceConfig.load(path)
    buckets = _shared_buckets(config)
    service = CuratorService.from_config(config, initialize=False)
    install_fault(service)
    app = create_app(service, buckets=buckets)
    app.router.on_shutdown.append(service.close)
    if buckets is not None:
        app.router.on_shutdown.append(buckets.close)
    return app


def _shared_buckets(config: Any) -> SharedBuckets | None:
    """The rate-limit buckets ``statcurator serve`` made for all its workers (None: the
    limit is off, or this worker keeps its own)."""
    shared = os.environ.get(BUCKETS_ENV)
    if not shared or config.server.requests_per_second <= 0:
        return None
    try:
        return SharedBuckets(shared)
    except (OSError, ValueError) as e:
        raise StatcuratorError(
            f"the rate-limit bucket file {shared} (${BUCKETS_ENV}) cannot be used: {e}",
            remedy=f"start the server with `statcurator serve`, which makes that file; to run "
                   f"a worker by hand, unset {BUCKETS_ENV} (each worker then keeps its own "
                   "buckets)") from e
