"""What every output of a plan writes alike: an object's name, a field's old and new values, the counts, a class's
move between clusters."""

from __future__ import annotations

from typing import Any

import yaml

from generator.plan.clusters import ClassMove
from generator.plan.diff import FieldChange
from generator.plan.objects import Key
from generator.plan.plans import Plan


def object_name(key: Key) -> str:
    _kind, namespace, name = key
    return f"{namespace}/{name}" if namespace else name


SHOWN = 120


def shown_value(value: Any, start: int = 0) -> str:
    if value is None:
        return "(none)"
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip()
    text = text.removesuffix("\n...").removesuffix("...").strip()
    if len(text) <= SHOWN:
        return text
    if start:
        text = "..." + text[start:]
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def field_change(fc: FieldChange) -> str:
    """old -> new; for long values, both shown from a little before where they first differ."""
    old, new = shown_value(fc.old), shown_value(fc.new)
    if len(old) == len(new) == SHOWN and old == new:
        full_old, full_new = (yaml.safe_dump(v, default_flow_style=True, width=1 << 16) for v in (fc.old, fc.new))
        first = next((i for i, (a, b) in enumerate(zip(full_old, full_new)) if a != b), 0)
        start = max(0, first - 30)
        old, new = shown_value(fc.old, start), shown_value(fc.new, start)
    return f"{old} -> {new}"


def counts(plan: Plan) -> str:
    actions = [c.action for c in plan.changes]
    moved = f"{actions.count('moved')} moved, " if "moved" in actions else ""  # only a split tree's objects move
    return (f"{actions.count('added')} added, {actions.count('changed')} changed, {actions.count('removed')} removed, "
            f"{moved}{len(plan.risks)} risk(s)")


def class_move(move: ClassMove) -> str:
    return (f"class {move.gpu_class} moves from {move.old} to {move.new}: its jobs on {move.old} run to the end "
            f"there; new jobs go to {move.new} once both clusters have synced")
