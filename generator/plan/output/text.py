"""A plan as text, for a terminal: counts, the risks, then each kind's changes field by field."""

from __future__ import annotations

from generator.plan.clusters import ClusterPlans
from generator.plan.output.common import class_move, counts, field_change, object_name
from generator.plan.plans import Plan


def plan_text(plan: Plan) -> str:
    if not plan.changes:
        return "No changes: the cluster state this render describes equals the base.\n"
    lines = [f"Plan: {counts(plan)}"]
    if plan.risks:
        lines += ["", "RISKS"]
        lines += [f"  ! {risk.key[0]} {object_name(risk.key)}: {risk.what}" for risk in plan.risks]
    for kind, changes in plan.by_kind().items():
        lines += ["", f"{kind}"]
        for change in changes:
            sign = {"added": "+", "removed": "-", "changed": "~", "moved": ">"}[change.action]
            where = f", in {plan.applications[change.key]}/" if change.key in plan.applications else ""
            lines.append(f"  {sign} {object_name(change.key)} ({change.action}{where})")
            lines += [f"      {fc.path}: {field_change(fc)}" for fc in change.fields]
    return "\n".join(lines) + "\n"


def cluster_plans_text(result: ClusterPlans) -> str:
    summary = "; ".join(f"{name}: {counts(plan)}" for name, plan in result.plans.items())
    lines = [f"Plan for {len(result.plans)} clusters: {summary}"]
    if result.moves:
        lines += ["", "MOVES"] + [f"  ! {class_move(each)}" for each in result.moves]
    for name, plan in result.plans.items():
        lines += ["", f"=== cluster {name}", plan_text(plan).rstrip("\n")]
    return "\n".join(lines) + "\n"


def render(result: Plan | ClusterPlans) -> str:
    return cluster_plans_text(result) if isinstance(result, ClusterPlans) else plan_text(result)
