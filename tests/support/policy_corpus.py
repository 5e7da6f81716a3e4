"""The policy corpus's inventories and the CEL oracle, shared by the tiers that judge rendered policies
(tests/unit/test_policies.py, tests/unit/test_examples.py)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from generator.versions import pin
from simulation.go_tools import cache_dir, go, tidy_build_install
from tests.support import ORACLES, REPO

CORPUS = REPO / "tests" / "policies"
# The inventories the corpus's cases (tests/policies/cases.yaml) were written for.
INVENTORIES = {"flame": REPO / "gpu_classes.yaml", "two-classes": CORPUS / "two-classes.yaml",
               "no-lending": CORPUS / "no-lending.yaml",
               # Every accelerator kind: MIG, time-sliced, AMD and Gaudi classes beside a GH200 one.
               "mixed": REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml",
               # AMD and Gaudi classes only: no NVIDIA rule may appear.
               "amd-gaudi": CORPUS / "amd-gaudi.yaml"}

CELPARSE_SOURCE = ORACLES / "celparse" / "main.go"
ENGINE_SOURCE = ORACLES / "kyverno-engine" / "main.go"


def cel_go_version() -> str:
    """The cel-go version the pinned Kyverno requires (its go.mod), so the grammar is the one Kyverno parses."""
    module = json.loads(go(["mod", "download", "-json", f"github.com/kyverno/kyverno@{pin('KYVERNO')}"], REPO))
    upstream = json.loads(go(["mod", "edit", "-json", module["GoMod"]], REPO))
    (version,) = [r["Version"] for r in upstream["Require"] if r["Path"] == "github.com/google/cel-go"]
    return version


def expressions(policy: dict[str, Any]) -> dict[str, str]:
    """Every CEL expression of a policy, by where it is."""
    spec, name = policy["spec"], policy["metadata"]["name"]
    found = {f"{name}.variables.{v['name']}": v["expression"] for v in spec.get("variables", [])}
    for i, validation in enumerate(spec.get("validations", [])):
        found[f"{name}.validations[{i}].expression"] = validation["expression"]
        if "messageExpression" in validation:
            found[f"{name}.validations[{i}].messageExpression"] = validation["messageExpression"]
    for i, mutation in enumerate(spec.get("mutations", [])):
        found[f"{name}.mutations[{i}]"] = mutation["jsonPatch"]["expression"]
    for condition in spec.get("conditions", []):
        found[f"{name}.conditions.{condition['name']}"] = condition["expression"]
    return found


def kyverno_path() -> Path:
    return cache_dir() / "bin" / f"kyverno-{pin('KYVERNO')}"


def kyverno_engine(tmp_path_factory) -> Path:
    """tests/oracles/kyverno-engine built against the pinned Kyverno (cached by version and source hash)."""
    version = pin("KYVERNO")
    digest = hashlib.sha256(ENGINE_SOURCE.read_bytes()).hexdigest()[:12]
    binary = cache_dir() / "bin" / f"kyverno-engine-{version}-{digest}"
    if binary.is_file():
        return binary
    if shutil.which("go") is None or not kyverno_path().is_file():
        message = "needs the Go toolchain and the kyverno CLI's modules"
        if os.environ.get("CI"):
            pytest.fail(f"CI must run this check: {message}")
        pytest.skip(message + "; run `make tools`")
    work = tmp_path_factory.mktemp("engine")
    shutil.copy(ENGINE_SOURCE, work / "main.go")
    go(["mod", "init", "gpugen.local/policy-engine"], work)
    # Kyverno's go.mod replaces k8s.io/pod-security-admission with its fork; `require` alone would not build.
    module = json.loads(go(["mod", "download", "-json", f"github.com/kyverno/kyverno@{version}"], work))
    upstream = json.loads(go(["mod", "edit", "-json", module["GoMod"]], work))
    for replace in upstream.get("Replace") or []:
        if replace["New"].get("Version"):
            old = replace["Old"]["Path"] + (f"@{replace['Old']['Version']}" if replace["Old"].get("Version") else "")
            go(["mod", "edit", f"-replace={old}={replace['New']['Path']}@{replace['New']['Version']}"], work)
    go(["mod", "edit", f"-require=github.com/kyverno/kyverno@{version}"], work)
    return tidy_build_install(work, binary)
