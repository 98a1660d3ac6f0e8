"""What the statistics estimators share: reading columns, declared bounds, budgets, grids.

Every estimator is a frozen dataclass with an optional own budget (``epsilon``, ``delta``,
``rho``) and optional public ``bounds`` (used when no metadata is given, or to narrow the
declared ones — bounds are the analyst's public choice, never read from the data). It is a
:class:`~statcurator.core.measurement.Measurement` through :meth:`Statistic.measurement`,
runs locally with :meth:`Statistic.run`, and draws many independent releases on one table
with :meth:`Statistic.sample` (tests, benchmarks).

>>> import numpy as np
>>> column_values({"x": [1, None, 3]}, "x").tolist()
[1.0, nan, 3.0]
>>> clamp(np.array([-5.0, np.nan, 50.0]), Fraction(0), Fraction(10)).tolist()
[0.0, 5.0, 10.0]
>>> default_grid(Fraction(0), Fraction(120))     # ≈ range/2^36
Fraction(1, 1073741824)
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import threading
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import DataError, InvalidParameterError, MetadataError
from ..core.measurement import Measurement
from ..core.measures import ZCDP, ApproxDP, PrivacyLoss, PureDP
from ..core.numbers import ceil_fraction, exact
from ..core.relations import Relation
from ..core.schema import Column, TableMeta
from ._protocol import Estimate, loss_from, relation_of

__all__ = ["Statistic", "column_values", "raw_values", "clamp", "default_grid", "scaled_map",
           "pure_or_approx", "float_down", "float_up", "silenced", "quietly", "as_floats"]


def column_values(data: Any, name: str | int) -> np.ndarray:
    """One column as float64 (NULL, and any value that is not a number, → NaN) from a
    pyarrow table, a statcurator Dataset, a pandas data frame, a mapping of columns, or a
    numpy array (1-d: the column itself)."""
    if isinstance(data, np.ndarray):
        if data.ndim == 1:
            return data.astype(np.float64)
        if isinstance(name, int):
            return data[:, name].astype(np.float64)
        raise DataError("a 2-d array has no column names", remedy="address columns by position")
    # row by row, never an error (the values are private): a value that is not a number
    # becomes NaN, which clamp() imputes with the public midpoint
    return as_floats(raw_values(data, name))


def as_floats(values: Any) -> np.ndarray:
    """A column as float64, row by row: NULL and anything that is not a number become NaN
    (never an error: the values are private).

    >>> as_floats(np.array([1, None, "x", "2.5"], dtype=object)).tolist()
    [1.0, nan, nan, 2.5]
    """
    arr = np.asarray(values)
    if arr.dtype.kind in "iufb":
        return arr.astype(np.float64).reshape(-1)
    out = np.empty(arr.size, dtype=np.float64)
    for i, v in enumerate(arr.reshape(-1).tolist()):
        try:
            out[i] = np.nan if v is None else float(v)
        except (TypeError, ValueError, OverflowError):
            out[i] = np.nan
    return out


def quietly(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``fn`` run with warnings silenced (:func:`silenced`, streams left alone): a warning
    raised while computing on private rows (a division by zero on one neighbour only) would
    be released beside the charged answer."""

    def run(data: Any) -> Any:
        with silenced(streams=False):
            return fn(data)

    return run


_SILENCED = threading.RLock()  # silenced() nests (an estimator's blocks inside its run)


class _Discard(io.TextIOBase):
    """A text stream that forgets what is written to it."""

    def write(self, s: str) -> int:
        return len(s)


@contextlib.contextmanager
def silenced(*, streams: bool = True) -> Iterator[None]:
    """Run code on private data without side channels: warnings and numpy's floating point
    errors ignored and, with ``streams`` (for the analyst's own code), logging disabled and
    Python-level stdout/stderr discarded.

    A warning, a log line or a message printed by an estimator fitted on private rows (a
    scikit-learn ``ConvergenceWarning`` caused by one extreme row) is a one-bit release on
    top of the charged answer; inside this block none of them escapes. Output written by
    native code straight to the file descriptors is not captured: run such estimators
    quietly (``verbose=0``, the default of scikit-learn's).

    >>> with silenced():
    ...     warnings.warn("a row is odd")
    ...     print("seen by nobody")
    ...     x = np.float64(1) / 0
    """
    # warnings' filters, sys.stdout/stderr and logging's switch are process-wide: two
    # threads entering and leaving in an interleaved order would restore each other's
    # state (and could leave warnings or stdout off for good); one block at a time
    with _SILENCED, contextlib.ExitStack() as stack:
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("ignore")
        stack.enter_context(np.errstate(all="ignore"))
        if streams:
            stack.enter_context(contextlib.redirect_stdout(_Discard()))
            stack.enter_context(contextlib.redirect_stderr(_Discard()))
            previous = logging.root.manager.disable
            logging.disable(logging.CRITICAL)
            stack.callback(logging.disable, previous)
        yield


