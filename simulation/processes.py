"""Local processes of the simulated FLAME: start, wait until ready, stop, and fail with a name and a log.

Every process is started with PR_SET_PDEATHSIG, so it gets SIGTERM if the Python process that started it dies
(even by SIGKILL), and every `Processes` stops what it started in reverse order on stop() or when a `with` block
ends, on failure and on Ctrl-C alike.
"""
from __future__ import annotations

import dataclasses
import pathlib
import subprocess

from simulation.control_plane import child_preexec
from simulation.waiting import wait_for


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
              cwd: pathlib.Path | None = None, netns=None) -> Process:
        """`netns`: a netns.PodNetwork the process runs in."""
        log = pathlib.Path(log)
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as out:
            out.write(f"# {name}: {' '.join(map(str, argv))}\n".encode())
            out.flush()
            try:
                popen = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT,
                                         env=env, cwd=cwd, preexec_fn=child_preexec(netns),
                                         stdin=subprocess.DEVNULL)
            except OSError as e:
                raise ComponentFailed(f"{name} could not be started: {e} (log: {log})") from e
        proc = Process(name, popen, log)
        self.started.append(proc)
        return proc

    def stop(self, grace: float = 15):
        """Newest first, one after the other: SIGTERM, then SIGKILL if it has not exited `grace` seconds later. A
        process ends before those started ahead of it: the API server shuts down cleanly only while etcd still
        answers (terminated together, it hung until killed)."""
        for p in reversed(self.started):
            if p.popen.poll() is None:
                p.popen.terminate()
            try:
                p.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                p.popen.kill()
                p.popen.wait()
        self.started.clear()

    def forget(self, proc: Process) -> None:
        """No longer stop or check `proc` (it has ended, or been stopped by whoever owns it)."""
        if proc in self.started:
            self.started.remove(proc)

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
