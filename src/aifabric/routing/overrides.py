"""Scenarios as documents, changed by dotted paths, and named by a content hash.

A scenario's *document* is what its YAML holds: ``spec`` (a path or a mapping), the
``routing`` overrides as written, traffic, jobs, ... An override names a place in that
document by a dotted path and gives it a new value:

.. code-block:: python

    scn.with_overrides({"routing.seed_mode": "per_switch",   # a field of a section
                        "jobs.0.seed": 7,                    # a list item, by index
                        "failures": [{"switch": "tor-0"}],   # a whole value
                        "spec.topology.planes": 1})          # the spec (a path is loaded)

The overridden document is validated again from what the user wrote (relative paths keep
resolving against the scenario's folder), so an override behaves exactly like an edit of
the YAML file. :func:`check_override_path` validates a path against the model's schema
without a value (a sweep checks its fields before any point runs). (A scenario's content
hash, which also covers the files it names, is :func:`aifabric.sim.identity.content_hash`.)
"""

from __future__ import annotations

import copy
import difflib
import json
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel

from aifabric.errors import Problem, SpecError

__all__ = ["apply_overrides", "canonical_json", "check_override_path", "jsonable",
           "scenario_document", "spec_mapping"]

S = TypeVar("S")


# ---------------------------------------------------------------- documents

def jsonable(x: Any) -> Any:
    """Plain JSON data: models dumped, tuples as lists, numpy scalars and arrays as
    numbers and lists (a sweep's grid values), other values as they are."""
    if isinstance(x, BaseModel):
        return x.model_dump(mode="json", exclude_unset=True)
    if isinstance(x, Mapping):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, Path):
        return str(x)
    if hasattr(x, "tolist") and callable(x.tolist):  # numpy scalars and arrays
        return jsonable(x.tolist())
    return x


def spec_mapping(spec: Any) -> dict[str, Any]:
    """A spec built in code as the mapping that validates back to it: the fields given
    (a fuller dump when that does not round-trip)."""
    from aifabric.spec.load import spec_from_dict

    for kw in ({"exclude_unset": True}, {}):
        data = spec.model_dump(mode="json", **kw)
        try:
            if spec_from_dict(data) == spec:
                return data
        except SpecError:
            pass
    return spec.model_dump(mode="json", exclude_unset=True)


def _written(scn: Any) -> dict[str, Any]:
    """The document as written (``spec`` may be a path): a private copy."""
    doc = getattr(scn, "_document", None)
    if doc is not None:
        doc = copy.deepcopy(doc)
        if isinstance(doc.get("spec"), BaseModel):  # a Spec given to scenario_from_dict
            doc["spec"] = spec_mapping(doc["spec"])
        return doc
    # built in code: the fields given; the spec as given (before the routing overrides
    # were merged into it, so replacing or removing them acts as in a YAML file)
    data = scn.model_dump(mode="json", exclude_unset=True, exclude={"spec"})
    given = getattr(scn, "_given_spec", None)
    if given is None:
        given = scn.spec
    data["spec"] = spec_mapping(given) if isinstance(given, BaseModel) else jsonable(given)
    return data


def _spec_path(scn: Any, text: str) -> Path:
    p = Path(text)
    if not p.is_absolute() and scn.base_dir is not None:
        p = Path(scn.base_dir) / p
    return p


def _embed_spec(scn: Any, doc: dict[str, Any]) -> None:
    """Replace a spec path in ``doc`` by the spec file's document."""
    raw = doc.get("spec")
    if not isinstance(raw, str):
        return
    kept = getattr(scn, "_spec_document", None)
    if kept is not None and scn.spec_file == str(_spec_path(scn, raw)):
        doc["spec"] = copy.deepcopy(kept)
        return
    from aifabric.spec.load import load_yaml

    doc["spec"] = load_yaml(_spec_path(scn, raw))


def scenario_document(scn: Any) -> dict[str, Any]:
    """The scenario's document, JSON-able: what its YAML holds, with the spec embedded as a
    mapping (a spec file's document as written) and the routing overrides as written.

    ``scenario_from_dict(doc, base_dir=scn.base_dir, model=type(scn))`` validates it back
    to an equal scenario."""
    doc = _written(scn)
    _embed_spec(scn, doc)
    return jsonable(doc)


def canonical_json(x: Any) -> str:
    """Deterministic JSON text: sorted keys, no spaces, non-ASCII kept as is."""
    return json.dumps(jsonable(x), sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)


# ---------------------------------------------------------------- the schema of paths

