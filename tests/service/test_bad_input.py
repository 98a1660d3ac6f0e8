"""Bad input never reaches the ledger: every refusal is a 4xx ``application/problem+json``
with ``detail`` and ``remedy``, and the ledger holds exactly the rows it held before."""

from __future__ import annotations

import pytest

from .conftest import Setup

OK_SQL = "SELECT COUNT(*) AS n FROM adult"

BAD = [
    # (case id, body or raw bytes, expected status)
    ("eps=0", {"sql": OK_SQL, "epsilon": 0}, 400),
    ("eps=-1", {"sql": OK_SQL, "epsilon": -1}, 400),
    ("eps=NaN literal", b'{"sql": "SELECT COUNT(*) FROM adult", "epsilon": NaN}', 400),
    ("eps='NaN'", {"sql": OK_SQL, "epsilon": "NaN"}, 400),
    ("eps=inf literal", b'{"sql": "SELECT COUNT(*) FROM adult", "epsilon": Infinity}', 400),
    ("eps='inf'", {"sql": OK_SQL, "epsilon": "inf"}, 400),
    ("eps=1e300", {"sql": OK_SQL, "epsilon": 1e300}, 400),
    ("eps='abc'", {"sql": OK_SQL, "epsilon": "abc"}, 400),
    ("eps=true", {"sql": OK_SQL, "epsilon": True}, 422),
    ("eps=[1]", {"sql": OK_SQL, "epsilon": [1]}, 422),
    ("no eps", {"sql": OK_SQL}, 400),
    ("delta=-1e-9", {"sql": OK_SQL, "epsilon": 1, "delta": -1e-9}, 400),
    ("delta=1", {"sql": OK_SQL, "epsilon": 1, "delta": 1}, 400),
    ("alpha=2", {"sql": OK_SQL, "epsilon": 1, "alpha": 2}, 400),
    # refused before the charge: a subnormal alpha used to be charged, then refused
    ("alpha=1e-300", {"sql": OK_SQL, "epsilon": 1, "alpha": 1e-300}, 400),
    # a huge exponent is refused unread (building 10^20000000 held the server for 18 s)
    ("eps='1e-20000000'", {"sql": OK_SQL, "epsilon": "1e-20000000"}, 400),
    ("delta='1e99999999'", {"sql": OK_SQL, "epsilon": 1, "delta": "1e99999999"}, 400),
    # a lone surrogate (a valid JSON escape) cannot be stored or answered: was a 500
    ("surrogate in a literal",
     b'{"sql": "SELECT COUNT(*) AS n FROM adult WHERE sex = \'\\ud800\'", "epsilon": 1}', 422),
    ("surrogate in a comment",
     b'{"sql": "SELECT COUNT(*) AS n FROM adult -- \\udfff", "epsilon": 1}', 422),
    ("surrogate in a weight", b'{"sql": "SELECT COUNT(*) AS n FROM adult", "epsilon": 1, '
                              b'"weights": {"n\\ud800": 1}}', 422),
    ("weights", {"sql": OK_SQL, "epsilon": 1, "weights": {"n": -1}}, 400),
    ("rho and eps", {"sql": OK_SQL, "epsilon": 1, "rho": 1}, 400),
    ("row-level", {"sql": "SELECT * FROM adult", "epsilon": 1}, 422),
    ("LIMIT x", {"sql": "SELECT COUNT(*) FROM adult LIMIT x", "epsilon": 1}, 422),
    ("DROP", {"sql": "DROP TABLE adult", "epsilon": 1}, 422),
    ("string left open", {"sql": "SELECT COUNT(*) FROM adult WHERE sex = 'x'y'",
                          "epsilon": 1}, 422),
    ("->>", {"sql": "SELECT COUNT(*) FROM adult WHERE ->> 1", "epsilon": 1}, 422),
    ("600 brackets", {"sql": "SELECT COUNT(*) FROM adult WHERE " + "(" * 600 + "age > 1"
                      + ")" * 600, "epsilon": 1}, 422),
    ("two statements", {"sql": OK_SQL + "; SELECT 1", "epsilon": 1}, 422),
    ("unknown table", {"sql": "SELECT COUNT(*) FROM patients", "epsilon": 1}, 422),
    ("unknown column", {"sql": "SELECT SUM(income) FROM adult", "epsilon": 1}, 422),
    ("type mismatch", {"sql": "SELECT COUNT(*) FROM adult WHERE age = 'x'", "epsilon": 1}, 422),
    ("empty sql", {"sql": " ", "epsilon": 1}, 422),
    ("sql not text", {"sql": 5, "epsilon": 1}, 422),
    ("long sql", {"sql": "SELECT COUNT(*) FROM adult WHERE " + " OR ".join(
        ["age = 1"] * 4000), "epsilon": 1}, 400),
    # a query of public keys only is free: server.max_groups (100,000) bounds its size
    ("367,360 free groups", {"sql": 'SELECT "native-country", education, occupation, '
                             'workclass, race FROM adult GROUP BY "native-country", '
                             'education, occupation, workclass, race', "epsilon": 1}, 422),
    ("not JSON", b"{epsilon: 1", 422),
    ("extra field", {"sql": OK_SQL, "epsilon": 1, "analyst": "bob"}, 422),
]


