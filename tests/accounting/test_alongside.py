"""The engine reads the data while the debit is written (issue 10, "the query path at engine
speed"): ``Ledger.charge(..., alongside=work)``.

The work (the curator's engine run) starts only once the charge is decided — a refusal or a
replay never reads the data — and ``charge`` returns only when the debit is committed, so
nothing computed alongside can be released before it. On a durable backend the write and
the work run side by side; on an in-memory ledger, one after the other.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from fractions import Fraction

import pytest

from statcurator.accounting import Ledger
from statcurator.accounting._backend import ChainConflict
from statcurator.core.errors import BudgetExceededError
from statcurator.core.measures import PureDP

from .conftest import Store

Q = "SELECT COUNT(*) FROM adult"


ONE, QUARTER, AMPLE = PureDP(1), PureDP(Fraction(1, 4)), PureDP(1000)


def _funded(led: Ledger, grant=ONE, dataset=AMPLE) -> Ledger:
    led.set_dataset_budget("adult", dataset)
    led.set_budget("alice", "adult", grant)
    return led


def _charge(led: Ledger, rid: str, cost=QUARTER, analyst: str = "alice",
            alongside=None):
    return led.charge(analyst, "adult", cost, request_id=rid, query=Q, mechanism="m",
                      alongside=alongside)


def _gated_appends(monkeypatch, led: Ledger, gate: threading.Event, seen: list[str],
                   slow: float = 0.0) -> None:
    """Make ``led``'s appends of charges wait (up to 5 s) for ``gate``, then ``slow`` s."""
    backend = led.backend
    real = backend.append

    def append(entry):
        if entry.type == "charge":
            seen.append("append waits" if not gate.is_set() else "append")
            gate.wait(5)
            seen.append("appended" if gate.is_set() else "append timed out")
            time.sleep(slow)
        return real(entry)

    monkeypatch.setattr(backend, "append", append)


def test_the_work_runs_while_a_durable_charge_is_written(persistent_store: Store, monkeypatch):
    """The append is held until the work has started: it can only finish side by side.
    ``charge`` then returns with the row committed, not before."""
    led = _funded(persistent_store.open())
    gate, seen = threading.Event(), []
    _gated_appends(monkeypatch, led, gate, seen, slow=0.3)  # a charge returned early misses it

    def work():
        seen.append("work")
        gate.set()

    charge = _charge(led, "r1", alongside=work)
    assert "append timed out" not in seen and seen.count("work") == 1
    assert seen[-1] == "appended" or seen.index("work") < seen.index("appended")
    # committed when charge returned: a raw read of the store has the row
    assert persistent_store.sql("SELECT request_id FROM ledger WHERE type = 'charge'") == [
        ("r1",)]
    assert charge.seq > 0 and led.status("alice", "adult").spent == PureDP(Fraction(1, 4))
    led.close()


def test_control_an_in_memory_ledger_writes_first_then_runs_the_work(monkeypatch):
    """The same gate on a ledger that writes before the work: the append waits out its
    5 s and only then does the work run (what the test above would see without overlap)."""
    led = _funded(Ledger())
    gate, seen = threading.Event(), []
    _gated_appends(monkeypatch, led, gate, seen)
    monkeypatch.setattr(threading.Event, "wait", lambda self, t=None: self.is_set())  # no 5 s
    _charge(led, "r1", alongside=lambda: (seen.append("work"), gate.set()))
    assert seen == ["append waits", "append timed out", "work"]


def test_a_refusal_or_a_replay_never_runs_the_work(led: Ledger):
    _funded(led, grant=PureDP(Fraction(1, 2)))
    calls: list[str] = []
    _charge(led, "r1", alongside=lambda: calls.append("r1"))
    with pytest.raises(BudgetExceededError):
        _charge(led, "too much", PureDP(1), alongside=lambda: calls.append("refused"))
    assert _charge(led, "r1", alongside=lambda: calls.append("replayed")).replayed
    assert calls == ["r1"]
    assert [c.request_id for c in led.charges()] == ["r1"]


