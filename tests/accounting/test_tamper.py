"""Tampering with the ledger's storage is detected (SQLite file and PostgreSQL), each attack
with a control showing what it would have achieved without the hash chain."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.accounting import Ledger, LedgerTamperedError
from statcurator.accounting import _ledger as ledger_module
from statcurator.accounting._backend import LedgerEntry
from statcurator.accounting._chain import digest
from statcurator.core.errors import BudgetExceededError, InvalidParameterError, LedgerError
from statcurator.core.measures import PureDP

from .conftest import Store

KEY = b"k" * 32


def _spend_all(store: Store, **kw) -> None:
    """alice spends her whole grant of ε=1 in two charges (rows 4 and 5)."""
    with store.open(**kw) as led:
        led.set_dataset_budget("adult", PureDP(10))
        led.set_budget("alice", "adult", PureDP(1))
        for rid in ("r1", "r2"):
            led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id=rid, query="q",
                       mechanism="m")


def _unverified(monkeypatch) -> None:
    """The control: a ledger that trusts its storage (no chain verification)."""
    from statcurator.accounting._chain import Verification

    monkeypatch.setattr(ledger_module.Ledger, "_verify", lambda self, audit, anchor=None:
                        Verification(self.location, 0, "", False, "", audit))
    monkeypatch.setattr(ledger_module.Ledger, "_refuse_problems", lambda self: None)
    monkeypatch.setattr(ledger_module, "digest", lambda row, key: row.hash)


def test_a_refund_by_rewriting_the_last_charge_is_detected(persistent_store: Store,
                                                           monkeypatch):
    """Drop the triggers, rewrite alice's running total to 'nothing spent', put the
    triggers back: the refund works on a ledger that trusts its rows, and is caught here."""
    _spend_all(persistent_store)
    persistent_store.rewrite("UPDATE ledger SET grant_spent = 'pure:0/1', grant_charges = 0, "
                             "dataset_spent = 'pure:0/1' WHERE seq = 5")
    with pytest.raises(LedgerTamperedError, match="at row 5") as info:
        persistent_store.open()
    assert info.value.row == 5 and "restored from a trusted backup" in str(info.value)
    # Control: without the chain the refund goes through and alice spends again.
    _unverified(monkeypatch)
    with persistent_store.open() as trusting:
        assert trusting.status("alice", "adult").remaining == PureDP(1)
        trusting.charge("alice", "adult", PureDP(1), request_id="r3", query="q", mechanism="m")


def test_a_row_rewritten_under_an_open_ledger_is_detected(persistent_store: Store,
                                                         monkeypatch):
    """The ledger object that read (and checked) alice's last charge decides her next charge
    from that row while it is still the ledger's head: a rewrite behind its back refunds
    nothing to it (the charge is refused), and the rewrite is a changed row, hashed again
    and refused wherever the row is read — its own audit, a write that reads it in full,
    any ledger opened on the store. Control: a ledger that trusts its rows lets alice
    spend the refunded budget."""
    _spend_all(persistent_store)
    with persistent_store.open() as led:
        assert led.status("alice", "adult").remaining == PureDP(0)  # row 5 read and checked
        persistent_store.rewrite("UPDATE ledger SET grant_spent = 'pure:0/1', "
                                 "grant_charges = 0, dataset_spent = 'pure:0/1' WHERE seq = 5")
        with pytest.raises(BudgetExceededError):
            led.charge("alice", "adult", PureDP(1), request_id="r3", query="q", mechanism="m")
        with pytest.raises(LedgerTamperedError, match="at row 5"):
            led.verify()
        with pytest.raises(LedgerTamperedError, match="at row 5"):
            led.set_budget("bob", "adult", PureDP(1))  # reads the dataset's row 5 in full
    with pytest.raises(LedgerTamperedError, match="at row 5"):
        persistent_store.open()
    _unverified(monkeypatch)
    with persistent_store.open() as trusting:
        trusting.charge("alice", "adult", PureDP(1), request_id="r3", query="q", mechanism="m")



@pytest.mark.parametrize("keyed", [False, True])
def test_rows_cut_after_an_audit_are_found_by_the_next_charge(persistent_store: Store,
                                                              monkeypatch, keyed: bool):
    """Review helper-42, finding 1: a long-lived ledger object (a service's) charges alice
    half her grant; another process charges the other half; an admin's audit through the
    first object counts the 5 rows; then the attacker cuts row 5 off the end. The object
    remembers only its own row 4 as the head, which the store shows again: the rows must be
    read (the audit saw further), and the cut is refused as a shrunk ledger instead of
    refunding r2. Control: a ledger that trusts its storage spends the refunded half."""
    kw = {"key": KEY} if keyed else {}

    def attack() -> Ledger:
        a = persistent_store.open(**kw)
        a.set_dataset_budget("adult", PureDP(10))
        a.set_budget("alice", "adult", PureDP(1))
        a.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r1", query="q",
                 mechanism="m")
        with persistent_store.open(**kw) as b:
            b.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r2", query="q",
                     mechanism="m")
        a.verify()  # the audit counts 5 rows (the control's trusts the store: none)
        persistent_store.rewrite("DELETE FROM ledger WHERE seq = 5")
        return a

    a = attack()
    with pytest.raises(LedgerTamperedError, match="shrank from 5 rows to 4"):
        a.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r3", query="q",
                 mechanism="m")
    a.close()
    _unverified(monkeypatch)  # the control, on a new ledger in the same store
    persistent_store.schema = persistent_store.schema + "c"
    persistent_store.path = persistent_store.path.with_name("control.db")
    a = attack()
    a.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r3", query="q",
             mechanism="m")
    assert persistent_store.spent() == 1  # the store shows r1 and r3: r2's half refunded
    a.close()


def test_a_deleted_row_is_detected(persistent_store: Store, monkeypatch):
    _spend_all(persistent_store)
    persistent_store.rewrite("DELETE FROM ledger WHERE seq = 4")
    with pytest.raises(LedgerTamperedError, match="row 4 is missing"):
        persistent_store.open()
    _unverified(monkeypatch)
    with persistent_store.open() as trusting:   # control: the gap goes unnoticed
        assert [c.request_id for c in trusting.charges()] == ["r2"]


def test_rows_cut_under_an_open_ledger_stop_it_even_when_it_stores_an_answer(
        persistent_store: Store):
    """The newest rows are cut while a ledger object is open, with a charge of its own
    awaiting its answer: storing that answer (written without a read when nothing changed)
    and every later charge refuse service; nothing is appended after the cut, so the
    budget spent before it cannot be spent again."""
    led = persistent_store.open()
    led.set_dataset_budget("adult", PureDP(10))
    led.set_budget("alice", "adult", PureDP(1))

    def charge(rid: str):
        return led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id=rid,
                          query="q", mechanism="m")

    charge("r0")
    led.store_answer("alice", "r0", "a0")
    charge("r1")                                   # rows 4, 5, 6; r1 awaits its answer
    persistent_store.rewrite("DELETE FROM ledger WHERE seq >= 4")
    led.store_answer("alice", "r1", "a1")          # handed to the writer thread
    with pytest.raises(LedgerTamperedError, match="shrank from 6 rows to 3"):
        led.flush()                                # its append refused; the read finds the cut
    with pytest.raises(LedgerTamperedError, match="shrank"):
        charge("r2")
    assert [seq for (seq,) in persistent_store.sql("SELECT seq FROM ledger")] == [1, 2, 3]
    led.close()


def _cut_while_an_answer_is_in_flight(store: Store, *, weak: bool, monkeypatch) -> Ledger:
    """alice's charge r1 is cut off the ledger while her ledger object's writer thread holds
    its answer (not appended yet); then her next charge is decided right after that answer,
    from the rows the object remembers. ``weak``: that charge appended at its position
    without the condition that the answer is the row before it."""
    import threading

    led = store.open()
    led.set_dataset_budget("adult", PureDP(10))
    led.set_budget("alice", "adult", PureDP(1))
    led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r1", query="q",
               mechanism="m")                                       # row 4
    gate = threading.Event()
    led._submit(gate.wait)                                          # holds the writer
    led.store_answer("alice", "r1", "a1")                           # waits behind it
    store.rewrite("DELETE FROM ledger WHERE seq >= 4")              # the spent ε=1/2 cut
    if weak:
        monkeypatch.setattr(ledger_module.Ledger, "_append_after",
                            lambda self, row, head: self._backend.append(row))
    try:
        led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r2", query="q",
                   mechanism="m", alongside=gate.set, new_id=True)
    finally:
        gate.set()
    return led


def test_rows_cut_while_an_answer_is_in_flight_stop_the_charge_decided_after_it(
        persistent_store: Store, tmp_path, monkeypatch):
    """A charge decided without a read, right after an answer the writer thread has not
    appended yet, is appended only if that answer is then the last row. The newest rows
    were cut meanwhile: neither the answer nor the charge goes in, the read that follows
    finds the ledger shrank, and nothing is appended after the cut. Control: appended
    without that condition, the charge goes in after the cut."""
    with pytest.raises(LedgerTamperedError, match="shrank"):
        _cut_while_an_answer_is_in_flight(persistent_store, weak=False,
                                          monkeypatch=monkeypatch)
    assert [seq for (seq,) in persistent_store.sql("SELECT seq FROM ledger")] == [1, 2, 3]
    (tmp_path / "weak").mkdir()
    control = Store(persistent_store.kind, tmp_path / "weak", persistent_store.dsn)
    led = _cut_while_an_answer_is_in_flight(control, weak=True, monkeypatch=monkeypatch)
    assert [seq for (seq,) in control.sql("SELECT seq FROM ledger")] == [1, 2, 3, 6]
    with pytest.raises(LedgerError, match="no charge under request id 'r1'"):
        led.close()                                 # (its answer has no charge left)


def _charged(store: Store) -> tuple[Ledger, LedgerEntry]:
    """A ledger where alice's charge r1 awaits its answer, and that charge (the last row)."""
    led = store.open()
    led.set_dataset_budget("adult", PureDP(10))
    led.set_budget("alice", "adult", PureDP(1))
    led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r1", query="q",
               mechanism="m")
    head = list(led.entries())[-1]
    return led, head


