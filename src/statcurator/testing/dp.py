"""An empirical differential-privacy tester, in the spirit of StatDP (Ding et al., CCS 2018).

A mechanism M is (ε, δ)-DP when, for neighbouring datasets D1 and D2 and every event E,
P[M(D1) ∈ E] <= e^ε·P[M(D2) ∈ E] + δ (and symmetrically). :func:`check_dp` looks for an
event that violates this:

1. **Event selection** (on a first, independent batch of runs): it evaluates many candidate
   events — one-sided thresholds ``output <= c`` / ``output >= c`` at quantiles of the
   observed outputs and, for outputs with few distinct values, ``output == v`` — in both
   directions (D1 against D2 and D2 against D1), and keeps the most suspicious one.
2. **Hypothesis test** (on a fresh batch, so the selection cannot bias it): with counts
   c1 ~ Bin(n, p1) and c2 ~ Bin(n, p2), it tests H0: p1 <= e^ε·p2 + δ by exact
   Clopper–Pearson bounds — reject at level γ when the lower (1-γ/2)-bound of p1 exceeds
   e^ε times the upper (1-γ/2)-bound of p2 plus δ. Under H0 this happens with probability at
   most γ (Bonferroni over the two bounds), whatever p1 and p2; the p-value is the smallest
   such γ. The run *fails* when the p-value is below ``alpha`` (1e-6 by default), so a real
   mechanism fails with probability at most 1e-6.

The sample functions receive a number of runs and return a numpy array of outputs, one per
run (1-d for scalar outputs, 2-d for vectors, object arrays for categories).

>>> import numpy as np
>>> from fractions import Fraction
>>> from statcurator.mechanisms import LaplaceMechanism
>>> m = LaplaceMechanism(sensitivity=1, epsilon=1)
>>> res = check_dp(lambda n: m.release(np.full(n, 2)),     # the diabetes count, D1
...                lambda n: m.release(np.full(n, 3)),     # its neighbour, D2
...                epsilon=1, trials=50_000)
>>> res.passed
True
>>> broken = LaplaceMechanism(sensitivity=1, epsilon=2)    # claims ε = 1, really ε = 2
>>> check_dp(lambda n: broken.release(np.full(n, 2)),
...          lambda n: broken.release(np.full(n, 3)), epsilon=1, trials=50_000).passed
False
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

__all__ = ["check_dp", "assert_dp", "DPTestResult", "Event", "binomial_dp_pvalue"]


@dataclass(frozen=True)
class Event:
    """A set of outputs: ``predicate(outputs) -> boolean array`` and a readable description.

    >>> e = Event("output >= 3", lambda x: x >= 3)
    >>> e(np.array([1, 3, 5])).tolist()
    [False, True, True]
    """

    description: str
    predicate: Callable[[np.ndarray], np.ndarray] = field(repr=False, compare=False)

    def __call__(self, outputs: np.ndarray) -> np.ndarray:
        return np.asarray(self.predicate(outputs), dtype=bool)

    def __str__(self) -> str:
        return self.description


@dataclass(frozen=True)
class DPTestResult:
    """The outcome of :func:`check_dp`.

    ``passed`` is False when the data reject (ε, δ)-DP at level ``alpha``; ``event`` is the
    event tested, ``observed_ratio`` = p̂(E | first)/p̂(E | second) in the tested direction
    (``direction``), ``counts`` the two event counts out of ``trials`` runs each.

    >>> r = DPTestResult(True, 0.5, Event("x == 1", lambda x: x == 1), 2.0, "D1 vs D2",
    ...                  (200, 100), 1000, 1.0, 0.0, 1e-6)
    >>> str(r)
    'consistent with (1, 0)-DP: event [x == 1] (D1 vs D2) counts 200 vs 100 of 1000, ratio 2 vs e^ε = 2.718, p = 0.5 (α = 1e-06)'
    """

    passed: bool
    p_value: float
    event: Event
    observed_ratio: float
    direction: str
    counts: tuple[int, int]
    trials: int
    epsilon: float
    delta: float
    alpha: float

    def __str__(self) -> str:
        verdict = "consistent with" if self.passed else "VIOLATES"
        return (f"{verdict} ({self.epsilon:g}, {self.delta:g})-DP: event [{self.event}] "
                f"({self.direction}) counts {self.counts[0]} vs {self.counts[1]} of "
                f"{self.trials}, ratio {self.observed_ratio:.4g} vs e^ε = "
                f"{math.exp(self.epsilon):.4g}, p = {self.p_value:.3g} (α = {self.alpha:g})")


def binomial_dp_pvalue(c1: Any, c2: Any, n1: int, n2: int, epsilon: float,
                       delta: float = 0.0) -> np.ndarray:
    """p-values of H0: p1 <= e^ε·p2 + δ from counts c1 ~ Bin(n1, p1), c2 ~ Bin(n2, p2).

    Vectorized over arrays of counts. The test rejects at level γ when the Clopper–Pearson
    lower bound of p1 at 1-γ/2 exceeds e^ε·(upper bound of p2 at 1-γ/2) + δ; the p-value is
    the smallest such γ (found by bisection on log γ; the condition is monotone in γ).

    >>> float(binomial_dp_pvalue(500, 500, 1000, 1000, 0.0)[0])
    1.0
    >>> bool(binomial_dp_pvalue(900, 100, 1000, 1000, 1.0)[0] <= 1e-12)
    True
    """
    from scipy.stats import beta

    c1 = np.atleast_1d(np.asarray(c1, dtype=np.float64))
    c2 = np.atleast_1d(np.asarray(c2, dtype=np.float64))
    c1, c2 = np.broadcast_arrays(c1, c2)
    factor = math.exp(epsilon)

    def rejects(gamma: np.ndarray) -> np.ndarray:
        half = gamma / 2
        lower1 = np.where(c1 > 0, beta.ppf(half, np.maximum(c1, 1), n1 - c1 + 1), 0.0)
        upper2 = np.where(c2 < n2, beta.isf(half, c2 + 1, np.maximum(n2 - c2, 1)), 1.0)
        return lower1 > factor * upper2 + delta

    # bisection on t = log10 γ in [FLOOR, 0]; p-values below 10^FLOOR are reported as such
    floor = -30.0
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # boost's root finder at extremes
        lo = np.full(c1.shape, floor)
        hi = np.zeros(c1.shape)
        never = ~rejects(np.ones(c1.shape))
        always = rejects(np.full(c1.shape, 10.0**floor))
        for _ in range(50):
            mid = (lo + hi) / 2
            r = rejects(10.0**mid)
            hi = np.where(r, mid, hi)
            lo = np.where(r, lo, mid)
    p = 10.0**hi
    p = np.where(never, 1.0, p)
    return np.where(always, 10.0**floor, p)


def _default_events(x1: np.ndarray, x2: np.ndarray, max_thresholds: int) -> list[Event]:
    pooled = np.concatenate([x1, x2])
    if pooled.ndim == 2:
        return _vector_events(x1, x2, pooled, max_thresholds)
    if pooled.dtype.kind not in "iuf":  # categories
        values = list(dict.fromkeys(pooled.tolist()))[:200]
        return [Event(f"output == {v!r}", lambda x, v=v: np.asarray(
            [o == v for o in x.tolist()], dtype=bool)) for v in values]
    values, counts = np.unique(pooled, return_counts=True)
    events: list[Event] = []
    if values.size <= 200:
        for v in values[np.argsort(-counts)][:64]:
            events.append(Event(f"output == {v}", lambda x, v=v: x == v))
        cuts = values
    else:
        qs = np.linspace(0, 1, max_thresholds + 2)[1:-1]
        cuts = np.unique(np.quantile(pooled, qs, method="nearest"))
        # the extremes, where the ratio of a misbehaving mechanism is largest
        cuts = np.unique(np.concatenate([cuts, np.quantile(pooled, [1e-3, 1e-2, 0.99, 0.999],
                                                            method="nearest")]))
    for c in cuts:
        events.append(Event(f"output <= {c}", lambda x, c=c: x <= c))
        events.append(Event(f"output >= {c}", lambda x, c=c: x >= c))
    return events


def _vector_events(x1: np.ndarray, x2: np.ndarray, pooled: np.ndarray,
                   max_thresholds: int) -> list[Event]:
    """Events for vector outputs: per coordinate, the most frequent whole vectors, and
    "corner" events (every coordinate beyond its quantile, in the direction the two datasets
    differ), which catch violations visible only jointly (an L1 sensitivity understated)."""
    events: list[Event] = []
    for j in range(pooled.shape[1]):
        col = _default_events(x1[:, j], x2[:, j], max(8, max_thresholds // 4))
        events.extend(_on_column(e, j) for e in col)
    if pooled.dtype.kind in "iub":
        rows, counts = np.unique(pooled, axis=0, return_counts=True)
        for r in rows[np.argsort(-counts)][:32]:
            events.append(Event(f"output == {r.tolist()}",
                                lambda x, r=r: np.all(np.asarray(x) == r, axis=1)))
    if pooled.dtype.kind in "iuf":
        direction = np.sign(x1.mean(axis=0) - x2.mean(axis=0))
        direction[direction == 0] = 1
        for sgn in (1, -1):
            d = sgn * direction
            for q in (0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7):
                # coordinate i beyond its quantile q on the side d_i points to
                cut = np.array([np.quantile(pooled[:, i], 1 - q if d[i] > 0 else q,
                                            method="nearest") for i in range(pooled.shape[1])])
                events.append(Event(
                    f"output beyond {cut.tolist()} towards {d.astype(int).tolist()}",
                    lambda x, d=d, cut=cut: np.all(d * np.asarray(x) >= d * cut, axis=1)))
    return events


def _on_column(event: Event, j: int) -> Event:
    return Event(event.description.replace("output", f"output[{j}]", 1),
                 lambda x: event(np.asarray(x)[:, j]))


def _as_events(events: Sequence[Any]) -> list[Event]:
    out = []
    for e in events:
        if isinstance(e, Event):
            out.append(e)
        elif isinstance(e, tuple) and len(e) == 2 and callable(e[1]):
            out.append(Event(str(e[0]), e[1]))
        elif callable(e):
            out.append(Event(getattr(e, "__name__", repr(e)), e))
        else:
            raise TypeError(f"an event must be an Event, a (name, predicate) pair or a "
                            f"predicate, got {e!r}")
    return out


def _excess_z(k1: np.ndarray, k2: np.ndarray, n: int, eps: float, delta: float) -> np.ndarray:
    p1 = (k1 + 0.5) / (n + 1)
    p2 = (k2 + 0.5) / (n + 1)
    factor = math.exp(eps)
    se = np.sqrt(p1 * (1 - p1) / n + factor**2 * p2 * (1 - p2) / n)
    return (p1 - factor * p2 - delta) / se


def _draw(sample: Callable[[int], Any], n: int) -> np.ndarray:
    out = np.asarray(sample(n))
    if out.shape[0] != n:
        raise ValueError(f"the sample function returned {out.shape[0]} outputs for {n} runs; "
                         "it must return one output per run")
    return out


def check_dp(sample_d1: Callable[[int], Any], sample_d2: Callable[[int], Any],
             epsilon: float | Fraction, delta: float | Fraction = 0,
             trials: int = 200_000, alpha: float = 1e-6,
             events: Sequence[Any] | None = None,
             selection_trials: int | None = None, max_thresholds: int = 64) -> DPTestResult:
    """Test empirically whether a mechanism looks (ε, δ)-DP on one pair of neighbours.

    ``sample_d1(n)`` / ``sample_d2(n)`` run the mechanism ``n`` times on the two neighbouring
    datasets and return the outputs. ``events`` (optional) overrides the automatic candidate
    events: :class:`Event` objects, ``(name, predicate)`` pairs or bare predicates. The
    selection uses ``selection_trials`` runs (default ``trials // 4``, at least 2000) and the
    test ``trials`` fresh runs of each dataset.

    A passing result does not prove privacy (only this pair of datasets and these events
    were tried); a failing one, at α = 1e-6, is strong evidence of a bug.

    >>> from statcurator.mechanisms import RandomizedResponse
    >>> rr = RandomizedResponse(epsilon=1)
    >>> res = check_dp(lambda n: rr.sample_indices(1, n), lambda n: rr.sample_indices(0, n),
    ...                epsilon=1, trials=20_000)
    >>> res.passed, res.direction in ("D1 vs D2", "D2 vs D1")
    (True, True)
    """
    eps = float(epsilon)
    dlt = float(delta)
    if not (eps >= 0 and math.isfinite(eps)) or not 0 <= dlt < 1:
        raise ValueError("epsilon must be finite and >= 0, and 0 <= delta < 1")
    n_sel = selection_trials if selection_trials is not None else max(trials // 4, 2000)
    s1, s2 = _draw(sample_d1, n_sel), _draw(sample_d2, n_sel)
    candidates = _as_events(events) if events is not None else _default_events(
        s1, s2, max_thresholds)
    if not candidates:
        raise ValueError("no candidate events")
    k1 = np.array([int(e(s1).sum()) for e in candidates])
    k2 = np.array([int(e(s2).sum()) for e in candidates])
    # the most suspicious event and direction: the largest standardized excess of
    # p1 - e^ε·p2 - δ on the selection runs (a z-score; only the choice uses it, the test
    # itself is exact and runs on fresh data)
    z12 = _excess_z(k1, k2, n_sel, eps, dlt)
    z21 = _excess_z(k2, k1, n_sel, eps, dlt)
    flipped = int(z21.max() > z12.max())
    best = int(np.argmax(z21 if flipped else z12))
    event = candidates[best]

    t1, t2 = _draw(sample_d1, trials), _draw(sample_d2, trials)
    c1, c2 = int(event(t1).sum()), int(event(t2).sum())
    if flipped:
        c1, c2 = c2, c1
    p = float(binomial_dp_pvalue(c1, c2, trials, trials, eps, dlt)[0])
    ratio = c1 / c2 if c2 else (math.inf if c1 else 1.0)
    return DPTestResult(passed=p >= alpha, p_value=p, event=event, observed_ratio=ratio,
                        direction="D2 vs D1" if flipped else "D1 vs D2", counts=(c1, c2),
                        trials=trials, epsilon=eps, delta=dlt, alpha=alpha)


def assert_dp(sample_d1: Callable[[int], Any], sample_d2: Callable[[int], Any],
              epsilon: float | Fraction, delta: float | Fraction = 0,
              **kwargs: Any) -> DPTestResult:
    """:func:`check_dp`, raising ``AssertionError`` with the details when it fails.

    >>> from statcurator.mechanisms import RandomizedResponse
    >>> rr = RandomizedResponse(epsilon=1)
    >>> _ = assert_dp(lambda n: rr.sample_indices(1, n), lambda n: rr.sample_indices(0, n),
    ...               epsilon=1, trials=20_000)
    """
    res = check_dp(sample_d1, sample_d2, epsilon, delta, **kwargs)
    if not res.passed:
        raise AssertionError(str(res))
    return res
