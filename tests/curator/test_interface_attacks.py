"""The query-interface attacks of the literature against the curator (issue 7, finding 6).

Each attack runs against the curator and must fail; the same attack against an interface
without the protection (the control) must succeed, so every test can fail. The attacks are
the attack lab's own (:mod:`statcurator.attacks.queries`); the curator answers through
``Query.release`` with its ledger, dataset-wide budget and all.
"""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from scipy import stats

from statcurator.attacks.queries import Averaging, Differencing, NaiveInterface, Reconstruction
from statcurator.core.errors import BudgetExceededError
from statcurator.core.measures import PureDP
from statcurator.core.schema import Column, TableMeta
from statcurator.curator import Curator
from statcurator.testing.dp import check_dp

pytestmark = pytest.mark.slow

META = TableMeta("t", (Column("id", type="integer"),
                       Column("secret", type="integer", bounds=(0, 1)),
                       Column("x", type="real", bounds=(0, 1))))


def secrets(n: int, seed: int = 11) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2, n)


def curator(bits: np.ndarray, budget: Fraction) -> Curator:
    cur = Curator()
    xs = np.random.default_rng(3).random(len(bits))
    cur.register("t", pa.table({"id": np.arange(len(bits)), "secret": bits, "x": xs}), META,
                 budget=PureDP(budget))
    cur.set_budget("mallory", "t", PureDP(budget))
    return cur


def subset_oracle(cur: Curator, epsilon: Fraction):
    def answer(rows: np.ndarray) -> float:
        ids = ", ".join(str(int(i)) for i in rows)
        sql = f"SELECT SUM(secret) AS s FROM t WHERE id IN ({ids})"
        return float(cur.sql(sql).release(epsilon=epsilon, analyst="mallory")["s"][0])
    return answer


# -- reconstruction (Dinur–Nissim) --------------------------------------------------------------

N = 200


def test_reconstruction_under_the_dataset_budget_learns_no_more_than_dp_allows():
    """With ε = 1/2 for the whole dataset, changing one secret bit (a change: two add/remove
    steps) moves any output distribution by at most e^(2·1/2) = e: no attacker recovers a bit
    with probability above e/(1+e) ≈ 0.731. The bound is on the expected rate; the test
    allows 5 standard deviations of a fair per-bit guess over N = 200 bits (0.177) above it,
    and is still far from the control's 95%."""
    bits = secrets(N)
    cur = curator(bits, Fraction(1, 2))
    risk = Reconstruction(queries=4 * N, seed=5).run(
        subset_oracle(cur, Fraction(1, 200)), N, truth=bits)
    assert risk.measures["queries answered"] == 100          # the budget, not the attacker,
    assert risk.measures["queries refused"] == 4 * N - 100   # decides how many answers
    assert cur.dataset_budget("t").remaining == PureDP(0)
    bound = np.e / (1 + np.e)
    assert risk.rate <= bound + 5 * 0.5 / np.sqrt(N), risk.rate


def test_control_reconstruction_without_a_budget_recovers_the_column():
    bits = secrets(N)
    # tiny fresh noise per query (ε = 5 each: scale 0.2) and no total: the LP decoder wins
    risk = Reconstruction(queries=4 * N, seed=5).run(
        NaiveInterface(bits, "laplace", epsilon=5), N, truth=bits)
    assert risk.rate >= 0.95, risk.rate


# -- averaging ---------------------------------------------------------------------------------

COUNT_SQL = "SELECT COUNT(*) AS n FROM t WHERE secret = 1"


def test_averaging_is_capped_by_the_budget_and_replays_are_the_stored_answer():
    bits = secrets(50)
    cur = curator(bits, Fraction(2))
    q = cur.sql(COUNT_SQL)
    first = q.release(epsilon=Fraction(1, 10), analyst="mallory", request_id="same")
    for _ in range(100):  # the same request: the stored answer, no new noise, no new cost
        again = q.release(epsilon=Fraction(1, 10), analyst="mallory", request_id="same")
        assert again.replayed and again["n"] == first["n"]
    assert cur.budget("mallory", "t").spent == PureDP(Fraction(1, 10))
    # variants of the text are new queries: each one is charged
    variants = [COUNT_SQL + " AND 1 = 1", COUNT_SQL.replace("COUNT(*)", "COUNT(1)"),
                COUNT_SQL.replace(" AS n", " AS m"), COUNT_SQL.replace(" ", "  "),
                COUNT_SQL.lower()]
    for sql in variants:
        cur.sql(sql).release(epsilon=Fraction(1, 10), analyst="mallory")
    assert cur.budget("mallory", "t").spent == PureDP(Fraction(6, 10))
    # fresh repeats until the dataset budget (ε = 2) is spent: 14 more answers, then refusal
    risk = Averaging(repeats=1000).run(
        lambda _: cur.sql(COUNT_SQL).release(epsilon=Fraction(1, 10), analyst="mallory")["n"][0],
        [COUNT_SQL], truth=[int(bits.sum())])
    assert risk.measures["mean answers obtained"] == 14
    assert cur.dataset_budget("t").remaining == PureDP(0)
    with pytest.raises(BudgetExceededError):
        cur.sql(COUNT_SQL).release(epsilon=Fraction(1, 10), analyst="someone-else")


