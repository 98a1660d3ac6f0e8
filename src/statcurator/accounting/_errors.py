"""Errors specific to budgets and the ledger (refinements of the types in ``core.errors``)."""

from __future__ import annotations

from ..core.errors import BudgetExceededError, LedgerError

__all__ = ["NoBudgetError", "AnswerLostError", "LedgerTamperedError"]


class NoBudgetError(BudgetExceededError):
    """The analyst has no privacy budget on the dataset, so nothing can be spent.

    A subclass of :class:`~statcurator.core.errors.BudgetExceededError`: callers that refuse
    a query for lack of budget need not tell the two cases apart.

    >>> from statcurator.core.errors import BudgetExceededError
    >>> issubclass(NoBudgetError, BudgetExceededError)
    True
    """


class AnswerLostError(LedgerError):
    """A request was charged but its answer was never stored, so it cannot be replayed.

    This happens when the curator stopped between the charge and the release (a crash, a
    killed process), or while the answer is still being computed. The budget stays spent:
    handing out fresh noise under the same request id for free would let an analyst average
    repeated answers without paying for them. Submit the query under a new request id, which
    is charged again.

    >>> from statcurator.core.errors import LedgerError
    >>> issubclass(AnswerLostError, LedgerError)
    True
    """


class LedgerTamperedError(LedgerError):
    """The ledger's hash chain or its running totals do not verify: it was altered outside
    statcurator (a row deleted, changed or inserted, the triggers dropped, the file cut).

    ``row`` is the ``seq`` of the first row that fails (or ``None`` when the fault is not
    one row's). A ledger in this state refuses service until it is restored from a trusted
    copy: its totals can no longer be believed.

    >>> from statcurator.core.errors import LedgerError
    >>> err = LedgerTamperedError("the ledger is broken at row 3", row=3)
    >>> err.row, isinstance(err, LedgerError)
    (3, True)
    """

    def __init__(self, message: str, *, row: int | None = None, remedy: str | None = None
                 ) -> None:
        super().__init__(message, remedy=remedy)
        self.row = row


# Shown (in tracebacks and doctests) under the package that exports them.
NoBudgetError.__module__ = "statcurator.accounting"
AnswerLostError.__module__ = "statcurator.accounting"
LedgerTamperedError.__module__ = "statcurator.accounting"
