"""A tree split into Applications (cluster.gitops.groupApplications): every group's objects in its own Application,
the rest in the platform's, and adding or removing a group touches that group's Application and the platform's
alone, moving no object between Applications (which would prune it and create it anew)."""

from __future__ import annotations

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from generator.applications import group_objects
from generator.inventory.load import load_inventory_text
from generator.inventory.naming import PLATFORM_FOLDER, group_application, group_application_folder
from generator.layout import KUSTOMIZATION_FILE
from generator.tree import render_trees
from tests.support import synth
from tests.support.inventories import to_text


def render(data: dict) -> dict[str, bytes]:
    return render_trees(load_inventory_text(to_text(data), "split.yaml"), "split.yaml").synced


def where(files: dict[str, bytes]) -> dict[tuple[str, str, str], str]:
    """Each object of a split tree, and the folder (Application) it is in."""
    out = {}
    for path, content in files.items():
        if not path.endswith(KUSTOMIZATION_FILE):
            obj = yaml.safe_load(content)
            out[(obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])] = path.split("/")[0]
    return out


@st.composite
def platforms(draw) -> tuple[dict, str]:
    """A synthetic platform split into Applications, and one of its groups (the one added or removed)."""
    data = synth.build(draw(st.integers(1, 3)), draw(st.integers(4, 12)), draw(st.integers(1, 2)),
                       seed=draw(st.integers(0, 1000)))
    data["cluster"]["gitops"]["groupApplications"] = draw(st.integers(2, 7))
    return data, draw(st.sampled_from(sorted(data["groups"])))


def without(data: dict, group: str) -> dict:
    data = copy.deepcopy(data)
    del data["groups"][group]
    return data


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(platforms())
def test_adding_a_group_touches_its_application_and_the_platforms_and_moves_nothing(case):
    data, group = case
    before, after = render(without(data, group)), render(data)
    touched = {path.split("/")[0] for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    inventory = load_inventory_text(to_text(data), "split.yaml")
    own = group_application_folder(inventory, group_application(inventory, group))
    assert touched <= {own, PLATFORM_FOLDER}, touched
    old, new = where(before), where(after)
    assert {key: (old[key], new[key]) for key in old.keys() & new.keys() if old[key] != new[key]} == {}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(platforms())
def test_each_groups_objects_are_in_its_application_and_the_rest_in_the_platforms(case):
    data, _ = case
    inventory = load_inventory_text(to_text(data), "split.yaml")
    files = render(data)
    owners = group_objects(inventory)
    folders = {name.split("/")[0] for name in files}
    assert folders == {PLATFORM_FOLDER, *(group_application_folder(inventory, index)
                                          for index in range(data["cluster"]["gitops"]["groupApplications"]))}
    for (kind, namespace, name), folder in where(files).items():
        group = owners.get((kind, namespace or None, name))
        expected = (group_application_folder(inventory, group_application(inventory, group)) if group
                    else PLATFORM_FOLDER)
        assert folder == expected, (kind, namespace, name)
    # Each group's namespaces are all in its Application: a group is never split across two.
    assert {kind for kind, _, _ in owners} >= {"Namespace", "LocalQueue", "ClusterQueue"}


def test_one_application_stays_the_tree_it_was():
    """Without groupApplications the tree has no Application folders: FLAME's layout."""
    data = synth.build(2, 6, 1)
    assert not any(path.startswith((PLATFORM_FOLDER + "/", "groups-")) for path in render(data))


def test_plan_names_the_application_of_each_change_and_flags_what_moves():
    from generator.plan.output.text import plan_text
    from generator.plan.plans import make_plan
    data = synth.build(2, 8, 1)
    data["cluster"]["gitops"]["groupApplications"] = 3
    group = sorted(data["groups"])[3]
    inventory = load_inventory_text(to_text(data), "split.yaml")
    own = group_application_folder(inventory, group_application(inventory, group))
    plan = make_plan(render(without(data, group)), render(data))
    text = plan_text(plan)
    assert f"+ {group} (added, in {own}/)" in text, text
    assert "moves between Applications" not in text
    # Splitting a tree one Application synced: every object moves, and the plan says each.
    one = copy.deepcopy(data)
    del one["cluster"]["gitops"]["groupApplications"]
    moved = [risk for risk in make_plan(render(one), render(data)).risks if "moves between Applications" in risk.what]
    assert len(moved) == len(where(render(data))), moved[:3]
    assert any(f"to that of {own}/; the first is deleted without its objects" in risk.what for risk in moved)
