"""The direct YAML writer gives the bytes libyaml gives, for everything we render and for generated edge cases.

emit.to_yaml writes most objects itself and leaves the rest to libyaml (emit.libyaml_text, the reference).
These tests compare the two on every rendered object and on seeded random documents whose strings are built
from the characters that decide libyaml's style choice (indicators, spaces, quotes, line breaks, tabs,
non-ASCII). Each test also checks that the direct writer really ran, so none can pass by falling back.
"""

from __future__ import annotations

import random
import sys

import pytest
from conftest import REPO

from generator import emit
from generator.builders import bootstrap_objects, synced_objects
from generator.inventory import load_inventory_text

sys.path.insert(0, str(REPO / "benchmarks"))
import synth  # noqa: E402


def direct_or_none(obj):
    try:
        return emit._direct_yaml(obj)
    except emit._LeftToLibyaml:
        return None


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
        assert direct is not None, f"{obj['kind']} {obj['metadata']['name']} fell back to libyaml"
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


def test_random_documents_match_libyaml():
    rng = random.Random(20261202)
    direct_used = fell_back = 0
    for _ in range(10000):
        document = {random_string(rng): random_value(rng, 1) for _ in range(rng.randint(1, 4))}
        expected = emit.libyaml_text(document)
        direct = direct_or_none(document)
        if direct is None:
            fell_back += 1
        else:
            direct_used += 1
            assert direct == expected, repr(document)
        assert emit.to_yaml(document) == expected
    # Both paths were exercised, and the direct one mostly.
    assert direct_used > 3500 and fell_back > 500, (direct_used, fell_back)


@pytest.mark.parametrize("text", [
    "plain", "with space", "a: b", "a:b", "a #b", "a#b", "trail:", "-", "- x", "-x", "?", "? x", "?x", ":x", "--x",
    "---", "---x", "...", "x...", "'quoted'", "it's", '"dq"', "@at", "`tick", "%pct", "x|y", "a\nb", "a\nb\n",
    "a\n\nb", "a\n  indented\nb", "a\nb\n\n", " lead\nx", "\nlead", "x \ny", "x\ny ", "tab\there", "cr\rhere",
    "", "y", "1e3", "-5", "0777",
])
def test_style_choices_match_libyaml(text):
    document = {"value": text, "list": [text, [text]], "nested": {"k": text, "items": [{"k": text}]}}
    if "\n" not in text:
        document[text] = "as key"
    assert emit.to_yaml(document) == emit.libyaml_text(document)
