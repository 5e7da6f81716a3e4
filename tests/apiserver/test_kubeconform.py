"""kubeconform tier: the rendered tree against strict schemas from the pinned sources
(tools/kubeconform.sh), and the broken corpus's kubeconform column in README.md."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulation.go_tools import tool_bin
from simulation.manifests import bootstrap_dir, rel, rendered_dir
from simulation.pins import KUBERNETES_LINES, NEWEST, TOOLS
from simulation.prerequisites import unavailable
from tests.apiserver.apiserver_support import header
from simulation.waiting import ceiling

pytestmark = pytest.mark.tools  # needs binaries from `make tools`


def kubeconform(*targets, line=NEWEST):
    if not os.access(tool_bin("kubeconform"), os.X_OK):
        unavailable("kubeconform is not built: run `make tools` (tools/build.sh kubeconform)")
    # schemas.py needs PyYAML from this env; KUBERNETES picks the core kinds' schemas.
    env = {**os.environ, "PYTHON": sys.executable, "KUBERNETES": line.version}
    return subprocess.run([str(TOOLS / "kubeconform.sh"), *map(str, targets)],
                          capture_output=True, text=True, env=env, timeout=ceiling(60))


@pytest.mark.parametrize("line", KUBERNETES_LINES, ids=lambda line: f"k8s-{line.minor}")
def test_rendered_tree_is_valid(tree_present, line):
    targets = [rendered_dir()] + ([bootstrap_dir()] if bootstrap_dir().is_dir() else [])
    r = kubeconform(*targets, line=line)
    assert f"(core kinds: Kubernetes {line.version})" in r.stdout, r.stdout[-2000:] + r.stderr
    summary = re.search(r"Summary: (\d+) resources? found .* Invalid: (\d+), Errors: (\d+), Skipped: (\d+)",
                        r.stdout)
    assert summary, f"no kubeconform summary:\n{r.stdout}\n{r.stderr}"
    found, invalid, errors, skipped = map(int, summary.groups())
    kustomizations = len(re.findall(r" (?:Kustomization|Component) skipped$", r.stdout, re.MULTILINE))
    assert found > 0
    assert (invalid, errors) == (0, 0), r.stdout
    assert skipped == kustomizations, f"skipped resources other than Kustomization and Component:\n{r.stdout}"
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"


@pytest.fixture(scope="module")
def broken_verdicts():
    r = kubeconform(Path(__file__).resolve().parent / "broken")
    verdicts = {}
    for line in r.stdout.splitlines():
        m = re.match(r"(\S+\.yaml) - .* is (valid|invalid)", line)
        if m:
            verdicts[os.path.basename(m.group(1))] = "catches" if m.group(2) == "invalid" else "misses"
    return verdicts


def test_broken_corpus_kubeconform_column(broken_file, broken_verdicts):
    """The `# kubeconform:` line of each broken object (and README's table) is what kubeconform does."""
    declared = header(broken_file, "kubeconform")
    assert declared in (["catches"], ["misses"]), f"{rel(broken_file)}: needs '# kubeconform: catches|misses'"
    assert broken_verdicts.get(broken_file.name) == declared[0], \
        f"{broken_file.name}: kubeconform {broken_verdicts.get(broken_file.name)}, file says {declared[0]}"
