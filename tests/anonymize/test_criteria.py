"""Privacy criteria: definitions on small examples, exact thresholds, the textbook tables,
impossible configurations, and (property tests) their declared monotonicity."""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.anonymize import (
    ClassSummary,
    DeltaPresence,
    KAnonymity,
    LDiversity,
    TCloseness,
    anonymize,
    verify,
)
from statcurator.anonymize.criteria import SensitiveDomain
from statcurator.anonymize.hierarchy import Hierarchy
from statcurator.core.errors import InvalidParameterError, UnsatisfiableError
from statcurator.core.schema import Column, HierarchySpec, TableMeta

from .conftest import read_semicolon

# -- definitions --------------------------------------------------------------------------

def test_k_anonymity():
    s = ClassSummary(np.array([4, 5, 6]))
    assert KAnonymity(5).check(s).tolist() == [False, True, True]
    assert KAnonymity(5).monotone_generalization and KAnonymity(5).monotone_suppression
    with pytest.raises(InvalidParameterError):
        KAnonymity(2.5)
    with pytest.raises(InvalidParameterError):
        KAnonymity(True)


def test_l_diversity_variants():
    s = ClassSummary.from_records([0] * 6 + [1] * 4, {"d": list("aaabbc") + list("abcd")})
    assert LDiversity("d", 3).check(s).tolist() == [True, True]
    assert LDiversity("d", 4).check(s).tolist() == [False, True]
    # entropy of (3,2,1)/6 = 1.011 < log 3 = 1.099; uniform (1,1,1,1) = log 4
    assert LDiversity("d", 3, "entropy").check(s).tolist() == [False, True]
    assert LDiversity("d", Fraction(27, 10), "entropy").check(s).tolist() == [True, True]
    # recursive (c,2): r1 < c (r2 + r3): 3 < c * 3
    assert LDiversity("d", 2, "recursive", c=1).check(s).tolist() == [False, True]
    assert LDiversity("d", 2, "recursive", c=Fraction(11, 10)).check(s).tolist() == [True, True]
    assert not LDiversity("d", 2, "entropy").monotone_suppression
    assert LDiversity("d", 2).monotone_suppression


def test_entropy_l_diversity_exact_at_the_threshold():
    # (2,2,2) has entropy exactly log 3: it is entropy 3-diverse, and not 3.0001-diverse
    s = ClassSummary.from_records([0] * 6, {"d": list("aabbcc")})
    assert LDiversity("d", 3, "entropy").check(s).tolist() == [True]
    assert LDiversity("d", Fraction(30001, 10000), "entropy").check(s).tolist() == [False]


def test_t_closeness_equal_distance_exact():
    # whole table a:2 b:2; class 0 = (a, a): EMD = 1/2 (|1 - 1/2| + |0 - 1/2|) = 1/2
    s = ClassSummary.from_records([0, 0, 1, 1], {"d": ["a", "a", "b", "b"]})
    tc = TCloseness("d", Fraction(1, 2))
    assert tc.emd(s) == [Fraction(1, 2), Fraction(1, 2)]
    assert tc.check(s).tolist() == [True, True]
    assert TCloseness("d", Fraction(49, 100)).check(s).tolist() == [False, False]


def test_t_closeness_hierarchical_distance():
    h = Hierarchy.from_tree("d", {"stomach": ["ulcer", "gastritis"], "lung": ["flu", "cold"]})
    s = ClassSummary.from_records([0, 0, 1, 1], {"d": ["ulcer", "gastritis", "flu", "cold"]},
                                  hierarchies={"d": h})
    # class 0 moves 1/2 of the mass from lung to stomach: distance 2/2 -> EMD 1/2
    assert TCloseness("d", Fraction(1, 2), "hierarchical").emd(s) == [Fraction(1, 2)] * 2
    s2 = ClassSummary.from_records([0, 0, 1, 1], {"d": ["ulcer", "flu", "gastritis", "cold"]},
                                   hierarchies={"d": h})
    # within each class one value per subtree: moves stay inside subtrees (cost 1/2 * 1/2)
    assert TCloseness("d", 0, "hierarchical").emd(s2) == [Fraction(1, 4)] * 2


def test_t_closeness_needs_a_hierarchy_for_hierarchical_distance():
    s = ClassSummary.from_records([0], {"d": ["a"]})
    with pytest.raises(InvalidParameterError, match="needs a hierarchy"):
        TCloseness("d", 0.2, "hierarchical").check(s)


def test_delta_presence():
    s = ClassSummary(np.array([1, 2, 0]), population=np.array([4, 3, 5]))
    dp = DeltaPresence(Fraction(1, 4), Fraction(2, 3), population=None)
    assert dp.check(s).tolist() == [True, True, False]
    with pytest.raises(InvalidParameterError):
        DeltaPresence(0.7, 0.6, population=None)


