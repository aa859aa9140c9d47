"""Pydantic validation errors as aifabric problems: one line per field, naming the field
path and what is allowed.

Shared by every input model (the spec, scenarios and their subclasses). Discriminated
unions (``topology.family``, ``traffic[].pattern``) are understood: the tag pydantic puts
into an error's location is dropped from the path, an unknown tag lists the allowed ones,
and an unknown field lists the fields of the member the tag chose.
"""

from __future__ import annotations

import re
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from aifabric.errors import Problem
from aifabric.spec.names import show

__all__ = ["TAG_FIELDS", "models_in", "problems_from_validation", "tag_of"]

#: a mapping key shown as is in a field path (others are shown quoted, on one line)
_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,63}")

#: the fields that discriminate the unions of aifabric's input models
TAG_FIELDS = ("family", "pattern")

#: the label pydantic puts in an error's location for a member of a plain union
#: (``int | Literal['fabric']``): ``literal['fabric']``, ``constrained-int``,
#: ``function-after[...]``, ``int``... -- an internal name, never shown
_LABEL = re.compile(r"[a-z][a-z0-9_-]*\[.*\]|[a-z]+-[a-z0-9_-]+|"
                    r"int|float|str|bool|bytes|none|list|dict|tuple|set|decimal|"
                    r"date|datetime|time|timedelta|url|uuid|path")


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, lists, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        out.extend(models_in(arg))
    return out


def tag_of(model: type[BaseModel]) -> tuple[str, str] | None:
    """``(tag field, value)`` of a union member (e.g. ``("family", "hpn")``), or None."""
    for name in TAG_FIELDS:
        field = model.model_fields.get(name)
        if field is not None and get_args(field.annotation):
            return name, get_args(field.annotation)[0]
    return None


def _walk(model: type[BaseModel], loc: tuple[Any, ...], *, keep_last: bool = False
          ) -> tuple[list[str], list[type[BaseModel]]]:
    """Follow ``loc`` through ``model``: the shown path (tags and labels of union members
    dropped, list indices kept) and the candidate models at its end. ``keep_last``: the
    last part is a key the user wrote (an unknown field), shown whatever it looks like."""
    shown: list[str] = []
    current: list[type[BaseModel]] = [model]
    key_next = False
    for i, part in enumerate(loc):
        user_key = keep_last and i == len(loc) - 1
        if isinstance(part, str) and not key_next and not user_key and \
                not any(part in m.model_fields for m in current):
            named = [m for m in current if m.__name__ == part]
            if named:  # a model member of a plain union: its fields follow
                current = named
                continue
            if _LABEL.fullmatch(part):
                continue
        if isinstance(part, int) or key_next:  # a list index or a mapping key
            text = str(part)
            shown.append(text if _PLAIN.fullmatch(text) else show(text))
            key_next = False
            continue
        tagged = [m for m in current if (t := tag_of(m)) is not None and t[1] == part]
        if len(current) > 1 and tagged:
            current = tagged  # the union member pydantic chose: not a field
            continue
        fields = [m.model_fields[part] for m in current if part in m.model_fields]
        shown.append(str(part))
        if not fields:
            current = []
            continue
        current = models_in(fields[0].annotation)
        key_next = get_origin(fields[0].annotation) is dict
    return shown, current


