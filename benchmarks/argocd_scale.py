"""The real Argo CD syncing a national platform: from empty, and a one-group change, at two sizes and split or not.

For each case it renders a synthetic inventory (tests/support/synth.py: CLASSES x GROUPS x NAMESPACES), with
`cluster.gitops.groupApplications` (docs/scale.md) or as one Application, into a git repository served by
`git daemon`, and starts the pinned etcd and kube-apiserver (no nodes: nothing here runs a pod) with the pinned
CRDs, Redis, and Argo CD's repo-server and application controller (simulation/argocd_local.py) with Argo CD's own
defaults: the 10M directory limit (raised only in the one-Application case, which says so), a periodic refresh of
120 s plus up to 60 s of jitter, 2 s between sync waves. Then, as a platform engineer bootstraps it, it patches
argocd-cm (docs/argocd-cm.yaml) and applies the gpugen AppProject and the tree's Applications from bootstrap/, and
measures:

- from empty: until every Application is Synced and Healthy at the commit;
- a one-group change (one allocation of one group one GPU smaller), pushed, announced as a Git webhook would (the
  refresh annotation on every Application: the small Argo CD has no webhook handler): until Synced at the commit;
- the same change back, pushed and not announced: until Argo CD's periodic refresh has synced it;
- per process (controller, repo-server, Redis, kube-apiserver, etcd) its peak resident memory, sampled every
  0.5 s, and its CPU-seconds over each phase.

No Kueue or Kyverno controller runs here, so nothing writes the status that Argo CD's health checks of queues
and policies wait for (Kueue's Active condition, Kyverno's readiness); this benchmark declares those kinds Healthy
in argocd-cm so that the sync waves proceed, which measures Argo CD's work, not the controllers'. Their health
checks are proven against the controllers in the simulated FLAME (tests/flame).

    .venv/bin/python -m benchmarks.argocd_scale [--groups 200 2000] [--classes 64] [--namespaces 3]
        [--applications 8] [--single] [--work DIR] [--write-readme]

--single adds the largest size as one Application with the repo-server's limit raised; --write-readme rewrites
the argocd_scale table of benchmarks/README.md. Every process it starts is stopped by it, also on Ctrl-C.
"""
from __future__ import annotations

import argparse
import collections
import os
import pathlib
import sys
import tempfile
import time
from dataclasses import dataclass, field

import yaml

from benchmarks.common import MemorySampler, conditions, cpu_seconds, resident_mb, write_readme
from generator.inventory.load import load_inventory
from generator.inventory.naming import GPUGEN_PROJECT, project_name
from generator.layout import KUSTOMIZATION_FILE, SITE_SETTINGS_FOLDER
from generator.versions import pins
from simulation import argocd_local
from simulation.argocd_local import ARGOCD_NAMESPACE, start_argocd, start_git, start_redis
from simulation.control_plane import install_crds, start_control_plane
from simulation.kube import Client
from simulation.manifests import load_all
from simulation.processes import Processes
from simulation.waiting import STALL
from tests.support import synth

BEGIN, END = "<!-- argocd_scale -->", "<!-- /argocd_scale -->"
COMPARE_OPTIONS = "argocd.argoproj.io/compare-options"
# Seconds between two looks at the Applications: each look reads every Application's status, which lists each of its
# objects (megabytes at national scale); looking every second took a third of a core from what is measured.
POLL = 5.0
# Kinds whose health Argo CD reads from a controller's status; none of those controllers runs here.
CONTROLLER_HEALTH_GROUPS = ("kueue.x-k8s.io", "policies.kyverno.io", "kyverno.io")
# Argo CD's defaults, written out: ARGOCD_SYNC_WAVE_DELAY (the simulated FLAME sets 0).
DEFAULT_SYNC_WAVE_DELAY = "2"
# Seconds these usually take on a fast machine, for the waits' ceilings (simulation/waiting.py); the waits end
# early only when nothing moves for their stall time.
FROM_EMPTY_USUAL = 600.0
CHANGE_USUAL = 240.0
# The one-Application case: the repo-server's limit raised above the tree (argocd-cmd-params-cm
# reposerver.max.combined.directory.manifests.size).
RAISED_LIMIT = "100M"


