"""The HTML report of a synthetic table: the real and synthetic marginals side by side.

The report reads the *real* data (it compares them with the synthetic table), so it is for
the data owner who ran the synthesizer, not for publication: it says so at the top. One
self-contained file (plots embedded as base64 PNG).

>>> import numpy as np
>>> from statcurator.estimators.learning import categorical
>>> dom = (categorical("a", ["x", "y"]), categorical("b", ["u", "v", "w"]))
>>> real = np.array([[0, 0], [1, 2], [1, 1]] * 20); synth = np.array([[0, 0], [1, 2]] * 30)
>>> s = summary(real, synth, dom)
>>> s["tv"]["1-way"] > 0, sorted(s["tv"])
(True, ['1-way', '2-way'])
>>> html = render_html(real, synth, dom, info={"method": "MST"})
>>> "data:image/png;base64," in html and "not for publication" in html
True
"""

from __future__ import annotations

import datetime as _dt
import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .plots import figure_png

__all__ = ["summary", "render_html", "write_report", "marginal_bars", "pair_tv_heatmap"]

_TEMPLATES = Path(__file__).parent / "templates"


def _share(codes: np.ndarray, sizes: Sequence[int], cols: Sequence[int]) -> np.ndarray:
    shape = tuple(sizes[c] for c in cols)
    flat = np.ravel_multi_index(tuple(codes[:, c] for c in cols), shape)
    counts = np.bincount(flat, minlength=int(np.prod(shape))).astype(np.float64)
    return counts / max(counts.sum(), 1.0)


def _tv(real: np.ndarray, synth: np.ndarray, sizes: Sequence[int], cols: Sequence[int]
        ) -> float:
    return float(0.5 * np.abs(_share(real, sizes, cols) - _share(synth, sizes, cols)).sum())


def summary(real: np.ndarray, synth: np.ndarray, domain: Sequence[Any],
            ks: Sequence[int] = (1, 2, 3)) -> dict[str, Any]:
    """Average total-variation distance of the k-way marginals, and the worst ones."""
    sizes = [a.size for a in domain]
    names = [a.name for a in domain]
    tv: dict[str, float] = {}
    worst: list[tuple[str, float]] = []
    for k in ks:
        if k > len(domain):
            continue
        vals = [(c, _tv(real, synth, sizes, c)) for c in itertools.combinations(
            range(len(domain)), k)]
        tv[f"{k}-way"] = float(np.mean([v for _, v in vals]))
        worst += [(" × ".join(names[i] for i in c), v) for c, v in vals]
    worst.sort(key=lambda x: -x[1])
    return {"tv": tv, "worst": worst[:10], "rows_real": int(real.shape[0]),
            "rows_synth": int(synth.shape[0])}


def marginal_bars(real: np.ndarray, synth: np.ndarray, domain: Sequence[Any],
                  max_values: int = 20) -> str:
    """One bar chart per attribute: the real and synthetic shares of each value."""
    from matplotlib.figure import Figure

    n = len(domain)
    cols = 2 if n > 1 else 1
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(11, 2.8 * rows))
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for j, a in enumerate(domain):
        ax = axes[j]
        p = _share(real, [x.size for x in domain], [j])
        q = _share(synth, [x.size for x in domain], [j])
        # numeric bins in their natural order; categories by real share, the top ones
        order = np.arange(p.size)[:max_values] if getattr(a, "numeric", False) else \
            np.argsort(-p)[:max_values]
        x = np.arange(order.size)
        ax.bar(x - 0.2, p[order], width=0.4, label="real", color="#4c72b0")
        ax.bar(x + 0.2, q[order], width=0.4, label="synthetic", color="#dd8452")
        ax.set_xticks(x)
        ax.set_xticklabels([str(a.labels[i])[:14] for i in order], rotation=60, ha="right",
                           fontsize=7)
        ax.set_title(f"{a.name} (TV {0.5 * np.abs(p - q).sum():.3f})", fontsize=10)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
        if j == 0:
            ax.legend(frameon=False, fontsize=8)
    for ax in axes[n:]:
        ax.set_axis_off()
    fig.tight_layout()
    return figure_png(fig)


def pair_tv_heatmap(real: np.ndarray, synth: np.ndarray, domain: Sequence[Any]) -> str:
    """The total-variation distance of every 2-way marginal, as a heat map."""
    from matplotlib.figure import Figure

    n = len(domain)
    sizes = [a.size for a in domain]
    m = np.full((n, n), np.nan)
    for i, j in itertools.combinations(range(n), 2):
        m[i, j] = m[j, i] = _tv(real, synth, sizes, (i, j))
    fig = Figure(figsize=(6.5, 5.5))
    ax = fig.subplots()
    im = ax.imshow(m, cmap="Oranges", vmin=0)
    names = [a.name for a in domain]
    ax.set_xticks(range(n))
    ax.set_xticklabels(names, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n))
    ax.set_yticklabels(names, fontsize=8)
    for i, j in itertools.product(range(n), range(n)):
        if i != j:
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im, ax=ax, label="total-variation distance")
    ax.set_title("2-way marginals: real vs synthetic")
    return figure_png(fig)


def render_html(real: np.ndarray, synth: np.ndarray, domain: Sequence[Any], *,
                info: Mapping[str, Any] | None = None, errors: Sequence[Mapping[str, Any]] = (),
                title: str | None = None) -> str:
    """The report: configuration and cost (``info``), average TV per k, the worst marginals,
    the one-way bar charts and the 2-way heat map."""
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    from .. import __version__

    env = Environment(loader=FileSystemLoader(str(_TEMPLATES)),
                      autoescape=select_autoescape(["html", "j2"]))
    template = env.get_template("synthesis.html.j2")
    s = summary(real, synth, domain)
    return template.render(
        title=title or "Synthetic data report",
        generated=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=__version__, info=dict(info or {}), summary=s, errors=list(errors),
        bars=marginal_bars(real, synth, domain),
        heatmap=pair_tv_heatmap(real, synth, domain) if len(domain) > 1 else None,
        domain=[(a.name, a.size) for a in domain])


def write_report(real: np.ndarray, synth: np.ndarray, domain: Sequence[Any],
                 path: str | Path, **options: Any) -> Path:
    """Write the report to ``path`` and return it."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render_html(real, synth, domain, **options), encoding="utf-8")
    return p
