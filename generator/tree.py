"""Lay objects out as files: one object per file, paths derived from group, kind, namespace and name.

Pure: returns {relative path: bytes}; writing is generator/files' job. A large render shares the emission with a
forked child on the second core (generator/parallel.py), with the same result.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable
from typing import Any, TypeVar

from generator import applications, emit, limits, parallel, userdocs, versions
from generator.inventory import accelerators, clusters
from generator.builders import argocd, bootstrap as bootstrap_builder, bootstrap_objects, synced_objects
from generator.kinds import GROUP_FOLDERS
from generator.layout import KUSTOMIZATION_FILE, SITE_SETTINGS_FOLDER
from generator.errors import OverLimits
from generator.inventory.models import Inventory
from generator.inventory.naming import application_folders

Files = dict[str, bytes]
Result = TypeVar("Result")

@dataclass(frozen=True)
class RenderedTrees:
    synced: Files  # the tree Argo CD syncs (rendered/), with its kustomization.yaml
    bootstrap: Files  # the app-of-apps (bootstrap/): root/ applied once by hand, platform/ synced by it
    docs: bytes  # the users' "Available runtimes" page (docs/runtimes.md)
    # What the rendered guardrails cannot refuse for this inventory's accelerators (accelerators.unguarded), and what
    # the project's checks cannot see of its components (bootstrap.unchecked): `render` warns of each.
    unguarded: tuple[str, ...] = ()


def object_path(obj: dict[str, Any]) -> str:
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj["metadata"]
    # Namespaces are DNS labels (no dots), so namespace.name is unambiguous.
    stem = f"{meta['namespace']}.{meta['name']}" if "namespace" in meta else meta["name"]
    return f"{GROUP_FOLDERS[group]}/{obj['kind'].lower()}/{stem}.yaml"


# An object already emitted at the same path of another cluster's tree, and equal: its bytes and its problems.
Emitted = dict[str, tuple[dict[str, Any], bytes, list[str]]]
Problems = list[tuple[str, str]]  # (path, reason): what Kubernetes or the file system would refuse (limits.py)

# From this many objects the emission is shared with a second process (generator/parallel.py): below it, forking
# costs more than it saves.
PARALLEL_FROM = 2000


def _emit(objects: list[dict[str, Any]], source: str, emitted: Emitted | None = None) -> tuple[Files, Problems]:
    """Each object as its file, in `objects`' order, and what in them Kubernetes would refuse. `emitted`, shared by
    the trees of several clusters, lets a tree reuse what another wrote for an equal object (every worker's
    namespaces and LocalQueues are the manager's): comparing is cheaper than emitting again."""
    files: Files = {}
    problems: Problems = []
    for obj in objects:
        path = object_path(obj)
        if path in files:
            raise ValueError(f"two objects would be written to {path}")
        known = emitted.get(path) if emitted is not None else None
        if known is not None and known[0] == obj:
            _, files[path], reasons = known
        else:
            files[path] = emit.manifest(obj, source)
            reasons = limits.object_problems(obj, path, files[path])
            if emitted is not None:
                emitted[path] = (obj, files[path], reasons)
        problems.extend((path, reason) for reason in reasons)
    return files, problems


def _emit_halves(objects: list[dict[str, Any]], source: str) -> tuple[Files, Problems]:
    """_emit, the second half of a large tree on the other core."""
    if len(objects) < PARALLEL_FROM:
        return _emit(objects, source)
    half = len(objects) // 2
    (files, problems), (rest, more) = parallel.both(lambda: _emit(objects[:half], source),
                                                    lambda: _emit(objects[half:], source))
    for path in rest:
        if path in files:
            raise ValueError(f"two objects would be written to {path}")
    files.update(rest)
    return files, problems + more


def kustomization(resources: list[str], source: str) -> bytes:
    pins = versions.pins()
    kubernetes = f"Kubernetes {pins['KUBERNETES_VERSION']} and {pins['KUBERNETES_PREVIOUS_VERSION']}"
    targets = ", ".join([kubernetes] + [f"{name.removesuffix('_VERSION').title()} {pins[name]}"
                                        for name in ("TRAINER_VERSION", "KUEUE_VERSION", "KYVERNO_VERSION",
                                                     "ARGOCD_VERSION")])
    body = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "resources": sorted(resources)}
    text = emit.header(source) + f"# Validated against {targets}.\n" + emit.to_yaml(body)
    return text.encode("utf-8")