def raw_values(data: Any, name: str | int) -> np.ndarray:
    """One column as a numpy array of its own type (labels, node ids).

    >>> raw_values({"a": ["x", "y"]}, "a").tolist()
    ['x', 'y']
    """
    inner = getattr(data, "table", None)
    if inner is not None and hasattr(inner, "column_names"):
        data = inner
    if hasattr(data, "column_names") and hasattr(data, "column"):
        if name not in data.column_names:
            raise DataError(f"the data have no column {name!r}",
                            remedy="columns are: " + ", ".join(data.column_names))
        return data.column(name).to_numpy(zero_copy_only=False)
    try:
        return np.asarray(data[name])
    except (KeyError, IndexError, TypeError):
        raise DataError(f"the data have no column {name!r}",
                        remedy="pass a table with that column") from None


def float_down(x: Fraction) -> float:
    """The largest float <= x."""
    f = float(x)
    return f if Fraction(f) <= x else math.nextafter(f, -math.inf)


def float_up(x: Fraction) -> float:
    """The smallest float >= x."""
    f = float(x)
    return f if Fraction(f) >= x else math.nextafter(f, math.inf)


def clamp(values: np.ndarray, lo: Fraction, hi: Fraction) -> np.ndarray:
    """Clamp to the declared bounds (outward-rounded floats); NULL/NaN become the midpoint —
    a public imputation, so the transformation is 1-stable under both neighbour relations."""
    a, b = float_down(lo), float_up(hi)
    out = np.clip(values, a, b)
    out[np.isnan(out)] = (a + b) / 2
    return out


def default_grid(lo: Fraction, hi: Fraction, bits: int = 36) -> Fraction:
    """A dyadic output grid about 2^-bits of the declared range (exact float outputs)."""
    width = hi - lo if hi > lo else Fraction(1)
    e = math.floor(math.log2(float(width))) - bits
    return Fraction(2) ** e


def scaled_map(loss: PrivacyLoss) -> Callable[[Fraction], PrivacyLoss]:
    """The privacy map of a mechanism calibrated to ``loss`` for one neighbour step: group
    privacy for ⌈d⌉ steps (linear for ε, k·e^((k-1)ε)·δ for δ, quadratic for ρ).

    >>> scaled_map(PureDP(1))(Fraction(2)), scaled_map(ZCDP(1))(Fraction(0))
    (PureDP(epsilon=Fraction(2, 1)), ZCDP(rho=Fraction(0, 1)))
    """

    def pmap(d: Fraction) -> PrivacyLoss:
        k = ceil_fraction(exact(d, "distance", allow_zero=True))
        if k == 0:
            return _zero(loss)
        return loss.group(k)

    return pmap


def _zero(loss: PrivacyLoss) -> PrivacyLoss:
    if isinstance(loss, ZCDP):
        return ZCDP(0)
    if isinstance(loss, ApproxDP):
        return ApproxDP(0, 0)
    return PureDP(0)


def pure_or_approx(loss: PrivacyLoss, what: str) -> tuple[Fraction, Fraction]:
    """(ε, δ) of a PureDP/ApproxDP budget; ρ-zCDP is refused (these mechanisms are not
    Gaussian)."""
    if isinstance(loss, PureDP):
        return loss.epsilon, Fraction(0)
    if isinstance(loss, ApproxDP):
        return loss.epsilon, loss.delta
    raise InvalidParameterError(f"{what} is calibrated in ε (or (ε, δ)), not ρ-zCDP",
                                remedy="pass epsilon=... (and delta=...) instead of rho")


