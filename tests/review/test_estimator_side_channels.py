"""Side channels of the estimators (findings F1–F4 of the estimators review).

F1: sample-and-aggregate read the number of released coordinates p from the block outputs
(a classifier that saw a third class, a histogram that saw a new value), so one added row
changed the length of the answer, the split ε/p, or raised — with certainty. Now p is public
(``n_outputs``, the per-coordinate bounds, or a documented default) and a block of another
size counts as the midpoint.

F2: errors that depend on a private value, raised after the charge (a NULL in a declared
categorical feature, a label 2 in a 0/1 target, a NaN feature of k-means, ...). Now every
such value is mapped, row by row, to a documented public default (1-stable maps).

F3: warnings (and prints, log records) of the analyst's estimator reached the caller on one
neighbour only. Now user code and model fitting run silenced.

F4: the information gain's sensitivity log₂(N+1) + 1/ln 2 trusted a declared row count N.
Now a node with more than N rows scores N/n of its gain, which bounds the sensitivity for
any table size.

Every test compares neighbouring datasets (D' = D plus one row) and is deterministic: it
checks what an attacker sees (the shape of the answer, an exception, a warning) or exact
probabilities, so its false-failure rate is 0 (no statistical test is involved). Each has a
control that puts the old rule back (monkeypatch) and shows the same check catches it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import warnings
from collections.abc import Callable, Iterator
from fractions import Fraction
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.core.errors import DataError
from statcurator.core.schema import Column, TableMeta
from statcurator.estimators import _common, aggregate
from statcurator.estimators.aggregate import SampleAndAggregate, sample_and_aggregate
from statcurator.estimators.learning import _domain, kmeans, tree
from statcurator.estimators.learning._domain import binned, categorical
from statcurator.estimators.learning.tree import split_mechanism, split_scores
from statcurator.estimators.regression import LogisticRegression

from .conftest import make_curator

GEN = np.random.default_rng(0)


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """What an attacker sees of one answer besides its noisy numbers: its shape, or the
    type of the exception."""
    try:
        result = call()
    except Exception as e:  # noqa: BLE001 - the exception is the observation
        return ("error", type(e).__name__)
    value = getattr(result, "value", result)
    return ("released", len(value) if isinstance(value, tuple) else "scalar")


# -- F1: the output dimension of sample-and-aggregate is public -------------------------------

N = 600
X = GEN.uniform(0, 1, N)
LABELS = (X > 0.5).astype(float)
D_CLS = {"x": X, "y": LABELS}
D2_CLS = {"x": np.append(X, 0.3), "y": np.append(LABELS, 2.0)}  # one row of a third class
A = GEN.integers(0, 3, N).astype(float)
D_HIST, D2_HIST = {"a": A}, {"a": np.append(A, 9.0)}  # one row with a new (legal) value


def hist(block: np.ndarray) -> np.ndarray:
    """A normalised histogram of the block: its length is the largest value + 1."""
    return np.bincount(block.astype(int)) / max(len(block), 1)


def _sklearn_logreg(data: dict[str, np.ndarray]) -> Any:
    from sklearn.linear_model import LogisticRegression as SKLog

    return sample_and_aggregate(SKLog(), data, ["x"], target="y", epsilon=1,
                                output_bounds=(-50, 50), blocks=10,
                                bounds={"x": (0, 1), "y": (0, 2)})


def _hist_one_pair(data: dict[str, np.ndarray]) -> Any:
    return sample_and_aggregate(hist, data, ["a"], epsilon=1, output_bounds=(0, 1),
                                blocks=10, bounds={"a": (0, 10)}, n_outputs=3)


def _hist_per_coordinate(data: dict[str, np.ndarray]) -> Any:
    return sample_and_aggregate(hist, data, ["a"], epsilon=1, output_bounds=[(0, 1)] * 3,
                                blocks=10, bounds={"a": (0, 10)})


SA_CASES = [(_sklearn_logreg, D_CLS, D2_CLS, ("released", 2)),
            (_hist_one_pair, D_HIST, D2_HIST, ("released", 3)),
            (_hist_per_coordinate, D_HIST, D2_HIST, ("released", 3))]


@pytest.mark.parametrize("run,d1,d2,expected", SA_CASES)
def test_sample_and_aggregate_output_shape_is_the_same_on_neighbours(
        run: Callable[..., Any], d1: Any, d2: Any, expected: tuple[str, Any]) -> None:
    # deterministic (no false failures): the shape never depends on the data
    for _ in range(3):
        assert outcome(lambda: run(d1)) == outcome(lambda: run(d2)) == expected


def _old_block_output(fn: Any, block: np.ndarray, target: Any, mids: np.ndarray) -> Any:
    """The old rule: the block's output as the estimator returns it (any size)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return aggregate._run_block(fn, block, target)
        except Exception:  # noqa: BLE001
            return mids