def test_control_averaging_fresh_noise_without_a_budget_recovers_the_count():
    """Fresh ε = 0.1 noise per answer (sd 14.1), 20,000 answers: the mean's sd is 0.1, so the
    rounded mean is the exact count except with probability 6e-7."""
    bits = secrets(50)
    iface = NaiveInterface(bits, "laplace", epsilon=Fraction(1, 10))
    risk = Averaging(repeats=20_000).run(lambda _: iface(None), ["count"], truth=[bits.sum()])
    assert risk.rate == 1.0


# -- differencing -------------------------------------------------------------------------------

def difference_sampler(rows: np.ndarray, epsilon: Fraction):
    """Draws of "count with everyone" − "count without id 0" from the curator's own
    mechanisms (each query at ε/2: the pair costs ε)."""
    cur = curator(rows, Fraction(100))
    both = [cur.sql("SELECT SUM(secret) AS s FROM t"),
            cur.sql("SELECT SUM(secret) AS s FROM t WHERE id <> 0")]
    bound = [q.bind(epsilon / 2) for q in both]
    exact = [cur.engine.execute(q.compile().engine_plan, salt="0") for q in both]

    def sample(n: int) -> np.ndarray:
        a = [float(r.point(both[0].plan.outputs[0].expr, 0))
             for r in bound[0].noise_many(exact[0], n)]
        b = [float(r.point(both[1].plan.outputs[0].expr, 0))
             for r in bound[1].noise_many(exact[1], n)]
        return np.array(a) - np.array(b)

    return sample


def test_differencing_reveals_no_more_than_the_charged_epsilon():
    # neighbours: the target (id 0) has the secret, or is absent (its row removed)
    eps = Fraction(1)
    with_target = secrets(30)
    with_target[0] = 1
    without = with_target.copy()
    without[0] = 0  # a row contributing 0 to both sums: the same outputs as its absence
    result = check_dp(difference_sampler(with_target, eps), difference_sampler(without, eps),
                      eps, trials=50_000)  # false failure: 1e-6 (check_dp's alpha)
    assert result.passed, result


def test_control_differencing_exact_answers_reveal_the_bit():
    bits = secrets(30)
    iface = NaiveInterface(bits)
    risk = Differencing().run(lambda t: iface(None) if t is None else iface(None, exclude=t),
                              list(range(30)), truth=bits)
    assert risk.rate == 1.0


# -- timing ----------------------------------------------------------------------------------------

def release_times(cur_a: Curator, cur_b: Curator, sql: str, runs: int) -> tuple[list, list]:
    ta, tb = [], []
    for i in range(runs):  # interleaved, so that the machine's load hits both alike
        for cur, out in ((cur_a, ta), (cur_b, tb)) if i % 2 else ((cur_b, tb), (cur_a, ta)):
            start = time.perf_counter()
            cur.sql(sql).release(epsilon=Fraction(1, 1000), analyst="mallory")
            out.append(time.perf_counter() - start)
    return ta, tb


MATERIAL = float(np.log(1.10))  # a time dependence smaller than 10% is below this test's claim
#: pairs of releases per timing test: at 150 the 0.3x control reached only p = 2.5e-5 once,
#: with two test suites sharing the 2 cores (a release of ~1 ms, a leak of 0.5 ms)
PAIRS = 300


def timing_dependence(ta: list, tb: list) -> tuple[float, float]:
    """Wilcoxon's signed-rank p-value on the pairs' log-time differences, and the size of the
    dependence (the Hodges–Lehmann estimate: the median of the pairwise Walsh averages). Two
    curator instances differ by a few per cent in time whatever their data (allocation,
    connection state), which a few hundred pairs resolve; so a dependence counts only when it is
    both significant and material (≥ 10%)."""
    d = np.log(ta) - np.log(tb)
    walsh = (d[:, None] + d[None, :]) / 2
    effect = float(np.median(walsh[np.triu_indices(len(d))]))
    return float(stats.wilcoxon(d).pvalue), effect


