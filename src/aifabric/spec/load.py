"""Loading a spec from YAML: the only place that knows file syntax.

Every failure becomes a :class:`~aifabric.errors.SpecError` with one problem per
field, naming the file, the field path and what is allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError

from aifabric.errors import Problem, SpecError
from aifabric.spec.models import Spec, Topology

__all__ = ["dump_spec", "load_spec", "load_yaml", "spec_from_dict"]


def _families() -> list[str]:
    return [f for cls in _models_in(get_args(Topology)[0]) if (f := _family_of(cls))]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation can hold (through Optional, unions, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in get_args(annotation):
        out.extend(_models_in(arg))
    return out


def _family_of(model: type[BaseModel]) -> str | None:
    field = model.model_fields.get("family")
    return get_args(field.annotation)[0] if field is not None else None


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """The field names allowed at ``loc`` (for an "unknown field" message)."""
    current: type[BaseModel] = model
    parts = [str(p) for p in loc[:-1]]
    i = 0
    while i < len(parts):
        field = current.model_fields.get(parts[i])
        if field is None:
            return []
        members = _models_in(field.annotation)
        if not members:
            return []
        i += 1
        if get_origin(field.annotation) is dict:
            i += 1  # skip the mapping key (e.g. a switch model's name)
        if len(members) > 1 and i < len(parts):
            tagged = [m for m in members if _family_of(m) == parts[i]]
            if tagged:
                members, i = tagged, i + 1
        current = members[0]
    return sorted(current.model_fields)


def _problems_from_validation(err: ValidationError, file: str | None) -> list[Problem]:
    problems = []
    families = _families()
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        # a discriminated union puts the family name into the path: drop it
        shown = [str(p) for i, p in enumerate(loc)
                 if not (i > 0 and loc[i - 1] == "topology" and p in families)]
        path = ".".join(shown)
        kind = e["type"]
        got = e.get("input")
        if kind == "union_tag_invalid":
            name = repr(got.get("family")) + " " if isinstance(got, dict) else ""
            msg = f"unknown family {name}; allowed: {', '.join(families)}".replace(" ;", ";")
            path = f"{path}.family" if path else "family"
        elif kind == "union_tag_not_found":
            msg = f"missing 'family'; allowed: {', '.join(families)}"
            path = f"{path}.family"
        elif kind == "extra_forbidden":
            allowed = _fields_at(Spec, loc)
            msg = "unknown field" + (f"; allowed: {', '.join(allowed)}" if allowed else "")
        elif kind == "missing":
            msg = "required field is missing"
        else:
            msg = e["msg"]
            if not isinstance(got, dict | list):
                msg += f" (got {got!r})"
        problems.append(Problem(path, msg, file))
    return problems


def spec_from_dict(data: Any, file: str | None = None) -> Spec:
    """Validate a parsed YAML/JSON document into a :class:`Spec`."""
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a spec must be a mapping, got {type(data).__name__}", file))
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(_problems_from_validation(err, file)) from None


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file, turning every I/O or syntax failure into a SpecError."""
    p = Path(path)
    name = str(path)
    if not p.exists():
        raise SpecError(Problem("", "file not found", name))
    if not p.is_file():
        raise SpecError(Problem("", "not a file", name))
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(Problem("", f"cannot read: {exc}", name)) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(Problem("", f"invalid YAML: {where}{reason}", name)) from None


def load_spec(path: str | Path) -> Spec:
    """Read and validate the spec at ``path``."""
    return spec_from_dict(load_yaml(path), str(path))


def dump_spec(spec: Spec) -> str:
    """The spec as YAML, loadable by :func:`load_spec` (defaults left out)."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data["topology"] = {"family": spec.topology.family,
                        **spec.topology.model_dump(mode="json", exclude_defaults=True)}
    return yaml.safe_dump(data, sort_keys=False)
