"""`make test`: every tier, in two pytest processes side by side.

The tests on the simulated FLAME (tests/journeys and tests/simulation/test_live_admission.py), with the several
simulated clusters of tests/clusters in the same process, spend most of their time waiting on their controllers (Argo CD's waves and syncs, Kueue's admissions), while the other tiers compute.
Run one after the other they add up; side by side they overlap. Side by side at equal priority the FLAME was the
longer half, so the other tiers run at a lower CPU priority (nice 2): on a 2-core machine its controllers get the
cores first, and the two halves end at about the same time (at nice 5, once tests/clusters joined the FLAME's
process, the other tiers were the longer half by more than a minute).
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
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# In this order: the monitoring checks add up what every journey ran.
# tests/clusters (several simulated clusters, no FLAME) runs in this process while the FLAME starts in the background
# (tests/conftest.py runs the FLAME's tests last).
FLAME_TIERS = ["tests/journeys", "tests/simulation/test_live_admission.py", "tests/simulation/test_monitoring_live.py",
               "tests/clusters"]
OTHER_TIERS_NICE = 2


def main(argv: list[str]) -> int:
    pytest = [sys.executable, "-m", "pytest"]
    with tempfile.TemporaryDirectory(prefix="gpugen-tests-") as work:
        log_path = Path(work) / "flame.log"
        with open(log_path, "w") as log:
            flame = subprocess.Popen([*pytest, "-q", *argv, *FLAME_TIERS], cwd=REPO, stdout=log,
                                     stderr=subprocess.STDOUT)
            try:
                print(f"tests on the simulated FLAME ({', '.join(FLAME_TIERS)}): pytest pid {flame.pid}, shown "
                      "when done", flush=True)
                rest = subprocess.call([*pytest, "-q", *argv, *(f"--ignore={tier}" for tier in FLAME_TIERS)],
                                       cwd=REPO, preexec_fn=lambda: os.nice(OTHER_TIERS_NICE))
                flame_rc = flame.wait()
            except BaseException:
                flame.send_signal(signal.SIGINT)  # pytest's teardown stops the FLAME's processes
                try:
                    flame.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    flame.kill()
                    flame.wait()
                raise
        print(f"\n---- tests on the simulated FLAME (exit {flame_rc}) ----", flush=True)
        sys.stdout.write(log_path.read_text(errors="replace"))
    codes = [code for code in (rest, flame_rc) if code != 5] or [5]  # 5: that half collected nothing (-k, ...)
    return 1 if min(codes) < 0 else max(codes)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
