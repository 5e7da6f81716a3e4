"""A plan as Markdown, for a pull-request comment under GitHub's size limit."""

from __future__ import annotations

from generator.plan.clusters import ClusterPlans
from generator.plan.output.common import class_move, counts, field_change, object_name
from generator.plan.plans import Plan

GITHUB_COMMENT_LIMIT = 65_536


def _fit(lines: list[str], budget: int) -> list[str]:
    """The longest prefix of `lines` whose text fits in `budget` characters."""
    kept, size = [], 0
    for line in lines:
        if size + len(line) + 1 > budget:
            break
        kept.append(line)
        size += len(line) + 1
    return kept


def plan_markdown(plan: Plan, limit: int = GITHUB_COMMENT_LIMIT - 512) -> str:
    """A PR comment under `limit` characters (room left for a workflow's marker). When too long, the
    per-object details are cut first, then the risk list, each with a note saying so."""
    title = ["### gpugen plan", ""]
    if not plan.changes:
        return "\n".join(title + ["No changes to the cluster."]) + "\n"
    title += [f"**{counts(plan)}**", ""]
    risks = [f"- **{risk.key[0]} `{object_name(risk.key)}`**: {risk.what}" for risk in plan.risks]
    summary = ["| kind | added | changed | removed |", "|---|---:|---:|---:|"]
    for kind, changes in plan.by_kind().items():
        actions = [c.action for c in changes]
        summary.append(
            f"| {kind} | {actions.count('added')} | {actions.count('changed')} | {actions.count('removed')} |")
    summary.append("")
    details: list[str] = []
    for kind, changes in plan.by_kind().items():
        details += [f"<details><summary>{kind} ({len(changes)})</summary>", ""]
        for change in changes:
            where = f" in `{plan.applications[change.key]}/`" if change.key in plan.applications else ""
            details.append(f"- `{object_name(change.key)}` {change.action}{where}")
            details += [f"  - `{fc.path}`: `{field_change(fc).replace(' -> ', '` → `')}`" for fc in change.fields]
        details += ["", "</details>", ""]

    def assemble(risk_lines: list[str], detail_lines: list[str], note: str = "") -> str:
        risk_block = ["#### :warning: Risks", "", *risk_lines, ""] if risk_lines else []
        return "\n".join(title + risk_block + summary + detail_lines) + "\n" + note

    text = assemble(risks, details)
    if len(text) <= limit:
        return text
    note = "\n_Truncated to fit a GitHub comment: run `python -m generator plan` for the full list._\n"
    budget = limit - len(assemble(risks, [], note)) - 32
    if budget > 0:
        kept = _fit(details, budget)
        if kept.count("</details>") < sum(line.startswith("<details>") for line in kept):
            kept += ["", "</details>"]  # close the section the cut fell in
        return assemble(risks, kept, note)
    # Even the risks do not fit: keep as many as fit, say how many are missing, drop the details.
    budget = limit - len(assemble([], [], note)) - 128
    shown = _fit(risks, budget)
    shown.append(f"- _... and {len(risks) - len(shown)} more risk(s)_")
    return assemble(shown, [], note)


def cluster_plans_markdown(result: ClusterPlans, limit: int = GITHUB_COMMENT_LIMIT - 512) -> str:
    """One comment: the moves, then each cluster's plan (format_markdown) in an equal share of the limit."""
    head = ["### gpugen plan, several clusters", ""]
    if result.moves:
        head += ["#### :warning: Classes that move between clusters", "",
                 *(f"- **{move.gpu_class}**: {class_move(move)}" for move in result.moves), ""]
    share = (limit - len("\n".join(head)) - 64 * len(result.plans)) // max(1, len(result.plans))
    body = [plan_markdown(plan, share).replace("### gpugen plan", f"#### cluster `{name}`", 1)
            for name, plan in result.plans.items()]
    return "\n".join(head) + "\n" + "\n".join(body)




def render(result: Plan | ClusterPlans) -> str:
    return cluster_plans_markdown(result) if isinstance(result, ClusterPlans) else plan_markdown(result)