def _post(api, path: str, body, headers):
    if isinstance(body, bytes):
        return api.post(path, content=body, headers={**headers,
                                                     "content-type": "application/json"})
    return api.post(path, json=body, headers=headers)


def _problem(r, status: int) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    doc = r.json()
    assert doc["status"] == status and doc["detail"] and doc["remedy"]


@pytest.mark.parametrize("path", ["/v1/queries", "/v1/queries/dry-run"])
def test_bad_queries_are_refused_and_the_ledger_is_unchanged(api, setup: Setup,
                                                            path: str) -> None:
    before = setup.ledger_rows()
    h = setup.headers("alice", **{"Idempotency-Key": "k"})
    for case, body, status in BAD:
        r = _post(api, path, body, h)
        try:
            _problem(r, status)
        except AssertionError as e:
            raise AssertionError(f"{case}: {e}") from None
    assert setup.ledger_rows() == before
    # ... and the analyst's key is still unused: the first good request gets it
    ok = api.post("/v1/queries", json={"sql": OK_SQL, "epsilon": 0.1}, headers=h)
    assert ok.status_code == 200 and ok.json()["replayed"] is False


def test_tokens_missing_wrong_or_malformed(api, setup: Setup) -> None:
    before = setup.ledger_rows()
    body = {"sql": OK_SQL, "epsilon": 1}
    for headers in ({}, {"Authorization": "Bearer sct_wrong"}, {"Authorization": "Basic eDp5"},
                    {"Authorization": "Bearer " + setup.tokens["alice"] + "x"},
                    {"Authorization": "Bearer " + "a" * 5000}):
        r = api.post("/v1/queries", json=body, headers=headers)
        _problem(r, 401)
        assert r.headers["www-authenticate"] == "Bearer"
    assert setup.ledger_rows() == before


def test_oversize_bodies_get_413(api, setup: Setup) -> None:
    before = setup.ledger_rows()
    big = {"sql": OK_SQL, "epsilon": 1, "weights": {f"w{i}": 1 for i in range(20000)}}
    _problem(api.post("/v1/queries", json=big, headers=setup.headers("alice")), 413)

    def chunks():  # no Content-Length: counted as it streams
        for _ in range(100):
            yield b" " * 1024

    r = api.post("/v1/queries", content=chunks(), headers={**setup.headers("alice"),
                                                            "content-type": "application/json"})
    _problem(r, 413)
    assert setup.ledger_rows() == before


def test_unknown_paths_and_methods_are_problems_too(api, setup: Setup) -> None:
    _problem(api.get("/v1/nothing", headers=setup.headers("alice")), 404)
    _problem(api.delete("/v1/queries", headers=setup.headers("alice")), 405)
    _problem(api.get("/v1/releases/never", headers=setup.headers("alice")), 404)


def test_admin_inputs_are_checked(api, setup: Setup) -> None:
    before = setup.ledger_rows()
    h = setup.headers("admin")
    for method, path, body, status in (
            ("put", "/v1/admin/datasets/adult/budget", {"epsilon": -1}, 400),
            ("put", "/v1/admin/datasets/adult/budget", {"epsilon": 0.5}, 200),  # raise/lower
            ("put", "/v1/admin/datasets/nope/budget", {"epsilon": 1}, 404),
            ("put", "/v1/admin/analysts/nobody/budgets/adult", {"epsilon": 1}, 404),
            ("put", "/v1/admin/analysts/alice/budgets/adult", {"delta": 0.1}, 400),
            ("post", "/v1/admin/analysts", {"name": "\u0430lice"}, 400),  # mixed scripts
            ("post", "/v1/admin/analysts", {"name": "ALICE"}, 409),  # exists (normalized)
            ("post", "/v1/admin/datasets/adult/anonymize", {"k": 0}, 400)):
        r = api.request(method, path, json=body, headers=h)
        if status == 200:
            assert r.status_code == 200
            before += 1  # the one legitimate change
            continue
        _problem(r, status)
    assert setup.ledger_rows() == before
