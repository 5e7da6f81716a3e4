"""`make test`: every tier, in three pytest processes side by side.

The tests on the simulated FLAME (tests/journeys and tests/simulation/test_live_admission.py), with the several
simulated clusters of tests/clusters in the same process, spend much of their time waiting on their controllers
(Argo CD's waves and syncs, Kueue's admissions, a cleanup schedule), while the other tiers compute. Those run in
two more processes, the unit tier in one and the tiers with their own control planes in the other, so that both
cores have work while the FLAME waits; at a lower CPU priority (nice 8), so that the FLAME's and the clusters'
controllers get the cores first: the FLAME's process is the longest, and the others have time to spare (at nice 2
the FLAME's process took half a minute longer, more than the others gained).
The FLAME's process and the unit tier's write to logs, shown whole when all are done, so outputs never interleave.
The exit code is the worst of the three (a process that selects no test does not count).

    python -m tests.run [PYTEST OPTIONS]  # -k, -x, ... go to every process; to run some tests, call pytest on them
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# In this order: the monitoring checks add up what every journey ran.
# tests/clusters (several simulated clusters, no FLAME) runs in this process while the FLAME starts in the background
# (tests/conftest.py runs the FLAME's tests last).
FLAME_TIERS = ["tests/journeys", "tests/simulation/test_live_admission.py", "tests/simulation/test_monitoring_live.py",
               "tests/clusters"]
UNIT_TIER = "tests/unit"
OTHER_TIERS_NICE = 8


def _stop(process: subprocess.Popen) -> None:
    """SIGINT first: pytest's teardown stops the processes a tier started."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    lower = {"preexec_fn": lambda: os.nice(OTHER_TIERS_NICE)}
    flame_ignores = [f"--ignore={tier}" for tier in FLAME_TIERS]
    with tempfile.TemporaryDirectory(prefix="gpugen-tests-") as work:
        logs = {"flame": Path(work) / "flame.log", "unit": Path(work) / "unit.log"}
        started: list[subprocess.Popen] = []
        try:
            with open(logs["flame"], "w") as flame_log, open(logs["unit"], "w") as unit_log:
                flame = subprocess.Popen([*pytest, "-q", *argv, *FLAME_TIERS], cwd=REPO, stdout=flame_log,
                                         stderr=subprocess.STDOUT)
                started.append(flame)
                # Ignores, not a path: the arguments may name tests, which the right process alone then runs.
                not_unit = [f"--ignore={tier.relative_to(REPO)}" for tier in sorted((REPO / "tests").iterdir())
                            if tier.is_dir() and tier.name != Path(UNIT_TIER).name]
                unit = subprocess.Popen([*pytest, "-q", *argv, *not_unit, *flame_ignores], cwd=REPO,
                                        stdout=unit_log, stderr=subprocess.STDOUT, **lower)
                started.append(unit)
                print(f"tests on the simulated FLAME ({', '.join(FLAME_TIERS)}): pytest pid {flame.pid}; the unit "
                      f"tier: pytest pid {unit.pid}; both shown when done", flush=True)
                rest = subprocess.call([*pytest, "-q", *argv, *flame_ignores, f"--ignore={UNIT_TIER}"], cwd=REPO,
                                       **lower)
                unit_rc, flame_rc = unit.wait(), flame.wait()
        except BaseException:
            for process in started:
                _stop(process)
            raise
        for label, code, log in (("the unit tier", unit_rc, logs["unit"]),
                                 ("tests on the simulated FLAME", flame_rc, logs["flame"])):
            print(f"\n---- {label} (exit {code}) ----", flush=True)
            sys.stdout.write(log.read_text(errors="replace"))
    codes = [code for code in (rest, unit_rc, flame_rc) if code != 5] or [5]  # 5: collected nothing (-k, ...)
    return 1 if min(codes) < 0 else max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