def test_an_answer_is_inserted_without_a_read_only_after_its_own_head(store: Store):
    """The backends' append_after: an answer goes in only if the row before it is the
    last row, equal in every column to the head it links to, and its charge exists (on its
    dataset); otherwise nothing is written. (The ledger then reads, checks and decides.)"""
    led, head = _charged(store)

    def answer(**change):
        fields = {"seq": head.seq + 1, "type": "answer", "analyst": "alice",
                  "dataset": "adult", "request_id": "r1", "payload": "42",
                  "at": head.at, "prev_hash": head.hash, "hash": "0" * 64, **change}
        return LedgerEntry(**fields)

    backend = led.backend
    refused = [answer(seq=head.seq + 2), answer(seq=head.seq), answer(prev_hash="1" * 64),
               answer(request_id="r2"), answer(dataset="other"), answer(analyst="bob"),
               answer(type="genesis")]
    assert [backend.append_after(e, head) for e in refused] == [False] * len(refused)
    # the head as the ledger object remembers it must be the last row in every column
    others = [replace(head, grant_spent="pure:0/1"), replace(head, query=None),
              replace(head, mechanism="m2"), replace(head, grant_charges=0),
              replace(head, at="2000-01-01T00:00:00+00:00")]
    assert [backend.append_after(answer(), h) for h in others] == [False] * len(others)
    assert len(list(led.entries())) == head.seq            # nothing was written
    assert backend.append_after(answer(), head) is True
    assert [e.type for e in led.entries()][-2:] == ["charge", "answer"]
    led.close()


