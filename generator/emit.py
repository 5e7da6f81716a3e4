"""Objects to YAML text: deterministic, one document per file, safe for Kubernetes' YAML 1.1 reader.

The text is written here, not by an emitter library, so it never depends on whether PyYAML was built with
libyaml (its pure-Python emitter chooses styles differently: an empty key becomes `? ''`, a string holding
U+0085 is single- rather than double-quoted, ...). Every string a YAML 1.1 or 1.2 reader could resolve to
something else is quoted: PyYAML would leave `y`, `n` and `1e3` plain, which Kubernetes and Argo CD read as a
boolean or a number.

Block mappings and sequences of printable ASCII scalars are written exactly as libyaml writes them (plain,
single-quoted or literal styles, chosen by libyaml's rules); the tests check that byte for byte
against libyaml (`libyaml_text`, the reference) for every rendered object and for generated edge cases. A
string outside that domain (non-ASCII text, tabs, control characters, a multi-line string libyaml would
double-quote, anything over 4,096 characters) is written double-quoted on one line with YAML's escapes, and a
key longer than 120 characters as an explicit `? key`; the tests check that both YAML readers, C and pure
Python, read every such document back as the object that was written.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"

_NOT_PLAIN_WORDS = frozenset([
    "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "true", "True", "TRUE", "false", "False", "FALSE",
    "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~", "<<", "=",
])
# Anything number-like in YAML 1.1 or 1.2: ints in any base, sexagesimal, floats with or without a dot,
# exponents, .inf/.nan, and timestamps (which start with digits too). Over-quoting costs nothing.
_NUMBER_LIKE = re.compile(r"^[-+]?(?:[0-9.][0-9a-zA-Z_.:+-]*|\.(?:inf|Inf|INF|nan|NaN|NAN))$")
_PLAIN_NON_STRINGS = {"true": _BOOL, "false": _BOOL, "null": _NULL}


def needs_quotes(text: str) -> bool:
    return text == "" or text in _NOT_PLAIN_WORDS or bool(_NUMBER_LIKE.fullmatch(text))


@lru_cache(maxsize=65536)
def _str_node_style(text: str) -> str | None:
    if "\n" in text:
        return "|"  # CEL expressions and messages read better as literal blocks
    return "'" if needs_quotes(text) else None


def _node(value: Any) -> yaml.Node:
    if isinstance(value, str):
        return ScalarNode(_STR, value, style=_str_node_style(value))
    if isinstance(value, dict):
        return MappingNode(_MAP, [(_node(k), _node(v)) for k, v in value.items()], flow_style=not value)
    if isinstance(value, list):
        return SequenceNode(_SEQ, [_node(item) for item in value], flow_style=not value)
    if isinstance(value, bool):
        return ScalarNode(_BOOL, "true" if value else "false")
    if isinstance(value, int):
        return ScalarNode(_INT, str(value))
    if value is None:
        return ScalarNode(_NULL, "null")
    raise TypeError(f"cannot emit {type(value).__name__} {value!r}: builders emit str, int, bool, dict, list")


def _plain_tag(text: str) -> str:
    """The tag a plain scalar resolves to, for the forms _node produces."""
    if text in _PLAIN_NON_STRINGS:
        return _PLAIN_NON_STRINGS[text]
    return _INT if text.lstrip("-").isdigit() else _STR


class _NodeDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Serializes our nodes as they are. The emitter asks which tag a plain or quoted scalar would resolve to,
    to decide whether the tag can stay implicit; only the few forms _node produces need answers."""

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode:
            return _plain_tag(value) if implicit[0] else _STR  # implicit[0]: read plain
        return _MAP if kind is MappingNode else _SEQ

    # Path-based resolvers are never registered here; skip PyYAML's per-node bookkeeping for them.
    def descend_resolver(self, current_node, current_index):
        pass

    def ascend_resolver(self):
        pass


_WIDTH = 1 << 16


def libyaml_text(obj: Any) -> str:
    """The reference: libyaml's emitter over our nodes."""
    return yaml.serialize(_node(obj), Dumper=_NodeDumper, allow_unicode=True, width=_WIDTH)


def to_yaml(obj: Any) -> str:
    if not isinstance(obj, dict) or not obj:
        raise TypeError("to_yaml writes one non-empty mapping per document")
    out: list[str] = []
    _mapping(obj, 0, False, out)
    return "".join(out)


# ----------------------------------------------------------------------------------------- direct writer

_ONE_LINE = re.compile(r"[\x20-\x7e]+")  # printable ASCII
_LINES = re.compile(r"[\x20-\x7e\n]+")
_FIRST_INDICATORS = frozenset("#,[]{}&*!|>'\"%@`")
_MAX_SCALAR = 4096  # longer strings go to libyaml: every line stays far below the width, where it would fold


def _plain_allowed(text: str) -> bool:
    """libyaml's analysis (yaml_emitter_analyze_scalar) for a one-line printable ASCII scalar in block context."""
    first = text[0]
    if first in _FIRST_INDICATORS or first == " " or text[-1] == " ":
        return False
    if first in "?:-" and (len(text) == 1 or text[1] == " "):
        return False
    if text.startswith(("---", "...")):
        return False
    return not (": " in text or text[-1] == ":" or " #" in text)


