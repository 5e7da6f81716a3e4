"""Kubernetes resource quantities: parsing for capacity arithmetic, formatting for messages."""

from __future__ import annotations

import re
from decimal import Decimal

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
    "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
# Same grammar as k8s.io/apimachinery/pkg/api/resource (no sign: quotas are never negative).
_QUANTITY = re.compile(r"^(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(?P<suffix>[numkMGTPE]|[KMGTPE]i)|[eE](?P<exp>[+-]?[0-9]+))?$")


def parse_quantity(text: str) -> Decimal:
    """'480Gi' -> bytes, '500m' -> 0.5; ValueError when Kubernetes would not accept it."""
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 72, 500m, 480Gi)")
    number = Decimal(match["number"])
    if match["exp"] is not None:
        return number * (Decimal(10) ** int(match["exp"]))
    return number * _SUFFIX[match["suffix"] or ""]


def format_total(value: Decimal, binary: bool) -> str:
    """Shortest exact quantity for messages: 960G, 512Gi, 144."""
    plain = f"{value.normalize():f}"
    if not binary:
        return plain
    exact = [f"{value // _SUFFIX[s]}{s}" for s in ("k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
             if value >= _SUFFIX[s] and value % _SUFFIX[s] == 0]
    return min(exact, key=len, default=plain)
