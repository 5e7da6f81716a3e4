"""The platform's components (Kyverno, JobSet, Trainer, Kueue) as the rendered bootstrap/ Applications install
them: `chart_objects` is what Argo CD's repo server renders for a component Application (the real helm over the
chart shipped in the component's pinned Go module, with the Application's values: simulation/charts.py), and
`RUNS` names the Deployments of each chart that the simulated FLAME runs as a process (simulation/pods.py)
and the pinned binary it runs, as each component's folder says (generator/components/<name>/: simulation).
"""
from __future__ import annotations

import hashlib
import json
import os
import pathlib
from collections.abc import Iterable

from generator.builders.bootstrap import COMPONENT_LABEL
from generator.components import COMPONENTS
from simulation import go_tools, manifests, pins

HERE = pathlib.Path(__file__).resolve().parent

# component -> how the simulations run it, for the components they run (the others' folders say NotSimulated)
SIMULATED = {name: run for name, facts in COMPONENTS.items() if (run := facts.simulated()) is not None}
# component -> the Deployments of its chart this simulation runs as processes (facts.Process: a name suffix, the
# tool that runs it, its host flags and environment)
RUNS = {name: run.processes for name, run in SIMULATED.items()}
COMPONENT_TOOLS = [process.tool for processes in RUNS.values() for process in processes] + ["helm"]


def chart_objects(application: dict) -> list[dict]:
    """What Argo CD would apply for this component Application. `helm template` is deterministic for one
    Application and one pinned chart and helm, so its output is cached under ~/.cache/gpugen/flame-charts keyed
    by those (and by this module and charts.py), which keeps a warm start fast. Where the chart is pulled from
    (source.repoURL: upstream or a mirror) does not change what it renders."""
    from simulation import charts  # simulation/charts.py: helm template as Argo CD's repo server runs it
    source = {k: v for k, v in application["spec"]["source"].items() if k != "repoURL"}
    ident = json.dumps([source, application["spec"]["destination"], pins.versions(),
                        (HERE / "charts.py").read_text(),
                        repr(COMPONENTS[application["metadata"]["labels"][COMPONENT_LABEL]].chart.dependencies)],
                       sort_keys=True)
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
    """The component Applications of a rendered bootstrap/ tree, in sync-wave order (component_applications_of)."""
    return component_applications_of(manifests.load_one(f) for f in sorted(bootstrap.rglob("*.yaml")))


def component_applications_of(objects: Iterable[dict]) -> list[dict]:
    """The component Applications among a render's bootstrap objects, in sync-wave order. A component whose folder
    says the simulations do not run it (facts.NotSimulated) stops the simulation here, saying why."""
    apps = []
    for obj in objects:
        if obj.get("kind") == "Application" and COMPONENT_LABEL in obj["metadata"].get("labels", {}):
            facts = COMPONENTS[obj["metadata"]["labels"][COMPONENT_LABEL]]
            if facts.name not in SIMULATED:
                raise LookupError(f"the simulated clusters cannot install {facts.name}: {facts.simulation.why} "
                                  f"(generator/components/{facts.name}/); simulate the inventory with "
                                  f"cluster.components.{facts.name} install: false, existing: true")
            apps.append(obj)
    return sorted(apps,
                  key=lambda a: int(a["metadata"].get("annotations", {}).get("argocd.argoproj.io/sync-wave", "0")))
