"""Answers written behind the release, and charges decided right after them without a read
(``Ledger.store_answer``, ``Ledger._ahead``): the attacks of review 49 and what they must
not achieve. Every test here failed on the first version of the change (19c1e90) or holds
an attack that did not get through; the controls show what each guard stops."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import threading
from fractions import Fraction
from pathlib import Path

import pytest

from statcurator.accounting import AnswerLostError, Ledger
from statcurator.accounting import _ledger as ledger_module
from statcurator.core.errors import LedgerError
from statcurator.core.measures import PureDP

from .conftest import Store

Q = "SELECT COUNT(*) FROM adult"
QUARTER = PureDP(Fraction(1, 4))


def _funded(led: Ledger) -> Ledger:
    led.set_dataset_budget("adult", PureDP(1000))
    led.set_budget("alice", "adult", PureDP(1))
    led.set_budget("bob", "adult", PureDP(1))
    return led


def _charge(led: Ledger, rid: str, analyst: str = "alice", alongside=None, cost=QUARTER):
    return led.charge(analyst, "adult", cost, request_id=rid, query=Q, mechanism="m",
                      alongside=alongside)


# -- 1. a replay right after a stored answer runs the engine work -----------------------------

@pytest.mark.parametrize("new_id", [False, True])
def test_a_replay_right_after_its_answer_never_runs_the_work(persistent_store: Store,
                                                             new_id: bool):
    """charge(): a refusal or a replay never calls ``alongside`` (the engine run: a replay
    is free, and must not read the data). Right after store_answer (its answer still on the
    writer thread), the same request id again is read and replayed, because a caller's
    id is never decided without a read. Control: the caller claims the id is new
    (``new_id``, what the curator says of the ids it draws): decided from the remembered
    rows, the work runs, and only the unique index keeps the replay from a second charge."""
    led = _funded(persistent_store.open())
    calls: list[str] = []
    _charge(led, "r1", alongside=lambda: calls.append("fresh"))
    led.store_answer("alice", "r1", "42")
    again = led.charge("alice", "adult", QUARTER, request_id="r1", query=Q, mechanism="m",
                       alongside=lambda: calls.append("REPLAY RAN THE WORK"), new_id=new_id)
    assert again.replayed
    assert led.status("alice", "adult").charges == 1
    led.close()
    assert calls == (["fresh", "REPLAY RAN THE WORK"] if new_id else ["fresh"]), calls


def test_a_request_id_reused_for_another_query_right_after_its_answer_never_runs_the_work(
        persistent_store: Store):
    """The same for a request id reused with another cost (an error, never a charge)."""
    led = _funded(persistent_store.open())
    calls: list[str] = []
    _charge(led, "r1", alongside=lambda: calls.append("fresh"))
    led.store_answer("alice", "r1", "42")
    with pytest.raises(LedgerError, match="already used request id"):
        _charge(led, "r1", cost=PureDP(Fraction(1, 8)),
                alongside=lambda: calls.append("MISUSED ID RAN THE WORK"))
    led.close()
    assert calls == ["fresh"], calls


# -- 2. flush() returns although the answer it waits for was lost (the error went elsewhere) --

def _lost_while_locked(tmp_path):
    """alice's answer queued; its INSERT and then its fallback both fail on a file locked
    longer than the timeout; the fallback runs in another request thread (bob reading his
    budget: a plain read, which a locked WAL file does not block). Returns the ledger and
    what bob's read raised."""
    path = tmp_path / "l.db"
    led = _funded(Ledger(path, timeout=0.3))
    _charge(led, "r1", alongside=lambda: None)
    gate = threading.Event()
    led._submit(gate.wait)                              # hold the writer thread
    led.store_answer("alice", "r1", "42")               # queued behind the gate
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("BEGIN IMMEDIATE")                      # another process holds the write lock
    gate.set()
    led._queued.future.exception()                      # its INSERT: "locked" after 0.3 s
    other: list[BaseException] = []

    def bob_reads_his_budget() -> None:
        try:
            led.status("bob", "adult")
        except BaseException as e:  # noqa: BLE001
            other.append(e)

    t = threading.Thread(target=bob_reads_his_budget)
    t.start()
    t.join()
    raw.execute("ROLLBACK")
    raw.close()
    return led, other


def test_flush_never_returns_normally_for_an_answer_that_is_not_in_the_ledger(tmp_path):
    """The service calls flush() before it responds 'so that an answer it sent is always
    replayed'. When the error of alice's answer went to another thread, alice's flush()
    returns normally: the service sends an answer that can never be replayed (a retry gets
    AnswerLostError / 409 and must pay again)."""
    led, _ = _lost_while_locked(tmp_path)
    with pytest.raises(AnswerLostError, match="do not send it"):
        led.flush()                                     # alice's request thread, as the service
    with pytest.raises(AnswerLostError):
        led.replay("alice", "r1")                       # lost indeed; its budget stays spent
    assert led.status("alice", "adult").charges == 1
    led.close()


