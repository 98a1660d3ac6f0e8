"""Fixtures of the mechanism tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from statcurator.mechanisms import samplers


@pytest.fixture
def exact_paths() -> Iterator[None]:
    """Send ~30% of the sampler's decisions down the exact (lazy, rational) path."""
    old = samplers._force_fallback
    samplers._force_fallback = 0.3
    try:
        yield
    finally:
        samplers._force_fallback = old