def test_a_head_row_edited_in_place_stops_the_answer_written_without_a_read(
        persistent_store: Store):
    """The charge awaiting its answer is edited in place (triggers dropped and put back)
    with its hash column kept: the answer's conditional INSERT compares the whole row the
    ledger object wrote, not only the hash, so nothing is written without a read, and the
    read finds the row no longer matches its hash. Control: the hash column alone is
    unchanged, so a hash-only condition would have let the answer in."""
    led, head = _charged(persistent_store)
    persistent_store.rewrite(f"UPDATE ledger SET grant_spent = 'pure:0/1', grant_charges = 0 "
                             f"WHERE seq = {head.seq}")
    assert persistent_store.sql(f"SELECT hash FROM ledger WHERE seq = {head.seq}") \
        == [(head.hash,)]                                  # control: the hash is kept
    led.store_answer("alice", "r1", "42")
    with pytest.raises(LedgerTamperedError, match=f"at row {head.seq}"):
        led.flush()
    assert persistent_store.sql("SELECT count(*) FROM ledger WHERE type = 'answer'") == [(0,)]
    led.close()


def test_an_answer_never_fills_a_gap_cut_into_the_ledger(persistent_store: Store):
    """Rows were appended after an answer's head, then the first of them was cut: the
    position after the head is free, but it is not the end of the ledger, and the answer
    is not written there without a read."""
    led = persistent_store.open()
    led.set_dataset_budget("adult", PureDP(10))
    for who in ("alice", "bob"):
        led.set_budget(who, "adult", PureDP(1))
    led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r1", query="q",
               mechanism="m")
    head = list(led.entries())[-1]
    for rid in ("b1", "b2"):
        led.charge("bob", "adult", PureDP(Fraction(1, 4)), request_id=rid, query="q",
                   mechanism="m")
    persistent_store.rewrite(f"DELETE FROM ledger WHERE seq = {head.seq + 1}")
    gap = LedgerEntry(seq=head.seq + 1, type="answer", analyst="alice", dataset="adult",
                      request_id="r1", payload="42", at=head.at, prev_hash=head.hash,
                      hash="0" * 64)
    assert led.backend.append_after(gap, head) is False
    assert persistent_store.sql(f"SELECT count(*) FROM ledger WHERE seq = {head.seq + 1}") \
        == [(0,)]
    led.close()


