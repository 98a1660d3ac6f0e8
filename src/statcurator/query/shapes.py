"""Query shapes: the constants of a WHERE clause as parameters of a query already compiled.

An analyst, a dashboard or the console's form often asks the same query again with other
constants in its filter (``WHERE age > 30``, then ``WHERE age > 31``). Those constants never
reach the privacy analysis: a WHERE clause is a row-wise filter, 1-stable whatever rows it
keeps, and the compiler reads its constants only through their types (a literal's kind is its
Python type's), to type-check the predicate. A query that differs from an earlier one only in
such constants of the same types therefore has the same sensitivities, mechanisms, cost and
certificate; only the filter that runs differs. ``Curator.sql`` lets such a query skip the
parse, the compilation, the binding and the certificate's re-check, and start from the earlier
query's compiled form with its constants put in place, once :func:`check` (written apart from
the learning below) has verified that nothing but such constants differs.

Which constants are free is never assumed from the syntax: it is learnt the second time a
shape is seen. A shape is the text itself, character for character, with each number and
string literal that DuckDB's tokenizer finds blanked (:func:`shape_of`): comments and spacing
are part of it, so no text can hide from the key what a parser reads (the T-SQL fallback
reads ``[--]`` as a name, where DuckDB's tokens start a comment). The text is parsed again
with each constant changed (a *probe*), and a
constant is free only when every probe's plan differs from the text's plan in exactly one
place: one literal of a WHERE predicate, holding the probed value, of the same type, with the
notes and the structure unchanged. Every other constant — in SELECT, GROUP BY, HAVING, ORDER
BY or LIMIT, a clamp bound, a bin edge, a negative number, a constant the front end converts
(a quoted number compared with a numeric column, 0/1 with a boolean one: the probes include
such values to catch it) — stays part of the shape's key: a text with another value there is
parsed and compiled from scratch.

>>> from statcurator.core.schema import Column, TableMeta
>>> from statcurator.query.catalog import DictCatalog, TableInfo
>>> from statcurator.query.sql import parse_sql
>>> meta = TableMeta("t", (Column("age", type="integer", bounds=(0, 120)), Column("sex")))
>>> cat = DictCatalog({"t": TableInfo.from_meta(meta)})
>>> text = "SELECT SUM(age) AS s FROM t WHERE age > 17 AND sex = 'F'"
>>> shape = shape_of(text)
>>> [s.value for s in shape.slots]
[17, 'F']
>>> learnt = learn(shape, text, parse_sql(text, cat), lambda t: parse_sql(t, cat))
>>> learnt.free
(0, 1)
>>> other = shape_of("SELECT SUM(age) AS s FROM t WHERE age > 40 AND sex = 'M'")
>>> learnt.plan_for(other) == parse_sql("SELECT SUM(age) AS s FROM t WHERE age > 40 AND sex = 'M'", cat)
True

A constant of the aggregate is not free (it changes what is summed, hence the sensitivity):

>>> text = "SELECT SUM(CASE WHEN age > 50 THEN 50 ELSE age END) AS s FROM t WHERE age > 17"
>>> learn(shape_of(text), text, parse_sql(text, cat), lambda t: parse_sql(t, cat)).free
(2,)
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Sequence
from typing import Any

from ..core.errors import PrivacyAccountingError
from .expr import Lit
from .plan import Filter, QueryPlan

__all__ = ["Shape", "Slot", "Learnt", "shape_of", "learn", "check", "MAX_SLOTS", "put_at",
           "put_all", "same_but", "value_at"]

#: the number literals a slot may hold: plain decimals (no sign, exponent, underscore or hex,
#: whose readings differ between Python and SQL dialects)
_PLAIN_NUMBER = re.compile(r"[0-9]+(\.[0-9]+)?\Z")


@dataclasses.dataclass(frozen=True, slots=True)
class Slot:
    """One constant of a text: where it is (``start``/``end``, inclusive, quotes included)
    and the value the SQL front end reads from it."""

    start: int
    end: int
    value: int | float | str


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """A text with its constants blanked (``key``), and the constants (``slots``)."""

    key: tuple[Any, ...]
    slots: tuple[Slot, ...]


def shape_of(text: str) -> Shape | None:
    """The shape of ``text`` (its characters between the constants DuckDB's tokenizer
    finds, and the constants' types), or None when it does not tokenize or holds no constant
    worth a shape.

    >>> s = shape_of("SELECT COUNT(*) FROM t WHERE age > 17  -- adults")
    >>> s.key == shape_of("SELECT COUNT(*) FROM t WHERE age > 18  -- adults").key
    True
    >>> s.key == shape_of("SELECT COUNT(*) FROM t WHERE age > 18").key  # the comment is in it
    False
    >>> s.key == shape_of("select count(*) from t where age > 18  -- adults").key
    False
    >>> [x.value for x in shape_of("SELECT COUNT(*) FROM t WHERE x IN ('it''s', 2.5)").slots]
    ["it's", 2.5]
    >>> shape_of(None), shape_of("SELECT COUNT(*) FROM t WHERE x > " + "9" * 5000)
    (None, None)
    """
    if not isinstance(text, str):
        return None
    tokenizer = _tokenizer()
    string, number, errors = _LEXICON
    try:
        tokens = tokenizer.tokenize(text)
    except errors:
        return None
    key: list[Any] = []
    slots: list[Slot] = []
    done = 0  # the text up to here is in the key
    for t in tokens:
        kind = t.token_type
        if kind is string and text[t.start] == "'" and text[t.end] == "'":
            value: Any = t.text
        elif kind is number and _PLAIN_NUMBER.match(t.text):
            value = _number(t.text)  # None: no finite value (not a constant worth a slot)
        else:
            continue
        if value is None:
            continue
        slots.append(Slot(t.start, t.end, value))
        key += [text[done:t.start], type(value)]
        done = t.end + 1
    if not slots:
        return None
    key.append(text[done:])
    return Shape(tuple(key), tuple(slots))


def _number(text: str) -> int | float | None:
    """A number as the SQL front end reads it (an integer, else a float), or None when it
    reads as no finite value (an integer of thousands of digits is a float there: ∞)."""
    try:
        return int(text)
    except ValueError:
        value = float(text)
        return value if math.isfinite(value) else None


_TOKENIZER: Any = None
#: the tokenizer's string and number token types and its errors (set with _TOKENIZER: sqlglot
#: is imported on first use, once rather than on every shape_of)
_LEXICON: tuple[Any, Any, tuple[type[Exception], ...]] = (None, None, ())


def _tokenizer() -> Any:
    global _TOKENIZER, _LEXICON
    if _TOKENIZER is None:
        from sqlglot import TokenType
        from sqlglot.dialects.duckdb import DuckDB
        from sqlglot.errors import TokenError

        _LEXICON = (TokenType.STRING, TokenType.NUMBER, (TokenError, ValueError))
        _TOKENIZER = DuckDB().tokenizer_class()
    return _TOKENIZER


def literal_text(value: int | float | str) -> str:
    """A constant written as SQL (what a slot of that value reads back as).

    >>> literal_text("it's"), literal_text(17), literal_text(2.5)
    ("'it''s'", '17', '2.5')
    """
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _with(text: str, slots: tuple[Slot, ...], values: dict[int, Any]) -> str:
    """``text`` with the slots at the given indexes holding other values."""
    out, at = [], 0
    for i in sorted(values):
        s = slots[i]
        out += [text[at:s.start], literal_text(values[i])]
        at = s.end + 1
    out.append(text[at:])
    return "".join(out)


def _probes(value: int | float | str) -> list[int | float | str]:
    """Other values for a slot: one ordinary, and those the front end would convert
    (a quoted number or boolean against a numeric or boolean column, 0/1 against a boolean
    one), so that a slot where they are converted is found not free."""
    if isinstance(value, str):
        return [value + "~", "1", "true"]
    if isinstance(value, int):
        return [value + 1_000_003, 1 if value != 1 else 0]
    return [value + 0.5]


def _differences(a: Any, b: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The paths where two plans differ (values compared with their types: 1 is not 1.0
    or True here)."""
    if type(a) is not type(b):
        return [path]
    if dataclasses.is_dataclass(a):
        out: list[tuple[Any, ...]] = []
        for f in dataclasses.fields(a):
            out += _differences(getattr(a, f.name), getattr(b, f.name), path + (f.name,))
        return out
    if isinstance(a, tuple | list):
        if len(a) != len(b):
            return [path]
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            out += _differences(x, y, path + (i,))
        return out
    return [] if a == b else [path]


def _in_where(plan: QueryPlan, path: tuple[Any, ...]) -> bool:
    """Whether ``path`` leads from the plan's relation, through a Filter's predicate, to the
    value of a literal."""
    if not path or path[0] != "relation" or path[-1] != "value":
        return False
    node: Any = plan
    through_filter = False
    for step in path[:-1]:
        if isinstance(node, Filter) and step == "predicate":
            through_filter = True
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return through_filter and isinstance(node, Lit)


def put_at(obj: Any, path: tuple[Any, ...], value: Any) -> Any:
    """``obj`` (frozen dataclasses and tuples) with ``value`` at ``path`` (field names and
    tuple indexes), everything else shared.

    >>> put_at((1, (2, 3)), (1, 0), 9)
    (1, (9, 3))
    """
    if not path:
        return value
    step, rest = path[0], path[1:]
    if isinstance(step, int):
        items = list(obj)
        items[step] = put_at(items[step], rest, value)
        return tuple(items)
    return dataclasses.replace(obj, **{step: put_at(getattr(obj, step), rest, value)})


def put_all(obj: Any, paths: tuple[tuple[Any, ...], ...], values: Sequence[Any]) -> Any:
    """``obj`` with ``values[i]`` at ``paths[i]``: :func:`put_at` with each in turn, but a
    node on several paths is rebuilt once. The paths must be distinct, none the beginning
    of another (else ValueError).

    >>> put_all((1, (2, 3)), ((1, 0), (1, 1)), (8, 9))
    (1, (8, 9))
    """
    steps = _steps(paths)
    if steps is None:
        raise ValueError("put_all(): a path is empty, repeated or the beginning of another")
    return _put(obj, steps, values)


def _put(obj: Any, steps: Any, values: Sequence[Any]) -> Any:
    if type(steps) is int:  # the end of path number `steps`
        return values[steps]
    if isinstance(obj, tuple | list):
        items = list(obj)
        for i, rest in steps.items():
            items[i] = _put(items[i], rest, values)
        return tuple(items)
    # what dataclasses.replace does, with the fields of each class looked up once (replace
    # reads them again at every call); a name that is no field is refused by the constructor
    cls = type(obj)
    names = _INIT.get(cls)
    if names is None:  # (dataclasses.fields refuses what is no dataclass, as replace does)
        names = _INIT[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    fields = {name: getattr(obj, name) for name in names}
    for name, rest in steps.items():
        fields[name] = _put(getattr(obj, name), rest, values)
    return cls(**fields)


#: the fields each dataclass's constructor takes, per class
_INIT: dict[type, tuple[str, ...]] = {}


def same_but(a: Any, b: Any, paths: tuple[tuple[Any, ...], ...], *,
             within: str | None = None) -> bool:
    """Whether ``b`` is ``a`` with other values *of the same types* at ``paths`` (from ``a``'s
    field ``within`` when given), and nothing else changed: what comparing ``b`` with ``a``
    after putting ``b``'s values at those paths into it (:func:`put_at`) would say, checked
    in one walk along the paths instead of rebuilding and comparing the nodes on them.
    Elsewhere, values are compared as ``==`` compares dataclasses and tuples (identical or
    equal), so the parts the two share are not walked.

    >>> same_but((1, (2, "x")), (1, (5, "x")), ((1, 0),))
    True
    >>> same_but((1, (2, "x")), (1, (5, "y")), ((1, 0),))  # another change
    False
    >>> same_but((1, (2, "x")), (1, (2.5, "x")), ((1, 0),))  # another type
    False
    """
    steps = _steps(paths)
    if steps is None:
        return False
    return _same_but(a, b, steps if within is None else {within: steps})


def _same_but(a: Any, b: Any, steps: Any) -> bool:
    if type(steps) is int:  # the end of a path: any value of the same type
        return type(a) is type(b)
    if type(a) is not type(b):
        return False
    names: Any
    if isinstance(a, tuple):
        if len(a) != len(b):
            return False
        names = range(len(a))
    else:
        names = _compared(type(a))
        if names is None:  # neither a dataclass nor a tuple: no path goes through it
            return False
    read = operator.getitem if isinstance(a, tuple) else getattr
    on_paths = 0
    for name in names:
        x, y, rest = read(a, name), read(b, name), steps.get(name)
        if rest is None:
            if not (x is y or x == y):
                return False
        elif _same_but(x, y, rest):
            on_paths += 1
        else:
            return False
    return on_paths == len(steps)  # every step leads somewhere


#: the fields ``==`` compares, per dataclass (None for other classes)
_COMPARED: dict[type, tuple[str, ...] | None] = {}


def _compared(cls: type) -> tuple[str, ...] | None:
    """The fields ``==`` compares on ``cls``: a dataclass whose ``__eq__`` is the one the
    dataclass wrote (it compares exactly those fields), or :class:`Lit` (one field, compared
    by type and value, which :func:`_same_but` does at a path's end); None for any other
    class, which is then never walked into (its own ``__eq__`` may compare otherwise)."""
    if cls not in _COMPARED:
        eq = getattr(cls.__dict__.get("__eq__"), "__code__", None)
        generated = eq is not None and eq.co_filename == "<string>"  # written by dataclass
        _COMPARED[cls] = (tuple(f.name for f in dataclasses.fields(cls) if f.compare)
                          if dataclasses.is_dataclass(cls) and (generated or cls is Lit)
                          else None)
    return _COMPARED[cls]


def _steps(paths: tuple[tuple[Any, ...], ...]) -> dict[Any, Any] | None:
    """The paths as a tree of steps: each step maps to the tree of the steps after it, the
    last step of a path to the path's index; None when a path is empty, repeated or the
    beginning of another (remembered: the paths of a shape repeat with each of its texts)."""
    tree = _STEPS.get(paths, False)
    if tree is not False:
        return tree  # type: ignore[return-value]
    tree = {}
    for i, path in enumerate(paths):
        node: Any = tree
        for step in path[:-1]:
            node = node.setdefault(step, {})
            if type(node) is not dict:  # an earlier path ends here
                node = None
                break
        if not path or node is None or path[-1] in node:
            tree = None
            break
        node[path[-1]] = i
    if len(_STEPS) >= 256:
        _STEPS.clear()
    _STEPS[paths] = tree
    return tree


_STEPS: dict[tuple[tuple[Any, ...], ...], dict[Any, Any] | None] = {}


@dataclasses.dataclass(frozen=True)
class Learnt:
    """What was learnt of a shape: its plan (from the text it was learnt on), the indexes of
    its free slots with the path of each one's literal in the plan, and the values the other
    slots must hold for the plan to apply."""

    shape: Shape
    plan: QueryPlan
    free: tuple[int, ...]
    paths: tuple[tuple[Any, ...], ...]

    def plan_for(self, shape: Shape) -> QueryPlan | None:
        """The plan of a text of this shape: this plan with the text's free constants put in
        place, or None when a constant that is not free differs (or a free one's type)."""
        if shape.key != self.shape.key:
            return None
        mine, theirs = self.shape.slots, shape.slots
        free = set(self.free)
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            if i not in free and (type(a.value) is not type(b.value) or a.value != b.value):
                return None
        values = []
        for i in self.free:
            v = theirs[i].value
            if type(v) is not type(mine[i].value):
                return None
            values.append(v)
        return put_all(self.plan, self.paths, values)  # type: ignore[no-any-return]


#: the most constants a shape may have to be learnt (each costs up to three parses of the text:
#: a text with thousands of constants would make learning a denial of service)
MAX_SLOTS = 32


def learn(shape: Shape, text: str, plan: QueryPlan,
          parse: Callable[[str], QueryPlan]) -> Learnt:
    """Find the free slots of ``shape``, the shape of ``text`` whose plan is ``plan``, by
    parsing the text again with each slot's probes (``parse`` raises on a text it refuses).
    A shape of more than :data:`MAX_SLOTS` constants has none."""
    free, paths = [], []
    seen: set[tuple[Any, ...]] = set()
    if len(shape.slots) > MAX_SLOTS:
        return Learnt(shape, plan, (), ())
    for i, slot in enumerate(shape.slots):
        path = _free_path(text, shape, i, slot, plan, parse)
        if path is not None and path not in seen:
            seen.add(path)
            free.append(i)
            paths.append(path)
    return Learnt(shape, plan, tuple(free), tuple(paths))


def _free_path(text: str, shape: Shape, i: int, slot: Slot, plan: QueryPlan,
               parse: Callable[[str], QueryPlan]) -> tuple[Any, ...] | None:
    path: tuple[Any, ...] | None = None
    for probe in _probes(slot.value):
        try:
            other = parse(_with(text, shape.slots, {i: probe}))
        except Exception:  # noqa: BLE001 - a probe the front end refuses: not free
            return None
        diff = _differences(plan, other)
        if len(diff) != 1 or not _in_where(plan, diff[0]):
            return None
        lit_path = diff[0]
        old, new = value_at(plan, lit_path), value_at(other, lit_path)
        if type(old) is not type(slot.value) or old != slot.value \
                or type(new) is not type(probe) or new != probe:
            return None
        if path is not None and lit_path != path:
            return None
        path = lit_path
    return path  # (it ends at the literal's value: _in_where holds it to that)


def check(template: QueryPlan, plan: QueryPlan, paths: tuple[tuple[Any, ...], ...]) -> None:
    """Refuse, with :class:`~statcurator.core.errors.PrivacyAccountingError`, unless ``plan``
    is ``template`` with other values of the same types in literals of WHERE predicates at
    ``paths`` and nothing else changed: the guard of every query of a known shape, before
    it takes its template's compiled form. It is written apart from :func:`learn`, so that
    a fault in learning is caught here, uncharged.

    >>> from statcurator.query.expr import Col, Compare
    >>> from statcurator.query.plan import Output, Scan
    >>> from statcurator.query.expr import Agg
    >>> t = QueryPlan(Filter(Scan("t", "t"), Compare(">", Col("a", "t"), Lit(1))),
    ...               outputs=(Output("n", Agg("count")),))
    >>> path = ("relation", "predicate", "right", "value")
    >>> check(t, put_at(t, path, 5), (path,))
    >>> check(t, put_at(t, path, "5"), (path,))
    Traceback (most recent call last):
    ...
    statcurator.core.errors.PrivacyAccountingError: a query of a known shape differs from its shape elsewhere than in constants of its WHERE clause; this is a defect of statcurator: nothing was charged or released; report the query
    """
    ok = True
    for path in paths:  # each leads through a Filter's predicate to a literal's value
        node: Any = template
        in_filter = False
        for step in path[:-1] if path[:1] == ("relation",) and path[-1:] == ("value",) else ():
            in_filter = in_filter or (type(node) is Filter and step == "predicate")
            node = node[step] if isinstance(step, int) else getattr(node, step)
        if not in_filter or type(node) is not Lit:
            ok = False
            break
    if not ok or not same_but(template, plan, paths):
        raise PrivacyAccountingError(
            "a query of a known shape differs from its shape elsewhere than in constants of "
            "its WHERE clause",
            remedy="this is a defect of statcurator: nothing was charged or released; report "
                   "the query")


def value_at(obj: Any, path: tuple[Any, ...]) -> Any:
    """What ``obj`` holds at ``path`` (see :func:`put_at`)."""
    for step in path:
        obj = obj[step] if isinstance(step, int) else getattr(obj, step)
    return obj
