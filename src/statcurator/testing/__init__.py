"""Test utilities for statcurator and for code built on it.

:mod:`statcurator.testing.dp` holds the empirical differential-privacy tester
(:func:`~statcurator.testing.dp.check_dp`), used by the test suites of every layer that adds
noise, and :mod:`statcurator.testing.stats` the goodness-of-fit tests of the samplers. They
import scipy, so ``import statcurator`` does not import them.

:func:`shared_data` finds the project's reference data (``../shared/data`` next to the
checkout) for tests and documentation examples.

>>> (shared_data() / "textbook" / "diabetes.csv").exists()
True
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["shared_data"]


def shared_data() -> Path:
    """The shared reference data folder: ``$STATCURATOR_SHARED_DATA``, else ``shared/data``
    next to the repository that holds this package (or next to the current directory).

    >>> shared_data().name
    'data'
    """
    env = os.environ.get("STATCURATOR_SHARED_DATA")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for base in [*here.parents, Path.cwd(), *Path.cwd().parents]:
        candidate = base / "shared" / "data"
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError("shared/data not found next to the checkout; set "
                            "STATCURATOR_SHARED_DATA to its path")