def _leaves(annotation: Any) -> list[Any]:
    """The alternatives an annotation holds: Optional, unions and Annotated unwrapped."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _leaves(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        out: list[Any] = []
        for a in get_args(annotation):
            if a is not type(None):
                out.extend(_leaves(a))
        return out
    return [annotation]


def _kind(annotation: Any) -> str:
    """What a value of ``annotation`` is, in words (for a path that goes past it)."""
    if annotation is bool:
        return "a boolean"
    if annotation in (int, float):
        return "a number"
    if annotation is str:
        return "text"
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(str(v) for v in get_args(annotation))
    return "a single value"


def _closest(word: str, names: list[str]) -> str:
    near = difflib.get_close_matches(word, names, n=3, cutoff=0.5)
    if near:
        return "closest: " + ", ".join(near)
    shown = sorted(names)
    more = f" (+{len(shown) - 12} more)" if len(shown) > 12 else ""
    return "allowed: " + ", ".join(shown[:12]) + more


def _step(anns: list[Any], part: str, where: str, path: str) -> list[Any]:
    """The annotations reached from ``anns`` through one path element ``part``."""
    leaves = [x for a in anns for x in _leaves(a)]
    lists = [x for x in leaves if get_origin(x) in (list, tuple)]
    dicts = [x for x in leaves if get_origin(x) is dict]
    models = [x for x in leaves if isinstance(x, type) and issubclass(x, BaseModel)]
    if lists and part.isdigit():
        return [a for x in lists for a in get_args(x)[:1]]
    if dicts:
        return [get_args(x)[1] for x in dicts if len(get_args(x)) == 2]
    fields = [m.model_fields[part] for m in models if part in m.model_fields]
    if fields:
        return [f.annotation for f in fields]
    if models:
        names = sorted({n for m in models for n in m.model_fields})
        hint = _closest(part, names)
        if lists:
            hint = f"a list item index (0, 1, ...) or {hint}"
        raise SpecError(Problem(path, f"no field {part!r} in {where}; {hint}"))
    if lists:
        raise SpecError(Problem(path, f"{where} is a list; allowed: an item index "
                                f"(0, 1, ...), got {part!r}"))
    kind = _kind(leaves[0]) if leaves else "a single value"
    raise SpecError(Problem(path, f"{where} is {kind}: it has no field {part!r}; allowed: "
                            f"{where} itself as the path"))


def _split(path: Any) -> list[str]:
    if not isinstance(path, str) or not path or any(not p for p in path.split(".")):
        raise SpecError(Problem(str(path), "not a dotted path; allowed: field names and "
                                "list indices joined by dots, like routing.seed_mode or "
                                "jobs.0.seed"))
    return path.split(".")


def check_override_path(model_cls: type[BaseModel], path: str) -> None:
    """SpecError unless ``path`` names a place in ``model_cls``'s documents (nested models,
    list items by index, mapping values, through unions and Optional); no value needed.
    The error names the path and the closest valid names at the level that went wrong."""
    parts = _split(path)
    anns: list[Any] = [model_cls]
    for i, part in enumerate(parts):
        where = ".".join(parts[:i]) or "the scenario"
        anns = _step(anns, part, where, path)


# ---------------------------------------------------------------- applying overrides

def _no_item(k: int, where: str, n: int) -> str:
    if n == 0:
        return (f"no item {k}: {where} is empty; allowed: {where} itself as the path, set "
                "to a whole list")
    return f"no item {k}: {where} has {n} item(s); allowed: an index from 0 to {n - 1}"


def _set(doc: dict[str, Any], parts: list[str], value: Any, path: str,
         load_spec: Any) -> None:
    node: Any = doc
    for i, part in enumerate(parts[:-1]):
        where = ".".join(parts[: i + 1])
        if i == 0 and part == "spec":
            load_spec(doc)
        if isinstance(node, list):
            k = int(part)
            if k >= len(node):
                raise SpecError(Problem(path, _no_item(k, ".".join(parts[:i]), len(node))))
            nxt = node[k]
        else:
            nxt = node.get(part)
        if nxt is None:
            if parts[i + 1].isdigit():
                raise SpecError(Problem(path, _no_item(int(parts[i + 1]), where, 0)))
            nxt = {}
            if isinstance(node, list):
                node[int(part)] = nxt
            else:
                node[part] = nxt
        elif not isinstance(nxt, dict | list):
            raise SpecError(Problem(path, f"{where} is {nxt!r}, not a section; allowed: "
                                    f"{where} itself as the path"))
        node = nxt
    last = parts[-1]
    if isinstance(node, list):
        k = int(last)
        if k >= len(node):
            raise SpecError(Problem(path, _no_item(k, ".".join(parts[:-1]), len(node))))
        node[k] = value
    else:
        node[last] = value


def apply_overrides(scn: S, overrides: Mapping[str, Any]) -> S:
    """A new scenario of the same type: ``scn``'s document with each dotted path set to its
    value, validated again (SpecError naming the path: a bad path with the closest valid
    names, a value of the wrong type or out of range with pydantic's message)."""
    from aifabric.routing.scenario import scenario_from_dict

    if not isinstance(overrides, Mapping):
        raise SpecError(Problem("overrides", f"got {type(overrides).__name__}; allowed: a "
                                "mapping of dotted paths to values"))
    model = type(scn)
    problems: list[Problem] = []
    for path in overrides:
        try:
            check_override_path(model, path)
        except SpecError as err:
            problems.extend(err.problems)
    if problems:
        raise SpecError(problems)
    doc = _written(scn)
    for path, value in overrides.items():
        parts = path.split(".")
        if parts[0] == "spec" and len(parts) > 1:
            _embed_spec(scn, doc)
        _set(doc, parts, jsonable(value), path, lambda d: _embed_spec(scn, d))
    try:
        out = scenario_from_dict(doc, file=None, base_dir=scn.base_dir, model=model)
    except SpecError as err:
        raise SpecError(Problem(p.path, p.message, p.file) for p in err.problems) from None
    out._file = scn.file
    return out
