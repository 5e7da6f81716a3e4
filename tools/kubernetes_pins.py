"""Move the Kubernetes pins: `make kubernetes-pins KUBERNETES=vX.Y.Z ETCD=vA.B.C`.

The tree is checked on two Kubernetes lines (generator/versions.env): the newest, which the simulated clusters
run, and the previous minor. A release of a newer minor becomes the newest and the newest moves to the previous;
a patch release of either line replaces that line's pins. Both modules are asked of the Go module proxy first
(`go mod download`), so a release it does not serve is refused before anything is written. Then rebuild the
tools (`make tools`) and render (`make render`): the kustomization names the lines it was validated against.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable

import click

from generator.versions import VERSIONS_FILE, parse_versions

NEWEST = ("KUBERNETES_VERSION", "ETCD_VERSION")
PREVIOUS = ("KUBERNETES_PREVIOUS_VERSION", "ETCD_PREVIOUS_VERSION")
RELEASE = re.compile(r"v(\d+)\.(\d+)\.(\d+)")


class Refused(ValueError):
    """The asked pins cannot be taken; the message says why."""


def minor(version: str) -> tuple[int, int]:
    match = RELEASE.fullmatch(version)
    if not match:
        raise Refused(f"{version!r} is not a release (vX.Y.Z)")
    return int(match[1]), int(match[2])


def moved_pins(current: dict[str, str], kubernetes: str, etcd: str) -> dict[str, str]:
    """The pins that change when `kubernetes` with `etcd` is taken: a newer minor than the newest shifts the newest
    to the previous line; a release of the newest's or the previous' minor replaces that line; anything else (an
    older minor, a release older than the one pinned) is refused."""
    minor(etcd)
    wanted = minor(kubernetes)
    newest, previous = minor(current[NEWEST[0]]), minor(current[PREVIOUS[0]])
    if wanted > newest:
        if wanted[0] == newest[0] and wanted[1] != newest[1] + 1:
            raise Refused(f"{kubernetes} skips a minor after {current[NEWEST[0]]}: take the minors in order")
        return {PREVIOUS[0]: current[NEWEST[0]], PREVIOUS[1]: current[NEWEST[1]],
                NEWEST[0]: kubernetes, NEWEST[1]: etcd}
    for keys, line in ((NEWEST, newest), (PREVIOUS, previous)):
        if wanted == line:
            if _release(kubernetes) < _release(current[keys[0]]):
                raise Refused(f"{kubernetes} is older than the pinned {current[keys[0]]}")
            return {keys[0]: kubernetes, keys[1]: etcd}
    raise Refused(f"{kubernetes} is older than both pinned lines ({current[NEWEST[0]]}, {current[PREVIOUS[0]]})")


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in RELEASE.fullmatch(version).groups())


def rewritten(text: str, changes: dict[str, str]) -> str:
    """versions.env's text with each KEY=VALUE of `changes` replaced in place (comments and order kept)."""
    missing = [key for key in changes if not re.search(rf"^{key}=", text, re.MULTILINE)]
    if missing:
        raise Refused(f"{VERSIONS_FILE} has no {', '.join(missing)}")
    for key, value in changes.items():
        text = re.sub(rf"^{key}=.*$", f"{key}={value}", text, count=1, flags=re.MULTILINE)
    return text


def served(module: str, version: str) -> str | None:
    """None when the Go module proxy serves MODULE@VERSION, else its refusal."""
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"], capture_output=True, text=True,
                          env={**os.environ, "GOFLAGS": "-mod=mod", "GOTOOLCHAIN": "local"})
    return None if done.returncode == 0 else (done.stdout + done.stderr).strip()[-500:]


def move(kubernetes: str, etcd: str, check: Callable[[str, str], str | None] = served) -> dict[str, str]:
    """Rewrite versions.env for the release; the changed pins."""
    text = VERSIONS_FILE.read_text(encoding="utf-8")
    changes = moved_pins(parse_versions(text), kubernetes, etcd)
    for module, version in (("k8s.io/kubernetes", kubernetes), ("go.etcd.io/etcd/server/v3", etcd)):
        refusal = check(module, version)
        if refusal:
            raise Refused(f"the Go module proxy does not serve {module}@{version}: {refusal}")
    VERSIONS_FILE.write_text(rewritten(text, changes), encoding="utf-8")
    return changes


@click.command(help=__doc__)
@click.argument("kubernetes")
@click.argument("etcd")
def main(kubernetes: str, etcd: str) -> None:
    try:
        changes = move(kubernetes, etcd)
    except Refused as refused:
        click.echo(f"error: {refused}", err=True)
        sys.exit(2)
    for key, value in changes.items():
        click.echo(f"{VERSIONS_FILE.name}: {key}={value}")
    click.echo("next: make tools && make render")


if __name__ == "__main__":
    main()
