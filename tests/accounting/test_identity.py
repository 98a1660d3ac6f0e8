"""Analyst identities: one identity per person's spellings, none for disguises."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statcurator.accounting import analyst_id
from statcurator.core.errors import InvalidParameterError


@pytest.mark.parametrize("spelling", ["alice", "Alice", "ALICE", " alice", "alice\t",
                                      "ａｌｉｃｅ", "Ａlice", "alice  "])
def test_spellings_are_one_identity(spelling):
    assert analyst_id(spelling) == "alice"


@pytest.mark.parametrize(("name", "why"), [
    ("alice\u200b", "invisible"), ("\u200dalice", "invisible"), ("ali\u00adce", "invisible"),
    ("alice\u202e", "invisible"), ("alice\u2066", "invisible"), ("alice\x07", "invisible"),
    ("alice\ue000", "invisible"), ("\u0430lice", "mixes scripts"), ("p\u0430ypal", "mixes scripts"),
    ("\u03b1lice", "mixes scripts"), ("alice\U0001f642", "character"), ("al\u02bcice", "character"),
    ("a1\u0661", "numeral systems"), ("", "empty"), ("   ", "empty"), ("x" * 129, "long"),
])
def test_disguises_are_refused(name, why):
    with pytest.raises(InvalidParameterError, match=why):
        analyst_id(name)


@pytest.mark.parametrize("name", ["山田太郎", "やまだ タロウ", "김민준", "Σωκράτης", "Дмитрий",
                                  "o'brien", "ana.lópez@example.org", "user_1-2+3", "Łukasz"])
def test_real_names_in_one_script_are_accepted(name):
    assert analyst_id(name) == analyst_id(analyst_id(name))


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_identities_are_normalized_and_clean(text):
    """Whatever is accepted is a fixed point of the normalization and holds nothing
    invisible; equal identities are what the ledger compares."""
    try:
        ident = analyst_id(text)
    except InvalidParameterError:
        return
    assert analyst_id(ident) == ident
    assert ident == ident.strip() and ident
    assert unicodedata.normalize("NFKC", ident) == ident
    assert not any(unicodedata.category(c) in ("Cc", "Cf", "Co", "Cn", "Cs") for c in ident)