def _bootstrap_files(inventory: Inventory, source: str) -> tuple[Files, Problems]:
    files: Files = {}
    problems: Problems = []
    folders = bootstrap_objects(inventory)
    for folder, objects in folders.items():
        emitted, found = _emit(objects, source)
        files.update((f"{folder}/{path}", content) for path, content in emitted.items())
        problems += [(f"{folder}/{path}", reason) for path, reason in found]
    if application_folders(inventory):
        applications = sum(obj["kind"] == "Application" for objects in folders.values() for obj in objects)
        files[f"{SITE_SETTINGS_FOLDER}/{KUSTOMIZATION_FILE}"] = site_settings(applications, source)
    return dict(sorted(files.items())), problems


def site_settings(applications: int, source: str) -> bytes:
    """bootstrap/argocd-settings/: Argo CD's settings for a split tree as a kustomize Component the site adds to
    its own Argo CD installation (builders/argocd.py site_settings_patches); no Application syncs it."""
    component = {"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component",
                 "patches": [{"patch": emit.to_yaml(patch)} for patch in argocd.site_settings_patches(applications)]}
    usage = ("# Argo CD's settings for a platform split into Applications (docs/scale.md): add this folder to the\n"
             "# `components:` of the kustomization that installs your Argo CD. gpugen never syncs it.\n")
    return (emit.header(source) + usage + emit.to_yaml(component)).encode("utf-8")


def _refuse_too_many(objects: list[dict[str, Any]]) -> None:
    if len(objects) > limits.MAX_OBJECTS:
        raise OverLimits([("(tree)", f"{len(objects):,} objects; gpugen renders at most {limits.MAX_OBJECTS:,}")])


def _directory(files: Files, source: str) -> Files:
    """One Application's directory: its files in order, and the kustomization.yaml listing them."""
    files = dict(sorted(files.items()))
    files[KUSTOMIZATION_FILE] = kustomization(list(files), source)
    return files


def _synced_tree(objects: list[dict[str, Any]], source: str, emitted: Emitted | None = None
                 ) -> tuple[Files, Problems]:
    """One Application's directory: a file per object, and the kustomization.yaml listing them. The object limit
    holds per cluster's tree."""
    _refuse_too_many(objects)
    files, problems = _emit(objects, source, emitted) if emitted is not None else _emit_halves(objects, source)
    return _directory(files, source), problems


def _application_trees(inventory: Inventory, objects: list[dict[str, Any]], source: str) -> tuple[Files, Problems]:
    """One cluster's tree as several Applications' folders (applications.py): <folder>/ each with its files and its
    kustomization.yaml, every folder present even when it holds no object. Emitted as one tree (its halves on the
    two cores), then shared out."""
    _refuse_too_many(objects)
    emitted, problems = _emit_halves(objects, source)
    folder_of = applications.folder_of(inventory)
    where = {object_path(obj): folder_of(obj) for obj in objects}
    by_folder: dict[str, Files] = {folder: {} for folder in application_folders(inventory)}
    for path, content in emitted.items():
        by_folder[where[path]][path] = content
    files: Files = {}
    for folder, tree in by_folder.items():
        files.update((f"{folder}/{path}", content) for path, content in _directory(tree, source).items())
    return files, [(f"{where[path]}/{path}", reason) for path, reason in problems]


