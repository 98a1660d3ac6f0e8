"""Attacks on query interfaces: reconstruction (Dinur–Nissim), averaging and differencing.

An interface is an *oracle*: a callable that answers one query. The attacks never see the
data; they see answers. Tests and the CLI wire in a :class:`~statcurator.Curator` (each query
a ``cur.sql(...).release(...)`` charged to a budget) or a :class:`NaiveInterface`, the
classic broken design: exact answers, bounded noise, or *fresh* Laplace noise per query and no
budget.

**Reconstruction** (Dinur & Nissim 2003). The data has a secret bit per row (n rows, n
public). The adversary asks q random subset-sum queries — each row in each subset with
probability ½ — and gets answers a_i. If every answer is within E of the truth, any x in
[0, 1]^n with |A x − a|_∞ ≤ E is close to the secret: the LP decoder finds the x minimizing
max_i |(A x)_i − a_i| (scipy's HiGHS) and rounds it at ½. With E = o(√n) and q = O(n log n)
queries it recovers all but o(n) bits. Against a DP interface under a budget, the budget caps
the total ε; spread over q queries each answer's noise has scale q/ε, far above √n.

>>> bits = np.array([1, 0, 1, 1, 0, 0, 1, 0] * 8)
>>> risk = Reconstruction(queries=256, seed=1).run(NaiveInterface(bits), len(bits), truth=bits)
>>> risk.rate
1.0
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..core.errors import BudgetExceededError, InvalidParameterError
from ..core.numbers import exact
from ..mechanisms import LaplaceMechanism, samplers
from ._checks import whole
from .risk import Risk, curve

__all__ = ["NaiveInterface", "Reconstruction", "Averaging", "Differencing", "lp_decode",
           "reconstruction_curve"]


@dataclass(frozen=True, eq=False)
class NaiveInterface:
    """A query interface *without* a privacy budget, over one secret numeric column.

    ``noise``: ``"exact"`` answers exactly; ``"bounded"`` adds an integer drawn uniformly from
    [−bound, bound]; ``"laplace"`` adds fresh discrete Laplace noise of scale 1/ε to every
    answer (the per-query mechanism is ε-DP, but nothing limits the number of queries). The
    noise comes from statcurator's exact samplers. ``queries`` counts the answers given.

    Calling it with an index array (or boolean mask) answers the subset sum of those rows;
    with ``None``, the sum over all rows; ``exclude=i`` drops row i (a differencing query).

    >>> iface = NaiveInterface(np.array([1, 0, 1]))
    >>> iface(np.array([0, 2])), iface(None), iface(None, exclude=0)
    (2, 2, 1)
    """

    values: np.ndarray
    noise: str = "exact"
    bound: int = 0
    epsilon: Any = None
    queries: list[int] = field(default_factory=lambda: [0], repr=False)

    NOISES: ClassVar[tuple[str, ...]] = ("exact", "bounded", "laplace")

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", np.asarray(self.values))
        if self.noise not in self.NOISES:
            raise InvalidParameterError(f"unknown noise {self.noise!r}",
                                        remedy="use 'exact', 'bounded' or 'laplace'")
        if self.noise == "bounded":
            object.__setattr__(self, "bound", whole(self.bound, "bound", 0, example=5))
        if self.noise == "laplace":
            object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))

    @property
    def mechanism(self) -> LaplaceMechanism | None:
        """The per-query mechanism of a Laplace interface (sensitivity = the largest value)."""
        if self.noise != "laplace":
            return None
        top = max(int(np.abs(self.values).max()) if self.values.size else 1, 1)
        return LaplaceMechanism(sensitivity=top, epsilon=self.epsilon)

    def __call__(self, subset: Any = None, *, exclude: int | None = None) -> float:
        self.queries[0] += 1
        v = self.values
        if subset is None:
            mask = np.ones(len(v), dtype=bool)
        else:
            s = np.asarray(subset)
            mask = s.astype(bool) if s.dtype == bool else np.isin(np.arange(len(v)), s)
        if exclude is not None:
            mask = mask.copy()
            mask[int(exclude)] = False
        true = int(v[mask].sum())
        if self.noise == "exact":
            return true
        if self.noise == "bounded":
            return true + int(samplers.uniform_int(2 * self.bound + 1)) - self.bound
        mech = self.mechanism
        assert mech is not None
        return mech.release(true)


def lp_decode(subsets: np.ndarray, answers: np.ndarray, *, norm: str = "linf") -> np.ndarray:
    """The LP decoder: x in [0, 1]^n minimizing the largest (``"linf"``) or the total
    (``"l1"``) deviation |A x − a|, solved by scipy's HiGHS.

    >>> A = np.array([[1, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 1]])
    >>> lp_decode(A, A @ np.array([1, 0, 1])).round(6).tolist()
    [1.0, 0.0, 1.0]
    """
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, hstack, identity, vstack

    A = csr_matrix(np.asarray(subsets, dtype=np.float64))
    a = np.asarray(answers, dtype=np.float64)
    q, n = A.shape
    if norm == "linf":
        t = csr_matrix(np.ones((q, 1)))
        # A x − t ≤ a  and  −A x − t ≤ −a ; minimize t
        G = vstack([hstack([A, -t]), hstack([-A, -t])]).tocsr()
        c = np.zeros(n + 1)
        c[-1] = 1
        bounds = [(0, 1)] * n + [(0, None)]
    elif norm == "l1":
        eye = identity(q, format="csr")
        G = vstack([hstack([A, -eye]), hstack([-A, -eye])]).tocsr()
        c = np.concatenate([np.zeros(n), np.ones(q)])
        bounds = [(0, 1)] * n + [(0, None)] * q
    else:
        raise InvalidParameterError(f"unknown decoder norm {norm!r}", remedy="use 'linf' or 'l1'")
    # the interior-point solver is 3-4x faster than simplex on these dense random LPs
    res = linprog(c, A_ub=G, b_ub=np.concatenate([a, -a]), bounds=bounds, method="highs-ipm")
    if res.x is None:
        raise InvalidParameterError(f"the LP decoder failed: {res.message}",
                                    remedy="check the answers (they must be finite numbers)")
    return np.asarray(res.x[:n])


@dataclass(frozen=True)
class Reconstruction:
    """The Dinur–Nissim reconstruction attack (see the module docstring).

    Adversary model: knows the number of rows n (public metadata), can ask the interface
    subset-sum queries over row positions (e.g. ``WHERE id IN (...)``), and sees the answers;
    chooses ``queries`` random subsets (its own randomness, ``seed``), decodes with the LP
    (``norm``: ``"linf"``, the bounded-noise decoder, or ``"l1"``) and rounds at ½. Breach:
    the row's secret bit is recovered. The baseline guesses the more common bit for every row.
    If the interface refuses a query (budget exhausted), the attack decodes from the answers
    it got. ``steps`` (shares of the queries, e.g. ``(0.25, 0.5)``) also decodes from the first
    answers only, for the curve "fraction recovered vs queries".
    """

    queries: int = 2000
    norm: str = "linf"
    seed: int | None = None
    steps: tuple[float, ...] = ()
    name: ClassVar[str] = "reconstruction"
    adversary: ClassVar[str] = (
        "knows n, asks random subset-sum queries, sees the answers; decodes the secret column "
        "with the LP decoder and rounds at 1/2")
    baseline_method: ClassVar[str] = "guessing the more common bit for every row"

    def __post_init__(self) -> None:
        object.__setattr__(self, "queries", whole(self.queries, "queries", example=2000))
        if self.norm not in ("linf", "l1"):
            raise InvalidParameterError(f"unknown decoder norm {self.norm!r}",
                                        remedy="use 'linf' or 'l1'")

    def subsets(self, n: int) -> np.ndarray:
        """The attacker's random subsets (q × n, 0/1): its own randomness, seeded."""
        rng = np.random.default_rng(self.seed)
        return (rng.random((self.queries, n)) < 0.5).astype(np.int8)

    def run(self, oracle: Callable[[np.ndarray], Any], n: int, *,
            truth: Sequence[int] | np.ndarray, alpha: float = 0.05, detail: bool = False,
            noise: Any = None, cost: Any = None) -> Risk:
        """Attack ``oracle`` (called with an index array per query) over ``n`` rows; ``truth``
        is the secret column (scoring only); ``noise`` and ``cost`` describe the interface."""
        truth_arr = np.asarray(truth).astype(np.int64)
        if len(truth_arr) != n:
            raise InvalidParameterError(f"truth has {len(truth_arr)} entries for n = {n}",
                                        remedy="give the secret bit of every row")
        A = self.subsets(n)
        answers, refused = [], 0
        started = time.perf_counter()
        for row in A:
            try:
                answers.append(float(oracle(np.flatnonzero(row))))
            except BudgetExceededError:
                refused = len(A) - len(answers)
                break
        asked = time.perf_counter() - started
        got = len(answers)
        started = time.perf_counter()
        x = lp_decode(A[:got], np.array(answers), norm=self.norm) if got else np.full(n, 0.5)
        decoded = time.perf_counter() - started
        guess = (x >= 0.5).astype(np.int64)
        success = guess == truth_arr
        p = float(truth_arr.mean()) if n else 0.0
        curves = {}
        if self.steps and got:
            used = sorted({max(1, int(round(f * got))) for f in self.steps if 0 < f < 1} | {got})
            rates = [float(np.mean((lp_decode(A[:u], np.array(answers[:u]), norm=self.norm)
                                    >= 0.5) == truth_arr)) if u < got else float(success.mean())
                     for u in used]
            curves["fraction recovered vs queries"] = curve(
                used, rates, xlabel="queries answered", ylabel="fraction of the column recovered",
                baseline=[max(p, 1 - p)] * len(used))
        resid = np.abs(A[:got] @ x - np.array(answers)) if got else np.zeros(0)
        measures = {"rows": n, "queries answered": got, "queries refused": refused,
                    "largest residual of the decoded x": float(resid.max()) if got else 0.0,
                    "seconds asking": round(asked, 3), "seconds decoding": round(decoded, 3)}
        if noise is not None:
            measures["interface noise"] = noise
        rows = tuple({"row": i, "secret": int(truth_arr[i]), "decoded": float(x[i]),
                      "breached": bool(success[i])} for i in range(n)) if detail else None
        return Risk(self.name, self.adversary, int(success.sum()), n, max(p, 1 - p),
                    self.baseline_method, alpha, str(noise or "query interface"), measures, curves,
                    rows, cost)


