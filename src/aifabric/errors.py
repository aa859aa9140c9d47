"""Errors that stop aifabric with a clear message instead of a traceback.

Every problem names where it is (the file, if any, and the field path such as
``topology.tor.up_ports``) and what is allowed. Problems are collected and raised
once (netlab's ``exit_on_error`` habit), so a user sees all of them in one run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Problem", "SpecError"]


#: control characters (a newline in a file name or a value echoed back) are shown
#: escaped, so that one problem is always one line of output
_ESCAPE = {c: f"\\x{c:02x}" for c in (*range(32), 127)} | {9: "\\t", 10: "\\n", 13: "\\r"}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the input: where it is and what is allowed."""

    path: str
    message: str
    file: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}: " if self.file else ""
        field = f"{self.path}: " if self.path else ""
        return f"{where}{field}{self.message}".translate(_ESCAPE)


class SpecError(Exception):
    """Bad input: one or more :class:`Problem`, reported together.

    The CLI prints one line per problem and exits with code 2.
    """

    def __init__(self, problems: Problem | Iterable[Problem]):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems: list[Problem] = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    @classmethod
    def at(cls, path: str, message: str, file: str | None = None) -> SpecError:
        """A single-problem error at ``path``."""
        return cls(Problem(path, message, file))

    def with_file(self, file: str) -> SpecError:
        """The same problems, attributed to ``file`` where they name none."""
        return SpecError(Problem(p.path, p.message, p.file or file) for p in self.problems)