def _in_folder(name: str, tree: tuple[Files, Problems]) -> tuple[Files, Problems]:
    files, problems = tree
    return ({f"{name}/{path}": content for path, content in files.items()},
            [(f"{name}/{path}", reason) for path, reason in problems])


# What a worker's namespace costs to build and write, against one of the manager's (which also carries MultiKueue's
# objects and reuses nothing): measured at national scale, it balances the two shares of _cluster_trees.
_WORKER_SHARE = 0.75


def _shares(inventory: Inventory) -> tuple[list[str], list[str]]:
    """The workers whose trees are made beside the manager's, and those made on the other core: about equal
    shares of the work, counted in namespaces."""
    cost = dict.fromkeys(clusters.workers(inventory), 0.0)
    load = 0.0  # the manager's
    for name, group in inventory.groups.items():
        size = len(group.namespaces) + 1
        load += size
        for worker in clusters.workers_of(inventory, name):
            cost[worker] += _WORKER_SHARE * size
    here: list[str] = []
    half = (load + sum(cost.values())) / 2
    for worker in reversed(clusters.workers(inventory)):
        if load + cost[worker] <= half:
            here.insert(0, worker)
            load += cost[worker]
    return here, [worker for worker in clusters.workers(inventory) if worker not in here]


def _cluster_trees(inventory: Inventory, source: str, beside: Callable[[], Result]
                   ) -> tuple[tuple[Files, Problems], Result]:
    """Several clusters: <cluster>/ per cluster, each its own synced tree (Argo CD syncs each to its cluster), and
    beside(). A large platform's workers are shared out (_shares): some beside the manager and beside(), the rest
    on the other core."""
    def trees(manager: bool, workers: list[str]) -> tuple[Files, Problems]:
        files: Files = {}
        problems: Problems = []
        emitted: Emitted = {}
        if manager:
            files, problems = _in_folder(clusters.manager(inventory),
                                         _synced_tree(synced_objects(clusters.manager_view(inventory), "manager"),
                                                      source, emitted))
        for worker in workers:
            more, found = _in_folder(worker, _synced_tree(
                synced_objects(clusters.worker_view(inventory, worker), "worker"), source, emitted))
            files.update(more)
            problems += found
        return files, problems

    # Each namespace brings at least its Namespace, LocalQueue and limits to the manager alone.
    if sum(len(group.namespaces) for group in inventory.groups.values()) < PARALLEL_FROM // 2:
        return trees(True, clusters.workers(inventory)), beside()
    here, there = _shares(inventory)
    ((files, problems), result), (more, found) = parallel.both(lambda: (trees(True, here), beside()),
                                                               lambda: trees(False, there))
    files.update(more)
    return (files, problems + found), result


def render_trees(inventory: Inventory, source: str) -> RenderedTrees:
    """Raises errors.OverLimits when an object would exceed what Kubernetes or the file system accepts. For
    several clusters (docs/multi-cluster.md) rendered/ holds one tree per cluster."""
    def bootstrap_and_docs() -> tuple[Files, Problems, bytes]:
        bootstrap, problems = _bootstrap_files(inventory, source)
        return bootstrap, problems, userdocs.runtimes_page(inventory, source).encode("utf-8")

    if clusters.several(inventory):
        (synced, over_limits), (bootstrap, more, docs) = _cluster_trees(inventory, source, bootstrap_and_docs)
    elif application_folders(inventory):
        synced, over_limits = _application_trees(inventory, synced_objects(inventory), source)
        bootstrap, more, docs = bootstrap_and_docs()
    else:
        synced, over_limits = _synced_tree(synced_objects(inventory), source)
        bootstrap, more, docs = bootstrap_and_docs()
    if over_limits or more:
        raise OverLimits(over_limits + more)
    return RenderedTrees(synced=dict(sorted(synced.items())), bootstrap=bootstrap, docs=docs,
                         unguarded=(*accelerators.unguarded(inventory), *bootstrap_builder.unchecked(inventory)))
