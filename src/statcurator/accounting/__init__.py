"""Privacy budgets per (analyst, dataset) and the append-only ledger of charges.

:class:`Accountant` is one budget in memory (total, ``cost``, ``can_spend``, ``spend``,
``remaining``); :class:`Ledger` keeps every budget, charge and released answer in a
persistent, append-only store (SQLite in WAL mode by default) and charges in one
transaction, so that no number of concurrent processes can overspend.

>>> from statcurator.accounting import Ledger
>>> from statcurator.core.measures import PureDP
>>> led = Ledger()                                   # in memory; Ledger("curator.db") persists
>>> _ = led.set_budget("alice", "adult", PureDP(1))
>>> c = led.charge("alice", "adult", PureDP(0.1), request_id="r1",
...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(sensitivity=1, ε=0.1)")
>>> led.status("alice", "adult").remaining
PureDP(epsilon=Fraction(9, 10))
"""

from ._accountant import Accountant, BudgetStatus
from ._backend import BudgetRecord, ChargeRecord, LedgerBackend
from ._errors import AnswerLostError, NoBudgetError
from ._ledger import Charge, Ledger
from ._sqlite import SQLiteBackend

__all__ = ["Ledger", "Charge", "BudgetStatus", "Accountant", "LedgerBackend", "SQLiteBackend",
           "BudgetRecord", "ChargeRecord", "NoBudgetError", "AnswerLostError"]
