"""The SQL corpus: how much of the SQL analysts write does the curator answer?

Runs every query of ``tests/data/sql_corpus/queries.toml`` over the simulated ``pums`` table
and prints, per kind of query, how many were answered, refused, or crashed — and every
disagreement with the corpus's expectation (an "answer" refused, a "refuse" answered). A
query counts as answered when it is released (noise drawn, budget charged), not merely parsed.

    python benchmarks/sql_corpus.py                      # statcurator (the installed one)
    python benchmarks/sql_corpus.py --engine smartnoise  # the peer, SmartNoise SQL
    python benchmarks/sql_corpus.py --write-data         # regenerate pums.csv (seeded)
    python benchmarks/sql_corpus.py --peer-queries F.sql ...  # a peer's own query files

``--peer-queries`` reads semicolon-separated SQL files from a local checkout of a peer's test
suite (e.g. SmartNoise's ``sql/tests/query/queries/validate_pums/*.sql``; nothing of them is
stored here), runs each statement over the same simulated table registered as ``PUMS`` with
δ = 1e-6 for every query, and counts what is answered. A file named ``*_fail.sql`` holds the
queries the peer refuses.

SmartNoise SQL pins its own OpenDP, so it runs from its own virtual environment:
``python -m venv /tmp/sn && /tmp/sn/bin/pip install smartnoise-sql tomli`` then
``/tmp/sn/bin/python benchmarks/sql_corpus.py --engine smartnoise``. For the figure before a
change, run this script against the older source: ``git worktree add /tmp/before REV`` then
``PYTHONPATH=/tmp/before/src python benchmarks/sql_corpus.py``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = HERE.parent / "tests" / "data" / "sql_corpus"


def write_data(path: Path, n: int = 1000, seed: int = 20261125) -> None:
    """The simulated table: fixed distributions, no real person."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    age = rng.integers(0, 91, n)
    educ = np.clip(rng.normal(10, 3, n).round(), 1, 16).astype(int)
    income = np.where(age < 16, 0, np.clip(rng.lognormal(10.2, 0.8, n) * (educ / 10), 0, 5e5))
    states = ["CA", "NY", "TX", "FL", "IL", "WA", "MA", "NM", "NV", "ZZ"]
    df = pd.DataFrame({
        "pid": np.arange(1, n + 1),
        "age": age,
        "sex": rng.integers(1, 3, n),
        "educ": educ,
        "race": rng.choice([1, 2, 3, 4, 5, 6], n, p=[0.6, 0.13, 0.06, 0.01, 0.15, 0.05]),
        "latino": rng.random(n) < 0.18,
        "married": (age >= 18) & (rng.random(n) < 0.5),
        "income": income.round(2),
        "state": rng.choice(states, n, p=[0.2, 0.15, 0.15, 0.12, 0.1, 0.08, 0.07, 0.05,
                                          0.05, 0.03]),
    })
    df.to_csv(path, index=False)


def load_corpus() -> list[dict[str, Any]]:
    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10 peers' environments
        import tomli as tomllib  # type: ignore[no-redef]
    with open(CORPUS / "queries.toml", "rb") as f:
        return list(tomllib.load(f)["query"])


def load_peer_queries(files: list[str]) -> list[dict[str, Any]]:
    out = []
    for f in files:
        text = "\n".join(line for line in Path(f).read_text().splitlines()
                         if not line.lstrip().startswith("--"))
        for sql in (part.strip() for part in text.split(";")):
            if sql:
                out.append({"sql": sql, "group": Path(f).stem, "delta": 1e-6,
                            "expect": "refuse" if Path(f).stem.endswith("_fail") else "answer"})
    return out


def run_statcurator(queries: list[dict[str, Any]], table: str = "pums") -> list[tuple[str, str]]:
    """(outcome, message) per query: released with Laplace noise at ε = 1 (δ where asked)."""
    from fractions import Fraction

    from statcurator.core.errors import StatcuratorError
    from statcurator.curator import Curator
    from statcurator.io.metadata import load_metadata

    meta = load_metadata(CORPUS / "pums.toml").replace(name=table)
    out = []
    cur = Curator(engine="duckdb", default_budget=None, dataset_budget=None)
    cur.register(table, str(CORPUS / "pums.csv"), meta)
    cur.set_dataset_budget(table, epsilon=10**6, delta=Fraction(1, 10))
    cur.set_budget("bench", table, epsilon=10**6, delta=Fraction(1, 10))
    for q in queries:
        delta = q.get("delta")
        try:
            rel = cur.sql(q["sql"]).release(1, None if delta is None else Fraction(str(delta)),
                                            analyst="bench")
            out.append(("answer", f"{len(rel.rows())} row(s)"))
        except StatcuratorError as e:
            out.append(("refuse", str(e)))
        except Exception as e:  # a crash: the corpus counts it against the curator
            out.append(("crash", f"{type(e).__name__}: {e}"))
    cur.close()
    return out


