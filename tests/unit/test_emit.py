"""The YAML writer gives the bytes libyaml gives for everything we render and for generated edge cases, and
text both YAML readers read back as the object for everything else.

emit.to_yaml writes every document itself: what libyaml would write in block style from printable ASCII is
compared byte for byte with libyaml (emit.libyaml_text, the reference); strings outside that domain (tabs,
CR, non-ASCII, controls) are double-quoted with escapes and must read back equal with PyYAML's C and
pure-Python readers. The rendered tree must not depend on whether PyYAML has libyaml at all
(test_render_without_libyaml_is_byte_identical).
"""

from __future__ import annotations

import random
import sys

import pytest
from tests.support import REPO

from generator import emit
from generator.builders import bootstrap_objects, synced_objects
from generator.inventory import load_inventory_text

from tests.support import synth


def _quoted_calls() -> int:
    info = emit._double_quoted.cache_info()
    return info.hits + info.misses


def direct_or_none(obj):
    """to_yaml's text when it stayed within libyaml's domain (no double-quoted fallback), else None."""
    emit._one_line.cache_clear()  # a cached one-line string or key would hide its double-quoting
    emit._simple_key.cache_clear()
    before = _quoted_calls()
    text = emit.to_yaml(obj)
    return text if _quoted_calls() == before else None


def reads_back(text: str):
    import yaml

    loaders = (yaml.SafeLoader, getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    documents = [yaml.load(text, Loader=loader) for loader in loaders]
    assert documents[0] == documents[1]
    return documents[0]


def rendered_objects(inventory):
    return synced_objects(inventory) + [o for objs in bootstrap_objects(inventory).values() for o in objs]


@pytest.mark.parametrize("source", ["flame", "synthetic"])
def test_every_rendered_object_is_written_directly_and_as_libyaml_writes_it(source, flame):
    # The synthetic inventory has taints, several architectures, numNodes 2, borrowing limits, cohorts.
    inventory = flame if source == "flame" else load_inventory_text(synth.to_yaml(synth.build(8, 40, 2)), "synth.yaml")
    objects = rendered_objects(inventory)
    assert len(objects) > (10 if source == "flame" else 100)
    for obj in objects:
        direct = direct_or_none(obj)
        assert direct is not None, f"{obj['kind']} {obj['metadata']['name']} fell back to double quotes"
        assert direct == emit.libyaml_text(obj), f"{obj['kind']} {obj['metadata']['name']}"


# Characters that change libyaml's choice: indicators first or after a space, `: ` and ` #`, quotes, spaces at
# either end, line breaks (literal blocks, chomping), tabs and CR (double quotes), non-ASCII (left to libyaml).
ALPHABET = list("ab-?:#,[]{}&*!|>'\"%@` .0135yYnNeE~=<_/") + ["\n", "\n", " ", "-1", "0x1F", "true", "null", "---",
                                                                   "..."]
LEFT_TO_LIBYAML = ["\t", "\r", "é", "…", "\u2028"]


def random_string(rng: random.Random) -> str:
    if rng.random() < 0.03:
        return "".join(rng.choice("abc: ") for _ in range(rng.choice([119, 120, 121, 127, 128, 129, 200])))
    text = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 7)))
    if rng.random() < 0.02:
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(LEFT_TO_LIBYAML) + text[at:]
    return text


def random_value(rng: random.Random, depth: int):
    roll = rng.random()
    if depth >= 4 or roll < 0.45:
        return rng.choice([random_string(rng), random_string(rng), rng.randint(-3, 12), True, False, None])
    if roll < 0.75:
        return {random_string(rng): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
    return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]


def test_random_documents_match_libyaml_or_read_back():
    emit._double_quoted.cache_clear()
    rng = random.Random(20261202)
    direct_used = fell_back = 0
    for _ in range(10000):
        document = {random_string(rng): random_value(rng, 1) for _ in range(rng.randint(1, 4))}
        direct = direct_or_none(document)
        if direct is None:
            fell_back += 1
        else:
            direct_used += 1
            assert direct == emit.libyaml_text(document), repr(document)
        assert reads_back(emit.to_yaml(document)) == document, repr(document)
    # Both paths were exercised, and the libyaml-identical one mostly.
    assert direct_used > 3500 and fell_back > 500, (direct_used, fell_back)