def test_dropped_triggers_refuse_service(persistent_store: Store):
    _spend_all(persistent_store)
    persistent_store.drop_triggers()
    with pytest.raises(LedgerTamperedError, match="append-only trigger"):
        persistent_store.open()


@pytest.mark.parametrize("index", ["ledger_charge_ids", "ledger_answer_ids"])
def test_a_dropped_unique_index_refuses_service(persistent_store: Store, index: str):
    """The unique indexes on (analyst, request id) refuse a second charge, or a second
    answer, under one request id; a charge decided without a read right after an answer in
    flight relies on the first. Dropped, the ledger refuses to open. Control: the same index
    put back (unique), it opens."""
    _spend_all(persistent_store)
    persistent_store.sql(f"DROP INDEX {index}")
    with pytest.raises(LedgerTamperedError, match=f"unique index.*{index}.*dropped"):
        persistent_store.open()
    persistent_store.sql(f"CREATE UNIQUE INDEX {index} ON ledger (analyst, request_id) "
                         f"WHERE type = '{index.split('_')[1].rstrip('s')}'")
    with persistent_store.open() as led:
        assert led.status("alice", "adult").charges == 2


def test_deleting_the_newest_rows_is_detected_in_sqlite(tmp_path):
    """The chain of the rows that remain is intact, so SQLite's own record of the highest
    row ever written is what notices (a determined attacker can reset that too: see the
    anchor test below)."""
    store = Store("sqlite", tmp_path)
    _spend_all(store)
    store.rewrite("DELETE FROM ledger WHERE seq = 5")
    with pytest.raises(LedgerTamperedError, match="newest rows were deleted"):
        store.open()
    store.sql("UPDATE sqlite_sequence SET seq = 4 WHERE name = 'ledger'")
    with store.open() as led:          # the limit: now only an anchor kept elsewhere helps
        assert led.status("alice", "adult").remaining == PureDP(Fraction(1, 2))


def test_an_anchor_kept_elsewhere_detects_cut_rows_and_old_copies(persistent_store: Store):
    _spend_all(persistent_store)
    with persistent_store.open() as led:
        anchor = led.verify().anchor
        assert led.verify(anchor=anchor).rows == 5
    persistent_store.drop_triggers()
    persistent_store.sql("DELETE FROM ledger WHERE seq = 5")
    if persistent_store.kind == "sqlite":
        persistent_store.sql("UPDATE sqlite_sequence SET seq = 4 WHERE name = 'ledger'")
    persistent_store.restore_triggers()
    with persistent_store.open() as led, pytest.raises(LedgerTamperedError, match="anchor"):
        led.verify(anchor=anchor)


