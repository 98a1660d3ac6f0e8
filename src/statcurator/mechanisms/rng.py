"""The randomness behind every noise sample: the operating system's secure generator.

All samplers in :mod:`statcurator.mechanisms` draw their random bits from here and only from
here. By default the bits come from :func:`os.urandom` (the kernel's CSPRNG, ``getrandom(2)``
on Linux), which is unpredictable to an analyst even if they know every earlier output.

For tests and reproducible documentation only, :func:`seeded` switches the *current context*
(thread or task) to a deterministic generator and warns with
:class:`~statcurator.core.errors.PrivacyWarning`: seeded noise is predictable, so it must never
protect a real release.

>>> import warnings
>>> len(random_bytes(16))
16
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore")
...     with seeded(7):
...         a = words64(3)
...     with seeded(7):
...         b = words64(3)
>>> bool((a == b).all()), is_seeded()
(True, False)
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import warnings
from collections.abc import Iterator

import numpy as np

from ..core.errors import InvalidParameterError, PrivacyWarning

__all__ = [
    "random_bytes",
    "words64",
    "words32",
    "random_bits",
    "randbelow",
    "randbits",
    "seeded",
    "is_seeded",
]


class _OsSource:
    """Bytes from the kernel's cryptographically secure generator.

    Small requests are served from a per-thread buffer of ``os.urandom`` bytes (one system
    call per 4 KiB instead of one per draw); every byte is used once. The buffer is dropped
    when the process id changes, so a forked child never replays its parent's bytes.
    """

    secure = True
    _BUFFER = 4096

    def __init__(self) -> None:
        self._local = threading.local()

    def bytes(self, n: int) -> bytes:
        if n > 256:
            return os.urandom(n)
        # this thread's [buffer, position, process id]: one lookup per draw (the noise
        # samplers draw a few bytes at a time, many times per release)
        state = getattr(self._local, "state", None)
        pid = os.getpid()
        if state is None or state[2] != pid or state[1] + n > len(state[0]):
            state = self._local.state = [os.urandom(self._BUFFER), 0, pid]
        pos = state[1]
        state[1] = pos + n
        return state[0][pos:pos + n]  # type: ignore[no-any-return]


class _SeededSource:
    """Deterministic bytes (numpy's PCG64) — predictable, for tests only."""

    secure = False

    def __init__(self, seed: int) -> None:
        self._gen = np.random.Generator(np.random.PCG64(seed))

    def bytes(self, n: int) -> bytes:
        return self._gen.bytes(n)


_SECURE = _OsSource()
_source: contextvars.ContextVar[_OsSource | _SeededSource] = contextvars.ContextVar(
    "statcurator_rng_source", default=_SECURE)


def random_bytes(n: int) -> bytes:
    """``n`` random bytes from the current source (secure unless inside :func:`seeded`).

    >>> len(random_bytes(5))
    5
    """
    if n < 0:
        raise InvalidParameterError(f"cannot draw {n} bytes", remedy="ask for n >= 0 bytes")
    return _source.get().bytes(n) if n else b""


def words64(n: int) -> np.ndarray:
    """``n`` independent uniform 64-bit words as a (read-only) ``uint64`` array.

    >>> words64(4).dtype
    dtype('uint64')
    """
    return np.frombuffer(random_bytes(8 * n), dtype=np.uint64)


def words32(n: int) -> np.ndarray:
    """``n`` independent uniform 32-bit words as a (read-only) ``uint32`` array.

    >>> words32(2).shape
    (2,)
    """
    return np.frombuffer(random_bytes(4 * n), dtype=np.uint32)


def random_bits(n: int) -> np.ndarray:
    """``n`` independent fair coin flips as a boolean array.

    >>> random_bits(10).dtype
    dtype('bool')
    """
    raw = np.frombuffer(random_bytes((n + 7) // 8), dtype=np.uint8)
    return np.unpackbits(raw)[:n].astype(bool)


def randbits(k: int) -> int:
    """A uniform integer in ``[0, 2**k)``.

    >>> 0 <= randbits(100) < 2**100
    True
    """
    if k <= 0:
        return 0
    n = (k + 7) // 8
    return int.from_bytes(_source.get().bytes(n), "little") >> (8 * n - k)


def randbelow(n: int) -> int:
    """A uniform integer in ``[0, n)``, exactly (rejection sampling, no modulo bias).

    >>> randbelow(1)
    0
    >>> 0 <= randbelow(10**30) < 10**30
    True
    """
    if n <= 0:
        raise InvalidParameterError(f"randbelow needs n >= 1, got {n}", remedy="pass n >= 1")
    k = (n - 1).bit_length()
    while True:
        r = randbits(k)
        if r < n:
            return r


def is_seeded() -> bool:
    """True inside a :func:`seeded` block (the noise is then *not* secure).

    >>> is_seeded()
    False
    """
    return not _source.get().secure


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Deterministic randomness for tests and reproducible examples; **never** for releases.

    Inside the block, every sampler in the current context (thread / asyncio task) draws from
    a PCG64 generator seeded with ``seed``; on exit the secure source is restored. Entering
    the block warns with :class:`~statcurator.core.errors.PrivacyWarning`.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always")
    ...     with seeded(1):
    ...         pass
    >>> caught[0].category.__name__
    'PrivacyWarning'
    """
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise InvalidParameterError(f"the seed must be a non-negative integer, got {seed!r}",
                                    remedy="pass seeded(0), seeded(42), ...")
    warnings.warn("statcurator noise is seeded (deterministic): use this only in tests and "
                  "examples, never to protect a real release", PrivacyWarning, stacklevel=3)
    token = _source.set(_SeededSource(int(seed)))
    try:
        yield
    finally:
        _source.reset(token)
