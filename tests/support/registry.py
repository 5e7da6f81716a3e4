"""The test image registry: go-containerregistry's registry on 127.0.0.1 with the test images pushed
(tests/oracles/registry), a session fixture shared by the policy tests and the live admission tests."""

from __future__ import annotations

import re
import subprocess

import pytest

from generator.versions import pin
from simulation.flame import KYVERNO_HTTP_BLOCKLIST
from simulation.go_tools import go_program
from tests.support import ORACLES
from simulation.waiting import STOP_GRACE

# Test objects name images as REGISTRY/repo:tag (or REGISTRY/repo@DIGEST_<REPO_TAG>, e.g.
# DIGEST_VISION_TRAIN_ARM64_SINGLE); the fixture fills in the address of the registry it started and the digests
# it pushed.
REGISTRY = "REGISTRY"
# The registry's second address, serving its repositories as a public registry with token authentication does.
HUB_REGISTRY = "HUB_REGISTRY"
# The same registry as localhost:PORT: a host the inventories do not list as public (see PUBLIC_REGISTRY).
LOCALHOST_REGISTRY = "LOCALHOST_REGISTRY"
# The test registry as the tests' inventories list it in cluster.components.kyverno.publicRegistries: public (on
# 127.0.0.1, any port, plain HTTP), with the token service of its HUB_REGISTRY address, so trainjob-image-arch reads
# its indexes over the registry's HTTP API (REGISTRY ignores the token). Under the name localhost:PORT it is not
# listed, and images are read with Kyverno's image library only, as from a private registry.
PUBLIC_REGISTRY = {"127.0.0.1": {"tokenService": f"http://{HUB_REGISTRY}/token?service=gpugen-test",
                                 "plainHTTP": True}}
# The kyverno CLI's environment for the registry on loopback, as the simulated FLAME gives its Kyverno.
HTTP_BLOCKLIST = dict([KYVERNO_HTTP_BLOCKLIST])
REGISTRY_USER, REGISTRY_PASSWORD = "researcher", "registry-password"


def with_test_registry(settings, hub: str = HUB_REGISTRY) -> dict:
    """Kyverno settings' publicRegistries (cluster.components.kyverno) as inventory data, with the test registry
    added (PUBLIC_REGISTRY), its token service at `hub` (an address, or the placeholder filled in later)."""
    listed = {host: public.model_dump(exclude_defaults=True) for host, public in settings.publicRegistries.items()}
    return {**listed, **{host: {**entry, "tokenService": entry["tokenService"].replace(HUB_REGISTRY, hub)}
                         for host, entry in PUBLIC_REGISTRY.items()}}
REGISTRY_SOURCE = ORACLES / "registry" / "main.go"


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """go-containerregistry's registry on 127.0.0.1 with the test images pushed (tests/oracles/registry):
    placeholder -> value for the test objects and inventories (REGISTRY, HUB_REGISTRY, LOCALHOST_REGISTRY,
    DIGEST_<REPO_TAG>)."""
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
                values["DIGEST_" + re.sub(r"[/:-]", "_", repo_tag).upper()] = digest
            elif word == "HUB":
                values[HUB_REGISTRY] = rest[0]
            elif word == "ADDR":
                values[REGISTRY] = rest[0]
                values[LOCALHOST_REGISTRY] = "localhost:" + rest[0].rsplit(":", 1)[1]
                break
        watchdog.cancel()
        assert REGISTRY in values, f"the registry did not start: {process.stderr.read()}"
        yield values
    finally:
        watchdog.cancel()
        process.stdin.close()  # the registry serves until its stdin closes
        try:
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
