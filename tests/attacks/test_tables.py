"""Attacks on one published table, on the textbook tables (hand-computed answers), each with a
control where it must succeed and one where it must fail."""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pytest

from statcurator.anonymize import Hierarchy
from statcurator.attacks import (
    BackgroundKnowledge,
    Homogeneity,
    Linkage,
    Similarity,
    Skewness,
    dp_histograms,
)
from statcurator.mechanisms import rng

QI3 = ["Age", "Sex", "Zipcode"]


@pytest.fixture(scope="module")
def voters_and_truth(textbook):
    voters, patients = textbook("voters.csv"), textbook("patients.csv")
    names = patients.column("Name").to_pylist()
    rows = [names.index(n) if n in names else -1 for n in voters.column("Name").to_pylist()]
    disease = dict(zip(names, patients.column("Disease").to_pylist(), strict=True))
    with_truth = voters.append_column(
        "Disease", pa.array([disease.get(n) for n in voters.column("Name").to_pylist()]))
    return voters, rows, with_truth


# -- linkage ---------------------------------------------------------------------------------

def test_linkage_reidentifies_every_patient_of_the_deidentified_table(textbook,
                                                                      voters_and_truth) -> None:
    # control where the attack must succeed: removing names leaves every patient unique
    voters, rows, _ = voters_and_truth
    deid = textbook("patients.csv").drop(["Name"])
    risk = Linkage(population=voters).run(deid, voters, truth=rows, qi=QI3, id="Name",
                                          detail=True)
    assert (risk.successes, risk.targets) == (10, 11)  # everyone but Mike, who is not there
    m = risk.measures
    assert m["unique matches"] == 10 and m["false links"] == 0
    assert m["sample uniques"] == 1.0 and m["prosecutor risk (max)"] == 1.0
    assert m["journalist risk (max)"] == 1.0 and m["marketer risk"] == 1.0
    assert risk.baseline == pytest.approx((10 / 11) / 10)
    mike = next(d for d in risk.detail if d["target"] == "Mike")
    assert mike["classes_matched"] == 0 and not mike["breached"]


def test_linkage_against_the_2_anonymous_table(textbook, voters_and_truth) -> None:
    voters, rows, _ = voters_and_truth
    risk = Linkage(population=voters).run(textbook("patients_2anonymous.csv"), voters,
                                          truth=rows, qi=QI3)
    m = risk.measures
    assert risk.successes == 0 and m["unique matches"] == 0
    # classes of sizes 2, 2, 2, 4; the population (voters) puts Mike (7, M, 17000) in the
    # second one: F = 2, 3, 2, 4
    assert m["prosecutor risk (max)"] == 0.5 and m["prosecutor risk (average)"] == 0.4
    assert m["journalist risk (max)"] == 0.5
    assert m["journalist risk (average)"] == pytest.approx((2 / 2 + 2 / 3 + 2 / 2 + 4 / 4) / 10)
    assert m["sample uniques"] == 0.0 and m["population uniques"] == 0.0
    # a random pick among the matches re-identifies 1/2 + ... : 3 classes of 2 and one of 4
    assert m["expected re-identifications (random pick among matches)"] == pytest.approx(
        6 * 0.5 + 4 * 0.25)


# -- homogeneity -------------------------------------------------------------------------------

BOB_CARL = {"Zipcode": ["47678", "47673"], "Age": ["27", "36"],
            "Disease": ["Heart Disease", "Cancer"]}


def test_homogeneity_bob_has_heart_disease(textbook) -> None:
    risk = Homogeneity().run(textbook("homogeneity_3anonymous.csv"), BOB_CARL,
                             qi=["Zipcode", "Age"], sensitive="Disease", detail=True)
    assert [d["inferred"] for d in risk.detail] == ["Heart Disease", None]
    assert (risk.successes, risk.targets, risk.baseline) == (1, 2, 0.0)


