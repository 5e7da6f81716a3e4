"""Local processes of the simulations and the tiers with control planes: start, wait until ready, stop, and fail
with a name and a log. The one place that starts them (`Processes.start`) and stops them (`stop_process`, by id).

Every process is started with PR_SET_PDEATHSIG, so it gets SIGTERM if the Python process that started it dies
(even by SIGKILL), and every `Processes` stops what it started in reverse order on stop() or when a `with` block
ends, on failure and on Ctrl-C alike. Its output goes to the log its caller names, by convention `<work>/logs/`
of the cluster it belongs to; `log_dirs_since` tells a failed test which of those directories were in use
(tests/conftest.py).
"""
from __future__ import annotations

import ctypes
import dataclasses
import itertools
import pathlib
import signal
import subprocess
import threading

from simulation.waiting import STOP_GRACE, wait_for


_PR_SET_PDEATHSIG = 1


def child_preexec(netns=None):
    """The preexec_fn of every process the tests start: it gets SIGTERM when the thread that started it ends, even
    by SIGKILL (PR_SET_PDEATHSIG), and runs inside `netns` (simulation/netns.py) if given."""
    def preexec():  # between fork and exec
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
        if netns:
            netns.preexec()
    return preexec


def stop_process(popen: subprocess.Popen | None, grace: float = STOP_GRACE):
    """SIGTERM, then SIGKILL after `grace` seconds; nothing if it has already exited."""
    if popen and popen.poll() is None:
        popen.terminate()
        try:
            popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait()


class ComponentFailed(RuntimeError):
    """A component did not start: the message names it and points at its log."""


def log_tail(path: pathlib.Path, chars=3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""


@dataclasses.dataclass
class Process:
    name: str
    popen: subprocess.Popen
    log: pathlib.Path
    supervised: bool = False  # a pod's container: the pod runtime restarts it and reports a crash loop
    started_at: int = 0       # moment() when it started, and when it was stopped or forgotten
    ended_at: int | None = None

    def check_running(self):
        """Raise ComponentFailed (naming the component and its log) if the process has exited."""
        if self.popen.poll() is not None:
            raise ComponentFailed(f"{self.name} exited with code {self.popen.returncode} (log: {self.log})\n"
                                  f"--- last lines of {self.log} ---\n{log_tail(self.log)}")


class Processes:
    """The processes one simulation started, stopped in reverse start order."""

    def __init__(self):
        self.started: list[Process] = []

    def start(self, name: str, argv: list[str], log: pathlib.Path, env: dict | None = None,
              cwd: pathlib.Path | None = None, netns=None, stdout_pipe: bool = False) -> Process:
        """`netns`: a netns.PodNetwork the process runs in. `stdout_pipe`: stdout (text) and stdin are pipes to
        the caller, only stderr goes to the log (a process that announces its address on stdout)."""
        log = pathlib.Path(log)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(f"# {name}: {' '.join(map(str, argv))}\n".encode())
            out.flush()
            streams = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": out, "text": True} \
                if stdout_pipe else {"stdin": subprocess.DEVNULL, "stdout": out, "stderr": subprocess.STDOUT}
            try:
                popen = subprocess.Popen([str(a) for a in argv], env=env, cwd=cwd, preexec_fn=child_preexec(netns),
                                         **streams)
            except OSError as e:
                raise ComponentFailed(f"{name} could not be started: {e} (log: {log})") from e
        proc = Process(name, popen, log, started_at=moment())
        with _HISTORY_LOCK:
            _HISTORY.append(proc)
        self.started.append(proc)
        return proc

    def stop(self, grace: float = STOP_GRACE):
        """Newest first, one after the other: SIGTERM, then SIGKILL if it has not exited `grace` seconds later. A
        process ends before those started ahead of it: the API server shuts down cleanly only while etcd still
        answers (terminated together, it hung until killed)."""
        for p in reversed(self.started):
            stop_process(p.popen, grace)
            p.ended_at = moment()
        self.started.clear()

    def forget(self, proc: Process) -> None:
        """No longer stop or check `proc` (it has ended, or been stopped by whoever owns it)."""
        if proc in self.started:
            self.started.remove(proc)
            proc.ended_at = moment()

    def pids(self) -> list[int]:
        return [p.popen.pid for p in self.started]

    def check_running(self):
        for p in self.started:
            if not p.supervised:
                p.check_running()


def wait_ready(proc: Process | None, check, usual: float, what: str, log: pathlib.Path | None = None):
    """Return check()'s first truthy value (exceptions count as not yet). Raise ComponentFailed naming `what`
    and the log when the process exits or at the ceiling of something that takes `usual` seconds on
    a fast machine (simulation/waiting.py)."""
    log = log or (proc.log if proc else None)

    def check_or_pending():
        try:
            return check()
        except ComponentFailed:
            raise
        except Exception as e:  # still starting: connection refused, 503, ...
            raise _NotYet(e) from e

    return wait_for(check_or_pending, f"{what} not ready", usual, pending=(_NotYet,),
                    alive=proc.check_running if proc else None, error=ComponentFailed,
                    describe=None if log is None else
                    lambda: f"(log: {log})\n--- last lines of {log} ---\n{log_tail(log)}")


class _NotYet(Exception):
    """check() raised: not ready yet (the last one is reported)."""


# Every process started here, in start order, and a clock of starts, stops and tests: a failed test is told the log
# directories of the processes that ran while it did (tests/conftest.py), not only of those still running.
_HISTORY: list[Process] = []
_HISTORY_LOCK = threading.Lock()
_CLOCK = itertools.count(1)


def moment() -> int:
    """A point in the sequence of process starts and stops (for log_dirs_since)."""
    return next(_CLOCK)


def log_dirs_since(since: int) -> list[pathlib.Path]:
    """The directories of the logs of every process that ran at some time after moment() returned `since`: started
    since, or not stopped before. First started first."""
    with _HISTORY_LOCK:
        ran = [p for p in _HISTORY if p.started_at > since or p.ended_at is None or p.ended_at > since]
    return list(dict.fromkeys(p.log.parent for p in ran))


def leftover_processes(pids: list[int]) -> list[int]:
    """Those of `pids` still alive (zombies of ours count as gone)."""
    alive = []
    for pid in pids:
        try:
            state = pathlib.Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if state != "Z":
            alive.append(pid)
    return alive