def _old_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """The old rule: each block's output kept whatever its size, so the blocks decide p."""
    monkeypatch.setattr(aggregate, "block_output", _old_block_output)


@pytest.mark.parametrize("run,d1,d2,expected", SA_CASES)
def test_control_sample_and_aggregate_with_the_data_dependent_size_is_caught(
        monkeypatch: pytest.MonkeyPatch, run: Callable[..., Any], d1: Any, d2: Any,
        expected: tuple[str, Any]) -> None:
    _old_blocks(monkeypatch)
    seen1, seen2 = outcome(lambda: run(d1)), outcome(lambda: run(d2))
    assert seen1 == expected and seen2 != seen1  # D' now stands out


def test_sample_and_aggregate_through_the_curator_has_a_public_length() -> None:
    meta = TableMeta("t", (Column("a", type="real", bounds=(0, 10)),))
    shapes = []
    for data in (D_HIST, D2_HIST):
        cur = make_curator("memory", pa.table(data), meta)
        est = cur.estimate("t", SampleAndAggregate(hist, ("a",), output_bounds=[(0, 1)] * 3,
                                                   blocks=10), epsilon=1, analyst="eve")
        shapes.append(len(est.value))
    assert shapes == [3, 3]


def test_sample_and_aggregate_dimension_errors_come_before_any_data() -> None:
    with pytest.raises(sc.core.errors.InvalidParameterError, match="one per output"):
        SampleAndAggregate(hist, ("a",), output_bounds=[(0, 1)] * 2, n_outputs=3)
    with pytest.raises(sc.core.errors.InvalidParameterError, match="n_outputs"):
        SampleAndAggregate(hist, ("a",), output_bounds=(0, 1), n_outputs=0)
    from sklearn.linear_model import LinearRegression

    # the public default of a scikit-learn estimator: coefficients + intercept
    assert SampleAndAggregate(LinearRegression(), ("x", "z"), output_bounds=(0, 1)).outputs() \
        == 3


# -- F2: private values never raise -------------------------------------------------------------

M = 300
SEX = list(GEN.choice(["F", "M"], M))
CLS = list(GEN.choice(["no", "yes"], M))
XS = list(GEN.uniform(0, 1, M))
LAB = list((np.array(XS) > .5).astype(float))
CAT_META = TableMeta("t", (Column("sex", categories=("F", "M")),
                           Column("y", categories=("no", "yes"))))
NUM_META = TableMeta("t", (Column("x", type="real", bounds=(0, 1)), Column("y", type="real")))
X_META = TableMeta("t", (Column("x", type="real", bounds=(0, 1)),))

CURATOR_CASES = {
    "tree, NULL feature": (CAT_META, {"sex": SEX, "y": CLS},
                           {"sex": [*SEX, None], "y": [*CLS, "no"]},
                           lambda: sc.DecisionTreeClassifier(target="y", max_depth=1),
                           {"epsilon": 1}),
    "tree, undeclared category": (CAT_META, {"sex": SEX, "y": CLS},
                                  {"sex": [*SEX, "X"], "y": [*CLS, "maybe"]},
                                  lambda: sc.DecisionTreeClassifier(target="y", max_depth=1),
                                  {"epsilon": 1}),
    "MST, NULL feature": (CAT_META, {"sex": SEX, "y": CLS},
                          {"sex": [*SEX, None], "y": [*CLS, "no"]},
                          lambda: sc.synth.MST(columns=["sex", "y"], iters=5),
                          {"epsilon": 1, "delta": 1e-9}),
    "logistic regression, label 2": (NUM_META, {"x": XS, "y": LAB},
                                     {"x": [*XS, 0.3], "y": [*LAB, 2.0]},
                                     lambda: LogisticRegression(target="y", features=["x"]),
                                     {"epsilon": 1}),
    "k-means, NULL value": (X_META, {"x": XS}, {"x": [*XS, None]},
                            lambda: sc.KMeans(2, features=["x"], bounds=[(0, 1)]),
                            {"epsilon": 1}),
}


