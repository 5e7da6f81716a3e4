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
import signal
import sys
import tempfile
import textwrap
import time

REPO = pathlib.Path(__file__).resolve().parents[1]

from simulation import flame as flame_mod  # noqa: E402

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
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="gpugen-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    # Ctrl-C even when started from a shell that ignores SIGINT for background jobs (Python keeps SIG_IGN).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    print(f"starting the simulated FLAME in {work} (every process logs in {work}/logs) ...", flush=True)
    flame = None
    try:
        flame = flame_mod.start_flame(work, log=lambda m: print("  " + m, flush=True))
        print_welcome(flame, work)
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


def print_welcome(flame, work: pathlib.Path):
    example = work / "my-job.yaml"
    example.write_text(SEED_EXAMPLE)
    nodes = ", ".join(flame.nodes)
    lines = [f"\nFLAME (simulated) is up in {flame.timings['ready']:.0f}s: nodes {nodes}.", ""]
    if flame.researchers:
        group, r = next(iter(flame.researchers.items()))
        ns = r.namespaces[0]
        lines += [f"Researcher of {group} (user {r.user}, groups {', '.join(r.groups) or '-'}), namespace {ns}:",
                  f"  export KUBECONFIG={r.kubeconfig}", ""]
        try_lines = [
            "kubectl get clustertrainingruntimes",
            f"kubectl create -f {example}   # the seed page's YAML example (namespace {ns})",
            "kubectl get workloads -w      # Kueue admits it on flavor gh200 of your group's ClusterQueue",
            "kubectl get pods -o wide -w   # placed on a GH200 node, runs (a few seconds under KWOK), completes",
            "python -c 'from kubeflow.trainer import TrainerClient; "
            "print([r.name for r in TrainerClient().list_runtimes()])'",
        ]
    else:
        ns = next(iter(flame.inventory.groups.values())).namespaces[0]
        lines += ["No researcher identity: the inventory lists no `identities` for any group, so the rendered",
                  "RBAC binds nobody to the research namespaces. Use the admin KUBECONFIG below.", ""]
        try_lines = ["kubectl get clustertrainingruntimes",
                     f"kubectl -n {ns} create -f {example}",
                     f"kubectl -n {ns} get workloads -w", f"kubectl -n {ns} get pods -o wide -w"]
    lines += ["Admin (system:masters):", f"  export KUBECONFIG={flame.admin_kubeconfig}", "", "Try:"]
    lines += ["  " + t for t in try_lines]
    repo = flame.argocd.repo
    lines += ["", f"Argo CD (application controller and repo-server) syncs {repo.url}, cloned at {repo.checkout}:",
              "  kubectl -n argocd get applications      # as admin: every Application Synced and Healthy",
              f"  cd {repo.checkout} && $EDITOR gpu_classes.yaml && {pathlib.Path(sys.executable).parent}/gpugen render",
              "  git commit -qam 'change an allocation' && git push -q origin HEAD:main",
              "  kubectl -n argocd annotate applications --all argocd.argoproj.io/refresh=normal   # as a webhook would",
              "  kubectl -n argocd get applications -w"]
    if flame.prometheus is not None:
        gpugen = pathlib.Path(sys.executable).parent / "gpugen"
        lines += ["", f"Prometheus (the site's) at {flame.prometheus.url}, scraping the controllers as rendered/monitoring says:",
                  f"  {gpugen} report --prometheus {flame.prometheus.url} --from 1h --step 5s   # GPU-hours per group"]
    lines += ["", f"Logs: {work}/logs/ (components), {work}/apiserver/ (etcd, kube-apiserver).",
              "Not run here: " + "; ".join(flame.skipped[:3]) + (" ..." if len(flame.skipped) > 3 else ""),
              "Ctrl-C stops everything."]
    print(textwrap.dedent("\n".join(lines)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
