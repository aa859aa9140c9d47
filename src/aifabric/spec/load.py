"""Loading a spec from YAML: the only place that knows file syntax.

Every failure becomes a :class:`~aifabric.errors.SpecError` with one problem per
field, naming the file, the field path and what is allowed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from aifabric.errors import Problem, SpecError
from aifabric.spec.models import Spec
from aifabric.spec.problems import problems_from_validation

__all__ = ["dump_spec", "load_spec", "load_yaml", "spec_from_dict"]


def spec_from_dict(data: Any, file: str | None = None) -> Spec:
    """Validate a parsed YAML/JSON document into a :class:`Spec`."""
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a spec must be a mapping, got {type(data).__name__}", file))
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from_validation(err, Spec, file)) from None


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
