"""The base of every input model (spec, deploy, scenarios, packet settings, facts).

Unknown fields are errors (a typo must not be silently ignored), and a YAML boolean is
never a number: pydantic's lax mode reads ``count: true`` as 1 and ``rate: false`` as 0.0;
here it is an error, "expected an integer, got a boolean" (IP networks too: pydantic
reads ``true`` as 0.0.0.1). Integers still fill float fields, and fields that accept a
boolean keep doing so.
"""

from __future__ import annotations

import ipaddress
import types
from functools import cache
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

__all__ = ["StrictModel", "number_kind"]

_CONTAINERS = (list, tuple, dict)
_IP = (ipaddress.IPv4Network, ipaddress.IPv6Network, ipaddress.IPv4Address,
       ipaddress.IPv6Address, ipaddress.IPv4Interface, ipaddress.IPv6Interface)


def number_kind(annotation: Any) -> str | None:
    """``"integer"``, ``"number"``, ``"IP network"`` or ``"IP address"`` when
    ``annotation`` takes numbers (IP types take integers too) but no boolean; None
    otherwise (not numeric, or a boolean is allowed)."""
    try:
        return _number_kind(annotation)
    except TypeError:  # unhashable metadata: not cached
        return _number_kind.__wrapped__(annotation)


@cache
def _number_kind(annotation: Any) -> str | None:
    found: set[str] = set()

    def walk(a: Any) -> bool:  # False: a boolean is allowed
        if a is bool:
            return False
        if a is int:
            found.add("integer")
            return True
        if a is float:
            found.add("number")
            return True
        if isinstance(a, type) and issubclass(a, _IP):  # pydantic reads 1 as 0.0.0.1
            found.add("IP network" if "Network" in a.__name__ else "IP address")
            return True
        origin = get_origin(a)
        if origin is Annotated:
            return walk(get_args(a)[0])
        if origin is Union or origin is types.UnionType:
            return all(walk(x) for x in get_args(a))
        if origin is Literal:
            vals = get_args(a)
            if any(isinstance(v, bool) for v in vals):
                return False
            if any(isinstance(v, int | float) for v in vals):
                found.add("integer" if all(isinstance(v, int) for v in vals
                                           if isinstance(v, int | float)) else "number")
            return True
        return True  # a model, a string, a container: not a bare number

    if not walk(annotation) or not found:
        return None
    for kind in ("IP network", "IP address", "number"):
        if kind in found:
            return kind
    return "integer"


def _item_annotation(annotation: Any) -> tuple[str, Any] | None:  # small, not cached
    """For ``list[X]``/``tuple[X, ...]``/``set[X]`` ("items", X) and ``dict[K, X]``
    ("values", X), through Optional/Annotated; None otherwise."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _item_annotation(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        inner = [a for a in get_args(annotation) if a is not type(None)]
        return _item_annotation(inner[0]) if len(inner) == 1 else None
    args = get_args(annotation)
    if origin in (list, set, frozenset) and args:
        return "items", args[0]
    if origin is tuple and args:
        return "items", args[0]
    if origin is dict and len(args) == 2:
        return "values", args[1]
    return None


def _bool_error(kind: str) -> PydanticCustomError:
    article = "a" if kind == "number" else "an"
    return PydanticCustomError("bool_not_number", f"expected {article} {kind}, got a boolean")


def _numeric_fields(cls: type[BaseModel]) -> tuple[dict[str, str], dict[str, str]]:
    """The fields of ``cls`` that take numbers and no boolean, by input key: those that
    take one number, and those that take a list or mapping of numbers; key -> kind."""
    out = cls.__dict__.get("_aifabric_numeric")
    if out is not None:
        return out
    scalar: dict[str, str] = {}
    container: dict[str, str] = {}
    for name, field in cls.model_fields.items():
        kind = number_kind(field.annotation)
        into = scalar
        if kind is None:
            inner = _item_annotation(field.annotation)
            kind = number_kind(inner[1]) if inner is not None else None
            if kind is None:
                continue
            into = container
        for key in {name, field.alias or name}:
            into[key] = kind
    out = (scalar, container)
    type.__setattr__(cls, "_aifabric_numeric", out)
    return out


class StrictModel(BaseModel):
    """Base: unknown fields are errors, booleans are not numbers, models are frozen, and
    a number is finite (YAML's ``.inf``/``.nan`` are errors, never a link speed)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    # a model-level check (field validators are not allowed on union discriminators):
    # its errors carry the field's location, like pydantic's own
    @model_validator(mode="before")
    @classmethod
    def _no_bool_numbers(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        kinds = set(map(type, data.values()))  # C speed: the usual input has no bool
        has_bool = bool in kinds
        if not has_bool and kinds.isdisjoint(_CONTAINERS):
            return data
        scalar, container = _numeric_fields(cls)
        errors: list[InitErrorDetails] = []
        if has_bool:
            errors += [InitErrorDetails(type=_bool_error(scalar[k]), loc=(k,), input=data[k])
                       for k in scalar.keys() & data.keys() if data[k].__class__ is bool]
        for key in container.keys() & data.keys():
            value = data[key]
            items = value.values() if isinstance(value, dict) else value
            if not isinstance(value, list | tuple | dict) or bool not in set(map(type, items)):
                continue
            kind = container[key]
            pairs = value.items() if isinstance(value, dict) else enumerate(value)
            errors += [InitErrorDetails(type=_bool_error(kind), loc=(key, i), input=v)
                       for i, v in pairs if v.__class__ is bool]
        if errors:
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data
