"""Per-analyst request rate limits: a token bucket for every authenticated identity.

A query that charges no budget still costs the server work: a dry run compiles the query, a
stored answer is read from the ledger, a query of public keys only reads no data and is
free. Without a limit one analyst's loop of free requests takes the workers from everyone
else. Each identity (analyst or curator) gets ``server.requests_per_second`` on average and
up to ``server.burst`` at once; a request beyond that is refused with ``429 Too Many
Requests`` and a ``Retry-After`` header *before* anything runs, so it charges nothing and
records nothing. Requests without a valid token are refused (401) before they reach a
bucket, so only the analysts the curator created ever hold one: the table of buckets cannot
be grown from outside.

One server has one set of buckets, however many worker processes it runs: ``statcurator
serve`` with ``server.workers`` > 1 creates a bucket file (:func:`bucket_file`, in a private
temporary folder, removed when the server stops) that every worker maps
(:class:`SharedBuckets`), so an analyst whose requests are spread over N workers still gets
the rate once, not N times. A bucket is updated under the file's lock. An identity for
which the table has no room (more than :data:`SLOTS` identities, or ``_PROBES`` taken slots
where its bucket belongs), or a file that cannot be locked (a file system without locks),
falls back to the worker's own bucket. Buckets are per server: several servers (on several
machines, sharing a PostgreSQL ledger) each have their own.

Requests without a token, or with a wrong one, reach no bucket: a flood of them is refused
with 401 at the cost of one indexed lookup each, and is not rate-limited here (a reverse
proxy's per-address limit is the place for that).
"""

from __future__ import annotations

import hashlib
import math
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..core.errors import StatcuratorError

try:  # POSIX: the bucket file's lock
    import fcntl
except ImportError:  # pragma: no cover - Windows: each worker keeps its own buckets
    fcntl = None  # type: ignore[assignment]

__all__ = ["RateLimiter", "TooManyRequests", "SharedBuckets", "bucket_file", "SLOTS",
           "BUCKETS_ENV"]


#: the longest wait a refusal names (seconds): a day, whatever the configured rate
_LONGEST_WAIT = 86_400.0


class TooManyRequests(StatcuratorError):
    """The caller made more requests than its rate limit allows (HTTP 429); nothing ran.

    ``retry_after`` is how many whole seconds until the next request is admitted (at least
    1: the ``Retry-After`` header's value)."""

    def __init__(self, message: str, *, remedy: str | None = None,
                 retry_after: int = 1) -> None:
        super().__init__(message, remedy=remedy)
        self.retry_after = retry_after