def test_another_threads_read_never_fails_for_an_answer_it_did_not_store(tmp_path):
    """Bob's plain read, which settles alice's answer, is not failed by the error of that
    answer's write (19c1e90 raised it to whoever settled): alice's close() says it."""
    led, other = _lost_while_locked(tmp_path)
    with pytest.raises(AnswerLostError):
        led.close()
    assert other == [], f"bob's read got alice's answer's error: {other[0]!r}"


# -- 3. an answer stored just before the interpreter exits is silently lost -------------------

_EXIT_SCRIPT = """
import sys
from fractions import Fraction
from statcurator.accounting import Ledger
from statcurator.core.measures import PureDP
path = sys.argv[1]
mine, other = Ledger(path), Ledger(path)          # other: another process, in effect
mine.set_dataset_budget("adult", PureDP(10))
mine.set_budget("alice", "adult", PureDP(1))
mine.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="r1", query="q",
            mechanism="m", alongside=lambda: None)
other.set_budget("bob", "adult", PureDP(1))        # another writer appends meanwhile
mine.store_answer("alice", "r1", "42")             # released; the script ends
print("released 42")
"""


def test_an_answer_stored_just_before_exit_is_in_the_ledger(tmp_path):
    """docs/ledger.md: 'close() and the interpreter's exit wait too; when its INSERT wrote
    nothing, the answer goes the usual way then'. A script releases an answer and exits
    without close() while another writer appended after its charge: the writer thread's
    conditional INSERT finds another head, and nobody writes the answer after a read. On
    4588feb (store_answer synchronous) the answer is stored."""
    path = tmp_path / "l.db"
    out = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT, str(path)], capture_output=True,
                         text=True, timeout=120,
                         env={**__import__("os").environ,
                              "PYTHONPATH": str(Path(ledger_module.__file__).parents[2])})
    assert out.returncode == 0, out.stderr
    assert "released 42" in out.stdout
    with sqlite3.connect(path) as raw:
        answers = raw.execute("SELECT request_id, payload FROM ledger "
                              "WHERE type = 'answer'").fetchall()
    assert answers == [("r1", "42")], "the released answer was silently lost at exit"


# -- 4. Ctrl-C right after the answer is handed to the writer thread ---------------------------

class _Conn:
    """The backend's sqlite3 connection, instrumented: the writer thread pauses right after
    switching the shared connection to synchronous=NORMAL for an answer; every charge
    INSERT notes the synchronous level it ran under."""

    def __init__(self, real, paused: threading.Event, go: threading.Event, seen: list):
        self._real, self._paused, self._go, self._seen = real, paused, go, seen

    def execute(self, sql, params=()):
        if sql.startswith("INSERT") and "'charge'" not in sql and params and params[1] == "charge":
            self._seen.append(self._real.execute("PRAGMA synchronous").fetchone()[0])
        cur = self._real.execute(sql, params)
        if sql == "PRAGMA synchronous = NORMAL" and threading.current_thread().name.startswith(
                "statcurator-ledger"):
            self._paused.set()
            self._go.wait(10)
        return cur

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.mark.parametrize("guarded", [True, False])
def test_an_interrupt_after_the_answer_is_handed_over_never_lets_a_charge_skip_its_fsync(
        tmp_path, guarded: bool):
    """Ctrl-C landing right after store_answer's _submit (before _queued / the lock's
    in-flight marker are set): the answer's INSERT runs on the writer thread with nothing
    telling the object to wait for it. The next charge without engine work (what
    Curator.estimate does) uses the same connection at the same time, while the writer has
    it at synchronous=NORMAL for the answer: the charge commits without its fsync, and its
    noise is released -- a power cut then loses a charge whose noise is out. The backend's
    insert lock keeps the answer's PRAGMA switch and INSERT together. Control: without
    that lock the charge does commit under NORMAL."""
    import inspect

    led = _funded(Ledger(tmp_path / "l.db"))
    if not guarded:
        led.backend._inserting = contextlib.nullcontext()
    _charge(led, "r1")
    paused, go, seen = threading.Event(), threading.Event(), []
    backend = led.backend
    backend._conn = _Conn(backend._conn, paused, go, seen)
    src, first = inspect.getsourcelines(ledger_module.Ledger._queue_answer)
    lineno = first + next(i for i, t in enumerate(src) if "if future is None" in t)
    code = ledger_module.Ledger._queue_answer.__code__
    armed = [True]

    def local(frame, event, arg):
        if event == "line" and frame.f_lineno == lineno and armed[0]:
            armed[0] = False
            raise KeyboardInterrupt
        return local

    sys.settrace(lambda frame, event, arg: local if frame.f_code is code else None)
    try:
        led.store_answer("alice", "r1", "42")
    except KeyboardInterrupt:
        pass
    finally:
        sys.settrace(None)
    assert not armed[0]
    assert paused.wait(10)                       # the writer is inside the answer's INSERT
    threading.Timer(1.0, go.set).start()         # (it finishes within a second)
    _charge(led, "r2")                           # e.g. Curator.estimate: no engine work
    go.set()
    led.close()
    assert seen[-1] == (2 if guarded else 1), f"charge r2 ran under synchronous={seen[-1]}"


