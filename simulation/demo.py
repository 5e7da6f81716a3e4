"""`make demo`: start the simulated FLAME (simulation/flame.py): the real Argo CD bootstraps it from a git
repository carrying the committed inventory and rendered/, as the README says. Print a researcher's and the
admin's KUBECONFIG, the cluster's git checkout (commit an inventory change there and watch Argo CD sync it) and a
few commands to try; stay up until Ctrl-C, then stop every process it started (also when start-up fails: the
failing component is named with its log).

    python -m simulation.demo [--work DIR]
"""
from __future__ import annotations

import argparse
import pathlib
import shlex
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

from simulation import flame as flame_mod
from simulation.waiting import ceiling

REPO = pathlib.Path(__file__).resolve().parents[1]

# How long the seed's job runs under KWOK. The site's Prometheus scrapes every 15 s: a job of a few seconds falls
# between two scrapes, and the report, its picture and the dashboards would show nothing of it. The tests keep
# KWOK's shorter default (simulation/cluster.py).
DEMO_JOB_SECONDS = 60.0

SEED_EXAMPLE = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: my-job
spec:
  runtimeRef:
    name: torch-gh200
  trainer:
    resourcesPerNode:
      requests:
        cpu: "8"
        memory: "64Gi"
        nvidia.com/gpu: "1"
      limits:
        nvidia.com/gpu: "1"
"""


def _stop_on_sigterm(*_):
    raise KeyboardInterrupt


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=pathlib.Path, help="directory for state, certificates and logs "
                        "(default: a new one under /tmp)")
    args = parser.parse_args(argv)
    # Absolute, so that the paths the welcome prints work from any directory.
    work = (args.work or pathlib.Path(tempfile.mkdtemp(prefix="gpugen-demo-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # Ctrl-C even when started from a shell that ignores SIGINT for background jobs (Python keeps SIG_IGN).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"starting the simulated FLAME in {work} (every process logs in {work}/logs) ...", flush=True)
    flame = None
    try:
        flame = flame_mod.start_flame(work, log=lambda m: print("  " + m, flush=True), job_seconds=DEMO_JOB_SECONDS)
        commit_identity(flame.argocd.repo.checkout)
        print(welcome(flame, work), flush=True)
        while True:  # up until Ctrl-C; a component that dies ends the demo with its name and log
            flame.check_running()
            time.sleep(2)
    except KeyboardInterrupt:
        print("\nstopping ...", flush=True)
        return 0
    except (flame_mod.ToolMissing, flame_mod.ComponentFailed) as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    finally:
        if flame:
            flame.stop()
        # start_flame stops what it started when it fails itself.
        print("every process the demo started has stopped.", flush=True)


def commit_identity(checkout: pathlib.Path):
    """A committer for the checkout when git knows none (a fresh machine): the welcome's `git commit` must work as
    printed."""
    known = subprocess.run(["git", "-C", str(checkout), "config", "user.email"], capture_output=True, text=True,
                           timeout=ceiling(5))
    if not known.stdout.strip():
        for key, value in (("user.name", "gpugen demo"), ("user.email", "gpugen-demo@example.org")):
            subprocess.run(["git", "-C", str(checkout), "config", key, value], check=True, timeout=ceiling(5))


def welcome(flame, work: pathlib.Path) -> str:
    """What the demo prints once FLAME is up. Every command in it works as printed from any directory: absolute
    paths, the inventory named, git told its repository, this Python and its gpugen rather than whatever PATH
    finds (tests/unit/test_demo_welcome.py)."""
    example = work / "my-job.yaml"
    example.write_text(SEED_EXAMPLE)
    q = shlex.quote
    python = q(sys.executable)
    gpugen = q(str(pathlib.Path(sys.executable).parent / "gpugen"))
    nodes = ", ".join(flame.nodes)
    lines = [f"\nFLAME (simulated) is up in {flame.timings['ready']:.0f}s: nodes {nodes}.", ""]
    if flame.researchers:
        group, r = next(iter(flame.researchers.items()))
        ns = r.namespaces[0]
        lines += [f"Researcher of {group} (user {r.user}, groups {', '.join(r.groups) or '-'}), namespace {ns}:",
                  f"  export KUBECONFIG={q(str(r.kubeconfig))}", ""]
        try_lines = [
            "kubectl get clustertrainingruntimes",
            f"kubectl create -f {q(str(example))}   # the seed page's YAML example (namespace {ns})",
            "kubectl get workloads -w      # Kueue admits it on flavor gh200 of your group's ClusterQueue",
            f"kubectl get pods -o wide -w   # placed on a GH200 node, runs (about {DEMO_JOB_SECONDS:.0f}s under "
            "KWOK), completes",
            f"{python} -c 'from kubeflow.trainer import TrainerClient; "
            "print([r.name for r in TrainerClient().list_runtimes()])'",
        ]
    else:
        ns = next(iter(flame.inventory.groups.values())).namespaces[0]
        lines += ["No researcher identity: the inventory lists no `identities` for any group, so the rendered",
                  "RBAC binds nobody to the research namespaces. Use the admin KUBECONFIG below.", ""]
        try_lines = ["kubectl get clustertrainingruntimes",
                     f"kubectl -n {ns} create -f {q(str(example))}",
                     f"kubectl -n {ns} get workloads -w", f"kubectl -n {ns} get pods -o wide -w"]
    lines += ["Admin (system:masters):", f"  export KUBECONFIG={q(str(flame.admin_kubeconfig))}", "", "Try:"]
    lines += ["  " + t for t in try_lines]
    repo = flame.argocd.repo
    checkout = q(str(repo.checkout))
    inventory = q(str(repo.checkout / "gpu_classes.yaml"))
    lines += ["", f"Argo CD (application controller and repo-server) syncs {repo.url}, cloned at {repo.checkout}:",
              "  kubectl -n argocd get applications      # as admin: every Application Synced and Healthy",
              f"  cd {checkout} && ${{EDITOR:-vi}} gpu_classes.yaml && {gpugen} render",
              f"  git -C {checkout} commit -qam 'change an allocation' && git -C {checkout} push -q origin HEAD:main",
              "  kubectl -n argocd annotate applications --all argocd.argoproj.io/refresh=normal"
              "   # as a webhook would",
              "  kubectl -n argocd get applications -w"]
    if flame.prometheus is not None:
        lines += ["", f"Prometheus (the site's) at {flame.prometheus.url}, "
                      "scraping the controllers as rendered/monitoring says:",
                  f"  {gpugen} report --inventory {inventory} --prometheus {flame.prometheus.url} --from 1h --step 5s"
                  f" --chart {q(str(work / 'gpu-hours.png'))}   # GPU-hours per group, and their picture"]
    lines += ["", f"Logs: {work}/logs/ (components), {work}/apiserver/ (etcd, kube-apiserver).",
              "Not run here: " + "; ".join(flame.skipped[:3]) + (" ..." if len(flame.skipped) > 3 else ""),
              "Ctrl-C stops everything."]
    return textwrap.dedent("\n".join(lines))


if __name__ == "__main__":
    sys.exit(main())
