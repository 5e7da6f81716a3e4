"""Upstream versions, read from versions.env: the one file the tool scripts `source` too."""

from __future__ import annotations

from functools import cache
from pathlib import Path

VERSIONS_FILE = Path(__file__).with_name("versions.env")


def parse_versions(text: str) -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.isidentifier() or not value or " " in value:
            raise ValueError(f"{VERSIONS_FILE}:{number}: expected KEY=VALUE, got {raw!r}")
        pins[key] = value
    return pins


@cache
def pins() -> dict[str, str]:
    return parse_versions(VERSIONS_FILE.read_text(encoding="utf-8"))


def pin(name: str) -> str:
    """pin("KUEUE") -> the value of KUEUE_VERSION."""
    return pins()[f"{name}_VERSION"]
