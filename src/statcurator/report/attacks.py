"""HTML reports and plots of the attack lab: a :class:`~statcurator.attacks.Risk` (its
figures, curves, DP contrast and per-target detail) and the composition experiment (breach
against k, partial-breach curves, values left, class sizes, the DP contrast, the table).
One self-contained file each: plots are embedded as base64 PNG.

>>> from statcurator.attacks import Risk
>>> from statcurator.attacks.risk import curve
>>> r = Risk("background knowledge", "knows b values", 3, 10, 0.0,
...          curves={"success vs b": curve([0, 1], [0.1, 0.3], xlabel="b", ylabel="share")})
>>> html = render_html(r)
>>> "background knowledge" in html and "data:image/png;base64," in html
True
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .plots import figure_png

__all__ = ["render_html", "write_report", "curve_png", "experiment_figures", "risk_html"]

_TEMPLATES = Path(__file__).parent / "templates"
_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3")


def _figure(width: float = 6.4, height: float = 3.4) -> tuple[Any, Any]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    ax = fig.subplots()
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return fig, ax


def curve_png(name: str, c: Mapping[str, Any]) -> str:
    """One curve of a risk (``x``, ``y``, optional ``low``/``high`` band, ``baseline`` and
    further named series) as base64 PNG."""
    fig, ax = _figure()
    x = list(c["x"])
    ax.plot(x, c["y"], marker="o", color=_COLOURS[0], label=c.get("label", c.get("ylabel", name)))
    if "low" in c and "high" in c:
        ax.fill_between(x, c["low"], c["high"], color=_COLOURS[0], alpha=0.15, linewidth=0)
    extras = [k for k in c
              if k not in ("x", "y", "xlabel", "ylabel", "low", "high", "marks", "label")]
    for i, k in enumerate(extras):
        ax.plot(x, c[k], marker=".", linestyle="--", color=_COLOURS[(i + 1) % len(_COLOURS)],
                label=k.replace("_", " "))
    if name == "ROC":
        ax.plot([0, 1], [0, 1], color="#999", linewidth=0.8, linestyle=":")
    for label, xv in (c.get("marks") or {}).items():
        ax.axvline(xv, color="#999", linewidth=0.8, linestyle=":")
        ax.annotate(label, (xv, 0.02), xycoords=("data", "axes fraction"), fontsize=8,
                    color="#666", xytext=(3, 0), textcoords="offset points")
    ax.set_xlabel(c.get("xlabel", "x"))
    ax.set_ylabel(c.get("ylabel", "y"))
    ax.set_title(name)
    if extras or name == "ROC":
        ax.legend(frameon=False, fontsize=8)
    return figure_png(fig)


def risk_html(risk: Any) -> dict[str, Any]:
    """What the template shows of a risk: rows, curves as PNG, the contrast, the detail."""
    detail = list(risk.detail or [])[:200]
    columns = list(dict.fromkeys(k for d in detail for k in d))
    lo, hi = risk.interval
    return {
        "risk": risk, "rows": risk.rows(), "low": lo, "high": hi,
        "curves": [(name, curve_png(name, c)) for name, c in risk.curves.items()],
        "contrast": None if risk.contrast is None else risk_html(risk.contrast),
        "detail_columns": columns,
        "detail": [[_cell(d.get(c)) for c in columns] for d in detail],
        "detail_total": len(risk.detail or []),
    }


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        return ", ".join(_cell(x) for x in v)
    return str(v)


# -- the composition experiment --------------------------------------------------------------

def _by(rows: Sequence[Mapping[str, Any]], **match: Any) -> list[Mapping[str, Any]]:
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def experiment_figures(exp: Any) -> dict[str, bytes]:
    """The composition experiment's plots as PNG bytes: ``perfect`` and ``partial`` breach
    against k (k-anonymity, per algorithm, with the DP contrast), ``partial-curves`` (breach
    against the adversary's confidence), ``values-left`` and ``class-size`` against k, and
    ``variants`` (k-anonymity at the variants' k against its l- and t- variants)."""
    rows = exp.rows
    algs = list(dict.fromkeys(r["algorithm"] for r in rows))
    eps = sorted({r["epsilon"] for r in rows if r["epsilon"] is not None})
    out: dict[str, bytes] = {}

    def against_k(key: str, ylabel: str, title: str, sd: str | None = None,
                  dp: bool = True) -> bytes:
        fig, ax = _figure()
        for i, a in enumerate(algs):
            rs = sorted(_by(rows, model="k-anonymity", algorithm=a, release="anonymized"),
                        key=lambda r: r["k"])
            if not rs:
                continue
            ks = [r["k"] for r in rs]
            ys = [r[key] for r in rs]
            ax.errorbar(ks, ys, yerr=[r[sd] for r in rs] if sd else None, marker="o",
                        capsize=3, color=_COLOURS[i], label=f"{a}, k-anonymity")
            if dp:
                for j, e in enumerate(eps):
                    ds = sorted(_by(rows, model="k-anonymity", algorithm=a, epsilon=e),
                                key=lambda r: r["k"])
                    if ds:
                        ax.plot([r["k"] for r in ds], [r[key] for r in ds], marker=".",
                                linestyle="--", color=_COLOURS[i], alpha=0.5 + 0.4 * j / max(len(eps), 1),
                                label=f"{a}, DP histograms ε={e:g} per release")
        ax.set_xlabel("k")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(frameon=False, fontsize=8)
        return _png_bytes(fig)

    out["perfect"] = against_k("perfect", "share of the overlap", "Perfect breach (one value "
                               "left)", "perfect_sd")
    thr = exp.config.get("threshold", 0.5)
    out["partial"] = against_k("partial", "share of the overlap",
                               f"Partial breach (confidence ≥ {thr:g})", "partial_sd")
    out["values-left"] = against_k("values_left", "mean values left", "Values left after "
                                   "intersecting the two releases", dp=False)
    out["class-size"] = against_k("class_size", "mean class size of a target",
                                  "Class sizes of the attacked people", dp=False)
    fig, ax = _figure()
    ks = sorted({r["k"] for r in rows if r["model"] == "k-anonymity"})
    for a in algs:
        for r in sorted(_by(rows, model="k-anonymity", algorithm=a, release="anonymized"),
                        key=lambda r: r["k"]):
            xs = list(r["partial_curve"])
            # one colour per k, one line style per algorithm
            ax.plot([float(x) for x in xs], list(r["partial_curve"].values()),
                    color=_COLOURS[ks.index(r["k"]) % len(_COLOURS)], marker=".",
                    linestyle="-" if a == algs[0] else "--", label=f"{a}, k={r['k']}")
    ax.set_xlabel("adversary confidence in the true value ≥")
    ax.set_ylabel("share of the overlap")
    ax.set_title("Partial breach against the adversary's confidence")
    ax.legend(frameon=False, fontsize=7, ncol=2)
    out["partial-curves"] = _png_bytes(fig)
    variants = [r for r in rows if r["release"] == "anonymized" and r["model"] != "k-anonymity"]
    if variants:
        vk = exp.config.get("variants_k", 10)
        fig, ax = _figure()
        labels, perfect, partial, colours = [], [], [], []
        for i, a in enumerate(algs):
            base = _by(rows, model="k-anonymity", algorithm=a, release="anonymized", k=vk)
            for r in base + [v for v in variants if v["algorithm"] == a]:
                tag = "k" if r["model"] == "k-anonymity" else (
                    f"l={r['l']}" if r["l"] is not None else f"t={r['t']:g}")
                labels.append(f"{a[:4]} {tag}")
                perfect.append(r["perfect"])
                partial.append(r["partial"])
                colours.append(_COLOURS[i])
        pos = range(len(labels))
        ax.bar([p - 0.2 for p in pos], perfect, width=0.4, color=colours, label="perfect")
        ax.bar([p + 0.2 for p in pos], partial, width=0.4, color=colours, alpha=0.45,
               label=f"partial (≥ {thr:g})")
        ax.set_xticks(list(pos), labels, rotation=30, fontsize=8)
        ax.set_ylabel("share of the overlap")
        ax.set_title(f"k={vk}: k-anonymity against its l-diversity and t-closeness variants")
        ax.legend(frameon=False, fontsize=8)
        out["variants"] = _png_bytes(fig)
    return out


def _png_bytes(fig: Any) -> bytes:
    return base64.b64decode(figure_png(fig))


# -- pages ------------------------------------------------------------------------------------

def render_html(obj: Any, *, title: str | None = None) -> str:
    """The HTML report of a :class:`~statcurator.attacks.Risk` (or a list of them) or of a
    composition experiment."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from .. import __version__

    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]))
    generated = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    if hasattr(obj, "rows") and hasattr(obj, "runs"):
        figures = {k: base64.b64encode(v).decode("ascii")
                   for k, v in experiment_figures(obj).items()}
        return env.get_template("composition_experiment.html.j2").render(
            title=title or "Composition experiment", generated=generated, version=__version__,
            exp=obj, config=obj.config, figures=figures, rows=obj.rows, table=_table(obj.rows))
    risks = list(obj) if isinstance(obj, list | tuple) else [obj]
    return env.get_template("attack_risk.html.j2").render(
        title=title or ("Attack report: " + ", ".join(dict.fromkeys(r.attack for r in risks))),
        generated=generated, version=__version__, risks=[risk_html(r) for r in risks])


def _table(rows: Sequence[Mapping[str, Any]]) -> list[list[str]]:
    def pct(x: Any) -> str:
        return "" if x is None else f"{x:.1%}"

    out = []
    for r in rows:
        out.append([r["model"], r["release"], r["algorithm"], str(r["k"]),
                    "" if r["l"] is None else str(r["l"]),
                    "" if r["t"] is None else f"{r['t']:g}",
                    "" if r["epsilon"] is None else f"{r['epsilon']:g}",
                    f"{pct(r['perfect'])} ± {pct(r['perfect_sd'])}",
                    f"{pct(r['perfect_low'])}–{pct(r['perfect_high'])}",
                    pct(r.get("perfect_without_target")),
                    f"{pct(r['partial'])} ± {pct(r['partial_sd'])}",
                    f"{r['values_left']:.2f}", f"{r['class_size']:,.1f}",
                    f"{r['classes']:,.0f}", r.get("cost") or ""])
    return out


def write_report(obj: Any, path: str | Path, *, title: str | None = None) -> Path:
    """Write the HTML report of a risk (or risks) or an experiment to ``path``."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(obj, title=title), encoding="utf-8")
    return p