def reconstruction_curve(values: np.ndarray, *, bounds: Sequence[int] = (0,),
                         queries: Sequence[int] = (2000,), seed: int = 0,
                         norm: str = "linf") -> dict[str, Any]:
    """Fraction recovered against the noise bound E (for each number of queries), with a
    :class:`NaiveInterface` answering with bounded noise: the data behind the report's plot."""
    n = len(values)
    series: dict[str, list[float]] = {}
    for q in queries:
        ys = []
        for e in bounds:
            iface = NaiveInterface(values, "bounded" if e else "exact", bound=int(e))
            ys.append(Reconstruction(int(q), norm, seed).run(iface, n, truth=values).rate)
        series[f"q={q}"] = ys
    first = next(iter(series))
    return curve(list(bounds), series[first], xlabel="noise bound E", ylabel="fraction recovered",
                 marks={"√n": float(np.sqrt(n))}, label=first,
                 **{k: v for k, v in series.items() if k != first})


@dataclass(frozen=True)
class Averaging:
    """The averaging attack: ask the same query ``repeats`` times and average.

    Adversary model: can repeat a counting query; sees the answers. Against an interface
    that adds *fresh* noise to each answer and has no budget, the average's error shrinks as
    1/√repeats, and rounding it recovers the exact count. Breach: the rounded average equals
    the true count (one target per query). The baseline rounds a single answer. ``oracle(q)``
    answers query ``q``.
    """

    repeats: int = 100
    name: ClassVar[str] = "averaging"
    adversary: ClassVar[str] = (
        "repeats each counting query and averages the answers; breach when the rounded "
        "average is the exact count")
    baseline_method: ClassVar[str] = "rounding a single answer"

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeats", whole(self.repeats, "repeats", example=100))

    def run(self, oracle: Callable[[Any], Any], queries: Sequence[Any], *,
            truth: Sequence[float], alpha: float = 0.05, detail: bool = False,
            cost: Any = None, description: str = "query interface") -> Risk:
        if len(truth) != len(queries):
            raise InvalidParameterError(f"{len(truth)} true answers for {len(queries)} queries",
                                        remedy="give the true answer of every query")
        success, single, used, refused = [], [], [], 0
        rows = []
        for q, t in zip(queries, truth, strict=True):
            answers = []
            for _ in range(self.repeats):
                try:
                    answers.append(float(oracle(q)))
                except BudgetExceededError:
                    refused += 1
                    break
            avg = float(np.mean(answers)) if answers else float("nan")
            ok = bool(answers) and round(avg) == round(float(t))
            success.append(ok)
            single.append(bool(answers) and round(answers[0]) == round(float(t)))
            used.append(len(answers))
            rows.append({"query": str(q), "truth": float(t), "answers": len(answers),
                         "average": avg, "breached": ok})
        n = len(queries)
        measures = {"repeats asked": self.repeats, "mean answers obtained": float(np.mean(used))
                    if n else 0.0, "queries refused": refused}
        return Risk(self.name, self.adversary, int(sum(success)), n,
                    float(np.mean(single)) if n else 0.0, self.baseline_method, alpha,
                    description, measures, {}, tuple(rows) if detail else None, cost)


