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

The buckets live in each worker process: with ``server.workers = N`` an analyst whose
requests are spread over the workers may make up to N times the rate.

>>> clock = [0.0]
>>> limits = RateLimiter(rate=2, burst=3, clock=lambda: clock[0])
>>> [limits.admit("alice") for _ in range(4)]          # the burst, then the fourth waits
[0.0, 0.0, 0.0, 0.5]
>>> limits.admit("bob")                                # every identity has its own bucket
0.0
>>> clock[0] = 0.5; limits.admit("alice")              # half a second refills one request
0.0
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from ..core.errors import StatcuratorError

__all__ = ["RateLimiter", "TooManyRequests"]


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
    pool)."""

    def __init__(self, rate: float, burst: int, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if not (math.isfinite(rate) and rate >= 0) or burst < 1:
            raise ValueError(f"a rate limit needs rate >= 0 and burst >= 1, got {rate}, {burst}")
        self.rate = float(rate)
        self.burst = int(burst)
        self._clock = clock
        self._lock = threading.Lock()
        #: identity -> (requests left in the bucket, when it was last filled)
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
            now = self._clock()
            left, since = self._buckets.get(identity, (float(self.burst), now))
            left = min(float(self.burst), left + max(now - since, 0.0) * self.rate)
            if left >= 1.0:
                self._buckets[identity] = (left - 1.0, now)
                return 0.0
            self._buckets[identity] = (left, now)
            return min((1.0 - left) / self.rate, _LONGEST_WAIT)

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
