"""Randomized response (Warner 1965): local differential privacy for one categorical answer.

Each person reports their true category with probability p = e^ε/(e^ε + k - 1) and each other
category with probability 1/(e^ε + k - 1); the ratio of the two is e^ε, so the report is ε-DP
for the person who gives it — even towards the curator. For a yes/no question (k = 2), the
truthful answer has probability e^ε/(1 + e^ε): 0.525 at ε = 0.1, 0.502 at ε = 0.01.

The coin is exact: "truthful" is a Bernoulli of the irrational p decided by comparing random
bits with rigorous rational bounds of p; the lie is a uniform choice among the other k - 1
categories.

>>> rr = RandomizedResponse(epsilon=0.1)
>>> round(rr.p_truthful, 3)
0.525
>>> RandomizedResponse(epsilon=0.01).p_truthful > 0.5
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError
from ..core.measures import PureDP
from ..core.numbers import exact, exp_bounds
from ..core.relations import DiscreteDistance
from . import samplers
from ._base import Mechanism, as_alpha
from .samplers import _bernoulli_interval

__all__ = ["RandomizedResponse"]


@functools.lru_cache(maxsize=1024)
def _truthful_bounds(epsilon: Fraction, k: int, bits: int) -> tuple[Fraction, Fraction]:
    lo, hi = exp_bounds(-epsilon, bits)
    return 1 / (1 + (k - 1) * hi), 1 / (1 + (k - 1) * lo)


@dataclass(frozen=True)
class RandomizedResponse(Mechanism):
    """k-ary randomized response: truthful w.p. e^ε/(e^ε + k - 1), else a uniform other value.

    ``categories`` is the public list of possible answers (default ``(False, True)``: the
    binary yes/no question) or their number k. Pure ε-DP per respondent (local model); the
    privacy map is ε for a changed answer (distance 1) and 0 for none.

    >>> rr = RandomizedResponse(epsilon=1, categories=("A", "B", "C"))
    >>> round(rr.p_truthful, 4), round(rr.p_other, 4)    # e/(e+2), 1/(e+2)
    (0.5761, 0.2119)
    >>> rr.release("B") in ("A", "B", "C")
    True
    """

    epsilon: Fraction
    categories: Sequence[Any] | int = (False, True)
    _index: dict[Any, int] = field(default_factory=dict, repr=False, compare=False)

    name = "randomized-response"
    input_metric = DiscreteDistance()

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", exact(self.epsilon, "epsilon"))
        cats = self.categories
        if isinstance(cats, int) and not isinstance(cats, bool):
            cats = tuple(range(cats))
        cats = tuple(cats)
        if len(cats) < 2:
            raise InvalidParameterError("randomized response needs at least 2 categories",
                                        remedy="pass categories=(False, True) or k >= 2")
        if len(set(cats)) != len(cats):
            raise InvalidParameterError("a category is listed twice",
                                        remedy="list each public category once")
        object.__setattr__(self, "categories", cats)
        object.__setattr__(self, "_index", {c: i for i, c in enumerate(cats)})

    @property
    def k(self) -> int:
        """The number of categories."""
        return len(self.categories)  # type: ignore[arg-type]

    def p_truthful_bounds(self, bits: int = 128) -> tuple[Fraction, Fraction]:
        """Rational bounds of P(truthful) = 1/(1 + (k-1)·e^-ε)."""
        return _truthful_bounds(self.epsilon, self.k, bits)

    @property
    def p_truthful(self) -> float:
        """P(report = true answer) = e^ε/(e^ε + k - 1), as a float (for display)."""
        return 1.0 / (1.0 + (self.k - 1) * math.exp(-float(self.epsilon)))

    @property
    def p_other(self) -> float:
        """P(report = one given other answer) = 1/(e^ε + k - 1)."""
        return (1.0 - self.p_truthful) / (self.k - 1)

    @property
    def cost(self) -> PureDP:
        """PureDP(ε) per respondent."""
        return PureDP(self.epsilon)

    def privacy_map(self, d: object) -> PureDP:
        """ε when the answer may change (d >= 1 is capped: any two answers are ε apart)."""
        dist = exact(d, "distance", allow_zero=True)
        return PureDP(self.epsilon if dist > 0 else 0)

    def release(self, answer: Any) -> Any:
        """The randomized report of one answer, or of each answer of a sequence/array."""
        if isinstance(answer, np.ndarray | list | tuple):
            idx = self._indices(answer)
            out = self._randomize(idx)
            cats = np.empty(len(self.categories), dtype=object)  # type: ignore[arg-type]
            cats[:] = list(self.categories)  # type: ignore[arg-type]
            result = cats[out]
            if isinstance(answer, np.ndarray) and answer.dtype != object:
                return result.astype(answer.dtype)
            return result.tolist() if not isinstance(answer, np.ndarray) else result
        return self.categories[int(self._randomize(self._indices([answer]))[0])]  # type: ignore[index]

    def sample_indices(self, true_index: int, size: int) -> np.ndarray:
        """``size`` reports (as category indices) for one true category index (for tests)."""
        return self._randomize(np.full(size, true_index, dtype=np.int64))

    def _indices(self, answers: Any) -> np.ndarray:
        try:
            return np.array([self._index[a] for a in list(np.asarray(answers, dtype=object))],
                            dtype=np.int64)
        except KeyError as e:
            raise DataError(f"the answer {e.args[0]!r} is not one of the declared categories",
                            remedy="declare every possible answer in categories=...") from None
        except TypeError:
            raise DataError("answers must be hashable category values",
                            remedy="pass values from categories=...") from None

    def _randomize(self, idx: np.ndarray) -> np.ndarray:
        n = idx.shape[0]
        truthful = _bernoulli_interval(lambda bits: self.p_truthful_bounds(bits), n)
        lie = samplers.uniform_int(self.k - 1, size=n)
        lie = lie + (lie >= idx)  # a uniform category other than the true one
        return np.where(truthful, idx, lie)

    def estimate_counts(self, reports: Any) -> np.ndarray:
        """Unbiased estimates of the true count of each category from the reports.

        E[reported_c] = n_c·p + (n - n_c)·q, so n_c = (reported_c - n·q)/(p - q).

        >>> rr = RandomizedResponse(epsilon=1)
        >>> est = rr.estimate_counts([True] * 60 + [False] * 40)
        >>> round(float(est.sum()))
        100
        """
        idx = self._indices(reports)
        n = idx.shape[0]
        observed = np.bincount(idx, minlength=self.k).astype(np.float64)
        p, q = self.p_truthful, self.p_other
        return (observed - n * q) / (p - q)

    def accuracy(self, alpha: object = Fraction(1, 20), n: int = 1) -> float:
        """Half-width h of the estimated share of a category from ``n`` reports.

        P(|share_estimate - share| > h) <= alpha with h = sqrt(ln(2/alpha)/(2n))/(p - q)
        (Hoeffding's inequality on the share of reports, divided by the debiasing factor).

        >>> round(RandomizedResponse(epsilon=1).accuracy(0.05, n=10000), 4)
        0.0294
        """
        a = float(as_alpha(alpha))
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidParameterError(f"n must be a positive number of reports, got {n!r}",
                                        remedy="pass n=1000")
        return math.sqrt(math.log(2 / a) / (2 * n)) / (self.p_truthful - self.p_other)

    def describe(self, alpha: object = Fraction(1, 20)) -> dict[str, Any]:
        """A summary: the truthful and the other answers' probabilities, and the cost."""
        return {"mechanism": self.name, "epsilon": self.epsilon, "cost": str(self.cost),
                "categories": list(self.categories),  # type: ignore[arg-type]
                "p_truthful": self.p_truthful, "p_each_other": self.p_other}
