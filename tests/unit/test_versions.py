"""Upstream versions are pinned in one file that the generator and the tool scripts both read."""

from __future__ import annotations

import re

import pytest
from tests.support import REPO

from generator.versions import VERSIONS_FILE, parse_versions, pins


def test_every_upstream_is_pinned():
    for name in ("KUBERNETES", "ETCD", "TRAINER", "JOBSET", "KUEUE", "KYVERNO", "KUBECONFORM", "ARGOCD"):
        assert re.fullmatch(r"v\d+\.\d+\.\d+", pins()[f"{name}_VERSION"]), name


def test_tool_scripts_read_the_same_file():
    common = (REPO / "tools" / "common.sh").read_text()
    assert "generator/versions.env" in common


def test_no_version_is_repeated_outside_the_pin_file():
    """A pinned Go-module version written anywhere else in code or CI would drift from the pin."""
    versions = {v for k, v in pins().items() if k != "KUBEFLOW_SDK_VERSION"}
    sources = [p for pattern in ("generator/**/*.py", "tools/**/*", "tests/**/*.py", ".ci/*", ".github/**/*.yml",
                                 "Makefile") for p in REPO.glob(pattern) if p.is_file() and p.name != "versions.env"]
    offenders = [(p.relative_to(REPO), v) for p in sources for v in versions if v in p.read_text(errors="ignore")]
    assert not offenders


def test_malformed_pin_file_is_an_error():
    with pytest.raises(ValueError, match="KEY=VALUE"):
        parse_versions("KUEUE_VERSION v9.9.9\n")
    assert VERSIONS_FILE.name == "versions.env"