@lru_cache(maxsize=65536)
def _one_line(text: str) -> str:
    """A one-line string as libyaml writes it as a key or a block value: plain when it may be, else single-quoted
    (always allowed for printable ASCII on one line)."""
    if not text:
        return "''"
    if len(text) > _MAX_SCALAR or not _ONE_LINE.fullmatch(text):
        return _double_quoted(text)
    # libyaml quotes a string whose plain form would not read back as a string (_NodeDumper.resolve).
    if not needs_quotes(text) and _plain_tag(text) == _STR and _plain_allowed(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _literal(text: str, indent: int) -> str:
    """A multi-line string as a literal block (`|-` or `|`) whose lines start at column `indent`, however long
    (a literal block never folds); libyaml falls back to double quotes (trailing spaces), adds an indentation hint
    (leading space or line break) or keeps extra final line breaks (`|+`) otherwise: those are left to it."""
    if (not _LINES.fullmatch(text) or " \n" in text or text[-1] == " "
            or text[0] in " \n" or text.endswith("\n\n")):
        return _double_quoted(text) + "\n"
    chomp, body = ("", text[:-1]) if text[-1] == "\n" else ("-", text)
    pad = " " * indent
    return f"|{chomp}\n" + "\n".join(pad + line if line else "" for line in body.split("\n")) + "\n"


def _scalar(value: Any, indent: int) -> str:
    """A scalar after `key: ` or `- `, with its line break; `indent` is where a literal block's lines start."""
    if isinstance(value, str):
        return _literal(value, indent) if "\n" in value else _one_line(value) + "\n"
    if value is True:
        return "true\n"
    if value is False:
        return "false\n"
    if isinstance(value, int):
        return f"{value}\n"
    if value is None:
        return "null\n"
    raise TypeError(f"cannot emit {type(value).__name__} {value!r}: builders emit str, int, bool, dict, list")


@lru_cache(maxsize=65536)
def _simple_key(key: str) -> str | None:
    """A key as written before its `:`; None when it needs the explicit `? ` form (a simple key may not span
    lines nor pass 1,024 characters)."""
    if len(key) > 120 or "\n" in key:
        return None
    return _one_line(key)


def _mapping(mapping: dict, column: int, inline_first: bool, out: list[str]) -> None:
    """Keys at `column`; the first one right after a `- ` already written when inline_first."""
    pad = " " * column
    append = out.append
    for key, value in mapping.items():
        if inline_first:
            inline_first = False
            lead = ""
        else:
            lead = pad
        if not isinstance(key, str):
            raise TypeError(f"cannot emit key {key!r}: builders emit string keys")
        written = _simple_key(key)
        if written is None:
            written = "? " + _double_quoted(key) + "\n" + pad
        if type(value) is str and "\n" not in value:  # most values: the whole line at once
            append(f"{lead}{written}: {_one_line(value)}\n")
            continue
        append(lead + written)
        if isinstance(value, dict):
            if value:
                append(":\n")
                _mapping(value, column + 2, False, out)
            else:
                append(": {}\n")
        elif isinstance(value, list):
            if value:
                append(":\n")
                _sequence(value, column, False, out)  # libyaml does not indent a sequence inside a mapping
            else:
                append(": []\n")
        else:
            append(": ")
            append(_scalar(value, column + 2))


def _sequence(items: list, column: int, inline_first: bool, out: list[str]) -> None:
    """`- ` items at `column`; the first one right after a `- ` already written when inline_first."""
    pad = " " * column + "- "
    for item in items:
        if inline_first:
            out.append("- ")
            inline_first = False
        else:
            out.append(pad)
        if isinstance(item, dict):
            if item:
                _mapping(item, column + 2, True, out)
            else:
                out.append("{}\n")
        elif isinstance(item, list):
            if item:
                _sequence(item, column + 2, True, out)
            else:
                out.append("[]\n")
        else:
            out.append(_scalar(item, column + 2))


# YAML's escapes for what may not stand as itself in a double-quoted scalar (YAML 1.1, 5.7).
_ESCAPES = {"\0": "\\0", "\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v", "\f": "\\f",
            "\r": "\\r", "\x1b": "\\e", '"': '\\"', "\\": "\\\\", "\x85": "\\N", "\u2028": "\\L", "\u2029": "\\P"}
# Kept as themselves: printable ASCII and printable non-ASCII (YAML's c-printable), minus the line breaks
# U+0085, U+2028, U+2029 and the byte-order mark, which readers would take for something else.
_DOUBLE_QUOTED_SAFE = re.compile(r"[\x20-\x21\x23-\x5b\x5d-\x7e\xa0-\u2027\u202a-\ud7ff"
                                 r"\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]+")


def _escape(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}"


@lru_cache(maxsize=4096)
def _double_quoted(text: str) -> str:
    """One line, double-quoted: every character a reader could mistake (breaks, controls, quotes) escaped."""
    out, at = ['"'], 0
    for safe in _DOUBLE_QUOTED_SAFE.finditer(text):
        out.extend(_escape(char) for char in text[at:safe.start()])
        out.append(safe.group())
        at = safe.end()
    out.extend(_escape(char) for char in text[at:])
    out.append('"')
    return "".join(out)


def header(source: str) -> str:
    return (f"# Generated by gpugen from {source}. Do not edit by hand:\n"
            f"# change {source} and run `make render`.\n")


def manifest(obj: dict[str, Any], source: str) -> bytes:
    return (header(source) + to_yaml(obj)).encode("utf-8")
