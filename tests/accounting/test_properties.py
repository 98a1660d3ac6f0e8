"""Property-based tests: no interleaving of charges and refusals ever makes ``spent`` exceed
``total``, and ``spent`` is always the exact sum of the accepted charges."""

from __future__ import annotations

import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    precondition,
    rule,
)

from statcurator.accounting import Accountant, Ledger
from statcurator.core.errors import BudgetExceededError
from statcurator.core.measures import ZCDP, ApproxDP, PureDP

fractions = st.fractions(min_value=Fraction(1, 1000), max_value=Fraction(3, 2),
                         max_denominator=1000)
deltas = st.fractions(min_value=Fraction(0), max_value=Fraction(1, 10**4),
                      max_denominator=10**7)

# (budget, strategy of charges it accepts, the price of a charge in the budget's currency),
# the conversions written out here independently of the ledger's own code.
CURRENCIES = {
    "pure": (lambda t: PureDP(t),
             fractions.map(PureDP),
             lambda c: (c.epsilon,)),
    "approx": (lambda t: ApproxDP(t, Fraction(1, 10**4)),
               st.one_of(fractions.map(PureDP), st.builds(ApproxDP, fractions, deltas)),
               lambda c: (c.epsilon, getattr(c, "delta", Fraction(0)))),
    "zcdp": (lambda t: ZCDP(t),
             st.one_of(fractions.map(PureDP), fractions.map(ZCDP)),
             lambda c: (c.rho,) if isinstance(c, ZCDP) else (c.epsilon ** 2 / 2,)),
}


def _fits(spent, price, total) -> bool:
    return all(s + p <= t for s, p, t in zip(spent, price, total, strict=True))


@st.composite
def scenarios(draw):
    kind = draw(st.sampled_from(sorted(CURRENCIES)))
    make_total, charges, _ = CURRENCIES[kind]
    total = make_total(draw(st.fractions(min_value=Fraction(1, 10), max_value=5,
                                         max_denominator=100)))
    return kind, total, draw(st.lists(charges, max_size=40))


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(scenarios())
def test_accountant_and_ledger_agree_with_an_exact_model(scenario):
    kind, total, charges = scenario
    price_of = CURRENCIES[kind][2]
    limit = price_of(total) if kind != "approx" else (total.epsilon, total.delta)
    acc, led = Accountant(total), Ledger()
    led.set_dataset_budget("d", total)                 # both budgets bind at the same point
    led.set_budget("a", "d", total)
    spent = tuple(Fraction(0) for _ in limit)
    accepted = 0
    for i, cost in enumerate(charges):
        price = price_of(cost)
        expect = _fits(spent, price, limit)
        assert acc.can_spend(cost) == led.can_spend("a", "d", cost) == expect
        try:
            acc.spend(cost)
            ok_acc = True
        except BudgetExceededError:
            ok_acc = False
        try:
            led.charge("a", "d", cost, request_id=str(i), query="q", mechanism="m")
            ok_led = True
        except BudgetExceededError:
            ok_led = False
        assert ok_acc == ok_led == expect
        if expect:
            spent = tuple(s + p for s, p in zip(spent, price, strict=True))
            accepted += 1
        status = led.status("a", "d")
        assert status.spent == acc.spent
        assert status.spent.fits(status.total)
        assert _components(status.spent) == spent
        assert _components(status.remaining) == tuple(t - s for t, s in zip(limit, spent,
                                                                           strict=True))
        assert status.charges == acc.charges == accepted == len(led.charges())
        assert led.dataset_status("d") == status
    led.verify()
    led.close()


def _components(loss):
    if isinstance(loss, ZCDP):
        return (loss.rho,)
    if isinstance(loss, ApproxDP):
        return (loss.epsilon, loss.delta)
    return (loss.epsilon,)


class SharedLedger(RuleBasedStateMachine):
    """Two ledger objects (two connections, as two processes would have) on one file,
    charging two grants under one dataset-wide budget in any interleaving, with replays and
    increases of either kind of budget."""

    requests = Bundle("requests")

    @initialize(totals=st.tuples(fractions, fractions), cap=fractions)
    def open_ledger(self, totals, cap):
        self._dir = tempfile.TemporaryDirectory()
        path = Path(self._dir.name) / "l.db"
        self.handles = [Ledger(path), Ledger(path)]
        self.pairs = [("alice", "adult"), ("bob", "adult")]
        self.totals = dict(zip(self.pairs, totals, strict=True))
        self.spent = dict.fromkeys(self.pairs, Fraction(0))
        self.costs: dict[str, tuple[tuple[str, str], Fraction]] = {}
        self.n = 0
        self.cap = cap
        self.handles[0].set_dataset_budget("adult", PureDP(cap))
        for pair, total in self.totals.items():
            self.handles[0].set_budget(*pair, PureDP(total))

    @rule(target=requests, handle=st.integers(0, 1), pair=st.integers(0, 1), cost=fractions)
    def charge(self, handle, pair, cost):
        key = self.pairs[pair]
        self.n += 1
        rid = f"r{self.n}"
        fits = (self.spent[key] + cost <= self.totals[key]
                and sum(self.spent.values()) + cost <= self.cap)
        try:
            c = self.handles[handle].charge(*key, PureDP(cost), request_id=rid, query="q",
                                            mechanism="m")
        except BudgetExceededError:
            assert not fits
            return rid
        assert fits and not c.replayed
        self.spent[key] += cost
        self.costs[rid] = (key, cost)
        return rid

    @precondition(lambda self: self.costs)
    @rule(handle=st.integers(0, 1), rid=consumes(requests))
    def replay(self, handle, rid):
        if rid not in self.costs:
            return  # it was refused: nothing to replay
        key, cost = self.costs[rid]
        c = self.handles[handle].charge(*key, PureDP(cost), request_id=rid, query="q",
                                        mechanism="m")
        assert c.replayed and c.cost == PureDP(cost)

    @rule(handle=st.integers(0, 1), pair=st.integers(0, 1), extra=fractions)
    def raise_budget(self, handle, pair, extra):
        key = self.pairs[pair]
        self.totals[key] += extra
        self.handles[handle].set_budget(*key, PureDP(self.totals[key]))

    @rule(handle=st.integers(0, 1), extra=fractions)
    def raise_dataset_budget(self, handle, extra):
        self.cap += extra
        self.handles[handle].set_dataset_budget("adult", PureDP(self.cap))

    @invariant()
    def spent_is_the_exact_sum_and_never_exceeds_the_total(self):
        if not hasattr(self, "handles"):
            return
        for handle in self.handles:
            for key in self.pairs:
                status = handle.status(*key)
                assert status.spent == PureDP(self.spent[key])
                assert status.total == PureDP(self.totals[key])
                assert status.spent.epsilon <= status.total.epsilon
            data = handle.dataset_status("adult")
            assert data.spent == PureDP(sum(self.spent.values()))
            assert data.total == PureDP(self.cap) and data.spent.epsilon <= self.cap

    def teardown(self):
        if hasattr(self, "handles"):
            self.handles[0].verify()
            for h in self.handles:
                h.close()
            self._dir.cleanup()


TestSharedLedger = pytest.mark.slow(SharedLedger.TestCase)
TestSharedLedger.settings = settings(max_examples=30, stateful_step_count=30, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow])
