"""The in-memory backend (``Ledger()``) answers exactly as the SQLite backend does.

``MemoryBackend`` keeps the rows in a list with the indexes ``state()`` reads; the SQLite
backend answers the same questions with SQL. Random sequences of rows — valid appends, a
reused ``seq``, a second charge or answer under one (analyst, request id) — go to both, and
every answer (``state`` for every (analyst, dataset, request id), ``entries`` under every
filter, ``latest``, ``counts``, and which appends raise ``ChainConflict``) must agree.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.accounting import Ledger, MemoryBackend, SQLiteBackend
from statcurator.accounting._backend import ChainConflict, LedgerEntry
from statcurator.core.errors import LedgerError

ANALYSTS = [None, "alice", "bob"]
DATASETS = [None, "adult", "census"]
IDS = [None, "r1", "r2"]
TYPES = ["dataset_budget", "grant", "charge", "answer"]

row_spec = st.tuples(st.sampled_from(TYPES), st.sampled_from(ANALYSTS[1:]),
                     st.sampled_from(DATASETS[1:]), st.sampled_from(IDS[1:]),
                     st.integers(-1, 0))  # -1: a seq already taken, 0: the next one


def _row(seq: int, spec) -> LedgerEntry:
    kind, analyst, dataset, rid, _ = spec
    return LedgerEntry(seq, kind, analyst=None if kind == "dataset_budget" else analyst,
                       dataset=dataset, request_id=rid if kind in ("charge", "answer") else None,
                       at=f"t{seq}", prev_hash="p", hash=f"h{seq}")


def _apply(backend, specs) -> list[str]:
    out = []
    backend.append(LedgerEntry(1, "genesis", at="t", prev_hash="0" * 64, hash="g"))
    for spec in specs:
        head = backend.state(None, None, None)["head"].seq
        try:
            backend.append(_row(head + 1 + spec[4], spec))
            out.append("ok")
        except ChainConflict:
            out.append("conflict")
    return out


@settings(max_examples=60, deadline=None)
@given(specs=st.lists(row_spec, max_size=25))
def test_the_memory_backend_answers_as_sqlite_does(specs) -> None:
    memory, sqlite = MemoryBackend(), SQLiteBackend()
    try:
        assert _apply(memory, specs) == _apply(sqlite, specs)
        for a, d, r in itertools.product(ANALYSTS, DATASETS, IDS):
            assert memory.state(a, d, r) == sqlite.state(a, d, r), (a, d, r)
        for a, d in itertools.product(ANALYSTS, DATASETS):
            for types in (None, ("charge",), ("grant", "charge"), ("answer",)):
                for after, upto in ((0, None), (2, None), (1, 4), (0, 0)):
                    kw = dict(after=after, upto=upto, analyst=a, dataset=d, types=types)
                    assert list(memory.entries(**kw)) == list(sqlite.entries(**kw)), kw
        for scope in ("grant", "dataset"):
            assert memory.latest(scope) == sqlite.latest(scope)
        assert memory.counts() == sqlite.counts()
        assert memory.problems() == [] and not memory.persistent
    finally:
        sqlite.close()


def test_control_a_backend_that_forgets_the_request_id_index_is_caught() -> None:
    """The comparison can fail: a memory backend that lets a second charge through under
    the same request id disagrees with SQLite on the same sequence."""

    class Forgetful(MemoryBackend):
        def append(self, entry):
            self._ids.clear()
            super().append(entry)

    specs = [("charge", "alice", "adult", "r1", 0), ("charge", "alice", "adult", "r1", 0)]
    sqlite = SQLiteBackend()
    try:
        assert _apply(Forgetful(), specs) != _apply(sqlite, specs)
    finally:
        sqlite.close()


def test_a_gap_in_the_numbering_is_refused_in_memory() -> None:
    """Stricter than SQLite, which stores a row two ahead of the head (the ledger never
    writes one; the chain's check would report the gap)."""
    memory = MemoryBackend()
    memory.append(LedgerEntry(1, "genesis", at="t", prev_hash="0" * 64, hash="g"))
    with pytest.raises(LedgerError, match="gap"):
        memory.append(LedgerEntry(3, "grant", at="t", prev_hash="g", hash="h"))
    assert memory.counts()["grant"] == 0


def test_ledger_without_a_path_is_in_memory_and_closes() -> None:
    led = Ledger()
    assert isinstance(led.backend, MemoryBackend) and led.location == ":memory:"
    assert isinstance(Ledger(":memory:").backend, MemoryBackend)
    led.close()
    with pytest.raises(LedgerError, match="closed"):
        led.entries()
