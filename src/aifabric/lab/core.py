"""Bring a lab up, find it again, take it down.

A lab lives in one folder (``--dir``, default ``$AIFABRIC_LAB_DIR`` or
``/run/aifabric/lab``): ``state.json`` (what was made: prefix, namespaces, the spec and
scale it came from, the failures injected), a copy of the original spec, and ``frr/``
with every switch's config, sockets, pid files and logs. ``status``, ``test``, ``fail``
and ``down`` find the running lab through that file.

``up`` writes the state *before* it creates anything, so a lab that fails half-way is
torn down by the same code as ``down``: kill the daemons by pid, delete the namespaces
that carry the lab's prefix (their veths go with them), remove the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aifabric.configs import BuildContext
from aifabric.configs.build import Renderer
from aifabric.errors import Problem, SpecError
from aifabric.lab._system import LabError, preflight, run
from aifabric.lab.daemons import alive, daemon_pids, start_frr, stop_pids
from aifabric.lab.netns import Layout, lab_prefix, layout
from aifabric.lab.scale import Scale, parse_scale, scale_fabric
from aifabric.outputs import write_file
from aifabric.spec import Spec, dump_spec, load_spec
from aifabric.topology import Fabric

__all__ = ["DEFAULT_DIR", "Lab", "default_dir", "down", "lab_namespaces", "load_lab", "up"]

DEFAULT_DIR = "/run/aifabric/lab"
STATE = "state.json"
SPEC = "spec.yaml"


def default_dir() -> Path:
    return Path(os.environ.get("AIFABRIC_LAB_DIR") or DEFAULT_DIR)


@dataclass(eq=False)
class Lab:
    """A running lab: its folder, state, fabric and layout (rebuilt from the saved spec)."""

    dir: Path
    state: dict[str, Any]
    fabric: Fabric
    ctx: BuildContext
    layout: Layout

    @property
    def prefix(self) -> str:
        return str(self.state["prefix"])

    @property
    def failures(self) -> list[dict[str, Any]]:
        return list(self.state.get("failures", []))

    def save(self) -> None:
        _write_state(self.dir, self.state)


def _write_state(lab: Path, state: dict[str, Any]) -> None:
    tmp = lab / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, lab / STATE)


def lab_namespaces(prefix: str) -> list[str]:
    """The namespaces on this machine whose name starts with ``prefix``."""
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.split() and line.split()[0].startswith(prefix)]


def _build(spec: Spec, scale: Scale, lab: Path) -> tuple[Fabric, BuildContext, Layout]:
    from aifabric.lab.mgmt import mgmt_layout

    fabric = scale_fabric(spec, scale)
    ctx = BuildContext.of(fabric)
    lay = layout(fabric, ctx, lab_prefix(lab))
    lay.mgmt = mgmt_layout(ctx, lay.ns, lay.prefix)
    return fabric, ctx, lay


def load_lab(lab: Path | None = None) -> Lab:
    """The lab running from folder ``lab``; LabError if none is up there."""
    lab = Path(lab or default_dir()).absolute()
    path = lab / STATE
    if not path.is_file():
        raise LabError(f"no lab is up in {lab} (start one with `aifabric lab up SPEC`)")
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
        scale = parse_scale(str(state["scale"]))
    except (ValueError, KeyError, TypeError, SpecError) as err:
        raise LabError(f"the lab's {path} is damaged ({type(err).__name__}: {err}); take "
                       "it down with `aifabric lab down` (or remove the folder)") from None
    spec = load_spec(lab / SPEC)
    fabric, ctx, lay = _build(spec, scale, lab)
    return Lab(lab, state, fabric, ctx, lay)


def up(spec_file: Path, scale_text: str = "small", lab: Path | None = None,
       progress: Any = None, ssh: bool = False, build_extra: Sequence[Renderer] = (),
       queues: Any = None) -> Lab:
    """Build the lab of ``spec_file`` at ``scale_text`` in folder ``lab``.

    Refuses (LabError) when a lab is already up there; raises SpecError on bad input
    (nothing is created). Any failure after the first namespace is torn down. ``ssh``
    also starts an sshd in every namespace and writes the lab's build with an Ansible
    inventory that reaches them (:mod:`aifabric.lab.ssh`); ``build_extra``: more files of
    that build (:func:`aifabric.configs.build.render_build`'s ``extra``; the command adds
    ``monitoring/``). ``queues``: the egress queues of every cable end (switch ports
    as it says, NIC ports a shaped drop-tail FIFO)
    (:class:`aifabric.lab.queues.Queues`; None: none, the kernel's default).
    """
    lab = Path(lab or default_dir()).absolute()
    spec = load_spec(spec_file)
    scale = parse_scale(scale_text)
    fabric, ctx, lay = _build(spec, scale, lab)  # bad input stops here: nothing made yet
    preflight()
    if ssh:
        from aifabric.lab.ssh import preflight_ssh

        preflight_ssh()
    if (lab / STATE).is_file():
        raise LabError(f"a lab is already up in {lab}; take it down first "
                       "(`aifabric lab down`) or use another --dir")
    prefix = lab_prefix(lab)
    stale = lab_namespaces(prefix)
    if stale:
        raise LabError(f"{len(stale)} namespaces named {prefix}* exist without a lab state "
                       f"in {lab}; remove them with `aifabric lab down --dir {lab}`")
    if lay.mgmt is not None:  # the pool must be free on this machine
        from aifabric.lab.mgmt import preflight_mgmt

        preflight_mgmt(lay.mgmt)
    step = progress or (lambda _msg: None)
    if lab.exists() and not lab.is_dir():
        raise SpecError(Problem("--dir", f"{lab} is a file; allowed: a folder"))
    try:
        lab.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # before anything is created: one line, exit 2
        raise SpecError(Problem("--dir", f"cannot write {lab}: {exc.strerror or exc}; "
                                "allowed: a folder you can write to")) from None
    write_file(lab / SPEC, dump_spec(spec), option="--dir")
    state: dict[str, Any] = {
        "version": 1, "prefix": prefix, "spec_file": str(Path(spec_file).absolute()),
        "spec_name": spec.name, "scale": scale_text, "fabric": fabric.name,
        "switches": lay.switches, "hosts": lay.hosts, "links": len(lay.links),
        "phase": "building", "failures": [], "started": time.time(), "ssh": ssh,
    }
    _write_state(lab, state)
    try:
        step(f"creating {len(lay.namespaces)} namespaces and {len(lay.links)} veth pairs")
        batch = [f"netns add {n}" for n in lay.namespaces]
        batch += [f"link add {lk.if_a} netns {lk.ns_a} type veth peer name {lk.if_b} "
                  f"netns {lk.ns_b}" for lk in lay.links]
        run(["ip", "-batch", "-"], input="\n".join(batch) + "\n", timeout=120)
        step("addressing interfaces")
        cmds = []
        for dev, (sysctls, ip_cmds) in lay.scripts.items():
            sc = [f"{k}={v}" for k, v in sysctls.items()]
            cmds.append(["ip", "netns", "exec", lay.ns[dev], "sh", "-ec",
                         f"sysctl -q -w {' '.join(sc)} && ip -batch -",
                         "\n".join(ip_cmds)])
        _run_scripts(cmds)
        if lay.mgmt is not None:
            step(f"management network: bridge {lay.mgmt.bridge}, "
                 f"{len(lay.mgmt.ports)} management ports")
            _mgmt_up(lay)
        if queues is not None and queues.kind != "none":
            from aifabric.lab.queues import install_queues, switch_ports

            step("installing the egress queues of every cable end")
            state["queues"] = install_queues(queues, switch_ports(lay),
                                             switch_ports(lay, hosts=True)).as_state()
        step(f"starting FRR on {len(lay.switches)} switches")
        start_frr(lab, lay.ns, lay.frr_conf, lay.static_tors)
        if ssh:
            step("starting sshd in every namespace, writing the lab's build")
            state["ssh_pids"] = _start_ssh(lab, fabric, ctx, lay, build_extra)
        if lay.mgmt is not None:
            from aifabric.lab.mgmt import start_exporters

            step("starting a node exporter on every management address")
            state["mgmt"] = {"bridge": lay.mgmt.bridge,
                             "exporter_pids": start_exporters(lab, lay.mgmt)}
        state["phase"] = "up"
        state["pids"] = daemon_pids(lab)
        _write_state(lab, state)
    except BaseException:
        teardown(lab, prefix)
        raise
    return Lab(lab, state, fabric, ctx, lay)


#: folders ``up --ssh`` writes into the lab folder: the build of the scaled fabric (with
#: the Ansible inventory of the lab) and each device's file-system root
SSH_FOLDERS = ("build", "root")


def _start_ssh(lab: Path, fabric: Fabric, ctx: BuildContext, lay: Layout,
               extra: Sequence[Renderer] = ()) -> dict[str, int]:
    """sshd per namespace, the lab's build in ``<lab>/build`` (its inventory reaches the
    sshds) and per switch its installed ``config_db.json`` under ``<lab>/root``."""
    from aifabric.configs.ansible import management_addresses
    from aifabric.lab.ssh import start_sshd

    addr = management_addresses(ctx)
    pids = start_sshd(lab, lay.ns, addr)
    out = write_lab_build(lab, fabric, ctx, lay, extra)
    for dev in lay.switches + lay.hosts:
        (lab / "root" / dev).mkdir(parents=True, exist_ok=True)
    for sw in lay.switches:
        os.chmod(lab / "frr" / sw / "frr.conf", 0o640)  # as FRR's package installs it
        etc = lab / "root" / sw / "etc" / "sonic"
        etc.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(out / "switches" / sw / "config_db.json", etc / "config_db.json")
    return pids


def write_lab_build(lab: Path, fabric: Fabric, ctx: BuildContext, lay: Layout,
                    extra: Sequence[Renderer] = ()) -> Path:
    """``<lab>/build``: the build of ``fabric`` with an Ansible inventory that reaches the
    lab's sshds (its plan digest is the build's own ``spec.yaml``)."""
    from aifabric.configs import write_build
    from aifabric.configs.ansible import inventory_yml, plan_id
    from aifabric.lab.ssh import inventory_vars

    out = lab / "build"
    write_build(fabric, out, ctx=ctx, extra=extra)
    per, common = inventory_vars(lab, lay.switches + lay.hosts, lay.switches)
    plan = plan_id((out / SPEC).read_text(encoding="utf-8"), fabric.spec.name)
    (out / "ansible" / "inventory.yml").write_text(inventory_yml(ctx, plan, per, common),
                                                   encoding="utf-8")
    return out


def _mgmt_up(lay: Layout) -> None:
    """The management bridge and veths (root namespace), then each device's address."""
    m = lay.mgmt
    run(["ip", "-batch", "-"], input="\n".join(m.root_batch()) + "\n", timeout=120)
    _run_scripts([["ip", "netns", "exec", p.ns, "ip", "-batch", "-", "\n".join(m.ns_batch(p))]
                  for p in m.ports])


