"""The composition (intersection) attack: a hand-computed textbook case, the DP contrast's
cost, and an independent re-implementation (plain pandas) that must agree exactly with the
library on real releases."""

from __future__ import annotations

import warnings
from collections import Counter
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import statcurator as sc
from statcurator.anonymize import KAnonymity, LDiversity, anonymize
from statcurator.attacks import Composition, Update, dp_histograms, intersect
from statcurator.attacks import experiments as ex
from statcurator.io.dataset import Dataset
from statcurator.mechanisms import rng

HOSPITAL = dict(qi=["ZIP", "Age", "Nationality"], sensitive="Condition")
UMEKO_BOB = {"ZIP": ["13068", "13053"], "Age": ["21", "31"],
             "Nationality": ["Japanese", "American"], "Condition": ["Viral Infection", "Cancer"]}


def test_textbook_intersection(textbook) -> None:
    # Umeko: {HD, HD, VI, VI} ∩ {HD, VI, C, C} leaves HD and VI, confidence 2·1/(2·1 + 2·1);
    # Bob: {C x4} ∩ {HD, VI, C, C}: cancer, a perfect breach
    risk = Composition(textbook("hospital_3diverse.csv")).run(
        textbook("hospital_4anonymous.csv"), UMEKO_BOB, detail=True, **HOSPITAL)
    assert [d["values_left"] for d in risk.detail] == [2, 1]
    assert [d["confidence"] for d in risk.detail] == [0.5, 1.0]
    assert risk.successes == 1 and risk.measures["mean values left"] == 1.5
    assert risk.curves["partial breach"]["y"][4] == 1.0  # both at confidence >= 0.5


def test_confidence_formula() -> None:
    c1 = np.array([[3.0, 1.0, 2.0, 0.0]])
    c2 = np.array([[1.0, 4.0, 2.0, 5.0]])
    out = intersect([c1, c2], np.array([2]))
    assert out["confidence"][0] == pytest.approx(Fraction(4, 3 + 4 + 4))
    assert out["values_left"][0] == 3 and not out["perfect"][0]


def test_intersection_of_a_release_with_itself_is_homogeneity(textbook) -> None:
    t = textbook("hospital_4anonymous.csv")
    risk = Composition(t).run(t, UMEKO_BOB, **HOSPITAL)
    assert risk.successes == sc.attacks.Homogeneity().run(t, UMEKO_BOB, **HOSPITAL).successes


