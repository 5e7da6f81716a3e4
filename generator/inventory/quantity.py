"""Kubernetes resource quantities as k8s.io/apimachinery/pkg/api/resource reads them: parsing for capacity
arithmetic, formatting for messages.

The grammar is apimachinery's (quantity.go), which the Kueue CRDs' `pattern` repeats:

    quantity ::= [+|-] number [suffix]
    number   ::= digits | digits "." [digits] | "." digits
    suffix   ::= Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | k | M | G | T | P | E | (e|E) [+|-] digits

Kubernetes rounds a value up to a whole nano (0.1n -> 1n), and no quantity may exceed 2^63-1 in magnitude:
beyond that ParseQuantity caps binary suffixes silently and leaves the rest to overflow in Value(), so this
parser refuses such values instead of passing on a number the cluster would read differently. Values are
built exactly from their digits (never through Decimal arithmetic, whose default context keeps 28 digits).
The tests compare this module with the pinned apimachinery's ParseQuantity.
The Kubernetes client's parse_quantity does not fit: it accepts what Kubernetes refuses (`1K`, `NaN`, `1_0`).
"""

from __future__ import annotations

import re
from functools import lru_cache
from decimal import ROUND_UP, Context, Decimal, localcontext

_SUFFIX = {
    "": Decimal(1),
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"),
    "T": Decimal("1e12"), "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30),
    "Ti": Decimal(2**40), "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}
_DECIMAL_EXPONENT = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"(?P<sign>[+-]?)(?P<integer>[0-9]*)(?:\.(?P<fraction>[0-9]*))?"
                       r"(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|[eE](?P<exponent>[+-]?[0-9]+))?")
INT64_MAX = 2**63 - 1  # Kubernetes holds counts and quantities in int64s
MAX_QUANTITY = Decimal(INT64_MAX)  # apimachinery's maxAllowed
_NANO = Decimal("1e-9")
# Wide enough for sums of many values under MAX_QUANTITY with nine decimals: totals and nano rounding are exact
# (Decimal's default context keeps 28 digits and would round them).
_EXACT = Context(prec=100)
# apimachinery reads a decimal exponent into an int32 (and silently wraps a larger one).
_INT32 = range(-(2**31), 2**31)


@lru_cache(maxsize=65536)  # pure, and a national inventory repeats the same few quantities thousands of times
def parse_quantity(text: str) -> Decimal:
    """'480Gi' -> bytes, '500m' -> 0.5, '+1' -> 1; ValueError when Kubernetes would refuse it or could not
    hold it in an int64."""
    match = _QUANTITY.fullmatch(text)
    if not match or not (match["integer"] or match["fraction"]):
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 72, 500m, 480Gi, 1.5){_suffix_hint(text)}")
    digits = (match["integer"] or "0") + (match["fraction"] or "")
    scale = -len(match["fraction"] or "")
    suffix = match["suffix"] or ""
    if match["exponent"] is not None:
        exponent = int(match["exponent"])
        if exponent not in _INT32:
            raise ValueError(f"{text!r}: exponent {exponent} is out of range (Kubernetes reads it as a 32-bit number)")
        scale += exponent
    else:
        scale += _DECIMAL_EXPONENT.get(suffix, 0)
    # Built from its digits, so exact at any length.
    value = Decimal((1 if match["sign"] == "-" else 0, tuple(int(d) for d in digits), scale))
    if suffix.endswith("i"):
        value = _EXACT.multiply(value, _SUFFIX[suffix])
    if value.copy_abs() > MAX_QUANTITY:
        raise ValueError(f"{text!r} is larger than Kubernetes can hold (at most 2^63-1 = {MAX_QUANTITY})")
    if value.as_tuple().exponent < -9:  # type: ignore[operator]
        value = value.quantize(_NANO, rounding=ROUND_UP, context=_EXACT)  # as Kubernetes: 0.1n -> 1n
    return value


_UNIT = re.compile(r"[+-]?[0-9.]+\s*(?P<unit>[A-Za-z]+)")


def _suffix_hint(text: str) -> str:
    """A hint for the units people write by habit: GB, KiB, K, gi."""
    match = _UNIT.fullmatch(text)
    if not match:
        return ""
    unit = match["unit"]
    prefix = unit[0].upper() if unit[0] in "kKmMgGtTpPeE" else None
    if prefix is None:
        return ""
    decimal = "k" if prefix == "K" else prefix
    return f": write {decimal} (powers of 1000) or {prefix}i (powers of 1024), without spaces or B"


def exact_arithmetic():
    """`with exact_arithmetic():` sums and products of quantities without rounding."""
    return localcontext(_EXACT)


def format_total(value: Decimal, binary: bool) -> str:
    """Shortest exact quantity for messages: 960G, 512Gi, 144."""
    with exact_arithmetic():
        return _format_total(value, binary)


def _format_total(value: Decimal, binary: bool) -> str:
    plain = f"{value.normalize():f}"
    if not binary:
        return plain
    exact = [f"{value // _SUFFIX[s]}{s}" for s in ("k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
             if value >= _SUFFIX[s] and value % _SUFFIX[s] == 0]
    return min(exact, key=len, default=plain)
