"""`make test`: every tier, in two pytest processes side by side.

The tests on the simulated FLAME (tests/journeys and tests/simulation/test_live_admission.py) spend most of their
time waiting on its controllers (Argo CD's waves and syncs, Kueue's admissions), while the other tiers compute.
Run one after the other they add up; side by side they overlap. The other tiers run at a lower CPU priority, in
two steps. While the FLAME starts (Argo CD installing the charts: a chain of OpenAPI reloads in which the API
server and Argo CD each wait on the other, so every moment either waits for a core adds to the start) they run at
nice OTHER_TIERS_NICE_WHILE_FLAME_STARTS; once it has started, at OTHER_TIERS_NICE, which leaves the two halves
ending at about the same time. The second step lowers a niceness, which needs root (as the FLAME's network
namespace does); without it the other tiers stay at OTHER_TIERS_NICE throughout.
The FLAME's process writes to a log, shown whole when both are done, so the two outputs never interleave. The
exit code is the worse of the two (a half that selects no test does not count).

    python -m tests.run [PYTEST ARGS]     # the arguments go to both processes
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# In this order: the monitoring checks add up what every journey ran.
FLAME_TIERS = ["tests/journeys", "tests/simulation/test_live_admission.py", "tests/simulation/test_monitoring_live.py"]
OTHER_TIERS_NICE = 5
OTHER_TIERS_NICE_WHILE_FLAME_STARTS = 10
STARTED_FILE_VARIABLE = "GPUGEN_FLAME_STARTED_FILE"  # tests/journeys/journeys_support.py creates it


def _renice_when_started(started: Path, flame: subprocess.Popen, group: int, done: threading.Event) -> None:
    """Once the FLAME has started (or its process has ended), the other tiers' process group to OTHER_TIERS_NICE."""
    while not done.wait(1):
        if started.exists() or flame.poll() is not None:
            try:
                os.setpriority(os.PRIO_PGRP, group, OTHER_TIERS_NICE)
            except ProcessLookupError:
                pass  # the other tiers have already finished
            return


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    two_steps = os.geteuid() == 0
    nice = OTHER_TIERS_NICE_WHILE_FLAME_STARTS if two_steps else OTHER_TIERS_NICE
    with tempfile.TemporaryDirectory(prefix="gpugen-tests-") as work:
        log_path = Path(work) / "flame.log"
        started = Path(work) / "flame-started"
        done = threading.Event()
        with open(log_path, "w") as log:
            flame = subprocess.Popen([*pytest, "-q", *argv, *FLAME_TIERS], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT, env={**os.environ, STARTED_FILE_VARIABLE: str(started)})
            try:
                print(f"tests on the simulated FLAME ({', '.join(FLAME_TIERS)}): pytest pid {flame.pid}, shown "
                      "when done", flush=True)
                # A process group of their own, so that every process of theirs is reniced together.
                others = subprocess.Popen([*pytest, "-q", *argv, *(f"--ignore={tier}" for tier in FLAME_TIERS)],
                                          cwd=REPO, preexec_fn=lambda: (os.setpgid(0, 0), os.nice(nice)))
                if two_steps:
                    threading.Thread(target=_renice_when_started, args=(started, flame, others.pid, done),
                                     daemon=True).start()
                try:
                    rest = others.wait()
                except BaseException:
                    others.send_signal(signal.SIGINT)
                    others.wait()
                    raise
                flame_rc = flame.wait()
            except BaseException:
                flame.send_signal(signal.SIGINT)  # pytest's teardown stops the FLAME's processes
                try:
                    flame.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    flame.kill()
                    flame.wait()
                raise
            finally:
                done.set()
        print(f"\n---- tests on the simulated FLAME (exit {flame_rc}) ----", flush=True)
        sys.stdout.write(log_path.read_text(errors="replace"))
    codes = [code for code in (rest, flame_rc) if code != 5] or [5]  # 5: that half collected nothing (-k, ...)
    return 1 if min(codes) < 0 else max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