def test_dp_contrast_costs_the_sum_of_the_releases(textbook) -> None:
    a, b = textbook("hospital_4anonymous.csv"), textbook("hospital_3diverse.csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with rng.seeded(1):
            ha = dp_histograms(a, Fraction(1, 10), **HOSPITAL)
            hb = dp_histograms(b, Fraction(3, 10), **HOSPITAL)
    risk = Composition(hb).run(ha, UMEKO_BOB)
    assert risk.cost == sc.PureDP(Fraction(2, 5))
    risk = Composition(b).run(a, UMEKO_BOB, epsilon=Fraction(1, 10), **HOSPITAL)
    assert risk.contrast is not None and risk.contrast.cost == sc.PureDP(Fraction(1, 5))


def test_update_joes_birthday() -> None:
    # version 1: Joe (age 10) is in [1, 10] with {bronchitis, pneumonia}; a year later he is
    # in [11, 20] with {pneumonia, flu}: pneumonia is the only value in both
    v1 = pa.table({"age": ["[1, 10]"] * 2 + ["[11, 20]"] * 2,
                   "disease": ["bronchitis", "pneumonia", "flu", "ulcer"]})
    v2 = pa.table({"age": ["[1, 10]"] * 2 + ["[11, 20]"] * 2,
                   "disease": ["bronchitis", "acne", "pneumonia", "flu"]})
    joe_then = {"age": ["10"], "disease": ["pneumonia"]}
    joe_now = {"age": ["11"], "disease": ["pneumonia"]}
    risk = Update(v2, k=2).run(v1, [joe_then, joe_now], qi=["age"], sensitive="disease")
    assert risk.successes == 1 and risk.measures["k broken"] == 1.0
    # control: had he not aged, his two classes share bronchitis too
    risk = Update(v2, k=2).run(v1, joe_then, qi=["age"], sensitive="disease")
    assert risk.successes == 0


# -- the independent re-implementation ---------------------------------------------------------

def reference_attack(rel_a: pd.DataFrame, rel_b: pd.DataFrame, people: pd.DataFrame,
                     qi: list[str], sens: str, ancestors: dict[str, dict[str, set[str]]]
                     ) -> pd.DataFrame:
    """The intersection attack written from the paper, in plain pandas/Python."""

    def contains(cell: str, q: str, v: str) -> bool:
        if cell == v or set(cell) == {"*"}:
            return True
        if cell.startswith("[") and cell.endswith("]"):
            lo, hi = (float(x) for x in cell[1:-1].split(","))
            return lo <= float(v) <= hi
        return cell in ancestors[q].get(v, set())

    # each released cell as the set of the attacked people's values it contains
    seen = {q: set(people[q]) for q in qi}

    def classes(rel: pd.DataFrame) -> list[tuple[list[set[str]], Counter]]:
        return [([{v for v in seen[q] if contains(key[d], q, v)} for d, q in enumerate(qi)],
                 Counter(group[sens].tolist()))
                for key, group in rel.groupby(qi, sort=False)]

    def counts(cls: list[tuple[list[set[str]], Counter]], person: tuple[str, ...]) -> Counter:
        out: Counter = Counter()
        for cells, values in cls:
            if all(v in cell for v, cell in zip(person, cells, strict=True)):
                out.update(values)
        return out

    ca, cb = classes(rel_a), classes(rel_b)
    rows = []
    for *person, t in people[qi + [sens]].itertuples(index=False, name=None):
        c1, c2 = counts(ca, tuple(person)), counts(cb, tuple(person))
        left = {v for v in c1 if c2[v] > 0}
        total = sum(c1[v] * c2[v] for v in left)
        rows.append({"values_left": len(left), "perfect": left == {t},
                     "confidence": c1[t] * c2[t] / total if total else 0.0})
    return pd.DataFrame(rows)


@pytest.mark.slow
@pytest.mark.parametrize(("algorithm", "extra"), [("mondrian", []), ("optimal", []),
                                                  ("mondrian", [LDiversity("occupation", 3)])])
def test_the_library_agrees_exactly_with_the_reference(algorithm: str, extra: list) -> None:
    data = sc.datasets.adult()
    a, b, ov = ex.split(data.table.num_rows, 200, seed=7)
    crits = [KAnonymity(10), *extra]
    ra = anonymize(Dataset("A", data.table.take(a), data.meta), *crits,
                   sensitive=["occupation"], algorithm=algorithm, suppression=0.02)
    rb = anonymize(Dataset("B", data.table.take(b), data.meta), *crits,
                   sensitive=["occupation"], algorithm=algorithm, suppression=0.02)
    people = data.table.take(ov)
    lib = Composition(rb).run(ra, people, detail=True)
    hier = ra._check["hierarchies"]
    anc = {q: {row[0]: set(row) for row in h.rows} for q, h in hier.items()}
    text = lambda t: pd.DataFrame({c: [str(v) for v in t.column(c).to_pylist()]  # noqa: E731
                                   for c in t.column_names})
    ref = reference_attack(text(ra.table), text(rb.table), text(people), list(ra.qi),
                           "occupation", anc)
    assert [d["values_left"] for d in lib.detail] == ref["values_left"].tolist()
    assert [d["breached"] for d in lib.detail] == ref["perfect"].tolist()
    assert [d["confidence"] for d in lib.detail] == ref["confidence"].tolist()  # exactly


@pytest.mark.slow
def test_the_experiment_reports_what_the_library_measures() -> None:
    # one split, one configuration: the experiment's row equals the attack run by hand
    ex._init(sc.datasets.adult())
    cfg = ex._Config("k-anonymity", "optimal", 5)
    runs = ex._run_task(3, cfg, 400, "occupation", None, Fraction(1, 50), [], 0.5)
    data = sc.datasets.adult()
    a, b, ov = ex.split(data.table.num_rows, 400, seed=3)
    ra = anonymize(Dataset("A", data.table.take(a), data.meta), KAnonymity(5),
                   sensitive=["occupation"], suppression=Fraction(1, 50))
    rb = anonymize(Dataset("B", data.table.take(b), data.meta), KAnonymity(5),
                   sensitive=["occupation"], suppression=Fraction(1, 50))
    risk = Composition(rb).run(ra, data.table.take(ov))
    assert runs[0]["perfect"] == risk.rate and runs[0]["targets"] == 400
    assert runs[0]["values_left"] == risk.measures["mean values left"]
