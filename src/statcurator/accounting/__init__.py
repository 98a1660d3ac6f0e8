"""Privacy budgets — dataset-wide and per analyst — and the tamper-evident ledger of charges.

Every dataset registered for DP queries has a **dataset-wide budget**: the data owner's bound
on the total privacy loss of that data, across every analyst (analysts may collude). Every
analyst spends from a **grant** on the dataset. :class:`Ledger` keeps both, every charge and
every released answer in an append-only, hash-chained store (SQLite in WAL mode by default,
PostgreSQL with :class:`PostgresBackend`) and debits both budgets in one atomic step, so no
number of concurrent processes can overspend either. :class:`Accountant` is one budget in
memory; :func:`analyst_id` is the normalized identity budgets are bound to.

>>> from statcurator.accounting import Ledger
>>> from statcurator.core.measures import PureDP
>>> led = Ledger()                                   # in memory; Ledger("curator.db") persists
>>> _ = led.set_dataset_budget("adult", PureDP(4))    # all analysts together
>>> _ = led.set_budget("alice", "adult", PureDP(1))   # alice's grant
>>> c = led.charge("Alice", "adult", PureDP(0.1), request_id="r1",
...                query="SELECT COUNT(*) FROM adult", mechanism="Laplace(sensitivity=1, ε=0.1)")
>>> led.status("alice", "adult").remaining, led.dataset_status("adult").remaining
(PureDP(epsilon=Fraction(9, 10)), PureDP(epsilon=Fraction(39, 10)))
"""

from ._accountant import Accountant, BudgetStatus
from ._backend import ENTRY_TYPES, LedgerBackend, LedgerEntry
from ._chain import Verification
from ._errors import AnswerLostError, LedgerTamperedError, NoBudgetError
from ._identity import analyst_id
from ._ledger import KEY_ENV, Charge, Ledger
from ._memory import MemoryBackend
from ._sqlite import SQLiteBackend

__all__ = ["Ledger", "Charge", "BudgetStatus", "Accountant", "LedgerBackend", "LedgerEntry",
           "MemoryBackend", "SQLiteBackend", "PostgresBackend", "Verification", "ENTRY_TYPES",
           "KEY_ENV", "analyst_id", "NoBudgetError", "AnswerLostError", "LedgerTamperedError"]


def __getattr__(name: str) -> object:  # PostgresBackend imports psycopg only when it is asked for
    if name == "PostgresBackend":
        from ._postgres import PostgresBackend

        return PostgresBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
