"""Every component folder (generator/components/<name>/) is complete: its facts, its chart's values, its own
settings when it has any, its tools in the build list, its CRDs in its pinned module, and its simulated run. A
folder that lacks a part fails here, naming the part (CONTRIBUTING.md, "Adding a component").
"""
from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from generator.builders.bootstrap import component_application
from generator.components import COMPONENTS
from generator.components.facts import ComponentFacts
from generator.inventory.fields import Component
from generator.inventory.models import Components
from generator.versions import pins
from simulation import go_tools
from simulation.prerequisites import unavailable

REPO = Path(__file__).resolve().parents[2]
FOLDERS = sorted(p.parent.name for p in (REPO / "generator" / "components").glob("*/__init__.py"))


def facts(name: str) -> ComponentFacts:
    return importlib.import_module(f"generator.components.{name}").FACTS


def build_list() -> dict[str, str]:
    """Tool -> `required` or `optional`, as tools/build.sh reads the list (tools/common.sh)."""
    out = subprocess.run(["bash", "-c", 'source tools/common.sh && tools_lines'], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]
    return {row[0]: "optional" if row[2:3] == ["optional"] else "required" for row in rows}


def test_there_are_component_folders():
    assert sorted(COMPONENTS) == FOLDERS


@pytest.mark.parametrize("name", FOLDERS)
def test_its_facts(name):
    component = facts(name)
    assert component.name == name, f"generator/components/{name}/: FACTS.name is {component.name!r}"
    assert COMPONENTS.get(name) is component, f"{name}: not in COMPONENTS (generator/components/__init__.py)"
    for pin in (component.chart.version_pin, component.chart.app_version_pin):
        assert pin in pins(), f"{name}: {pin} is not pinned in generator/versions.env"
    missing = [part for part in ("api_groups", "crds", "tools") if not getattr(component, part)]
    missing += [] if component.simulation.processes else ["simulation"]
    assert missing == [], f"{name}: its facts lack {', '.join(missing)}"


@pytest.mark.parametrize("name", FOLDERS)
def test_its_values(name, flame):
    module = REPO / "generator" / "components" / name / "values.py"
    assert module.is_file(), f"{name}: no values.py (values(inventory, role): the chart's Helm values)"
    values = importlib.import_module(f"generator.components.{name}.values").values
    for role in (None, "manager", "worker"):
        assert isinstance(values(flame, role), dict)


@pytest.mark.parametrize("name", FOLDERS)
def test_its_settings(name):
    model = Components.model_fields[name].annotation
    if (REPO / "generator" / "components" / name / "settings.py").is_file():
        settings = importlib.import_module(f"generator.components.{name}.settings").Settings
        assert issubclass(settings, Component) and model is settings, f"{name}: settings.py is not its model"
    else:
        assert model is Component


def test_no_tool_is_listed_twice():
    listed = [line.split()[0] for line in (REPO / "tools" / "tools.list").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    components = [tool.name for component in COMPONENTS.values() for tool in component.tools]
    assert sorted(set(listed) & set(components)) == [] and len(set(components)) == len(components)


@pytest.mark.parametrize("name", FOLDERS)
def test_its_tools_are_built(name):
    listed = build_list()
    recipes = (REPO / "tools" / "build.sh").read_text()
    for tool in facts(name).tools:
        assert listed.get(tool.name) == ("optional" if tool.optional else "required"), \
            f"{name}: {tool.name} is not in tools/build.sh's list"
        own_recipe = re.search(rf"^\s+(\S+\|)*{re.escape(tool.name)}(\|\S+)*\)", recipes, re.MULTILINE)
        assert (tool.module and tool.package) or own_recipe, \
            f"{name}: {tool.name} has neither a module and package nor a recipe in tools/build.sh (build_tool)"


@pytest.mark.parametrize("name", FOLDERS)
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


@pytest.mark.parametrize("name", FOLDERS)
def test_its_simulated_run(name, flame):
    """Each process the simulation runs is a Deployment of the chart as Argo CD would render it, run by one of the
    component's tools; every other Deployment of the chart is named as not run."""
    from simulation.components import chart_objects
    component = facts(name)
    run = component.simulation
    assert run and run.processes, f"{name}: no simulated run (facts.simulation.processes)"
    tools = {tool.name for tool in component.tools}
    assert {process.tool for process in run.processes} | {tool for _, tool in run.hook_images} <= tools, \
        f"{name}: the simulation runs a tool that is not the component's"
    assert set(run.roles) <= {"manager", "worker"}
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


@pytest.mark.parametrize("name", FOLDERS)
def test_its_folder_holds_only_its_parts(name):
    folder = REPO / "generator" / "components" / name
    others = [p.name for p in folder.iterdir()
              if p.suffix == ".py" and p.stem not in ("__init__", "values", "settings")]
    assert others == [], f"{name}: {others}: a folder holds __init__.py (FACTS), values.py and settings.py"
