"""A plan's outputs, one module each (as kubeconform's pkg/output): text for a terminal, Markdown for a
pull-request comment; common.py what they write alike."""

from __future__ import annotations

from collections.abc import Callable

from generator.plan.clusters import ClusterPlans
from generator.plan.output import markdown, text
from generator.plan.plans import Plan

FORMATS: dict[str, Callable[[Plan | ClusterPlans], str]] = {"text": text.render, "markdown": markdown.render}


def write(result: Plan | ClusterPlans, output_format: str) -> str:
    """`result`, of one cluster or of several, in the output `output_format` (a key of FORMATS)."""
    return FORMATS[output_format](result)