@pytest.mark.parametrize("text", [
    "plain", "with space", "a: b", "a:b", "a #b", "a#b", "trail:", "-", "- x", "-x", "?", "? x", "?x", ":x", "--x",
    "---", "---x", "...", "x...", "'quoted'", "it's", '"dq"', "@at", "`tick", "%pct", "x|y", "a\nb", "a\nb\n",
    "a\n\nb", "a\n  indented\nb", "a\nb\n\n", " lead\nx", "\nlead", "x \ny", "x\ny ", "tab\there", "cr\rhere",
    "", "y", "1e3", "-5", "0777",
    # Longer than the direct writer's one-line limit: a literal block still (a dashboard's JSON).
    '{\n  "title": "x",\n' * 400 + "}\n",
])
def test_style_choices_match_libyaml(text):
    document = {"value": text, "list": [text, [text]], "nested": {"k": text, "items": [{"k": text}]}}
    if "\n" not in text:
        document[text] = "as key"
    direct = direct_or_none(document)
    if direct is not None:
        assert direct == emit.libyaml_text(document)
    assert reads_back(emit.to_yaml(document)) == document


@pytest.mark.parametrize("text", ["é", "tab\there", "a\u2028b", "\x85", "\ufeff", "\x00\x1b\x7f", "\U0001F600",
                                  '"\\', "multi\nline\twith tab", "x" * 5000])
def test_strings_outside_libyaml_domain_read_back(text):
    document = {"value": text, "list": [text], "k" * 130: text}
    assert reads_back(emit.to_yaml(document)) == document


WITHOUT_LIBYAML = """
import sys, yaml
for name in ("CSafeLoader", "CSafeDumper", "CLoader", "CDumper", "CParser", "CEmitter"):
    if hasattr(yaml, name):
        delattr(yaml, name)
yaml.__with_libyaml__ = False
from generator.inventory import load_inventory_text
from generator.tree import render_trees
from generator.inventory import yaml11 as load_module
assert load_module._InventoryLoader.__mro__[1] is yaml.SafeLoader, "the pure-Python reader must be in use"
trees = render_trees(load_inventory_text(sys.stdin.read(), "inv.yaml"), "inv.yaml")
import json
json.dump({"synced": {k: v.decode() for k, v in trees.synced.items()},
           "bootstrap": {k: v.decode() for k, v in trees.bootstrap.items()}, "docs": trees.docs.decode()}, sys.stdout)
"""


def _unusual(text: str) -> str:
    """FLAME with descriptions outside libyaml's domain of the direct writer: non-ASCII, tabs, several lines."""
    line = next(line for line in text.splitlines() if line.strip().startswith("description: NVIDIA GH200"))
    indent = line[:len(line) - len(line.lstrip())]
    return text.replace(
        line, indent + 'description: "Grâce Hopper\\tsuperchip — 72 cœurs\\n\\nsecond paragraph\\n\\n"', 1)


@pytest.mark.parametrize("variant", ["flame", "unusual"])
def test_render_without_libyaml_is_byte_identical(variant):
    import json
    import subprocess

    from generator.tree import render_trees

    text = (REPO / "gpu_classes.yaml").read_text()
    if variant == "unusual":
        text = _unusual(text)
        assert text != (REPO / "gpu_classes.yaml").read_text()
    trees = render_trees(load_inventory_text(text, "inv.yaml"), "inv.yaml")
    pure = json.loads(subprocess.run([sys.executable, "-c", WITHOUT_LIBYAML], input=text, capture_output=True,
                                     text=True, check=True, cwd=REPO).stdout)
    assert pure["synced"] == {k: v.decode() for k, v in trees.synced.items()}
    assert pure["bootstrap"] == {k: v.decode() for k, v in trees.bootstrap.items()}
    assert pure["docs"] == trees.docs.decode()
