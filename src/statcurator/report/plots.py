"""Plots, rendered with matplotlib's object API (no pyplot, no global backend change): the
class-size histogram of anonymization reports (base64 PNG, so that an HTML report is a single
self-contained file) and the noise distribution of a DP mechanism (a PNG file).

>>> import numpy as np
>>> png = class_size_histogram(np.array([5, 5, 6, 12, 40]), k=5)
>>> png[:8]
'iVBORw0K'
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError

__all__ = ["class_size_histogram", "figure_png", "noise_distribution"]


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


def noise_distribution(m: Any, path: str | Path, alpha: Fraction = Fraction(1, 20)) -> Path:
    """Draw the exact noise distribution of mechanism ``m`` (the report probabilities for
    randomized response, the release probability for partition selection) to a PNG file,
    with its (1-``alpha``) interval shaded.

    >>> import tempfile
    >>> from statcurator.mechanisms import LaplaceMechanism
    >>> out = noise_distribution(LaplaceMechanism(1, 1), Path(tempfile.mkdtemp()) / "noise.png")
    >>> out.read_bytes()[:4]
    b'\\x89PNG'
    """
    from matplotlib.figure import Figure

    from .. import mechanisms as mech

    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    if isinstance(m, mech.RandomizedResponse):
        probs = [m.p_truthful] + [m.p_other] * (m.k - 1)
        ax.bar(["true answer"] + [f"other {i}" for i in range(1, m.k)], probs, color="#4c72b0")
        ax.set_ylabel("probability of the report")
        ax.set_title(f"randomized response, ε={float(m.epsilon):g}: "
                     f"P(truthful) = {m.p_truthful:.4f}")
    elif isinstance(m, mech.PartitionSelection):
        counts = np.arange(0, 2 * m.threshold + 1)
        ax.plot(counts, [m.keep_probability(int(c)) for c in counts], marker="o", ms=3)
        ax.axvline(m.threshold, color="grey", ls="--", label=f"threshold τ = {m.threshold}")
        ax.set_xlabel("true number of privacy units in the key")
        ax.set_ylabel("P(key is released)")
        ax.set_yscale("log")
        ax.legend()
        ax.set_title(f"partition selection, {m.cost}")
    elif hasattr(m, "noise_pmf"):
        h = int(m.accuracy(Fraction(1, 10**4)) / float(m.step)) + 1
        ks = np.arange(-h, h + 1, max(1, h // 400))
        xs = ks * float(m.step)
        ax.vlines(xs, 0, m.noise_pmf(ks), color="#4c72b0", lw=max(0.5, 300 / len(ks)))
        half = m.accuracy(alpha)
        ax.axvspan(-half, half, color="#dd8452", alpha=0.15,
                   label=f"{float(1 - alpha):.3g} interval: ±{half:g}")
        ax.set_xlabel("noise (output units)")
        ax.set_ylabel("P(noise = x)")
        ax.legend()
        ax.set_title(f"{m.name}: scale {float(m.scale):g}, cost {m.cost}")
    else:
        raise InvalidParameterError(f"the {m.name} mechanism has no noise distribution to plot",
                                    remedy="plot laplace, geometric, gaussian, vector-laplace, "
                                           "randomized-response or partition-selection")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    return out