def test_parameters_are_validated():
    with pytest.raises(InvalidParameterError, match="unknown l-diversity variant"):
        LDiversity("d", 2, "fancy")
    with pytest.raises(InvalidParameterError, match="needs the constant c"):
        LDiversity("d", 2, "recursive")
    with pytest.raises(InvalidParameterError, match="t must be in"):
        TCloseness("d", 1.5)
    with pytest.raises(InvalidParameterError, match="unknown t-closeness distance"):
        TCloseness("d", 0.2, "manhattan")


# -- textbook tables ----------------------------------------------------------------------

def _classes(table: pa.Table, qi: list[str]) -> list[int]:
    keys = list(zip(*[table.column(q).to_pylist() for q in qi], strict=True))
    index = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    return [index[k] for k in keys]


def test_patients_2anonymous(textbook):
    original = read_semicolon(textbook / "patients.csv").drop(["Name"])
    release = read_semicolon(textbook / "patients_2anonymous.csv")
    qi = ["Age", "Sex", "Zipcode"]
    ids = _classes(release, qi)
    assert len(set(ids)) == 4
    assert KAnonymity(2).check(ClassSummary.from_records(ids)).all()
    result = verify(release, [KAnonymity(2), KAnonymity(3)], original=original, qi=qi)
    assert result == {"2-anonymity": True, "3-anonymity": False, "suppression limit": True,
                      "truthful generalization": True}


def test_hospital_4anonymous_is_not_2diverse(textbook):
    release = read_semicolon(textbook / "hospital_4anonymous.csv")
    qi = ["ZIP", "Age", "Nationality"]
    ids = _classes(release, qi)
    s = ClassSummary.from_records(ids, {"Condition": release.column("Condition").to_pylist()})
    assert KAnonymity(4).check(s).all()
    assert not LDiversity("Condition", 2).check(s).all()
    v = verify(release, [KAnonymity(4), LDiversity("Condition", 2)], original=release, qi=qi)
    assert v["4-anonymity"] and not v["distinct 2-diversity of Condition"]


def test_hospital_3diverse(textbook):
    release = read_semicolon(textbook / "hospital_3diverse.csv")
    qi = ["ZIP", "Age", "Nationality"]
    s = ClassSummary.from_records(_classes(release, qi),
                                  {"Condition": release.column("Condition").to_pylist()})
    assert LDiversity("Condition", 3).check(s).all()
    assert not LDiversity("Condition", 4).check(s).all()
    assert verify(release, [LDiversity("Condition", 3)], original=release,
                  qi=qi)["distinct 3-diversity of Condition"]


# -- impossible configurations ------------------------------------------------------------

def _table_meta():
    meta = TableMeta("t", (
        Column("zip", role="qi", hierarchy=HierarchySpec("masking", length=3)),
        Column("disease", role="sensitive"),
    ))
    table = pa.table({"zip": ["123", "124", "125", "126"], "disease": ["a", "b", "a", "b"]})
    return table, meta


def test_l_larger_than_the_number_of_values_is_unsatisfiable():
    table, meta = _table_meta()
    with pytest.raises(UnsatisfiableError) as e:
        anonymize(table, LDiversity("disease", 3), meta=meta)
    assert "only 2 distinct value(s)" in str(e.value) and "lower l to at most 2" in str(e.value)
    with pytest.raises(UnsatisfiableError):
        anonymize(table, LDiversity("disease", Fraction(5, 2), "entropy"), meta=meta)


def test_k_larger_than_the_table_is_unsatisfiable():
    table, meta = _table_meta()
    with pytest.raises(UnsatisfiableError, match="lower k to at most 4"):
        anonymize(table, KAnonymity(5), meta=meta)


def test_sensitive_column_that_is_a_qi_is_refused():
    table, meta = _table_meta()
    meta = meta.with_roles({"disease": "qi"})
    meta = meta.replace(columns=meta.columns[:1] + (meta["disease"].__class__(
        "disease", role="qi", hierarchy=HierarchySpec("tree", tree={"any": ["a", "b"]})),))
    with pytest.raises(InvalidParameterError, match="drop 'disease' from the QIs"):
        anonymize(table, LDiversity("disease", 2), meta=meta, qi=["zip", "disease"])
    # declared a QI by the metadata only: protecting it makes it sensitive for the run
    res = anonymize(table, LDiversity("disease", 2), meta=meta)
    assert res.qi == ("zip",) and res.sensitive == ("disease",)


def test_no_node_satisfies_within_the_limit():
    table, meta = _table_meta()
    table = table.set_column(1, "disease", pa.array(["a", "a", "a", "b"]))
    with pytest.raises(UnsatisfiableError, match="not even the most general one"):
        anonymize(table, LDiversity("disease", 2, "entropy"), meta=meta)


# -- monotonicity (property tests) --------------------------------------------------------

VALUES = list("abcde")


