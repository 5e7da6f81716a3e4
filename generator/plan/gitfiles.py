"""Read a directory's files as they are at a git revision (the base of a plan)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from generator.errors import GitError

Files = dict[str, bytes]


def _git(cwd: Path, *args: str, stdin: bytes | None = None) -> bytes:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, check=False)
    except FileNotFoundError:
        # Raised for a missing working directory too, not only for a missing git.
        raise GitError("git is not installed" if shutil.which("git") is None
                       else f"directory {cwd} does not exist") from None
    if result.returncode != 0:
        raise GitError(result.stderr.decode(errors="replace").strip() or f"git {' '.join(args)} failed")
    return result.stdout


def files_at(ref: str, directory: Path) -> Files:
    """{path relative to directory: content} of every file under `directory` at `ref`; {} if it did not exist."""
    directory = directory.resolve()
    probe = directory
    while not probe.is_dir() and probe != probe.parent:  # the directory may exist only at `ref`
        probe = probe.parent
    top = Path(_git(probe, "rev-parse", "--show-toplevel").decode().strip())
    prefix = directory.relative_to(top).as_posix()
    _git(top, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    listing = _git(top, "ls-tree", "-r", "-z", "--name-only", ref, "--", prefix).split(b"\0")
    paths = [p.decode() for p in listing if p]
    if not paths:
        return {}
    batch = _git(top, "cat-file", "--batch", stdin="".join(f"{ref}:{p}\n" for p in paths).encode())
    files, offset = {}, 0
    for path in paths:
        header_end = batch.index(b"\n", offset)
        size = int(batch[offset:header_end].split()[2])
        start = header_end + 1
        files[path[len(prefix) + 1:] if prefix != "." else path] = batch[start:start + size]
        offset = start + size + 1
    return files
