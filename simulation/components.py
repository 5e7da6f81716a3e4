"""The platform's components (Kyverno, JobSet, Trainer, Kueue) as the rendered bootstrap/ Applications install
them: `chart_objects` is what Argo CD's repo server renders for a component Application (the real helm over the
chart shipped in the component's pinned Go module, with the Application's values: simulation/charts.py), and
`RUNS` names the Deployments of each chart that the simulated FLAME runs as a process (simulation/pods.py)
and the pinned binary it runs.
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib

HERE = pathlib.Path(__file__).resolve().parent
from simulation import go_tools, manifests, pins  # noqa: E402

COMPONENT_LABEL = "gpugen/component"

# component -> the Deployments this simulation runs: (a name suffix, the tool of tools/tools.list that runs it)
RUNS = {
    "kyverno": (("admission-controller", "kyverno-controller"), ("cleanup-controller", "kyverno-cleanup-controller")),
    "jobset": (("controller", "jobset"),),
    "trainer": (("controller-manager", "trainer"),),
    "kueue": (("controller-manager", "kueue"),),
}
COMPONENT_TOOLS = [tool for runs in RUNS.values() for _, tool in runs] + ["helm"]


def chart_objects(application: dict) -> list[dict]:
    """What Argo CD would apply for this component Application. `helm template` is deterministic for one
    Application and one pinned chart and helm, so its output is cached under ~/.cache/gpugen/flame-charts keyed
    by those (and by this module and charts.py), which keeps a warm start fast. Where the chart is pulled from
    (source.repoURL: upstream or a mirror) does not change what it renders."""
    from simulation import charts  # simulation/charts.py: helm template as Argo CD's repo server runs it
    source = {k: v for k, v in application["spec"]["source"].items() if k != "repoURL"}
    ident = json.dumps([source, application["spec"]["destination"], pins.versions(),
                        (HERE / "charts.py").read_text()], sort_keys=True)
    cached = go_tools.cache_dir() / "flame-charts" / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.yaml"
    if cached.exists():
        return [d for d in manifests.load_all(cached.read_text()) if d]
    objects = charts.helm_template(application)
    cached.parent.mkdir(parents=True, exist_ok=True)
    tmp = cached.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(manifests.dump_all(objects))
    tmp.replace(cached)
    return objects


def component_applications(bootstrap: pathlib.Path) -> list[dict]:
    """The component Applications of a rendered bootstrap/ tree, in sync-wave order."""
    apps = []
    for f in sorted(bootstrap.rglob("*.yaml")):
        obj = manifests.load_one(f)
        if obj.get("kind") == "Application" and COMPONENT_LABEL in obj["metadata"].get("labels", {}):
            apps.append(obj)
    return sorted(apps, key=lambda a: int(a["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", "0")))