def _through_curator(case: str) -> tuple[tuple[str, Any], tuple[str, Any]]:
    meta, d1, d2, make, kw = CURATOR_CASES[case]
    seen = []
    for data in (d1, d2):
        cur = make_curator("memory", pa.table(data), meta)
        seen.append(outcome(lambda cur=cur: cur.estimate("t", make(), analyst="eve", **kw)))
    return seen[0], seen[1]


@pytest.mark.parametrize("case", sorted(CURATOR_CASES))
def test_an_invalid_private_value_does_not_raise_after_the_charge(case: str) -> None:
    # deterministic: the outcome is "released" on both neighbours
    seen1, seen2 = _through_curator(case)
    assert seen1[0] == "released" and seen1 == seen2


def _old_encode(self: Any, values: Any) -> np.ndarray:
    """The old Attribute.encode: refuse a value outside the declared domain."""
    arr = np.asarray(values)
    if self.edges is None:
        known = {*self.labels, *(str(v) for v in self.labels)}
        if any(v is None or v not in known for v in arr.tolist()):
            raise DataError("a value outside the declared categories", remedy="clean it")
    elif not np.isfinite(_domain.as_floats(arr)).all():
        raise DataError("NaN", remedy="impute")
    return _NEW_ENCODE(self, values)


_NEW_ENCODE = _domain.Attribute.encode


def _old_labels(self: Any, meta: Any, values: Any) -> np.ndarray:
    num = np.asarray(values, dtype=float)
    if not np.isin(num[~np.isnan(num)], (0.0, 1.0)).all():
        raise DataError("the labels are not 0/1", remedy="declare its two categories")
    return np.where(num == 1.0, 1.0, -1.0)


def _old_scaled(self: Any, data: Any, box: Any) -> np.ndarray:
    cols = _domain.columns_of(data, list(box.names))
    x = np.stack([_domain.as_floats(cols[n]) for n in box.names], axis=1)
    if not np.isfinite(x).all():
        raise DataError("the features hold NaN or ±∞", remedy="impute")
    return box.scale(x)


OLD_RULES = {
    "tree, NULL feature": (_domain.Attribute, "encode", _old_encode),
    "tree, undeclared category": (_domain.Attribute, "encode", _old_encode),
    "MST, NULL feature": (_domain.Attribute, "encode", _old_encode),
    "logistic regression, label 2": (LogisticRegression, "_labels", _old_labels),
    "k-means, NULL value": (kmeans._Clusterer, "_scaled", _old_scaled),
}


