"""Render a component Application of bootstrap/ the way Argo CD's repo server does: the real helm (built by
tools/build.sh from its pinned module) over the upstream chart shipped in the component's pinned Go module.

    objects = helm_template(application)    # application: a rendered Argo CD Application (dict)

What Argo CD runs (argo-cd v3.6 util/helm/cmd.go `template`):
    helm template CHART --name-template RELEASE --namespace NS --kube-version V --values VALUES --include-crds
Argo CD pulls the packaged chart from the chart repository; a packaged chart carries its dependencies under
charts/. Here the chart comes unpackaged from the Go module, so its dependencies are laid out as `helm dependency
build` would: from the module that ships them where one does (JobSet's chart for Trainer, the kyverno-api chart from
the kyverno/api module at the version the pinned Kyverno requires). Helm refuses to template a chart with a missing
dependency even when its condition disables it (pkg/action CheckDependencies checks names only), so a dependency
whose condition is false in the Application's values is satisfied by an empty chart of that name; such a
dependency is never rendered, and `disabled_dependencies` is asserted by the tests.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import tempfile

import yaml

from generator.builders.bootstrap import COMPONENT_LABEL
from generator.components import COMPONENTS
from generator.versions import pins

from simulation import go_tools, manifests

REPO = pathlib.Path(__file__).resolve().parents[1]


def tool(name: str) -> pathlib.Path:
    """The cached binary tools/build.sh builds for `name` at its pin (<NAME>_VERSION)."""
    return go_tools.tool_bin(name)


module_dir = go_tools.module_dir


def _required_version(module: str, dependency: str) -> str:
    """The version of `dependency` that `module`'s go.mod requires (go mod edit -json on the cached go.mod)."""
    gomod = module_dir(*module.split("@")) / "go.mod"
    info = json.loads(subprocess.run(["go", "mod", "edit", "-json", str(gomod)], check=True, capture_output=True,
                                     text=True).stdout)
    return next(r["Version"] for r in info["Require"] if r["Path"] == dependency)


def component_of(application: dict) -> str:
    return application["metadata"]["labels"][COMPONENT_LABEL]


def chart_source_dir(component: str) -> pathlib.Path:
    """The chart's folder in the Go module that ships it, at the component's app version."""
    facts = COMPONENTS[component]
    if not facts.chart.module:
        raise LookupError(f"{component}: its chart comes from {facts.chart.repo_url} only, which this machine does "
                          "not reach (its folder names no Go module that ships it)")
    return module_dir(facts.chart.module, facts.app_version()) / facts.chart.folder()


def _enabled(values: dict, condition: str | None) -> bool:
    """Helm's condition: the first path of the comma-separated list that resolves decides; none -> enabled."""
    if not condition:
        return True
    for path in condition.split(","):
        node = values
        for part in path.strip().split("."):
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, bool):
            return node
    return True


def _chart_values(chart_dir: pathlib.Path, overrides: dict) -> dict:
    base = yaml.safe_load((chart_dir / "values.yaml").read_text()) or {}

    def merge(a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            return {**a, **{k: merge(a.get(k), v) for k, v in b.items()}}
        return b
    return merge(base, overrides)


def dependency_source(component: str, name: str) -> tuple[str, str, str] | None:
    """(module, version, path in module) of the chart dependency `name` of `component`'s chart, as its folder says
    (generator/components/<name>/: chart.dependencies); None when no pinned module ships it."""
    facts = COMPONENTS[component]
    for dependency in facts.chart.dependencies:
        if dependency.name == name:
            version = pins()[dependency.pin] if dependency.pin else _required_version(
                f"{facts.chart.module}@{facts.app_version()}", dependency.module)
            return dependency.module, version, dependency.path
    return None


def prepare_chart(component: str, values: dict, workdir: pathlib.Path) -> tuple[pathlib.Path, list[str]]:
    """Copy the chart and lay out its dependencies; returns (chart dir, names of disabled dependencies)."""
    source = chart_source_dir(component)
    chart_dir = workdir / source.name
    shutil.copytree(source, chart_dir, dirs_exist_ok=True)
    chart_yaml = yaml.safe_load((chart_dir / "Chart.yaml").read_text())
    merged = _chart_values(chart_dir, values)
    disabled = []
    for dep in chart_yaml.get("dependencies") or []:
        target = chart_dir / "charts" / dep["name"]
        if target.exists():  # shipped inside the chart (Kyverno's crds and grafana)
            continue
        if not _enabled(merged, dep.get("condition")):
            disabled.append(dep["name"])
            target.mkdir(parents=True)
            (target / "Chart.yaml").write_text(yaml.safe_dump(
                {"apiVersion": "v2", "name": dep["name"], "version": str(dep["version"]).split()[0]}))
            continue
        source = dependency_source(component, dep["name"])
        if source is None:
            raise LookupError(f"{component}: dependency {dep['name']} is enabled but no pinned module ships it")
        module, version, path = source
        shutil.copytree(module_dir(module, version) / path, target)
    return chart_dir, disabled


def helm_template(application: dict, workdir: pathlib.Path | None = None) -> list[dict]:
    """The objects Argo CD would apply for this component Application."""
    return template_with_details(application, workdir)[0]


def template_with_details(application: dict, workdir: pathlib.Path | None = None) -> tuple[list[dict], list[str]]:
    component = component_of(application)
    source = application["spec"]["source"]
    chart = COMPONENTS[component].chart
    assert source["chart"] == chart.name and source["targetRevision"] == pins()[chart.version_pin], source
    helm = tool("helm")
    if not helm.exists():
        raise FileNotFoundError(f"helm not built: {helm} (run `bash tools/build.sh helm`)")
    values = source["helm"].get("valuesObject", {})
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        tmp = pathlib.Path(tmp)
        chart_dir, disabled = prepare_chart(component, values, tmp)
        chart_version = yaml.safe_load((chart_dir / "Chart.yaml").read_text())["version"]
        assert str(chart_version).split()[0] == source["targetRevision"], (chart_version, source["targetRevision"])
        values_file = tmp / "values.yaml"
        values_file.write_text(yaml.safe_dump(values))
        cmd = [str(helm), "template", str(chart_dir), "--name-template", source["helm"]["releaseName"],
               "--namespace", application["spec"]["destination"]["namespace"],
               "--kube-version", pins()["KUBERNETES_VERSION"], "--values", str(values_file), "--include-crds"]
        env = {**os.environ, "HELM_CACHE_HOME": str(tmp / "cache"), "HELM_CONFIG_HOME": str(tmp / "config"),
               "HELM_DATA_HOME": str(tmp / "data")}
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise RuntimeError(f"helm template {component} failed:\n{proc.stderr}")
    objects = [o for o in manifests.load_all(proc.stdout) if o]
    return objects, disabled