def test_a_charge_refused_after_a_concurrent_writer_took_the_budget(persistent_store: Store,
                                                                    monkeypatch):
    """Another process spends the dataset-wide budget between this charge's decision and
    its write: the write loses the race, the charge is decided again and refused. The work
    ran (once) and its result is dropped; only the other charge is in the ledger."""
    mine = persistent_store.open()
    _funded(mine, dataset=PureDP(Fraction(1, 2)))
    other = persistent_store.open()
    other.set_budget("bob", "adult", PureDP(1))
    gate, seen = threading.Event(), []
    _gated_appends(monkeypatch, mine, gate, seen)
    calls = []

    def work():  # meanwhile, bob takes the whole dataset-wide budget
        calls.append("work")
        _charge(other, "bob-1", PureDP(Fraction(1, 2)), analyst="bob")
        gate.set()

    with pytest.raises(BudgetExceededError, match="dataset 'adult'"):
        _charge(mine, "r1", PureDP(Fraction(1, 2)), alongside=work)
    assert calls == ["work"]
    assert [(c.analyst, c.request_id) for c in mine.charges()] == [("bob", "bob-1")]
    assert persistent_store.spent() == Fraction(1, 2)
    mine.verify()
    mine.close()
    other.close()


def test_an_error_of_the_work_comes_after_the_write(persistent_store: Store):
    """The curator's own work never raises (it keeps an engine error and raises it once
    charged); any other error propagates only when the charge is written, and the charge
    stays recorded."""
    led = _funded(persistent_store.open())

    def work():
        raise RuntimeError("engine failed")

    with pytest.raises(RuntimeError, match="engine failed"):
        _charge(led, "r1", alongside=work)
    assert persistent_store.sql("SELECT request_id FROM ledger WHERE type = 'charge'") == [
        ("r1",)]
    led.close()


def _charge_in_child(led: Ledger) -> None:
    ran = []
    _charge(led, "child", alongside=lambda: ran.append(1))
    raise SystemExit(0 if ran == [1] else 5)


def test_a_forked_child_writes_beside_its_work_on_its_own_thread(persistent_store: Store):
    """The writer thread does not survive fork(): the child makes its own (else its
    charge would wait forever on the parent's thread)."""
    led = _funded(persistent_store.open())
    _charge(led, "parent", alongside=lambda: None)  # the parent's writer thread exists
    child = multiprocessing.get_context("fork").Process(target=_charge_in_child, args=(led,))
    child.start()
    child.join(30)
    if child.is_alive():  # pragma: no cover - the failure this test is for
        child.kill()
    assert child.exitcode == 0
    assert [c.request_id for c in led.charges()] == ["parent", "child"]
    led.close()


def test_after_losing_its_place_a_charge_that_still_fits_is_recorded_without_rerunning_the_work(
        persistent_store: Store, monkeypatch):
    """Bob takes part of the dataset-wide budget between this charge's decision and its
    write: the write loses its place, the charge is decided again, still fits, and is
    written — and the work (the engine run) is not run a second time."""
    mine = persistent_store.open()
    _funded(mine, dataset=PureDP(1))
    other = persistent_store.open()
    other.set_budget("bob", "adult", PureDP(1))
    gate, seen = threading.Event(), []
    _gated_appends(monkeypatch, mine, gate, seen)
    calls = []

    def work():
        calls.append("work")
        _charge(other, "bob-1", PureDP(Fraction(1, 4)), analyst="bob")
        gate.set()

    charge = _charge(mine, "r1", PureDP(Fraction(1, 2)), alongside=work)
    assert calls == ["work"] and not charge.replayed
    assert [(c.analyst, c.request_id) for c in mine.charges()] == [("bob", "bob-1"),
                                                                   ("alice", "r1")]
    assert mine.dataset_status("adult").spent == PureDP(Fraction(3, 4))
    mine.verify()
    mine.close()
    other.close()


def test_other_threads_use_the_ledger_while_the_work_runs(store: Store):
    """The work runs without the ledger's lock: another thread reads a budget and charges
    while it runs (the work waits for that thread; if the lock were held, neither could go
    on and the test would time out)."""
    led = _funded(store.open())
    led.set_budget("bob", "adult", PureDP(1))
    done = threading.Event()
    out: list[object] = []

    def other() -> None:
        out.append(led.status("bob", "adult").spent)
        out.append(_charge(led, "bob-1", analyst="bob").seq)
        done.set()

    def work() -> None:
        threading.Thread(target=other, daemon=True).start()
        assert done.wait(10), "another thread could not use the ledger during the work"

    _charge(led, "r1", alongside=work)
    assert out[0] == PureDP(0) and done.is_set()
    assert sorted(c.request_id for c in led.charges()) == ["bob-1", "r1"]
    led.verify()
    led.close()


