"""Stage every output beside it, sync once, swap all in, and undo the swaps already made on any error."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from generator import parallel
from generator.errors import NotOurDirectory
from generator.files.fs import exchange, fsync_directory, staging_prefix, syncfs, write_all, write_new
from generator.files.paths import resolve_output
from generator.files.scan import Changes, Existing, Files, identity, read_existing, scan_tree

# From this many files a tree is written by two processes (generator/parallel.py).
PARALLEL_FROM = 4000


class Staged:
    """What `stage` made: how to swap it in, undo that, and clean up."""

    def __init__(self, commit: Callable[[], None], undo: Callable[[], None], cleanup: Callable[[], None],
                 discard: Callable[[], None]):
        self.commit, self.undo, self.cleanup, self.discard = commit, undo, cleanup, discard


@dataclass
class PendingTree:
    """A directory that should hold exactly `files`."""

    directory: Path  # resolved
    files: Files
    existing: dict[str, Existing]
    strange: list[str]
    changes: Changes

    @property
    def label(self) -> str:
        return f"{self.directory}/"

    @property
    def count(self) -> int:
        return len(self.files)

    def stale_lines(self) -> list[str]:
        return self.changes.lines(self.directory)

    def check_ours(self) -> None:
        foreign = self.strange + [path for path, found in self.existing.items() if not found.ours]
        if foreign:
            listed = ", ".join(sorted(foreign)[:5]) + (" ..." if len(foreign) > 5 else "")
            raise NotOurDirectory(
                f"refusing to replace {self.directory}: it holds files gpugen did not write ({listed})")

    def stage(self) -> Staged | None:
        if not self.changes:
            return None
        directory = self.directory
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix(directory, "new"), dir=directory.parent))
        try:
            items = list(self.files.items())
            if len(items) < PARALLEL_FROM:
                self._write(directory, staging, items)
            else:  # half the files from a second process, on the other core
                half = len(items) // 2
                parallel.both(lambda: self._write(directory, staging, items[:half]),
                              lambda: self._write(directory, staging, items[half:]), retry=False)
            os.chmod(staging, 0o755)  # mkdtemp makes it 0700
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        existed = directory.exists()
        state = {"exchanged": False}

        def commit() -> None:
            if existed and exchange(staging, directory):
                state["exchanged"] = True  # staging now holds the old tree
            elif existed:
                # No RENAME_EXCHANGE: two renames, the old tree parked next to it for the short gap.
                retired = staging.with_name(staging_prefix(directory, "old") + staging.name.rsplit("-", 1)[-1])
                os.rename(directory, retired)
                try:
                    os.rename(staging, directory)
                except OSError:
                    os.rename(retired, directory)
                    raise
                os.rename(retired, staging)
                state["exchanged"] = True
            else:
                os.rename(staging, directory)

        def undo() -> None:
            if state["exchanged"]:
                if not exchange(staging, directory):
                    retired = staging.with_name(staging.name + "-undo")
                    os.rename(directory, retired)
                    os.rename(staging, directory)
                    os.rename(retired, staging)
            else:
                os.rename(directory, staging)

        def cleanup() -> None:
            shutil.rmtree(staging, ignore_errors=True)  # the old tree; a leftover is removed by the next run

        return Staged(commit, undo, cleanup, cleanup)

    def _write(self, directory: Path, staging: Path, items: list[tuple[str, bytes]]) -> None:
        """Each file into `staging`: hard-linked from `directory` when unchanged, else written."""
        # Strings, not Paths: at national scale pathlib's joins cost more than the writes.
        root = str(staging)
        made: set[str] = set()
        for path, content in items:
            target = f"{root}/{path}"
            parent = target.rpartition("/")[0]
            if parent not in made:
                os.makedirs(parent, exist_ok=True)  # the other process may make it too
                made.add(parent)
            found = self.existing.get(path)
            if found is not None and found.same and self._link(directory / path, Path(target), found):
                continue
            write_new(target, content)

    @staticmethod
    def _link(source: Path, target: Path, found: Existing) -> bool:
        """Hard-link an unchanged file, only if it is still the file that was read."""
        try:
            if identity(os.lstat(source)) != found.identity:
                return False
            os.link(source, target, follow_symlinks=False)
            return True
        except OSError:  # gone, or a file system without hard links: write it instead
            return False


def pending_tree(files: Files, directory: Path) -> PendingTree:
    directory = resolve_output(directory)
    existing, strange = scan_tree(directory, files)
    changes = Changes(
        added=sorted(set(files) - set(existing)),
        changed=sorted(path for path, found in existing.items() if path in files and not found.same),
        removed=sorted(set(existing) - set(files)),
    )
    changes.removed = sorted(changes.removed + strange)
    return PendingTree(directory, files, existing, strange, changes)


@dataclass
class PendingFile:
    """One generated file outside the trees (the users' docs page)."""

    path: Path  # resolved
    content: bytes
    existing: Existing | None
    strange: bool  # something other than a regular file is there
    changes: Changes

    @property
    def label(self) -> str:
        return str(self.path)

    count = 1

    def stale_lines(self) -> list[str]:
        return self.changes.lines(self.path.parent)

    def check_ours(self) -> None:
        if self.strange or (self.existing is not None and not self.existing.ours):
            raise NotOurDirectory(f"refusing to replace {self.path}: gpugen did not write it")

    def stage(self) -> Staged | None:
        if not self.changes:
            return None
        target = self.path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=staging_prefix(target, "tmp"), dir=target.parent)
        staging = Path(name)
        try:
            try:
                write_all(fd, self.content)
                os.fchmod(fd, 0o644)
            finally:
                os.close(fd)
        except BaseException:
            staging.unlink(missing_ok=True)
            raise
        # Keep the old page until the swap is known to have happened everywhere (for undo).
        retired = target.with_name(staging_prefix(target, "old") + staging.name.rsplit("-", 1)[-1])
        existed = self.existing is not None

        def commit() -> None:
            if existed:
                try:
                    os.link(target, retired)
                except OSError:  # no hard links here: a copy serves for undo
                    shutil.copyfile(target, retired)
            os.replace(staging, target)

        def undo() -> None:
            if existed:
                os.replace(retired, target)
            else:
                target.unlink(missing_ok=True)

        def cleanup() -> None:
            retired.unlink(missing_ok=True)

        def discard() -> None:
            staging.unlink(missing_ok=True)
            retired.unlink(missing_ok=True)

        return Staged(commit, undo, cleanup, discard)


