"""Every way gpugen refuses: the exceptions the core raises and the CLI maps to exit codes and messages.

Each says what was refused and why in terms the user acts on; none carries a traceback to the user.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    """One thing wrong with the inventory, printed as PATH:LINE:COL: field.path: reason."""

    path: str
    line: int
    column: int
    field: str
    reason: str

    def __str__(self) -> str:
        if self.line == 0:  # about the rendered output, not a place in the file
            return f"{self.path}: {self.field}: {self.reason}"
        return f"{self.path}:{self.line}:{self.column}: {self.field}: {self.reason}"


class InventoryInvalid(Exception):
    """The inventory cannot be rendered: every problem found, sorted by place."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems)
        super().__init__("\n".join(map(str, self.problems)))


class OverLimits(Exception):
    """Rendered objects Kubernetes or the file system would refuse: (file path, reason) pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("\n".join(f"{path}: {reason}" for path, reason in problems))


class EditRefused(Exception):
    """An inventory edit does not apply (unknown class, existing name, read-only file...)."""


class OutputRefused(Exception):
    """An output cannot be written as asked; the message is one line naming the path and the reason."""


class NotOurDirectory(OutputRefused):
    """The output holds files the generator did not write; replacing it would delete them."""


class GitError(Exception):
    """A revision or path could not be read from git (the base of a plan)."""


class BaseUnreadable(Exception):
    """The base tree of a plan cannot be read at the revision asked for."""


class PrometheusUnavailable(Exception):
    """Prometheus did not answer a report's query with Kueue's usage (unreachable, an HTTP error, an API error, an
    answer that is not a matrix of finite samples on the query's grid, an answer too large): one line naming the URL
    and what was wrong or what to check."""


class NoData(Exception):
    """Prometheus answered without the usage series the report needs: a report of zeros would read as idle
    groups. One line naming the URL and what to check."""
