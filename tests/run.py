"""`make test`: every tier, in three pytest processes, side by side when the machine has the cores for them.

The tiers fall in three processes:
- the simulated FLAME's (tests/flame) and the several simulated clusters' (tests/clusters): control planes and
  controllers, waiting on each other;
- the other tiers with control planes of their own (tests/apiserver, tests/e2e, tests/simulation: the harness,
  tests/accelerators: the accelerator classes' cluster);
- the unit tier: computation only (real CLIs, small Go programs), no server that must answer in time.

How they share the machine (tests/README.md): the spare cores are measured first (the processors this process may
use, less what other programs keep busy over a second). With two or more, the two tiers with control planes run
side by side at the same priority, so that neither starves the other's API server, and the unit tier beside them
at a lower one (it takes what they leave, and has nothing that must answer in time). With fewer, the three run one
after the other. GPUGEN_TEST_SLOTS=N overrides the measurement (1: one after the other).
The exit code is the worst of the three (a process that selects no test does not count). Side by side, each line
of the three outputs is shown as it comes, prefixed with its process's name ([flame], [other], [unit]), so a reader
sees each one's progress and can pick one out (`grep -F '[flame] '`).

Each process's temporary directory, where the simulated clusters log, is <root>/<name> (pytest's --basetemp, emptied
when that process starts again): <root> is GPUGEN_TEST_TMP (CI uploads the logs from there, tests/README.md), else
one directory of this checkout's own under the system's temporary directory. pytest's own numbered directories
would not do: it keeps the last three sessions of the user, a run makes three, and any other pytest session (another
checkout's, one test re-run) removes the oldest, logs of the failure included.

    python -m tests.run [PYTEST OPTIONS]  # -k, -x, ... go to every process; to run some tests, call pytest on them
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from simulation.waiting import STOP_GRACE

REPO = Path(__file__).resolve().parents[1]
# tests/clusters (several simulated clusters, no FLAME) runs in this process while the FLAME starts in the
# background (tests/conftest.py runs the FLAME's tests last, in tests/flame/conftest.py's order). The accelerator
# classes' cluster runs with the other tiers instead: this process is the longest, and that one has room beside it.
FLAME_TIERS = ["tests/flame", "tests/clusters"]
UNIT_TIER = "tests/unit"
# The unit tier beside the tiers with control planes: Linux gives a nice-10 process about a tenth of a core that a
# nice-0 one wants, and all of one it leaves idle.
UNIT_TIER_NICE = 10


def spare_cores(sample_seconds: float = 1.0) -> float:
    """How many of the processors this process may run on were idle over the sample (others' load excluded)."""
    allowed = sorted(os.sched_getaffinity(0))

    def times() -> dict[int, tuple[int, int]]:
        out = {}
        for line in Path("/proc/stat").read_text().splitlines():
            name, *fields = line.split()
            if name.startswith("cpu") and name != "cpu":
                values = [int(v) for v in fields]
                idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
                out[int(name[3:])] = (idle, sum(values))
        return out
    before = times()
    time.sleep(sample_seconds)
    after = times()
    spare = 0.0
    for cpu in allowed:
        if cpu in before and cpu in after:
            idle = after[cpu][0] - before[cpu][0]
            total = after[cpu][1] - before[cpu][1]
            spare += idle / total if total else 1.0
    return spare


def slots() -> int:
    """How many processes with control planes run at once: GPUGEN_TEST_SLOTS, or the spare cores, at least one."""
    if os.environ.get("GPUGEN_TEST_SLOTS"):
        return max(1, int(os.environ["GPUGEN_TEST_SLOTS"]))
    return max(1, round(spare_cores()))


def _stop(process: subprocess.Popen) -> None:
    """SIGINT first: pytest's teardown stops the processes a tier started."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STOP_GRACE * 6)  # the teardown stops a whole simulated cluster
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


_OUTPUT_LOCK = threading.Lock()


def _relay(name: str, stream) -> None:
    """`stream`'s lines to this process's stdout as they come, each whole and prefixed with `name`."""
    for line in iter(stream.readline, b""):
        text = line.decode(errors="replace")
        with _OUTPUT_LOCK:
            sys.stdout.write(f"[{name}] {text}" + ("" if text.endswith("\n") else "\n"))
            sys.stdout.flush()
    stream.close()


def tmp_root() -> Path:
    """GPUGEN_TEST_TMP, else this checkout's own directory under the system's temporary directory (two checkouts'
    runs never empty each other's)."""
    if os.environ.get("GPUGEN_TEST_TMP"):
        return Path(os.environ["GPUGEN_TEST_TMP"]).resolve()
    checkout = hashlib.sha256(str(REPO).encode()).hexdigest()[:8]
    return Path(tempfile.gettempdir()) / f"gpugen-tests-{REPO.name}-{checkout}"


def basetemp(name: str, argv: list[str]) -> list[str]:
    """--basetemp=<tmp_root()>/<name> for one process, unless the arguments name one."""
    if any(a.startswith("--basetemp") for a in argv):
        return []
    root = tmp_root()
    root.mkdir(mode=0o700, parents=True, exist_ok=True)  # pytest makes the basetemp itself, not its parents
    return [f"--basetemp={root / name}"]


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    flame_ignores = [f"--ignore={tier}" for tier in FLAME_TIERS]
    # Ignores, not a path: the arguments may name tests, which the right process alone then runs.
    not_unit = [f"--ignore={tier.relative_to(REPO)}" for tier in sorted((REPO / "tests").iterdir())
                if tier.is_dir() and tier.name != Path(UNIT_TIER).name]
    commands = {"flame": [*pytest, "-q", *argv, *basetemp("flame", argv), *FLAME_TIERS],
                "other": [*pytest, "-q", *argv, *basetemp("other", argv), *flame_ignores, f"--ignore={UNIT_TIER}"],
                "unit": [*pytest, "-q", *argv, *basetemp("unit", argv), *not_unit, *flame_ignores]}
    labels = {"flame": "tests on the simulated FLAME and the several clusters", "other": "the other tiers",
              "unit": "the unit tier"}
    side_by_side = slots() >= 2
    print(f"tests.run: {len(os.sched_getaffinity(0))} processor(s) usable; "
          + ("the tiers with control planes side by side, the unit tier beside them at nice "
             f"{UNIT_TIER_NICE}" if side_by_side else "one tier after the other")
          + f"; temporary directories and the simulated clusters' logs under {tmp_root()}/", flush=True)
    codes: dict[str, int] = {}
    started: dict[str, subprocess.Popen] = {}
    try:
        if side_by_side:
            # Unbuffered: a pytest writing into a pipe would otherwise hold its progress back in a buffer.
            env = {**os.environ, "PYTHONUNBUFFERED": "1"}
            lower = {"preexec_fn": lambda: os.nice(UNIT_TIER_NICE)}
            relays = []
            for name in ("flame", "other", "unit"):
                started[name] = subprocess.Popen(commands[name], cwd=REPO, stdout=subprocess.PIPE,
                                                 stderr=subprocess.STDOUT, env=env,
                                                 **(lower if name == "unit" else {}))
                relays.append(threading.Thread(target=_relay, args=(name, started[name].stdout), daemon=True))
                relays[-1].start()
                print(f"[{name}] {labels[name]}: pytest pid {started[name].pid}", flush=True)
            for name in ("other", "unit", "flame"):
                codes[name] = started[name].wait()
            for relay in relays:  # the rest of each output; a process left behind holding the pipe is not waited on
                relay.join(timeout=STOP_GRACE)
        else:
            for name in ("flame", "other", "unit"):
                print(f"\n---- {labels[name]} ----", flush=True)
                started[name] = subprocess.Popen(commands[name], cwd=REPO)
                codes[name] = started[name].wait()
    except BaseException:
        for process in started.values():
            _stop(process)
        raise
    print("tests.run: " + ", ".join(f"{labels[name]} exit {code}" for name, code in codes.items()), flush=True)
    kept = [code for code in codes.values() if code != 5] or [5]  # 5: collected nothing (-k, ...)
    return 1 if min(kept) < 0 else max(kept)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
