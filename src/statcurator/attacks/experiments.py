"""Experiments of the attack lab: the composition experiment of Ganta, Kasiviswanathan &
Smith (KDD 2008) on Adult, linkage against Adult releases, and re-publication.

**The composition experiment.** Two publishers hold overlapping parts of one population: a
random ``overlap`` of records is shared by both, the remaining records are split evenly
between them. Each publisher anonymizes its part independently (same criteria, same
algorithm); the adversary attacks every person of the overlap with the intersection attack
(:class:`~statcurator.attacks.Composition`), knowing their quasi-identifiers and that they
are in both releases. This is repeated for ``seeds`` random splits (seeds 0, 1, ...) and
reported as mean and standard deviation over the splits, with a Wilson interval on all
attacked people pooled. The DP contrast replaces each publisher's records by ε-DP noisy
histograms of the sensitive value per generalized cell (the same cells), costing ε per
release and 2ε for both.

>>> import statcurator as sc
>>> exp = composition(sc.datasets.adult(), k=[50], algorithms=["optimal"], l=[], t=[],
...                   epsilon=[], seeds=1, overlap=500, workers=1)
>>> row = exp.rows[0]
>>> row["algorithm"], row["k"], row["targets"], 0 <= row["perfect"] <= 1
('optimal', 50, 500, True)
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from ..anonymize.hierarchy import text_values
from ..core.errors import InvalidParameterError
from ..core.numbers import exact
from ._release import Knowledge, classes_of, published
from .composition import THRESHOLDS, Composition
from .dp import dp_histograms
from .risk import Risk, wilson

__all__ = ["composition", "CompositionExperiment", "linkage", "republication", "split"]

#: the grid of the issue: k-anonymity for these k, l- and t- variants at k = 10
DEFAULT_K = (5, 10, 20, 30, 40, 50, 100)
DEFAULT_L = (3, 5)
DEFAULT_T = (0.2, 0.4)


@dataclass(frozen=True)
class _Data:
    """A table with its metadata (what the anonymizer reads: ``.table`` and ``.meta``)."""

    name: str
    table: Any
    meta: Any


def _dataset(data: Any) -> Any:
    if not hasattr(data, "table") or not hasattr(data, "meta"):
        raise InvalidParameterError("the experiment needs a dataset with metadata",
                                    remedy="pass a Dataset, e.g. statcurator.datasets.adult()")
    return data


def split(n: int, overlap: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The design's random split: ``overlap`` rows in both groups, the others split evenly.

    Returns the rows of group A, of group B (sorted) and of the overlap.

    >>> a, b, o = split(10, 4, 0)
    >>> len(a), len(b), len(o), set(o) <= set(a) & set(b)
    (7, 7, 4, True)
    """
    if not 0 < overlap <= n:
        raise InvalidParameterError(f"the overlap must be between 1 and {n} records, got "
                                    f"{overlap}", remedy="pass e.g. overlap=5000")
    perm = np.random.default_rng(seed).permutation(n)  # the split is part of the design
    ov, rest = perm[:overlap], perm[overlap:]
    half = len(rest) // 2
    return (np.sort(np.concatenate([ov, rest[:half]])), np.sort(np.concatenate([ov, rest[half:]])),
            np.sort(ov))


@dataclass(frozen=True)
class _Config:
    model: str
    algorithm: str
    k: int
    l: int | None = None  # noqa: E741 - the literature's name
    t: float | None = None

    def criteria(self, sensitive: str) -> list[Any]:
        from ..anonymize import KAnonymity, LDiversity, TCloseness

        out: list[Any] = [KAnonymity(self.k)]
        if self.l is not None:
            out.append(LDiversity(sensitive, self.l))
        if self.t is not None:
            out.append(TCloseness(sensitive, exact(self.t, "t")))
        return out

    @property
    def weight(self) -> float:
        """Rough relative cost (for scheduling the longest tasks first)."""
        return (10.0 if self.algorithm == "mondrian" else 1.0) / (1 + self.k / 20)


_WORKER: dict[str, Any] = {}


def _init(data: Any) -> None:
    _WORKER["data"] = _dataset(data)
    _WORKER["splits"] = {}