_BOUND_KINDS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def _num(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _range(models: list[type[BaseModel]], name: str) -> str | None:
    """The bounds of field ``name`` as text (``256..4096``, ``above 0 and at most 1``), so
    that a value out of range is told the whole range, not one side of it."""
    for m in models:
        field = m.model_fields.get(name)
        if field is None:
            continue
        lo = hi = ""
        for c in field.metadata:
            if getattr(c, "ge", None) is not None:
                lo = f"at least {_num(c.ge)}"
            elif getattr(c, "gt", None) is not None:
                lo = f"above {_num(c.gt)}"
            if getattr(c, "le", None) is not None:
                hi = f"at most {_num(c.le)}"
            elif getattr(c, "lt", None) is not None:
                hi = f"below {_num(c.lt)}"
        if lo.startswith("at least") and hi.startswith("at most"):
            return f"{lo[9:]}..{hi[8:]}"
        return " and ".join(x for x in (lo, hi) if x) or None
    return None


_BOUND_WORDS = {"greater_than_equal": ("ge", "at least"), "greater_than": ("gt", "above"),
                "less_than_equal": ("le", "at most"), "less_than": ("lt", "below")}


def _alternative(e: Any) -> str:
    """What one member of a plain union accepts, in words (``'fabric'``, ``an integer
    at least 0``), from the error that member raised."""
    kind, ctx = e["type"], e.get("ctx") or {}
    label = next((p for p in reversed(e["loc"]) if isinstance(p, str)), "")
    noun = "an integer" if "int" in label else "a number" if "float" in label else "a value"
    if kind == "literal_error" and "expected" in ctx:
        return str(ctx["expected"])
    if kind in _BOUND_WORDS:
        key, word = _BOUND_WORDS[kind]
        return f"{noun} {word} {_num(ctx.get(key))}"
    for prefix, words in (("int_", "an integer"), ("float_", "a number"),
                          ("string_", "text"), ("bool_", "true or false"),
                          ("list_", "a list"), ("dict_", "a mapping")):
        if kind.startswith(prefix):
            return words
    return str(e["msg"]).removeprefix("Value error, ").removeprefix("Input should be ")


def _got(got: Any) -> str:
    return show(got) if isinstance(got, str) else repr(got)


def problems_from_validation(err: ValidationError, model: type[BaseModel],
                             file: str | None) -> list[Problem]:
    """One :class:`Problem` per error of ``err`` raised validating ``model``; the errors
    of every member of a plain union (``int | Literal['fabric']``) at one field are one
    problem listing what each member accepts."""
    errors = err.errors(include_url=False)
    members: dict[str, list[Any]] = {}
    for e in errors:
        loc = tuple(e["loc"])
        shown, _ = _walk(model, loc)
        if e["type"] not in ("extra_forbidden", "missing", "union_tag_invalid",
                             "union_tag_not_found") and \
                len(shown) < sum(1 for p in loc if isinstance(p, str | int)):
            members.setdefault(".".join(shown), []).append(e)
    problems = []
    merged: set[str] = set()
    for e in errors:
        loc = tuple(e["loc"])
        if loc and loc[-1] == "[key]":  # the mapping key itself is invalid
            loc = loc[:-1]
        kind, got = e["type"], e.get("input")
        shown, at = _walk(model, loc)
        path = ".".join(shown)
        if len(members.get(path, ())) > 1:
            if path not in merged:
                merged.add(path)
                alts = list(dict.fromkeys(_alternative(m) for m in members[path]))
                allowed = ", ".join(alts[:-1]) + f" or {alts[-1]}"
                problems.append(Problem(path, f"not allowed (got {_got(got)}); allowed: "
                                        f"{allowed}", file))
            continue
        if kind in ("union_tag_invalid", "union_tag_not_found"):
            tags = [t for m in at if (t := tag_of(m)) is not None]
            field = tags[0][0] if tags else "type"
            allowed = ", ".join(v for _, v in tags)
            path = f"{path}.{field}" if path else field
            if kind == "union_tag_not_found":
                msg = f"missing '{field}'; allowed: {allowed}"
            else:
                name = f"{got.get(field)!r} " if isinstance(got, dict) else ""
                msg = f"unknown {field} {name}; allowed: {allowed}".replace(" ;", ";")
        elif kind == "extra_forbidden":
            shown, _ = _walk(model, loc, keep_last=True)
            path = ".".join(shown)
            _, parent = _walk(model, loc[:-1])
            allowed = sorted(parent[0].model_fields) if len(parent) == 1 else []
            msg = "unknown field" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        elif kind == "missing":
            msg = "required field is missing"
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if isinstance(got, str):
                msg += f" (got {show(got)})"
            elif not isinstance(got, dict | list):
                msg += f" (got {got!r})"
            if kind in _BOUND_KINDS and loc and isinstance(loc[-1], str):
                allowed = _range(_walk(model, loc[:-1])[1], loc[-1])
                if allowed:
                    msg += f"; allowed: {allowed}"
        problems.append(Problem(path, msg, file))
    return problems
