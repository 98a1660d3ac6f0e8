"""The curator service: an HTTP API (FastAPI, served by uvicorn) and a web console over one
:class:`~statcurator.curator.Curator`, for analysts who authenticate with API tokens.

``statcurator serve`` starts it (docs/service.md). In Python, :class:`CuratorService` holds
every operation as a method — the HTTP layer only authenticates, calls one method and turns
errors into ``application/problem+json`` — and :func:`create_app` builds the FastAPI app:

>>> from statcurator.service import CuratorService
>>> svc = CuratorService.in_memory()              # the demo configuration, in memory
>>> admin, admin_token = svc.add_analyst(None, "admin", role="admin")
>>> bob, token = svc.add_analyst(admin, "Bob")    # gets the demo grant on adult: ε=1
>>> svc.dry_run(bob, {"sql": "SELECT COUNT(*) FROM adult", "epsilon": 0.25})["cost"]
{'epsilon': '1/4'}
>>> svc.close()

FastAPI is imported only by :func:`create_app` (and the app module), so importing this package
stays light.
"""

from __future__ import annotations

from typing import Any

from ._config import ConfigError, ServiceConfig
from ._core import CuratorService
from ._store import Principal, ServiceStore

__all__ = ["CuratorService", "ServiceConfig", "ConfigError", "ServiceStore", "Principal",
           "create_app"]


def create_app(service: CuratorService) -> Any:
    """The FastAPI app of ``service`` (the API under ``/v1``, the console at ``/``)."""
    from ._app import create_app as _create

    return _create(service)