def _split_tables(seed: int, overlap: int) -> tuple[Any, Any, np.ndarray, np.ndarray, np.ndarray]:
    ds = _WORKER["data"]
    key = (seed, overlap)
    hit = _WORKER["splits"].get(key)
    if hit is None:
        a, b, ov = split(ds.table.num_rows, overlap, seed)
        # the same table objects for every configuration: the anonymizer's coding is reused
        name = getattr(ds, "name", "data")
        hit = (_Data(f"{name}[A]", ds.table.take(a), ds.meta),
               _Data(f"{name}[B]", ds.table.take(b), ds.meta), ov,
               np.searchsorted(a, ov), np.searchsorted(b, ov))
        _WORKER["splits"][key] = hit
    return hit


def _run_task(seed: int, cfg: _Config, overlap: int, sensitive: str, qi: Sequence[str] | None,
              suppression: Fraction, epsilons: Sequence[Fraction], threshold: float
              ) -> list[dict[str, Any]]:
    """Anonymize both groups of one split under one configuration and attack the overlap."""
    from ..anonymize import anonymize

    ds = _WORKER["data"]
    da, db, ov, rows_a, rows_b = _split_tables(seed, overlap)
    cpu = time.process_time()
    started = time.perf_counter()
    crits = cfg.criteria(sensitive)
    ra = anonymize(da, *crits, sensitive=[sensitive], qi=qi, algorithm=cfg.algorithm,
                   suppression=suppression)
    rb = anonymize(db, *crits, sensitive=[sensitive], qi=qi, algorithm=cfg.algorithm,
                   suppression=suppression)
    anonymized = time.perf_counter() - started
    # the adversary's knowledge: the overlap's quasi-identifiers; the truth for scoring
    targets = ds.table.take(ov)
    # (and, for the evaluator's leave-one-out baseline, each target's row in each group)
    qis = {q: text_values(targets.column(q)) for q in ra.qi}
    truth = text_values(targets.column(sensitive))
    know = [Knowledge(qis, truth, rows_a), Knowledge(qis, truth, rows_b)]
    attack = Composition(threshold=threshold)
    pa_, pb = published(ra), published(rb)
    out = [_summary(attack.assess([classes_of(pa_), classes_of(pb)], know), cfg, seed,
                    None, [ra.classes, rb.classes], anonymized)]
    for eps in epsilons:
        ha, hb = dp_histograms(pa_, eps), dp_histograms(pb, eps)
        risk = attack.assess([ha.classes_with(qis), hb.classes_with(qis)], know)
        out.append(_summary(risk, cfg, seed, eps, [ra.classes, rb.classes], 0.0,
                            cost=str(ha.cost + hb.cost)))
    out[0]["cpu"] = time.process_time() - cpu  # this process's CPU time for the whole task
    return out


def _summary(risk: Risk, cfg: _Config, seed: int, eps: Fraction | None, classes: list[int],
             seconds: float, cost: str | None = None) -> dict[str, Any]:
    m = risk.measures
    partial_key = next(k for k in m if k.startswith("partial breach"))
    singles = [v for k, v in m.items() if k.startswith("homogeneity in release")]
    distinct = [v for k, v in m.items() if k.startswith("mean distinct values in release")]
    return {"model": cfg.model, "algorithm": cfg.algorithm, "k": cfg.k, "l": cfg.l, "t": cfg.t,
            "epsilon": None if eps is None else float(eps),
            "release": "anonymized" if eps is None else "dp histograms", "seed": seed,
            "targets": risk.targets, "successes": risk.successes,
            "perfect": risk.rate, "partial": m[partial_key],
            "partial_successes": int(round(m[partial_key] * risk.targets)),
            "partial_curve": dict(zip(risk.curves["partial breach"]["x"],
                                      risk.curves["partial breach"]["y"], strict=True)),
            "confidence": m["mean confidence in the true value"],
            "values_left": m["mean values left"], "class_size": m["mean class size"],
            "single": max(singles), "baseline": risk.baseline,
            "distinct_single": float(np.mean(distinct)),
            "left_share": dict(m["values left (share of targets)"]), "cpu": 0.0,
            "classes": float(np.mean(classes)), "seconds": seconds, "cost": cost}


