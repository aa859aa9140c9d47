"""Loading a spec from YAML: the only place that knows file syntax.

Every YAML aifabric reads (specs, scenarios, collected facts) goes through
:class:`StrictLoader`: safe, and a key given twice in one mapping is an error with its
line (PyYAML would keep the last one silently).

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

__all__ = ["DuplicateKeyError", "FastStrictLoader", "StrictLoader", "dump_spec",
           "json_no_duplicates", "load_spec", "load_yaml", "spec_from_dict", "yaml_error"]


def _check_unique(node: yaml.MappingNode, construct: Any) -> None:
    """A key twice in one mapping is an error (PyYAML keeps the last silently)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # ``<<:`` merges may override
            continue
        key = construct(key_node)
        try:
            first = seen.get(key)
        except TypeError:  # an unhashable key: the constructor reports it
            continue
        if first is None:
            seen[key] = key_node.start_mark.line
            continue
        raise yaml.constructor.ConstructorError(
            None, None, f"duplicate key {key!r} (first on line {first + 1}); allowed: "
            "each key once in a mapping", key_node.start_mark)


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing duplicate keys (with the line of each)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            _check_unique(node, lambda n: self.construct_object(n, deep=True))
        return super().construct_mapping(node, deep=deep)


class FastStrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """:class:`StrictLoader` on libyaml's parser where available (large inventories)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            _check_unique(node, lambda n: self.construct_object(n, deep=True))
        return super().construct_mapping(node, deep=deep)


def yaml_error(exc: yaml.YAMLError, kind: str = "YAML") -> str:
    """``invalid YAML: line L, column C: what`` for a PyYAML error."""
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
    reason = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    return f"invalid {kind}: {where}{reason}"


class DuplicateKeyError(ValueError):
    """A JSON object with a key twice."""


def json_no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` for :func:`json.loads` refusing duplicate keys."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKeyError(f"duplicate key {k!r}; allowed: each key once in an "
                                        "object")
            seen.add(k)
    return out


def spec_from_dict(data: Any, file: str | None = None) -> Spec:
    """Validate a parsed YAML/JSON document into a :class:`Spec`."""
    if not isinstance(data, dict):
        raise SpecError(Problem("", f"a spec must be a mapping, got {type(data).__name__}", file))
    try:
        return Spec.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from_validation(err, Spec, file)) from None


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file, turning every I/O or syntax failure, and a key given twice in
    one mapping, into a SpecError naming the file and line."""
    p = Path(path)
    name = str(path)
    try:
        if not p.exists():
            raise SpecError(Problem("", "file not found", name))
        if not p.is_file():
            raise SpecError(Problem("", "not a file", name))
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(Problem("", f"cannot read: {exc}", name)) from None
    try:
        return yaml.load(text, Loader=StrictLoader)  # a safe loader
    except yaml.YAMLError as exc:
        raise SpecError(Problem("", yaml_error(exc), name)) from None


def load_spec(path: str | Path) -> Spec:
    """Read and validate the spec at ``path``."""
    return spec_from_dict(load_yaml(path), str(path))


def dump_spec(spec: Spec) -> str:
    """The spec as YAML, loadable by :func:`load_spec` (defaults left out)."""
    data = spec.model_dump(mode="json", exclude_defaults=True)
    data["topology"] = {"family": spec.topology.family,
                        **spec.topology.model_dump(mode="json", exclude_defaults=True)}
    return yaml.safe_dump(data, sort_keys=False)
