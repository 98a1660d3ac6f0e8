"""The minimality attack: the exact small example, the sound deduction, and Adult."""

from __future__ import annotations

import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.anonymize import Hierarchy, KAnonymity, LDiversity, anonymize
from statcurator.attacks import Minimality
from statcurator.attacks._release import classes_of, published
from statcurator.attacks.minimality import released_levels
from statcurator.core.errors import InvalidParameterError
from statcurator.core.schema import Column, HierarchySpec, TableMeta
from statcurator.io.dataset import Dataset

ZIPS = Hierarchy.from_masking("zip", ["13053", "13068"], length=5)
PEOPLE = {"zip": ["13053", "13053", "13068", "13068", "13068", "13068"],
          "disease": ["HIV", "HIV", "flu", "cold", "cough", "fever"]}


def _release() -> pa.Table:
    return pa.table({"zip": ["130**"] * 6, "disease": PEOPLE["disease"]})


def test_the_algorithm_really_returns_this_release() -> None:
    # the example is what a minimal 2-diverse full-domain algorithm outputs on this table
    meta = TableMeta("t", (Column("zip", role="qi",
                                  hierarchy=HierarchySpec("masking", length=5)),
                           Column("disease", role="sensitive")))
    res = anonymize(Dataset("t", pa.table(PEOPLE), meta), LDiversity("disease", 2))
    assert res.levels == {"zip": 2}
    assert res.table.column("zip").to_pylist() == ["130**"] * 6
    risk = Minimality.of(res).run(res, detail=True)
    assert [d["posterior"] for d in risk.detail] == [1.0, 1.0, 0.25, 0.25, 0.25, 0.25]


def test_exact_example_by_enumeration() -> None:
    # 6!/2! = 360 assignments; the zip-level classes must violate 2-diversity, which only
    # happens when A and B (the two people of 13053) both have HIV: 4! = 24 assignments left
    risk = Minimality(LDiversity("disease", 2)).run(
        _release(), PEOPLE, qi=["zip"], sensitive="disease", hierarchies={"zip": ZIPS},
        detail=True)
    assert risk.measures["worlds"] == 360
    assert risk.measures["worlds consistent with minimality"] == 24
    assert [d["posterior"] for d in risk.detail] == [1.0, 1.0, 0.25, 0.25, 0.25, 0.25]
    assert [d["class frequency"] for d in risk.detail][:2] == [pytest.approx(1 / 3)] * 2
    assert (risk.successes, risk.baseline) == (2, 0.0)


def test_the_deduction_finds_the_forced_class() -> None:
    risk = Minimality(LDiversity("disease", 2), max_worlds=1).run(
        _release(), PEOPLE, qi=["zip"], sensitive="disease", hierarchies={"zip": ZIPS},
        detail=True)
    assert risk.measures["mode"] == "deduction (lower bound)"
    assert risk.measures["forced classes"] == 1
    assert [d["posterior"] for d in risk.detail][:2] == [1.0, 1.0]
    assert risk.successes == 2


def test_forced_posterior_by_inclusion_exclusion() -> None:
    import numpy as np

    # a class of 2 drawn from counts {a: 2, b: 2, c: 1} with at most 1 distinct value:
    # {a, a} in 2 ways, {b, b} in 2 ways (ordered draws): P(a) = P(b) = 1/2, P(c) = 0
    p = Minimality._forced_posterior(np.array([2, 2, 1]), 2, 2)
    assert p.tolist() == [0.5, 0.5, 0.0]
    # at most 2 distinct values out of 3 in a class of 3 from {a: 1, b: 1, c: 1}: impossible
    assert Minimality._forced_posterior(np.array([1, 1, 1]), 3, 3).tolist() == [0, 0, 0]


def test_control_k_anonymity_alone_reveals_nothing() -> None:
    # k-anonymity does not depend on the sensitive values: minimality tells nothing about them
    risk = Minimality(KAnonymity(2)).run(_release(), PEOPLE, qi=["zip"], sensitive="disease",
                                         hierarchies={"zip": ZIPS})
    assert risk.successes == 0
    assert risk.measures["mean posterior of the true value"] == pytest.approx(
        risk.measures["mean class frequency of the true value"])


def test_mondrian_releases_are_refused() -> None:
    res = anonymize(sc.datasets.adult(), KAnonymity(10), algorithm="mondrian",
                    qi=["age", "sex"], sensitive=["occupation"])
    with pytest.raises(InvalidParameterError, match="full-domain"):
        released_levels(classes_of(published(res)))


@pytest.mark.slow
def test_on_adult_every_finer_generalization_is_explained_by_small_classes() -> None:
    res = anonymize(sc.datasets.adult(), KAnonymity(10), LDiversity("occupation", 5))
    risk = Minimality.of(res).run(res)
    m = risk.measures
    assert m["predecessors"] == 6 and m["predecessors explained by small classes"] == 6
    assert risk.successes == 0 and m["targets whose posterior changed"] == 0