# -- 5. (test quality) the fork test that can fail ---------------------------------------------

def _child_charges(led: Ledger) -> None:
    ran: list[int] = []
    led.charge("alice", "adult", QUARTER, request_id="child", query=Q, mechanism="m",
               alongside=lambda: ran.append(1), new_id=True)
    raise SystemExit(0 if ran == [1] else 5)


def test_a_child_forked_with_an_answer_really_in_flight_leaves_it_to_the_parent(
        persistent_store: Store, monkeypatch):
    """The parent's answer is held on its writer thread past the fork hook's wait, so it is
    really in flight when the child starts: the child (which inherits the parent's memory
    of it, not its thread) neither waits for it nor confirms it, and decides its own charge
    after a read; the parent's next call confirms it. (Without the pid checks in _confirm
    and _ahead the child waits for ever on a future of a thread it does not have.)"""
    import multiprocessing

    monkeypatch.setattr(ledger_module, "FORK_WAIT", 0.2)
    led = _funded(persistent_store.open())
    _charge(led, "parent", alongside=lambda: None)
    gate = threading.Event()
    led._submit(gate.wait)
    led.store_answer("alice", "parent", "p")                 # really in flight at the fork
    child = multiprocessing.get_context("fork").Process(target=_child_charges, args=(led,))
    child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
        child.join()
    gate.set()
    assert child.exitcode == 0
    led.flush()
    assert led.replay("alice", "parent") == "p"
    assert sorted(c.request_id for c in led.charges()) == ["child", "parent"]
    led.verify()
    led.close()


# -- 6. a third-party backend without append_after (the base class's False) ---------------------

_THIRD_PARTY_SCRIPT = """
import sys
from fractions import Fraction
from statcurator.accounting import Ledger, SQLiteBackend, LedgerBackend

class ThirdParty(SQLiteBackend):
    # a backend written against the documented contract: it cannot append_after
    append_after = LedgerBackend.append_after

from statcurator.core.measures import PureDP
led = Ledger(backend=ThirdParty(sys.argv[1]))
led.set_dataset_budget("adult", PureDP(10))
led.set_budget("alice", "adult", PureDP(1))
led.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="r1", query="q",
           mechanism="m", alongside=lambda: None)
led.store_answer("alice", "r1", "42")             # released; the script ends
print("released 42")
"""


def test_a_backend_that_cannot_append_after_stores_the_answer_in_store_answer(tmp_path):
    """LedgerBackend.append_after's docs: 'a backend that cannot (this default) returns
    False, and the ledger reads, decides and appends instead': such a backend's answers
    are written in store_answer, never handed to the writer thread (19c1e90 handed over a
    conditional INSERT that could never succeed, and a script that released and exited lost
    its last answer)."""
    path = tmp_path / "l.db"
    out = subprocess.run([sys.executable, "-c", _THIRD_PARTY_SCRIPT, str(path)],
                         capture_output=True, text=True, timeout=120,
                         env={**__import__("os").environ,
                              "PYTHONPATH": str(Path(ledger_module.__file__).parents[2])})
    assert out.returncode == 0, out.stderr
    with sqlite3.connect(path) as raw:
        answers = raw.execute("SELECT request_id FROM ledger WHERE type = 'answer'").fetchall()
    assert answers == [("r1",)], "the released answer was silently lost at exit"


# -- 7. threads + another ledger object hammering one dataset budget ----------------------------

