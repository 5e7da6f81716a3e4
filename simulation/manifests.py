"""The rendered trees on disk (rendered/, bootstrap/, or the trees GPUGEN_RENDERED_DIR and GPUGEN_BOOTSTRAP_DIR
name) and the YAML of manifests, read and written."""
import os
import pathlib

import yaml

from simulation.pins import REPO


def rendered_dir():
    return pathlib.Path(os.environ.get("GPUGEN_RENDERED_DIR") or REPO / "rendered")


def bootstrap_dir():
    return pathlib.Path(os.environ.get("GPUGEN_BOOTSTRAP_DIR") or REPO / "bootstrap")


def manifest_files():
    """Every object file of the tree: rendered/**/*.yaml (no kustomization.yaml) + bootstrap/ (the Argo CD
    Application, outside the synced tree)."""
    files = []
    for root in (rendered_dir(), bootstrap_dir()):
        if root.is_dir():
            files += sorted(p for p in root.rglob("*.yaml") if p.name != "kustomization.yaml")
    return files


def tree_objects(tree):
    """The objects Argo CD syncs from a rendered tree: the files its kustomization.yaml lists (exactly those); for a
    tree split into Applications (cluster.gitops.groupApplications), those of each folder's, folder by folder."""
    root = pathlib.Path(tree)
    if not (root / "kustomization.yaml").is_file():
        folders = sorted(p for p in root.iterdir() if (p / "kustomization.yaml").is_file())
        return [obj for folder in folders for obj in tree_objects(folder)]
    kustomization = yaml.safe_load((root / "kustomization.yaml").read_text())
    return [load_one(root / f) for f in kustomization["resources"]]


# libyaml's loader and dumper where PyYAML has them (same YAML 1.1 rules as the pure-Python ones): the charts'
# and Argo CD's manifests are megabytes of CRDs, read many times, about ten times faster this way.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def load_all(text: str) -> list:
    """The documents of a YAML stream, empty ones left out."""
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]


def dump_all(documents: list) -> str:
    return yaml.dump_all(documents, Dumper=_DUMPER)


def load_one(path):
    docs = load_all(pathlib.Path(path).read_text())
    assert len(docs) == 1, f"{path}: expected exactly one object, found {len(docs)}"
    return docs[0]


def rel(path):
    try:
        return str(pathlib.Path(path).resolve().relative_to(REPO))
    except ValueError:
        return str(path)
