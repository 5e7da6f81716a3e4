"""The docs cannot go stale where a test can read them: every project path a doc names exists, every test tier is in
the tiers tables, every builder and every layer unit is in ARCHITECTURE.md, and no doc counts what the code
already counts (cases, tests, tiers, builders, components)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO
from tests.support.layers import LAYERS

TRACKED = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
DOCS = sorted(name for name in TRACKED if name.endswith(".md") and not name.startswith(("rendered/", "docs/runtimes")))
TIERS = sorted({Path(name).parts[1] for name in TRACKED
                if name.startswith("tests/") and Path(name).name.startswith("test_") and len(Path(name).parts) == 3})

# A path the project holds: under a top folder, a generator package or a test tier, or a file name of its kinds.
_TOPS = {Path(name).parts[0] for name in TRACKED if "/" in name}
_PACKAGES = {Path(name).parts[1] for name in TRACKED if name.startswith("generator/") and len(Path(name).parts) > 2}
_FIRST = _TOPS | _PACKAGES | set(TIERS) | {"support", "oracles", "golden", "policies"}
_EXTENSIONS = ("py", "sh", "md", "env", "toml", "list", "patch", "txt", "yaml", "json")
# The project's file names are lower case (a Helm value such as `devicePlugin.env` is not one); `.env` only with a
# folder (`generator/versions.env`), since bare it is also a chart's values path (`toolkit.env`).
_FILE_NAME = re.compile(rf"^[\w-]+\.({'|'.join(_EXTENSIONS)})$")
_BARE_FILE_NAME = re.compile(rf"^[a-z0-9_-]+\.({'|'.join(e for e in _EXTENSIONS if e != 'env')})$")
_CODE_OR_LINK = re.compile(r"`([^`\s]+)`|\]\(([^)\s#]+)")
# Where a doc's relative paths may start: its own folder, the checkout, the generator package, the tests, the tree.
_ROOTS = ("", "generator/", "tests/", "rendered/")


def named_paths(text: str) -> list[str]:
    """The project paths a Markdown text names in code spans and links (fenced blocks aside)."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    found = []
    for match in _CODE_OR_LINK.finditer(text):
        token = re.sub(r"(::\S*|:\d+(-\d+)?)$", "", (match[1] or match[2]).split("#")[0]).rstrip(".,;:")
        if not token or "://" in token or token.startswith(("~", "$", "-", "/")):
            continue
        parts = token.split("/")
        a_path = "/" in token and parts[0] in _FIRST and bool(
            token.endswith("/") or _FILE_NAME.match(parts[-1]) or re.search(r"<[^>]+>|\*", parts[-1]))
        if a_path or ("/" not in token and _BARE_FILE_NAME.match(token)):
            found.append(token)
    return found


def exists(doc: Path, token: str) -> bool:
    pattern = re.sub(r"<[^>]+>", "*", token).rstrip("/")
    if "/" not in token:
        return any(Path(name).match(pattern) for name in TRACKED)
    own = doc.parent.relative_to(REPO).as_posix()
    roots = dict.fromkeys([*_ROOTS, "" if own == "." else own + "/"])
    return any(next(REPO.glob(root + pattern), None) for root in roots)


@pytest.mark.parametrize("doc", DOCS)
def test_every_path_a_doc_names_exists(doc):
    path = REPO / doc
    missing = [token for token in named_paths(path.read_text(encoding="utf-8")) if not exists(path, token)]
    assert missing == [], f"{doc} names paths the checkout does not have"


@pytest.mark.parametrize("text, paths", [
    ("see `generator/builders/kueue.py` and [the tiers](tests/README.md#tiers)",
     ["generator/builders/kueue.py", "tests/README.md"]),
    ("`components/<name>/values.py`, `kueue.x-k8s.io/v1beta2`, `spec.trainer.env`, `usage.py`",
     ["components/<name>/values.py", "usage.py"]),
    ("```\n`generator/none.py`\n```", []),
])
def test_the_path_reader_reads_paths_and_only_paths(text, paths):
    assert named_paths(text) == paths


def test_a_missing_path_is_found(tmp_path):
    assert not exists(REPO / "README.md", "generator/builders/nothing.py")
    assert exists(REPO / "README.md", "generator/components/<name>/__init__.py")


def _table_folders(text: str) -> set[str]:
    return set(re.findall(r"^\| `(\w+)/` \|", text, re.MULTILINE))


def test_every_tier_is_in_the_tiers_tables():
    readme = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    assert set(TIERS) - _table_folders(readme) == set(), "tests/README.md's table lacks these tiers"
    architecture = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    outside = architecture[architecture.index("Outside the product"):architecture.index("## Which module")]
    assert [tier for tier in TIERS if f"`{tier}`" not in outside] == [], "ARCHITECTURE.md's tiers lack these"


def test_architecture_names_every_builder_and_every_layer_unit():
    architecture = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
    builders = sorted(path.stem for path in (REPO / "generator" / "builders").glob("*.py")
                      if path.stem not in ("__init__", "common"))
    assert [b for b in builders if not re.search(rf"\b{b}\b", architecture.split("## Layers")[0])] == [], \
        "ARCHITECTURE.md's picture lacks these builders"
    table = architecture[architecture.index("## Layers"):architecture.index("Outside the product")]
    rows = {row.split("|")[1].strip(): row.split("|")[2] for row in table.splitlines() if row.startswith("| ")}
    for layer, units in LAYERS:
        for unit in units:
            written = unit.removeprefix("generator.").replace(".", "/")
            written = f"`{written}/`" if (REPO / "generator" / written).is_dir() else f"`{written}.py`"
            assert written in rows.get(layer, ""), f"ARCHITECTURE.md's layer {layer!r} does not list {written}"


@pytest.mark.parametrize("doc", DOCS)
def test_no_doc_counts_what_the_code_counts(doc):
    """A count of the project's own cases, tests, tiers, builders or components goes stale with the next one."""
    counted = re.findall(r"\b\d[\d,]* (?:test )?(?:cases|tests|tiers|builders|components)\b",
                         (REPO / doc).read_text(encoding="utf-8"))
    assert counted == [], f"{doc}: say what, not how many"
