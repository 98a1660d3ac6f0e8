"""The learners through Curator.estimate: charged before reading, replayed for free."""

from __future__ import annotations

import numpy as np
import pytest

import statcurator as sc
from statcurator.core.errors import BudgetExceededError
from statcurator.core.measures import PureDP


@pytest.fixture
def cur() -> sc.Curator:
    c = sc.Curator()
    c.register("adult", sc.datasets.adult())
    c.set_budget("alice", "adult", epsilon=2)
    return c


@pytest.mark.slow
def test_tree_is_charged_and_replayed(cur: sc.Curator) -> None:
    tree = sc.DecisionTreeClassifier(target="salary-class", max_depth=2)
    fitted = cur.estimate("adult", tree, epsilon=1, analyst="alice", request_id="t1")
    assert fitted.cost_ == PureDP(1) and not hasattr(tree, "model_")  # the learner is a value
    assert cur.budget("alice", "adult").remaining == PureDP(1)
    again = cur.estimate("adult", tree, epsilon=1, analyst="alice", request_id="t1")
    adult = sc.datasets.adult()
    assert np.array_equal(again.predict_proba(adult), fitted.predict_proba(adult))
    assert cur.budget("alice", "adult").remaining == PureDP(1)  # the replay was free
    with pytest.raises(BudgetExceededError):
        cur.estimate("adult", tree, epsilon=2, analyst="alice")
    assert cur.budget("alice", "adult").remaining == PureDP(1)


@pytest.mark.slow
def test_forest_and_kmeans_through_the_curator(cur: sc.Curator) -> None:
    forest = cur.estimate("adult", sc.RandomForestClassifier(n_estimators=2, max_depth=1,
                                                             target="salary-class"),
                          epsilon=0.5, analyst="alice", request_id="f1")
    assert forest.cost_ == PureDP(0.5)
    replay = cur.estimate("adult", sc.RandomForestClassifier(n_estimators=2, max_depth=1,
                                                             target="salary-class"),
                          epsilon=0.5, analyst="alice", request_id="f1")
    adult = sc.datasets.adult()
    assert np.array_equal(replay.predict(adult), forest.predict(adult))
    km = cur.estimate("adult", sc.KMeans(2), epsilon=0.5, analyst="alice", request_id="k1")
    assert km.cluster_centers_.shape == (2, 1)
    again = cur.estimate("adult", sc.KMeans(2), epsilon=0.5, analyst="alice", request_id="k1")
    assert np.array_equal(again.cluster_centers_, km.cluster_centers_)
    assert cur.budget("alice", "adult").remaining == PureDP(1)
