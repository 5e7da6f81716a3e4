"""Every wait of the simulation and the tests: it follows progress, not the clock.

Machines of one kind differ several-fold in speed, and a busy one is slower still, so no wait may be a fixed
wall-clock limit tuned on one machine. A wait here names how long the thing *usually* takes on a healthy, fast
machine, and fails only

- when nothing it watches has moved for STALL seconds (a `progress` snapshot, where the caller has one: Argo CD's
  Applications, the objects being counted down), saying what was last seen; or
- at its ceiling, SLACK times its usual duration, far above any healthy run on a machine several times slower,
  saying what was still moving.

So a verdict never depends on the machine's speed, only the duration does. GPUGEN_WAIT_SLACK and
GPUGEN_WAIT_STALL widen both (a machine slower still, a debugger attached); they never need narrowing.

Single requests and commands are bounded the same way: `ceiling(usual)` is the bound to hand to `timeout=`.
`tests/unit/test_waits.py` scans simulation/ and tests/ for bounds that do not come from here.
"""
from __future__ import annotations

import os
import time
from typing import Any
from collections.abc import Callable

# A ceiling is this many times the usual duration on a fast machine: a machine four times slower, busy on the
# other core too, still finishes with room to spare.
SLACK = float(os.environ.get("GPUGEN_WAIT_SLACK") or 10)
# Seconds without any change in what a wait watches before it gives up: far above the longest quiet spell of a
# healthy run (a controller's resync, a cleanup schedule's minute), even on a slow machine.
STALL = float(os.environ.get("GPUGEN_WAIT_STALL") or 300)
# One request to an API server: the server itself ends a request after 60 s (--request-timeout); a client bound
# above that only guards against a server that stopped answering at all.
REQUEST = 300.0
# One attempt of a probe that a wait repeats (a readiness endpoint, a port): a slow answer is a failed attempt,
# and the wait around it decides.
PROBE = 5.0
# How long a process told to stop (SIGTERM, SIGINT) may take before it is killed. Stopping is the point, so no
# verdict depends on it; the grace only lets a process flush its log and remove what it made.
STOP_GRACE = 20.0

_UNSEEN = object()


def ceiling(usual: float) -> float:
    """The hard bound of something that takes `usual` seconds on a healthy, fast machine."""
    return usual * SLACK


def wait_for(check: Callable[[], Any], what: str, usual: float, *, progress: Callable[[], Any] | None = None,
             interval: float = 0.3, pending: tuple[type[BaseException], ...] = (),
             alive: Callable[[], Any] | None = None, describe: Callable[[], str] | None = None,
             error: Callable[[str], BaseException] = AssertionError) -> Any:
    """check()'s first truthy value.

    usual: seconds `what` takes on a healthy, fast machine; the wait ends at ceiling(usual).
    progress: a snapshot of what the wait watches (comparable with ==); when it stays the same for STALL seconds
        the wait ends early, since nothing is moving.
    pending: exceptions of check() that mean "not yet" (a server still starting); the last is reported.
    alive: called every round; raises when a process the wait depends on has died (no point waiting on).
    describe: the state to report on failure (default: check()'s last value, or the last pending error).
    error: the exception type raised, with one message.
    """
    start = last_change = time.monotonic()
    bound = ceiling(usual)
    seen: Any = _UNSEEN
    last: Any = None
    while True:
        if alive is not None:
            alive()
        try:
            last = check()
            if last:
                return last
        except pending as e:
            last = e
        now = time.monotonic()
        if progress is not None:
            snapshot = progress()
            if snapshot != seen:
                seen, last_change = snapshot, now
        if now - start > bound:
            moved = f"; last moved {now - last_change:.0f}s ago" if progress is not None else ""
            raise error(f"{what}: not done after {now - start:.0f}s, its ceiling ({SLACK:g} x the usual "
                        f"{usual:g}s{moved})\n{_state(describe, last)}")
        if progress is not None and now - last_change > STALL:
            raise error(f"{what}: nothing moved for {now - last_change:.0f}s (after {now - start:.0f}s; "
                        f"GPUGEN_WAIT_STALL={STALL:g})\n{_state(describe, last)}")
        time.sleep(interval)


def _state(describe: Callable[[], str] | None, last: Any) -> str:
    error = f"\nlast error: {last}" if isinstance(last, BaseException) else ""
    if describe is not None:
        try:
            return describe() + error
        except Exception as e:  # noqa: BLE001 - the state could not be read: say so, keep the wait's own message
            return f"(state unavailable: {e}; last: {last!r})"
    return f"last: {last!r}"
