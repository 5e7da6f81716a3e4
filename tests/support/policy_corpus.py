"""The policy corpus's inventories and the CEL oracle, shared by the tiers that judge rendered policies
(tests/unit/test_policies.py, tests/unit/test_examples.py)."""

from __future__ import annotations

import json
from typing import Any

from generator.versions import pin
from simulation.go_tools import go
from tests.support import ORACLES, REPO

CORPUS = REPO / "tests" / "policies"
# The inventories the corpus's cases (tests/policies/cases.yaml) were written for.
INVENTORIES = {"flame": REPO / "gpu_classes.yaml", "two-classes": CORPUS / "two-classes.yaml",
               "no-lending": CORPUS / "no-lending.yaml",
               # Every accelerator kind: MIG, time-sliced, AMD and Gaudi classes beside a GH200 one.
               "mixed": REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"}

CELPARSE_SOURCE = ORACLES / "celparse" / "main.go"


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
