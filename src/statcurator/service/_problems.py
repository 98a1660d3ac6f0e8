"""Errors as RFC 9457 problem details: ``application/problem+json`` with ``detail`` (the
problem) and ``remedy`` (what to do), and the status that fits the error's type.

>>> from statcurator.core.errors import InvalidParameterError
>>> status, body = problem(InvalidParameterError("epsilon must be > 0, got 0",
...                                              remedy="pass a positive finite value such as epsilon=1"))
>>> status, body["detail"], body["remedy"]
(400, 'epsilon must be > 0, got 0', 'pass a positive finite value such as "epsilon": 1')

A remedy's aside for the command line (``qi=[...] (CLI: --qi a,b)``) is dropped: API callers
get the field's JSON form.

>>> problem(InvalidParameterError("no quasi-identifiers", remedy="pass qi=[...] (CLI: --qi a,b)"))[1]["remedy"]
'pass "qi": [...]'
"""

from __future__ import annotations

from typing import Any

from ..core.errors import (
    BudgetExceededError,
    EngineError,
    LedgerError,
    PrivacyAccountingError,
    StatcuratorError,
    UnsupportedQueryError,
)

__all__ = ["problem", "PROBLEM_TYPE", "Unauthorized", "TooLarge"]

PROBLEM_TYPE = "application/problem+json"
#: request fields whose Python keyword form (epsilon=1) a remedy rewrites as JSON
_FIELDS = ("epsilon", "delta", "rho", "alpha", "weights", "nonnegative", "sql", "k", "l", "t",
           "sensitive", "qi", "suppression", "algorithm")


class Unauthorized(StatcuratorError):
    """No token, or a token that is not (or no longer) valid."""


class TooLarge(StatcuratorError):
    """The request body is larger than the configured limit."""


def _status(e: StatcuratorError) -> tuple[int, str]:
    from ..accounting import AnswerLostError, LedgerTamperedError, NoBudgetError
    from ._core import Conflict, Forbidden, NotFound
    from ._limits import TooManyRequests
    from ._store import StoreError

    table: list[tuple[type, int, str]] = [
        (StoreError, 503, "Token store unavailable"),
        (Unauthorized, 401, "Unauthorized"),
        (TooLarge, 413, "Request body too large"),
        (TooManyRequests, 429, "Too many requests"),
        (Forbidden, 403, "Forbidden"),
        (NotFound, 404, "Not found"),
        (Conflict, 409, "Conflict"),
        (NoBudgetError, 403, "No privacy budget"),
        (BudgetExceededError, 403, "Privacy budget exceeded"),
        (AnswerLostError, 409, "Answer not available"),
        (LedgerTamperedError, 503, "Ledger failed verification"),
        (LedgerError, 409, "Ledger refused the request"),
        (UnsupportedQueryError, 422, "Unsupported query"),
        (EngineError, 422, "The engine cannot run this query"),
        (PrivacyAccountingError, 500, "Privacy accounting defect"),
    ]
    for kind, status, title in table:
        if isinstance(e, kind):
            return status, title
    return 400, "Invalid request"


def problem(e: StatcuratorError, instance: str | None = None) -> tuple[int, dict[str, Any]]:
    """(status, problem document) of a statcurator error."""
    from ..accounting import NoBudgetError
    from ..cli._common import api_remedy
    from ._store import StoreError

    status, title = _status(e)
    if isinstance(e, StoreError):  # the operator's problem: its location is not the caller's
        e = StoreError("the service's token store is unavailable or locked",
                       remedy="retry in a moment; if it persists, tell the curator")
    remedy = api_remedy(e.remedy, _FIELDS) if e.remedy else None
    if isinstance(e, NoBudgetError):  # the analyst cannot grant themselves: say who can
        remedy = ("ask the curator for a grant on this dataset (the curator runs `statcurator "
                  "budget grant --dataset D --analyst A --epsilon E`, or PUT "
                  "/v1/admin/analysts/{analyst}/budgets/{dataset})")
    body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status,
                            "detail": e.problem,  # as it is: it may echo the caller's input
                            "remedy": remedy or "see docs/service.md",
                            "error": type(e).__name__}
    if instance is not None:
        body["instance"] = instance
    return status, body
