"""Transformations, measurements, chaining and composition, as functions of their maps."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from statcurator.core.composition import parallel, postprocess, sequential
from statcurator.core.errors import InvalidParameterError
from statcurator.core.measurement import (
    Measurement,
    Transformation,
    chain,
    make_clamped_sum,
    make_count,
    make_histogram,
)
from statcurator.core.measures import ZCDP, ApproxDP, PureDP
from statcurator.core.relations import (
    AbsoluteDistance,
    AddRemove,
    ChangeOne,
    L1Distance,
    PersonLevel,
)


def laplace_like(eps: Fraction, metric: object = None) -> Measurement:
    """A stand-in measurement with the Laplace privacy map ε·d/Δ (Δ = 1), no noise."""
    return Measurement(metric or AbsoluteDistance(), PureDP, lambda x: x,
                       lambda d: PureDP(eps * d), name="laplace-like")


def test_chain_composes_stability_and_privacy_maps() -> None:
    s = make_clamped_sum(0, 10, AddRemove())
    m = Measurement(AbsoluteDistance(), PureDP, lambda x: x, lambda d: PureDP(d / 10))
    chained = s >> m
    assert chained([3, 5, 20]) == 18
    assert chained.map(1) == PureDP(1)  # sensitivity 10, scale 10
    assert chained.map(3) == PureDP(3)  # three rows: group privacy, linear
    twice = s >> Transformation(AbsoluteDistance(), AbsoluteDistance(), lambda x: 2 * x,
                                lambda d: 2 * d, "double")
    assert twice.map(1) == 20
    assert chain(s, m).name == "clamped sum [0, 10] >> measurement"


def test_chaining_needs_matching_spaces() -> None:
    with pytest.raises(InvalidParameterError, match="cannot chain"):
        make_histogram(["a"], AddRemove()) >> laplace_like(Fraction(1))


def test_stabilities_of_the_standard_transformations() -> None:
    assert make_count(AddRemove()).sensitivity == 1
    assert make_count(ChangeOne()).sensitivity == 0
    assert make_count(PersonLevel(0, max_rows=4)).sensitivity == 4
    assert make_clamped_sum(-2, 5, ChangeOne()).sensitivity == 7
    assert make_clamped_sum(-2, 5, AddRemove()).sensitivity == 5
    assert make_histogram(["F", "M"], AddRemove()).sensitivity == 1
    assert make_histogram(["F", "M"], ChangeOne()).sensitivity == 2
    h = make_histogram(["F", "M"], AddRemove(), column="sex")
    assert h([{"sex": "F"}, {"sex": "F"}, {"sex": "X"}]).tolist() == [2, 0]


def test_bounded_dp_from_unbounded_with_half_epsilon() -> None:
    count = make_count(AddRemove()) >> laplace_like(Fraction(1, 2))
    bounded = count.under(ChangeOne())
    assert count.cost == PureDP(Fraction(1, 2))
    assert bounded.cost == PureDP(1)  # ε/2 under add/remove is ε under change-one
    assert bounded.input_space == ChangeOne()
    with pytest.raises(InvalidParameterError):
        bounded.under(ChangeOne())


def test_post_processing_is_free() -> None:
    m = make_count(AddRemove()) >> laplace_like(Fraction(1))
    clipped = postprocess(m, lambda v: max(0, v - 100))
    assert clipped.cost == m.cost
    assert clipped([1, 2, 3]) == 0
    assert m.then(str)([1]) == "1"


def test_sequential_composition_adds() -> None:
    m1 = make_count(AddRemove()) >> laplace_like(Fraction(1, 4))
    m2 = make_clamped_sum(0, 1, AddRemove()) >> laplace_like(Fraction(1, 2))
    both = sequential([m1, m2])
    assert both([0, 1, 1]) == (3, 2)
    assert both.cost == PureDP(Fraction(3, 4))
    assert both.check(1, PureDP(1)) and not both.check(2, PureDP(1))
    gauss = Measurement(AddRemove(), ZCDP, len, lambda d: ZCDP(d * d / 8))
    mixed = sequential([m1, gauss])
    assert mixed.cost == ZCDP(Fraction(1, 32) + Fraction(1, 8))
    with pytest.raises(InvalidParameterError):
        sequential([])
    with pytest.raises(InvalidParameterError, match="same input"):
        sequential([m1, m1.under(ChangeOne())])


def test_parallel_composition_takes_the_maximum() -> None:
    count = make_count(AddRemove()) >> laplace_like(Fraction(1, 2))
    rows = [("F", 30), ("M", 40), ("M", 50), ("X", 1)]
    by_sex = parallel(lambda r: r[0], count, keys=["F", "M"])
    assert by_sex(rows) == {"F": 1, "M": 2}
    assert by_sex.cost == PureDP(Fraction(1, 2))  # not 1: the parts are disjoint
    mixed = parallel(lambda r: r[0], {
        "F": count,
        "M": Measurement(AddRemove(), ApproxDP, len, lambda d: ApproxDP(d / 4, Fraction(1, 10**9))),
    }, keys=["F", "M"])
    assert mixed.cost == ApproxDP(Fraction(1, 2), Fraction(1, 10**9))
    with pytest.raises(InvalidParameterError, match="twice"):
        parallel(lambda r: r, count, keys=["a", "a"])
    with pytest.raises(InvalidParameterError, match="add/remove"):
        parallel(lambda r: r, count.under(ChangeOne()), keys=["a"])


def test_parallel_composition_empirically_one_row_touches_one_part() -> None:
    # the histogram of one neighbour pair differs in one bin only (add/remove)
    h = make_histogram(["a", "b", "c"], AddRemove())
    d1 = list("aabcc")
    d2 = d1 + ["b"]
    assert L1Distance().distance(h(d1), h(d2)) == 1
    assert np.count_nonzero(h(d1) != h(d2)) == 1


def test_privacy_maps_must_return_losses() -> None:
    bad = Measurement(AbsoluteDistance(), PureDP, lambda x: x, lambda d: 0.5)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidParameterError, match="privacy map"):
        _ = bad.cost
    with pytest.raises(InvalidParameterError):
        laplace_like(Fraction(1)).map(-1)
