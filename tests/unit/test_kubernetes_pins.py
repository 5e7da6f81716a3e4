"""`make kubernetes-pins`: which pins a Kubernetes release moves, refused before anything is written when it cannot
be taken (tools/kubernetes_pins.py). Versions here are made up so that none repeats a real pin."""

from __future__ import annotations

import shutil

import pytest

from generator.versions import VERSIONS_FILE, parse_versions
from tools import kubernetes_pins
from tools.kubernetes_pins import Refused, moved_pins, rewritten

CURRENT = {"KUBERNETES_VERSION": "v1.51.2", "ETCD_VERSION": "v3.9.4",
           "KUBERNETES_PREVIOUS_VERSION": "v1.50.5", "ETCD_PREVIOUS_VERSION": "v3.8.7"}


@pytest.mark.parametrize(("kubernetes", "etcd", "changes"), [
    pytest.param("v1.52.0", "v3.9.5", {"KUBERNETES_PREVIOUS_VERSION": "v1.51.2", "ETCD_PREVIOUS_VERSION": "v3.9.4",
                                       "KUBERNETES_VERSION": "v1.52.0", "ETCD_VERSION": "v3.9.5"},
                 id="a newer minor shifts the newest to the previous line"),
    pytest.param("v1.51.3", "v3.9.5", {"KUBERNETES_VERSION": "v1.51.3", "ETCD_VERSION": "v3.9.5"},
                 id="a patch of the newest"),
    pytest.param("v1.50.6", "v3.8.8", {"KUBERNETES_PREVIOUS_VERSION": "v1.50.6", "ETCD_PREVIOUS_VERSION": "v3.8.8"},
                 id="a patch of the previous"),
    pytest.param("v2.0.0", "v4.0.0", {"KUBERNETES_PREVIOUS_VERSION": "v1.51.2", "ETCD_PREVIOUS_VERSION": "v3.9.4",
                                      "KUBERNETES_VERSION": "v2.0.0", "ETCD_VERSION": "v4.0.0"},
                 id="a new major"),
])
def test_a_release_moves_its_line(kubernetes, etcd, changes):
    assert moved_pins(CURRENT, kubernetes, etcd) == changes


@pytest.mark.parametrize(("kubernetes", "etcd", "why"), [
    ("v1.53.0", "v3.9.5", "skips a minor"),
    ("v1.51.1", "v3.9.4", "older than the pinned v1.51.2"),
    ("v1.50.4", "v3.8.7", "older than the pinned v1.50.5"),
    ("v1.49.9", "v3.8.7", "older than both pinned lines"),
    ("1.52.0", "v3.9.5", "not a release"),
    ("v1.52.0", "3.9", "not a release"),
])
def test_a_release_that_cannot_be_taken_is_refused(kubernetes, etcd, why):
    with pytest.raises(Refused, match=why):
        moved_pins(CURRENT, kubernetes, etcd)


def test_the_pin_file_keeps_its_comments_and_order():
    text = VERSIONS_FILE.read_text(encoding="utf-8")
    changes = {"KUBERNETES_VERSION": "v1.99.0", "ETCD_PREVIOUS_VERSION": "v3.99.1"}
    after = rewritten(text, changes)
    assert parse_versions(after) == {**parse_versions(text), **changes}
    assert [line for line in after.splitlines() if not line.startswith(("KUBERNETES_VERSION=", "ETCD_PREVIOUS"))] == \
        [line for line in text.splitlines() if not line.startswith(("KUBERNETES_VERSION=", "ETCD_PREVIOUS"))]


def test_a_release_the_proxy_does_not_serve_writes_nothing(tmp_path, monkeypatch):
    copy = tmp_path / "versions.env"
    shutil.copy(VERSIONS_FILE, copy)
    monkeypatch.setattr(kubernetes_pins, "VERSIONS_FILE", copy)
    before = copy.read_bytes()
    newest = parse_versions(before.decode())["KUBERNETES_VERSION"]
    major, minor, _ = newest.removeprefix("v").split(".")
    following = f"v{major}.{int(minor) + 1}.0"
    with pytest.raises(Refused, match=r"does not serve k8s\.io/kubernetes"):
        kubernetes_pins.move(following, "v3.99.0", check=lambda module, version: "403 Forbidden")
    assert copy.read_bytes() == before
    # Served: the newest moves to the previous line, in the copy only.
    kubernetes_pins.move(following, "v3.99.0", check=lambda module, version: None)
    moved = parse_versions(copy.read_text())
    assert (moved["KUBERNETES_VERSION"], moved["KUBERNETES_PREVIOUS_VERSION"]) == (following, newest)