@dataclass(frozen=True)
class CompositionExperiment:
    """The result of :func:`composition`: one row per (model, algorithm, k, l, t, ε) with the
    mean over the splits (``perfect``, ``partial``, ``values_left``, ``class_size``, ...), the
    spread (``perfect_sd``, ``partial_sd``) and a pooled Wilson interval (``perfect_low``,
    ``perfect_high``); ``runs`` holds the per-split rows."""

    rows: list[dict[str, Any]]
    runs: list[dict[str, Any]] = field(repr=False)
    config: dict[str, Any]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """What ``statcurator experiment composition --json`` prints."""
        return {"experiment": "composition", "config": self.config, "rows": self.rows,
                "seconds": round(self.seconds, 2)}

    def table(self) -> str:
        """The rows as an aligned text table."""
        head = ("model", "release", "algorithm", "k", "l", "t", "ε", "perfect", "±sd",
                "partial", "values left", "class size", "classes")
        lines = [head]
        for r in self.rows:
            lines.append((r["model"], r["release"], r["algorithm"], str(r["k"]),
                          "" if r["l"] is None else str(r["l"]),
                          "" if r["t"] is None else f"{r['t']:g}",
                          "" if r["epsilon"] is None else f"{r['epsilon']:g}",
                          f"{r['perfect']:.1%}", f"{r['perfect_sd']:.1%}", f"{r['partial']:.1%}",
                          f"{r['values_left']:.2f}", f"{r['class_size']:.1f}",
                          f"{r['classes']:.0f}"))
        widths = [max(len(x[i]) for x in lines) for i in range(len(head))]
        return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
                         for row in lines)

    def __str__(self) -> str:
        return (f"Composition experiment ({self.config['seeds']} splits, overlap "
                f"{self.config['overlap']:,}, {self.seconds:.1f} s)\n" + self.table())


def _sd(a: np.ndarray) -> float:
    return float(a.std(ddof=1)) if len(a) > 1 else 0.0


def _aggregate(runs: list[dict[str, Any]], alpha: float) -> list[dict[str, Any]]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in runs:
        key = (r["model"], r["release"], r["algorithm"], r["k"], r["l"], r["t"], r["epsilon"])
        groups.setdefault(key, []).append(r)
    rows = []
    for key, rs in groups.items():
        rs.sort(key=lambda r: r["seed"])
        perfect = np.array([r["perfect"] for r in rs])
        partial = np.array([r["partial"] for r in rs])
        n = sum(r["targets"] for r in rs)
        lo, hi = wilson(sum(r["successes"] for r in rs), n, alpha)
        plo, phi = wilson(sum(r["partial_successes"] for r in rs), n, alpha)
        curve = {th: float(np.mean([r["partial_curve"][th] for r in rs]))
                 for th in rs[0]["partial_curve"]}
        rows.append({
            "model": key[0], "release": key[1], "algorithm": key[2], "k": key[3], "l": key[4],
            "t": key[5], "epsilon": key[6],
            "perfect": float(perfect.mean()), "perfect_sd": _sd(perfect),
            "perfect_low": lo, "perfect_high": hi,
            "partial": float(partial.mean()), "partial_sd": _sd(partial),
            "partial_low": plo, "partial_high": phi, "partial_curve": curve,
            "confidence": float(np.mean([r["confidence"] for r in rs])),
            "values_left": float(np.mean([r["values_left"] for r in rs])),
            "class_size": float(np.mean([r["class_size"] for r in rs])),
            "classes": float(np.mean([r["classes"] for r in rs])),
            "single": float(np.mean([r["single"] for r in rs])),
            "perfect_without_target": float(np.mean([r["baseline"] for r in rs])),
            "distinct_single": float(np.mean([r["distinct_single"] for r in rs])),
            "left_share": {v: float(np.mean([r["left_share"][v] for r in rs]))
                           for v in rs[0]["left_share"]},
            "targets": rs[0]["targets"], "seeds": len(rs),
            "cost": rs[0]["cost"],
            "seconds": float(np.sum([r["seconds"] for r in rs])),
        })
    order = {"k-anonymity": 0, "l-diversity": 1, "t-closeness": 2}
    rows.sort(key=lambda r: (r["release"] != "anonymized", r["epsilon"] or 0,
                             r["algorithm"], order.get(r["model"], 9), r["k"], r["l"] or 0,
                             r["t"] or 0))
    return rows


def _ints(values: Iterable[Any], name: str) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, bool) or int(v) != v or int(v) < 1:
            raise InvalidParameterError(f"{name} must be whole numbers >= 1, got {v!r}",
                                        remedy=f"pass e.g. {name}=5,10,30")
        out.append(int(v))
    return out