class RateLimiter:
    """Token buckets, one per identity: ``rate`` requests per second on average, at most
    ``burst`` at once (``rate`` 0: no limit). Thread-safe (the app's routes run on a thread
    pool). With ``shared`` (a :class:`SharedBuckets`), the buckets are the ones every
    process mapping the same file sees.

    The clock must be the same for every process that shares buckets: ``time.monotonic``
    (the system's monotonic clock) by default."""

    def __init__(self, rate: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 shared: SharedBuckets | None = None) -> None:
        if not (math.isfinite(rate) and rate >= 0) or burst < 1:
            raise ValueError(f"a rate limit needs rate >= 0 and burst >= 1, got {rate}, {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self.shared = shared
        self._clock = clock
        self._lock = threading.Lock()
        #: identity -> (requests left in the bucket, when it was last filled); with
        #: ``shared``, only the identities its full table had no room for
        self._buckets: dict[str, tuple[float, float]] = {}

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def admit(self, identity: str) -> float:
        """Take one request from ``identity``'s bucket: 0.0 when admitted, else the seconds
        until it would be (nothing is taken then)."""
        if not self.enabled:
            return 0.0
        with self._lock:
            if self.shared is not None:
                wait = self.shared.update(identity, self._take)
                if wait is not None:
                    return wait
            state, wait = self._take(self._buckets.get(identity))
            self._buckets[identity] = state
            return wait

    def _take(self, state: tuple[float, float] | None) -> tuple[tuple[float, float], float]:
        """A bucket after one request (``state``: None for a new, full bucket), and the wait
        (0.0: admitted)."""
        now = self._clock()
        left, since = state if state is not None else (float(self.burst), now)
        left = min(float(self.burst), left + max(now - since, 0.0) * self.rate)
        if left >= 1.0:
            return (left - 1.0, now), 0.0
        return (left, now), min((1.0 - left) / self.rate, _LONGEST_WAIT)

    def check(self, identity: str) -> None:
        """:meth:`admit`, raising :class:`TooManyRequests` when the request must wait."""
        wait = self.admit(identity)
        if wait > 0:
            seconds = max(1, math.ceil(wait))
            raise TooManyRequests(
                f"{identity!r} made more than {self.burst} requests at once or more than "
                f"{self.rate:g} per second on average; this request was not run and charged "
                "nothing",
                remedy=f"wait {seconds} s (the Retry-After header) and send it again, spread "
                       "requests out, or ask the curator to raise server.requests_per_second "
                       "or server.burst",
                retry_after=seconds)


# -- one set of buckets for all the worker processes of a server ------------------------------

#: the environment variable that names the bucket file to a worker process
BUCKETS_ENV = "STATCURATOR_RATE_BUCKETS"
#: identities a bucket file holds (24 bytes each: 1.5 MiB)
SLOTS = 65_536
#: the most slots an identity's bucket is looked for in (open addressing): a table full of
#: other identities costs this many reads under the lock, not the whole table
_PROBES = 64
_MAGIC = b"scbucket"
_HEADER = struct.Struct("<8sQ")  # magic, slots
_SLOT = struct.Struct("<Qdd")  # identity's hash (0: free), requests left, when filled


def bucket_file(folder: str | os.PathLike[str], slots: int = SLOTS) -> Path:
    """Create an empty bucket file in ``folder`` (readable by this user only); its path.

    >>> import tempfile
    >>> path = bucket_file(tempfile.mkdtemp(), slots=4)
    >>> path.stat().st_size, oct(path.stat().st_mode & 0o777)
    (112, '0o600')
    """
    path = Path(folder) / "rate-buckets"
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.ftruncate(fd, _HEADER.size + slots * _SLOT.size)
        os.pwrite(fd, _HEADER.pack(_MAGIC, slots), 0)
    finally:
        os.close(fd)
    return path


class SharedBuckets:
    """The buckets in a file made by :func:`bucket_file`, shared by every process that maps
    it: a table of identities' hashes (open addressing), each bucket read and written under
    the file's exclusive lock (``flock``). A process that forks opens the file again in the
    child (a lock taken through an inherited descriptor would be the parent's).

    >>> import tempfile
    >>> path = bucket_file(tempfile.mkdtemp(), slots=4)
    >>> a = RateLimiter(1e-3, 2, shared=SharedBuckets(path))
    >>> b = RateLimiter(1e-3, 2, shared=SharedBuckets(path))   # another worker
    >>> a.admit("alice"), b.admit("alice"), a.admit("alice") > 0, b.admit("bob")
    (0.0, 0.0, True, 0.0)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if fcntl is None:  # pragma: no cover - Windows
            raise OSError("shared rate-limit buckets need POSIX file locks (fcntl)")
        self.path = Path(path)
        self._pid = -1
        self._open()

    def _open(self) -> None:
        fd = os.open(self.path, os.O_RDWR)
        try:
            size = os.fstat(fd).st_size
            table = mmap.mmap(fd, size) if size >= _HEADER.size else None
        except BaseException:
            os.close(fd)
            raise
        magic, slots = _HEADER.unpack_from(table, 0) if table is not None else (b"", 0)
        if magic != _MAGIC or slots < 1 or size != _HEADER.size + slots * _SLOT.size:
            if table is not None:
                table.close()
            os.close(fd)
            raise ValueError(f"{self.path} is not a statcurator rate-limit bucket file")
        self._fd, self._table, self._slots, self._pid = fd, table, int(slots), os.getpid()

    def update(self, identity: str,
               take: Callable[[tuple[float, float] | None], tuple[tuple[float, float], float]]
               ) -> float | None:
        """Replace ``identity``'s bucket by ``take(bucket)[0]`` (None: it has none yet) under
        the lock; returns ``take(...)[1]``, or None when the table has no room for it near
        its place, or the file cannot be locked (a file system without locks, ENOLCK): the
        caller then uses its own bucket."""
        if os.getpid() != self._pid:  # a forked child: its own descriptor, its own lock
            self._open()
        key = int.from_bytes(hashlib.blake2b(identity.encode("utf-8", "surrogatepass"),
                                             digest_size=8).digest(), "little") or 1
        table, slots = self._table, self._slots
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError:
            return None
        try:
            for probe in range(min(slots, _PROBES)):
                at = _HEADER.size + (key + probe) % slots * _SLOT.size
                found, left, since = _SLOT.unpack_from(table, at)
                if found == key or found == 0:
                    state, wait = take((left, since) if found == key else None)
                    _SLOT.pack_into(table, at, key, *state)
                    return wait
            return None
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._pid == os.getpid():
            self._table.close()
            os.close(self._fd)