def test_homogeneity_on_the_2_anonymous_patients(textbook, voters_and_truth) -> None:
    _, _, voters = voters_and_truth
    risk = Homogeneity().run(textbook("patients_2anonymous.csv"), voters, qi=QI3,
                             sensitive="Disease", detail=True)
    breached = [d["target"] for d in risk.detail if d["breached"]]
    assert breached == [5, 6]  # Joe and Sam: ([11, 20], M, [20001, 25000]) is all pneumonia


def test_homogeneity_fails_on_a_diverse_table(textbook) -> None:
    # control where the attack must fail: every class of the 3-diverse table has 3 values
    risk = Homogeneity().run(textbook("similarity_3diverse.csv"), BOB_CARL,
                             qi=["Zipcode", "Age"], sensitive="Disease")
    assert risk.successes == 0


# -- background knowledge ---------------------------------------------------------------------

UMEKO_BOB = {"ZIP": ["13068", "13053"], "Age": ["21", "31"],
             "Nationality": ["Japanese", "American"], "Condition": ["Viral Infection", "Cancer"]}
HOSPITAL = dict(qi=["ZIP", "Age", "Nationality"], sensitive="Condition")


@pytest.mark.parametrize(("table", "curve"), [
    # 4-anonymous: Bob's class is all cancer (b = 0); Umeko's {HD, HD, VI, VI} needs b = 1
    ("hospital_4anonymous.csv", [0.5, 1.0, 1.0]),
    # 3-diverse: both classes hold 3 values, so b = 2 is needed
    ("hospital_3diverse.csv", [0.0, 0.0, 1.0]),
])
def test_background_knowledge_curve(textbook, table: str, curve: list[float]) -> None:
    risk = BackgroundKnowledge(b=1).run(textbook(table), UMEKO_BOB, **HOSPITAL)
    assert risk.curves["success vs b"]["y"] == curve
    assert risk.rate == curve[1]


def test_background_knowledge_carl(textbook) -> None:
    # Carl (47673, 36): {HD, cancer, cancer}; ruling out heart disease leaves cancer
    t = textbook("homogeneity_3anonymous.csv")
    kw = dict(qi=["Zipcode", "Age"], sensitive="Disease")
    assert BackgroundKnowledge(b=0).run(t, BOB_CARL, **kw).successes == 1
    assert BackgroundKnowledge(b=1).run(t, BOB_CARL, **kw).successes == 2
    # without the release: 3 values overall, so only b = 2 decides
    assert BackgroundKnowledge(b=1).run(t, BOB_CARL, **kw).baseline == 0.0
    assert BackgroundKnowledge(b=2).run(t, BOB_CARL, **kw).baseline == 1.0


def test_background_knowledge_rules_out_wrong_values_only() -> None:
    counts = np.array([[3.0, 1.0, 0.0], [2.0, 2.0, 2.0]])
    ruled = BackgroundKnowledge.knowledge(counts, np.array([1, 0]), b=1)
    assert ruled.tolist() == [[True, False, False], [False, True, False]]


# -- skewness ---------------------------------------------------------------------------------

def test_skewness_gain_by_hand(textbook) -> None:
    # whole table: heart disease 5/9, cancer 3/9, flu 1/9. Bob: posterior 1 -> gain 9/5;
    # Carl: cancer 2/3 -> gain 2. Both top guesses are right; the baseline (heart disease)
    # is right for Bob only.
    risk = Skewness(gain=2).run(textbook("homogeneity_3anonymous.csv"), BOB_CARL,
                                qi=["Zipcode", "Age"], sensitive="Disease", detail=True)
    assert [d["gain"] for d in risk.detail] == pytest.approx([9 / 5, 2.0])
    assert [d["prior"] for d in risk.detail] == pytest.approx([5 / 9, 3 / 9])
    assert (risk.rate, risk.baseline) == (1.0, 0.5)
    assert risk.measures["share with gain >= 2"] == 0.5


def test_skewness_without_structure_is_the_baseline(textbook) -> None:
    # control: a release with all QIs suppressed teaches nothing beyond the prior
    t = textbook("homogeneity_3anonymous.csv")
    flat = t.set_column(0, "Zipcode", pa.array(["*"] * 9)).set_column(1, "Age",
                                                                     pa.array(["*"] * 9))
    risk = Skewness().run(flat, BOB_CARL, qi=["Zipcode", "Age"], sensitive="Disease")
    assert risk.rate == risk.baseline == 0.5
    assert risk.measures["mean gain (posterior/prior of the true value)"] == pytest.approx(1.0)


