"""The health checks of docs/argocd-cm.yaml as Argo CD v3.6 itself runs them: tests/oracles/projectcheck `health`
reads the merged argocd-cm (the pinned install manifest's, patched as the bootstrap patches it) with Argo CD's
settings manager and runs each object's check in Argo CD's Lua VM, with only the libraries its controller opens.

What the checks must decide is what the sync waves wait on: Healthy lets the next wave go, Progressing waits, and
Degraded fails the sync, which automated sync never retries for the same commit once its retries are spent. So a
queue inactive because MultiKueue has not reached a worker yet waits (docs/multi-cluster.md, the bootstrap), and a
queue that names a missing flavor is Degraded. The reasons are Kueue's own, read from the pinned module."""
from __future__ import annotations

import json
import re
import subprocess

import pytest
import yaml

from simulation import go_tools, pins
from simulation.argocd_local import ARGOCD_CM_PATCH, install_objects
from simulation.waiting import ceiling
from tests.argocd import projects

KUEUE = "kueue.x-k8s.io/v1beta2"


def active(status: str, reason: str) -> dict:
    return {"conditions": [{"type": "Active", "status": status, "reason": reason, "message": f"{reason} here",
                            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}


def application(health: str, sync: str) -> dict:
    return {"health": {"status": health}, "sync": {"status": sync}}


# (kind's apiVersion, kind, status or None, Argo CD's verdict)
CASES = [
    (KUEUE, "ClusterQueue", None, "Progressing"),
    (KUEUE, "ClusterQueue", active("True", "Ready"), "Healthy"),
    (KUEUE, "ClusterQueue", active("False", "AdmissionCheckInactive"), "Progressing"),
    (KUEUE, "ClusterQueue", active("False", "FlavorNotFound"), "Degraded"),
    (KUEUE, "ClusterQueue", active("False", "AdmissionCheckNotFound"), "Degraded"),
    (KUEUE, "ClusterQueue", active("False", "Stopped"), "Degraded"),
    (KUEUE, "LocalQueue", None, "Progressing"),
    (KUEUE, "LocalQueue", active("True", "Ready"), "Healthy"),
    (KUEUE, "LocalQueue", active("False", "ClusterQueueIsInactive"), "Progressing"),
    (KUEUE, "LocalQueue", active("False", "Stopped"), "Degraded"),
    ("argoproj.io/v1alpha1", "Application", None, "Progressing"),
    ("argoproj.io/v1alpha1", "Application", application("Healthy", "OutOfSync"), "Progressing"),
    ("argoproj.io/v1alpha1", "Application", application("Healthy", "Synced"), "Healthy"),
    ("argoproj.io/v1alpha1", "Application", application("Degraded", "Synced"), "Degraded"),
    ("policies.kyverno.io/v1", "DeletingPolicy", None, "Healthy"),
    ("policies.kyverno.io/v1", "DeletingPolicy", {"lastExecutionTime": "2026-01-01T00:00:00Z"}, "Healthy"),
    # No check in the patch: Argo CD's own applies (not judged here).
    ("apps/v1", "Deployment", None, ""),
]


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> list[dict]:
    (installed,) = [o for o in install_objects() if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "argocd-cm"]
    data = {**(installed.get("data") or {}), **yaml.safe_load(ARGOCD_CM_PATCH.read_text())["data"]}
    objects = [{"apiVersion": api, "kind": kind, "metadata": {"name": f"case-{i}", "namespace": "ns"},
                **({"status": status} if status is not None else {})}
               for i, (api, kind, status, _) in enumerate(CASES)]
    done = subprocess.run([str(projects.checker_binary(tmp_path_factory)), "health"],
                          input=json.dumps({"configMap": {"data": data}, "objects": objects}),
                          capture_output=True, text=True, timeout=ceiling(12))
    assert done.returncode == 0, f"projectcheck health failed (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return json.loads(done.stdout)


def case_id(index: int) -> str:
    _, kind, status, expected = CASES[index]
    reasons = [c["reason"] for c in (status or {}).get("conditions", [])]
    return f"{index}-{kind}-{reasons[0] if reasons else 'no-condition'}-{expected or 'no-check'}"


@pytest.mark.parametrize("index", range(len(CASES)), ids=case_id)
def test_argo_cd_judges_the_object_as_the_waves_need(verdicts, index):
    _, kind, status, expected = CASES[index]
    assert verdicts[index]["status"] == expected, (kind, status, verdicts[index])


def test_the_reasons_are_kueues_own():
    """Every reason the cases give is a constant of the pinned Kueue: a check on a misspelt reason never fires."""
    kueue = go_tools.module_dir("sigs.k8s.io/kueue", pins.versions()["KUEUE_VERSION"])
    source = (kueue / "apis" / "kueue" / "v1beta2" / "clusterqueue_types.go").read_text() \
        + (kueue / "pkg" / "controller" / "core" / "localqueue_controller.go").read_text()
    constants = set(re.findall(r'=\s*"([A-Za-z]+)"', source))
    reasons = {c["reason"] for _, _, status, _ in CASES for c in (status or {}).get("conditions", [])}
    assert reasons <= constants, sorted(reasons - constants)
    patch = ARGOCD_CM_PATCH.read_text()
    assert {"AdmissionCheckInactive", "ClusterQueueIsInactive"} <= {r for r in reasons if f'"{r}"' in patch}
