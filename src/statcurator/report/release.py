"""The HTML report of a DP release: the query, the answers with their intervals as a chart,
what the guarantee means in words, the mechanisms, and the certificate with the independent
re-check's verdict (Kerckhoffs: everything but the random bits is public).

>>> g = guarantee_in_words({"epsilon": "1", "delta": "0"})
>>> "73.1%" in g[1]
True
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from collections.abc import Mapping
from fractions import Fraction
from pathlib import Path
from typing import Any

from .plots import figure_png

__all__ = ["guarantee_in_words", "render_html", "write_report"]

_TEMPLATES = Path(__file__).resolve().parent / "templates"
MAX_ROWS = 200  # rows shown in the page's table (the release holds them all)
MAX_BARS = 40   # groups drawn in a chart


def guarantee_in_words(cost: Mapping[str, Any]) -> list[str]:
    """What a release's cost means, in words: the likelihood-ratio bound, and the best
    confidence an adversary can reach about one person's secret bit from a 50% prior
    (randomized response's e^ε/(1 + e^ε)). zCDP is stated at δ = 10⁻⁶."""
    if "rho" in cost and cost.get("rho") is not None and "epsilon" not in cost:
        rho = float(Fraction(cost["rho"]))
        delta = 1e-6
        eps = rho + 2 * math.sqrt(rho * math.log(1 / delta))
        head = (f"ρ-zCDP with ρ = {rho:.4g} (Gaussian noise); for comparison it implies "
                f"(ε, δ)-DP with ε = {eps:.3g} at δ = {delta:g}.")
    else:
        eps = float(Fraction(cost.get("epsilon") or 0))
        delta = float(Fraction(cost.get("delta") or 0))
        head = (f"ε = {eps:.4g}" + (f", δ = {delta:.3g}" if delta else "") + ": whether or not "
                "any one person's data is in the dataset, the probability of every possible "
                f"answer changes by at most a factor e^ε = {math.exp(min(eps, 700)):.4g}"
                + (f", except with probability δ = {delta:.3g}" if delta else "") + ".")
    conf = 1 / (1 + math.exp(-min(eps, 700)))
    return [head,
            f"An adversary who knows everyone else's data and started 50% sure of a secret bit "
            f"of one person can be at most {conf:.1%} sure after seeing this answer — the same "
            f"as from that person's randomized response at ε = {eps:.3g} (e^ε/(1 + e^ε)). "
            "This holds whatever else the adversary knows, and for anything computed from the "
            "answer (post-processing); the costs of several answers add up (composition)."]


def _chart(release: Any) -> list[tuple[str, str]]:
    """One bar chart per noisy output: value and interval per group (the first groups)."""
    from matplotlib.figure import Figure

    cols = release.columns
    keys = [c for c in cols if not (c.endswith("_low") or c.endswith("_high"))
            and f"{c}_low" not in cols and c not in release.mechanisms]
    out = []
    rows = release.rows()[:MAX_BARS]
    for c in cols:
        if f"{c}_low" not in cols:
            continue
        vals = [r[c] for r in rows]
        if not vals or any(not isinstance(v, int | float) or isinstance(v, bool) for v in vals):
            continue
        lows = [r.get(f"{c}_low") for r in rows]
        highs = [r.get(f"{c}_high") for r in rows]
        labels = [" / ".join(str(r[k]) for k in keys) or c for r in rows]
        fig = Figure(figsize=(6.4, max(2.2, 0.28 * len(rows) + 1)))
        ax = fig.subplots()
        y = list(range(len(rows)))
        ax.barh(y, vals, color="#4c72b0", alpha=0.8)
        err = [[v - lo if lo is not None else 0 for v, lo in zip(vals, lows, strict=True)],
               [hi - v if hi is not None else 0 for v, hi in zip(vals, highs, strict=True)]]
        if any(lo is not None for lo in lows):
            ax.errorbar(vals, y, xerr=err, fmt="none", ecolor="#222", capsize=3)
        ax.set_yticks(y, labels)
        ax.invert_yaxis()
        ax.set_xlabel(f"{c} (noisy, with its {1 - release.alpha:.0%} interval)")
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        out.append((c, figure_png(fig)))
    return out


def _cell(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:,.6g}"
    return str(v)


def render_html(release: Any, *, title: str | None = None) -> str:
    """The HTML report of a :class:`~statcurator.query.release.Release`."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from .. import __version__

    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]))
    prov = release.provenance
    cert = prov.get("certificate") or {}
    cost = cert.get("cost") or {k: str(v) for k, v in
                                (("epsilon", prov.get("epsilon")), ("delta", prov.get("delta")),
                                 ("rho", prov.get("rho"))) if v is not None}
    unit = cert.get("privacy_unit") or {}
    mechanisms = []
    for m in cert.get("measurements", []):
        share = f"ρ = {m['rho']}" if m.get("rho") and not m.get("epsilon") else \
            f"ε = {m['epsilon']}" + (f", δ = {m['delta']}" if m.get("delta") not in
                                     (None, "0") else "")
        mechanisms.append({"label": m["label"], "mechanism": m["mechanism"], "share": share,
                           "sensitivity": m.get("sensitivity"), "scale": m.get("scale")})
    rows = release.data
    return env.get_template("release.html.j2").render(
        title=title or "DP release", version=__version__, replayed=release.replayed,
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        query=prov.get("query", ""), dataset=prov.get("dataset", ""), cost=str(release.cost),
        unit=("one row" if not unit.get("column") else
              f"{unit['column']} (at most {unit.get('max_rows')} rows per unit)"),
        neighbours=prov.get("neighbours", ""),
        coverage=f"{1 - release.alpha:.0%} confidence (each interval covers the exact answer "
                 f"with probability at least {1 - release.alpha:.0%})",
        notes=cert.get("notes", []), columns=release.columns,
        rows=[[_cell(v) for v in r] for r in rows[:MAX_ROWS]],
        more_rows=max(len(rows) - MAX_ROWS, 0), charts=_chart(release),
        meaning=guarantee_in_words(cost), mechanisms=mechanisms,
        recheck=cert.get("recheck"),
        certificate=json.dumps(cert, indent=2, ensure_ascii=False) if cert else
        "(no certificate: a release from before certificates, or one that measured nothing)")


def write_report(release: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Write the HTML report of ``release`` to ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(release, title=title), encoding="utf-8")
    return p
