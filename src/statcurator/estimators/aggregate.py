"""Sample-and-aggregate (Nissim, Raskhodnikova & Smith 2007; Smith 2011's private MLE).

Rows go to k disjoint blocks (each row independently to a uniform random block, so a
neighbouring table changes the contents of one block only); any estimator runs on each
block — a Python function of the block, or a scikit-learn estimator (duck-typed: anything
with ``fit`` and ``get_params``; its ``coef_`` and ``intercept_`` are the output) — and the
k outputs, clamped to public ``output_bounds``, are aggregated privately, coordinate by
coordinate (ε split evenly):

* ``"mean"`` — Smith's widened winsorized mean: a quarter of the coordinate's ε buys DP
  quartiles a <= b of the block outputs (exponential mechanism on the public grid), the
  outputs are winsorized to [a - 2(b-a), b + 2(b-a)] (a data-driven range), averaged, and
  the average released with discrete Laplace noise for sensitivity width/k. Its interval
  holds the winsorized block mean with probability 1 - alpha.
* ``"median"`` — the exponential-mechanism median of the block outputs.

For a well-behaved parametric model the block estimates are nearly normal around θ, so the
winsorizing is almost never active and the noise is of order width/(kε) ≪ 1/√n: the private
estimate is asymptotically as efficient as the MLE (Smith 2011). See
``benchmarks/estimators_mle.py``.

>>> import numpy as np, warnings
>>> from statcurator.mechanisms import rng
>>> x = np.random.default_rng(0).exponential(1 / 2.0, 200_000)       # rate λ = 2
>>> rate = lambda block: (len(block) - 1) / block.sum()               # unbiased per block
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with rng.seeded(0):
...         est = sample_and_aggregate(rate, x, epsilon=1, output_bounds=(0, 10), blocks=400,
...                                    bounds=(0, 100))
>>> abs(est.value - 2) < 0.02
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError
from ..core.measures import PrivacyLoss, PureDP
from ..core.numbers import exact
from ..core.relations import Relation
from ..core.schema import TableMeta
from ..mechanisms import LaplaceMechanism, samplers
from ..mechanisms.quantile import QuantileMechanism
from ._common import Statistic, clamp, column_values, default_grid, silenced
from ._protocol import Estimate

__all__ = ["SampleAndAggregate", "sample_and_aggregate", "split_blocks", "aggregate_mean",
           "aggregate_median", "winsorized_mean", "winsorized_mean_mechanism", "block_output"]


def split_blocks(n: int, k: int) -> np.ndarray:
    """A uniform random block (0..k-1) for each of n rows, from the secure generator.

    >>> split_blocks(5, 1).tolist()
    [0, 0, 0, 0, 0]
    """
    return samplers.uniform_int(k, n) if n else np.zeros(0, dtype=np.int64)


def _is_sklearn(fn: Any) -> bool:
    return callable(getattr(fn, "fit", None)) and callable(getattr(fn, "get_params", None))


def _run_block(fn: Any, block: np.ndarray, target: np.ndarray | None) -> np.ndarray:
    if _is_sklearn(fn):
        model = type(fn)(**fn.get_params())  # a fresh clone (sklearn.base.clone, duck-typed)
        model.fit(block, target)
        coef = np.ravel(np.asarray(getattr(model, "coef_", []), dtype=float))
        icpt = np.ravel(np.asarray(getattr(model, "intercept_", []), dtype=float))
        return np.concatenate([coef, icpt])
    return np.ravel(np.asarray(fn(block if block.shape[1] > 1 else block[:, 0]),
                               dtype=float))


def block_output(fn: Any, block: np.ndarray, target: np.ndarray | None,
                 mids: np.ndarray) -> np.ndarray:
    """The analyst's estimator on one block, as exactly ``len(mids)`` finite coordinates.

    Whatever the block makes the estimator do — fail, return another number of outputs,
    return NaN or ±∞, warn, log or print — the block's output is the public midpoint of the
    output bounds (all of it, or the non-finite coordinates), and nothing else escapes:
    warnings are ignored, logging is disabled and Python-level stdout/stderr are discarded
    while it runs. Any of these, raised or shown on one neighbour only, would reveal a
    private row after the charge.

    >>> mids = np.array([0.5, 0.5])
    >>> block_output(lambda b: [b.mean(), np.nan], np.ones((3, 1)), None, mids).tolist()
    [1.0, 0.5]
    >>> block_output(lambda b: [1.0, 2.0, 3.0], np.ones((3, 1)), None, mids).tolist()
    [0.5, 0.5]
    >>> block_output(lambda b: 1 / 0, np.ones((3, 1)), None, mids).tolist()
    [0.5, 0.5]
    """
    with silenced():
        try:
            out = _run_block(fn, block, target)
        except Exception:  # a failing block gets the public default (midpoint)
            return mids.copy()
    if out.shape != mids.shape:
        return mids.copy()
    return np.where(np.isfinite(out), out, mids)


def aggregate_mean(values: np.ndarray, lo: Fraction, hi: Fraction, epsilon: Fraction,
                   alpha: Fraction, grid: Fraction) -> tuple[float, tuple[float, float],
                                                             tuple[float, float]]:
    """Smith's widened winsorized mean of k values in [lo, hi] (ε-DP, change-one among the
    k values): (value, interval, winsorizing range)."""
    k = values.shape[0]
    q = QuantileMechanism(epsilon / 8, lo, hi, default_grid(lo, hi, 12))  # ln G ≈ 8.3
    units = q.to_units(values)
    a = q.sample_units(units, Fraction(1, 4) * k) * q.step
    b = q.sample_units(units, Fraction(3, 4) * k) * q.step
    a, b = min(a, b), max(a, b)
    width = b - a
    left, right = max(lo, a - 2 * width), min(hi, b + 2 * width)
    mech = winsorized_mean_mechanism(k, left, right, epsilon * 3 / 4, grid)
    value = float(winsorized_mean(values, left, right, mech))
    h = mech.accuracy(alpha)
    return value, (value - h, value + h), (float(left), float(right))


def winsorized_mean_mechanism(k: int, left: Fraction, right: Fraction, epsilon: Fraction,
                              grid: Fraction) -> LaplaceMechanism:
    """Laplace noise for the mean of k values clamped to the public [left, right]: one
    changed value moves it by at most (right - left)/k (at least one grid step)."""
    return LaplaceMechanism(max((right - left) / k, grid), epsilon, grid)


def winsorized_mean(values: np.ndarray, left: Fraction, right: Fraction,
                    mech: LaplaceMechanism, size: int | None = None) -> Any:
    """The noisy mean of ``values`` clamped to [left, right] (``size`` draws for tests)."""
    total = math.fsum(clamp(values, left, right).tolist()) / values.shape[0]
    if size is None:
        return mech.release(Fraction(total))
    return mech.release(np.full(size, total))


def aggregate_median(values: np.ndarray, lo: Fraction, hi: Fraction, epsilon: Fraction,
                     grid: Fraction) -> float:
    """The exponential-mechanism median of k values in [lo, hi] (ε-DP)."""
    q = QuantileMechanism(epsilon, lo, hi, grid)
    units = q.to_units(values)
    return float(q.sample_units(units, Fraction(values.shape[0], 2)) * grid)


@dataclass(frozen=True)
class SampleAndAggregate(Statistic):
    """Any estimator made ε-DP by sample-and-aggregate (see the module docs).

    ``fn``: a function of a block (a 1-d array for one column, else a 2-d array with the
    ``columns`` in order) returning a number or a vector; or a scikit-learn estimator,
    fitted on ``columns`` with ``target`` as y. ``output_bounds``: the public range of each
    output coordinate (one pair for all, or one per coordinate). ``blocks``: k (public;
    default ⌊√n_declared⌋ when the metadata declare ``rows``, else 100). Pure ε-DP; the
    input columns need declared bounds (values are clamped to them first).

    The number of released coordinates p is public, fixed before any data are read:
    ``n_outputs`` when given; else the number of pairs in ``output_bounds`` when one pair
    per coordinate is given; else 1 for a function, and ``len(inputs) + 1`` (the
    coefficients and the intercept of a one-target regression or a two-class classifier)
    for a scikit-learn estimator. A block whose output does not have exactly p coordinates
    (a classifier that saw a third class, a histogram that saw a new value), or that fails,
    counts as the midpoint of the output bounds; a non-finite coordinate counts as its
    midpoint (:func:`block_output`). The length of the value, the split ε/p and every error
    depend on public parameters only.

    >>> SampleAndAggregate(len, ("age",), output_bounds=(0, 1000), epsilon=1).columns()
    ('age',)
    >>> SampleAndAggregate(len, ("age",), output_bounds=[(0, 1)] * 3).outputs()
    3
    """

    fn: Any
    inputs: Sequence[str] = ()
    output_bounds: Any = None
    epsilon: Any = None
    target: str | None = None
    blocks: int | None = None
    aggregate: str = "mean"
    bounds: Any = None
    alpha: float = 0.05
    n_outputs: int | None = None

    statistic = "sample-and-aggregate"
    measures = (PureDP,)

    def __post_init__(self) -> None:
        if self.aggregate not in ("mean", "median"):
            raise InvalidParameterError(f"unknown aggregation {self.aggregate!r}",
                                        remedy="use aggregate='mean' or 'median'")
        if self.output_bounds is None:
            raise InvalidParameterError("sample-and-aggregate needs public output bounds",
                                        remedy="pass output_bounds=(low, high) for the "
                                               "estimator's output")
        if not callable(self.fn) and not _is_sklearn(self.fn):
            raise InvalidParameterError("fn must be a function or a scikit-learn estimator",
                                        remedy="pass e.g. fn=np.mean")
        self.outputs()  # refuse mismatched bounds now, before anything is charged

    def _pairs(self) -> list[Any]:
        ob = self.output_bounds
        if len(ob) == 2 and not isinstance(ob[0], Sequence):
            return [ob]
        return list(ob)

    def outputs(self) -> int:
        """p, the number of released coordinates: public (see the class docs)."""
        pairs = self._pairs()
        per_coordinate = not (len(self.output_bounds) == 2
                              and not isinstance(self.output_bounds[0], Sequence))
        p = self.n_outputs
        if p is not None:
            if isinstance(p, bool) or not isinstance(p, int) or not 1 <= p <= 10_000:
                raise InvalidParameterError("n_outputs must be an integer in 1..10000",
                                            remedy="pass n_outputs=<the number of values "
                                                   "the estimator returns>")
        elif per_coordinate:
            p = len(pairs)
        else:
            p = len(tuple(self.inputs)) + 1 if _is_sklearn(self.fn) else 1
        if per_coordinate and len(pairs) not in (1, p):
            raise InvalidParameterError(
                f"{len(pairs)} output bounds for an estimator with {p} outputs",
                remedy="pass one (low, high) pair, or one per output coordinate")
        return p

    def _columns(self) -> tuple[str, ...]:
        cols = tuple(self.inputs)
        return cols + ((self.target,) if self.target is not None else ())

    def describe(self) -> str:
        name = getattr(self.fn, "__name__", type(self.fn).__name__)
        return (f"sample-and-aggregate({name}, columns={list(self.inputs)}, "
                f"target={self.target!r}, blocks={self.blocks}, aggregate={self.aggregate!r}, "
                f"output_bounds={self.output_bounds!r}, n_outputs={self.outputs()})")

    def _mechanism_name(self, loss: PrivacyLoss) -> str:
        how = "widened winsorized mean" if self.aggregate == "mean" else "DP median"
        return f"sample-and-aggregate (NRS 2007), {how} of the block outputs"

    def _k(self, meta: TableMeta) -> int:
        if self.blocks is not None:
            k = self.blocks
            if isinstance(k, bool) or not isinstance(k, int) or k < 2:
                raise InvalidParameterError("blocks must be an integer >= 2",
                                            remedy="blocks=100")
            return k
        return max(10, math.isqrt(meta.rows)) if meta.rows else 100

    def _function(self, meta: TableMeta, loss: PrivacyLoss,
                  relation: Relation) -> Callable[..., Any]:
        k = self._k(meta)
        in_bounds = [self._bounds(meta, c) for c in self.inputs]
        out_bounds = [(exact(a, "output bound", positive=False),
                       exact(b, "output bound", positive=False)) for a, b in self._pairs()]
        p = self.outputs()  # public: fixed here, before any data are read
        bnds = out_bounds * p if len(out_bounds) == 1 else out_bounds
        mids = np.array([float(a + b) / 2 for a, b in bnds])
        eps = loss.epsilon  # type: ignore[attr-defined]
        alpha = Fraction(str(self.alpha))
        target_bounds = (meta[self.target].bounds
                         if self.target is not None and self.target in meta else None)

        def blocks_of(table: Any) -> np.ndarray:
            cols = [clamp(column_values(table, c), a, b)
                    for c, (a, b) in zip(self.inputs, in_bounds, strict=True)]
            X = np.column_stack(cols) if cols else np.zeros((0, 0))
            y = None
            if self.target is not None:
                y = column_values(table, self.target)
                if target_bounds is not None:
                    y = clamp(y, *target_bounds)
            n = X.shape[0]
            assign = split_blocks(n, k)
            order = np.argsort(assign, kind="stable")
            cuts = np.searchsorted(assign[order], np.arange(k + 1))
            outs = []
            for b in range(k):
                rows = order[cuts[b]:cuts[b + 1]]
                outs.append(block_output(self.fn, X[rows], None if y is None else y[rows],
                                         mids))
            return np.array(outs).reshape(k, p)

        def once(table: Any) -> tuple[list[float], list[Any], list[Any]]:
            est = blocks_of(table)
            values, intervals, ranges = [], [], []
            for j, (a, b) in enumerate(bnds):
                grid = default_grid(a, b, 20)
                col = clamp(est[:, j], a, b)
                if self.aggregate == "mean":
                    v, iv, rg = aggregate_mean(col, a, b, eps / p, alpha, grid)
                    intervals.append(iv)
                    ranges.append(rg)
                else:
                    v = aggregate_median(col, a, b, eps / p, grid)
                values.append(v)
            return values, intervals, ranges

        def run(table: Any, size: int | None = None) -> Any:
            if size is not None:  # tests: a new split and a new release each time
                draws = np.array([once(table)[0] for _ in range(size)])
                return draws[:, 0] if draws.shape[1] == 1 else draws
            values, intervals, ranges = once(table)
            single = p == 1
            return Estimate(
                "sample-and-aggregate", values[0] if single else tuple(values),
                (intervals[0] if single else tuple(intervals)) if intervals else None,
                self.alpha if intervals else None, loss, self._mechanism_name(loss),
                details={"blocks": k, "winsorized_to": ranges or None})

        return run

    def columns(self, meta: Any = None) -> tuple[str, ...]:
        """The columns the estimator reads (its inputs, then the target)."""
        return self._columns()


def sample_and_aggregate(fn: Any, data: Any, columns: Sequence[str] | None = None, *,
                         epsilon: Any, output_bounds: Any, target: str | None = None,
                         blocks: int | None = None, aggregate: str = "mean",
                         bounds: Any = None, alpha: float = 0.05,
                         meta: Any = None, n_outputs: int | None = None) -> Estimate:
    """Run ``fn`` privately on ``data`` by sample-and-aggregate (local use).

    ``data``: a table (``columns`` name the inputs; a scikit-learn ``fn`` also needs
    ``target``) or a 1-d array (its own bounds default to ``output_bounds``… pass
    ``bounds`` to clamp it). ``n_outputs``: the number of values ``fn`` returns (see
    :class:`SampleAndAggregate` for the public default).

    >>> import numpy as np
    >>> x = np.linspace(0, 1, 40000)
    >>> est = sample_and_aggregate(np.mean, x, epsilon=1, output_bounds=(0, 1), blocks=400,
    ...                            bounds=(0, 1))
    >>> abs(est.value - 0.5) < 0.05
    True
    """
    if columns is None:
        data = {"x": np.asarray(data, dtype=float)}
        columns = ("x",)
        if bounds is None:
            raise InvalidParameterError("an array needs public bounds",
                                        remedy="pass bounds=(low, high)")
    return SampleAndAggregate(fn, tuple(columns), output_bounds, epsilon, target, blocks,
                              aggregate, bounds, alpha, n_outputs).run(data, meta)
