"""Differentially private ID3 decision trees and random forests of them.

The tree is DiffPID3 of Friedman & Schuster, *Data mining with differential privacy*
(KDD 2010), the DP decision tree of the database-privacy lectures:

* every node takes a noisy count N_T of its rows (Laplace, sensitivity 1);
* a node becomes a leaf when it is at the last level, has no attribute left, or is too
  small for its noisy statistics to mean anything: N_T / (t·C) < √2/ε' (t: the largest
  domain among the remaining attributes, C: the number of classes); a leaf releases its
  noisy class counts (vector Laplace, L1 sensitivity 1);
* otherwise the **exponential mechanism** chooses the splitting attribute by its score —
  ``"max"`` (Σ_v max_c τ_vc, sensitivity 1), ``"gini"`` (sensitivity 2) — both monotone
  under add/remove (a new row never lowers the first nor raises the second for any
  attribute), so the factor 2 of the mechanism drops — or ``"gain"`` (information gain,
  sensitivity log₂(N+1) + 1/ln 2 for a public bound N on the node size; the bound is
  enforced: a node with n > N rows scores N/n of its gain, the gain of N rows with its
  proportions, so a table larger than declared costs accuracy, never privacy) — and each
  value of the attribute gets a child.

Every row meets one node per level, so the nodes of a level compose in parallel; a level
spends 2ε' (a count, and a split or the leaf counts), and a tree of depth D spends
2ε'(D+1) = ε. The **depth is chosen from the budget**: a first noisy count of the table
(spending ε/(2(D_max+1))) sizes the tree so that a typical node at the last level still has
more rows than the noise of its class counts; the rest of ε is split over the 2D+1
remaining steps.

:class:`RandomForestClassifier` grows one such tree per *disjoint* random part of the rows
(each row goes to one tree, chosen independently by the secure generator), so the forest
is ε-DP by parallel composition, and averages their class probabilities.

>>> from statcurator import datasets
>>> adult = datasets.adult()
>>> tree = DecisionTreeClassifier(epsilon=1, target="salary-class")
>>> tree.measurement(adult.meta).cost
PureDP(epsilon=Fraction(1, 1))
>>> _ = tree.fit(adult)
>>> tree.classes_
('>50K', '<=50K')
>>> 0.7 < tree.score(adult) <= 1
True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ...core.errors import InvalidParameterError, MetadataError
from ...core.measurement import Measurement
from ...core.measures import PrivacyLoss
from ...core.numbers import ln_bounds, round_up
from ...core.relations import AddRemove, Relation
from ...mechanisms import ExponentialMechanism, LaplaceMechanism, VectorLaplaceMechanism
from ._base import Described, as_epsilon, epsilon_of, pure_measurement
from ._domain import Attribute, categorical, columns_of, domain_from_meta, relation_of

__all__ = ["DecisionTreeClassifier", "RandomForestClassifier", "split_scores",
           "split_mechanism", "node_mechanisms", "grow_tree", "CRITERIA"]

#: the split criteria and the sensitivity of their scores (``gain``'s depends on a bound N)
CRITERIA = ("max", "gini", "gain")
#: floats compute the gini and gain scores: their sensitivity is declared with this slack
#: (the rounding error of a float score is far below 2^-30 of the score's sensitivity)
_FLOAT_SLACK = Fraction(1) + Fraction(1, 2**30)
_MAX_DEPTH = 12


# -- the split step (exposed for the DP tests) ------------------------------------------------


def split_scores(criterion: str, X: np.ndarray, y: np.ndarray, attributes: Sequence[int],
                 sizes: Sequence[int], n_classes: int, rows_bound: int | None = None
                 ) -> np.ndarray:
    """The score of splitting rows ``X, y`` (codes) on each candidate attribute.

    ``max``: Σ_v max_c τ_vc (int); ``gini``: Σ_v Σ_c τ_vc²/τ_v - N; ``gain``:
    Σ_v Σ_c τ_vc log₂(τ_vc/τ_v) (minus the conditional entropy times N), where τ_vc counts
    the rows with value v and class c (Friedman & Schuster 2010, §4).

    With ``rows_bound`` N, a ``gain`` score of a node with n > N rows is scaled by N/n:
    -N·H(class | attribute), the score of N rows with the node's proportions. The ranking
    of the attributes is unchanged, and the score's sensitivity is then at most
    max(log₂(N+1) + 1/ln 2, log₂ C) whatever the node's real size (see
    :func:`split_mechanism`): the bound N is *enforced*, not trusted.

    >>> X = np.array([[0, 0], [0, 1], [1, 0], [1, 1]]); y = np.array([0, 0, 1, 1])
    >>> split_scores("max", X, y, [0, 1], [2, 2], 2).tolist()   # attribute 0 predicts y
    [4, 2]
    >>> split_scores("gain", X, y, [0, 1], [2, 2], 2, rows_bound=2).tolist()  # n = 4 > 2
    [0.0, -2.0]
    """
    out = []
    for a in attributes:
        k = sizes[a]
        tau = np.bincount(X[:, a] * n_classes + y, minlength=k * n_classes).reshape(
            k, n_classes)
        if criterion == "max":
            out.append(int(tau.max(axis=1).sum()))
            continue
        tv = tau.sum(axis=1)
        used = tv > 0
        t, tvu = tau[used].astype(np.float64), tv[used].astype(np.float64)
        if criterion == "gini":
            out.append(float(((t * t).sum(axis=1) / tvu).sum() - tvu.sum()))
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                logs = np.where(t > 0, np.log2(t / tvu[:, None]), 0.0)
            score = float((t * logs).sum())
            n = X.shape[0]
            if rows_bound is not None and n > rows_bound:
                score = score * rows_bound / n
            out.append(score)
    return np.asarray(out)


def split_mechanism(criterion: str, epsilon: object, rows_bound: int | None = None
                    ) -> ExponentialMechanism:
    """The exponential mechanism that picks a split by ``criterion`` at budget ε per row.

    >>> split_mechanism("max", 1).coefficient            # monotone counts: ε/Δ, Δ = 1
    Fraction(1, 1)
    >>> m = split_mechanism("gini", 1)
    >>> m.sensitivity > 2, m.monotonic
    (True, True)
    """
    eps = as_epsilon(epsilon)
    if criterion == "max":
        # adding a row raises Σ_v max_c τ_vc of every attribute by 0 or 1: monotone, Δ = 1
        return ExponentialMechanism(eps, 1, monotonic=True)
    if criterion == "gini":
        # adding a row (class c, value v) changes Σ_c τ_vc²/τ_v - N by
        # -((τ_v - τ_vc)² + Σ_c' τ_vc'² - τ_vc²)/(τ_v(τ_v + 1)) in (-2, 0]: monotone, Δ = 2
        return ExponentialMechanism(eps, 2 * _FLOAT_SLACK, monotonic=True)
    if criterion == "gain":
        if rows_bound is None:
            raise MetadataError(
                "the information-gain criterion needs a public bound on the number of rows",
                remedy="declare rows = N in the table's metadata, pass rows_bound=N, or use "
                       "criterion=\"max\"")
        if isinstance(rows_bound, bool) or not isinstance(rows_bound, int) or rows_bound < 1:
            raise InvalidParameterError(f"rows_bound must be a positive integer, got "
                                        f"{rows_bound!r}", remedy="pass rows_bound=10000")
        # Friedman & Schuster 2010: adding a row (value v, class c) changes the gain score G
        # by h(τ_vc) - h(τ_v) in [-h(n), 0], h(x) = (x+1)log₂(x+1) - x·log₂x <= log₂(x+1)
        # + 1/ln 2, so Δ <= log₂(N+1) + 1/ln 2 while nodes hold <= N rows. split_scores
        # scales the score of a larger node (n >= N) to N·G/n; one row then moves it by
        # N/(n+1)·(δ - G/n), δ in [-h(n), 0], -G/n in [0, log₂ C], and N·h(n)/(n+1) <= h(N)
        # (h is concave, h(0) = 0): Δ <= max(log₂(N+1) + 1/ln 2, log₂ C). Callers pass
        # N >= C - 1 (grow_tree does), where the first term is the larger. Bounded exactly:
        ln2 = ln_bounds(2, 64)[0]
        delta = (ln_bounds(rows_bound + 1, 64)[1] + 1) / ln2
        return ExponentialMechanism(eps, round_up(delta * _FLOAT_SLACK, 40))
    raise InvalidParameterError(f"unknown split criterion {criterion!r}",
                                remedy="use one of: " + ", ".join(CRITERIA))


def node_mechanisms(criterion: str, step: Fraction, rows_bound: int | None = None
                    ) -> tuple[LaplaceMechanism, VectorLaplaceMechanism, ExponentialMechanism]:
    """The three mechanisms of a node at budget ``step`` per row: its noisy count (Laplace,
    sensitivity 1), a leaf's noisy class counts (vector Laplace, L1 sensitivity 1: one row
    is in one class) and the split choice (:func:`split_mechanism`).

    >>> count, leaf, split = node_mechanisms("max", Fraction(1, 4))
    >>> count.scale, leaf.scale, split.coefficient
    (Fraction(4, 1), Fraction(4, 1), Fraction(1, 4))
    """
    return (LaplaceMechanism(1, step), VectorLaplaceMechanism(1, step),
            split_mechanism(criterion, step, rows_bound))


def choose_depth(n_hat: int, sizes: Sequence[int], n_classes: int, epsilon: Fraction,
                 max_depth: int) -> int:
    """The largest depth D <= ``max_depth`` whose typical last-level node keeps more rows
    than the noise of its class counts at the per-step budget ε' = ε/(2D+1).

    A node at depth D holds about n̂/t̄^D rows (t̄: geometric mean domain size); its noisy
    class counts are worth reading while that is at least C·√2/ε' (C classes, √2/ε' the
    noise's standard deviation) — Friedman & Schuster's stopping rule, at the leaves.

    >>> choose_depth(30000, [7, 16, 14, 2], 2, Fraction(1), 4)
    3
    >>> choose_depth(10, [7, 16], 2, Fraction(1), 4)
    0
    """
    if not sizes:
        return 0
    tbar = math.exp(sum(math.log(max(s, 2)) for s in sizes) / len(sizes))
    best = 0
    for d in range(1, max_depth + 1):
        eps_step = float(epsilon) / (2 * d + 1)
        if max(n_hat, 0) / tbar**d >= n_classes * math.sqrt(2) / eps_step:
            best = d
    return best


# -- the fitted tree -------------------------------------------------------------------------


@dataclass
class _Tree:
    """Nodes in breadth-first order: attribute (-1 for a leaf), first child, noisy count,
    class probabilities (leaves)."""

    attribute: list[int] = field(default_factory=list)
    children: list[np.ndarray | None] = field(default_factory=list)
    count: list[int] = field(default_factory=list)
    proba: list[np.ndarray | None] = field(default_factory=list)
    depth: int = 0

    def add(self, count: int) -> int:
        self.attribute.append(-1)
        self.children.append(None)
        self.count.append(count)
        self.proba.append(None)
        return len(self.count) - 1

    def to_dict(self) -> dict[str, Any]:
        return {"attribute": self.attribute, "count": self.count, "depth": self.depth,
                "children": [None if c is None else c.tolist() for c in self.children],
                "proba": [None if p is None else p.tolist() for p in self.proba]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> _Tree:
        return cls(list(d["attribute"]),
                   [None if c is None else np.array(c, dtype=np.int64) for c in d["children"]],
                   list(d["count"]), [None if p is None else np.array(p) for p in d["proba"]],
                   int(d["depth"]))

    @property
    def n_leaves(self) -> int:
        return sum(a < 0 for a in self.attribute)

    def predict_proba(self, X: np.ndarray, n_classes: int) -> np.ndarray:
        out = np.empty((X.shape[0], n_classes))
        stack = [(0, np.arange(X.shape[0]))]
        while stack:
            node, rows = stack.pop()
            if rows.size == 0:
                continue
            a = self.attribute[node]
            if a < 0:
                out[rows] = self.proba[node]
                continue
            kids = self.children[node]
            assert kids is not None
            vals = X[rows, a]
            order = np.argsort(vals, kind="stable")
            bounds = np.searchsorted(vals[order], np.arange(kids.size + 1))
            for v in range(kids.size):
                stack.append((int(kids[v]), rows[order[bounds[v]:bounds[v + 1]]]))
        return out


def _leaf_proba(noisy: np.ndarray) -> np.ndarray:
    c = np.maximum(np.asarray(noisy, dtype=np.float64), 0.0)
    s = c.sum()
    return c / s if s > 0 else np.full(c.size, 1.0 / c.size)


def grow_tree(X: np.ndarray, y: np.ndarray, sizes: Sequence[int], n_classes: int,
              epsilon: Fraction, *, criterion: str = "max", max_depth: int | None = None,
              attributes: Sequence[int] | None = None, rows_bound: int | None = None) -> _Tree:
    """DiffPID3 on codes ``X`` (rows × attributes) and classes ``y``: ε-DP per added or
    removed row (the caller's ε is already per row). With ``criterion="gain"`` the gain of
    a node larger than ``rows_bound`` (raised to C - 1 if smaller) is scaled down to it
    (:func:`split_scores`), so the declared sensitivity holds for any table size."""
    attrs = list(range(len(sizes))) if attributes is None else list(attributes)
    if isinstance(rows_bound, int) and not isinstance(rows_bound, bool):
        rows_bound = max(rows_bound, n_classes - 1)  # then log₂ C <= log₂(N+1)
    split_mechanism(criterion, epsilon, rows_bound)  # refuse a bad criterion before any noise
    dmax = min(len(attrs), _MAX_DEPTH if max_depth is None else max_depth)
    if max_depth is None:
        eps0 = epsilon / (2 * (dmax + 1))
        n_hat = int(LaplaceMechanism(1, eps0).release(X.shape[0]))
        depth = choose_depth(n_hat, [sizes[a] for a in attrs], n_classes, epsilon - eps0,
                             dmax)
        step = (epsilon - eps0) / (2 * depth + 1)
    else:  # a fixed depth: 2(D+1) equal steps, the root's count is one of them
        depth = dmax
        step = epsilon / (2 * (depth + 1))
        n_hat = int(LaplaceMechanism(1, step).release(X.shape[0]))
    count_m, leaf_m, split_m = node_mechanisms(criterion, step, rows_bound)
    threshold = math.sqrt(2) / float(step)

    tree = _Tree(depth=depth)
    root = tree.add(n_hat)
    level = [(root, np.arange(X.shape[0]), attrs)]
    for d in range(depth + 1):
        if d > 0 and level:  # the counts of this level's nodes (disjoint rows: parallel)
            noisy = count_m.release(np.array([rows.size for _, rows, _ in level]))
            for (node, _, _), c in zip(level, noisy.tolist(), strict=True):
                tree.count[node] = int(c)
        nxt = []
        for node, rows, avail in level:
            t = max((sizes[a] for a in avail), default=1)
            if d == depth or not avail or tree.count[node] / (t * n_classes) < threshold:
                counts = np.bincount(y[rows], minlength=n_classes)
                tree.proba[node] = _leaf_proba(leaf_m.release(counts))
                continue
            scores = split_scores(criterion, X[rows], y[rows], avail, sizes, n_classes,
                                  rows_bound if criterion == "gain" else None)
            a = avail[split_m.release(scores)]
            tree.attribute[node] = a
            vals = X[rows, a]
            order = np.argsort(vals, kind="stable")
            bounds = np.searchsorted(vals[order], np.arange(sizes[a] + 1))
            rest = [b for b in avail if b != a]
            kids = []
            for v in range(sizes[a]):
                child = tree.add(0)
                kids.append(child)
                nxt.append((child, rows[order[bounds[v]:bounds[v + 1]]], rest))
            tree.children[node] = np.array(kids, dtype=np.int64)
        level = nxt
    return tree


# -- the estimators --------------------------------------------------------------------------


class _Classifier(Described):
    """Shared data handling of the tree and the forest (scikit-learn shaped)."""

    epsilon: object
    target: str | None
    features: Sequence[str] | None
    domains: Any
    classes: Sequence[Any] | None
    bins: int | Mapping[str, int]
    rows_bound: int | None

    # -- the public problem: feature domains and classes, from metadata or arguments ----
    def _problem(self, X: Any, y: Any = None, meta: Any = None
                 ) -> tuple[tuple[Attribute, ...], Attribute, Any]:
        meta = meta if meta is not None else getattr(X, "meta", None)
        target = y if isinstance(y, str) else self.target
        if meta is not None and target is not None and (y is None or isinstance(y, str)):
            names = list(self.features) if self.features is not None else [
                n for n in meta.names if n != target]
            feats = domain_from_meta(meta, names, bins=self.bins)
            (cls,) = domain_from_meta(meta, [target])
            if cls.numeric:
                raise MetadataError(f"the target {target!r} must be categorical",
                                    remedy="declare its categories in the metadata")
            return feats, cls, meta
        if self.domains is None or self.classes is None:
            raise MetadataError(
                "the feature domains and the classes must be declared (DP never reads them "
                "from the data)", remedy="fit a statcurator Dataset with target=..., or pass "
                "domains={feature: categories} and classes=[...]")
        feats = self._declared_domains()
        return feats, categorical("class", self.classes), meta

    def _declared_domains(self) -> tuple[Attribute, ...]:
        doms = self.domains
        if isinstance(doms, Mapping):
            return tuple(v if isinstance(v, Attribute) else categorical(str(k), v)
                         for k, v in doms.items())
        return tuple(v if isinstance(v, Attribute) else categorical(f"x{i}", v)
                     for i, v in enumerate(doms))

    def _xy(self, data: Any, feats: Sequence[Attribute], cls: Attribute
            ) -> tuple[np.ndarray, np.ndarray]:
        """Feature codes and class codes of a table (target column) or an (X, y) pair."""
        X, y = data if isinstance(data, tuple) and len(data) == 2 else (data, None)
        if y is None or isinstance(y, str):
            name = y or self.target or cls.name
            y = columns_of(X, [name])[name]
        return self._codes(X, feats), cls.encode(y)

    def _codes(self, X: Any, feats: Sequence[Attribute]) -> np.ndarray:
        names: list[Any] = [a.name for a in feats]
        if isinstance(X, np.ndarray) or (isinstance(X, list) and X and isinstance(
                X[0], list | tuple)):
            names = list(range(len(feats)))
        cols = columns_of(X, names)
        return np.stack([a.encode(cols[n]) for a, n in zip(feats, names, strict=True)],
                        axis=1)

    def _relation(self, meta: Any) -> Relation:
        return relation_of(meta) if meta is not None else AddRemove()

    def _budget(self, loss: PrivacyLoss | None) -> Fraction:
        return epsilon_of(loss, self.epsilon)

    def _rows_bound(self, meta: Any) -> int | None:
        if self.rows_bound is not None:
            return int(self.rows_bound)
        return getattr(meta, "rows", None)

    name = "DP ID3"

    def _grow(self, X: np.ndarray, y: np.ndarray, sizes: list[int], n_classes: int,
              eps_row: Fraction, bound: int | None) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def _check(self) -> None:
        if self.criterion not in CRITERIA:
            raise InvalidParameterError(f"unknown split criterion {self.criterion!r}",
                                        remedy="use one of: " + ", ".join(CRITERIA))
        d = self.max_depth
        if d is not None and (isinstance(d, bool) or not isinstance(d, int)
                              or not 0 <= d <= _MAX_DEPTH):
            raise InvalidParameterError(f"max_depth must be an integer in 0..{_MAX_DEPTH}",
                                        remedy="pass max_depth=4, or leave it to the budget")

    def measurement(self, meta: Any = None, loss: PrivacyLoss | None = None, *,
                    features: Sequence[Attribute] | None = None,
                    classes: Attribute | None = None) -> Measurement:
        """The learner as a Measurement: its function fits on a table (or an ``(X, y)``
        pair) and returns the fitted learner; its privacy map is what fitting costs under
        the table's neighbour relation."""
        if features is None or classes is None:
            features, classes, meta = self._problem(meta, None, meta)
        eps = self._budget(loss)
        bound = self._rows_bound(meta)
        feats, cls = tuple(features), classes
        sizes = [a.size for a in feats]
        split_mechanism(self.criterion, 1, bound)  # refuse "gain" without a bound, uncharged

        def build(eps_row: Fraction) -> Any:
            def run(data: Any) -> Any:
                X, y = self._xy(data, feats, cls)
                return self._grow(X, y, sizes, cls.size, eps_row, bound)
            return run

        return self._measured(pure_measurement(self._relation(meta), eps, build, self.name),
                              feats, cls)

    # -- the estimator protocol (Curator.estimate) -----------------------------------------
    def columns(self, meta: Any) -> tuple[str, ...]:
        """The columns a fit reads: the features and the target."""
        feats, cls, _ = self._problem(meta, None, meta)
        return (*(a.name for a in feats), cls.name)

    def _measured(self, m: Measurement, feats: Sequence[Attribute], cls: Attribute
                  ) -> Measurement:
        """The measurement whose result is a fitted copy of this learner (post-processing)."""
        import copy

        cost = m.cost

        def fitted(model: Any) -> Any:
            new = copy.copy(self)
            new._set_fitted(model, feats, cls, cost)
            return new

        return m.then(fitted, m.name)

    def result_to_json(self, result: Any) -> str:
        """A fitted learner as JSON (for the ledger's replays)."""
        return result.to_json()

    def result_from_json(self, text: str) -> Any:
        """The fitted learner stored by :meth:`result_to_json`."""
        import copy
        import json

        from ...core.measures import PureDP

        d = json.loads(text)
        new = copy.copy(self)
        feats = [Attribute.from_dict(a) for a in d["domain"]]
        models = [_Tree.from_dict(t) for t in d["trees"]]
        model = models[0] if d["kind"] == "tree" else list(zip(models, d["attributes"],
                                                                strict=True))
        new._set_fitted(model, feats, categorical("class", d["classes"]),
                        PureDP(Fraction(d["epsilon"])))
        return new

    def to_json(self) -> str:
        """The fitted learner (domain, classes, cost and trees) as JSON."""
        import json

        self._fitted()
        single = not isinstance(self.model_, list)
        trees = [self.model_] if single else [t for t, _ in self.model_]
        return json.dumps({
            "kind": "tree" if single else "forest",
            "domain": [a.to_dict() for a in self.domain_],
            "classes": [v.item() if hasattr(v, "item") else v for v in self.classes_],
            "epsilon": str(self.cost_.epsilon), "trees": [t.to_dict() for t in trees],
            "attributes": None if single else [a for _, a in self.model_]})

    # -- scikit-learn surface --------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> Any:
        """Fit on a Dataset (``target`` set, or ``y`` the target column name) or on ``X, y``
        with declared ``domains`` and ``classes``. Spends the learner's ε."""
        feats, cls, meta = self._problem(X, y)
        m = self.measurement(meta, features=feats, classes=cls)
        fitted = m((X, y) if y is not None else X)
        self._set_fitted(fitted.model_, feats, cls, m.cost)
        return self

    def _set_fitted(self, model: Any, feats: Sequence[Attribute], cls: Attribute,
                    cost: PrivacyLoss) -> None:
        self.model_ = model
        self.features_ = tuple(a.name for a in feats)
        self.domain_ = tuple(feats)
        self.classes_ = tuple(cls.labels)
        self.cost_ = cost

    def _fitted(self) -> None:
        if not hasattr(self, "model_"):
            from ...core.errors import StatcuratorError

            raise StatcuratorError("the classifier is not fitted yet",
                                   remedy="call fit(...) first")

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (rows × classes, in the order of ``classes_``)."""
        self._fitted()
        return self._proba(self._codes(X, self.domain_))

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row."""
        p = self.predict_proba(X)
        return np.asarray(self.classes_, dtype=object)[np.argmax(p, axis=1)]

    def score(self, X: Any, y: Any = None) -> float:
        """Accuracy on ``X`` (labels in ``y``, or in the target column of a table)."""
        self._fitted()
        if y is None or isinstance(y, str):
            name = y if isinstance(y, str) else self.target
            y = columns_of(X, [name])[name]
        truth = np.asarray(y).astype(object)
        return float(np.mean(self.predict(X) == truth))


class DecisionTreeClassifier(_Classifier):
    """An ε-DP ID3 decision tree (Friedman & Schuster 2010) over declared categorical
    features (numeric features are cut into public bins of their declared bounds).

    ``criterion``: ``"max"`` (default), ``"gini"`` or ``"gain"``; ``max_depth``: a fixed
    depth (default: chosen from the budget); ``rows_bound``: the public bound N of
    ``"gain"`` (default: the metadata's ``rows``). It is enforced, not trusted: a node with
    more than N rows has its gain scaled to N rows (:func:`split_scores`), so the gain's
    sensitivity log₂(N+1) + 1/ln 2 holds whatever the table's real size.

    >>> import numpy as np
    >>> X = np.array([["a", "x"], ["b", "y"]] * 50); y = np.array(["yes", "no"] * 50)
    >>> clf = DecisionTreeClassifier(epsilon=2, domains=[["a", "b"], ["x", "y"]],
    ...                              classes=["no", "yes"], max_depth=1).fit(X, y)
    >>> clf.predict_proba(X).shape, clf.cost_
    ((100, 2), PureDP(epsilon=Fraction(2, 1)))
    """

    def __init__(self, epsilon: object = None, *, target: str | None = None,
                 features: Sequence[str] | None = None, criterion: str = "max",
                 max_depth: int | None = None, domains: Any = None,
                 classes: Sequence[Any] | None = None, bins: int | Mapping[str, int] = 10,
                 rows_bound: int | None = None) -> None:
        self.epsilon = epsilon
        self.target = target
        self.features = features
        self.criterion = criterion
        self.max_depth = max_depth
        self.domains = domains
        self.classes = classes
        self.bins = bins
        self.rows_bound = rows_bound
        self._check()

    name = "DP ID3 decision tree"

    def _grow(self, X: np.ndarray, y: np.ndarray, sizes: list[int], n_classes: int,
              eps_row: Fraction, bound: int | None) -> _Tree:
        return grow_tree(X, y, sizes, n_classes, eps_row, criterion=self.criterion,
                         max_depth=self.max_depth, rows_bound=bound)

    def _proba(self, codes: np.ndarray) -> np.ndarray:
        return self.model_.predict_proba(codes, len(self.classes_))

    @property
    def depth_(self) -> int:
        """The depth the budget chose (or ``max_depth``)."""
        self._fitted()
        return self.model_.depth


class RandomForestClassifier(_Classifier):
    """An ε-DP forest of ID3 trees, each grown on a disjoint random part of the rows.

    Each row goes to one of ``n_estimators`` trees, chosen uniformly and independently by
    the secure generator; every tree is ε-DP on its part, so the forest is ε-DP (parallel
    composition). ``max_features``: how many features each tree may use (a random subset,
    chosen without looking at the data; default all).

    >>> from statcurator import datasets
    >>> adult = datasets.adult()
    >>> rf = RandomForestClassifier(epsilon=1, n_estimators=4, target="salary-class")
    >>> _ = rf.fit(adult)
    >>> len(rf.estimators_), rf.cost_
    (4, PureDP(epsilon=Fraction(1, 1)))
    """

    def __init__(self, epsilon: object = None, *, n_estimators: int = 3,
                 target: str | None = None, features: Sequence[str] | None = None,
                 criterion: str = "max", max_depth: int | None = None,
                 max_features: int | None = None, domains: Any = None,
                 classes: Sequence[Any] | None = None, bins: int | Mapping[str, int] = 10,
                 rows_bound: int | None = None) -> None:
        if isinstance(n_estimators, bool) or not isinstance(n_estimators, int) or not (
                1 <= n_estimators <= 1000):
            raise InvalidParameterError("n_estimators must be an integer in 1..1000",
                                        remedy="pass n_estimators=5")
        self.n_estimators = n_estimators
        self.max_features = max_features
        self.epsilon, self.target, self.features = epsilon, target, features
        self.domains, self.classes, self.bins = domains, classes, bins
        self.rows_bound, self.criterion, self.max_depth = rows_bound, criterion, max_depth
        self._check()

    name = "DP ID3 random forest"

    def _grow(self, X: np.ndarray, y: np.ndarray, sizes: list[int], n_classes: int,
              eps_row: Fraction, bound: int | None) -> list[tuple[_Tree, list[int]]]:
        """One tree per disjoint random part of the rows (ε per row: parallel composition)."""
        from ...mechanisms import samplers

        d = len(sizes)
        k = d if self.max_features is None else max(1, min(self.max_features, d))
        part = samplers.uniform_int(self.n_estimators, X.shape[0]) if X.shape[0] else \
            np.zeros(0, dtype=np.int64)
        trees = []
        for t in range(self.n_estimators):
            rows = np.flatnonzero(part == t)
            attrs = _random_subset(d, k)
            trees.append((grow_tree(X[rows], y[rows], sizes, n_classes, eps_row,
                                    criterion=self.criterion, max_depth=self.max_depth,
                                    attributes=attrs, rows_bound=bound), attrs))
        return trees

    def _proba(self, codes: np.ndarray) -> np.ndarray:
        c = len(self.classes_)
        return np.mean([t.predict_proba(codes, c) for t, _ in self.model_], axis=0)

    @property
    def estimators_(self) -> list[Any]:
        """The fitted trees (with the features each may use)."""
        self._fitted()
        return list(self.model_)


def _random_subset(n: int, k: int) -> list[int]:
    """k of range(n) uniformly at random (secure generator; no data involved)."""
    if k >= n:
        return list(range(n))
    from ...mechanisms import samplers

    pool = list(range(n))
    for i in range(k):  # partial Fisher–Yates
        j = i + int(samplers.uniform_int(n - i))
        pool[i], pool[j] = pool[j], pool[i]
    return sorted(pool[:k])