class Statistic:
    """Base of the statistics estimators (subclasses are frozen dataclasses).

    Subclasses define ``statistic`` (a name), ``_columns()`` and
    ``_function(meta, loss, relation)``, which returns ``f(table, size=None)``: one
    :class:`Estimate` for ``size=None``, else an array of ``size`` independent released
    values (for tests and benchmarks; never through the curator).
    """

    statistic = "statistic"
    supports_person_level = False
    #: the loss types the estimator can be calibrated to
    measures: tuple[type[PrivacyLoss], ...] = (PureDP, ApproxDP)

    # -- the protocol ---------------------------------------------------------------------
    def columns(self, meta: Any = None) -> tuple[str, ...]:
        """The columns the estimator reads."""
        return tuple(self._columns())

    def describe(self) -> str:
        """One line for the ledger: the statistic and its public parameters."""
        skip = {"epsilon", "delta", "rho"}
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                         if k not in skip and v is not None and not k.startswith("_"))
        return f"{self.statistic}({args})"

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None) -> Measurement:
        """The estimator as a Measurement under the table's declared neighbour relation."""
        meta = self._meta(meta)
        loss = self._loss(loss)
        relation = relation_of(meta)
        return Measurement(relation, type(loss), quietly(self._function(meta, loss, relation)),
                           scaled_map(loss),
                           f"{self.statistic}: {self._mechanism_name(loss)}")

    # -- local use ------------------------------------------------------------------------
    def run(self, data: Any, meta: Any = None) -> Estimate:
        """Run on a table directly (no ledger): the answer of :meth:`measurement`."""
        return self.measurement(meta if meta is not None else getattr(data, "meta", None))(data)

    def sample(self, data: Any, size: int, meta: Any = None) -> np.ndarray:
        """``size`` independent releases on the same table (their values), for tests."""
        meta = self._meta(meta if meta is not None else getattr(data, "meta", None))
        loss = self._loss(None)
        fn = self._function(meta, loss, relation_of(meta))
        with silenced(streams=False):
            draws: np.ndarray = fn(data, size)
        return draws

    # -- helpers for subclasses -------------------------------------------------------------
    def _columns(self) -> Sequence[str]:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:  # pragma: no cover
        raise NotImplementedError

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        return type(self).__name__

    def _loss(self, loss: PrivacyLoss | None) -> PrivacyLoss:
        if loss is None:
            loss = loss_from(getattr(self, "epsilon", None), getattr(self, "delta", None),
                             getattr(self, "rho", None))
        if loss is None:
            raise InvalidParameterError(f"no privacy budget for {self.statistic}",
                                        remedy="pass epsilon=... (to the estimator, or to "
                                               "Curator.estimate / --epsilon)")
        if not isinstance(loss, self.measures):
            names = " or ".join(m.__name__ for m in self.measures)
            remedy = ("pass delta=1e-6 as well (this mechanism is (ε, δ)-DP)"
                      if self.measures == (ApproxDP,) and isinstance(loss, PureDP)
                      else "pass epsilon=... alone (this mechanism is pure ε-DP)"
                      if self.measures == (PureDP,) else "pass epsilon=... (and delta=...)")
            raise InvalidParameterError(f"{self.statistic} is calibrated as {names}, not "
                                        f"{type(loss).__name__}", remedy=remedy)
        if isinstance(loss, ApproxDP) and loss.delta == 0:
            loss = PureDP(loss.epsilon)
        return loss

    def _meta(self, meta: Any) -> TableMeta:
        bounds = getattr(self, "bounds", None)
        cols = [c for c in self._columns()]
        if meta is None:
            if bounds is None:
                raise MetadataError(f"{self.statistic} needs declared bounds",
                                    remedy="pass bounds=(low, high) (public, not read from "
                                           "the data), or metadata")
            spec = self._bounds_spec(bounds, cols)
            return TableMeta("data", tuple(Column(c, type="real", bounds=spec.get(c))
                                           for c in cols))
        if not isinstance(meta, TableMeta):
            raise MetadataError(f"cannot use {type(meta).__name__} as metadata",
                                remedy="pass a statcurator TableMeta")
        if bounds is not None:
            spec = self._bounds_spec(bounds, cols)
            new = tuple(Column(c.name, type="real" if c.name in spec else c.type,
                               bounds=spec.get(c.name, c.bounds), categories=c.categories,
                               nullable=c.nullable) for c in meta.columns)
            extra = tuple(Column(c, type="real", bounds=spec[c]) for c in spec
                          if c not in meta)
            meta = meta.replace(columns=new + extra)
        return meta

    def _bounds_spec(self, bounds: Any, cols: Sequence[str]) -> dict[str, tuple[Any, Any]]:
        if isinstance(bounds, Mapping):
            return {str(k): tuple(v) for k, v in bounds.items()}
        b = tuple(bounds)
        if len(b) == 2 and not isinstance(b[0], tuple | list):
            return {c: b for c in cols}
        if len(b) != len(cols):
            raise InvalidParameterError(f"{len(b)} bounds for {len(cols)} columns",
                                        remedy="pass one (low, high) pair per column")
        return {c: tuple(v) for c, v in zip(cols, b, strict=True)}

    def _bounds(self, meta: TableMeta, name: str) -> tuple[Fraction, Fraction]:
        col = meta[name]
        if col.bounds is None:
            raise MetadataError(f"column {name!r} has no declared bounds",
                                remedy=f"declare bounds = [low, high] for {name!r} in the "
                                       "metadata (Python: or pass bounds=(low, high))")
        return col.bounds

    def _grid(self, lo: Fraction, hi: Fraction) -> Fraction:
        g = getattr(self, "grid", None)
        return default_grid(lo, hi) if g is None else exact(g, "grid")
