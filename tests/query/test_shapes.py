"""Queries of a known shape (statcurator.query.shapes, Curator.sql): a fresh text that differs
from an earlier one only in constants of its WHERE clause starts from that query's compiled
form. The guarantee to test: such a query is in every way the query a fresh parse and
compile would give — plan, measures, mechanisms, cost, certificate and engine SQL — and a
constant anywhere else (where it can change a sensitivity) never rides on a shape."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import statcurator as sc
from statcurator.core.measures import PureDP
from statcurator.core.schema import PrivacyUnit, TableMeta
from statcurator.engines import sqlgen
from statcurator.query import shapes
from statcurator.query.binding import BoundQuery
from statcurator.query.certificate import certify
from statcurator.query.compiler import compile_query
from statcurator.query.sql import parse_sql

from .conftest import PEOPLE as META


def _people(n: int = 400) -> pa.Table:
    rng = np.random.default_rng(5)
    return pa.table({
        "pid": np.arange(n) // 2, "age": rng.integers(0, 100, n),
        "income": rng.uniform(0, 150000, n).round(2),
        "sex": rng.choice(["F", "M"], n), "city": rng.choice(["a", "b", "c", "d'e"], n),
        "smoker": rng.random(n) < 0.3})


def _curator(meta: TableMeta = META, budget=None) -> sc.Curator:
    budget = PureDP(10**6) if budget is None else budget
    cur = sc.Curator(default_budget=None, dataset_budget=None)
    cur.register("people", _people(), meta, budget=budget)
    cur.register_public("regions", pa.table({"city": ["a", "b", "c"],
                                             "region": ["north", "south", "north"]}))
    cur.set_budget("ana", "people", budget)
    return cur


#: shapes whose marked constants ({}) are all WHERE constants (free once learnt)
FREE_SHAPES = [
    "SELECT COUNT(*) AS n FROM people WHERE age > {i} AND sex = {s}",
    "SELECT sex, AVG(income) AS m FROM people WHERE age BETWEEN {i} AND {j} GROUP BY sex",
    "SELECT SUM(age) AS s FROM people WHERE city IN ({s}, {t}) OR NOT (income < {f})",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.city = r.city "
    "WHERE r.region = {s} AND p.age <= {i}",
    "SELECT sex, COUNT(*) AS n FROM people WHERE CASE WHEN age > {i} THEN city ELSE {s} END "
    "= {t} GROUP BY sex",
    "SELECT VARIANCE(age) AS v, MEDIAN(income) AS md FROM people WHERE income >= {f}",
]


def _lit(kind: str, draw: st.DrawFn) -> str:
    if kind in "ij":
        return str(draw(st.integers(0, 10**20)))
    if kind == "f":
        return repr(draw(st.floats(0, 1e9, allow_nan=False).map(lambda x: round(x, 3))))
    text = draw(st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")),
                        max_size=12))
    return "'" + text.replace("'", "''") + "'"


@st.composite
def texts(draw: st.DrawFn, template: str) -> str:
    def kinds(t: str) -> list[str]:
        return [p[0] for p in t.split("{")[1:]]

    values = {k: _lit(k, draw) for k in kinds(template)}
    return template.format(**values)


def _fresh(cur: sc.Curator, text: str):
    plan = parse_sql(text, cur.catalog)
    return plan, compile_query(plan, cur.catalog, options=cur.options, text=text)


def _warm(cur: sc.Curator, template: str, fill: dict[str, str]) -> sc.curator.Query:
    """Ask two texts of the shape (seen, then learnt) and release the second once, so that
    its bound query is certified: the third text of the shape starts from it."""
    first = template.format(**{k: v for k, v in fill.items()})
    second = template.format(**{k: (v[:-1] + "x'" if v.startswith("'") else v + "1")
                                for k, v in fill.items()})
    cur.sql(first)
    q = cur.sql(second)
    q.release(epsilon=Fraction(1, 2), analyst="ana")
    return q


WARM = {"i": "30", "j": "60", "f": "1000.5", "s": "'M'", "t": "'a'"}


@pytest.mark.parametrize("template", FREE_SHAPES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_shaped_query_is_the_query_a_fresh_compile_gives(template, data):
    cur = _curator()
    tq = _warm(cur, template, {k: WARM[k] for k in ("i", "j", "f", "s", "t")
                               if "{" + k + "}" in template})
    text = data.draw(texts(template))
    q = cur.sql(text)
    if q is tq:
        return  # drew the warm-up text itself
    assert q._template is tq, "a text of a learnt shape starts from the shape's query"
    plan, cq = _fresh(cur, text)
    assert repr(q.plan) == repr(plan)  # repr: Lit(1) == Lit(True) == Lit(1.0) in Python
    assert q.compile() == cq  # measures, atoms, key sets, engine plan, notes, text
    assert sqlgen._linked(q.compile().engine_plan, (), "duckdb") is not None  # cut and filled
    # the engine's statements: cut from the template's and filled, equal to a fresh render
    for dialect in ("duckdb", "spark"):
        assert sqlgen.plan_sql(q.compile().engine_plan, "ab", dialect=dialect) == \
            sqlgen.plan_sql(cq.engine_plan, "ab", dialect=dialect)
    bound = q.bind(Fraction(1, 2))
    assert bound.certificate is not None, "the bound query came from the template's"
    fresh = BoundQuery(cq, Fraction(1, 2))
    assert bound.cost == fresh.cost and bound.measures == fresh.measures
    assert [i.as_dict() for i in bound.infos] == [i.as_dict() for i in fresh.infos]
    assert bound.mechanism_summary() == fresh.mechanism_summary()
    assert bound.measurement.name == fresh.measurement.name == text
    assert bound.certificate == certify(fresh, cur.catalog.table_info("people").meta,
                                        cur.catalog)
    # the exact answer the engine computes for it is the fresh plan's
    ex = cur.engine.execute(q.compile().engine_plan, salt="ab")
    assert ex.groups == cur.engine.execute(cq.engine_plan, salt="ab").groups


#: constants that are not WHERE constants, or that the front end reads other than as
#: written: each stays part of the shape, so another value there means a fresh compile
FIXED = [
    # what is summed: the clamp sets the sensitivity
    ("SELECT SUM(CASE WHEN age > 50 THEN {v} ELSE age END) AS s FROM people WHERE age > 1",
     "50", "5000"),
    ("SELECT COUNT(*) AS n FROM people GROUP BY WIDTH_BUCKET(age, 0, {v}, 4)", "100", "80"),
    ("SELECT COUNT(*) AS n FROM people WHERE WIDTH_BUCKET(age, 0, {v}, 4) = 2", "100", "80"),
    ("SELECT COUNT(*) AS n FROM people WHERE BIN(age, 0, {v}, 120) = '[0, 18)'", "18", "21"),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex HAVING COUNT(*) > {v}", "10", "20"),
    ("SELECT sex, COUNT(*) AS n FROM people GROUP BY sex ORDER BY n LIMIT {v}", "1", "2"),
    ("SELECT AVG(income / {v}) AS m FROM people", "1000", "10"),
    # read other than as written: a negative number, a quoted number against a numeric
    # column, 0/1 against a boolean one
    ("SELECT COUNT(*) AS n FROM people WHERE age > -{v}", "3", "4"),
    ("SELECT COUNT(*) AS n FROM people WHERE age > '{v}'", "30", "31"),
    ("SELECT COUNT(*) AS n FROM people WHERE smoker = {v}", "1", "0"),
    # ... and where the first value is read as written but another would be converted (the
    # probes '1', 'true' and 1 find them)
    ("SELECT COUNT(*) AS n FROM people WHERE age > {v}", "'x'", "'30'"),
    ("SELECT COUNT(*) AS n FROM people WHERE smoker = {v}", "'x'", "'true'"),
    ("SELECT COUNT(*) AS n FROM people WHERE smoker = {v}", "5", "1"),
]


@pytest.mark.parametrize("template, a, b", FIXED)
def test_a_constant_outside_the_where_clause_is_never_a_parameter(template, a, b):
    cur = _curator()
    cur.sql(template.format(v=a) + " ")  # the shape seen (the same tokens)
    cur.sql(template.format(v=a))  # seen again: learnt
    text = template.format(v=b)
    q = cur.sql(text)
    plan = parse_sql(text, cur.catalog)
    assert repr(q.plan) == repr(plan)
    try:
        cq = compile_query(plan, cur.catalog, options=cur.options, text=text)
    except sc.core.errors.StatcuratorError as e:  # refused fresh: refused the same way
        with pytest.raises(type(e)):
            q.compile()
    else:
        assert q.compile() == cq
    shape = shapes.shape_of(text)
    entry = cur._shapes[((cur._version, cur.options), shape.key)]
    if isinstance(entry, tuple):  # the shape has free constants: this one is not among them
        slot = next(i for i, s in enumerate(shape.slots) if s.start == text.index(b))
        assert slot not in entry[0].free


def test_the_attack_a_primed_shape_with_a_small_clamp_is_caught():
    """The attacker's plan: teach the curator a shape whose SELECT holds a small clamp
    (sensitivity 50), then ask it again with a large one, hoping to get the small query's
    compilation (its noise) for the large sum. The large clamp is compiled afresh: its
    sensitivity is 5000. Control: a shape cache that takes every constant for a WHERE
    constant (the learning's check that the constant sits in a WHERE predicate removed)
    answers with the compilation of 50 — the test sees it."""
    template = ("SELECT SUM(CASE WHEN age > 50 THEN {v} ELSE age END) AS s FROM people "
                "WHERE age > {w}")

    def attack(cur: sc.Curator) -> Fraction:
        for w in (1, 2, 3):
            cur.sql(template.format(v=50, w=w)).release(epsilon=1, analyst="ana")
        q = cur.sql(template.format(v=5000, w=4))
        return q.bind(1).measures[0].sensitivity

    small = _fresh(_curator(), template.format(v=50, w=1))[1].measures[0].sensitivity
    assert small < 5000
    assert attack(_curator()) == 5000
    original, link, check = shapes._in_where, sqlgen.link, shapes.check
    try:
        # learning's check removed: the guard written apart from it refuses, uncharged
        shapes._in_where = lambda plan, path: path[-1] == "value"
        sqlgen.link = lambda plan, base, paths: None  # (its paths are not all in WHERE)
        cur = _curator()
        with pytest.raises(sc.core.errors.PrivacyAccountingError, match="known shape"):
            attack(cur)
        # the first two texts were parsed; the third, of the learnt shape, was refused
        assert cur.budget("ana", "people").spent == PureDP(2)
        # both removed (the control): the attack works, and this test sees it
        shapes.check = lambda template, plan, paths: None
        assert attack(_curator()) == small, "the control: without the checks it works"
    finally:
        shapes._in_where, sqlgen.link, shapes.check = original, link, check


def test_a_shaped_release_charges_and_records_its_own_query():
    cur = _curator()
    texts_ = [f"SELECT COUNT(*) AS n FROM people WHERE age > {a} AND sex = 'F'"
              for a in (20, 30, 40, 50)]
    rels = [cur.sql(t).release(epsilon=Fraction(1, 4), analyst="ana") for t in texts_]
    assert cur.sql(texts_[-1])._template is not None
    for t, r in zip(texts_, rels, strict=True):
        cert = r.provenance["certificate"]
        assert r.provenance["query"] == cert["query"] == t
        assert cert["plan"] == cur.sql(t).plan.sql() and str(40 if "40" in t else "") in cert["plan"]
        assert cert["recheck"]["passed"] and r.cost == PureDP(Fraction(1, 4))
    entries = cur.ledger.entries(analyst="ana", types=("charge",))
    assert [e.query for e in entries] == texts_
    assert cur.budget("ana", "people").spent == PureDP(1)


def test_a_text_of_a_shape_is_parsed_when_its_fixed_constants_or_types_differ():
    cur = _curator()
    t = "SELECT COUNT(*) AS n FROM people WHERE age > {a} GROUP BY sex HAVING COUNT(*) > {h}"
    for a in (1, 2, 3):
        cur.sql(t.format(a=a, h=5))
    assert cur.sql(t.format(a=4, h=5))._template is not None
    assert cur.sql(t.format(a=4, h=6))._template is None  # HAVING's constant differs
    assert cur.sql(t.format(a=4.5, h=5))._template is None  # a real where an integer was
    q = cur.sql(t.format(a=4.5, h=5))
    assert q.plan == parse_sql(t.format(a=4.5, h=5), cur.catalog)


def test_registration_starts_shapes_afresh_and_old_queries_recompile():
    cur = _curator()
    t = "SELECT AVG(age) AS m FROM people WHERE income > {x}"
    for x in (1, 2, 3):
        cur.sql(t.format(x=x)).release(epsilon=1, analyst="ana")
    q = cur.sql(t.format(x=4))
    assert q._template is not None
    before = q.compile()
    # the data owner narrows the bounds of age: every query's sensitivity changes
    cur.register("people", _people(), META.replace(columns=tuple(
        dataclasses.replace(c, bounds=(0, 60)) if c.name == "age" else c
        for c in META.columns)), budget=PureDP(10**6))
    after = q.compile()
    assert after is not before and after == _fresh(cur, t.format(x=4))[1]
    assert cur.sql(t.format(x=5))._template is None  # new shapes are learnt again


def test_learning_refuses_a_probe_the_front_end_refuses():
    cur = _curator()
    # the probe "1000003 + 100" buckets is fine, but WIDTH_BUCKET's count is capped: not free
    t = "SELECT COUNT(*) AS n FROM people GROUP BY WIDTH_BUCKET(age, 0, 120, {n})"
    text = t.format(n=99999)
    learnt = shapes.learn(shapes.shape_of(text), text, parse_sql(text, cur.catalog),
                          lambda s: parse_sql(s, cur.catalog))
    assert learnt.free == ()


def test_shape_of_reads_constants_as_the_front_end_does():
    s = shapes.shape_of("SELECT COUNT(*) FROM t WHERE a = 'x''y' AND b > 2.50 AND c < 007")
    assert [x.value for x in s.slots] == ["x'y", 2.5, 7]
    assert shapes.shape_of("SELECT COUNT(*) FROM t") is None  # nothing to learn
    assert shapes.shape_of("SELECT 'unterminated") is None
    # exponents, hex and E'' strings are not slots: they are part of the key
    s = shapes.shape_of("SELECT COUNT(*) FROM t WHERE a > 1e3 AND b = E'x'")
    assert s is None or all(x.value not in (1000.0, "x") for x in s.slots)


def test_link_refuses_a_plan_that_is_not_its_base_with_other_constants():
    cur = _curator()
    a = cur.sql("SELECT COUNT(*) AS n FROM people WHERE age > 3").compile().engine_plan
    b = cur.sql("SELECT COUNT(*) AS n FROM people WHERE income > 3").compile().engine_plan
    path = ("predicate", "right", "value")
    with pytest.raises(ValueError, match="not its base"):
        sqlgen.link(b, a, (path,))


def test_a_cut_that_does_not_give_the_sql_back_is_not_used(monkeypatch):
    """The SQL of a plan of a known shape is its base's cut at the constants; when joining
    the base's own constants back does not give its SQL exactly, the plan's SQL is
    generated as usual (here the rendering of constants is made context-dependent)."""
    cur = _curator()
    t = "SELECT COUNT(*) AS n FROM people WHERE age > {a}"
    for a in (1, 2, 3):
        cur.sql(t.format(a=a))
    q = cur.sql(t.format(a=4))
    sqlgen.clear_cache()
    monkeypatch.setattr(sqlgen, "_literal_text", lambda v, d: f"({v})")
    ep = q.compile().engine_plan
    cur.sql(t.format(a=5)).compile()
    assert sqlgen._linked(ep, (), "duckdb") is None
    assert "> 4" in sqlgen.plan_sql(ep, "ab")[0]


def test_person_level_units_and_partition_selection_keep_their_shape():
    meta = META.replace(privacy_unit=PrivacyUnit("pid", max_rows=2, max_groups=1))
    cur = _curator(meta, sc.ApproxDP(10**6, Fraction(1, 1000)))
    t = "SELECT city, COUNT(*) AS n FROM people WHERE age > {a} GROUP BY city"
    for a in (10, 20, 30):
        cur.sql(t.format(a=a)).release(epsilon=1, delta=Fraction(1, 10**6), analyst="ana")
    q = cur.sql(t.format(a=40))
    assert q._template is not None
    assert q.compile() == _fresh(cur, t.format(a=40))[1]
    rel = q.release(epsilon=1, delta=Fraction(1, 10**6), analyst="ana")
    assert rel.provenance["group_keys"] == "partition selection"


def test_bad_texts_are_refused_as_before():
    """What the front end refuses is refused the same way, not by the shape reader: no text
    (a CLI or HTTP caller's mistake), and an integer of thousands of digits (a float there:
    ∞) is read, not a crash."""
    cur = _curator()
    for bad in (None, 123, b"SELECT 1"):
        with pytest.raises(sc.core.errors.UnsupportedQueryError, match="empty"):
            cur.sql(bad)
    text = "SELECT COUNT(*) AS n FROM people WHERE income < " + "9" * 5000
    for _ in range(3):
        q = cur.sql(text + " " * _)
    assert q.plan == parse_sql(text, cur.catalog)
    assert "inf" in q.plan.sql()


def test_a_shape_of_many_constants_is_not_learnt():
    """Learning parses the text up to three times per constant: beyond MAX_SLOTS constants
    a shape is never learnt (a text of thousands of constants would make the dry-run
    endpoint a denial of service). Control: the same shape with fewer constants is."""
    cur = _curator()

    def text(n: int, first: int) -> str:
        return ("SELECT COUNT(*) AS n FROM people WHERE age IN ("
                + ", ".join(str(first + i) for i in range(n)) + ")")

    calls = []
    original = shapes._free_path
    try:
        shapes._free_path = lambda *a: calls.append(1) or original(*a)
        for first in (1, 2, 3):
            cur.sql(text(shapes.MAX_SLOTS + 1, first))
        assert calls == [] and cur.sql(text(shapes.MAX_SLOTS + 1, 4))._template is None
        for first in (1, 2, 3):
            cur.sql(text(shapes.MAX_SLOTS, first))
        assert len(calls) == shapes.MAX_SLOTS
        assert cur.sql(text(shapes.MAX_SLOTS, 4))._template is not None
    finally:
        shapes._free_path = original


def test_changed_compile_options_start_shapes_afresh():
    cur = _curator()
    t = "SELECT MEDIAN(income) AS m FROM people WHERE age > {a}"
    for a in (1, 2, 3):
        cur.sql(t.format(a=a)).compile()
    cur.options = dataclasses.replace(cur.options, quantile_bins=16)
    q = cur.sql(t.format(a=4))
    assert q._template is None
    assert q.compile() == _fresh(cur, t.format(a=4))[1]


def test_threads_asking_queries_of_shared_shapes_get_each_their_own_query():
    """Four threads ask queries of three shapes with random constants at once (the service's
    worker threads share one curator): shapes are seen, learnt and used concurrently, and
    every release is its own query (plan, compiled query, engine SQL, recorded text)."""
    import random
    import threading

    cur = _curator()
    templates = ["SELECT COUNT(*) AS n FROM people WHERE age > {a} AND sex = {s}",
                 "SELECT sex, AVG(income) AS m FROM people WHERE age BETWEEN {a} AND {b} "
                 "GROUP BY sex",
                 "SELECT SUM(age) AS s FROM people WHERE city = {s} AND age < {b}"]
    problems: list[str] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(40):
            text = rng.choice(templates).format(
                a=rng.randint(0, 60), b=rng.randint(61, 99),
                s=rng.choice(["'F'", "'M'", "'a'", "'d''e'"]))
            try:
                q = cur.sql(text)
                rel = q.release(epsilon=Fraction(1, 100), analyst="ana")
                plan, cq = _fresh(cur, text)
                if (repr(q.plan) != repr(plan) or q.compile() != cq
                        or sqlgen.plan_sql(q.compile().engine_plan, "ab")
                        != sqlgen.plan_sql(cq.engine_plan, "ab")
                        or rel.provenance["certificate"]["query"] != text):
                    problems.append(text)
            except Exception as e:  # noqa: BLE001 - reported below
                problems.append(f"{text}: {e!r}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert problems == []
    assert any(q._template is not None for q in cur._cache.values())
    assert cur.ledger.verify()


def test_a_t_sql_text_cannot_hide_part_of_itself_from_its_shape():
    """Review helper-33, finding 1: the shape key was DuckDB's token stream, in which ``--``
    starts a comment, but a text DuckDB cannot parse is read as T-SQL, where ``[--]`` is a
    name: what follows it on the line was read, yet was not in the key. ``age > 99`` was
    answered as the learnt ``age > 30``, and a text a fresh parse refuses was answered too.
    The key is now the text itself between its constants."""
    cur = _curator()
    tpl = "SELECT COUNT(*) AS n FROM people AS [--] WHERE age > {a}\nAND sex = '{s}'"
    cur.sql(tpl.format(a=30, s="F"))
    cur.sql(tpl.format(a=30, s="M")).release(epsilon=Fraction(1, 2), analyst="ana")
    text = tpl.format(a=99, s="F")
    assert shapes.shape_of(text).key != shapes.shape_of(tpl.format(a=30, s="F")).key
    assert cur.sql(text).plan == parse_sql(text, cur.catalog)
    hidden = "SELECT COUNT(*) AS n FROM people AS [--] GROUP BY city HAVING ))) junk\nAND sex = 'F'"
    with pytest.raises(sc.core.errors.UnsupportedQueryError, match="cannot parse"):
        cur.sql(hidden)
    # control: under the former key (DuckDB's tokens, constants blanked) the three texts
    # are one shape, though a parser reads three different queries in them
    from sqlglot import TokenType

    def token_key(t: str) -> tuple:
        blank = (TokenType.STRING, TokenType.NUMBER)
        return tuple(tok.token_type if tok.token_type in blank else (tok.token_type, tok.text)
                     for tok in shapes._tokenizer().tokenize(t))

    assert token_key(text) == token_key(tpl.format(a=30, s="F")) == token_key(hidden)


def test_plans_differing_in_a_constants_type_never_share_engine_sql():
    """Review helper-33, finding 2: the engine SQL cache is keyed on the plan, whose
    constants compared equal across types (1 == 1.0 == TRUE): ``pid > 9007199254740992.0``
    asked after ``pid > 9007199254740992`` ran the integer comparison, and answered 50
    where alone it answers 0. Constants of different types now differ."""
    from statcurator.query.expr import Lit

    assert Lit(1) != Lit(1.0) and Lit(1) != Lit(True) and hash(Lit(2.5)) == hash(Lit(2.5))
    cur = _curator()
    as_int = "SELECT COUNT(*) AS n FROM people WHERE pid >= 9007199254740992"
    as_float = "SELECT COUNT(*) AS n FROM people WHERE pid >= 9007199254740992.0"
    alone = cur.engine.sql(_fresh(cur, as_float)[1].engine_plan)[0]
    cur.engine.sql(_fresh(cur, as_int)[1].engine_plan)
    assert cur.engine.sql(_fresh(cur, as_float)[1].engine_plan)[0] == alone
    assert "DOUBLE" in alone


# -- the guard's one walk (same_but) ---------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Node:
    a: object
    b: object


@dataclasses.dataclass(frozen=True, eq=False)
class _Loose:
    """A class whose own equality looks at one field only: walking its fields one by one
    would compare it otherwise than ``==`` does."""

    a: object
    b: object

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Loose) and self.a == other.a  # b is not compared

    def __hash__(self) -> int:
        return hash(self.a)


def test_same_but_is_the_rebuild_and_compare_it_replaces() -> None:
    t = _Node(_Node(1, "x"), (2, 3))
    path = ("a", "a")
    assert shapes.same_but(t, _Node(_Node(5, "x"), (2, 3)), (path,))
    assert shapes.same_but(t, shapes.put_at(t, path, 7), (path,))
    assert not shapes.same_but(t, _Node(_Node(5, "y"), (2, 3)), (path,))  # another change
    assert not shapes.same_but(t, _Node(_Node(5.0, "x"), (2, 3)), (path,))  # another type
    assert not shapes.same_but(t, _Node(_Node(True, "x"), (2, 3)), (path,))
    assert not shapes.same_but(t, _Node(_Node(5, "x"), (2, 3, 4)), (path,))
    assert not shapes.same_but(t, t, (("a", "c"),))  # a path that leads nowhere


def test_same_but_never_walks_into_a_class_with_its_own_equality() -> None:
    # the control: a class whose __eq__ the dataclass wrote is walked
    assert shapes.same_but(_Node(1, 2), _Node(9, 2), (("a",),))
    # _Loose's own __eq__ would let b differ; the walk refuses rather than compare otherwise
    assert not shapes.same_but(_Loose(1, 2), _Loose(9, 2), (("a",),))
    assert not shapes.same_but(_Node(_Loose(1, 2), 0), _Node(_Loose(9, 2), 0), (("a", "a"),))
    # off the paths, such a value is compared by its own ==, as the rebuilt plan's == did
    assert shapes.same_but(_Node(_Loose(1, 2), 0), _Node(_Loose(1, 3), 5), (("b",),))