def test_threads_and_another_writer_never_overspend_with_answers_in_flight(
        persistent_store: Store):
    """Three threads on one ledger object and a fourth on another, charging with engine
    work and new ids, storing answers (flushing half of them) and replaying some, against
    a dataset budget that affords 80 of their 160 charges: never more than the budget, the
    chain verifies, and every answer released is in the ledger."""
    import random

    total = Fraction(2)
    a, b = persistent_store.open(), persistent_store.open()
    a.set_dataset_budget("adult", PureDP(total))
    for who in ("alice", "bob", "carol", "dave"):
        a.set_budget(who, "adult", PureDP(10))
    errors: list[str] = []
    released: list[tuple[str, str]] = []

    def worker(led: Ledger, who: str) -> None:
        for i in range(40):
            rid = f"{who}{i}"
            try:
                c = led.charge(who, "adult", PureDP(Fraction(1, 40)), request_id=rid, query=Q,
                               mechanism="m", alongside=lambda: None, new_id=True)
                if c.replayed:
                    continue
                led.store_answer(who, rid, rid)
                if random.random() < 0.5:
                    led.flush()
                released.append((who, rid))
                if random.random() < 0.3:
                    assert _charge(led, rid, analyst=who, alongside=lambda: None,
                                   cost=PureDP(Fraction(1, 40))).replayed
            except Exception as e:  # noqa: BLE001
                if "exceeds" not in str(e) and "exhausted" not in str(e):
                    errors.append(repr(e)[:200])

    ts = [threading.Thread(target=worker, args=(a, w)) for w in ("alice", "bob", "carol")]
    ts.append(threading.Thread(target=worker, args=(b, "dave")))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    a.flush()
    b.flush()
    a.verify()
    assert persistent_store.spent() <= total
    answers = set(persistent_store.sql("SELECT analyst, request_id FROM ledger "
                                       "WHERE type = 'answer'"))
    assert [r for r in released if r not in answers] == []
    assert errors == []
    a.close()
    b.close()



# -- 8. store_answer on a closed ledger ---------------------------------------------------------

def test_store_answer_on_a_closed_ledger_raises_and_starts_no_thread(tmp_path):
    """A closed ledger refuses to store an answer (19c1e90 returned normally, the caller
    believing the answer stored, and started a writer thread nobody shut down)."""
    led = _funded(Ledger(tmp_path / "l.db"))
    _charge(led, "r1")
    led.close()
    before = {t.name for t in threading.enumerate()}
    try:
        with pytest.raises(LedgerError, match="closed"):
            led.store_answer("alice", "r1", "42")
        assert {t.name for t in threading.enumerate()} - before == set()
    finally:
        pool = led._pool
        if pool is not None:
            pool[1].shutdown()


# -- 9. abandon() after store_answer --------------------------------------------------------------

def test_abandon_after_store_answer_is_a_no_op(tmp_path):
    """abandon() after store_answer returned changes nothing: the answer handed over is
    stored, even when its conditional INSERT misses (another writer appended) and it is
    written after a read (19c1e90 dropped it from the pending answers, and the fallback
    then refused it as never stored)."""
    path = tmp_path / "l.db"
    led, other = _funded(Ledger(path)), Ledger(path)
    _charge(led, "r1", alongside=lambda: None)
    other.set_budget("carol", "adult", PureDP(1))          # another writer appends meanwhile
    led.store_answer("alice", "r1", "42")                   # returned: the answer is stored...
    led.abandon("alice", "r1")                              # ...so this should change nothing
    try:
        led.flush()
        assert led.replay("alice", "r1") == "42"
    finally:
        led.close()
        other.close()


# -- 10. PostgreSQL: an answer INSERT blocked by another session's open transaction ---------------

def test_postgres_flush_is_bounded_by_the_ledger_timeout(pg_dsn):
    """Another session holds an uncommitted row at the answer's position. The writer
    thread's INSERT waits for that transaction at most the ledger's timeout= (2 s here:
    ``lock_timeout``), so flush() -- like every later call, and close(), which wait with
    Ctrl-C deferred -- returns (saying the answer was lost) instead of waiting for as long
    as the other session keeps its transaction open."""
    import time
    import uuid

    import psycopg

    from statcurator.accounting import PostgresBackend

    schema = f"t{uuid.uuid4().hex[:12]}"
    led = _funded(Ledger(backend=PostgresBackend(pg_dsn, schema=schema, timeout=2)))
    _charge(led, "r1", alongside=lambda: None)
    head = led.entries()[-1]
    raw = psycopg.connect(pg_dsn)                      # a transaction left open
    raw.execute(f'INSERT INTO "{schema}".ledger (seq, type, at, prev_hash, hash) '
                "VALUES (%s, 'genesis', 'x', 'x', 'x')", (head.seq + 1,))
    t0 = time.monotonic()

    def store_and_flush() -> None:  # (both in a thread: on 4588feb store_answer blocks)
        with contextlib.suppress(Exception):
            led.store_answer("alice", "r1", "42")
            led.flush()

    t = threading.Thread(target=store_and_flush)
    t.start()
    t.join(8)
    stuck = t.is_alive()
    raw.rollback()
    raw.close()
    t.join(30)
    led.close()
    assert not stuck, f"flush() still waiting after {time.monotonic() - t0:.0f} s (timeout=2)"
