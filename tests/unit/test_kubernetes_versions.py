"""docs/kubernetes.md's table of the controllers' client libraries is what their pinned modules require, and the
lines the tree is checked on are two consecutive minors, each on the etcd minor its release is tested with."""

from __future__ import annotations

import re

import pytest

from generator.components import COMPONENTS
from generator.versions import pins
from simulation.argocd_local import ARGOCD_MODULE
from simulation.go_tools import module_dir
from simulation.pins import KUBERNETES_LINES, NEWEST, PREVIOUS
from tests.support import REPO
from tools.kubernetes_pins import minor

DOC = REPO / "docs" / "kubernetes.md"


def _documented() -> dict[str, tuple[str, str]]:
    """component -> (its pin's key, the client-go version the table says)."""
    rows = re.findall(r"^\| ([^|]+?) \| `([A-Z_]+)` \| (v\d+\.\d+\.\d+) \|", DOC.read_text(), re.MULTILINE)
    return {name: (pin, client_go) for name, pin, client_go in rows}


def _modules() -> dict[str, str]:
    """pin key -> the Go module it pins: each component's, and Argo CD's."""
    return {**{facts.chart.app_version_pin: facts.chart.module for facts in COMPONENTS.values()
               if facts.chart.module and facts.chart.app_version_pin},
            "ARGOCD_VERSION": ARGOCD_MODULE}


def test_every_component_and_argo_cd_has_a_row():
    assert {pin for pin, _ in _documented().values()} == set(_modules())


@pytest.mark.parametrize("component", sorted(_documented()))
def test_the_client_library_is_the_one_the_pinned_module_requires(component):
    pin, documented = _documented()[component]
    go_mod = (module_dir(_modules()[pin], pins()[pin]) / "go.mod").read_text()
    required = re.search(r"^\s*(?:require\s+)?k8s\.io/client-go (v\S+)", go_mod, re.MULTILINE)
    assert required, f"{_modules()[pin]} requires no k8s.io/client-go"
    assert required[1] == documented, f"docs/kubernetes.md says {component} is built on client-go {documented}"


def test_the_lines_are_two_consecutive_minors():
    assert [line.name for line in KUBERNETES_LINES] == ["newest", "previous"]
    newest, previous = minor(NEWEST.version), minor(PREVIOUS.version)
    assert newest == (previous[0], previous[1] + 1)


@pytest.mark.parametrize("line", KUBERNETES_LINES, ids=lambda line: line.name)
def test_each_line_runs_on_the_etcd_its_release_is_tested_with(line):
    """Kubernetes' own go.mod requires the etcd client its release is tested with: the pinned etcd is that minor."""
    go_mod = (module_dir("k8s.io/kubernetes", line.version) / "go.mod").read_text()
    client = re.search(r"^\s*go\.etcd\.io/etcd/client/v3 (v\S+)", go_mod, re.MULTILINE)
    assert client, "k8s.io/kubernetes requires no etcd client"
    etcd = pins()[line.etcd_pin]
    assert minor(client[1]) == minor(etcd), f"Kubernetes {line.version} is built on etcd {client[1]}, pinned {etcd}"
