"""The estimator protocol: how a DP estimator runs through a :class:`~statcurator.Curator`.

An *estimator* is a value (a frozen dataclass, or a scikit-learn shaped learner) that can
say, from a table's **declared** metadata alone, what it will read and what it will cost:

``measurement(meta, loss) -> Measurement`` (required)
    The estimator as a :class:`~statcurator.core.measurement.Measurement` under the table's
    neighbour relation (:func:`relation_of`). Its ``function`` takes a pyarrow table holding
    (at least) the estimator's columns and returns the result; its privacy map gives the
    loss that is charged (``measurement.cost``). ``loss`` is the budget the caller asked for
    (``PureDP``, ``ApproxDP`` or ``ZCDP``), or ``None`` to use the estimator's own ε.
    Nothing here may read the private data.
``columns(meta) -> tuple[str, ...]`` (optional)
    The columns the function reads; default: every declared column.
``supports_person_level`` (optional class attribute, default ``False``)
    True when the privacy map is valid for a person who owns several rows; otherwise a table
    whose privacy unit is a person is refused before anything is charged.
``describe() -> str`` (optional)
    One line for the ledger's ``query`` field; default ``repr(estimator)``.
``result_to_json(result) -> str`` / ``result_from_json(text)`` (optional)
    How the answer is stored in the ledger and returned on a replay; default: the result's
    own ``to_json()`` and the parsed JSON.

``Curator.estimate(dataset, estimator, epsilon=..., analyst=...)`` builds the measurement
from the metadata, charges ``measurement.cost`` to the ledger *before* reading any data,
reads only ``columns(meta)``, runs the measurement, stores ``result_to_json(result)`` and
returns the result; a replayed ``request_id`` returns the stored answer for free.

>>> import statcurator as sc
>>> from statcurator.core.schema import Column, TableMeta
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 100)),))
>>> est = sc.estimators.Median("age")
>>> job = prepare(est, meta, loss_from(epsilon=1))
>>> job.columns, job.measurement.cost
(('age',), PureDP(epsilon=Fraction(1, 1)))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from ..core.errors import InvalidParameterError, MetadataError, UnsupportedQueryError
from ..core.measurement import Measurement
from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP, loss_from_parameters
from ..core.relations import AddRemove, ChangeOne, Relation

__all__ = ["Estimator", "Estimate", "Job", "prepare", "relation_of", "loss_from",
           "result_to_json", "result_from_json"]


@runtime_checkable
class Estimator(Protocol):
    """What :meth:`Curator.estimate` needs from an estimator (see the module docs).

    >>> import statcurator as sc
    >>> isinstance(sc.estimators.Median("age"), Estimator)
    True
    """

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """The estimator as a Measurement under the table's declared neighbour relation."""
        ...  # pragma: no cover


def relation_of(meta: Any) -> Relation:
    """The row-level neighbour relation a table declares (``bounded`` → change one row).

    >>> from statcurator.core.schema import Column, TableMeta
    >>> relation_of(TableMeta("t", (Column("x"),), neighbours="bounded"))
    ChangeOne()
    >>> relation_of(None)
    AddRemove()
    """
    if meta is None:
        return AddRemove()
    return ChangeOne() if str(getattr(meta, "neighbours", "unbounded")) == "bounded" \
        else AddRemove()


def loss_from(epsilon: object = None, delta: object = None, rho: object = None,
              *, strings: bool = False) -> PrivacyLoss | None:
    """The loss asked for, or None when no parameter is given (the estimator's own ε).

    >>> loss_from(), loss_from(epsilon=1, delta=1e-6)
    (None, ApproxDP(epsilon=Fraction(1, 1), delta=Fraction(1, 1000000)))
    """
    if epsilon is None and rho is None:
        if delta is not None:
            raise InvalidParameterError("delta was given without epsilon",
                                        remedy="pass epsilon=... together with delta")
        return None
    return loss_from_parameters(epsilon=epsilon, delta=delta, rho=rho, strings=strings)


