"""Quoting for the languages of the generated files: the templates' jinja filters.

The spec schema only lets safe names through (:mod:`aifabric.spec.names`); these
filters are the second guard, so that a value that bypassed the schema (a model built
in code) still cannot run a command or add a line. On the values a valid spec gives
every filter is the identity, so valid builds are byte-for-byte what they were.

======== =========================================================================
filter   use
======== =========================================================================
``sh``   a shell word (``shlex.quote``; ``eth0`` stays ``eth0``)
``words`` several shell words split on spaces, each quoted
``dq``   inside a shell ``"..."`` string: ``\\ " $ ` `` escaped
``num``  an integer (anything else is an error)
``line`` one line of text (comments, descriptions): control characters as ``\\xNN``
``token`` an FRR/SONiC word: letters, digits, ``. _ : / -`` only (else an error)
``xml``  an XML attribute value or text (``& < > " '`` escaped, on one line)
``xmlcomment`` text inside ``<!-- -->`` (no ``--``, one line)
``md``   Markdown text (one line, ``& < >`` escaped)
======== =========================================================================
"""

from __future__ import annotations

import html
import re
import shlex
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.spec.names import show

__all__ = ["FILTERS", "dq", "line", "md", "num", "sh", "token", "words", "xml", "xmlcomment"]

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}")
_DQ = re.compile(r'([\\"$`])')


def sh(value: Any) -> str:
    """One shell word."""
    return shlex.quote(str(value))


def words(value: Any) -> str:
    """Space-separated shell words, each quoted (``0:off 1:on`` stays as it is)."""
    return " ".join(shlex.quote(w) for w in str(value).split())


def dq(value: Any) -> str:
    """Text for inside a shell double-quoted string: no expansion, no end of string."""
    return _DQ.sub(r"\\\1", str(value))


def num(value: Any) -> str:
    """An integer, as text; a non-integer is an error (never pasted)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise SpecError(Problem("", f"expected an integer in a generated file, got "
                                f"{show(str(value))}"))
    text = str(value)
    if not re.fullmatch(r"-?[0-9]{1,20}", text):
        raise SpecError(Problem("", f"expected an integer in a generated file, got {show(text)}"))
    return text


def line(value: Any) -> str:
    """One line of text: line breaks and other control characters become ``\\xNN``."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256
                        else f"\\u{ord(m.group()):04x}", str(value))


def token(value: Any) -> str:
    """A word of an FRR or SONiC configuration; anything else is an error."""
    text = str(value)
    if not _TOKEN.fullmatch(text):
        raise SpecError(Problem("", f"unsafe value {show(text)} for a switch configuration; "
                                "allowed: letters, digits, '.', '_', ':', '/', '-'"))
    return text


def xml(value: Any) -> str:
    """An XML attribute value or element text, on one line."""
    return html.escape(line(value), quote=True)


def xmlcomment(value: Any) -> str:
    """Text inside an XML comment: one line, no ``--``, not ending in ``-``."""
    text = line(value)
    while "--" in text:
        text = text.replace("--", "- -")
    return text + " " if text.endswith("-") else text


def md(value: Any) -> str:
    """Markdown text on one line, HTML special characters escaped."""
    return html.escape(line(value), quote=False)


FILTERS = {"sh": sh, "words": words, "dq": dq, "num": num, "line": line, "token": token,
           "xml": xml, "xmlcomment": xmlcomment, "md": md}
