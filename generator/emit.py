"""Objects to YAML text: deterministic, one document per file, safe for Kubernetes' YAML 1.1 reader.

libyaml's emitter (PyYAML's C binding, when present) defines the text. We hand it ready-made nodes instead
of going through PyYAML's representer and resolver, which are pure Python and were most of the render time
at national scale (8,000 files). Building the nodes is also where quoting is decided: PyYAML would leave
`y`, `n` and `1e3` plain, which a YAML 1.1 reader (Kubernetes, Argo CD) turns into a boolean or a number;
every string a YAML 1.1 or 1.2 reader could resolve to something else is single-quoted.

Most objects never reach libyaml: `_direct_yaml` writes block mappings and sequences of printable ASCII
scalars itself, following libyaml's rules for choosing plain, single-quoted and literal styles, because even
with nodes prebuilt, calling into the C emitter per node was half of a national-scale render. Anything it
does not cover (non-ASCII text, tabs, strings libyaml would double-quote, long keys) sends the whole object
to libyaml. tests/test_emit.py checks the two give the same bytes for every rendered object and for
generated edge cases.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"

_NOT_PLAIN_WORDS = frozenset(
    "y Y yes Yes YES n N no No NO true True TRUE false False FALSE on On ON off Off OFF "
    "null Null NULL ~ << =".split()
)
# Anything number-like in YAML 1.1 or 1.2: ints in any base, sexagesimal, floats with or without a dot,
# exponents, .inf/.nan, and timestamps (which start with digits too). Over-quoting costs nothing.
_NUMBER_LIKE = re.compile(r"^[-+]?(?:[0-9.][0-9a-zA-Z_.:+-]*|\.(?:inf|Inf|INF|nan|NaN|NAN))$")
_PLAIN_NON_STRINGS = {"true": _BOOL, "false": _BOOL, "null": _NULL}


def needs_quotes(text: str) -> bool:
    return text == "" or text in _NOT_PLAIN_WORDS or bool(_NUMBER_LIKE.match(text))


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
    try:
        return _direct_yaml(obj)
    except _LeftToLibyaml:
        return libyaml_text(obj)


# ----------------------------------------------------------------------------------------- direct writer

class _LeftToLibyaml(Exception):
    """The object holds something the direct writer does not cover."""


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
        raise _LeftToLibyaml
    # libyaml quotes a string whose plain form would not read back as a string (_NodeDumper.resolve).
    if not needs_quotes(text) and _plain_tag(text) == _STR and _plain_allowed(text):
        return text
    return "'" + text.replace("'", "''") + "'"


def _literal(text: str, indent: int) -> str:
    """A multi-line string as a literal block (`|-` or `|`) whose lines start at column `indent`; libyaml
    falls back to double quotes (trailing spaces), adds an indentation hint (leading space or line break) or
    keeps extra final line breaks (`|+`) otherwise: those are left to it."""
    if (len(text) > _MAX_SCALAR or not _LINES.fullmatch(text) or " \n" in text or text[-1] == " "
            or text[0] in " \n" or text.endswith("\n\n")):
        raise _LeftToLibyaml
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


def _mapping(mapping: dict, column: int, inline_first: bool, out: list[str]) -> None:
    """Keys at `column`; the first one right after a `- ` already written when inline_first."""
    pad = " " * column
    for key, value in mapping.items():
        if inline_first:
            inline_first = False
        else:
            out.append(pad)
        if not isinstance(key, str) or len(key) > 120:
            raise _LeftToLibyaml  # libyaml writes keys over 128 characters as `? key`
        out.append(_one_line(key))
        if isinstance(value, dict):
            if value:
                out.append(":\n")
                _mapping(value, column + 2, False, out)
            else:
                out.append(": {}\n")
        elif isinstance(value, list):
            if value:
                out.append(":\n")
                _sequence(value, column, False, out)  # libyaml does not indent a sequence inside a mapping
            else:
                out.append(": []\n")
        else:
            out.append(": ")
            out.append(_scalar(value, column + 2))


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


def _direct_yaml(obj: Any) -> str:
    if not isinstance(obj, dict) or not obj:
        raise _LeftToLibyaml
    out: list[str] = []
    _mapping(obj, 0, False, out)
    return "".join(out)


def header(source: str) -> str:
    return (f"# Generated by gpugen from {source}. Do not edit by hand:\n"
            f"# change {source} and run `make render`.\n")


def manifest(obj: dict[str, Any], source: str) -> bytes:
    return (header(source) + to_yaml(obj)).encode("utf-8")
