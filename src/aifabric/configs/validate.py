"""Validate a build's switch configs before it is written (``aifabric build --validate``):
every config_db.json against SONiC's YANG models (yanglint) and every frr.conf with FRR."""

from __future__ import annotations

import json
from typing import Any

from aifabric.errors import Problem, SpecError

__all__ = ["check_validate_tools", "validate_configs"]


def check_validate_tools(option: str = "validate") -> None:
    """One line naming exactly what validation lacks (yanglint and the SonIC YANG models
    named by ``AIFABRIC_SONIC_YANG``, FRR's vtysh), before any work."""
    import shutil

    from aifabric.configs.yang import models_problem

    problem = models_problem()
    if problem is None and shutil.which("vtysh") is None:
        problem = "vtysh not found on PATH; install FRR (Debian/Ubuntu package frr)"
    if problem is not None:
        raise SpecError(Problem(option, problem))


def validate_configs(ctx: Any, option: str = "validate"
                     ) -> tuple[int, list[tuple[str, str]], list[tuple[str, str]]]:
    """Every switch's config_db.json against SONiC's YANG models and frr.conf with FRR, as
    they would be written: (switches checked, YANG problems, FRR problems)."""
    from aifabric.configs.build import config_db_json
    from aifabric.configs.frr import render_frr
    from aifabric.configs.frrcheck import validate_frr_confs
    from aifabric.configs.sonic import render_config_db
    from aifabric.configs.yang import validate_config_dbs

    # the backend's switches, then the frontend's (named frontend/<switch>)
    views = [(ctx, "")]
    if getattr(ctx, "frontend", None) is not None:
        views.append((ctx.frontend, "frontend/"))
    docs: list[tuple[str, Any, int]] = [
        (prefix + str(v.fabric.nodes.name[n]), v.switches, n)
        for v, prefix in views for n in v.plan.switches.tolist()]
    try:
        dbs = [(name, json.loads(config_db_json(render_config_db(sw, n))))
               for name, sw, n in docs]
        yang = validate_config_dbs(dbs)
        frr = validate_frr_confs([(name, render_frr(sw, n)) for name, sw, n in docs])
    except FileNotFoundError as exc:
        raise SpecError(Problem(option, str(exc))) from None
    return len(docs), [tuple(x) for x in yang], [tuple(x) for x in frr]