@pytest.mark.parametrize("sql", [COUNT_SQL, "SELECT SUM(x) AS s, AVG(x) AS a FROM t "
                                            "WHERE secret = 1"])
def test_release_time_does_not_depend_on_the_secret(sql):
    """Neighbouring datasets (one row's secret differs): 300 pairs of releases, the two of a
    pair taken back to back (so that the machine's load hits both alike), and Wilcoxon's
    signed-rank test on the pairs' log-time differences finds no material (≥ 10%) dependence
    at α = 1e-6; the same test detects a dependence of 2× and of 0.3× a release's time (the
    controls). Not covered: the engine's time grows with
    the (public) table size, and quantiles' exponential-mechanism sampling time varies with
    the score profile (docs/queries.md, "What the curator does not hide")."""
    bits = secrets(500)
    other = bits.copy()
    other[0] = 1 - other[0]
    a, b = curator(bits, Fraction(10)), curator(other, Fraction(10))
    ta, tb = release_times(a, b, sql, PAIRS)
    p, effect = timing_dependence(ta, tb)
    assert p > 1e-6 or abs(effect) < MATERIAL, (np.median(ta), np.median(tb), p, effect)


@pytest.mark.parametrize("share", [2.0, 0.3])
def test_control_a_timing_leak_is_detected_by_the_same_test(monkeypatch, share):
    """A leak of `share` times a release's own time (measured first, so that the control
    holds on a loaded machine, where a release takes longer and a fixed delay is relatively
    smaller) — 30% is three times the 10% the test calls material."""
    bits = secrets(500)
    other = bits.copy()
    other[0] = 1 - other[0]
    leaky_cur = curator(bits, Fraction(10))
    plain_cur = curator(other, Fraction(10))
    base, _ = release_times(plain_cur, plain_cur, COUNT_SQL, 20)
    delay = max(share * float(np.median(base)), 0.0005)
    execute = leaky_cur.engine.execute

    def leaky(plan, *, salt):  # an engine that takes `delay` longer on this dataset
        time.sleep(delay)
        return execute(plan, salt=salt)

    monkeypatch.setattr(leaky_cur.engine, "execute", leaky)
    ta, tb = release_times(leaky_cur, plain_cur, COUNT_SQL, PAIRS)
    p, effect = timing_dependence(ta, tb)
    assert p < 1e-6 and effect > MATERIAL, (p, effect)


# -- porous outputs (Mironov 2012) ----------------------------------------------------------------

@pytest.mark.parametrize("sql", ["SELECT SUM(x) AS v FROM t", "SELECT AVG(x) AS v FROM t",
                                 "SELECT VARIANCE(x) AS v FROM t"])
def test_real_valued_answers_carry_nothing_in_their_low_order_bits(sql):
    """Every noisy measurement of a real-valued aggregate is an exact multiple of its public
    grid, whatever the data: the low-order bits are the grid's, never the data's."""
    for seed in (1, 2):  # two neighbouring datasets
        bits = secrets(40, seed)
        cur = curator(bits, Fraction(10))
        q = cur.sql(sql)
        bound = q.bind(1)
        exact = cur.engine.execute(q.compile().engine_plan, salt="0")
        for answer in bound.noise_many(exact, 200):
            for i, info in enumerate(bound.infos):
                step = info.grid or Fraction(1)
                assert (Fraction(answer.values[i][0]) / step).denominator == 1


def test_control_noise_added_off_the_grid_leaks_the_low_order_bits():
    """The mistake the grid prevents: grid noise added to an unrounded value keeps the
    value's position between grid points, which tells neighbouring datasets apart exactly."""
    from statcurator.mechanisms import LaplaceMechanism

    grid = Fraction(1, 2**20)
    m = LaplaceMechanism(sensitivity=1, epsilon=1, grid=grid)
    true_sums = [Fraction(123456789, 10**9), Fraction(523456789, 10**9)]  # neighbours
    leaked = []
    for x in true_sums:
        noise = m.sample_noise_units(100) * grid  # noise on the grid, value not rounded
        leaked.append({(x + Fraction(int(v) * grid)) % grid for v in noise / grid})
    assert len(leaked[0]) == len(leaked[1]) == 1 and leaked[0] != leaked[1]