@dataclass
class Case:
    groups: int
    applications: int | None  # groupApplications, None: one Application
    classes: int
    namespaces: int
    site_settings: bool = False      # the controller runs with the settings of bootstrap/argocd-settings/
    server_side_diff: bool = True    # False: the tree's Applications say ServerSideDiff=false

    @property
    def name(self) -> str:
        split = f"{self.applications} group Applications" if self.applications else "one Application, limit raised"
        return (f"{self.classes} × {self.groups:,} × {self.namespaces}, {split}"
                + (", gpugen's Argo CD settings" if self.site_settings else "")
                + ("" if self.server_side_diff else ", client-side diff"))


@dataclass
class Result:
    case: Case
    objects: int = 0
    largest_folder_mb: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)              # phase -> seconds
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)      # phase -> process -> CPU-seconds
    peak_mb: dict[str, float] = field(default_factory=dict)             # process -> peak RSS


def named_memory(pids: dict[str, int]):
    """A sample of each named process's resident MB (MemorySampler)."""
    return lambda: {name: mb for name, pid in pids.items() if (mb := resident_mb(pid)) is not None}


def named_cpu(pids: dict[str, int]) -> dict[str, float]:
    return {name: seconds for name, pid in pids.items() if (seconds := cpu_seconds(pid)) is not None}


def inventory_text(case: Case) -> str:
    data = synth.build(case.classes, case.groups, case.namespaces)
    if case.applications:
        data["cluster"].setdefault("gitops", {})["groupApplications"] = case.applications
    return synth.to_yaml(data)


def one_group_change(inventory_file: pathlib.Path, back: bool = False) -> str:
    """One allocation of one group one GPU smaller (`back`: as it was); the group's name."""
    data = yaml.safe_load(inventory_file.read_text())
    for name, group in data["groups"].items():
        for allocation in group["allocations"].values():
            if allocation["gpus"] >= 2 and "lendingLimit" not in allocation:
                allocation["gpus"] += 1 if back else -1
                inventory_file.write_text(synth.to_yaml(data))
                return name
    raise RuntimeError("no allocation of two GPUs or more to change")


def health_overrides(tree: pathlib.Path) -> dict[str, str]:
    """argocd-cm keys that call every kind of CONTROLLER_HEALTH_GROUPS in the tree Healthy (see the docstring)."""
    kinds = set()
    for path in tree.rglob("*.yaml"):
        for obj in load_all(path.read_text()):
            group = obj.get("apiVersion", "").rpartition("/")[0]
            if group in CONTROLLER_HEALTH_GROUPS:
                kinds.add((group, obj["kind"]))
    script = 'return {status = "Healthy", message = "not assessed: its controller does not run in this benchmark"}'
    return {f"resource.customizations.health.{group}_{kind}": script for group, kind in sorted(kinds)}


def settings_env(bootstrap: pathlib.Path) -> dict[str, str]:
    """The controller's environment as the Component of bootstrap/argocd-settings/ makes it: its own variables, and
    argocd-cmd-params-cm's keys under the names Argo CD's install manifest gives them (configMapKeyRef)."""
    component = yaml.safe_load((bootstrap / SITE_SETTINGS_FOLDER / KUSTOMIZATION_FILE).read_text())
    install = load_all((argocd_local.argocd_module() / "manifests" / "install.yaml").read_text())
    (controller,) = [o for o in install if o["kind"] == "StatefulSet"]
    names = {e["valueFrom"]["configMapKeyRef"]["key"]: e["name"]
             for c in controller["spec"]["template"]["spec"]["containers"] for e in c.get("env", [])
             if "configMapKeyRef" in e.get("valueFrom", {})}
    env: dict[str, str] = {}
    for entry in component["patches"]:
        patch = yaml.safe_load(entry["patch"])
        if patch["kind"] == "StatefulSet":
            for container in patch["spec"]["template"]["spec"]["containers"]:
                env.update((e["name"], e["value"]) for e in container.get("env", []))
        elif patch["kind"] == "ConfigMap":
            env.update((names[key], value) for key, value in patch["data"].items())
    return env


