"""Plots for the DP estimators (matplotlib, imported when a plot is drawn).

* :func:`plot_efficiency` — the error of a private estimator and of the non-private one
  against n (log–log), and their ratio: sample-and-aggregate's relative efficiency → 1.
* :func:`plot_errors` — error distributions of several methods side by side (e.g. smooth
  vs global sensitivity for a median).

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp()) / "eff.png"
>>> plot_efficiency([1e3, 1e4], [0.1, 0.03], [0.05, 0.02], out, title="toy").name
'eff.png'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_efficiency", "plot_errors"]


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_efficiency(ns: Sequence[float], private: Sequence[float],
                    nonprivate: Sequence[float], path: str | Path, *,
                    title: str = "private vs non-private error",
                    ylabel: str = "RMSE") -> Path:
    """Error against n for both estimators, and their ratio (the relative efficiency)."""
    plt = _pyplot()
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax.loglog(ns, private, "o-", label="private (sample-and-aggregate)")
    ax.loglog(ns, nonprivate, "s--", label="non-private MLE")
    ax.set_xlabel("n")
    ax.set_ylabel(ylabel)
    ax.legend()
    ax.set_title(title)
    ratio = [p / q for p, q in zip(private, nonprivate, strict=True)]
    ax2.semilogx(ns, ratio, "o-")
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.axhline(1.1, color="grey", lw=0.8, ls=":")
    ax2.set_xlabel("n")
    ax2.set_ylabel("private / non-private error")
    ax2.set_title("relative efficiency → 1")
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def plot_errors(errors: Mapping[str, Sequence[float]], path: str | Path, *,
                title: str = "absolute error", log: bool = True) -> Path:
    """Box plots of the absolute errors of several methods.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "e.png"
    >>> plot_errors({"a": [1, 2], "b": [3, 4]}, p).exists()
    True
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(max(4, 1.6 * len(errors)), 4))
    ax.boxplot([list(v) for v in errors.values()], showfliers=False)
    ax.set_xticks(range(1, len(errors) + 1), list(errors), rotation=15)
    if log:
        ax.set_yscale("log")
    ax.set_title(title)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
