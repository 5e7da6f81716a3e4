"""The inventory's free text, drawn from the whole of Unicode, in every output it reaches (generator/freetext.py).

Each drawn text is made a class's unit, a class's, a group's and a priority's description and a cache variable's
value of examples/mixed-accelerators. Either the inventory is refused, at the field's line and only for a reason
freetext.problem gives, or the render holds and each output reads the text back as it was written:
- the users' page, parsed as CommonMark with GFM tables (markdown-it-py), cell by cell and paragraph by paragraph;
- the policies, every one compiled by the real kyverno CLI, and the job-limits message that names the unit
  evaluated by Kyverno's CEL engine (tests/oracles/kyverno-engine) with the group's ConfigMap;
- PromQL through Prometheus' parser (tests/oracles/promqlparse), the literal read back as the text;
- the dashboards' JSON (titles and descriptions hold the text, and no Grafana variable);
- the report's CSV through `csv`, and its chart drawn by matplotlib with the unit as plain text.

The examples are batches of texts (the oracles run once per batch); CI runs GPUGEN_PROPERTY_EXAMPLES / 100 batches
(at least 2) of 16 with a fixed seed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from array import array
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from generator import emit, freetext
from generator.builders import kyverno, prometheus
from generator.builders.core import job_limits_data
from generator.errors import InventoryInvalid
from generator.inventory import load_inventory_text
from generator.report import output, usage
from generator.tree import render_trees
from generator.versions import pin
from simulation.go_tools import go_program
from simulation.waiting import ceiling
from tests.support import ORACLES, REPO, require_tool
from tests.support.policy_corpus import kyverno_engine, kyverno_path

EXAMPLE = REPO / "examples" / "mixed-accelerators" / "gpu_classes.yaml"
BATCHES = max(2, int(os.environ.get("GPUGEN_PROPERTY_EXAMPLES", "300")) // 100)
BATCH = 16
# Where the text goes in the example (each line replaced whole).
UNIT = "      unit: MI300X"
CLASS_DESCRIPTION = "    description: AMD Instinct MI300X (192 GB HBM3)"
GROUP_DESCRIPTION = "    description: Computer vision research group"
PRIORITY_DESCRIPTION = "    description: The default"
CACHE = "    TRITON_CACHE_DIR: /personal/.cache/triton"

# Pieces that mean something to one output or another, mixed into the drawn text.
HOSTILE = ["|", "\\|", "`", "``", "*", "_", "\\", "$", "$$", "${x}", "$1", "[[a]]", "{{", "}}", "<b>", "&amp;",
           "&#35;", "#", "- ", "1. ", "> ", "[x](y)", "~~", "=", "+", "@", '"', "'", ",", "\n", "\t", "  ",
           "\u00a0", "\u202e", "\u2066", "\u200b", "\u200d", "\ufeff", "\u00ad", "\u2028", "\x85", "\x00", "\x1b",
           "\U0001f600", "\U0001f469\u200d\U0001f52c", "\u0301", "\ufdd0", "\U0010ffff", "\ue000", "\U000e0001"]
TEXT = st.lists(st.one_of(st.characters(), st.sampled_from(HOSTILE)), min_size=1, max_size=12).map("".join)

MARKDOWN = MarkdownIt("commonmark").enable("table").enable("strikethrough")


def yaml_string(text: str) -> str:
    """A YAML double-quoted scalar of `text`, every character outside printable ASCII escaped (\\x, \\u, \\U): the
    reader gets exactly `text`, line breaks and all."""
    out = []
    for char in text:
        code = ord(char)
        if char in '"\\':
            out.append("\\" + char)
        elif 0x20 <= code < 0x7F:
            out.append(char)
        else:
            out.append(f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def variant(text: str) -> str:
    source = EXAMPLE.read_text(encoding="utf-8")
    for line, field in ((UNIT, "      unit: "), (CLASS_DESCRIPTION, "    description: "),
                        (GROUP_DESCRIPTION, "    description: "), (PRIORITY_DESCRIPTION, "    description: ")):
        assert source.count(line + "\n") == 1, line
        source = source.replace(line + "\n", field + yaml_string(text) + "\n")
    return source.replace(CACHE + "\n", "    TRITON_CACHE_DIR: " + yaml_string("/personal/" + text) + "\n")


def accepted(text: str) -> bool:
    """What freetext says of the text in each field it was put in (the unit reaches every output)."""
    return all(freetext.problem(t, **outputs) is None for t, outputs in [
        (text, {"grafana": True, "spreadsheet": True}), (text, {"line_breaks": True, "grafana": True}),
        ("/personal/" + text, {})]) and len(text) <= 80


def shown(text: str) -> str:
    """The text as Markdown shows it: a line break is a space, the outer whitespace goes."""
    return text.replace("\n", " ").strip()


def cells(tokens) -> list[list[str]]:
    """The text of each cell of each table row (code spans' content included), row by row."""
    rows, row, inside = [], None, False
    for token in tokens:
        if token.type == "tr_open":
            row = []
        elif token.type in ("td_open", "th_open"):
            inside = True
        elif token.type in ("td_close", "th_close"):
            inside = False
        elif token.type == "tr_close":
            rows.append(row)
        elif token.type == "inline" and inside:
            row.append(plain(token))
    return rows


def plain(inline) -> str:
    return "".join(c.content if c.type in ("text", "code_inline") else " " if "break" in c.type else ""
                   for c in inline.children)


def paragraphs(tokens) -> list[str]:
    return [plain(tokens[i + 1]) for i, t in enumerate(tokens) if t.type == "paragraph_open"]


def check_page(page: str, text: str) -> None:
    tokens = MARKDOWN.parse(page)
    rows = cells(tokens)
    assert ["torch-mi300x", "mi300x", "amd64",
            "docker.io/rocm/pytorch:rocm6.4_ubuntu24.04_py3.12_pytorch_release_2.6.0",
            f"1 × 8 ({shown(text)}, amd.com/gpu)"] in rows
    assert ["TRITON_CACHE_DIR", "/personal/" + text] in rows
    hardware = [row for row in rows if row[0] == "Hardware" and f"8 x {shown(text)}" in row[1]]
    assert hardware, rows
    texts = paragraphs(tokens)
    assert shown(text) + "." in texts, texts
    assert any(f"normal (100: {shown(text)})" in p for p in texts), texts


def check_dashboards(synced: dict[str, bytes], text: str) -> None:
    objects = [yaml.safe_load(content) for path, content in synced.items() if path.startswith("core/configmap/")]
    boards = [json.loads(v) for o in objects if "grafana_dashboard" in o["metadata"].get("labels", {})
              for v in o["data"].values()]
    assert boards
    panels = [p for board in boards for p in board.get("panels", [])]
    titles = [p.get("title", "") for p in panels]
    assert f"mi300x: units of {text} admitted vs nominal quota" in titles, titles
    for board in boards:
        for panel in board.get("panels", []):
            for words in (panel.get("title", ""), panel.get("description", "")):
                assert not freetext._GRAFANA_VARIABLE.search(words), words
    notes = [p["options"]["content"] for p in panels if p.get("type") == "text"]
    assert any(f"vision-lab: {shown(text)}" in paragraphs(MARKDOWN.parse(n))[0] for n in notes), notes


def check_report(inventory, text: str, tmp_path: Path) -> None:
    period = usage.Period(0, 7200, 60)
    samples = usage.Samples(array("d", [0.0]), array("d", [2.0]))
    report = usage.usage_report(inventory, period, {("vision-lab", "mi300x", "amd.com/gpu"): samples}, "test")
    rows = list(csv.DictReader(io.StringIO(output.csv_text(report))))
    assert {row["gpu_unit"] for row in rows if row["class"] == "mi300x"} == {text}
    pytest.importorskip("matplotlib")
    from matplotlib.text import Text
    # The label matplotlib draws: the text as it is, not mathtext (which a pair of $ would start, or fail on).
    label = Text(text=freetext.matplotlib_text(text))
    assert label._preprocess_math(label.get_text()) == (text, False)
    if "$" in text or "\\" in text:
        # What matplotlib's text parser reads: the chart draws (a broken mathtext would raise). Drawing takes a
        # second, so only such texts are drawn.
        assert output.chart(report, "svg").startswith(b"<?xml")


@pytest.fixture(scope="module")
def oracles(tmp_path_factory):
    require_tool(kyverno_path(), f"kyverno CLI {pin('KYVERNO')}", "run `make tools` (tools/build.sh kyverno)")
    engine = kyverno_engine(tmp_path_factory)
    promql = go_program(ORACLES / "promqlparse" / "main.go", "gpugen.local/promqlparse",
                        [f"github.com/prometheus/prometheus@{pin('PROMETHEUS')}"], tmp_path_factory)
    return engine, promql


def evaluate_messages(engine: Path, rendered: list[tuple[str, object]], work: Path) -> dict[str, str]:
    """Kyverno's CEL engine on a TrainJob asking torch-mi300x for 9 GPUs a node, judged by each variant's job-limits
    (renamed apart, each with its group's ConfigMap): text -> its message, which counts the node's units in the
    class's unit."""
    paths, limits = [], []
    for index, (_, inventory) in enumerate(rendered):
        policy = next(p for p in kyverno.policies(inventory) if p["metadata"]["name"] == kyverno.LIMITS)
        policy["metadata"]["name"] = f"job-limits-{index}"
        paths.append(work / f"job-limits-{index}.yaml")
        paths[-1].write_bytes(emit.manifest(policy, "gpu_classes.yaml"))
        limits.append(job_limits_data(inventory, "vision-lab"))
    # The variants' groups hold the same limits: one ConfigMap serves them all.
    assert all(data == limits[0] for data in limits)
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "job-limits", "namespace": "vision-lab"}, "data": limits[0]}
    job = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "too-many", "namespace": "vision-lab"},
           "spec": {"runtimeRef": {"name": "torch-mi300x"},
                    "trainer": {"resourcesPerNode": {"limits": {"amd.com/gpu": "9"}}}}}
    request = [{"id": "too-many", "operation": "CREATE", "subResource": "", "username": "alice", "object": job,
                "oldObject": None, "namespaces": ["vision-lab"], "resources": [config_map]}]
    done = subprocess.run([str(engine), *map(str, paths)], input=json.dumps(request), capture_output=True, text=True,
                          timeout=ceiling(30))
    assert done.returncode == 0, done.stderr
    answers = {a["policy"]: a for a in json.loads(done.stdout)}
    assert set(answers) == {f"job-limits-{i}" for i in range(len(rendered))}, answers
    assert all(a["status"] == "fail" for a in answers.values()), answers
    return {text: answers[f"job-limits-{i}"]["message"] for i, (text, _) in enumerate(rendered)}


