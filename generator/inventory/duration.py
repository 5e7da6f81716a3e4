"""Durations in the inventory (walltimes, the finished-job TTL): `90m`, `24h`, `7d`, `1d12h`.

Kubernetes and Kueue take whole seconds (`kueue.x-k8s.io/max-exec-time-seconds`, `ttlSecondsAfterFinished`,
both int32), so a duration is a sum of whole units and at most 2^31-1 seconds.
"""

from __future__ import annotations

import re

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
PATTERN = r"^([0-9]+[dhms])+$"
_PART = re.compile(r"([0-9]+)([dhms])")
MAX_SECONDS = 2**31 - 1


def seconds(text: str) -> int:
    """`1d12h` -> 129600. The text matches PATTERN (the schema checks it first)."""
    return sum(int(number) * UNITS[unit] for number, unit in _PART.findall(text))


def show(total: int) -> str:
    """129600 -> `1d12h`: the largest units first, the way the inventory writes them."""
    if total == 0:
        return "0s"
    parts = []
    for unit, size in UNITS.items():
        count, total = divmod(total, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