def tree_size(tree: pathlib.Path) -> tuple[int, float]:
    """Objects in the tree, and the largest Application folder's manifests in MB."""
    files = [p for p in tree.rglob("*.yaml") if p.name != "kustomization.yaml"]
    by_folder: dict[str, int] = collections.defaultdict(int)
    for path in files:
        relative = path.relative_to(tree).parts
        folder = relative[0] if (tree / relative[0] / "kustomization.yaml").exists() else "."
        by_folder[folder] += path.stat().st_size
    return len(files), max(by_folder.values()) / 1e6


def run_case(case: Case, work: pathlib.Path, log, periodic_up_to: int) -> Result:
    result = Result(case)
    inventory_file = work / "inventory.yaml"
    inventory_file.write_text(inventory_text(case))
    inventory = load_inventory(inventory_file)
    procs = Processes()
    sampler = None
    try:
        (work / "plane").mkdir()
        plane = start_control_plane(work / "plane", procs=procs, logs=work / "logs")
        admin = Client.from_kube(plane.kube)
        install_crds(plane.kube, plane.apiserver_log)
        repo = start_git(work, procs, inventory_file, "127.0.0.1:1/charts", None)
        tree = repo.checkout / inventory.cluster.gitops.path
        result.objects, result.largest_folder_mb = tree_size(tree)
        log(f"{case.name}: {result.objects:,} objects, largest Application {result.largest_folder_mb:.2f} MB")
        argo = start_argocd(work, procs, plane, admin, repo, start_redis(work, procs, None), None,
                            reconciliation=None,
                            repo_server_args=() if case.applications else (
                                "--max-combined-directory-manifests-size", RAISED_LIMIT),
                            controller_env={"ARGOCD_SYNC_WAVE_DELAY": DEFAULT_SYNC_WAVE_DELAY,
                                            **(settings_env(repo.checkout / "bootstrap") if case.site_settings
                                               else {})})
        by_name = {p.name: p.popen.pid for p in procs.started}
        pids = {**{name: by_name[name] for name in ("argocd-application-controller", "argocd-repo-server", "redis",
                                                    "kube-apiserver", "etcd")}, HARNESS: os.getpid()}
        sampler = MemorySampler(named_memory(pids))
        sampler.start()

        # The README's bootstrap for what this benchmark runs: argocd-cm's patch, then the tree's project and
        # Applications (the components' need nodes).
        patch = yaml.safe_load(argocd_local.ARGOCD_CM_PATCH.read_text())
        patch["data"].update(health_overrides(tree))
        admin.patch_merge("v1", "ConfigMap", "argocd-cm", patch, ARGOCD_NAMESPACE)
        project = project_name(inventory, GPUGEN_PROJECT)
        bootstrap = [obj for path in sorted((repo.checkout / "bootstrap" / "platform" / "argocd").rglob("*.yaml"))
                     for obj in load_all(path.read_text())]
        ours = [obj for obj in bootstrap if obj["kind"] == "AppProject" and obj["metadata"]["name"] == project]
        ours += [obj for obj in bootstrap if obj["kind"] == "Application" and obj["spec"]["project"] == project]
        if not case.server_side_diff:
            for obj in ours:
                if obj["kind"] == "Application":
                    obj["metadata"].setdefault("annotations", {})[COMPARE_OPTIONS] = "ServerSideDiff=false"
        names = {obj["metadata"]["name"] for obj in ours if obj["kind"] == "Application"}

        def phase(label: str, act, revision_of):
            before = named_cpu(pids)
            start = time.monotonic()
            revision = act()
            argo.wait_applications(names, CHANGE_USUAL if result.phases else FROM_EMPTY_USUAL, revision_of(revision),
                                   refusal_lasts=STALL, interval=POLL)
            result.phases[label] = time.monotonic() - start
            after = named_cpu(pids)
            result.cpu[label] = {name: after[name] - before.get(name, 0.0) for name in after}
            log(f"  {label}: {result.phases[label]:.1f} s; CPU-seconds "
                + ", ".join(f"{name} {seconds:.0f}" for name, seconds in result.cpu[label].items()))

        def apply_bootstrap():
            for obj in ours:
                admin.apply(obj)
            return repo.revision
        phase("from empty", apply_bootstrap, lambda revision: revision)

        def change(back: bool, announce: bool):
            def act():
                group = one_group_change(inventory_file, back)
                revision = repo.commit(inventory_file, f"{group}: one allocation {'back' if back else 'smaller'}")
                if announce:
                    argo.refresh()
                return revision
            return act
        phase("one-group change, announced", change(False, True), lambda revision: revision)
        if case.groups <= periodic_up_to:
            phase("one-group change, periodic refresh", change(True, False), lambda revision: revision)
        result.peak_mb = dict(sampler.peak)
    finally:
        if sampler is not None:
            sampler.finish()
        procs.stop()
    return result


