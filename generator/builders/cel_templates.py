"""CEL written as templates: a YAML mapping whose values are CEL (each a `|-` block, so YAML never reads CEL
syntax), `$name` placeholders filled with CEL literals of the builder's parameters, and `@name(argument)` calls of
shared fragments. The policies' templates and fragments are builders/kyverno_cel/ (builders/kyverno.py).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from string import Template
from typing import Any

import yaml

from generator.freetext import double_quoted

Fragments = dict[str, tuple[str, str]]  # name -> (parameter, body)

# libyaml's loader where PyYAML has it (the same YAML 1.1 reading): the templates are mostly block scalars, which the
# pure-Python scanner reads a character at a time.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PLACEHOLDER = re.compile(r"\$([A-Za-z][A-Za-z0-9]*)")
CALL = re.compile(r"@([A-Za-z]+)\(([^()]*)\)")


def cel(value: Any) -> str:
    """A CEL literal (a string as freetext.double_quoted writes it: any Unicode, no surrogate escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return double_quoted(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(cel(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{cel(k)}: {cel(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no CEL literal for {value!r}")


def read_fragments(path: Path) -> Fragments:
    """Shared CEL from a YAML mapping of `name(parameter)` to the body that uses the parameter."""
    fragments = {}
    for key, body in yaml.safe_load(path.read_text(encoding="utf-8")).items():
        name, parameter = re.fullmatch(r"([A-Za-z]+)\(([A-Za-z]+)\)", key).groups()
        if not re.search(rf"\b{parameter}\b", body):
            raise ValueError(f"CEL fragment {key}: its body never uses {parameter}")
        fragments[name] = (parameter, body)
    return fragments


def expand(text: str, fragments: Fragments, depth: int = 0) -> str:
    """`text` with every @name(argument) replaced by the fragment, its parameter by the argument and its
    continuation lines indented like the line of the call (the text is YAML: block scalars keep their indent)."""
    if depth > 4:
        raise ValueError("CEL fragments call each other without end")

    def call(match: re.Match) -> str:
        name, argument = match.groups()
        if name not in fragments:
            raise ValueError(f"unknown CEL fragment @{name} (kyverno_cel/fragments.yaml)")
        parameter, body = fragments[name]
        # The parameter is the fragment's own word: replaced before the fragments it calls are expanded into it.
        body = expand(re.sub(rf"\b{parameter}\b", lambda _: argument, body), fragments, depth + 1)
        before = text[text.rfind("\n", 0, match.start()) + 1:match.start()]
        return body.replace("\n", "\n" + " " * (len(before) - len(before.lstrip(" "))))
    return CALL.sub(call, text)


def fill(template: str, **params: Any) -> dict[str, Any]:
    """The CEL of a template, with each `$name` replaced by the CEL literal of params[name]. Every placeholder
    needs a parameter and every parameter must be used: a typo fails at render time, not at admission."""
    text = textwrap.dedent(template).strip("\n")
    used = set(_PLACEHOLDER.findall(text))
    if used != set(params):
        raise ValueError(f"template placeholders {sorted(used)} != parameters {sorted(params)}")
    return yaml.load(Template(text).substitute({name: cel(value) for name, value in params.items()}), _LOADER)
