"""`make test`: every tier, in three pytest processes, side by side when the machine has the cores for them.

The tiers fall in three processes:
- the simulated FLAME's (tests/flame) and the several simulated clusters' (tests/clusters): control planes and
  controllers, waiting on each other;
- the other tiers with control planes of their own (tests/apiserver, tests/e2e, tests/simulation: the harness);
- the unit tier: computation only (real CLIs, small Go programs), no server that must answer in time.

How they share the machine (tests/README.md): the spare cores are measured first (the processors this process may
use, less what other programs keep busy over a second). With two or more, the two tiers with control planes run
side by side at the same priority, so that neither starves the other's API server, and the unit tier beside them
at a lower one (it takes what they leave, and has nothing that must answer in time). With fewer, the three run one
after the other. GPUGEN_TEST_SLOTS=N overrides the measurement (1: one after the other).
The exit code is the worst of the three (a process that selects no test does not count). The FLAME's and the unit
tier's output are written to logs and shown whole when they end, so outputs never interleave.

    python -m tests.run [PYTEST OPTIONS]  # -k, -x, ... go to every process; to run some tests, call pytest on them
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from simulation.waiting import STOP_GRACE

REPO = Path(__file__).resolve().parents[1]
# tests/clusters (several simulated clusters, no FLAME) runs in this process while the FLAME starts in the background
# (tests/conftest.py runs the FLAME's tests last, in tests/flame/conftest.py's order).
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


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    flame_ignores = [f"--ignore={tier}" for tier in FLAME_TIERS]
    # Ignores, not a path: the arguments may name tests, which the right process alone then runs.
    not_unit = [f"--ignore={tier.relative_to(REPO)}" for tier in sorted((REPO / "tests").iterdir())
                if tier.is_dir() and tier.name != Path(UNIT_TIER).name]
    commands = {"flame": [*pytest, "-q", *argv, *FLAME_TIERS],
                "other": [*pytest, "-q", *argv, *flame_ignores, f"--ignore={UNIT_TIER}"],
                "unit": [*pytest, "-q", *argv, *not_unit, *flame_ignores]}
    labels = {"flame": "tests on the simulated FLAME and the several clusters", "other": "the other tiers",
              "unit": "the unit tier"}
    side_by_side = slots() >= 2
    print(f"tests.run: {len(os.sched_getaffinity(0))} processor(s) usable; "
          + ("the tiers with control planes side by side, the unit tier beside them at nice "
             f"{UNIT_TIER_NICE}" if side_by_side else "one tier after the other"), flush=True)
    codes: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="gpugen-tests-") as work:
        logs = {name: Path(work) / f"{name}.log" for name in ("flame", "unit")}
        started: dict[str, subprocess.Popen] = {}
        try:
            if side_by_side:
                lower = {"preexec_fn": lambda: os.nice(UNIT_TIER_NICE)}
                with open(logs["flame"], "w") as flame_log, open(logs["unit"], "w") as unit_log:
                    started["flame"] = subprocess.Popen(commands["flame"], cwd=REPO, stdout=flame_log,
                                                        stderr=subprocess.STDOUT)
                    started["unit"] = subprocess.Popen(commands["unit"], cwd=REPO, stdout=unit_log,
                                                       stderr=subprocess.STDOUT, **lower)
                    print(f"{labels['flame']}: pytest pid {started['flame'].pid}; {labels['unit']}: pytest pid "
                          f"{started['unit'].pid}; both shown when done", flush=True)
                    codes["other"] = subprocess.call(commands["other"], cwd=REPO)
                    codes["unit"], codes["flame"] = started["unit"].wait(), started["flame"].wait()
            else:
                for name in ("flame", "other", "unit"):
                    print(f"\n---- {labels[name]} ----", flush=True)
                    started[name] = subprocess.Popen(commands[name], cwd=REPO)
                    codes[name] = started[name].wait()
        except BaseException:
            for process in started.values():
                _stop(process)
            raise
        if side_by_side:
            for name in ("unit", "flame"):
                print(f"\n---- {labels[name]} (exit {codes[name]}) ----", flush=True)
                sys.stdout.write(logs[name].read_text(errors="replace"))
    kept = [code for code in codes.values() if code != 5] or [5]  # 5: collected nothing (-k, ...)
    return 1 if min(kept) < 0 else max(kept)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