@dataclass(frozen=True)
class Job:
    """An estimator prepared for one table: its measurement, the columns it reads, and the
    texts recorded in the ledger (no data has been read).

    >>> Job.__dataclass_fields__.keys() >= {"measurement", "columns", "query"}
    True
    """

    measurement: Measurement
    columns: tuple[str, ...]
    query: str
    mechanism: str


def prepare(estimator: Any, meta: Any, loss: PrivacyLoss | None) -> Job:
    """Build the estimator's measurement from declared metadata and check that it can run.

    Refuses (before anything is charged) a person-level privacy unit the estimator does not
    support, columns the metadata does not declare, and a measurement whose input relation
    is not the table's.
    """
    if not callable(getattr(estimator, "measurement", None)):
        raise InvalidParameterError(
            f"{type(estimator).__name__} is not an estimator (it has no measurement method)",
            remedy="pass a statcurator estimator, e.g. sc.estimators.Median('age')")
    unit = getattr(meta, "privacy_unit", None)
    if unit is not None and not unit.is_row and not getattr(estimator, "supports_person_level",
                                                            False):
        raise UnsupportedQueryError(
            f"{type(estimator).__name__} protects one row, but the privacy unit of "
            f"{getattr(meta, 'name', 'this table')!r} is a person with up to "
            f"{unit.max_rows} rows",
            remedy="keep one row per person (aggregate each person's rows) and declare "
                   "privacy_unit = \"row\", or use a SQL query, which bounds contributions")
    columns_of = getattr(estimator, "columns", None)
    cols = tuple(columns_of(meta)) if callable(columns_of) else tuple(meta.names)
    for c in cols:
        if c not in meta:
            raise MetadataError(f"{type(estimator).__name__} reads column {c!r}, which the "
                                f"metadata of {meta.name!r} does not declare",
                                remedy="declared columns are: " + ", ".join(meta.names))
    m = estimator.measurement(meta, loss)
    relation = relation_of(meta)
    if not isinstance(m, Measurement):
        raise InvalidParameterError(f"{type(estimator).__name__}.measurement returned "
                                    f"{type(m).__name__}, not a Measurement",
                                    remedy="return statcurator.core.measurement.Measurement")
    if type(m.input_space) is not type(relation):
        raise InvalidParameterError(
            f"{m.name} is defined under {m.input_space}, but the table's neighbours are "
            f"{relation}", remedy="build the measurement with relation_of(meta)")
    describe = getattr(estimator, "describe", None)
    query = describe() if callable(describe) else repr(estimator)
    return Job(m, cols, str(query), m.name)


def result_to_json(estimator: Any, result: Any) -> str:
    """The text stored in the ledger for ``result`` (see the module docs)."""
    custom = getattr(estimator, "result_to_json", None)
    if callable(custom):
        return str(custom(result))
    own = getattr(result, "to_json", None)
    if callable(own):
        return str(own())
    return json.dumps(_jsonable(result))


def result_from_json(estimator: Any, text: str) -> Any:
    """The result a replay returns, from the stored text."""
    custom = getattr(estimator, "result_from_json", None)
    if callable(custom):
        return custom(text)
    data = json.loads(text)
    if isinstance(data, dict) and data.get("kind") == Estimate.KIND:
        return replace(Estimate.from_json(text), replayed=True)
    return data


# -- the result of the statistics estimators ------------------------------------------------


