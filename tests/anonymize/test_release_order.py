"""The released rows come in a random order, and the ordered distance of t-closeness is numeric
whatever NULLs the column holds (findings of the 2026-11-26 anonymization review)."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa

from statcurator.anonymize import KAnonymity, anonymize
from statcurator.anonymize import api as api_module
from statcurator.anonymize.criteria import SensitiveDomain, value_order
from statcurator.anonymize.verify import _order
from statcurator.core.schema import Column, HierarchySpec, TableMeta

META = TableMeta("t", (Column("patient_id", role="identifier"),
                       Column("age", type="integer", role="qi",
                              hierarchy=HierarchySpec("intervals", widths=(4, 8, 16))),
                       Column("diagnosis", role="sensitive")))
N = 200
# the input is in patient-id order, which is age order: whoever knows the ages of a class's
# members would read their diagnoses off the class's rows, in order
TABLE = pa.table({"patient_id": list(range(N)), "age": [20 + i // 4 for i in range(N)],
                  "diagnosis": [("flu", "cold", "hiv", "ulcer", "asthma")[(i * 7) % 5]
                                for i in range(N)]})


def aligned(res) -> bool:
    return res.table.column("diagnosis").to_pylist() == TABLE.column("diagnosis").to_pylist()


def test_the_release_does_not_keep_the_inputs_order() -> None:
    for algorithm in ("optimal", "mondrian"):
        res = anonymize(TABLE, KAnonymity(4), meta=META, algorithm=algorithm)
        assert all(res.verified.values()) and all(res.verify().values())
        # a random order of 200 rows with 5 diagnoses is this one with probability < 1e-60
        assert not aligned(res)
        assert Counter(res.table.column("diagnosis").to_pylist()) == \
            Counter(TABLE.column("diagnosis").to_pylist())


def test_control_without_the_shuffle_the_rows_line_up(monkeypatch) -> None:
    monkeypatch.setattr(api_module, "_shuffled", lambda table, check: (table, check))
    assert aligned(anonymize(TABLE, KAnonymity(4), meta=META, algorithm="mondrian"))


def test_a_null_does_not_turn_the_ordered_distance_alphabetical() -> None:
    """One NULL salary among numbers made both the search and the verifier order them as
    text ('', '1', '10', '2', ...): a class of the six lowest salaries then passed t = 0.2 at
    an EMD of 0.045 where its numeric EMD is 0.22. NULL now comes last, the rest by value
    (or as declared)."""
    salaries = [1, 2, 3, 4, 5, 6, 10, 20, 30, 40, 50, 60, None]
    texts = {"" if s is None else str(s) for s in salaries}
    numeric = ["1", "2", "3", "4", "5", "6", "10", "20", "30", "40", "50", "60", ""]
    assert SensitiveDomain.from_values("salary", salaries).values == tuple(numeric)
    assert value_order(texts) == numeric
    assert _order(Counter(texts), None, None) == numeric
    levels = ["low", "mid", "high", "top"]
    assert value_order({"top", "low", ""}, order=levels) == ["low", "top", ""]
    assert _order(Counter({"top": 1, "low": 1, "": 1}), None, levels) == ["low", "top", ""]
    assert sorted(texts)[:3] == ["", "1", "10"]       # control: the order the fallback gave


def test_delta_presence_counts_the_suppressed_records_as_a_class() -> None:
    """The population aged 61 and 62 form a class of which both are in the sample (δ = 1 >
    3/4); suppressing them used to pass, though they were then the only people outside the
    released classes: the suppression count said both were in the sample. The suppressed
    records are now one more class, of everyone outside the released ones, held to δ too.
    Control: the release the search used to choose fails the independent verification."""
    from fractions import Fraction

    from statcurator.anonymize import DeltaPresence, verify
    from statcurator.core.schema import HierarchySpec

    meta = TableMeta("t", (Column("age", type="integer", role="qi",
                                  hierarchy=HierarchySpec("intervals", widths=(10, 20))),
                           Column("dx", role="sensitive")))
    ages = [21, 22, 23, 24, 25, 26, 27, 28, 61, 62]
    population = pa.table({"age": ages, "dx": ["?"] * len(ages)})
    sample = pa.table({"age": [21, 23, 25, 27, 61, 62], "dx": ["a", "b", "c", "d", "e", "f"]})
    criterion = DeltaPresence(Fraction(1, 4), Fraction(3, 4), population)
    res = anonymize(sample, criterion, meta=meta, suppression=Fraction(1, 3))
    assert all(res.verified.values())
    if res.suppressed:
        outside = [a for a in ages if not any(r["age"] != "*" and _covers(r["age"], a)
                                               for r in res.table.to_pylist())]
        assert Fraction(1, 4) <= Fraction(res.suppressed, len(outside)) <= Fraction(3, 4)
    # control: level 1 ([20, 30) released, 61 and 62 suppressed) is what passed before
    old = pa.table({"age": ["[20, 30)"] * 4 + ["*", "*"], "dx": ["a", "b", "c", "d", None, None]})
    checked = verify(old, [criterion], original=sample, qi=["age"],
                     hierarchies=res.verification_inputs["hierarchies"], levels={"age": 1},
                     suppression=Fraction(1, 3))
    assert checked[str(criterion)] is False


def _covers(label: str, age: int) -> bool:
    lo, hi = (int(x) for x in label.strip("[)").split(","))
    return lo <= age < hi
