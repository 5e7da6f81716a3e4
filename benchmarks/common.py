"""What every benchmark shares: whole processes timed with their peak memory and CPU, medians and spreads, the
machine's conditions (its bare-import time, its load), the renderer, the file-system snapshot, and the rewrite of a
benchmark's own section of benchmarks/README.md."""

from __future__ import annotations

import collections
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


REPO = HERE.parent


PYTHON = sys.executable


README = HERE / "README.md"

PAGE = os.sysconf("SC_PAGE_SIZE")
TICKS = os.sysconf("SC_CLK_TCK")


def resident_mb(pid: int) -> float | None:
    """The process's resident memory (RSS) in MB (10^6 bytes), from /proc; None once it is gone."""
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE / 1e6
    except (OSError, IndexError, ValueError):
        return None


def cpu_seconds(pid: int) -> float | None:
    """The process's CPU time so far (user + system), from /proc; None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS
    except (OSError, IndexError, ValueError):
        return None


class MemorySampler(threading.Thread):
    """Every 0.5 s, `sample()` (name -> resident MB): the peak per name and the peak of their sum."""

    def __init__(self, sample: Callable[[], dict[str, float]]):
        super().__init__(daemon=True)
        self.sample = sample
        self.peak: dict[str, float] = collections.defaultdict(float)
        self.peak_total = 0.0
        self._done = threading.Event()

    def run(self):
        while not self._done.is_set():
            by_name = self.sample()
            self.peak_total = max(self.peak_total, sum(by_name.values()))
            for name, mb in by_name.items():
                self.peak[name] = max(self.peak[name], mb)
            self._done.wait(0.5)

    def finish(self):
        self._done.set()
        self.join()


@dataclass
class Run:
    seconds: float
    max_rss_mb: float  # MB = 10^6 bytes; ru_maxrss is KiB on Linux
    returncode: int
    stdout: str = ""
    stderr: str = ""


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, stdout_path: Path | None = None,
        check: bool = True) -> Run:
    """Spawn, reap with os.wait4, return wall time and the child's peak RSS. Output goes to files, not pipes,
    so that reading it neither blocks the child nor adds to the time."""
    with tempfile.TemporaryFile() as err, (open(stdout_path, "wb") if stdout_path else tempfile.TemporaryFile()) as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # keeps Popen from reaping it again
        stdout = ""
        if not stdout_path:
            out.seek(0)
            stdout = out.read().decode(errors="replace")
        err.seek(0)
        stderr = err.read().decode(errors="replace")
    result = Run(seconds, usage.ru_maxrss * 1024 / 1e6, proc.returncode, stdout, stderr)
    if check and result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stderr[-3000:]}")
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


# The libraries' bare import: a figure of the machine's speed that every generated table states beside its own, so
# that tables made on a faster or busier machine can be read against each other.
BARE_IMPORT = "import pydantic, yaml, click"


def bare_import(reps: int = 5) -> float:
    """Seconds of BARE_IMPORT as a whole process, median of `reps`."""
    return median([run([PYTHON, "-c", BARE_IMPORT], cwd=REPO).seconds for _ in range(reps)])


def load_average(values: tuple[float, ...] | None = None) -> str:
    """`values` (os.getloadavg(), taken when a run began) or the load average now, as text."""
    return " ".join(f"{x:.2f}" for x in (values or os.getloadavg()))


def conditions(load_at_start: tuple[float, ...], reps: int = 5) -> str:
    """The line that opens every generated table: cores, load average when the run began (os.getloadavg() then),
    and the bare import measured now. No date and no revision: git dates and names the commit that wrote it."""
    return (f"Conditions: {os.cpu_count()} cores; load average at start {load_average(load_at_start)}; bare import "
            f"(`python -c '{BARE_IMPORT}'`, median of {reps}): {bare_import(reps) * 1000:.0f} ms.")


def spread(values: list[float]) -> str:
    """Median seconds with the range of the runs."""
    if not values:
        return "n/a"
    return f"{median(values):.2f} s ({min(values):.2f}–{max(values):.2f})"


class Renderer:
    """`python -m generator render` with every output option pointed into a work directory."""

    def __init__(self) -> None:
        help_text = subprocess.run([PYTHON, "-m", "generator", "render", "--help"], cwd=REPO, check=True,
                                   capture_output=True, text=True).stdout
        # Options that name where something is written: --out DIRECTORY, --bootstrap-out DIRECTORY, --docs-out FILE...
        self.outputs = dict(re.findall(r"(--[a-z-]*out)\s+(DIRECTORY|FILE|PATH)", help_text))
        if "--out" not in self.outputs:
            raise RuntimeError(f"`render --help` names no --out option:\n{help_text}")

    def paths(self, work: Path) -> dict[str, Path]:
        return {option: work / ("out" if option == "--out" else option.strip("-"))
                for option in self.outputs}

    def command(self, inventory: Path, work: Path) -> list[str]:
        cmd = [PYTHON, "-m", "generator", "render", "--inventory", str(inventory)]
        for option, path in self.paths(work).items():
            cmd += [option, str(path)]
        return cmd

    def clear(self, work: Path) -> None:
        for path in self.paths(work).values():
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()

    def render(self, inventory: Path, work: Path) -> Run:
        # cwd=work: should the CLI grow another output with a relative default, it lands in work, not the repo.
        return run(self.command(inventory, work), cwd=work)


def snapshot(paths: list[Path]) -> dict[str, tuple[int, int]]:
    """(inode, mtime_ns) of every file and directory under the outputs."""
    state: dict[str, tuple[int, int]] = {}
    for root in paths:
        if not root.exists():
            continue
        for path in [root, *root.rglob("*")] if root.is_dir() else [root]:
            st = path.stat()
            state[str(path)] = (st.st_ino, st.st_mtime_ns)
    return state


def touched(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, int]:
    return {
        "changed": sum(1 for p in before.keys() & after.keys() if before[p] != after[p] and not os.path.isdir(p)),
        "added": len(after.keys() - before.keys()),
        "removed": len(before.keys() - after.keys()),
        "dirs_changed": sum(1 for p in before.keys() & after.keys() if before[p] != after[p] and os.path.isdir(p)),
    }


def bytecode_as_by_default(log) -> str:
    """Let every process of the run cache bytecode, as Python does by default. With PYTHONDONTWRITEBYTECODE set
    (this machine's environment sets it), the generator's own modules, installed editable and so never
    byte-compiled by pip, are compiled from source in every process (about 20 ms of a FLAME render), while the
    libraries' bytecode, compiled by pip at install, is read: the comparison would be skewed against the render."""
    note = "bytecode cached as by default"
    if os.environ.pop("PYTHONDONTWRITEBYTECODE", None) is not None:
        note += " (PYTHONDONTWRITEBYTECODE, set in this environment, is removed for the run's processes)"
    subprocess.run([PYTHON, "-c", "import generator.cli"], cwd=REPO, check=True)  # untimed: writes __pycache__
    log(note)
    return note


def settle() -> None:
    """Flush dirty pages and let the file system finish what earlier steps left (a removed tree is discarded on
    the VM's disk in the background): each timed process starts from the same quiet state."""
    os.sync()
    time.sleep(0.5)


def write_readme(text: str, begin: str, end: str) -> None:
    """Replace the section of benchmarks/README.md between the markers `begin` and `end` (each benchmark has its
    own)."""
    content = README.read_text(encoding="utf-8")
    if begin not in content or end not in content:
        raise SystemExit(f"{README} has no {begin} ... {end} section")
    head, rest = content.split(begin, 1)
    _, tail = rest.split(end, 1)
    README.write_text(f"{head}{begin}\n{text}\n{end}{tail}", encoding="utf-8")