# -- similarity -------------------------------------------------------------------------------

DISEASES = Hierarchy.from_rows("Disease", [
    ["Gastric Ulcer", "stomach disease", "*"], ["Gastritis", "stomach disease", "*"],
    ["Stomach Cancer", "stomach disease", "*"], ["Flu", "respiratory infection", "*"],
    ["Bronchitis", "respiratory infection", "*"], ["Pneumonia", "respiratory infection", "*"]])
SALARY = {"20K": "low", "30K": "low", "40K": "low", "50K": "medium", "60K": "medium",
          "70K": "medium", "80K": "high", "90K": "high", "100K": "high"}


def test_similarity_bob_has_a_stomach_disease_and_a_low_salary(textbook) -> None:
    t = textbook("similarity_3diverse.csv")
    bob = {"Zipcode": ["47678"], "Age": ["27"], "Disease": ["Gastric Ulcer"],
           "Salary": ["30K"]}
    kw = dict(qi=["Zipcode", "Age"])
    assert Similarity(DISEASES).run(t, bob, sensitive="Disease", **kw).successes == 1
    assert Similarity(SALARY).run(t, bob, sensitive="Salary", **kw).successes == 1
    # the distinct values are 3-diverse, so homogeneity fails: the similarity attack is new
    assert Homogeneity().run(t, bob, sensitive="Disease", **kw).successes == 0


def test_similarity_fails_for_mixed_classes(textbook) -> None:
    t = textbook("similarity_3diverse.csv")
    carl = {"Zipcode": ["47673"], "Age": ["36"], "Disease": ["Bronchitis"]}
    risk = Similarity(DISEASES).run(t, carl, qi=["Zipcode", "Age"], sensitive="Disease")
    assert risk.successes == 0
    # 2 of the 3 values of Carl's class are respiratory: a partial disclosure at 2/3
    assert Similarity(DISEASES, threshold=0.6).run(
        t, carl, qi=["Zipcode", "Age"], sensitive="Disease").successes == 1


# -- the DP contrast ----------------------------------------------------------------------------

def test_dp_histograms_cost_and_shape(textbook) -> None:
    t = textbook("patients_2anonymous.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(0):
            h = dp_histograms(t, 0.5, qi=QI3, sensitive="Disease")
    assert str(h.cost) == "ε=0.5" and h.classes.counts.shape == (4, 6)
    assert h.mechanism.sensitivity == 1  # add/remove: each record is one (cell, value)
    assert (h.classes.counts >= 0).all()


@pytest.mark.slow
def test_homogeneity_on_dp_histograms_fails_where_the_exact_release_breaches_all() -> None:
    # 100 cells of 20 people; a cell's sensitive value is a function of the cell (4 values), so
    # the exact release breaches everyone. With ε = 0.1 histograms (discrete Laplace, scale
    # 10, a = e^-0.1) a cell looks homogeneous only if its 3 zero counts all get noise <= 0:
    # P = (1/(1+a))^3 = 0.525^3 = 0.145 per cell, independently across cells. A rate of 0.45
    # or more then needs >= 45 of 100 cells: P <= exp(-2·100·(0.45-0.145)^2) = 8e-9
    # (Hoeffding), so this test fails wrongly less than once in 10^8 runs. A broken mechanism
    # (no noise, or noise far too small) breaches ~100% and is caught.
    cells = np.repeat(np.arange(100), 20)
    values = np.array(["a", "b", "c", "d"])[cells % 4]
    table = pa.table({"cell": [str(c) for c in cells], "v": values})
    targets = {"cell": [str(c) for c in cells], "v": values.tolist()}
    risk = Homogeneity().run(table, targets, qi=["cell"], sensitive="v", epsilon=0.1)
    assert risk.rate == 1.0
    assert risk.contrast is not None and risk.contrast.rate < 0.45
    assert str(risk.contrast.cost) == "ε=0.1"
