"""File-system calls with every write checked: short writes completed, syncs that report writeback errors, an
atomic swap of two paths, and the one temp-then-replace helper."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import tempfile
from pathlib import Path

from generator.files.paths import resolve_output

# Every temporary or retired path gpugen creates next to an output starts with `.<output name>` + this.
TEMP_MARK = ".gpugen-"


def describe_os_error(error: OSError) -> str:
    """`PATH: reason` in one line, e.g. `rendered: No space left on device`."""
    where = str(error.filename) if error.filename is not None else ""
    name = os.path.basename(where)
    if name.startswith(".") and TEMP_MARK in name:  # a staging copy: name the output it stands for
        where = os.path.join(os.path.dirname(where), name[1:].split(TEMP_MARK)[0])
    reason = error.strerror or str(error)
    return f"{where}: {reason}" if where else reason


def write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked (a full disk, a signal): write the rest or fail, never truncate."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def write_new(path: Path | str, content: bytes, mode: int = 0o644, sync: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        write_all(fd, content)
        if sync:
            os.fsync(fd)
    except OSError as error:
        error.filename = error.filename or str(path)
        raise
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories; the rename itself is still atomic
    finally:
        os.close(fd)


_libc = ctypes.CDLL(None, use_errno=True)
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def syncfs(directory: Path) -> None:
    """Flush every file written under `directory`'s file system at once (one syncfs, not 8,000 fsyncs).
    Since Linux 5.8 syncfs reports writeback errors (ENOSPC, EIO) that write() did not."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        syncfs = getattr(_libc, "syncfs", None)
        if syncfs is None:
            os.sync()
        elif syncfs(fd) != 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code), str(directory))
    finally:
        os.close(fd)


def exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (renameat2 RENAME_EXCHANGE). False when the OS or file system cannot."""
    renameat2 = getattr(_libc, "renameat2", None)
    if renameat2 is None:
        return False
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(code, os.strerror(code), str(b))


def staging_prefix(target: Path, what: str) -> str:
    return f".{target.name}{TEMP_MARK}{what}-"


def write_file_atomically(path: Path, content: bytes, mode: int | None = None) -> None:
    """Replace the file at `path` (through symlinks) with `content`: a temporary file in the same directory,
    every write checked and fsynced, then renamed over the target. On any failure the temporary file is
    removed and the target is untouched. `mode` defaults to the target's current mode (0644 when new)."""
    target = resolve_output(path)
    try:
        current = os.stat(target)
    except FileNotFoundError:
        current = None
    if mode is None:
        mode = stat.S_IMODE(current.st_mode) if current else 0o644
    fd, staging = tempfile.mkstemp(prefix=staging_prefix(target, "tmp"), dir=target.parent)
    try:
        try:
            write_all(fd, content)
            os.fchmod(fd, mode)
            if current is not None and (current.st_uid, current.st_gid) != (os.getuid(), os.getgid()):
                with contextlib.suppress(PermissionError):
                    os.fchown(fd, current.st_uid, current.st_gid)  # keep the owner where allowed
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        raise
    fsync_directory(target.parent)