def composition(data: Any, *, sensitive: str = "occupation",
                qi: Sequence[str] | None = None, overlap: int = 5000,
                k: Sequence[int] = DEFAULT_K, algorithms: Sequence[str] = ("mondrian", "optimal"),
                l: Sequence[int] = DEFAULT_L, t: Sequence[Any] = DEFAULT_T,  # noqa: E741
                variants_k: int = 10, epsilon: Sequence[Any] = (Fraction(1, 10),),
                seeds: int | Sequence[int] = 5, suppression: Any = 0, threshold: float = 0.5,
                workers: int = 2, alpha: float = 0.05,
                progress: Callable[[int, int], None] | bool | None = None
                ) -> CompositionExperiment:
    """Run the composition experiment (see the module docstring) and return its rows.

    ``data`` is a dataset with metadata (e.g. ``statcurator.datasets.adult()``); ``k``: the
    k-anonymity grid; ``l`` (distinct l-diversity) and ``t`` (equal-distance
    t-closeness) variants are run with k = ``variants_k``; ``epsilon``: the DP contrasts (ε
    per release); ``seeds``: a number of splits (seeds 0, 1, ...) or the seeds themselves;
    ``workers``: processes (1 runs in this process); ``progress``: a callback
    ``(done, total)``, or True for a rich progress bar on stderr.
    """
    started = time.perf_counter()
    ks = _ints(k, "k")
    ls = _ints(l, "l")
    ts = [exact(x, "t") for x in t]
    for a in algorithms:
        if a not in ("mondrian", "optimal"):
            raise InvalidParameterError(f"unknown algorithm {a!r}",
                                        remedy="use mondrian, optimal, or both")
    seed_list = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    if not seed_list:
        raise InvalidParameterError("no split to run", remedy="pass seeds=5 (or a list)")
    eps = [exact(e, "epsilon") for e in epsilon]
    supp = exact(suppression, "suppression", allow_zero=True, maximum=1)
    ds = _dataset(data)
    if overlap > ds.table.num_rows:
        raise InvalidParameterError(f"the overlap ({overlap}) exceeds the data's "
                                    f"{ds.table.num_rows} records",
                                    remedy="choose a smaller --overlap")
    configs = [_Config("k-anonymity", a, kk) for a in algorithms for kk in ks]
    configs += [_Config("l-diversity", a, variants_k, l=x) for a in algorithms for x in ls]
    configs += [_Config("t-closeness", a, variants_k, t=float(x)) for a in algorithms for x in ts]
    tasks = sorted(((s, c) for s in seed_list for c in configs), key=lambda x: -x[1].weight)
    args = (overlap, sensitive, tuple(qi) if qi else None, supp, eps, float(threshold))
    runs: list[dict[str, Any]] = []
    with _progress_callback(progress, len(tasks)) as tick:
        if workers <= 1:
            _init(ds)
            for s, c in tasks:
                runs += _run_task(s, c, *args)
                tick()
        else:
            with ProcessPoolExecutor(max_workers=workers, initializer=_init,
                                     initargs=(_Data(getattr(ds, "name", "data"), ds.table,
                                                     ds.meta),)) as pool:
                futures = [pool.submit(_run_task, s, c, *args) for s, c in tasks]
                for f in as_completed(futures):
                    runs += f.result()
                    tick()
    config = {"data": getattr(ds, "name", "data"), "sensitive": sensitive,
              "qi": list(qi) if qi else None, "overlap": overlap, "k": ks,
              "algorithms": list(algorithms), "l": ls, "t": [float(x) for x in ts],
              "variants_k": variants_k, "epsilon": [float(e) for e in eps],
              "seeds": len(seed_list), "seed_list": seed_list, "suppression": float(supp),
              "threshold": threshold, "thresholds": list(THRESHOLDS), "workers": workers}
    runs.sort(key=lambda r: (r["model"], r["algorithm"], r["k"], r["l"] or 0, r["t"] or 0,
                             r["epsilon"] or 0, r["seed"]))
    return CompositionExperiment(_aggregate(runs, alpha), runs, config,
                                 time.perf_counter() - started)