def run_smartnoise(queries: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The peer on the same table, metadata and ε (its own default δ handling)."""
    import pandas as pd
    import snsql
    from snsql import Privacy

    df = pd.read_csv(CORPUS / "pums.csv")
    cols: dict[str, Any] = {
        "pid": {"type": "int"},
        "age": {"type": "int", "lower": 0, "upper": 100},
        "sex": {"type": "int"}, "educ": {"type": "int", "lower": 1, "upper": 16},
        "race": {"type": "int"}, "latino": {"type": "boolean"}, "married": {"type": "boolean"},
        "income": {"type": "float", "lower": 0, "upper": 500000}, "state": {"type": "string"},
    }
    meta = {"census": {"census": {"pums": {"row_privacy": True, "rows": len(df), **cols}}}}
    out = []
    for q in queries:
        sql = re.sub(r"\bFROM\s+(?:census\.|PUMS\.)?(?:pums|\[pums\]|PUMS)(?=\s|;|$)",
                     "FROM census.pums", q["sql"])
        try:
            reader = snsql.from_df(df, privacy=Privacy(epsilon=1.0, delta=1e-5), metadata=meta)
            rows = reader.execute(sql)
            out.append(("answer", f"{max(len(rows) - 1, 0)} row(s)"))
        except Exception as e:  # the peer refuses by raising
            out.append(("refuse", f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
    return out


def summarize(queries: list[dict[str, Any]], outcomes: list[tuple[str, str]],
              check_reason: bool = True) -> dict[str, Any]:
    by_group: dict[str, Counter[str]] = defaultdict(Counter)
    wrong = []
    for q, (outcome, msg) in zip(queries, outcomes, strict=True):
        by_group[q["group"]][outcome] += 1
        if outcome == "crash" or (outcome != q["expect"]):
            wrong.append({"sql": q["sql"], "expected": q["expect"], "got": outcome,
                          "message": msg})
        elif check_reason and outcome == "refuse" and q.get("why", "").lower() not in msg.lower():
            wrong.append({"sql": q["sql"], "expected": f"refuse ({q['why']})", "got": outcome,
                          "message": msg})
    answerable = sum(q["expect"] == "answer" for q in queries)
    answered = sum(o == "answer" and q["expect"] == "answer"
                   for q, (o, _) in zip(queries, outcomes, strict=True))
    return {"queries": len(queries), "answerable": answerable,
            "answered": sum(o == "answer" for o, _ in outcomes),
            "answered_of_answerable": answered,
            "crashes": sum(o == "crash" for o, _ in outcomes),
            "groups": {g: dict(c) for g, c in by_group.items()}, "disagreements": wrong}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--engine", choices=("statcurator", "smartnoise"), default="statcurator")
    ap.add_argument("--write-data", action="store_true", help="regenerate pums.csv and exit")
    ap.add_argument("--peer-queries", nargs="+", metavar="FILE.sql",
                    help="run a peer's own query files instead of the corpus")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.write_data:
        write_data(CORPUS / "pums.csv")
        print(f"wrote {CORPUS / 'pums.csv'}")
        return 0
    peer = bool(args.peer_queries)
    queries = load_peer_queries(args.peer_queries) if peer else load_corpus()
    if args.engine == "statcurator":
        outcomes = run_statcurator(queries, "PUMS" if peer else "pums")
    else:
        outcomes = run_smartnoise(queries)
    s = summarize(queries, outcomes, check_reason=args.engine == "statcurator" and not peer)
    if args.json:
        print(json.dumps(s, indent=2))
        return 0
    print(f"{args.engine}: {s['queries']} queries, {s['answerable']} "
          + ("the peer answers" if peer else "answerable by the corpus"))
    print(f"{'kind':<20}{'answered':>10}{'refused':>10}{'crashed':>10}")
    for g, c in s["groups"].items():
        print(f"{g:<20}{c.get('answer', 0):>10}{c.get('refuse', 0):>10}{c.get('crash', 0):>10}")
    pct = 100 * s["answered_of_answerable"] / s["answerable"]
    print(f"answered {s['answered_of_answerable']} of the {s['answerable']} answerable "
          f"({pct:.0f}%), {s['answered']} in all; crashes: {s['crashes']}")
    if s["disagreements"]:
        print(f"\n{len(s['disagreements'])} disagreement(s) with the corpus's expectation:")
        for w in s["disagreements"]:
            print(f"  [{w['expected']} → {w['got']}] {w['sql']}\n      {w['message'][:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
