"""The engine runs the relation the noise was calibrated for, even with concurrent registers.

Finding: ``Query.release`` compiled the query (join stabilities, bounds, key sets: all read
from the catalog), charged the ledger, and only then ran the engine — on whatever was
registered by then. A ``register_public`` between the two (another thread of the service,
the data owner refreshing a lookup table) made the engine join a public table whose key
repeats 50 times, while the noise was calibrated for a unique key: a sensitivity 50 times too
small. The release now holds the curator's lock from the compilation to the engine run, the
lock ``register`` takes.
"""

from __future__ import annotations

import threading
import time

import pyarrow as pa

from statcurator.core.schema import Column, TableMeta

from .conftest import make_curator


def test_a_register_during_a_release_waits_for_the_engine():
    cur = make_curator("duckdb", pa.table({"x": [1]}), TableMeta("t", (Column("x", type="integer"),)),
                       budget=100)
    cur.register_public("p", pa.table({"k": [1]}))
    q = cur.sql("SELECT COUNT(*) AS n FROM t JOIN p ON t.x = p.k")
    charge = cur.ledger.charge
    threads = []

    def charge_then_race(*args, **kwargs):
        # while the release is between its compilation and the engine run, someone replaces
        # the public table by one whose join key repeats 50 times
        t = threading.Thread(target=cur.register_public, args=("p", pa.table({"k": [1] * 50})))
        t.start()
        threads.append(t)
        time.sleep(0.3)
        return charge(*args, **kwargs)

    cur.ledger.charge = charge_then_race
    rel = q.release(epsilon=20, analyst="eve")
    for t in threads:
        t.join()
    # calibrated for stability 1 (scale 1/20): the engine must have joined the unique key
    assert abs(rel.rows()[0]["n"] - 1) <= 2
    assert q.compile().stability == 50         # the next release sees the new table
