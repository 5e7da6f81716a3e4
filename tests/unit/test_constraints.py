"""The Python dependencies install at the exact versions of constraints.txt, which lie within pyproject.toml's
ranges: a new upstream release changes nothing until `make lock` re-resolves them."""

from __future__ import annotations

import re
import tomllib
from importlib.metadata import PackageNotFoundError, version

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from tests.support import REPO

PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)")


def locked() -> dict[str, str]:
    pins: dict[str, str] = {}
    for number, line in enumerate((REPO / "constraints.txt").read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.fullmatch(line)
        assert match, f"constraints.txt:{number}: not NAME==VERSION: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in pins, f"constraints.txt:{number}: {name} pinned twice"
        pins[name] = match["version"]
    return pins


def requirements() -> list[Requirement]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return [Requirement(r) for r in listed]


def test_every_dependency_is_locked_within_its_range():
    pins = locked()
    for requirement in requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is in pyproject.toml but not in constraints.txt: run `make lock`"
        assert requirement.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {name}=={pins[name]}, outside pyproject.toml's {requirement}: run `make lock`")


@pytest.mark.parametrize("name", sorted(canonicalize_name(r.name) for r in requirements()))
def test_the_environment_has_the_locked_version(name):
    """What `make` installed: every dependency at the version constraints.txt pins (report's matplotlib is in test)."""
    try:
        installed = version(name)
    except PackageNotFoundError:
        pytest.fail(f"{name} is not installed: `make` installs the test extra")
    assert installed == locked()[name], f"{name} {installed} installed, constraints.txt pins {locked()[name]}"
