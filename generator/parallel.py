"""Two computations at once, the second in a forked child on the other core.

A large render spends most of its time emitting YAML, one object at a time, on one core. Forking shares the built
objects with the child without copying them; only the child's result (bytes) comes back, pickled through a pipe.
For a pure computation the outcome is the one a single process gets: when the child fails or is killed, the
second computation is done again here, and raises here what it raised there. Writing files is not done twice
(generator/files/staging.py: retry=False): the child's error is raised here as it was, an OSError such as a full
disk, which the render reports, leaving its outputs as they were.
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
from collections.abc import Callable
from typing import TypeVar

First = TypeVar("First")
Second = TypeVar("Second")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def both(first: Callable[[], First], second: Callable[[], Second], retry: bool = True) -> tuple[First, Second]:
    """first() here and second() in a child process, side by side; in this process one after the other where
    there is one core or no fork. When second() fails in the child: done again here (retry), else its exception
    raised here (ChildProcessError, an OSError, if it cannot be sent or the child was killed)."""
    if not hasattr(os, "fork") or _cores() < 2:
        return first(), second()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the parent's cleanup or flushes its buffers
        code = 1
        try:
            # A collection would touch every object inherited from the parent, copying its pages.
            gc.disable()
            os.close(read_end)
            try:
                data = pickle.dumps((True, second()), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as error:  # noqa: BLE001 - sent to the parent, which decides
                try:
                    data = pickle.dumps((False, error), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:  # noqa: BLE001 - an error that does not pickle: the parent still learns it failed
                    data = pickle.dumps((False, None))
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    reaped = False
    with os.fdopen(read_end, "rb") as pipe:
        try:
            here = first()
            data = pipe.read()
            _, status = os.waitpid(pid, 0)
            reaped = True
        finally:
            if not reaped:  # first() raised, or this process was interrupted: stop the child by its id
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
    ok, result = pickle.loads(data) if data and os.waitstatus_to_exitcode(status) == 0 else (False, None)
    if ok:
        return here, result
    if retry:
        return here, second()
    if isinstance(result, BaseException):
        raise result
    raise ChildProcessError(f"the second process ended with status {os.waitstatus_to_exitcode(status)} "
                            "before it could report")
