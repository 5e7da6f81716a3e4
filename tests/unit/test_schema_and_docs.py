"""The editor schema is a fresh export of the models; the users' runtimes page answers their questions."""

from __future__ import annotations

import json

from click.testing import CliRunner
from tests.support import INVENTORY, REPO

from generator.cli import main
from generator.inventory.models import json_schema
from generator.userdocs import runtimes_page

SCHEMA = REPO / "schema" / "gpu_classes.schema.json"


def test_committed_schema_equals_a_fresh_export():
    assert json.loads(SCHEMA.read_text()) == json_schema(), "run `make schema`"
    assert SCHEMA.read_text() == CliRunner().invoke(main, ["schema"]).output


def test_inventory_points_editors_at_the_schema():
    first = INVENTORY.read_text().splitlines()[0]
    assert first == "# yaml-language-server: $schema=./schema/gpu_classes.schema.json"


def test_schema_rejects_unknown_keys_like_the_loader():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert all(d.get("additionalProperties") is False for d in schema["$defs"].values() if "properties" in d)


def test_runtimes_page_answers_users_questions(flame):
    page = runtimes_page(flame, "gpu_classes.yaml")
    # Which runtimes exist, and that there is no GPU-agnostic one.
    assert "| `torch-gh200` | `gh200` | `arm64` | `ghcr.io/urcf/pytorch:2.9.1-cuda12.9` | 2 × 1 |" in page
    assert "no GPU-agnostic runtime" in page
    # What each runtime sets.
    for variable, value in flame.cluster.cacheEnv.items():
        assert f"| `{variable}` | `{value}` |" in page
    assert "`/dev/shm` | memory-backed" in page and "| `/personal` | your home PVC" in page
    assert "| Default number of nodes | 1 |" in page
    # How to ask for one GPU and for two nodes with one GPU each.
    assert 'resources_per_node={"cpu": 8, "memory": "64Gi", "gpu": 1}' in page
    assert "num_nodes=2," in page
    assert 'nvidia.com/gpu: "1"' in page
    # Each group's allocation per class.
    assert "| `vision-lab` | `vision-lab` | `flame` | `gh200` | 1 | 36 | 240G |" in page
    assert "| `nlp-lab` | `nlp-lab`, `nlp-lab-teaching` | `flame` | `gh200` | 1 | 36 | 240G |" in page


def test_runtimes_page_is_part_of_the_render(flame):
    assert (REPO / "docs" / "runtimes.md").read_text() == runtimes_page(flame, "gpu_classes.yaml")


def test_runtimes_page_reads_as_prose(flame):
    """Counts agree with their nouns, and no prose line starts with a space (Markdown would fold or indent it)."""
    page = runtimes_page(flame, "gpu_classes.yaml")
    assert "(s)" not in page
    # FLAME: 2 GH200 nodes with 1 GPU each.
    assert "| Hardware | 2 nodes, each 1 GPU, 72 CPU, 480G memory: 2 GPUs in total |" in page
    assert "A single-node job can use at most 1 GPU (one node's worth).\n\nFor two nodes with 1 GPU each," in page
    in_code = False
    for line in page.splitlines():
        in_code ^= line.startswith("```")
        assert in_code or line.startswith("```") or not line.startswith(" "), line
