"""Test utilities for statcurator and for code built on it.

:mod:`statcurator.testing.dp` holds the empirical differential-privacy tester
(:func:`~statcurator.testing.dp.check_dp`), used by the test suites of every layer that adds
noise, and :mod:`statcurator.testing.stats` the goodness-of-fit tests of the samplers. They
import scipy, so ``import statcurator`` does not import them.

The small tables that tests and documentation examples read are in the repository: the
bundled datasets (:mod:`statcurator.datasets`) and ``tests/data``.
"""

from __future__ import annotations

__all__: list[str] = []
