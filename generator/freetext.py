"""The inventory's free text (descriptions, a class's unit, the cache variables' values) in every output it reaches.

What no output can show as written is refused when the inventory is read (`problem`): control characters, line
and paragraph separators, format characters (bidi overrides and isolates, zero-width characters, the byte-order
mark, the soft hyphen: text that reads otherwise than it is), surrogates and noncharacters. Where Grafana shows
a text, its variable syntax is refused too ($name, ${...}, [[name]]: Grafana replaces them in titles, descriptions
and text panels and has no escape); where a spreadsheet opens it (the report's CSV), a leading = + - @ (a formula).

The rest is written into each output language by that language's function here: Markdown text and code spans
(the users' page, Grafana's text panels), double-quoted strings of CEL (Kyverno's policies) and PromQL, text a Go
template prints as it is (Prometheus' alert annotations), and matplotlib's text (the report's chart). YAML is
emit.py's; CSV is the csv module's.
"""

from __future__ import annotations

import re
import unicodedata

# Unicode's general categories no output shows as written: controls, format characters, line and paragraph
# separators, surrogates.
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cf": "an invisible format character (bidi, zero-width, ...)",
                       "Zl": "a line separator", "Zp": "a paragraph separator", "Cs": "a surrogate"}
# Grafana's variable syntax (public/app/features/variables/utils.ts variableRegex): $name, ${name...}, [[name]].
_GRAFANA_VARIABLE = re.compile(r"\$[A-Za-z0-9_]|\$\{|\[\[[A-Za-z0-9_]")
# A cell a spreadsheet reads as a formula (OWASP's CSV injection).
_FORMULA_START = ("=", "+", "-", "@")


def _noncharacter(code: int) -> bool:
    return 0xFDD0 <= code <= 0xFDEF or (code & 0xFFFE) == 0xFFFE


def problem(text: str, *, line_breaks: bool = False, grafana: bool = False, spreadsheet: bool = False) -> str | None:
    """Why `text` cannot be free text of a field whose outputs are the ones named, or None. `line_breaks`: the field
    may span lines and hold tabs (a description; Markdown shows a line break as a space). The inventory's reader
    refuses control characters and line separators in every string already (inventory/yaml11.py); this is the rule
    for text, wherever it comes from."""
    for index, char in enumerate(text):
        if char in "\n\t" and line_breaks:
            continue
        category = unicodedata.category(char)
        what = _REFUSED_CATEGORIES.get(category)
        if what is None and _noncharacter(ord(char)):
            what = "a noncharacter"
        if what is not None:
            return (f"character {index + 1} is U+{ord(char):04X}, {what}: free text is shown to people and must read "
                    "as it is; remove it")
    if text and not text.strip():
        return "is only whitespace: write words, or leave the field out"
    if not line_breaks and text != text.strip():
        return "starts or ends with whitespace, which the users' page would not show: remove it"
    if grafana:
        found = _GRAFANA_VARIABLE.search(text)
        if found:
            return (f"{found.group()!r} would be read by Grafana as a dashboard variable (it shows this text and has "
                    "no escape): write it otherwise")
    if spreadsheet and text.startswith(_FORMULA_START):
        return (f"starts with {text[0]!r}, which a spreadsheet opening the report's CSV reads as a formula: write it "
                "otherwise")
    return None


# --- Markdown (CommonMark with GFM tables) ---------------------------------------------------------------------

# Inline markup anywhere in a line: escapes, code spans, emphasis, links and images, raw HTML and autolinks,
# entities, GFM's table cells and strikethrough.
_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]<&|~])")
# Block markup at the start of a paragraph: headings, quotes, lists, thematic breaks and setext underlines.
_MARKDOWN_BLOCK_START = re.compile(r"^([#>+=-])|^([0-9]{1,9})([.)])")


def markdown(text: str) -> str:
    """`text` as Markdown text that reads as `text` in a paragraph, a list or a table cell: each line break is a space,
    the outer whitespace goes (Markdown drops it), and every character that could start markup is escaped."""
    text = text.replace("\n", " ").strip()
    text = _MARKDOWN_INLINE.sub(r"\\\1", text)
    return _MARKDOWN_BLOCK_START.sub(lambda m: "\\" + m[1] if m[1] else m[2] + "\\" + m[3], text)


def markdown_sentence(text: str) -> str:
    """`text` and a full stop, as a paragraph of its own: a text of digits alone would make the stop an ordered
    list's marker, so it is escaped there."""
    shown = markdown(text)
    return shown + ("\\." if re.fullmatch(r"[0-9]{1,9}", shown) else ".")


def markdown_code(text: str) -> str:
    """`text` as a Markdown code span whose content is exactly `text`, in a table cell too: a fence longer than
    any run of backticks inside, a space inside each end where CommonMark would otherwise strip or join one, and
    GFM's cell delimiter escaped (the table reads `\\|` as `|` before the span)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    padded = (text.startswith("`") or text.endswith("`")
              or (text.startswith(" ") and text.endswith(" ") and text.strip(" ") != ""))
    inner = f" {text} " if padded else text
    return fence + inner.replace("|", "\\|") + fence


# --- Strings of CEL and PromQL --------------------------------------------------------------------------------

_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def double_quoted(text: str) -> str:
    """A double-quoted string literal that CEL (cel-go) and PromQL (Go's strconv.Unquote) both read as `text`: JSON's
    escapes for the characters JSON escapes, \\uXXXX for the rest outside printable ASCII, and \\UXXXXXXXX past
    the Basic Multilingual Plane (JSON's surrogate pairs are no characters to CEL or Go, which refuse them)."""
    out = ['"']
    for char in text:
        code = ord(char)
        if char in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[char])
        elif 0x20 <= code < 0x7F:
            out.append(char)
        elif 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"U+{code:04X} is a surrogate, no character of a string literal")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)


# --- Text templates and drawings ------------------------------------------------------------------------------


def go_template_text(text: str) -> str:
    """`text` as a Go text/template (Prometheus expands every alert annotation as one) that prints it as it is: each
    action delimiter `{{` is printed by an action of its own."""
    return text.replace("{{", '{{ "{{" }}')


def matplotlib_text(text: str) -> str:
    """`text` as matplotlib text that draws as it is: an unescaped pair of `$` would start mathtext."""
    return text.replace("$", r"\$")
