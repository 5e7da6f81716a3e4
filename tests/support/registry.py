"""The test image registry: go-containerregistry's registry on 127.0.0.1 with the test images pushed
(tests/policies/registry), a session fixture shared by the policy tests and the live admission tests."""

from __future__ import annotations

import subprocess

import pytest

from generator.versions import pin
from simulation.upstream import go_program
from tests.support import REPO

# Test objects name images as REGISTRY/repo:tag (or REGISTRY/repo@DIGEST_<TAG>); the fixture fills in the
# address of the registry it started and the digests it pushed.
REGISTRY = "REGISTRY"
REGISTRY_USER, REGISTRY_PASSWORD = "researcher", "registry-password"
REGISTRY_SOURCE = REPO / "tests" / "policies" / "registry" / "main.go"


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """go-containerregistry's registry on 127.0.0.1 with the test images pushed (tests/policies/registry):
    placeholder -> value for the test objects (REGISTRY, DIGEST_<TAG>)."""
    import threading

    binary = go_program(REGISTRY_SOURCE, "gpugen.local/test-registry",
                        [f"github.com/google/go-containerregistry@{pin('GGCR')}"], tmp_path_factory)
    process = subprocess.Popen([str(binary), "-user", REGISTRY_USER, "-password", REGISTRY_PASSWORD],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(120, process.kill)  # never wait forever for the images to be pushed
    watchdog.start()
    try:
        values: dict[str, str] = {}
        for line in process.stdout:
            word, *rest = line.split()
            if word == "DIGEST":
                repo_tag, digest = rest
                values["DIGEST_" + repo_tag.split(":")[-1].upper().replace("-", "_")] = digest
            elif word == "ADDR":
                values[REGISTRY] = rest[0]
                break
        watchdog.cancel()
        assert REGISTRY in values, f"the registry did not start: {process.stderr.read()}"
        yield values
    finally:
        watchdog.cancel()
        process.stdin.close()  # the registry serves until its stdin closes
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