def test_an_inserted_forged_row_is_detected_with_a_key(persistent_store: Store, monkeypatch):
    """Someone who can write the database appends a grant of ε=100 for mallory. Without a
    key they can compute SHA-256 themselves, so the forgery verifies (the documented limit:
    the control); under an HMAC key it does not."""
    for key, detected in ((None, False), (KEY, True)):
        persistent_store.schema += "k"
        persistent_store.path = persistent_store.path.with_name(f"k{detected}.db")
        _spend_all(persistent_store, key=key)
        head = persistent_store.sql("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")[0]
        forged = LedgerEntry(head[0] + 1, "grant", "mallory", "adult", None, "pure", "100/1",
                             grant_total="pure:100/1", grant_spent="pure:0/1", grant_charges=0,
                             at="2024-01-01T00:00:00+00:00", prev_hash=head[1])
        forged_hash = digest(forged, None)       # the attacker does not know the key
        persistent_store.sql(f"INSERT INTO ledger VALUES ({', '.join('?' * 21)})",
                             (*forged.values()[:-1], forged_hash))
        if detected:
            with pytest.raises(LedgerTamperedError, match=f"at row {head[0] + 1}"):
                persistent_store.open(key=key)
        else:
            with persistent_store.open() as led:
                assert led.status("mallory", "adult").total == PureDP(100)


