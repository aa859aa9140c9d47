"""Subpackages that are also API functions: ``aifabric.plan(fab)`` and
``aifabric.goodput(scn)``. ``import aifabric.plan`` makes the package an attribute of
``aifabric``, which would hide a function of the same name; so the package's module is
made callable instead, calling :mod:`aifabric.api`'s function (imported on first call:
the package stays as light as it was)."""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from typing import Any


def make_callable(package: str, function: str) -> None:
    """Make the already imported module ``package`` callable as ``aifabric.api.<function>``
    (``inspect.signature`` of the module is the function's)."""

    def target() -> Any:
        return getattr(importlib.import_module("aifabric.api"), function)

    class _CallablePackage(types.ModuleType):
        def __call__(self, *args: Any, **kwargs: Any) -> Any:
            return target()(*args, **kwargs)

        @property
        def __signature__(self) -> inspect.Signature:
            return inspect.signature(target())

    _CallablePackage.__doc__ = f"This package's module type: calling it calls " \
                               f"aifabric.api.{function}."
    sys.modules[package].__class__ = _CallablePackage