def compile_every_policy(rendered: list[tuple[str, object]], work: Path) -> None:
    """The kyverno CLI loads and compiles every policy of every variant (each renamed apart) and applies them to a
    plain Job: a policy it cannot compile fails the run."""
    directory = work / "policies"
    directory.mkdir()
    for index, (_, inventory) in enumerate(rendered):
        for policy in kyverno.policies(inventory):
            policy["metadata"]["name"] += f"-{index}"
            (directory / f"{policy['metadata']['name']}.yaml").write_bytes(emit.manifest(policy, "gpu_classes.yaml"))
    job = work / "job.yaml"
    job.write_text(yaml.safe_dump({"apiVersion": "batch/v1", "kind": "Job",
                                   "metadata": {"name": "plain", "namespace": "elsewhere"},
                                   "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [
                                       {"name": "main", "image": "busybox:1.37"}]}}}}))
    done = subprocess.run([str(kyverno_path()), "apply", str(directory), "--resource", str(job), "--remove-color"],
                          capture_output=True, text=True, timeout=ceiling(60))
    # A policy the CLI cannot compile fails the run (exit 1, "failed to compile policy ...").
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(1 for _ in directory.iterdir())
    assert f"Applying {count} policy rule(s) to 1 resource(s)" in done.stdout, done.stdout


