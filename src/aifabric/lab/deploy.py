"""``lab deploy SPEC``: a changed spec to the running lab, through the build's playbooks.

The lab (``lab up --ssh``) is a scaled-down copy of its spec. ``deploy`` scales the new
spec the same way and refuses, before anything changes, a spec whose copy would need
other namespaces, cables, addresses or interface settings (a running lab cannot be
rewired: ``lab down`` and ``lab up`` it). Otherwise it writes the lab's build anew from
the new spec (``<lab>/build``: every config, and an inventory whose plan digest is the
new ``spec.yaml``'s, so the facts the build's preflight collects belong to it) and runs
the build's own ``deploy-switches.yml`` over the lab's sshds: a canary per plane, then
batches, each gated and rolled back as a whole when it fails
(:mod:`aifabric.configs.ansible`). When every batch passed, the lab's spec becomes the
new one (``lab test`` and ``monitor lab`` then check against it); when a batch was
rolled back the lab keeps its old spec and ``state.json`` records the attempt.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aifabric.configs.build import Renderer
from aifabric.lab._system import LabError
from aifabric.lab.core import SPEC, Lab, _build, write_lab_build
from aifabric.lab.netns import Layout
from aifabric.lab.scale import parse_scale
from aifabric.outputs import write_file
from aifabric.spec import dump_spec, load_spec

__all__ = ["DeployResult", "deploy", "layout_changes"]


@dataclass
class DeployResult:
    """One ``lab deploy``: the playbook's exit status, its rollout record, its time."""

    returncode: int
    rollout: dict[str, Any] = field(default_factory=dict)  # <build>/rollout.json
    seconds: float = 0.0
    output: str = ""  # the playbook's output (stdout and stderr)

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def layout_changes(old: Layout, new: Layout) -> list[str]:
    """What the new copy would change in the running lab's namespaces, cables and
    interface settings (empty: configs only)."""
    out = []
    if old.switches != new.switches or old.hosts != new.hosts:
        gone = sorted(set(old.switches + old.hosts) - set(new.switches + new.hosts))
        added = sorted(set(new.switches + new.hosts) - set(old.switches + old.hosts))
        out.append("devices differ" + (f" (gone: {', '.join(gone[:3])})" if gone else "")
                   + (f" (new: {', '.join(added[:3])})" if added else ""))
    cables = {(lk.ns_a, lk.if_a, lk.ns_b, lk.if_b) for lk in old.links}
    cables_new = {(lk.ns_a, lk.if_a, lk.ns_b, lk.if_b) for lk in new.links}
    if cables != cables_new:
        out.append(f"cabling differs ({len(cables ^ cables_new)} veth pairs)")
    for dev in sorted(set(old.scripts) & set(new.scripts)):
        if old.scripts[dev] != new.scripts[dev]:
            a, b = old.scripts[dev], new.scripts[dev]
            diff = next((y for x, y in zip(a[1], b[1], strict=False) if x != y),
                        "sysctls" if a[0] != b[0] else "commands")
            out.append(f"{dev}: interfaces or addresses differ (`{diff}`)")
    if set(old.static_tors) != set(new.static_tors):
        out.append("ToRs with static host routes differ")
    if old.mgmt != new.mgmt:  # (MgmtLayout is a frozen dataclass: compared by value)
        out.append("the management network differs (pool, interfaces or devices)")
    return out


def deploy(lab: Lab, spec_file: Path, *, canary: int = 1, batch: str = "100%",
           gate_timeout_s: float = 30.0, build_extra: Sequence[Renderer] = (),
           timeout_s: float = 900.0) -> DeployResult:
    """Deploy ``spec_file`` to the running lab ``lab`` (see the module); SpecError on a
    bad spec, LabError when the lab has no sshd, the copy would need rewiring, or
    ``ansible-playbook`` is missing -- nothing is changed then."""
    if not lab.state.get("ssh"):
        raise LabError("the lab runs no sshd: `lab deploy` needs one started with "
                       "`aifabric lab up SPEC --ssh`")
    if shutil.which("ansible-playbook") is None:
        raise LabError("`lab deploy` runs the build's playbooks: ansible-playbook is not "
                       "installed (pip install ansible-core)")
    spec = load_spec(spec_file)
    scale = parse_scale(str(lab.state["scale"]))
    fabric, ctx, lay = _build(spec, scale, lab.dir)
    changes = layout_changes(lab.layout, lay)
    if changes:
        more = f" (and {len(changes) - 1} more)" if len(changes) > 1 else ""
        raise LabError(f"{spec_file}: its --scale {lab.state['scale']} copy is not the "
                       f"running lab's: {changes[0]}{more}; a running lab cannot be "
                       "rewired or re-addressed: `aifabric lab down`, then `lab up` the "
                       "new spec")
    out = write_lab_build(lab.dir, fabric, ctx, lay, build_extra)
    d = out / "ansible"
    env = {**os.environ, "ANSIBLE_CONFIG": str(d / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    extra = {"aifabric_canary": int(canary), "aifabric_batch": str(batch),
             "aifabric_gate_timeout": float(gate_timeout_s)}
    t0 = time.monotonic()
    try:
        proc = subprocess.run(["ansible-playbook", "-i", str(d / "inventory.yml"),
                               str(d / "deploy-switches.yml"), "-e", json.dumps(extra)],
                              capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=env)
    except subprocess.TimeoutExpired:
        raise LabError(f"deploy-switches.yml did not finish in {timeout_s:.0f} s") from None
    took = time.monotonic() - t0
    try:
        rollout = json.loads((out / "rollout.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        rollout = {}
    res = DeployResult(proc.returncode, rollout, took, proc.stdout + proc.stderr)
    record = {"spec_file": str(Path(spec_file).absolute()), "ok": res.ok, "at": time.time(),
              "summary": rollout.get("summary", {})}
    if res.ok:
        write_file(lab.dir / SPEC, dump_spec(spec), option="--dir")
        lab.state.update(spec_file=record["spec_file"], spec_name=spec.name,
                         fabric=fabric.name)
    lab.state["deployed"] = record
    lab.save()
    return res
