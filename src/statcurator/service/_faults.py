"""A test-only fault hook: kill the server process at a chosen point of a release.

Enabled only when the environment variable ``STATCURATOR_TEST_FAULT`` is set, by whoever
starts the server (the fault tests), to one of:

* ``before-charge`` — SIGKILL as the ledger is asked to charge, before the debit commits;
* ``after-charge`` — SIGKILL right after the debit committed, before any noise is drawn;
* ``after-store`` — SIGKILL as soon as the answer was handed to the ledger (its writer thread
  may not have written it yet: it is then lost, never replaced by fresh noise);
* ``after-answer`` — SIGKILL after the answer is in the ledger (the service's ``flush``),
  before the response is sent.

The hook wraps the service's ledger object (its ``charge`` / ``store_answer`` / ``flush``);
without the variable nothing is wrapped.
"""

from __future__ import annotations

import os
import signal
from typing import Any

__all__ = ["FAULT_ENV", "install_fault", "POINTS"]

FAULT_ENV = "STATCURATOR_TEST_FAULT"
POINTS = ("before-charge", "after-charge", "after-store", "after-answer")


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def install_fault(service: Any, point: str | None = None) -> None:
    point = point or os.environ.get(FAULT_ENV)
    if not point:
        return
    if point not in POINTS:
        raise ValueError(f"{FAULT_ENV}={point!r}: use one of {POINTS}")
    led = service.curator.ledger
    charge, store, flush = led.charge, led.store_answer, led.flush

    def charging(*args: Any, **kwargs: Any) -> Any:
        if point == "before-charge":
            _die()
        c = charge(*args, **kwargs)
        if point == "after-charge" and not c.replayed:
            _die()
        return c

    def storing(*args: Any, **kwargs: Any) -> Any:
        store(*args, **kwargs)
        if point == "after-store":
            _die()

    def flushing() -> None:
        flush()
        if point == "after-answer":
            _die()

    led.charge = charging
    led.store_answer = storing
    led.flush = flushing
