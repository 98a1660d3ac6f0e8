"""Validation of the attacks' parameters (one place for the messages and remedies).

>>> whole(3, "repeats"), share(0.5, "threshold")
(3, 0.5)
>>> whole(0, "queries")
Traceback (most recent call last):
...
statcurator.core.errors.InvalidParameterError: queries must be a whole number >= 1, got 0; pass e.g. queries=1
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.errors import InvalidParameterError

__all__ = ["whole", "share"]


def whole(value: Any, name: str, minimum: int = 1, example: Any = None) -> int:
    """A whole number >= ``minimum`` (booleans refused)."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        raise InvalidParameterError(
            f"{name} must be a whole number >= {minimum}, got {value!r}",
            remedy=f"pass e.g. {name}={example if example is not None else max(minimum, 1)}")
    return int(value)


def share(value: Any, name: str, *, closed: bool = True, example: Any = 0.5) -> float:
    """A share in (0, 1] (``closed=False``: in (0, 1))."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    ok = 0 < v <= 1 if closed else 0 < v < 1
    if not ok:
        interval = "(0, 1]" if closed else "(0, 1)"
        raise InvalidParameterError(f"{name} must be in {interval}, got {value!r}",
                                    remedy=f"pass e.g. {name}={example}")
    return v
