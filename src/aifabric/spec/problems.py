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


def _walk(model: type[BaseModel], loc: tuple[Any, ...]
          ) -> tuple[list[str], list[type[BaseModel]]]:
    """Follow ``loc`` through ``model``: the shown path (tags and indices of unions
    dropped, list indices kept) and the candidate models at its end."""
    shown: list[str] = []
    current: list[type[BaseModel]] = [model]
    key_next = False
    for part in loc:
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


def problems_from_validation(err: ValidationError, model: type[BaseModel],
                             file: str | None) -> list[Problem]:
    """One :class:`Problem` per error of ``err`` raised validating ``model``."""
    problems = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        if loc and loc[-1] == "[key]":  # the mapping key itself is invalid
            loc = loc[:-1]
        kind, got = e["type"], e.get("input")
        shown, at = _walk(model, loc)
        path = ".".join(shown)
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
