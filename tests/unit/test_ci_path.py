"""tools/ci_path.sh: which CI path a change takes, in a scratch git repository. Only the inventory and what is
rendered from it take the inventory path; anything else, or no base to compare with, takes the full suite."""

from __future__ import annotations

import subprocess

import pytest

from tests.support import REPO

SCRIPT = REPO / "tools" / "ci_path.sh"


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"})


def path_for(repo, base) -> str:
    done = subprocess.run(["bash", str(SCRIPT), *([base] if base is not None else [])], cwd=repo,
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path):
    for name in ("gpu_classes.yaml", "rendered/kueue/clusterqueue/a.yaml", "bootstrap/root/x.yaml",
                 "docs/runtimes.md", "docs/policies.md", "generator/x.py", "tests/x.py", "tools/tools.list"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("0\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-qm", "base")
    return tmp_path


@pytest.mark.parametrize("changed, expected", [
    (["gpu_classes.yaml"], "inventory"),
    (["gpu_classes.yaml", "rendered/kueue/clusterqueue/a.yaml", "bootstrap/root/x.yaml", "docs/runtimes.md"],
     "inventory"),
    (["rendered/kueue/clusterqueue/new.yaml"], "inventory"),
    (["gpu_classes.yaml", "generator/x.py"], "full"),
    (["tests/x.py"], "full"),
    (["tools/tools.list"], "full"),
    (["docs/policies.md"], "full"),
    (["gpu_classes.yaml", "Makefile"], "full"),
])
def test_only_the_inventory_and_its_trees_take_the_inventory_path(repo, changed, expected):
    for name in changed:
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "change")
    assert path_for(repo, "HEAD~1") == expected


@pytest.mark.parametrize("base", [None, "", "no-such-branch"])
def test_without_a_base_it_is_the_full_suite(repo, base):
    (repo / "gpu_classes.yaml").write_text("1\n")
    git(repo, "commit", "-qam", "change")
    assert path_for(repo, base) == "full"


def test_no_change_is_the_full_suite(repo):
    assert path_for(repo, "HEAD") == "full"