def test_an_interrupt_while_waiting_for_the_row_waits_until_it_is_written():
    """Ctrl-C during the wait for the writer thread: the wait goes on until the append has
    finished, then the interrupt is raised — the connection is never used by two threads
    at once. (A future whose first wait is interrupted, as a signal handler would.)"""
    from statcurator.accounting._ledger import _settled

    class Interrupt(BaseException):
        pass

    class Future:
        waits = 0

        def exception(self):
            self.waits += 1
            if self.waits == 1:
                raise Interrupt  # Ctrl-C arrives during the first wait
            return None  # the append finished

    future = Future()
    with pytest.raises(Interrupt):
        _settled(future)
    assert future.waits == 2  # it waited again before raising


def test_an_interrupt_while_taking_the_lock_back_leaves_it_consistent(tmp_path):
    """Ctrl-C while the charging thread waits to take the lock back after its work (another
    thread holds it): the interrupt is raised once the lock is held again, the charge is
    recorded, and the lock is free afterwards. (The lock was once taken back one level at a
    time with a count kept beside it: the interrupt left the count at -1, and the next
    release raised RuntimeError in place of the interrupt.) A signal handler raises the
    interrupt, as Python's does for Ctrl-C."""
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run in the main thread only")

    class Interrupt(BaseException):
        pass

    def interrupt(signum, frame):
        raise Interrupt

    led = _funded(Ledger(tmp_path / "l.db"))
    holding = threading.Event()

    def holder() -> None:
        with led._lock.rlock:
            holding.set()
            time.sleep(0.6)

    def work() -> None:  # another thread takes the lock, and Ctrl-C comes while it holds it
        threading.Thread(target=holder).start()
        assert holding.wait(5)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGUSR1)).start()

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        with pytest.raises(Interrupt):
            _charge(led, "r1", alongside=work)
            time.sleep(2)  # (only if the charge returned before the signal: fails above)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert not led._lock._lock._is_owned()
    other: list[object] = []
    t = threading.Thread(target=lambda: other.append(led.status("alice", "adult").charges))
    t.start()
    t.join(5)
    assert other == [1]  # recorded, and another thread gets the lock
    led.verify()
    led.close()


def test_a_storm_of_interrupts_never_leaves_the_lock_held(tmp_path):
    """Interrupts every 0–2 ms while the main thread charges (with work alongside) and
    another thread reads budgets: each charge is recorded or interrupted, and the lock is
    never left held (it was, about once in six interrupts, when the ledger entered it
    through a Python ``__enter__``: an interrupt could fall between taking the lock and the
    block that gives it back). The chain verifies. A signal handler raises the interrupt, as
    Python's does for Ctrl-C — at most once per charge, and only during the charge, so that
    none falls into the test's own bookkeeping."""
    import os
    import random
    import signal

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers run in the main thread only")

    class Interrupt(BaseException):
        pass

    armed = [False]

    def interrupt(signum, frame):
        if armed[0]:
            armed[0] = False
            raise Interrupt

    led = _funded(Ledger(tmp_path / "l.db"), grant=PureDP(10**6), dataset=PureDP(10**6))
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            led.status("alice", "adult")

    def storm() -> None:
        while not stop.is_set():
            time.sleep(random.uniform(0, 0.002))
            os.kill(os.getpid(), signal.SIGUSR1)

    previous = signal.signal(signal.SIGUSR1, interrupt)
    threads = [threading.Thread(target=reader, daemon=True),
               threading.Thread(target=storm, daemon=True)]
    interrupted = charges = 0
    stuck = False
    try:
        for t in threads:
            t.start()
        end = time.monotonic() + 1.5
        while time.monotonic() < end and not stuck:
            charges += 1
            try:
                armed[0] = True
                _charge(led, f"r{charges}", cost=PureDP(Fraction(1, 1000)),
                        alongside=lambda: time.sleep(0.0005))
                armed[0] = False
            except Interrupt:
                interrupted += 1
            stuck = led._lock._lock._is_owned()
    finally:
        armed[0] = False
        stop.set()
        for t in threads:  # no signal may come after the handler is put back
            t.join(5)
        signal.signal(signal.SIGUSR1, previous)
    assert interrupted > 20 and not stuck
    led.verify()
    led.close()


def _status_in_child(led: Ledger) -> None:
    led.status("alice", "adult")


def test_a_child_forked_while_another_thread_holds_the_lock_uses_the_ledger(tmp_path):
    """fork() while another thread holds the ledger's lock: that thread does not exist in
    the child, so the child replaces the lock instead of waiting for ever."""
    led = _funded(Ledger(tmp_path / "l.db"))
    holding, done = threading.Event(), threading.Event()

    def holder() -> None:
        with led._lock.rlock:
            holding.set()
            done.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert holding.wait(5)
    try:
        child = multiprocessing.get_context("fork").Process(target=_status_in_child,
                                                            args=(led,))
        child.start()
        child.join(10)
        hung = child.is_alive()
        if hung:
            child.kill()
    finally:
        done.set()
        t.join(5)
    assert not hung and child.exitcode == 0
    led.close()


