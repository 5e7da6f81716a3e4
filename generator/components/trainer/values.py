"""Trainer's Helm values."""

from __future__ import annotations

from typing import Any

from generator.components.facts import ValuesContext


def values(cluster: ValuesContext) -> dict[str, Any]:
    return {
        "image": {"tag": cluster.app_version},
        # JobSet has its own Application (same namespace and names as the chart's bundled copy).
        "jobset": {"install": False},
        # No upstream runtime may exist beside the generated torch-<class> ones: the seed promises there is no
        # GPU-agnostic runtime. The chart's defaults are off already; they are spelled out so an upgrade that
        # flips a default shows up in review.
        "runtimes": {"defaultEnabled": False, **{name: {"enabled": False} for name in (
            "torchDistributed", "deepspeedDistributed", "mlxDistributed", "jaxDistributed", "xgboostDistributed")}},
        "dataCache": {"enabled": False},
    }
