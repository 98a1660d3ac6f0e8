"""Analyst identities and the other names the ledger stores.

An analyst's budget is bound to an *identity*, so two spellings of one person must be one
identity and a name that only looks like another must not be a fresh one. The ledger stores
and compares only the normalized form returned by :func:`analyst_id`:

1. Unicode NFKC, then case folding, then NFKC again (so that ``'Alice'``, ``'ALICE'``,
   ``'ａｌｉｃｅ'`` (full width) and ``'alice'`` are one identity), leading and trailing
   white space stripped and inner runs of white space collapsed to one space;
2. refused if empty, longer than :data:`MAX_IDENTITY` characters, or holding a character
   that is not a letter, a combining mark, a decimal digit, a space or printable ASCII
   punctuation — control characters, format characters (zero-width space and joiners,
   bidirectional overrides, the soft hyphen, ...), private-use and unassigned code points,
   line separators, emoji and other symbols are all refused rather than silently dropped;
3. refused if its letters mix scripts (a Cyrillic ``'а'`` in ``'аlice'``), following the
   "highly restrictive" level of Unicode TS #39: one script, or Latin together with the
   scripts of one of Chinese, Japanese or Korean writing; and refused if its digits mix
   numeral systems.

What this does not catch: a name written *wholly* in another script that looks like a Latin
one (Cyrillic ``'аре'`` and Latin ``'ape'``). Such a name is a different identity — which
gains nothing on a persistent ledger, where an identity without a grant spends nothing, and
nothing beyond the dataset-wide budget on the in-memory demo. Once the service exists the
identity comes from authentication (an API token), never from a field of the request.

The script of a letter is read from its Unicode character name (``'CYRILLIC SMALL LETTER
A'``), as the standard library has no script property; that is exact for the scripts in
which names are written, and merges at worst two historic scripts that share a first word.

>>> analyst_id("  Alice ")
'alice'
>>> analyst_id("ＡＬＩＣＥ") == analyst_id("alice") == analyst_id("ALICE")
True
>>> analyst_id("Jürgen Groß")
'jürgen gross'
>>> analyst_id("山田 太郎"), analyst_id("ana.lópez@example.org")
('山田 太郎', 'ana.lópez@example.org')
>>> analyst_id("alice\\u200b")
Traceback (most recent call last):
...
statcurator.core.errors.InvalidParameterError: analyst 'alice\\u200b' holds an invisible or control character (U+200B ZERO WIDTH SPACE); use letters, digits, spaces and ASCII punctuation only
>>> analyst_id("\\u0430lice")
Traceback (most recent call last):
...
statcurator.core.errors.InvalidParameterError: analyst 'аlice' mixes scripts (Cyrillic 'а' with Latin); write the name in one script (a look-alike letter from another script is refused so that it cannot pose as another identity)
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

from ..core.errors import InvalidParameterError

__all__ = ["analyst_id", "check_name", "MAX_IDENTITY"]

#: The longest identity accepted, in characters after normalization.
MAX_IDENTITY = 128
_MAX_NAME = 512

# Unicode TS #39 "highly restrictive": these script sets may be mixed (with Latin).
_ALLOWED_MIXES = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
# Script names of more than one word in the Unicode character names.
_TWO_WORDS = frozenset({"OLD", "NEW", "LINEAR", "INSCRIPTIONAL", "IMPERIAL", "TAI", "CAUCASIAN",
                        "PSALTER", "MEETEI", "PAU", "CANADIAN", "MASARAM", "GUNJALA", "HANIFI",
                        "NYIAKENG", "ZANABAZAR", "SORA", "WARANG", "MENDE", "PAHAWH"})


def analyst_id(name: object) -> str:
    """The normalized identity of an analyst name (see the module docs for the rules).

    >>> analyst_id("Bob") == analyst_id("bob  ") == analyst_id("BOB")
    True
    """
    if isinstance(name, str) and len(name) <= MAX_IDENTITY:
        return _cached(name)
    return _normalize(name, "analyst", fold=True, limit=MAX_IDENTITY, scripts=True)


@lru_cache(maxsize=4096)
def _cached(name: str) -> str:  # a pure function of the text: charges repeat the same names
    return _normalize(name, "analyst", fold=True, limit=MAX_IDENTITY, scripts=True)


def check_name(value: object, what: str) -> str:
    """A dataset name or request id as given (no case folding), refused when it is empty,
    too long, or holds control or invisible characters.

    >>> check_name("adult", "dataset")
    'adult'
    >>> check_name("r\\u202e1", "request_id")
    Traceback (most recent call last):
    ...
    statcurator.core.errors.InvalidParameterError: request_id 'r\\u202e1' holds an invisible or control character (U+202E RIGHT-TO-LEFT OVERRIDE); use letters, digits, spaces and ASCII punctuation only
    """
    if not isinstance(value, str) or not value.strip():
        raise InvalidParameterError(f"{what} must be a non-empty string, got {value!r}",
                                    remedy=f"pass the {what} as text")
    if len(value) > _MAX_NAME:
        raise InvalidParameterError(f"{what} is {len(value)} characters long",
                                    remedy=f"use at most {_MAX_NAME} characters")
    if not (value.isascii() and value.isprintable()):  # printable ASCII: nothing hidden
        for ch in value:
            if _invisible(ch):
                raise _invisible_error(value, ch, what)
    return value


def _normalize(name: object, what: str, *, fold: bool, limit: int, scripts: bool) -> str:
    if not isinstance(name, str):
        raise InvalidParameterError(f"{what} must be a string, got {type(name).__name__} "
                                    f"{name!r}", remedy=f"pass the {what} as text, such as "
                                    f"{what}='alice'")
    if len(name) > 4 * limit:
        raise InvalidParameterError(f"{what} is {len(name)} characters long",
                                    remedy=f"use at most {limit} characters")
    for ch in name:  # before NFKC, which would turn some of them into spaces or nothing
        if _invisible(ch) and ch not in "\t\n\r ":
            raise _invisible_error(name, ch, what)
    text = unicodedata.normalize("NFKC", name)
    if fold:
        text = unicodedata.normalize("NFKC", text.casefold())
    text = " ".join(text.split())
    if not text:
        raise InvalidParameterError(f"{what} must not be empty or blank, got {name!r}",
                                    remedy=f"pass a name such as {what}='alice'")
    if len(text) > limit:
        raise InvalidParameterError(f"{what} is {len(text)} characters long",
                                    remedy=f"use at most {limit} characters")
    for ch in text:
        if _invisible(ch):
            raise _invisible_error(name, ch, what)
        cat = unicodedata.category(ch)
        if not (cat[0] in "LM" or cat == "Nd" or " " <= ch <= "~") \
                or unicodedata.name(ch, "").startswith("MODIFIER LETTER"):
            raise InvalidParameterError(
                f"{what} {text!r} holds the character {ch!r} "
                f"(U+{ord(ch):04X} {unicodedata.name(ch, 'unnamed')})",
                remedy="use letters, digits, spaces and ASCII punctuation only")
    if scripts:
        _one_script(text, what)
    return text


def _invisible(ch: str) -> bool:
    # Cc control, Cf format (zero width, bidi controls, soft hyphen), Cs surrogates,
    # Co private use, Cn unassigned, Zl/Zp line and paragraph separators.
    return unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _invisible_error(value: str, ch: str, what: str) -> InvalidParameterError:
    # An invisible character is shown escaped: the message must show what is there.
    shown = "'" + value.encode("unicode_escape").decode("ascii") + "'"
    return InvalidParameterError(
        f"{what} {shown} holds an invisible or control character "
        f"(U+{ord(ch):04X} {unicodedata.name(ch, unicodedata.category(ch))})",
        remedy="use letters, digits, spaces and ASCII punctuation only")


def _script(ch: str) -> str:
    words = unicodedata.name(ch, "").split()
    if not words:
        return "UNKNOWN"
    if words[0] == "CJK":
        return "HAN"
    if words[0] == "KATAKANA-HIRAGANA":
        return "KATAKANA"
    if words[0] in _TWO_WORDS and len(words) > 1:
        return f"{words[0]} {words[1]}"
    return words[0]


def _one_script(text: str, what: str) -> None:
    seen: dict[str, str] = {}
    zeros: dict[int, str] = {}
    for ch in text:
        cat = unicodedata.category(ch)
        if cat[0] == "L":
            seen.setdefault(_script(ch), ch)
        elif cat == "Nd":
            zeros.setdefault(ord(ch) - unicodedata.digit(ch), ch)
    if len(seen) > 1 and not any(set(seen) <= mix for mix in _ALLOWED_MIXES):
        first, *others = seen.items()
        odd = next(((s, c) for s, c in others if s != "LATIN"), others[0]) \
            if first[0] == "LATIN" else first
        rest = sorted(s.title() for s in seen if s != odd[0])
        raise InvalidParameterError(
            f"{what} {text!r} mixes scripts ({odd[0].title()} {odd[1]!r} with "
            f"{', '.join(rest)})",
            remedy="write the name in one script (a look-alike letter from another script "
                   "is refused so that it cannot pose as another identity)")
    if len(zeros) > 1:
        raise InvalidParameterError(f"{what} {text!r} mixes digits of different numeral "
                                    "systems", remedy="write every digit in one numeral system")
