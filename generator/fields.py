"""What every part of the inventory schema is built from, and the settings every component has: the strict
model, DNS labels, image references, free text, `Component`. In the facts layer, below the inventory, because each
component folder's settings (generator/components/<name>/settings.py) extend `Component`, and the schema
(inventory/models.py) builds cluster.components from the registry of those folders."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints

from generator import freetext
from generator.limits import DNS1123_LABEL

# [registry[:port]/]path[:tag][@digest] — the reference grammar of the distribution project, simplified.
_IMAGE = re.compile(
    r"^(?P<name>(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)"
    r"(?::(?P<tag>[\w][\w.-]{0,127}))?"
    r"(?:@(?P<digest>sha256:[0-9a-f]{64}))?$"
)


def _image(ref: str) -> str:
    match = _IMAGE.fullmatch(ref)  # fullmatch: `$` alone would accept a trailing newline
    if not match:
        raise ValueError(f"{ref!r} is not a well-formed image reference (registry/path:tag or @sha256:...)")
    if match["digest"] is None:
        if match["tag"] is None:
            raise ValueError(f"image {ref!r} has no tag: pin a version tag or a digest")
        if match["tag"] == "latest":
            raise ValueError(f"image {ref!r} uses ':latest': pin a version tag or a digest")
    return ref


DnsLabel = Annotated[str, StringConstraints(pattern=DNS1123_LABEL, max_length=63)]
ImageRef = Annotated[str, AfterValidator(_image)]


def _free_text(**outputs: bool):
    """A validator refusing what freetext.problem refuses for a field that reaches these outputs."""
    def check(text: str) -> str:
        found = freetext.problem(text, **outputs)
        if found:
            raise ValueError(found)
        return text
    return AfterValidator(check)


# The inventory's free text, by the outputs each reaches (generator/freetext.py): a cache variable's value (the
# runtimes' env, the users' page); a class's or a priority's description (the users' page, annotations); a group's
# (a Grafana text panel too); a class's unit (messages, the page, Grafana's titles, the report's CSV and chart).
FreeText = Annotated[str, _free_text()]
Description = Annotated[str, _free_text(line_breaks=True)]
GroupDescription = Annotated[str, _free_text(line_breaks=True, grafana=True)]
Unit = Annotated[str, StringConstraints(min_length=1, max_length=80), _free_text(grafana=True, spreadsheet=True)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Component(Strict):
    """One upstream controller of the platform.

    install: true renders an Argo CD Application installing its upstream Helm chart (bootstrap/).
    install: false adopts a cluster that already runs it: set existing: true to declare that its CRDs and
    webhooks are there, since the rendered tree needs them.
    """

    install: bool = True
    existing: bool = False
    namespace: DnsLabel