def test_a_truncated_file_is_refused(tmp_path):
    store = Store("sqlite", tmp_path)
    _spend_all(store)
    size = store.path.stat().st_size
    with open(store.path, "r+b") as f:
        f.truncate(size // 2)
    with pytest.raises(LedgerError):
        store.open()


def test_deleting_the_file_resets_the_ledger_unless_an_anchor_says_otherwise(tmp_path):
    """The documented limit: a new file is a new, empty ledger. The anchor of the old one
    does not match it (another ledger id and fewer rows)."""
    store = Store("sqlite", tmp_path)
    _spend_all(store)
    with store.open() as led:
        anchor = led.verify().anchor
    os.remove(store.path)
    with store.open() as led:
        assert led.counts()["charges"] == 0
        with pytest.raises(LedgerTamperedError, match="anchor"):
            led.verify(anchor=anchor)


def test_keys_must_match(tmp_path):
    store = Store("sqlite", tmp_path)
    _spend_all(store, key=KEY)
    with pytest.raises(LedgerError, match="protected by a secret key"):
        store.open()
    with pytest.raises(LedgerTamperedError, match="key"):
        store.open(key=b"x" * 32)
    with store.open(key=KEY) as led:
        assert led.keyed and led.verify().keyed
    (tmp_path / "p").mkdir()
    plain = Store("sqlite", tmp_path / "p")
    _spend_all(plain)
    with pytest.raises(LedgerError, match="created without a key"):
        plain.open(key=KEY)
    with pytest.raises(InvalidParameterError, match="at least 16 bytes"):
        Ledger(key="short")


def test_the_key_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("STATCURATOR_LEDGER_KEY", "e" * 32)
    with Ledger(tmp_path / "l.db") as led:
        assert led.keyed
    monkeypatch.delenv("STATCURATOR_LEDGER_KEY")
    with pytest.raises(LedgerError, match="STATCURATOR_LEDGER_KEY"):
        Ledger(tmp_path / "l.db")


def test_verify_re_derives_the_running_totals(persistent_store: Store):
    """A row whose chain is intact but whose totals are wrong (written by a buggy or
    malicious holder of the key) fails the audit of verify()."""
    _spend_all(persistent_store, key=KEY)
    head = persistent_store.sql("SELECT seq, hash FROM ledger ORDER BY seq DESC LIMIT 1")[0]
    bad = LedgerEntry(head[0] + 1, "charge", "alice", "adult", "r9", "pure", "1/2", query="q",
                      mechanism="m", grant_total="pure:1/1", grant_spent="pure:1/2",
                      grant_charges=3, dataset_total="pure:10/1", dataset_spent="pure:3/2",
                      dataset_charges=3, at="2024-01-01T00:00:00+00:00", prev_hash=head[1])
    persistent_store.sql(f"INSERT INTO ledger VALUES ({', '.join('?' * 21)})",
                         (*bad.values()[:-1], digest(bad, KEY)))
    # The chain verifies (the ledger opens), the arithmetic does not.
    with persistent_store.open(key=KEY) as led, \
            pytest.raises(LedgerTamperedError, match="inconsistent at row 6"):
        led.verify()


# -- the canonical content: orjson writes the bytes json wrote ---------------------------------

_TEXT = st.text(alphabet=st.characters(min_codepoint=0, blacklist_categories=("Cs",)))
_FIELD = st.one_of(st.none(), st.integers(-(2**70), 2**70), _TEXT, st.floats(),
                   st.booleans())


@settings(max_examples=300, deadline=None)
@given(content=st.lists(_FIELD, max_size=20))
def test_canonical_content_is_the_standard_librarys_json(content) -> None:
    """Every existing ledger was hashed over ``json.dumps(..., ensure_ascii=False,
    separators=(",", ":"))``; the faster writer must give the same bytes for any row content
    (all control characters, non-ASCII, U+2028, integers beyond 64 bits — and the floats,
    NaN and ±∞ a tampered SQLite file can hand back where an integer belongs, which orjson
    would write as null), or old chains would no longer verify."""
    from statcurator.accounting._chain import canonical

    expected = json.dumps(tuple(content), ensure_ascii=False, separators=(",", ":"))
    assert canonical(tuple(content)) == expected.encode("utf-8")


def test_a_row_hashes_as_it_always_has() -> None:
    """A known answer, computed with the standard library's JSON before the change."""
    e = LedgerEntry(7, "charge", analyst="zoë", dataset="adult", request_id="r\u2028x",
                    kind="pure", epsilon="1/2", query='SELECT "a"\n\t\x01\x7f — ✓ 𝔸',
                    mechanism="laplace", grant_total="pure:1/1", grant_spent="pure:1/2",
                    grant_charges=3, dataset_total="pure:10/1", dataset_spent="pure:1/2",
                    dataset_charges=3, at="2026-11-26T00:00:00.000000+00:00",
                    prev_hash="ab" * 32)
    assert digest(e, None) == "08d956662ea117d627b823c6628db91dca87bf4de051ef5ececfeb89ea5c0fb2"


@pytest.mark.parametrize("forged", ["9e999", "-9e999", "1.5"])
def test_a_null_replaced_by_a_real_is_detected_with_a_key(tmp_path, forged) -> None:
    """SQLite lets a REAL into an INTEGER column. A NULL running count (an answer row's)
    rewritten to +∞, -∞ or 1.5 must break the keyed chain: orjson would write ±∞ as null,
    the hash of the untouched row (helper-22's finding; rows of other types are hashed with
    json, as always)."""
    store = Store("sqlite", tmp_path)
    with store.open(key=KEY) as led:
        led.set_dataset_budget("adult", PureDP(10))
        led.set_budget("alice", "adult", PureDP(1))
        led.charge("alice", "adult", PureDP(Fraction(1, 2)), request_id="r1", query="q",
                   mechanism="m")
        led.store_answer("alice", "r1", '{"n": 1}')
        (seq,) = [e.seq for e in led.entries() if e.type == "answer"]
    store.rewrite((f"UPDATE ledger SET grant_charges = {forged} WHERE seq = ?", (seq,)))
    assert store.sql("SELECT typeof(grant_charges) FROM ledger WHERE seq = ?", (seq,)) == [
        ("real",)]
    with pytest.raises(LedgerTamperedError, match=f"at row {seq}"):
        store.open(key=KEY)


def test_a_blob_where_text_belongs_is_a_tampered_row(tmp_path) -> None:
    """A value no ledger could have hashed (bytes in a text column) is reported as a
    tampered row, not as a crash of the hash function."""
    store = Store("sqlite", tmp_path)
    _spend_all(store)
    store.rewrite("UPDATE ledger SET query = X'00ff' WHERE seq = 5")
    with pytest.raises(LedgerTamperedError, match="at row 5"):
        store.open()
