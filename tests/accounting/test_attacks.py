"""The budget attacks of issue 7 §2 against the curator, each with a control that shows the
attack succeeding when the protection is taken away (so that these tests can fail)."""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa
import pytest

from statcurator.accounting import NoBudgetError
from statcurator.core.errors import BudgetExceededError, InvalidParameterError
from statcurator.core.measures import PureDP
from statcurator.core.schema import Column, TableMeta
from statcurator.curator import DEFAULT_DATASET_BUDGET, Curator

META = TableMeta("t", (Column("id", type="integer", bounds=(0, 100)),
                       Column("bit", type="integer", bounds=(0, 1))))
COUNT = "SELECT COUNT(*) AS n FROM t WHERE bit = 1"


def _curator(bits: list[int], budget: object = None, **kw) -> Curator:
    cur = Curator(engine="memory", **kw)
    cur.register("t", pa.table({"id": list(range(len(bits))), "bit": bits}), META,
                 budget=budget)
    return cur


def _spend_as_many_names(cur: Curator, names: list[str], epsilon: Fraction) -> int:
    answered = 0
    for name in names:
        try:
            cur.sql(COUNT).release(epsilon=epsilon, analyst=name)
            answered += 1
        except (BudgetExceededError, InvalidParameterError):
            pass
    return answered


@pytest.mark.slow
def test_two_thousand_names_spend_at_most_the_dataset_budget():
    """Regression (issue 7 §2): 2,000 names each got a fresh ε=1 and spent ε=2,000 on one
    dataset. Now the default grants are capped by the dataset-wide budget (ε=10)."""
    cur = Curator(engine="memory")
    cur.register("t", pa.table({"id": [0, 1], "bit": [0, 1]}), META)
    names = [f"analyst{i}" for i in range(2000)]
    answered = _spend_as_many_names(cur, names, Fraction(1))
    assert answered == 10 == DEFAULT_DATASET_BUDGET.epsilon
    assert cur.dataset_budget("t").exhausted
    # Control: with an uncapped dataset budget the same names spend ε=1 each.
    uncapped = Curator(engine="memory")
    uncapped.register("t", pa.table({"id": [0, 1], "bit": [0, 1]}), META,
                      budget=PureDP(10**6))
    assert _spend_as_many_names(uncapped, names[:200], Fraction(1)) == 200


def test_spellings_and_look_alikes_of_a_name_get_no_fresh_budget():
    """Regression (issue 7 §2): after 'alice' was exhausted, 'Alice', 'alice ', Cyrillic
    'аlice' and 'alice\\u200b' each got a fresh ε=1."""
    cur = Curator(engine="memory")
    cur.register("t", pa.table({"id": [0, 1], "bit": [0, 1]}), META)
    assert _spend_as_many_names(cur, ["alice"], Fraction(1)) == 1
    disguises = ["Alice", "alice ", "ALICE", "\u0430lice", "alice\u200b", "al\u00adice",
                 "ａｌｉｃｅ", "a\u202elice"]
    assert _spend_as_many_names(cur, disguises, Fraction(1)) == 0
    assert cur.dataset_budget("t").spent.epsilon == 1


def test_a_persistent_curator_grants_nothing_implicitly(tmp_path):
    cur = Curator(engine="memory", ledger=tmp_path / "l.db")
    cur.register("t", pa.table({"id": [0], "bit": [1]}), META)
    with pytest.raises(NoBudgetError, match="no dataset-wide privacy budget") as info:
        cur.sql(COUNT).release(epsilon=1, analyst="alice")
    assert "statcurator budget set --dataset t --epsilon" in str(info.value)
    cur.set_dataset_budget("t", epsilon=5)
    with pytest.raises(NoBudgetError, match="analyst 'alice' has no privacy budget") as info:
        cur.sql(COUNT).release(epsilon=1, analyst="alice")
    assert "statcurator budget set --dataset t --analyst alice" in str(info.value)
    cur.set_budget("alice", "t", epsilon=1)
    assert cur.sql(COUNT).release(epsilon=1, analyst="Alice").rows()
    with pytest.raises(InvalidParameterError, match="no implicit budgets"):
        Curator(engine="memory", ledger=tmp_path / "l.db", default_budget=PureDP(1))
    assert cur.ledger.counts()["charges"] == 1
    cur.close()


def _differencing(bit: int, analysts: int, budget: object, epsilon: Fraction,
                  grant: object = None) -> int:
    """Colluding analysts each ask 'how many have bit 1' and 'how many but the target have
    bit 1' at ``epsilon`` each, as long as the curator answers; they guess the target's bit
    from the averaged difference. Returns 1 when the guess is right."""
    others = [0, 1, 1, 0, 1]
    cur = _curator([bit, *others], budget=budget,
                   **({} if grant is None else {"default_budget": grant}))
    diffs: list[int] = []
    for a in range(analysts):
        try:
            everyone = cur.sql(COUNT).release(epsilon=epsilon, analyst=f"a{a}")
            rest = cur.sql(COUNT + " AND id <> 0").release(epsilon=epsilon, analyst=f"a{a}")
        except BudgetExceededError:
            break
        diffs.append(everyone.rows()[0]["n"] - rest.rows()[0]["n"])
    guess = int(sum(diffs) / len(diffs) > Fraction(1, 2)) if diffs else 0
    cur.close()
    return int(guess == bit)


@pytest.mark.slow
def test_colluding_analysts_learn_no_more_than_the_dataset_budget_allows():
    """Issue 7 §2: 2,000 names learned one person's secret bit exactly by differencing. With
    a dataset-wide budget of ε=1/2 the whole interaction is (1/2)-DP for the target, so no
    test guesses the bit with probability above e^ε/(1+e^ε) ≈ 0.622, however many analysts
    collude. Over T=200 trials with a uniform secret bit the success count is at most
    Binomial(200, 0.622); the threshold 0.79 is 4.9 standard deviations above the bound
    (false failure < 1e-6). The control — no cap, ε=4 per query, 10 analysts — succeeds
    with probability ≈ 0.999 per trial; 40 trials fall below 0.9 with probability < 1e-9."""
    from statcurator.mechanisms import rng

    trials = 200
    bits = [rng.random_bytes(1)[0] & 1 for _ in range(trials)]
    wins = sum(_differencing(b, 100, PureDP(Fraction(1, 2)), Fraction(1, 4)) for b in bits)
    assert wins / trials <= 0.79, wins
    control = sum(_differencing(b, 10, PureDP(10**3), Fraction(4), grant=PureDP(100))
                  for b in bits[:40])
    assert control / 40 > 0.9, control
