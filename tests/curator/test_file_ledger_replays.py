"""On a file ledger, a replay right after its release (its answer still being written
behind it) is read and replayed, and never reaches the engine (review 49)."""

from __future__ import annotations

from statcurator import Curator
from statcurator.core.measures import PureDP

from .conftest import DIABETES_META, SpyEngine

COUNT_Y = "SELECT COUNT(*) AS n FROM diabetes WHERE Diabetes = 'Y'"


def test_a_replay_on_a_file_ledger_never_reaches_the_engine(diabetes_csv, tmp_path):
    spy = SpyEngine()
    cur = Curator(engine=spy, ledger=tmp_path / "l.db")
    cur.register("diabetes", diabetes_csv, DIABETES_META, budget=PureDP(100))
    cur.set_budget("gina", "diabetes", PureDP(10))
    q = cur.sql(COUNT_Y)
    first = q.release(epsilon=1, analyst="gina", request_id="req-1")
    second = q.release(epsilon=1, analyst="gina", request_id="req-1")
    assert second.replayed and not first.replayed
    assert second.rows() == first.rows()
    cur.close()
    assert spy.calls == 1, f"the replay ran the engine on the data: {spy.calls} runs"