@dataclass(frozen=True)
class Estimate:
    """A DP estimate: its value, an interval where the method gives one, and its cost.

    ``value`` is a float, a tuple of floats (vector statistics), or ``None`` when the
    mechanism refused (propose-test-release's ⊥: ``refused`` is then True — a normal,
    charged answer). ``interval`` is ``(low, high)`` (or a tuple of them) holding the target
    with probability at least ``1 - alpha`` over the noise, where stated. ``details`` holds
    mechanism facts (noise scale, smooth sensitivity is *not* among them: it is private).

    >>> e = Estimate("median", 37.0, (35.0, 39.0), 0.05, PureDP(1), "smooth sensitivity")
    >>> e.refused, float(e)
    (False, 37.0)
    >>> Estimate.from_json(e.to_json()) == e
    True
    """

    statistic: str
    value: Any
    interval: Any = None
    alpha: float | None = None
    cost: PrivacyLoss = PureDP(0)
    mechanism: str = ""
    refused: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)
    replayed: bool = False

    KIND = "statcurator.estimate"

    def __float__(self) -> float:
        if self.refused or isinstance(self.value, tuple):
            raise InvalidParameterError(f"the {self.statistic} estimate is not one number "
                                        f"({'refused' if self.refused else 'a vector'})",
                                        remedy="read .value (and .refused)")
        return float(self.value)

    def to_json(self) -> str:
        """The estimate as JSON (the cost as exact fractions)."""
        d = asdict(self)
        d.pop("replayed")
        d["cost"] = _loss_to_dict(self.cost)
        d["details"] = _jsonable(dict(self.details))
        d["value"] = _jsonable(self.value)
        d["interval"] = _jsonable(self.interval)
        d["kind"] = self.KIND
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> Estimate:
        """The inverse of :meth:`to_json` (with ``replayed=True`` when read from a ledger)."""
        d = json.loads(text)
        d.pop("kind", None)
        d["cost"] = _loss_from_dict(d["cost"])
        d["value"] = _tuples(d["value"])
        d["interval"] = _tuples(d["interval"])
        return cls(**d)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for the CLI and reports)."""
        out = json.loads(self.to_json())
        out.pop("kind")
        out["cost"] = str(self.cost)
        return out

    def __str__(self) -> str:
        if self.refused:
            return f"{self.statistic}: ⊥ (refused by the test; {self.cost} spent)"
        iv = ""
        if self.interval is not None and self.alpha is not None:
            iv = f", {100 * (1 - self.alpha):g}% interval {_fmt(self.interval)}"
        return f"{self.statistic} = {_fmt(self.value)}{iv} ({self.mechanism}, {self.cost})"


def _fmt(x: Any) -> str:
    if isinstance(x, tuple | list):
        return "(" + ", ".join(_fmt(v) for v in x) + ")"
    return f"{float(x):.6g}" if x is not None else "None"


def _jsonable(x: Any) -> Any:
    if isinstance(x, Fraction):
        return float(x)
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, tuple | list):
        return [_jsonable(v) for v in x]
    if hasattr(x, "tolist"):
        return _jsonable(x.tolist())
    if isinstance(x, PrivacyLoss):
        return str(x)
    return x


def _tuples(x: Any) -> Any:
    return tuple(_tuples(v) for v in x) if isinstance(x, list) else x


def _loss_to_dict(loss: PrivacyLoss) -> dict[str, str]:
    return {"type": type(loss).__name__,
            **{k: str(getattr(loss, k)) for k in loss.__dataclass_fields__}}  # type: ignore[attr-defined]


def _loss_from_dict(d: Mapping[str, str]) -> PrivacyLoss:
    kinds: dict[str, Callable[..., PrivacyLoss]] = {"PureDP": PureDP, "ApproxDP": ApproxDP,
                                                    "ZCDP": ZCDP}
    args = {k: Fraction(v) for k, v in d.items() if k != "type"}
    return kinds[d["type"]](**args)


def require_columns(meta: Any, names: Sequence[str], *, numeric: bool = True
                    ) -> list[tuple[Fraction, Fraction]]:
    """The declared bounds of numeric columns (refused, with a remedy, when undeclared)."""
    out = []
    for n in names:
        col = meta[n]
        if numeric and col.bounds is None:
            raise MetadataError(f"column {n!r} has no declared bounds",
                                remedy=f"declare bounds = [low, high] for {n!r} in the "
                                       "metadata (they are public; never read from the data)")
        out.append(col.bounds)
    return out
