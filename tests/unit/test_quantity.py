"""Quantities: gpugen's parser against the pinned k8s.io/apimachinery's resource.ParseQuantity, table-driven.

tests/oracles/quantity/main.go is built against the apimachinery release of the pinned Kubernetes (v1.Y.Z -> v0.Y.Z,
from the Go module proxy) and parses the same strings. Each row says what Kubernetes does with the input and
whether gpugen agrees; the rows where gpugen refuses what ParseQuantity accepts say why, and the test checks
that reason against ParseQuantity's own output (a wrapped exponent, an int64 overflow in Value()).
What gpugen accepts is also checked against the pattern the pinned Kueue CRDs put on quota fields.
"""

from __future__ import annotations

import json
import re
import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
import yaml
from tests.support import INVENTORY, ORACLES, REPO
from simulation.go_tools import go_program
from simulation.prerequisites import unavailable

from generator.inventory import InventoryInvalid, load_inventory_text
from generator.inventory.quantity import MAX_QUANTITY, parse_quantity
from generator.versions import pin
from simulation.waiting import ceiling

SOURCE = ORACLES / "quantity" / "main.go"

SAME = "same"  # both accept with the same exact value, or both refuse
GO_LENIENT = "go-lenient"  # ParseQuantity reads it as 0; outside its documented grammar and the CRD pattern
OVER_INT64 = "over-int64"  # ParseQuantity accepts it, but the int64 every component reads is not the value
EXPONENT_WRAPS = "exponent-wraps"  # ParseQuantity reads the exponent into an int32: 1e4294967297 becomes 10

# (input, what Kubernetes does / why gpugen differs); expectations written from quantity.go's grammar comment.
CASES = [
    ("0", SAME), ("1", SAME), ("72", SAME), ("+1", SAME), ("-1", SAME), ("-0", SAME), ("007", SAME),
    ("1.5", SAME), (".5", SAME), ("5.", SAME), ("1.G", SAME), ("0.5Gi", SAME),
    ("500m", SAME), ("1n", SAME), ("1u", SAME), ("1k", SAME), ("1M", SAME), ("1G", SAME), ("1T", SAME),
    ("1P", SAME), ("1E", SAME), ("480Gi", SAME), ("1Ki", SAME), ("1Mi", SAME), ("1Ti", SAME), ("1Pi", SAME),
    ("7Ei", SAME), ("240G", SAME), ("1900Gi", SAME),
    ("1e3", SAME), ("1E3", SAME), ("1e+3", SAME), ("1e-3", SAME), ("1.5e2", SAME), ("1e0", SAME),
    ("0.1n", SAME),  # rounded up to 1n
    ("1e-20", SAME),  # rounded up to 1n
    ("1.00000000000000000000000000001", SAME),  # 30 digits: rounded up to 1.000000001, not cut to 28 digits
    ("0.000000000000000000000000000000000000001", SAME),
    ("9223372036854775807", SAME),  # 2^63-1, the largest int64
    ("9223372036854775806.999999999", SAME),  # 28 significant digits
    ("00000000000000000000000000000000000000001", SAME),
    ("", SAME), ("1K", SAME), ("1ki", SAME), ("1KiB", SAME), ("1GB", SAME), ("1 Gi", SAME), (" 1", SAME),
    ("1e", SAME), ("1ee5", SAME), ("1e1.5", SAME), ("1Gi1", SAME), ("--1", SAME), ("1.5.5", SAME),
    ("NaN", SAME), ("Infinity", SAME), ("1_000", SAME), ("0x10", SAME), ("1\n", SAME), ("1e99999999999999999999", SAME),
    ("+", GO_LENIENT), ("-", GO_LENIENT), (".", GO_LENIENT), ("+.", GO_LENIENT),
    ("9223372036854775808", OVER_INT64), ("8Ei", OVER_INT64), ("9Ei", OVER_INT64), ("1e19", OVER_INT64),
    ("1e2000", OVER_INT64), ("-9223372036854775809", OVER_INT64),
    ("1" * 40, OVER_INT64),
    ("1e4294967297", EXPONENT_WRAPS), ("1e-4294967295", EXPONENT_WRAPS),
]


@pytest.fixture(scope="session")
def apimachinery_version() -> str:
    return "v0." + pin("KUBERNETES").removeprefix("v1.")  # the staging module's release for v1.Y.Z


@pytest.fixture(scope="session")
def parse_quantity_upstream(tmp_path_factory, apimachinery_version):
    """tests/oracles/quantity built against the pinned apimachinery (cached by version and source hash). A missing Go
    toolchain skips locally and fails in CI; a failed build always fails."""
    binary = go_program(SOURCE, "gpugen.local/quantity", [f"k8s.io/apimachinery@{apimachinery_version}"],
                        tmp_path_factory)

    def parse(inputs: list[str]) -> list[dict]:
        done = subprocess.run([str(binary)], input=json.dumps(inputs), capture_output=True, text=True,
                              timeout=ceiling(12))
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    return parse


def ours(text: str) -> Decimal | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None


