"""A lost answer is reported to the thread that stored it even when threads are not the
threading module's, and an operator's extra unique index does not stop a PostgreSQL
ledger opening (review 51: each test here failed on cae851b; its third, an interrupt
before the confirmation's try, is in test_answers_lost.py)."""

from __future__ import annotations

import _thread
import contextlib
import threading

import pytest

from statcurator.accounting import AnswerLostError, Ledger

from .test_answers_in_flight import _funded
from .test_answers_lost import _charge


def _queue_then_lose(led, path, store_in) -> None:
    """test_answers_lost._queue_then_lose, with the settling read made by this (main)
    thread: a threading.Thread there could take the dead thread's ident, and its exit
    would drop the _DummyThread from threading._active (hiding the bug by chance)."""
    import sqlite3
    gate = threading.Event()
    led._submit(gate.wait)                               # hold the writer thread
    store_in(lambda: led.store_answer("alice", "r1", "42"))
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")                       # another process holds the lock
    gate.set()
    led._queued.future.exception()                       # "locked" after the timeout
    led.status("bob", "adult")                           # this read settles: r1 is lost
    raw.execute("ROLLBACK")
    raw.close()


def _in_c_thread(fn) -> list:
    """Run fn in a thread the threading module did not start (as mod_wsgi's, a C
    extension's or _thread's): threading.current_thread() is a _DummyThread there."""
    out: list = []
    done = threading.Event()

    def run() -> None:
        out.append(threading.get_ident())
        try:
            out.append(fn())
        except BaseException as e:  # noqa: BLE001
            out.append(e)
        finally:
            done.set()
    _thread.start_new_thread(run, ())
    assert done.wait(10)
    return out


def test_a_new_non_threading_thread_is_not_told_of_a_dead_ones_lost_answer(tmp_path):
    """b29d764 says 'a new thread is never told of a dead thread's lost answer'. For a
    thread not started by the threading module, current_thread() is a _DummyThread kept in
    threading._active by ident for ever: a new such thread that gets the same ident from
    the OS gets the same object, and with it the dead thread's loss."""
    path = tmp_path / "l.db"
    led = _funded(Ledger(path, timeout=0.3))
    _charge(led, "r1", alongside=lambda: None)
    first: list = []

    def store_in(fn) -> None:
        first.extend(_in_c_thread(fn))                   # stored; the thread exits
    _queue_then_lose(led, path, store_in=store_in)
    got: list = []
    for _ in range(50):                                  # until the OS reuses the ident
        got = _in_c_thread(led.flush)                    # a new thread; it stored nothing
        if got[0] == first[0]:
            break
    with contextlib.suppress(AnswerLostError):
        led.close()
    if got[0] != first[0]:
        pytest.skip("the OS gave the new thread another ident")
    assert got[1] is None, f"a new thread that stored nothing was told: {got[1]!r}"



def test_pg_an_extra_unique_index_without_underscore_does_not_crash_the_open(pg_dsn):
    """problems() on PostgreSQL derives the expected predicate from every unique index's
    name (name.split('_')[1]): an extra unique index an operator added for an audit, named
    without '_', makes Ledger() fail with IndexError instead of opening (nothing was
    tampered with: both unique indexes are intact)."""
    import uuid

    import psycopg

    from statcurator.accounting import PostgresBackend

    schema = f"t{uuid.uuid4().hex[:12]}"
    Ledger(backend=PostgresBackend(pg_dsn, schema=schema)).close()
    with psycopg.connect(pg_dsn, autocommit=True) as raw:
        print(raw.execute("SELECT c.relname, pg_get_indexdef(i.indexrelid, 0, true) "
                          "FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE "
                          "i.indrelid = to_regclass(%s)", (f'"{schema}".ledger',)).fetchall())
        raw.execute(f'CREATE UNIQUE INDEX ledgerhashes ON "{schema}".ledger (hash)')
    Ledger(backend=PostgresBackend(pg_dsn, schema=schema)).close()
