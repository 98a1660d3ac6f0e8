"""The HTML report of an anonymization: configuration, chosen generalization, class-size
histogram, utility and risk figures, the independent verification, and what the release
still leaks. One self-contained file (the plot is embedded as base64 PNG).

>>> import statcurator as sc
>>> from statcurator.anonymize import anonymize, KAnonymity
>>> html = render_html(anonymize(sc.datasets.adult(), KAnonymity(5)))
>>> "Verification" in html and "data:image/png;base64," in html
True
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from .plots import class_size_histogram

__all__ = ["render_html", "write_report", "limitations"]

_TEMPLATES = Path(__file__).parent / "templates"


def limitations(result: Any) -> list[str]:
    """Plain statements of what the release does *not* protect against, given its criteria."""
    from ..anonymize.criteria import DeltaPresence, KAnonymity, LDiversity, TCloseness

    kinds = {type(c) for c in result.criteria}
    notes = []
    if KAnonymity in kinds and not kinds & {LDiversity, TCloseness}:
        notes.append("k-anonymity alone does not prevent attribute disclosure: a class whose "
                     "records share one sensitive value reveals it (homogeneity attack), and "
                     "background knowledge can rule out the rest.")
    if LDiversity in kinds and TCloseness not in kinds:
        notes.append("l-diversity bounds the number of distinct sensitive values per class, not "
                     "how close they are: similar values (e.g. all low salaries, all stomach "
                     "diseases) still leak (similarity and skewness attacks).")
    if TCloseness in kinds:
        notes.append("t-closeness limits what a class reveals beyond the whole table's "
                     "distribution, but the distribution itself is released.")
    unprotected = getattr(result, "unprotected", ())
    if unprotected:
        notes.append(f"The sensitive attribute(s) {', '.join(unprotected)} are released as they "
                     "are: no l-diversity or t-closeness criterion protects them, so a class "
                     "can reveal them outright.")
    if DeltaPresence not in kinds:
        notes.append("Membership is not protected: an attacker who links a person to a class "
                     "learns that the person is in the data (δ-presence addresses this).")
    notes.append("Syntactic models assume the attacker knows only the quasi-identifiers "
                 "declared; releasing several anonymizations of the same data (composition) can "
                 "re-identify records that each release protects. For guarantees that hold "
                 "against any background knowledge, use the differentially private query "
                 "interface.")
    return notes


def render_html(result: Any, *, title: str | None = None) -> str:
    """Render the report of an :class:`~statcurator.anonymize.AnonymizationResult`."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from .. import __version__
    from ..anonymize.criteria import KAnonymity

    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]))
    template = env.get_template("anonymization.html.j2")
    k = max((c.k for c in result.criteria if isinstance(c, KAnonymity)), default=None)
    m = result.metrics
    utility = [
        ("Loss (ARX, geometric mean of normalized shares)", _fmt(m.get("loss"), 4)),
        ("Generalization loss / NCP (arithmetic mean)", _fmt(m.get("ncp"), 4)),
        ("Discernibility DM", _fmt(m.get("dm"))),
        ("DM* (suppressed classes at their size)", _fmt(m.get("dmstar"))),
        ("Average class size (AECS)", _fmt(m.get("aecs"), 2)),
        ("Non-uniform entropy (bits)", _fmt(m.get("entropy"), 1)),
        ("Precision loss", _fmt(m.get("precision"), 4)),
        ("Equivalence classes", _fmt(result.classes)),
        ("Smallest / largest class", f"{m.get('min_class_size')} / {m.get('max_class_size')}"),
        ("Suppressed records", f"{result.suppressed:,} of {result.records:,} "
                               f"({result.suppressed / max(result.records, 1):.2%})"),
    ]
    r = result.risk
    risk = [
        ("Highest re-identification risk (1 / smallest class)", f"{r['max']:.4f}"),
        ("Average risk over released records", f"{r['average']:.4f}"),
        (f"Records with risk above {r['threshold']:g}", f"{r['records_at_risk']:.2%} "
                                                         f"({r['classes_at_risk']} classes)"),
    ]
    generalization = []
    if result.levels is not None and result.lattice is not None:
        for q, lv in result.levels.items():
            height = result.lattice.shape[result.qi.index(q)] - 1
            generalization.append((q, lv, height))
    lattice = result.lattice.counts() if result.lattice is not None else None
    preview_cols = result.table.column_names
    preview = [[_cell(row[c]) for c in preview_cols] for row in result.table.slice(0, 10).to_pylist()]
    return template.render(
        title=title or f"Anonymization report: {result.dataset}",
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__,
        result=result,
        algorithm={"optimal": "optimal full-domain generalization (Flash)",
                   "mondrian": "Mondrian multidimensional partitioning"}.get(result.algorithm,
                                                                            result.algorithm),
        criteria=[str(c) for c in result.criteria],
        suppression=f"{float(result.suppression):.2%} ({result.suppression_limit:,} records)",
        generalization=generalization,
        histogram=class_size_histogram(result.class_sizes, k=k),
        utility=utility,
        risk=risk,
        verified=list(result.verified.items()),
        all_verified=all(result.verified.values()),
        lattice=lattice,
        preview_cols=preview_cols,
        preview=preview,
        limitations=limitations(result),
    )


def write_report(result: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Write the HTML report to ``path`` and return it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(result, title=title), encoding="utf-8")
    return p


def _fmt(v: Any, digits: int | None = None) -> str:
    if v is None:
        return "n/a"
    if digits is None:
        return f"{int(v):,}"
    return f"{float(v):,.{digits}f}"


def _cell(v: Any) -> str:
    return "" if v is None else str(v)