@pytest.mark.parametrize("case", sorted(CURATOR_CASES))
def test_control_the_old_refusal_is_caught(monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    owner, name, old = OLD_RULES[case]
    monkeypatch.setattr(owner, name, old)
    seen1, seen2 = _through_curator(case)
    assert seen1[0] == "released" and seen2 == ("error", "DataError")


def test_the_public_defaults_of_invalid_values_are_the_documented_ones() -> None:
    sex = categorical("sex", ["F", "M"])
    odd = np.array(["M", None, "X", float("nan"), ["unhashable"]], dtype=object)
    assert sex.encode(odd).tolist() == [1, 0, 0, 0, 0]  # the first declared category
    assert categorical("s", ["F", "M"]).encode(np.array([None, "M"])).tolist() == [0, 1]
    assert _domain.Attribute("s", ("F", "M"), fallback=1).encode(
        np.array([None], dtype=object)).tolist() == [1]
    x = binned("x", 0, 1, 4)  # NULL, NaN, text: the bin of the midpoint; ±∞: the end bins
    vals = np.array([None, np.nan, "?", np.inf, -np.inf, 0.3], dtype=object)
    assert x.encode(vals).tolist() == [2, 2, 2, 3, 0, 1]
    # 1-stable: a neighbour changes the codes of its own row only
    base = np.array(["F", "M", "M"], dtype=object)
    assert sex.encode(np.append(base, None))[:3].tolist() == sex.encode(base).tolist()


def test_logistic_labels_map_anything_but_the_positive_label_to_minus_one() -> None:
    lr = LogisticRegression(target="y", features=["x"])
    labels = lr._labels(NUM_META, np.array([1.0, 0.0, 2.0, np.nan]))
    assert labels.tolist() == [1.0, -1.0, -1.0, -1.0]
    labels = lr._labels(NUM_META, np.array([1, None, "a", "1"], dtype=object))
    assert labels.tolist() == [1.0, -1.0, -1.0, 1.0]


def test_kmeans_imputes_the_box_midpoint() -> None:
    km = sc.KMeans(2, features=["x"], bounds=[(0, 10)])
    box = km._box(None)
    scaled = km._scaled({"x": np.array([None, 20.0, "?"], dtype=object)}, box)
    assert scaled[:, 0].tolist() == [0.0, 1.0, 0.0]  # midpoint 5 -> 0, 20 clamped to 10 -> 1


def test_policy_mechanisms_and_policy_kmeans_never_refuse_a_value() -> None:
    from statcurator.core.policy import Policy
    from statcurator.mechanisms import OrderedMechanism, PolicyHistogram

    cats = PolicyHistogram(Policy.complete(), epsilon=1, bins=[["a"], ["b"]])
    assert cats.counts(["a", "b", None, "z"]).tolist() == [1, 1]
    nums = PolicyHistogram(Policy.threshold(1), epsilon=1, edges=[1, 2])
    assert nums.counts(np.array([0.5, 1.5, None, "x"], dtype=object)).tolist() == [1, 1, 2]
    om = OrderedMechanism(Policy.line(), epsilon=1, edges=[1, 2])
    assert om.cumulative(np.array([0.5, 1.5, None], dtype=object)).tolist() == [1, 2]
    pk = sc.estimators.learning.PolicyKMeans(2, epsilon=1, policy=Policy.threshold(1),
                                             bounds=(0, 10))
    assert pk._values(np.array([1.0, np.nan]), 5.0).tolist() == [1.0, 5.0]
    m = pk.measurement()
    assert m(np.array([1.0, 2.0, np.nan, 9.0])).shape == (2, 1)


def test_a_non_numeric_value_in_a_numeric_column_is_imputed() -> None:
    values = _common.column_values({"x": np.array([1, None, "x"], dtype=object)}, "x")
    assert values[0] == 1.0 and np.isnan(values[1:]).all()


# -- F3: no warning, print or log record escapes ------------------------------------------------

LOUD = np.append(np.linspace(0, 1, 400), 1000.0)


def noisy_mean(block: np.ndarray) -> float:
    """A user function whose side effects reveal whether the extreme row is in its block."""
    if block.max() > 999:
        warnings.warn("an extreme row", UserWarning, stacklevel=1)
        print("an extreme row")
        logging.getLogger("analyst").error("an extreme row")
    return float(block.mean())


def _side_effects(data: np.ndarray, capsys: pytest.CaptureFixture[str],
                  caplog: pytest.LogCaptureFixture) -> tuple[int, str, int]:
    caplog.clear()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        sample_and_aggregate(noisy_mean, data, epsilon=1, output_bounds=(0, 1000), blocks=10,
                             bounds=(0, 1000))
    out = capsys.readouterr()
    mine = [m for m in w if "seeded" not in str(m.message)]
    return len(mine), out.out + out.err, len(caplog.records)


def test_user_code_side_effects_do_not_escape(capsys: pytest.CaptureFixture[str],
                                              caplog: pytest.LogCaptureFixture) -> None:
    # deterministic: nothing escapes on either neighbour
    caplog.set_level(logging.DEBUG)
    assert _side_effects(LOUD[:-1], capsys, caplog) == (0, "", 0)
    assert _side_effects(LOUD, capsys, caplog) == (0, "", 0)


def test_control_unsilenced_user_code_is_caught(monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str],
                                                caplog: pytest.LogCaptureFixture) -> None:
    @contextlib.contextmanager
    def loud(*, streams: bool = True) -> Iterator[None]:
        yield

    monkeypatch.setattr(aggregate, "silenced", loud)
    monkeypatch.setattr(_common, "silenced", loud)
    caplog.set_level(logging.DEBUG)
    assert _side_effects(LOUD[:-1], capsys, caplog) == (0, "", 0)
    warned, printed, logged = _side_effects(LOUD, capsys, caplog)
    assert warned >= 1 and "extreme" in printed and logged >= 1


def test_no_scikit_learn_warning_escapes_on_either_neighbour() -> None:
    from sklearn.linear_model import LogisticRegression as SKLog

    x = GEN.uniform(0, 1, 1000)
    y = (x + GEN.normal(0, .3, 1000) > .5).astype(float)
    for data in ({"x": x, "y": y}, {"x": np.append(x, 1000.0), "y": np.append(y, 0.0)}):
        for _ in range(3):
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                sample_and_aggregate(SKLog(max_iter=12), data, ["x"], target="y", epsilon=1,
                                     output_bounds=(-50, 50), blocks=10,
                                     bounds={"x": (0, 1000), "y": (0, 1)})
            assert [str(m.message) for m in w if "seeded" not in str(m.message)] == []


# -- F4: the gain's row bound is enforced -------------------------------------------------------

