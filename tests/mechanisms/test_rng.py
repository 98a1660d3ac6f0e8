"""The random source: secure by default, seeded only behind an explicit switch."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest
from scipy.stats import chisquare

from statcurator.core.errors import InvalidParameterError, PrivacyWarning
from statcurator.mechanisms import LaplaceMechanism, rng, samplers


def test_seeded_is_deterministic_and_warns() -> None:
    with pytest.warns(PrivacyWarning, match="never to protect a real release"), rng.seeded(42):
        a = samplers.discrete_laplace(10, size=100)
        assert rng.is_seeded()
    with pytest.warns(PrivacyWarning), rng.seeded(42):
        b = samplers.discrete_laplace(10, size=100)
    assert (a == b).all()
    assert not rng.is_seeded()  # restored on exit


def test_default_source_is_the_os_and_not_reproducible() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no PrivacyWarning outside seeded()
        a = rng.words64(8)
        b = rng.words64(8)
    assert not (a == b).all()
    assert not rng.is_seeded()


def test_seeding_is_per_thread() -> None:
    seen: list[bool] = []

    def other() -> None:
        seen.append(rng.is_seeded())

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with rng.seeded(1):
            t = threading.Thread(target=other)
            t.start()
            t.join()
    assert seen == [False]  # another thread keeps the secure source


def test_seeded_restores_after_an_exception() -> None:
    with pytest.raises(RuntimeError), warnings.catch_warnings():
        warnings.simplefilter("ignore", PrivacyWarning)
        with rng.seeded(3):
            raise RuntimeError
    assert not rng.is_seeded()


@pytest.mark.parametrize("bad", [-1, 1.5, "7", True, None])
def test_seed_must_be_a_natural_number(bad: object) -> None:
    with pytest.raises(InvalidParameterError), rng.seeded(bad):  # type: ignore[arg-type]
        pass


def test_randbelow_is_uniform() -> None:
    draws = [rng.randbelow(6) for _ in range(60_000)]
    assert chisquare(np.bincount(draws, minlength=6)).pvalue > 1e-6
    assert all(0 <= rng.randbelow(10**40) < 10**40 for _ in range(100))
    with pytest.raises(InvalidParameterError):
        rng.randbelow(0)


def test_bits_and_words_are_uniform() -> None:
    bits = rng.random_bits(100_003)
    assert bits.shape == (100_003,)
    assert chisquare(np.bincount(bits.astype(int), minlength=2)).pvalue > 1e-6
    w = rng.words32(100_000)
    assert chisquare(np.bincount((w >> np.uint32(28)).astype(int), minlength=16)).pvalue > 1e-6
    assert rng.random_bytes(0) == b""
    with pytest.raises(InvalidParameterError):
        rng.random_bytes(-1)


def test_mechanisms_use_the_switch() -> None:
    m = LaplaceMechanism(1, 1)
    with pytest.warns(PrivacyWarning), rng.seeded(9):
        a = m.release(np.zeros(50))
    with pytest.warns(PrivacyWarning), rng.seeded(9):
        b = m.release(np.zeros(50))
    assert (a == b).all()


def _child_bytes(queue) -> None:  # type: ignore[no-untyped-def]
    queue.put(rng.random_bytes(16))


def test_forked_children_do_not_replay_the_parents_buffer() -> None:
    import multiprocessing as mp

    rng.random_bytes(8)  # fill this process's buffer
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child_bytes, args=(queue,))
    child.start()
    theirs = queue.get(timeout=30)
    child.join(timeout=30)
    ours = rng.random_bytes(16)
    assert theirs != ours


def test_no_mechanism_draws_from_an_insecure_generator() -> None:
    """DESIGN invariant: noise never comes from numpy.random / random; only rng.seeded may."""
    import re
    from pathlib import Path

    import statcurator.mechanisms as pkg

    pattern = re.compile(r"np\.random|numpy\.random|^\s*import random|from random import"
                         r"|\bsecrets\b", re.M)
    for path in Path(pkg.__file__).parent.glob("*.py"):
        hits = [m.group(0) for m in pattern.finditer(path.read_text())]
        if path.name == "rng.py":
            assert all("np.random" in h for h in hits)  # the seeded test source only
            assert "PCG64" in path.read_text() and "PrivacyWarning" in path.read_text()
        else:
            assert not hits, f"{path.name} uses {hits}"
