"""Kyverno's own settings under cluster.components.kyverno: the admission controller's image, and the registries
the image check (builders/kyverno.py, trainjob-image-arch) reads without credentials."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field, StringConstraints

from generator.fields import Component, ImageRef, Strict


def _chart_image(ref: str) -> str:
    """registry/repository:tag, as Helm charts compose images: a registry host first, a tag, no digest."""
    host = ref.split("/")[0]
    if "@" in ref or "/" not in ref or not ("." in host or ":" in host or host == "localhost"):
        raise ValueError(f"{ref!r}: write registry-host/repository:tag (the chart composes the image from these "
                         "three parts; a digest cannot be expressed)")
    return ref


class PublicRegistry(Strict):
    """A registry whose public images trainjob-image-arch reads anonymously over its HTTP API."""

    # The anonymous token service its 401 answer names (WWW-Authenticate: Bearer realm="R",service="S"):
    # R?service=S. Unset: the registry serves public images without a token.
    tokenService: Annotated[
        str, StringConstraints(pattern=r"^https?://[^\s?#/]+(/[^\s?#]*)?(\?[^\s#]*)?$")] | None = None
    # The registry speaks plain HTTP: only for a registry on a trusted network.
    plainHTTP: bool = False


# What the image check reads anonymously unless the inventory says otherwise: the public registries GPU images
# come from, each with the token service it names.
DEFAULT_PUBLIC_REGISTRIES = {
    "docker.io": PublicRegistry(tokenService="https://auth.docker.io/token?service=registry.docker.io"),
    "ghcr.io": PublicRegistry(tokenService="https://ghcr.io/token?service=ghcr.io"),
    "nvcr.io": PublicRegistry(tokenService="https://nvcr.io/proxy_auth"),
    "quay.io": PublicRegistry(tokenService="https://quay.io/v2/auth?service=quay.io"),
}

# A registry as an image reference names it: host[:port]; a host alone stands for every port.
RegistryHost = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?$")]
# Names of Docker Hub in image references; image tools talk to it as index.docker.io.
DOCKER_HUB_NAMES = ("docker.io", "index.docker.io", "registry-1.docker.io")


def _one_docker_hub(registries: dict[str, PublicRegistry]) -> dict[str, PublicRegistry]:
    named = [host for host in registries if host in DOCKER_HUB_NAMES]
    if len(named) > 1:
        raise ValueError(f"{' and '.join(named)} are both Docker Hub: list it once")
    return registries


class KyvernoComponent(Component):
    # The admission controller's image: unset, the chart's released image, which the policies are written for.
    # An image built with the optional tools/patches/kyverno-sdk-index-platform.patch also reads arm64-only
    # indexes from private registries (docs/policies.md, "Kyverno version and deployment").
    admissionControllerImage: Annotated[ImageRef, AfterValidator(_chart_image)] | None = None
    # Registries whose images trainjob-image-arch reads without credentials, over the registry's HTTP API:
    # unset, DEFAULT_PUBLIC_REGISTRIES; {} reads every image with Kyverno's image library only.
    publicRegistries: Annotated[dict[RegistryHost, PublicRegistry], AfterValidator(_one_docker_hub)] = Field(
        default_factory=lambda: dict(DEFAULT_PUBLIC_REGISTRIES))

