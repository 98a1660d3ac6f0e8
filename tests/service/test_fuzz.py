"""Schemathesis generates requests from the published OpenAPI schema — valid and invalid,
as the admin (every endpoint) — and the service answers none of them with a 5xx.

Bounded: a few examples per operation, in process (ASGI), on a SQLite ledger.
"""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="pip install -e '.[dev]'")
from hypothesis import HealthCheck, settings  # noqa: E402

from statcurator.service import CuratorService, ServiceConfig, create_app  # noqa: E402

from .conftest import write_config  # noqa: E402

pytestmark = pytest.mark.slow
_TOKEN: dict[str, str] = {}


@pytest.fixture(scope="module")
def api_schema(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fuzz")
    svc = CuratorService.from_config(ServiceConfig.load(
        write_config(folder / "curator.toml", "sqlite"), env={}))
    admin, _TOKEN["admin"] = svc.add_analyst(None, "admin", role="admin")
    svc.add_analyst(admin, "alice")
    yield schemathesis.openapi.from_asgi("/openapi.json", create_app(svc))
    svc.close()


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_no_server_errors(case) -> None:
    # the anonymizer on random criteria is the slow part of the lab, not of the API
    if case.path.endswith("/anonymize") or case.path == "/v1/admin/attacks":
        case.body = {"k": 5, "qi": ["sex"]} if case.path.endswith("/anonymize") else \
            {"dataset": "adult", "attack": "homogeneity", "anonymization": {"k": 5, "qi": ["sex"],
                                                                            "sensitive": "race"}}
    response = case.call(headers={"Authorization": f"Bearer {_TOKEN['admin']}"})
    assert response.status_code < 500, (case.method, case.path, case.body, response.text)
