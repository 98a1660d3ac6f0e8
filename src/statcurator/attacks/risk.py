"""The value every attack returns: a :class:`Risk`.

A risk is a measured share of targets breached — never a bare boolean — with its Wilson
confidence interval, the baseline rate an attacker reaches *without* the release, the number
of targets, named extra figures (``measures``), curves for plots (``curves``), per-target
detail on request, and, when a DP counterpart was attacked too, that ``contrast``.

>>> r = Risk("homogeneity", "knows the target's QIs", successes=2, targets=10, baseline=0.0)
>>> r.rate, [round(x, 3) for x in r.interval]
(0.2, [0.057, 0.51])
>>> print(r)
homogeneity: 2 of 10 targets breached (20.0%, 95% CI 5.7%–51.0%); baseline 0.0%
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from statistics import NormalDist
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError

__all__ = ["Risk", "wilson", "curve"]


def wilson(successes: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion at level 1 − alpha.

    >>> [round(x, 4) for x in wilson(0, 10)]
    [0.0, 0.2775]
    >>> wilson(0, 0)
    (0.0, 1.0)
    """
    if not 0 < alpha < 1:
        raise InvalidParameterError(f"alpha must be in (0, 1), got {alpha}",
                                    remedy="alpha=0.05 gives 95% intervals")
    if successes < 0 or successes > n:
        raise InvalidParameterError(f"{successes} successes out of {n} trials",
                                    remedy="count successes between 0 and the number of targets")
    if n == 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def curve(x: Sequence[Any], y: Sequence[Any], *, xlabel: str, ylabel: str,
          marks: Mapping[str, float] | None = None, label: str | None = None,
          **series: Sequence[Any]) -> dict[str, Any]:
    """A curve for plots and JSON: ``x``, ``y`` (and other named series of the same length);
    ``marks`` are named x positions drawn as vertical lines, ``label`` names ``y``.

    >>> curve([0, 1], [0.5, 1.0], xlabel="b", ylabel="success")["y"]
    [0.5, 1.0]
    """
    out: dict[str, Any] = {"x": _plain(list(x)), "y": _plain(list(y)), "xlabel": xlabel,
                           "ylabel": ylabel}
    for name, values in series.items():
        out[name] = _plain(list(values))
    if marks:
        out["marks"] = {str(k): float(v) for k, v in marks.items()}
    if label:
        out["label"] = label
    return out


@dataclass(frozen=True)
class Risk:
    """A measured attack outcome.

    ``successes`` of ``targets`` were breached (``rate``, with the Wilson ``interval`` at level
    1 − ``alpha``); ``baseline`` is the rate the same adversary reaches without the release
    (``baseline_method`` says how it is computed); ``adversary`` states exactly what the
    attacker knew. ``measures`` holds named figures (e.g. prosecutor risk, mean gain),
    ``curves`` series for plots (success against b, ROC, ...), ``detail`` one mapping per
    target when asked for, ``cost`` the privacy loss of what was attacked (DP releases) and
    ``contrast`` the same adversary against the DP counterpart.
    """

    attack: str
    adversary: str
    successes: int
    targets: int
    baseline: float
    baseline_method: str = "the same adversary knowing only the overall distribution"
    alpha: float = 0.05
    release: str = ""
    measures: Mapping[str, Any] = field(default_factory=dict)
    curves: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    detail: tuple[Mapping[str, Any], ...] | None = field(default=None, repr=False)
    cost: Any = None
    contrast: Risk | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        successes, targets = int(self.successes), int(self.targets)
        if targets < 0 or not 0 <= successes <= targets:
            raise InvalidParameterError(f"{successes} successes out of {targets} targets",
                                        remedy="count successes between 0 and the targets")
        object.__setattr__(self, "successes", successes)
        object.__setattr__(self, "targets", targets)
        object.__setattr__(self, "baseline", float(self.baseline))
        wilson(0, 1, self.alpha)  # validates alpha

    @property
    def rate(self) -> float:
        """Share of targets breached (0 when there are no targets)."""
        return self.successes / self.targets if self.targets else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson confidence interval of the rate at level 1 − alpha."""
        return wilson(self.successes, self.targets, self.alpha)

    @property
    def excess(self) -> float:
        """How far the rate is above the baseline (rate − baseline)."""
        return self.rate - self.baseline

    def with_contrast(self, other: Risk) -> Risk:
        """This risk with ``other`` (the DP counterpart) attached as its contrast."""
        from dataclasses import replace

        return replace(self, contrast=other)

    # -- rendering --------------------------------------------------------------------------
    def to_dict(self, *, detail: bool = True) -> dict[str, Any]:
        """A JSON-ready summary (what ``statcurator attack ... --json`` prints)."""
        lo, hi = self.interval
        out: dict[str, Any] = {
            "attack": self.attack,
            "adversary": self.adversary,
            "release": self.release,
            "targets": self.targets,
            "successes": self.successes,
            "rate": self.rate,
            "interval": [lo, hi],
            "alpha": self.alpha,
            "baseline": self.baseline,
            "baseline_method": self.baseline_method,
            "measures": {k: _plain(v) for k, v in self.measures.items()},
            "curves": {k: dict(v) for k, v in self.curves.items()},
            "cost": None if self.cost is None else str(self.cost),
        }
        if detail and self.detail is not None:
            out["detail"] = [{k: _plain(v) for k, v in d.items()} for d in self.detail]
        if self.contrast is not None:
            out["contrast"] = self.contrast.to_dict(detail=detail)
        return out

    def rows(self) -> list[tuple[str, str]]:
        """The figures as (label, text) pairs, as the text, HTML and report renderings show them."""
        lo, hi = self.interval
        level = f"{1 - self.alpha:.0%}"
        rows = [("attack", self.attack)]
        if self.release:
            rows.append(("release", self.release))
        rows += [
            ("adversary", self.adversary),
            ("breached", f"{self.successes:,} of {self.targets:,} targets ({self.rate:.1%}, "
                         f"{level} CI {lo:.1%}–{hi:.1%})"),
            ("baseline", f"{self.baseline:.1%} ({self.baseline_method})"),
        ]
        if self.cost is not None:
            rows.append(("privacy cost", str(self.cost)))
        rows += [(k, _text(v)) for k, v in self.measures.items()]
        if self.contrast is not None:
            c = self.contrast
            clo, chi = c.interval
            rows.append(("DP contrast", f"{c.rate:.1%} ({level} CI {clo:.1%}–{chi:.1%}) against "
                                        f"{c.release or 'the DP release'}; baseline "
                                        f"{c.baseline:.1%}"))
        return rows

    def __str__(self) -> str:
        lo, hi = self.interval
        return (f"{self.attack}: {self.successes:,} of {self.targets:,} targets breached "
                f"({self.rate:.1%}, {1 - self.alpha:.0%} CI {lo:.1%}–{hi:.1%}); "
                f"baseline {self.baseline:.1%}")

    def _repr_html_(self) -> str:
        body = "".join(f"<tr><th style='text-align:left'>{html.escape(k)}</th>"
                       f"<td style='text-align:left'>{html.escape(v)}</td></tr>"
                       for k, v in self.rows())
        return f"<div><b>Risk: {html.escape(self.attack)}</b><table>{body}</table></div>"


def _plain(v: Any) -> Any:
    """Numbers and containers as plain JSON values."""
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, Fraction):
        return float(v)
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


def _text(v: Any) -> str:
    if isinstance(v, float | np.floating):
        return f"{float(v):.4g}"
    if isinstance(v, Mapping):
        return ", ".join(f"{k} {_text(x)}" for k, x in v.items())
    return str(v)
