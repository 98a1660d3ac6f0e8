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

# names that SQL orders differently from a naive sort: NULL, empty, case, non-ASCII, NUL
NAMES = [None, "", "a", "B", "alice", "é", "ß", "Ä", "𝔸", "a\x00", "\uffff", "日本"]
ANALYSTS = DATASETS = IDS = NAMES
TYPES = ["dataset_budget", "grant", "charge", "answer"]
EDGES = [-5, -1, 0, 1, 2, 4, 30]

row_spec = st.tuples(st.sampled_from(TYPES), st.sampled_from(NAMES), st.sampled_from(NAMES),
                     st.sampled_from(NAMES),
                     st.integers(-1, 0))  # -1: a seq already taken, 0: the next one


def _row(seq: int, spec) -> LedgerEntry:
    kind, analyst, dataset, rid, _ = spec
    return LedgerEntry(seq, kind, analyst=analyst, dataset=dataset, request_id=rid,
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


@settings(max_examples=80, deadline=None)
@given(specs=st.lists(row_spec, max_size=25))
def test_the_memory_backend_answers_as_sqlite_does(specs) -> None:
    memory, sqlite = MemoryBackend(), SQLiteBackend()
    try:
        assert _apply(memory, specs) == _apply(sqlite, specs)
        for a, d, r in itertools.product(ANALYSTS, DATASETS, IDS):
            assert memory.state(a, d, r) == sqlite.state(a, d, r), (a, d, r)
        for a, d in itertools.product(ANALYSTS, DATASETS):
            for types in (None, (), ("charge",), ("grant", "charge"), ("answer",)):
                kw = dict(analyst=a, dataset=d, types=types)
                assert list(memory.entries(**kw)) == list(sqlite.entries(**kw)), kw
        for after, upto in itertools.product(EDGES, [None, *EDGES]):
            kw = dict(after=after, upto=upto)
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


def test_appends_are_atomic_whoever_shares_the_backend() -> None:
    """Two threads append the same seq through one MemoryBackend, the first slowed between
    its check of the seq and its insert (its request-id lookup takes 50 ms): exactly one
    row lands, the other append conflicts."""
    import threading
    import time

    class SlowOnce(dict):
        slowed = False

        def __contains__(self, key):
            if not SlowOnce.slowed:
                SlowOnce.slowed = True
                time.sleep(0.05)
            return dict.__contains__(self, key)

    memory = MemoryBackend()
    memory._ids = SlowOnce()
    memory.append(LedgerEntry(1, "genesis", at="t", prev_hash="0" * 64, hash="g"))
    outcomes: list[str] = []

    def append(rid) -> None:
        try:
            memory.append(LedgerEntry(2, "charge", analyst="alice", dataset="adult",
                                      request_id=rid, at="t", prev_hash="g", hash="h"))
            outcomes.append("ok")
        except ChainConflict:
            outcomes.append("conflict")

    threads = [threading.Thread(target=append, args=(rid,)) for rid in ("r1", "r2")]
    for t in threads:
        t.start()
        time.sleep(0.01)  # the first is inside its slowed lookup when the second starts
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["conflict", "ok"]
    assert [e.seq for e in memory.entries()] == [1, 2]


def test_values_come_back_as_plain_text_and_integers() -> None:
    """As from a database: a numpy string request id is stored as str."""
    import numpy as np

    memory = MemoryBackend()
    memory.append(LedgerEntry(1, "charge", analyst="alice", dataset="adult",
                              request_id=np.str_("r1"), grant_charges=np.int64(3), at="t",
                              prev_hash="0" * 64, hash="h"))
    (row,) = memory.entries()
    assert type(row.request_id) is str and type(row.grant_charges) is int


def test_a_bad_timeout_is_refused_in_memory_too() -> None:
    from statcurator.core.errors import InvalidParameterError

    for bad in (-1, 0, float("nan"), "x", True):
        with pytest.raises(InvalidParameterError, match="timeout"):
            Ledger(timeout=bad)
