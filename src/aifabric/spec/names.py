"""Names and free text that reach generated files: what the schema allows.

A *name* (the spec's ``name``, switch model names, scenario, job and collective
names) is a token: 1 to 63 characters of ASCII letters, digits, ``.``, ``_`` and ``-``,
starting with a letter or digit (:data:`NAME_PATTERN`). That is a valid hostname label
with ``.``/``_`` added, a SONiC ``hwsku``, an FRR word and a file name; it needs no
quoting in shell, FRR, JSON, XML, CSV or Markdown. A *text* (``description``) is one
line of printable characters, up to 500.

The templates still quote every value for their language (:mod:`aifabric.configs.quote`):
the schema is the first guard, the quoting the second.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["NAME_MAX", "NAME_PATTERN", "TEXT_MAX", "Name", "Text", "check_name", "check_text",
           "show"]

NAME_MAX = 63
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"
TEXT_MAX = 500
_NAME = re.compile(NAME_PATTERN)
_ALLOWED = (f"allowed: 1-{NAME_MAX} characters of letters, digits, '.', '_', '-', "
            f"starting with a letter or digit ({NAME_PATTERN})")
#: control characters (C0, DEL, C1) and the Unicode line/paragraph separators
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def show(value: str, limit: int = 40) -> str:
    """``repr`` of a user value for an error message: one line, at most ~``limit`` chars."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


def check_name(value: str) -> str:
    """``value`` if it is a valid name, else ValueError naming what is allowed."""
    if not _NAME.fullmatch(value):
        if len(value) > NAME_MAX:
            raise ValueError(f"name is {len(value):,} characters long; {_ALLOWED}")
        raise ValueError(f"not a valid name; {_ALLOWED}")
    return value


def check_text(value: str) -> str:
    """``value`` if it is one line of printable text of at most TEXT_MAX characters."""
    if len(value) > TEXT_MAX:
        raise ValueError(f"text is {len(value):,} characters long; allowed: one line of "
                         f"at most {TEXT_MAX} printable characters")
    if _CONTROL.search(value):
        raise ValueError("text holds a line break or control character; allowed: one line "
                         f"of at most {TEXT_MAX} printable characters")
    return value


Name = Annotated[str, AfterValidator(check_name)]
Text = Annotated[str, AfterValidator(check_text)]