def test_a_child_forked_while_a_row_is_being_appended_uses_the_ledger(tmp_path):
    """fork() while the writer thread is inside a charge's INSERT transaction: the fork waits
    for the row (a child forked mid-transaction inherits SQLite's lock state for the file,
    and stays locked out of it for good, then hangs), and the child charges on its own."""
    led = _funded(Ledger(tmp_path / "l.db", timeout=2))
    inside = threading.Event()

    def slow_inside_the_transaction() -> int:
        if threading.current_thread().name.startswith("statcurator-ledger"):
            inside.set()
            time.sleep(0.001)
        return 0

    led.backend._connection().set_progress_handler(slow_inside_the_transaction, 1)
    exits: list[object] = []

    def work() -> None:  # the engine's turn, while the writer thread appends the row
        assert inside.wait(5)
        child = multiprocessing.get_context("fork").Process(target=_charge_in_child,
                                                            args=(led,))
        child.start()
        child.join(30)
        if child.is_alive():  # pragma: no cover - the failure this test is for
            child.kill()
        exits.append(child.exitcode)

    _charge(led, "parent", alongside=work)
    led.backend._connection().set_progress_handler(None, 1)
    assert exits == [0]
    assert sorted(c.request_id for c in led.charges()) == ["child", "parent"]
    led.verify()
    led.close()


def test_a_child_forked_inside_the_work_finishes_its_charge(tmp_path):
    """os.fork() from inside the engine's work, both processes carrying on: the fork waits
    for the charge's row, and in the child the lock the charging thread takes back is the
    very object its ``with`` entered (made free in place), so the charge returns in both and
    another thread of the child can use the ledger. (The child's lock was once replaced by
    a new object: taking back one and releasing the other raised RuntimeError and left the
    lock held; before that, the child hung.)"""
    import os

    led = _funded(Ledger(tmp_path / "l.db"))
    pid: list[int] = []
    ok = False
    try:
        _charge(led, "r1", alongside=lambda: pid.append(os.fork()))
        ok = True
    except BaseException:
        ok = False
    finally:
        if pid == [0]:  # the child: never back into pytest
            code = 3
            try:
                done: list[object] = []
                t = threading.Thread(target=lambda: done.append(led.counts()), daemon=True)
                t.start()
                t.join(10)
                code = 0 if ok and done and not led._lock._lock._is_owned() else 4
            finally:
                os._exit(code)
    _, status = os.waitpid(pid[0], 0)
    assert ok and os.waitstatus_to_exitcode(status) == 0
    assert [c.request_id for c in led.charges()] == ["r1"]
    led.close()


def test_a_fork_on_the_writer_thread_does_not_wait_for_itself(tmp_path, monkeypatch):
    """A backend whose append forks (a replication hook, say, or subprocess with a
    preexec_fn): the fork runs on the ledger's writer thread, which must not wait for the
    append it is running (it did, for ever, before the wait had a bound)."""
    import os

    from statcurator.accounting import SQLiteBackend
    from statcurator.accounting import _ledger as ledger_module

    monkeypatch.setattr(ledger_module, "FORK_WAIT", 60.0)  # a wait would show as a hang

    class Forking(SQLiteBackend):
        def append(self, entry):
            super().append(entry)
            if entry.type == "charge":
                child = os.fork()
                if child == 0:
                    os._exit(0)
                os.waitpid(child, 0)

    led = _funded(Ledger(backend=Forking(tmp_path / "l.db")))
    done = threading.Event()
    t = threading.Thread(target=lambda: (_charge(led, "r1", alongside=lambda: None),
                                         done.set()), daemon=True)
    t.start()
    assert done.wait(20), "the fork on the writer thread waited for its own append"
    assert [c.request_id for c in led.charges()] == ["r1"]
    led.close()


LATE_THREAD = """
import sys, threading, time
from fractions import Fraction
from statcurator.accounting import Ledger
from statcurator.core.measures import PureDP
led = Ledger(sys.argv[1])
led.set_dataset_budget("adult", PureDP(10))
led.set_budget("alice", "adult", PureDP(1))
ran = []
def late():
    time.sleep(0.5)  # the main thread has returned: the interpreter is shutting down
    led.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="late", query="q",
               mechanism="m", alongside=lambda: ran.append(1))
    print("charged", ran, flush=True)
threading.Thread(target=late).start()
"""


