"""Every component folder (generator/components/<name>/) is whole: its facts, and each optional part it declares
(its chart in its pinned module, CRDs serving the API groups the platform uses, metrics with what stops while they
are down, tools in the build list, values, settings, a simulated run or why there is none). A folder whose part is
missing or does not hold fails here, naming the part (CONTRIBUTING.md, "Adding a component").
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.builders.bootstrap import component_application
from generator.components import COMPONENTS
from generator.components.facts import ComponentFacts, NotSimulated, ValuesContext
from generator.fields import Component
from generator.inventory.models import Components
from generator.versions import pins
from simulation import go_tools
from simulation.prerequisites import unavailable

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p.parent.name for p in (REPO / "generator" / "components").glob("*/__init__.py"))
# The folders in the registry: one missing there fails test_there_are_component_folders, naming it.
REGISTERED = [name for name in FOLDERS if name in COMPONENTS]


def facts(name: str) -> ComponentFacts:
    return COMPONENTS[name]


def build_list() -> dict[str, str]:
    """Tool -> `required` or `optional`, as tools/build.sh reads the list (tools/common.sh)."""
    out = subprocess.run(["bash", "-c", 'source tools/common.sh && tools_lines'], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return {row[0]: "optional" if row[2:3] == ["optional"] else "required" for row in rows}


def test_there_are_component_folders():
    unregistered = [name for name in FOLDERS if name not in COMPONENTS]
    assert unregistered == [], f"generator/components/{{{','.join(unregistered)}}}/ not in COMPONENTS (__init__.py)"
    assert sorted(COMPONENTS) == FOLDERS


@pytest.mark.parametrize("name", REGISTERED)
def test_its_facts(name):
    component = facts(name)
    assert component.name == name, f"generator/components/{name}/: FACTS.name is {component.name!r}"
    for pin in (component.chart.version_pin, component.app_version_pin()):
        assert pin in pins(), f"{name}: {pin} is not pinned in generator/versions.env"
    assert component.simulation is not None, \
        f"{name}: its facts say neither how the simulations run it (Simulation) nor why not (NotSimulated)"
    if isinstance(component.simulation, NotSimulated):
        assert component.simulation.why.strip(), f"{name}: NotSimulated says no reason"
    if component.chart.metrics:
        assert component.when_down, f"{name}: it serves metrics but does not say what stops while it is down"
    if component.api_groups or component.crds:
        assert component.crds and component.chart.module, \
            f"{name}: its API groups' CRDs are read from the chart's module (crds, chart.module)"


@pytest.mark.parametrize("name", REGISTERED)
def test_its_values(name, flame):
    component = facts(name)
    if component.values is None:
        return
    settings = flame.cluster.components.by_name()[name]
    for role in (None, "manager", "worker"):
        values = component.values(ValuesContext(settings=settings, app_version=component.app_version(), role=role,
                                                research_namespaces=("a", "b"), monitoring=True, fair_sharing=True))
        assert isinstance(values, dict), f"{name}: values() gave {type(values).__name__}, not a dict"


@pytest.mark.parametrize("name", REGISTERED)
def test_its_settings(name):
    model = Components.model_fields[name].annotation
    settings = facts(name).settings or Component
    assert issubclass(settings, Component) and model is settings, f"{name}: its settings are not its model"


@pytest.mark.parametrize("name", [name for name in REGISTERED if facts(name).chart.module])
def test_its_chart_is_in_its_pinned_module(name):
    component = facts(name)
    folder = go_tools.module_dir(component.chart.module, component.app_version()) / component.chart.folder()
    assert (folder / "Chart.yaml").is_file(), \
        f"{name}: no chart at {component.chart.module}@{component.app_version()}/{component.chart.folder()}"
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    assert (chart["name"], str(chart["version"])) == (component.chart.name, component.chart_version()), \
        f"{name}: the module's chart is {chart['name']} {chart['version']}"


def test_no_tool_is_listed_twice():
    listed = [line.split()[0] for line in (REPO / "tools" / "tools.list").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    components = [tool.name for component in COMPONENTS.values() for tool in component.tools]
    assert sorted(set(listed) & set(components)) == [] and len(set(components)) == len(components)


@pytest.mark.parametrize("name", REGISTERED)
def test_its_tools_are_built(name):
    listed = build_list()
    recipes = (REPO / "tools" / "build.sh").read_text()
    for tool in facts(name).tools:
        assert listed.get(tool.name) == ("optional" if tool.optional else "required"), \
            f"{name}: {tool.name} is not in tools/build.sh's list"
        own_recipe = re.search(rf"^\s+(\S+\|)*{re.escape(tool.name)}(\|\S+)*\)", recipes, re.MULTILINE)
        assert (tool.module and tool.package) or own_recipe, \
            f"{name}: {tool.name} has neither a module and package nor a recipe in tools/build.sh (build_tool)"


@pytest.mark.parametrize("name", [name for name in REGISTERED if facts(name).crds])
def test_its_crds_are_in_its_pinned_module(name):
    component = facts(name)
    module = go_tools.module_dir(component.chart.module, component.app_version())
    files = sorted(path for pattern in component.crds for path in module.glob(pattern))
    assert files, f"{name}: no CRDs match {component.crds} in {component.chart.module}@{component.app_version()}"
    served = {(crd["spec"]["group"], version["name"]) for path in files
              for crd in yaml.safe_load_all(path.read_text()) if crd and crd.get("kind") == "CustomResourceDefinition"
              for version in crd["spec"]["versions"] if version.get("served")}
    for group in component.api_groups:
        assert (group.name, group.version) in served, f"{name}: its CRDs do not serve {group.api_version}"


@pytest.mark.parametrize("name", [name for name in REGISTERED if facts(name).simulated()])
def test_its_simulated_run(name, flame):
    """Each process the simulation runs is a Deployment of the chart as Argo CD would render it, run by one of the
    component's tools; every other Deployment of the chart is named as not run."""
    from simulation.components import chart_objects
    component = facts(name)
    run = component.simulated()
    assert run.processes, f"{name}: no simulated run (facts.simulation.processes)"
    tools = {tool.name for tool in component.tools}
    assert {process.tool for process in run.processes} | {tool for _, tool in run.hook_images} <= tools, \
        f"{name}: the simulation runs a tool that is not the component's"
    if not go_tools.tool_bin("helm").exists():
        unavailable("helm is not built: run `bash tools/build.sh helm`")
    settings = flame.cluster.components.by_name()[name]
    application = component_application(flame, name, settings.model_copy(update={"install": True}))
    deployments = [o["metadata"]["name"] for o in chart_objects(application) if o["kind"] == "Deployment"]
    for process in run.processes:
        assert [d for d in deployments if d.endswith(process.deployment)], \
            f"{name}: no Deployment named *{process.deployment} in its chart: {deployments}"
    not_run = dict(run.not_run)
    unaccounted = [d for d in deployments if d not in not_run
                   and not any(d.endswith(process.deployment) for process in run.processes)]
    assert unaccounted == [], f"{name}: its chart's Deployments {unaccounted} are neither run nor named as not run"