HARNESS = "harness"
PROCESSES = {"argocd-application-controller": "controller", "argocd-repo-server": "repo-server",
             "kube-apiserver": "API server", "etcd": "etcd", "redis": "Redis",
             HARNESS: "this benchmark (it reads the Applications every 5 s)"}


def table(results: list[Result], load_at_start) -> str:
    version = pins()["ARGOCD_VERSION"]
    phases = list(dict.fromkeys(label for r in results for label in r.phases))
    lines = [conditions(load_at_start), "",
             f"Argo CD {version} with its defaults (the 10M directory limit unless the case says otherwise, a periodic "
             "refresh every 120 s plus up to 60 s of jitter, the repo-server's revision cached 3 minutes, 2 s between "
             "sync waves) on Kubernetes "
             f"{pins()['KUBERNETES_VERSION']}; each phase ends when every Application is Synced and Healthy at the "
             "commit.", "",
             "| case | objects | largest Application | " + " | ".join(phases) + " | from empty, per group |",
             "|---|---:|---:|" + "---:|" * len(phases) + "---:|"]
    for r in results:
        lines.append(f"| {r.case.name} | {r.objects:,} | {r.largest_folder_mb:.2f} MB | "
                     + " | ".join(f"{r.phases[label]:.0f} s" if label in r.phases else "—" for label in phases)
                     + f" | {r.phases['from empty'] / r.case.groups * 1000:.0f} ms |")
    lines += ["", "CPU-seconds of each process over each phase, and its peak resident memory over the whole run:", "",
              "| case | process | " + " | ".join(phases) + " | peak RSS |", "|---|---|" + "---:|" * (len(phases) + 1)]
    for r in results:
        for process, label in PROCESSES.items():
            lines.append(f"| {r.case.name} | {label} | "
                         + " | ".join(f"{r.cpu[phase].get(process, 0):.0f}" if phase in r.cpu else "—"
                                      for phase in phases)
                         + f" | {r.peak_mb.get(process, 0):,.0f} MB |")
    split = sorted((r for r in results if r.case.applications), key=lambda r: r.case.groups)
    if len(split) >= 2:
        small, large = split[0], split[-1]
        ratio = (large.phases["from empty"] / large.case.groups) / (small.phases["from empty"] / small.case.groups)
        lines += ["", f"Time per group from empty at {large.case.groups:,} groups against {small.case.groups:,}: "
                  f"{ratio:.2f}×."]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[200, 2000])
    parser.add_argument("--classes", type=int, default=64)
    parser.add_argument("--namespaces", type=int, default=3)
    parser.add_argument("--applications", type=int, default=8, help="groupApplications of the split cases")
    parser.add_argument("--single", action="store_true", help="also the largest size as one Application")
    parser.add_argument("--periodic-up-to", type=int, default=200,
                        help="the periodic-refresh phase only for cases of at most this many groups (it waits on "
                             "Argo CD's timers, not on the platform's size)")
    parser.add_argument("--site-settings", action="store_true",
                        help="the split cases with the controller set as bootstrap/argocd-settings/ says")
    parser.add_argument("--client-side-diff", action="store_true",
                        help="the split cases with ServerSideDiff=false on the tree's Applications")
    parser.add_argument("--work", type=pathlib.Path, default=None)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args(argv)
    load_at_start = os.getloadavg()
    cases = [Case(groups, args.applications, args.classes, args.namespaces, args.site_settings,
                  not args.client_side_diff) for groups in args.groups]
    if args.single:
        cases.append(Case(max(args.groups), None, args.classes, args.namespaces))
    results = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="gpugen-argocd-scale-", dir=args.work) as tmp:
            results.append(run_case(case, pathlib.Path(tmp), lambda line: print(line, flush=True),
                                    args.periodic_up_to))
    text = table(results, load_at_start)
    print(text)
    if args.write_readme:
        write_readme(text, BEGIN, END)
        print("rewrote the argocd_scale table of benchmarks/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
