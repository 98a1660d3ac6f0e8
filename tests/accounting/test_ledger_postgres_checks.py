"""PostgreSQL: a ledger whose unique indexes refuse nothing is refused at open, and an
opening that waits for another session's creation says so (review 50)."""

from __future__ import annotations

import uuid

import pytest

from statcurator.core.errors import LedgerError


def test_opening_while_another_session_creates_the_ledger_says_it_waited(pg_dsn):
    """lock_timeout (09188f5) also bounds _migrate's pg_advisory_xact_lock: a process
    opening the ledger while another one holds the creator's lock (creating it, or a
    transaction that takes it) now gives up after timeout= -- fine -- but with the message
    and remedy of a missing right ('check the role's rights to create tables'), which sends
    the operator after GRANTs instead of the other session."""
    import psycopg

    from statcurator.accounting import PostgresBackend

    schema = f"t{uuid.uuid4().hex[:12]}"
    raw = psycopg.connect(pg_dsn)                        # a creator in progress
    raw.execute("SELECT pg_advisory_xact_lock(hashtext(%s))",
                (f"statcurator ledger {schema}",))
    try:
        with pytest.raises(LedgerError) as e:
            PostgresBackend(pg_dsn, schema=schema, timeout=1)
    finally:
        raw.rollback()
        raw.close()
    text = str(e.value)
    assert "rights" not in text and ("lock" in text or "retry" in text), text


@pytest.mark.parametrize("definition", ["(seq)", "(analyst, request_id) WHERE false"])
def test_a_unique_index_that_refuses_nothing_is_refused_at_open_pg(pg_dsn, definition):
    """The same name-only check on PostgreSQL."""
    import psycopg

    from statcurator.accounting import Ledger, LedgerTamperedError, PostgresBackend

    schema = f"t{uuid.uuid4().hex[:12]}"
    Ledger(backend=PostgresBackend(pg_dsn, schema=schema)).close()
    with psycopg.connect(pg_dsn, autocommit=True) as raw:
        raw.execute(f'DROP INDEX "{schema}".ledger_charge_ids')
        raw.execute(f'CREATE UNIQUE INDEX ledger_charge_ids ON "{schema}".ledger {definition}')
    with pytest.raises(LedgerTamperedError, match="unique index"):
        Ledger(backend=PostgresBackend(pg_dsn, schema=schema)).close()
    with psycopg.connect(pg_dsn, autocommit=True) as raw:  # control: put back, it opens
        raw.execute(f'DROP INDEX "{schema}".ledger_charge_ids')
        raw.execute(f'CREATE UNIQUE INDEX ledger_charge_ids ON "{schema}".ledger '
                    "(analyst, request_id) WHERE type = 'charge'")
    Ledger(backend=PostgresBackend(pg_dsn, schema=schema)).close()