@st.composite
def partitions(draw):
    """A fine partition of records with sensitive values, and a coarsening of it."""
    n_fine = draw(st.integers(1, 6))
    sizes = draw(st.lists(st.integers(1, 8), min_size=n_fine, max_size=n_fine))
    fine = [i for i, s in enumerate(sizes) for _ in range(s)]
    values = draw(st.lists(st.sampled_from(VALUES), min_size=len(fine), max_size=len(fine)))
    merge = draw(st.lists(st.integers(0, n_fine - 1), min_size=n_fine, max_size=n_fine))
    coarse_of = {f: merge[f] for f in range(n_fine)}
    labels = {c: i for i, c in enumerate(sorted(set(coarse_of.values())))}
    coarse = [labels[coarse_of[f]] for f in fine]
    return fine, coarse, values


def _summary(ids, values, whole):
    dom = SensitiveDomain.from_values("d", whole)
    idx = {v: i for i, v in enumerate(dom.values)}
    m = np.zeros((max(ids) + 1, dom.size), dtype=np.int64)
    for i, v in zip(ids, values, strict=True):
        m[i, idx[v]] += 1
    return ClassSummary(np.bincount(ids).astype(np.int64), {"d": m}, {"d": dom})


CRITERIA = [
    KAnonymity(3),
    LDiversity("d", 2),
    LDiversity("d", Fraction(3, 2), "entropy"),
    LDiversity("d", 2, "recursive", c=2),
    TCloseness("d", Fraction(2, 5)),
    TCloseness("d", Fraction(1, 4), "ordered"),
]


@settings(max_examples=300, deadline=None)
@given(partitions(), st.sampled_from(CRITERIA))
def test_monotone_under_generalization(data, criterion):
    """If every class of a partition satisfies a criterion declared monotone under
    generalization, every class of any coarsening (merging classes) does too."""
    fine, coarse, values = data
    assert criterion.monotone_generalization
    if criterion.check(_summary(fine, values, values)).all():
        assert criterion.check(_summary(coarse, values, values)).all()


def _suppressed(summary, criterion):
    ok = criterion.check(summary)
    return int(summary.sizes[~ok].sum())


@settings(max_examples=300, deadline=None)
@given(partitions(), st.sampled_from([KAnonymity(3), LDiversity("d", 2)]))
def test_monotone_under_suppression(data, criterion):
    """For criteria declared monotone under suppression, coarsening never increases the
    number of records that must be suppressed."""
    fine, coarse, values = data
    assert criterion.monotone_suppression
    assert _suppressed(_summary(coarse, values, values), criterion) <= \
        _suppressed(_summary(fine, values, values), criterion)


def test_entropy_l_diversity_is_not_monotone_under_suppression():
    """The reason entropy l-diversity declares monotone_suppression = False: merging a
    failing class into a passing one can make both fail."""
    c = LDiversity("d", Fraction(3, 2), "entropy")
    values = ["a", "b"] + ["a"] * 8
    fine = _summary([0, 0] + [1] * 8, values, values)
    coarse = _summary([0] * 10, values, values)
    assert _suppressed(fine, c) == 8 and _suppressed(coarse, c) == 10


def _brute_emd(values, cls_values, distance):
    whole = Counter(values)
    order = sorted(whole)
    n, N = len(cls_values), len(values)
    cls = Counter(cls_values)
    diff = [Fraction(cls[v], n) - Fraction(whole[v], N) for v in order]
    if distance == "equal":
        return sum(abs(x) for x in diff) / 2
    run, total = Fraction(0), Fraction(0)
    for x in diff:
        run += x
        total += abs(run)
    return total / (len(order) - 1) if len(order) > 1 else Fraction(0)


@settings(max_examples=200, deadline=None)
@given(partitions(), st.sampled_from(["equal", "ordered"]))
def test_emd_matches_its_definition(data, distance):
    fine, _, values = data
    got = TCloseness("d", Fraction(1, 2), distance).emd(_summary(fine, values, values))
    for cid, emd in enumerate(got):
        members = [v for i, v in zip(fine, values, strict=True) if i == cid]
        assert emd == _brute_emd(values, members, distance)


def test_entropy_variant_agrees_with_the_float_definition():
    rng = np.random.default_rng(7)
    for _ in range(200):
        counts = rng.integers(0, 6, size=4)
        if counts.sum() == 0:
            continue
        s = ClassSummary(np.array([counts.sum()]), {"d": counts[None, :]},
                         {"d": SensitiveDomain("d", tuple("abcd"), counts)})
        p = counts[counts > 0] / counts.sum()
        h = -(p * np.log(p)).sum()
        for ell in (1.5, 2, 2.5, 3):
            if abs(h - math.log(ell)) > 1e-9:
                assert bool(LDiversity("d", Fraction(ell), "entropy").check(s)[0]) == \
                    (h >= math.log(ell))
