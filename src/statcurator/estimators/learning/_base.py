"""What the DP learners share: the budget, the neighbour relation, the Measurement they are.

Every learner is calibrated to a *per-row* budget (rows added or removed) and exposes a
:class:`~statcurator.core.measurement.Measurement` under the table's declared neighbour
relation, so the loss charged is the privacy map of the object that runs:
``learner.measurement(meta)(data)`` fits, ``learner.measurement(meta).cost`` is the charge.

>>> from statcurator.core.measures import PureDP
>>> from statcurator.core.relations import ChangeOne
>>> m = pure_measurement(ChangeOne(), Fraction(1), lambda eps: (lambda data: eps), "toy")
>>> m.cost, m([])           # ε = 1 under change-one: each add/remove step gets ε/2
(PureDP(epsilon=Fraction(1, 1)), Fraction(1, 2))
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ...core.measurement import Measurement
from ...core.measures import ZCDP, PrivacyLoss, PureDP
from ...core.numbers import exact
from ...core.relations import AddRemove, Relation
from .._common import quietly
from ._domain import row_steps

__all__ = ["pure_measurement", "zcdp_measurement", "as_epsilon", "epsilon_of", "Described"]


def as_epsilon(epsilon: object) -> Fraction:
    """A validated ε (exact; NaN, ∞, ≤ 0 and absurd values refused)."""
    return exact(epsilon, "epsilon", maximum=1000)


def epsilon_of(loss: PrivacyLoss | None, default: object) -> Fraction:
    """The ε of a pure-DP budget (or ``default`` when no loss is given)."""
    if loss is None:
        if default is None:
            from ...core.errors import InvalidParameterError

            raise InvalidParameterError("no privacy budget given",
                                        remedy="pass epsilon=1 (to the learner or to fit)")
        return as_epsilon(default)
    if not isinstance(loss, PureDP):
        from ...core.errors import InvalidParameterError

        raise InvalidParameterError(f"this learner is pure ε-DP; it cannot be run under {loss}",
                                    remedy="pass epsilon=... (no delta, no rho)")
    return as_epsilon(loss.epsilon)


def pure_measurement(relation: Relation, epsilon: Fraction,
                     build: Callable[[Fraction], Callable[[Any], Any]], name: str) -> Measurement:
    """The Measurement of an ε-DP algorithm under ``relation``.

    ``build(eps_row)`` returns the function that runs the algorithm calibrated to ``eps_row``
    per added or removed row; its privacy map is d ↦ d·eps_row rows (pure DP composes
    linearly over rows), read under ``relation`` (a change-one step is two rows).
    """
    eps_row = epsilon / row_steps(relation)
    m = Measurement(AddRemove(), PureDP, quietly(build(eps_row)), lambda d: PureDP(eps_row * d),
                    name)
    return m if isinstance(relation, AddRemove) else m.under(relation)


def zcdp_measurement(relation: Relation, rho: Fraction,
                     build: Callable[[Fraction], Callable[[Any], Any]], name: str) -> Measurement:
    """The Measurement of a ρ-zCDP algorithm under ``relation``: ``build(rho_row)`` runs it
    at ρ per added or removed row; the privacy map is d ↦ d²·rho_row (group privacy of zCDP,
    Bun & Steinke 2016, Prop. 1.9), read under ``relation``.

    >>> from statcurator.core.relations import ChangeOne
    >>> m = zcdp_measurement(ChangeOne(), Fraction(1, 2), lambda r: (lambda data: r), "toy")
    >>> m.cost, m([])
    (ZCDP(rho=Fraction(1, 2)), Fraction(1, 8))
    """
    rho_row = rho / row_steps(relation) ** 2
    m = Measurement(AddRemove(), ZCDP, quietly(build(rho_row)), lambda d: ZCDP(rho_row * d * d),
                    name)
    return m if isinstance(relation, AddRemove) else m.under(relation)


class Described:
    """``repr`` and ``describe()`` (the ledger's query text) from the constructor's
    parameters, in the style of scikit-learn.

    >>> class Toy(Described):
    ...     def __init__(self, k=3, *, name="x"):
    ...         self.k, self.name = k, name
    >>> Toy(4).describe()
    "Toy(k=4, name='x')"
    """

    def __repr__(self) -> str:
        import inspect

        params = inspect.signature(type(self).__init__).parameters
        parts = [f"{n}={getattr(self, n, None)!r}" for n in params
                 if n != "self" and params[n].kind not in (inspect.Parameter.VAR_KEYWORD,
                                                           inspect.Parameter.VAR_POSITIONAL)]
        return f"{type(self).__name__}({', '.join(parts)})"

    def describe(self) -> str:
        """One line for the ledger: the learner and its parameters."""
        return repr(self)
