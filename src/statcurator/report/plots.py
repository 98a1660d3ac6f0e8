"""Plots for reports, rendered with matplotlib's object API (no pyplot, no global backend
change) and returned as base64 PNG so that an HTML report is a single self-contained file.

>>> import numpy as np
>>> png = class_size_histogram(np.array([5, 5, 6, 12, 40]), k=5)
>>> png[:8]
'iVBORw0K'
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import numpy as np

__all__ = ["class_size_histogram", "figure_png"]


def figure_png(fig: object) -> str:
    """A matplotlib Figure as base64-encoded PNG text."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")  # type: ignore[attr-defined]
    return base64.b64encode(buf.getvalue()).decode("ascii")


def class_size_histogram(sizes: Sequence[int] | np.ndarray, *, k: int | None = None,
                         title: str = "Equivalence class sizes") -> str:
    """Histogram of class sizes (records per class size bucket, log-spaced when sizes vary
    widely); a dashed line marks ``k``. Returns base64 PNG."""
    from matplotlib.figure import Figure

    sizes = np.asarray(sizes, dtype=np.int64)
    fig = Figure(figsize=(6.4, 3.2))
    ax = fig.subplots()
    if len(sizes) == 0:
        ax.text(0.5, 0.5, "no released classes", ha="center", va="center")
        ax.set_axis_off()
        return figure_png(fig)
    lo, hi = int(sizes.min()), int(sizes.max())
    if hi / max(lo, 1) > 50:
        bins = np.unique(np.geomspace(max(lo, 1), hi + 1, num=30).astype(int))
        ax.set_xscale("log")
    else:
        bins = np.arange(lo, hi + 2) if hi - lo < 40 else 40
    ax.hist(sizes, bins=bins, weights=sizes, color="#4c72b0", edgecolor="white")
    if k is not None:
        ax.axvline(k, color="#c44e52", linestyle="--", label=f"k = {k}")
        ax.legend(frameon=False)
    ax.set_xlabel("class size |E|")
    ax.set_ylabel("records")
    ax.set_title(title)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return figure_png(fig)