def test_parser_agrees_with_apimachinery_parse_quantity(parse_quantity_upstream):
    results = parse_quantity_upstream([text for text, _ in CASES])
    wrong = []
    for (text, expected), upstream in zip(CASES, results, strict=True):
        mine = ours(text)
        exact = Decimal(upstream["exact"]) if upstream["ok"] else None
        if expected == SAME:
            agrees = mine == exact if upstream["ok"] else mine is None
        elif expected == GO_LENIENT:
            agrees = mine is None and upstream["ok"] and exact == 0
        elif expected == OVER_INT64:
            # Accepted upstream, but what components read (Value(), or the binary cap) is not what was written.
            written = Decimal(text.removesuffix("Ei")) * 2**60 if text.endswith("Ei") else Decimal(text)
            agrees = mine is None and upstream["ok"] and (upstream["value"] != written or exact != written)
        elif expected == EXPONENT_WRAPS:
            mantissa, _, exponent = text.partition("e")
            wrapped = (int(exponent) + 2**31) % 2**32 - 2**31
            agrees = (mine is None and upstream["ok"]
                      and exact == max(Decimal(mantissa).scaleb(wrapped), Decimal("1e-9")))
        else:
            raise AssertionError(f"unknown expectation {expected}")
        if not agrees:
            wrong.append(f"{text!r} ({expected}): gpugen {mine}, apimachinery {upstream}")
    assert not wrong, "\n".join(wrong)


def kueue_quantity_pattern() -> re.Pattern[str]:
    """The pattern the pinned Kueue ClusterQueue CRD puts on nominalQuota (tools/crds.sh)."""
    done = subprocess.run(["bash", str(REPO / "tools" / "crds.sh")], capture_output=True, text=True,
                          timeout=ceiling(60))
    if done.returncode != 0:
        unavailable(f"tools/crds.sh could not assemble the pinned CRDs: {done.stderr.strip()[-300:]}")
    crd = yaml.safe_load((Path(done.stdout.strip()) / "kueue.x-k8s.io_clusterqueues.yaml").read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    flavors = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["resourceGroups"]["items"][
        "properties"]["flavors"]["items"]["properties"]["resources"]["items"]["properties"]
    return re.compile(flavors["nominalQuota"]["pattern"])


def test_what_gpugen_accepts_passes_the_kueue_crd_pattern():
    pattern = kueue_quantity_pattern()
    for text, _ in CASES:
        if ours(text) is not None:
            assert pattern.search(text) and "\n" not in text, text


def test_limits_are_messages_not_tracebacks():
    with pytest.raises(ValueError, match="larger than Kubernetes can hold"):
        parse_quantity("1e999999999")
    with pytest.raises(ValueError, match="exponent 4294967297 is out of range"):
        parse_quantity("1e4294967297")
    with pytest.raises(ValueError, match="larger than Kubernetes can hold"):
        parse_quantity("1" * 29)
    assert parse_quantity(str(MAX_QUANTITY)) == 2**63 - 1
    assert parse_quantity("1." + "0" * 40 + "1") == Decimal("1.000000001")


FLAME = INVENTORY.read_text(encoding="utf-8")


def invalid(text: str) -> str:
    with pytest.raises(InventoryInvalid) as caught:
        load_inventory_text(text, "gpu_classes.yaml")
    return str(caught.value)


def test_inventory_takes_a_plus_sign_and_refuses_negatives():
    assert "cpu: 36\n" in FLAME
    load_inventory_text(FLAME.replace("cpu: 36\n", 'cpu: "+36"\n', 1), "gpu_classes.yaml")
    assert "'-36' is negative" in invalid(FLAME.replace("cpu: 36\n", 'cpu: "-36"\n', 1))


def test_an_unquoted_decimal_gets_a_hint_to_quote_it():
    message = invalid(FLAME.replace("cpu: 36\n", "cpu: 1.5\n", 1))
    assert re.search(r"gpu_classes.yaml:\d+:\d+: groups\.[a-z-]+\.allocations\.gh200\.cpu: 1\.5 was read as a YAML "
                     r'float: quote it \("1\.5"\)', message), message


def test_capacity_totals_keep_every_digit():
    """Two CPU quotas just under 2^63 each add up to 29 significant digits; one nano over the class's capacity is
    still oversubscribed (Decimal's default 28 digits would round the total down to the capacity)."""
    big = '"9223372036854775806"'
    text = (FLAME.replace("      cpu: 72\n", f"      cpu: {big}\n", 1)
            .replace("        cpu: 36\n", f"        cpu: {big}\n", 1))
    at_capacity = text.replace("        cpu: 36\n", f"        cpu: {big}\n", 1)
    load_inventory_text(at_capacity, "gpu_classes.yaml")
    over = text.replace("        cpu: 36\n", '        cpu: "9223372036854775806.000000001"\n', 1)
    assert "class gh200 cpu oversubscribed" in invalid(over)


@pytest.mark.parametrize("text, hint", [("480GB", "write G (powers of 1000) or Gi (powers of 1024)"),
                                        ("1KiB", "write k (powers of 1000) or Ki (powers of 1024)"),
                                        ("2 Gi", "without spaces"), ("1x", None)])
def test_habitual_units_get_a_hint(text, hint):
    with pytest.raises(ValueError) as refused:
        parse_quantity(text)
    assert str(refused.value).startswith(f"{text!r} is not a Kubernetes quantity")
    assert (hint in str(refused.value)) if hint else str(refused.value).endswith("1.5)")
