"""Assembling an engine's result rows: the public key sets' membership is SQL equality.

The common one-key, one-term grouped count takes a fast path (plain set membership for a key
set of text); these tests hold it to the general path on the values where Python's equality
and SQL's part ways (True == 1 in Python, not in SQL; NULL matches only a listed
NULL).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.engines.base import result_from_rows
from statcurator.query.expr import Col
from statcurator.query.plan import GroupKey, Scan
from statcurator.query.relational import EnginePlan, Quantized, Term


def _plan(values: tuple, terms: int = 1) -> EnginePlan:
    return EnginePlan(Scan("t", "t"), (GroupKey("k", Col("t", "k")),), (values,), None,
                      tuple(Term("rows") for _ in range(terms)))


ROWS = [("a", 3), ("b", 4), (None, 5), ("zz", 6), (True, 7), (1, 8), ("1", 10)]


@pytest.mark.parametrize("listed, kept", [
    (("a", "b"), {("a",): (3,), ("b",): (4,)}),
    (("a", None), {("a",): (3,), (None,): (5,)}),
    (("1", "zz"), {("1",): (10,), ("zz",): (6,)}),
    ((1,), {(1,): (8,)}),  # numbers take the general path: True is not 1 in SQL
    ((True,), {(True,): (7,)}),
])
def test_only_listed_keys_are_kept_with_sql_equality(listed, kept) -> None:
    fast = result_from_rows(_plan(listed), ROWS, []).groups
    assert fast == kept
    # the same rows through the general path (two terms: no fast path) agree
    general = result_from_rows(_plan(listed, terms=2), [r + (0,) for r in ROWS], []).groups
    assert {k: v[:1] for k, v in general.items()} == kept


def test_key_sets_equal_in_python_but_not_in_sql_are_not_confused() -> None:
    """(1,) == (True,) in Python: a key-set cache keyed on equality would answer one with
    the other's membership test (it did, before the cache went by identity)."""
    assert result_from_rows(_plan((1,)), ROWS, []).groups == {(1,): (8,)}
    assert result_from_rows(_plan((True,)), ROWS, []).groups == {(True,): (7,)}


# -- centred terms from raw moments ---------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(qs=st.lists(st.integers(-(2**30), 2**30), max_size=40),
       lq=st.integers(-(2**30), 0), uq=st.integers(0, 2**30))
def test_centred_terms_from_raw_moments_are_the_centred_sums(qs, lq, uq) -> None:
    """The SQL engines return COUNT(q), SUM(q) (and SUM(q*q)) for a centred term; the
    combination is exact: the same integer as summing 2q - c (and its square) row by row.
    A column two terms share is computed once: COUNT(*), COUNT(q), SUM(q), SUM(q*q)."""
    q = Quantized(Col("t", "x"), 0, lq, uq, integral=True, real=False)
    terms = (Term("rows"), Term("centered", q), Term("centered_sq", q), Term("sum", q))
    plan = EnginePlan(Scan("t", "t"), (), (), None, terms)
    row = (len(qs), len(qs), sum(qs), sum(x * x for x in qs))
    c = lq + uq
    assert result_from_rows(plan, [row], []).groups[()] == (
        len(qs), sum(2 * x - c for x in qs), sum((2 * x - c) ** 2 for x in qs), sum(qs))


def test_an_empty_group_has_null_moments_and_zero_centred_terms() -> None:
    q = Quantized(Col("t", "x"), 0, -5, 9, integral=True, real=False)
    plan = EnginePlan(Scan("t", "t"), (), (), None, (Term("centered", q),))
    assert result_from_rows(plan, [(0, None)], []).groups[()] == (0,)


def test_a_lone_centred_term_by_a_text_key_is_combined_not_read_as_one_column() -> None:
    """One key of text and one term is the fast path's shape; a centred term there still
    arrives as two moments (COUNT, SUM) and must be combined, not read as its count."""
    q = Quantized(Col("t", "x"), 0, 0, 10, integral=True, real=False)
    plan = EnginePlan(Scan("t", "t"), (GroupKey("k", Col("t", "k")),), (("a", "b"),), None,
                      (Term("centered", q),))
    rows = [("a", 3, 12), ("b", 0, None), ("c", 1, 1)]
    assert result_from_rows(plan, rows, []).groups == {("a",): (2 * 12 - 10 * 3,),
                                                       ("b",): (0,)}


def test_an_aggregate_two_terms_ask_for_is_one_column_of_the_sql() -> None:
    """A mean asks for COUNT(q) twice (its count and its centred sum's first moment): the
    statement computes it once, and each term reads it from there."""
    from statcurator.engines.base import term_columns
    from statcurator.engines.sqlgen import plan_statements

    q = Quantized(Col("t", "x"), 0, 0, 10, integral=True, real=False)
    r = Quantized(Col("t", "y"), 0, 0, 10, integral=True, real=False)
    terms = (Term("valid", q), Term("centered", q), Term("valid", r), Term("sum", q))
    plan = EnginePlan(Scan("t", "t"), (), (), None, terms)
    assert term_columns(terms)[1] == ((0,), (0, 1), (2,), (1,))
    main, _ = plan_statements(plan, "00")
    assert main.sql().count("COUNT(q0)") == 1 and main.sql().count("SUM(q0)") == 1
    # columns COUNT(q0) = 3, SUM(q0) = 12, COUNT(q1) = 2
    assert result_from_rows(plan, [(3, 12, 2)], []).groups[()] == (3, 2 * 12 - 10 * 3, 2, 12)
