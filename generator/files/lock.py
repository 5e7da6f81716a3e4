"""The lock two gpugen runs on the same outputs take, and the removal of what a killed run left behind."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from generator.errors import OutputRefused
from generator.files.fs import TEMP_MARK

LOCK_TIMEOUT_S = float(os.environ.get("GPUGEN_LOCK_TIMEOUT", "60"))


@contextmanager
def output_lock(paths: list[Path], shared: bool = False, timeout: float | None = None) -> Iterator[None]:
    """flock the directories holding `paths` (exclusive to write, shared to read), in a fixed order so two
    runs cannot deadlock. A killed holder releases its lock with its last file descriptor. Directories that
    do not exist yet are created when writing; a reader skips them (there is nothing to read)."""
    timeout = LOCK_TIMEOUT_S if timeout is None else timeout
    parents = sorted({p.parent for p in paths})
    held: list[int] = []
    try:
        for parent in parents:
            if not shared:
                parent.mkdir(parents=True, exist_ok=True)
            elif not parent.is_dir():
                continue
            fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            held.append(fd)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise OutputRefused(f"{parent}: another gpugen run has been writing here for "
                                            f"{timeout:.0f} s (lock held); try again") from None
                    time.sleep(0.05)
        yield
    finally:
        for fd in held:
            os.close(fd)


def remove_leftovers(target: Path) -> None:
    """Remove what a killed gpugen left next to `target` (staging and retired copies). Call under the lock."""
    parent = target.parent
    prefix = f".{target.name}{TEMP_MARK}"
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(prefix):
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
