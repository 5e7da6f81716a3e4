"""`kubectl kustomize` (what Argo CD runs on every sync) yields exactly the rendered objects."""

from __future__ import annotations

import json
import subprocess

import yaml
from tests.support import REPO, require_tool


def kustomize(directory) -> list[dict]:
    kubectl = require_tool("kubectl", "kubectl", "install kubectl (it bundles kustomize)")
    result = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def canonical(objects) -> list[str]:
    return sorted(json.dumps(obj, sort_keys=True) for obj in objects)


def test_repo_root_kustomization_yields_exactly_the_built_objects(flame_objects):
    assert canonical(kustomize(REPO)) == canonical(flame_objects)


def test_rendered_dir_kustomization_yields_every_object(flame_objects):
    assert canonical(kustomize(REPO / "rendered")) == canonical(flame_objects)


def test_bootstrap_application_is_not_synced(flame_objects):
    assert "Application" not in {obj["kind"] for obj in kustomize(REPO)}