@dataclass(frozen=True)
class Differencing:
    """The differencing attack: "how many have the secret?" minus "how many, not counting the
    target?" is the target's secret bit.

    Adversary model: knows each target's identity in the table (a key the interface filters
    on, e.g. ``WHERE id <> 17``), asks the two counts ``repeats`` times each and averages
    them (``repeats=1``: plain differencing). ``oracle(None)`` answers the count over everyone,
    ``oracle(i)`` the count without target i. Breach: the rounded difference, clipped to
    {0, 1}, is the target's bit. The baseline guesses the more common bit. When the
    interface refuses (budget spent), the remaining targets get the baseline's guess.
    """

    repeats: int = 1
    name: ClassVar[str] = "differencing"
    adversary: ClassVar[str] = (
        "knows each target's key; asks the count with and without the target (repeated and "
        "averaged); the difference is the target's secret bit")
    baseline_method: ClassVar[str] = "guessing the more common bit"

    def __post_init__(self) -> None:
        object.__setattr__(self, "repeats", whole(self.repeats, "repeats"))

    def run(self, oracle: Callable[[Any], Any], targets: Sequence[Any], *,
            truth: Sequence[int], prior_bit: int | None = None, alpha: float = 0.05,
            detail: bool = False, cost: Any = None,
            description: str = "query interface") -> Risk:
        """``prior_bit``: the attacker's fallback guess (default: the truth's majority, i.e.
        the baseline's guess)."""
        t = np.asarray(truth).astype(np.int64)
        if len(t) != len(targets):
            raise InvalidParameterError(f"{len(t)} secret bits for {len(targets)} targets",
                                        remedy="give the bit of every target")
        p = float(t.mean()) if len(t) else 0.0
        fallback = (1 if p >= 0.5 else 0) if prior_bit is None else int(prior_bit)
        guesses, rows, attacked, stopped = [], [], 0, False
        for target in targets:
            bit = fallback
            if not stopped:
                try:
                    total = np.mean([float(oracle(None)) for _ in range(self.repeats)])
                    without = np.mean([float(oracle(target)) for _ in range(self.repeats)])
                    bit = int(min(1, max(0, round(total - without))))
                    attacked += 1
                except BudgetExceededError:
                    stopped = True
            guesses.append(bit)
            rows.append({"target": str(target), "guess": bit})
        g = np.array(guesses, dtype=np.int64)
        success = g == t
        for r, ok, bit in zip(rows, success, t, strict=True):
            r.update({"secret": int(bit), "breached": bool(ok)})
        measures = {"repeats": self.repeats, "targets attacked before a refusal": attacked,
                    "interface refused": stopped}
        return Risk(self.name, self.adversary, int(success.sum()), len(t), max(p, 1 - p),
                    self.baseline_method, alpha, description, measures, {},
                    tuple(rows) if detail else None, cost)