def parse_promql(promql: Path, texts: list[str]) -> dict[str, list[str]]:
    queries = [{"id": str(i), "expression": f"up{{label={prometheus.promql_string(t)}}} or vector(0) * "
                                            f"absent(x{{y={prometheus.promql_string(t)}}})"}
               for i, t in enumerate(texts)]
    done = subprocess.run([str(promql)], input=json.dumps(queries), capture_output=True, text=True,
                          timeout=ceiling(12))
    assert done.returncode == 0, done.stderr
    return {texts[int(r["id"])]: r for r in json.loads(done.stdout)}


# The issue's cases and their kin, in every run beside the drawn batches.
NAMED = ["1/4 | `slice` *of* an L40S", "\U0001f600 card", "1", "a\u202eb", "x\\", "$$5$$ card", "{{ .Values }}",
         "# heading", "<script>x</script>", "&lt;", "- item", "=SUM(A1)", "MI300X \u00e9\u4e2d", "\ufeffbom",
         "a\u200db", "[link](http://x)"]


@pytest.mark.tools
@settings(max_examples=BATCHES, deadline=None, derandomize=True, database=None, report_multiple_bugs=False,
          phases=[Phase.explicit, Phase.generate],  # a batch is its own report: shrinking one takes minutes
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(texts=st.lists(TEXT, min_size=BATCH, max_size=BATCH, unique=True))
@example(texts=NAMED)
def test_free_text_reads_back_from_every_output(texts, oracles, tmp_path_factory):
    engine, promql = oracles
    work = tmp_path_factory.mktemp("free-text")
    rendered = []
    for text in texts:
        source = variant(text)
        try:
            inventory = load_inventory_text(source, "gpu_classes.yaml")
        except InventoryInvalid as refused:
            assert not accepted(text), f"{text!r} refused: {refused}"
            # Refused at one of the lines the text went to, naming the field.
            lines = {i + 1 for i, line in enumerate(source.splitlines()) if yaml_string(text) in line
                     or yaml_string("/personal/" + text) in line}
            assert any(f":{line}:" in str(refused) for line in lines), (text, str(refused))
            continue
        assert accepted(text), f"{text!r} accepted, but freetext refuses it"
        trees = render_trees(inventory, "gpu_classes.yaml")
        check_page(trees.docs.decode("utf-8"), text)
        check_dashboards(trees.synced, text)
        check_report(inventory, text, work)
        rendered.append((text, inventory))
    if not rendered:
        return
    compile_every_policy(rendered, work)
    for text, message in evaluate_messages(engine, rendered, work).items():
        assert f"torch-mi300x nodes have 8 x {text} each" in message, (text, message)
    for text, parsed in parse_promql(promql, [t for t, _ in rendered]).items():
        assert parsed["error"] == "" and parsed["strings"] == [text, text], (text, parsed)