def test_a_charge_from_a_thread_outliving_the_main_thread_still_works(tmp_path):
    """After the main thread returns, concurrent.futures refuses new work; the ledger then
    writes the row itself, then runs the work."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LATE_THREAD, str(tmp_path / "l.db")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "charged [1]" in done.stdout
    with Ledger(tmp_path / "l.db") as led:
        assert [c.request_id for c in led.charges()] == ["late"]


def test_a_charge_finishing_never_frees_the_connection_under_another_threads_append(
        tmp_path, monkeypatch):
    """Two threads charge one Ledger object side by side. The first one's work ends while the
    second one's row is still being appended on the writer thread, and the first one's own
    row lost its place to another writer: no thread may use the backend until the second
    append is done — neither the first, reading the state again, nor a third. (The first
    once cleared the second thread's in-flight marker and re-took the lock without waiting:
    threads then used the shared SQLite connection in the middle of the append, and a
    charge could return without its row.)"""
    led = _funded(Ledger(tmp_path / "l.db"))
    led.set_budget("bob", "adult", PureDP(1))
    backend = led.backend
    busy: list[str] = []        # the backend call in progress
    overlaps: list[str] = []    # calls made while another was in progress
    lost: list[int] = []
    second_in, second_go, first_go, second_done = (threading.Event() for _ in range(4))
    real_append, real_state = backend.append, backend.state

    def guarded(name, call, *args):
        if busy:
            overlaps.append(f"{name} during {busy[0]}")
        busy.append(name)
        try:
            return call(*args)
        finally:
            busy.remove(name)

    def append(entry):
        def slow_second():
            if entry.request_id == "first" and not lost:
                lost.append(entry.seq)    # another process took the first row's place:
                raise ChainConflict("taken")  # it reads the state again, then appends
            if entry.request_id == "second":
                second_in.set()
                assert second_go.wait(10)
            real_append(entry)
        guarded(f"append {entry.request_id}", slow_second)

    monkeypatch.setattr(backend, "append", append)
    monkeypatch.setattr(backend, "state", lambda *a: guarded("state", real_state, *a))
    threads = [threading.Thread(target=_charge, args=(led, "first"),
                                kwargs={"alongside": lambda: first_go.wait(10)}),
               threading.Thread(target=_charge, args=(led, "second"),
                                kwargs={"analyst": "bob",
                                        "alongside": lambda: second_done.wait(10)})]
    threads[0].start()
    time.sleep(0.2)                       # the first charge's work is running
    threads[1].start()
    assert second_in.wait(10)             # the second charge's row is being appended
    first_go.set()                        # while its work runs, the first charge's ends
    time.sleep(0.2)
    third = threading.Thread(target=led.status, args=("alice", "adult"))
    third.start()                         # a third thread reads a budget
    time.sleep(0.2)
    second_go.set()                       # the second append completes
    second_done.set()                     # and then the second charge's work
    for t in (*threads, third):
        t.join(10)
    assert overlaps == [] and lost
    assert sorted(c.request_id for c in led.charges()) == ["first", "second"]
    led.verify()
    led.close()


def test_the_same_request_id_charged_by_two_processes_at_once_is_charged_once(tmp_path):
    """The documented third case of an engine run for nothing (review 50): the same caller
    id (a retry sent to two service workers at once) decided by two ledger objects before
    either writes. Both run their work; one row goes in, and the other charge, its INSERT
    refused by the unique index, is read again and replayed: one charge, never two."""
    path = tmp_path / "l.db"
    a, b = Ledger(path), Ledger(path)                   # two processes, in effect
    a.set_dataset_budget("adult", PureDP(10))
    a.set_budget("alice", "adult", PureDP(1))
    ran: list[str] = []
    gate = threading.Event()
    a._submit(gate.wait)                                # a's INSERT waits a moment

    def a_work() -> None:
        ran.append("a")
        c = b.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="key-1",
                     query="q", mechanism="m", alongside=lambda: ran.append("b"))
        assert not c.replayed
        gate.set()

    c = a.charge("alice", "adult", PureDP(Fraction(1, 4)), request_id="key-1", query="q",
                 mechanism="m", alongside=a_work)
    assert c.replayed and ran == ["a", "b"]
    assert a.status("alice", "adult").charges == 1
    a.close()
    b.close()
