"""The mixed-accelerators example (examples/mixed-accelerators) renders, and its tree passes kubeconform with
the pinned schemas, like FLAME's."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from generator.cli import main
from tests.apiserver.test_kubeconform import kubeconform

pytestmark = pytest.mark.tools  # kubeconform from `make tools`

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "mixed-accelerators" / "gpu_classes.yaml"


def test_the_example_renders_and_passes_kubeconform(tmp_path):
    rendered, bootstrap = tmp_path / "rendered", tmp_path / "bootstrap"
    result = CliRunner().invoke(main, ["render", "--inventory", str(EXAMPLE), "--out", str(rendered),
                                       "--bootstrap-out", str(bootstrap), "--docs-out", str(tmp_path / "runtimes.md")])
    assert result.exit_code == 0, result.output
    r = kubeconform(rendered, bootstrap)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    assert "Invalid: 0, Errors: 0" in r.stdout