class _progress_callback:
    """A context manager giving a ``tick()``: a rich bar on stderr, a user callback, or
    nothing."""

    def __init__(self, progress: Callable[[int, int], None] | bool | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        self._bar: Any = None

    def __enter__(self) -> Callable[[], None]:
        if self.progress is True:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._bar = Progress(TextColumn("[bold]composition experiment"), BarColumn(),
                                 MofNCompleteColumn(), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.__enter__()
            self._task = self._bar.add_task("runs", total=self.total)
        return self.tick

    def tick(self) -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, completed=self.done)
        elif callable(self.progress):
            self.progress(self.done, self.total)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


# -- linkage and re-publication on a dataset ----------------------------------------------------

def linkage(data: Any, *, k: Sequence[int] = (1, 5, 10), sample: float = 0.5,
            external: int = 1000, algorithm: str = "optimal", suppression: Any = 0,
            seed: int = 0, epsilon: Any = None) -> list[Risk]:
    """Linkage against releases of a random ``sample`` of the data, one per k (k = 1 is the
    de-identified raw table: nothing generalized).

    The adversary's external list holds the quasi-identifiers of ``external`` people, half
    of them in the release and half not; the population for the journalist and marketer risks
    is the whole data set.
    """
    from ..anonymize import KAnonymity, anonymize
    from .tables import Linkage

    ds = _dataset(data)
    n = ds.table.num_rows
    if not 0 < sample < 1:
        raise InvalidParameterError(f"sample must be in (0, 1), got {sample}",
                                    remedy="pass e.g. sample=0.5")
    rng = np.random.default_rng(seed)  # who is in the release and on the list: the design
    perm = rng.permutation(n)
    m = int(round(sample * n))
    inside, outside = np.sort(perm[:m]), perm[m:]
    half = min(external // 2, m, len(outside))
    members = rng.choice(m, size=half, replace=False)       # positions in the release
    others = rng.choice(outside, size=external - half if external - half <= len(outside)
                        else len(outside), replace=False)
    ext_rows = np.concatenate([inside[members], others])
    truth = np.concatenate([members, np.full(len(others), -1)])
    sample_ds = _Data(f"{getattr(ds, 'name', 'data')} sample", ds.table.take(inside), ds.meta)
    ext = ds.table.take(ext_rows)
    risks = []
    for kk in _ints(k, "k"):
        res = anonymize(sample_ds, KAnonymity(kk), algorithm=algorithm, suppression=suppression)
        risks.append(Linkage(population=ds.table).run(res, ext, truth=truth.tolist(),
                                                      epsilon=epsilon))
    return risks


def republication(data: Any, *, k: int = 10, inserts: float = 0.1,
                  deletes: float = 0.1, algorithm: str = "mondrian", sensitive: str = "occupation",
                  seed: int = 0, epsilon: Any = None) -> Risk:
    """A table published (version 1), then re-published after inserts and deletes (version
    2), each version k-anonymized independently; every person in both versions is attacked
    with :class:`~statcurator.attacks.Update`."""
    from ..anonymize import KAnonymity, anonymize
    from .composition import Update

    ds = _dataset(data)
    n = ds.table.num_rows
    for name, v in (("inserts", inserts), ("deletes", deletes)):
        if not 0 <= v < 0.5:
            raise InvalidParameterError(f"{name} must be a share in [0, 0.5), got {v}",
                                        remedy=f"pass e.g. {name}=0.1")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    n_ins, n_del = int(inserts * n), int(deletes * n)
    inserted = perm[:n_ins]
    v1_rows = np.sort(perm[n_ins:])
    stay = np.sort(perm[n_ins + n_del:])
    v2_rows = np.sort(np.concatenate([stay, inserted]))
    crit = KAnonymity(k)
    name = getattr(ds, "name", "data")
    v1 = anonymize(_Data(f"{name} v1", ds.table.take(v1_rows), ds.meta), crit,
                   sensitive=[sensitive], algorithm=algorithm)
    v2 = anonymize(_Data(f"{name} v2", ds.table.take(v2_rows), ds.meta), crit,
                   sensitive=[sensitive], algorithm=algorithm)
    targets = ds.table.take(stay)
    rows = [np.searchsorted(v1_rows, stay), np.searchsorted(v2_rows, stay)]
    return Update(v2, k=k).run(v1, targets, epsilon=epsilon, rows=rows)