# the review's neighbours: one node of n = 20 000 rows, declared N = 10; D' adds one row of
# the other class whose values leave every candidate attribute's buckets unbalanced
K = 12
NODE = 20_000
XG = np.column_stack([np.zeros(NODE, int)] + [(np.arange(NODE) >> i) % 2 for i in range(K)])
YG = np.ones(NODE, int)
XG2 = np.vstack([XG, [0] + [2] * K])
YG2 = np.append(YG, 0)
SIZES = [2] + [3] * K
STEP = Fraction(1, 10)


def _gain_loss(rows_bound: int | None, declared: int) -> tuple[float, float, float]:
    """(largest score change, declared sensitivity, exact largest log probability ratio)."""
    attrs = list(range(K + 1))
    s1 = split_scores("gain", XG, YG, attrs, SIZES, 2, rows_bound)
    s2 = split_scores("gain", XG2, YG2, attrs, SIZES, 2, rows_bound)
    m = split_mechanism("gain", STEP, declared)
    p1 = np.array([float(v) for v in m.probabilities(s1.tolist())])
    p2 = np.array([float(v) for v in m.probabilities(s2.tolist())])
    return float(np.abs(s2 - s1).max()), float(m.sensitivity), float(
        np.abs(np.log(p1 / p2)).max())


def test_gain_scores_of_a_node_larger_than_declared_stay_within_the_sensitivity() -> None:
    # exact probabilities: deterministic
    change, sensitivity, loss = _gain_loss(10, 10)
    assert change <= sensitivity and loss <= float(STEP) * (1 + 1e-9)


def test_control_the_trusted_bound_is_caught() -> None:
    change, sensitivity, loss = _gain_loss(None, 10)  # the old rule: scores of all n rows
    assert change > sensitivity and loss > float(STEP)


@pytest.mark.parametrize("bound", [1, 2, 5, 20])
def test_capped_gain_sensitivity_holds_on_every_small_neighbour(bound: int) -> None:
    # every node of up to 3·bound + 2 rows over 2 values × 3 classes, and each row added to it
    # (exhaustive over the count tables τ reached by a walk; deterministic)
    m = split_mechanism("gain", 1, max(bound, 2))
    gen = np.random.default_rng(bound)
    for n in range(0, 3 * bound + 3):
        for _ in range(20):
            X = gen.integers(0, 2, (n, 1))
            y = gen.integers(0, 3, n)
            s = split_scores("gain", X, y, [0], [2], 3, max(bound, 2))
            for v in range(2):
                for c in range(3):
                    s2 = split_scores("gain", np.vstack([X, [[v]]]), np.append(y, c), [0],
                                      [2], 3, max(bound, 2))
                    assert abs(s2[0] - s[0]) <= float(m.sensitivity)


def test_a_gain_tree_caps_its_nodes_at_the_declared_rows(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    seen: list[Any] = []
    real = tree.split_scores

    def spy(*args: Any) -> np.ndarray:
        seen.append((args[1].shape[0], args[-1]))
        return real(*args)

    monkeypatch.setattr(tree, "split_scores", spy)
    meta = TableMeta("t", (Column("a", categories=("0", "1")),
                           Column("c", categories=("0", "1"))), rows=10)
    n = 2000
    cur = make_curator("memory", pa.table({"a": [str(i % 2) for i in range(n)],
                                           "c": [str(i % 3 % 2) for i in range(n)]}), meta)
    cur.estimate("t", sc.DecisionTreeClassifier(target="c", criterion="gain", max_depth=1),
                 epsilon=1, analyst="eve")
    assert seen and all(bound == 10 for _, bound in seen)
    assert math.isfinite(float(split_mechanism("gain", 1, 10).sensitivity))


def test_a_rows_code_depends_on_that_row_alone_whatever_the_other_rows_types() -> None:
    """helper-34: the fast path ran np.unique over mixed values, which merges 1, 1.0 and
    True (equal in Python): the value 1 was coded 0 alone, 1 beside True and 2 beside 1.0,
    so adding one row changed the codes of others."""
    import numpy as np

    from statcurator.estimators.learning._domain import categorical

    a = categorical("c", ["1", "True", "1.0"])
    alone = a.encode(np.array([1], dtype=object))[0]
    for other in (True, 1.0, "1", None, 2):
        assert a.encode(np.array([other, 1], dtype=object))[1] == alone
    # control: np.unique, the former fast path, merges the values the rows hold
    assert len(np.unique(np.array([True, 1], dtype=object))) == 1