def pending_file(content: bytes, path: Path) -> PendingFile:
    path = resolve_output(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return PendingFile(path, content, None, False, Changes(added=[path.name]))
    if not stat.S_ISREG(st.st_mode):
        return PendingFile(path, content, None, True, Changes(changed=[path.name]))
    found = read_existing(str(path), st, content)
    return PendingFile(path, content, found, False, Changes() if found.same else Changes(changed=[path.name]))


Pending = PendingTree | PendingFile


def apply_outputs(outputs: list[Pending]) -> list[Changes]:
    """Replace every output that changed, all or nothing: stage all, sync, swap all; on an error, swaps
    already made are undone and staging copies removed. Call under `output_lock`, after check_ours()."""
    staged: list[Staged] = []
    committed: list[Staged] = []
    try:
        for output in outputs:
            output.check_ours()
        for output in outputs:
            one = output.stage()
            if one is not None:
                staged.append(one)
        if staged:
            synced: set[int] = set()
            for directory in sorted({_parent(output) for output in outputs}):
                device = os.stat(directory).st_dev
                if device not in synced:
                    syncfs(directory)
                    synced.add(device)
        for one in staged:
            one.commit()
            committed.append(one)
    except BaseException:
        for one in reversed(committed):
            with contextlib.suppress(OSError):
                one.undo()
        for one in staged:
            one.discard()
        raise
    for one in staged:
        one.cleanup()
    for directory in sorted({_parent(output) for output in outputs}):
        fsync_directory(directory)
    return [output.changes for output in outputs]


def _parent(output: Pending) -> Path:
    return (output.directory if isinstance(output, PendingTree) else output.path).parent