def _run_scripts(cmds: list[list[str]]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    def one(c: list[str]) -> None:
        run(c[:-1], input=c[-1] + "\n", timeout=60)

    with ThreadPoolExecutor(max_workers=16) as pool:
        for fut in [pool.submit(one, c) for c in cmds]:
            fut.result()


def teardown(lab: Path, prefix: str | None = None) -> dict[str, int]:
    """Remove everything the lab in ``lab`` made: its daemons (by pid), its namespaces
    (by prefix; their veths go with them) and its folder. Returns what was removed."""
    lab = Path(lab).absolute()
    prefix = prefix or lab_prefix(lab)
    pids = list(daemon_pids(lab).values())
    state_path = lab / STATE
    if state_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            pids += list(json.loads(state_path.read_text()).get("pids", {}).values())
    ssh = (lab / "ssh").is_dir()
    if state_path.is_file():
        with contextlib.suppress(OSError, ValueError):
            ssh = ssh or bool(json.loads(state_path.read_text()).get("ssh"))
    if ssh:  # sshd listeners and sessions first: they live in the namespaces
        from aifabric.lab.ssh import stop_sshd

        stop_sshd(lab, lab_namespaces(prefix))
    running = [p for p in set(pids) if alive(p, lab)]
    left = stop_pids(lab, running)
    if left:
        raise LabError(f"could not stop FRR pids {left}")
    from aifabric.lab.mgmt import remove_bridge, stop_exporters

    names = lab_namespaces(prefix)
    stop_exporters(names)  # the management network's exporters (none without one)
    if names:
        run(["ip", "-batch", "-"], input="".join(f"netns del {n}\n" for n in names),
            check=False, timeout=120)
    rest = lab_namespaces(prefix)
    if rest:
        raise LabError(f"could not delete namespaces {', '.join(rest[:3])}")
    remove_bridge(prefix)  # each veth of it went with its namespace
    shutil.rmtree(lab / "mgmt", ignore_errors=True)
    # only what the lab wrote: the folder may hold other files of the user's
    shutil.rmtree(lab / "frr", ignore_errors=True)
    if ssh:
        for name in SSH_FOLDERS:
            shutil.rmtree(lab / name, ignore_errors=True)
    for name in (SPEC, STATE + ".tmp", STATE):
        (lab / name).unlink(missing_ok=True)
    if lab.is_dir() and not any(lab.iterdir()):
        lab.rmdir()
    return {"daemons": len(running), "namespaces": len(names)}


def down(lab: Path | None = None) -> dict[str, int]:
    """Take the lab in ``lab`` down (also one left half-built); LabError if none."""
    lab = Path(lab or default_dir()).absolute()
    preflight()
    prefix = lab_prefix(lab)
    if not (lab / STATE).is_file() and not lab_namespaces(prefix) and not daemon_pids(lab):
        raise LabError(f"no lab is up in {lab}")
    return teardown(lab, prefix)
