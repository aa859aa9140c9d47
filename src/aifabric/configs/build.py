"""Render every file of a build and write the folder atomically."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from aifabric.configs._ports import Endpoints
from aifabric.configs.addressing import AddressPlan, plan_addresses
from aifabric.configs.frontend import FrontendContext, render_frontend
from aifabric.configs.frr import render_frr
from aifabric.configs.lld import render_lld, render_lld_management
from aifabric.configs.nccl import nccl_env, render_nccl_topo
from aifabric.configs.nic import HostContext, render_nic_script
from aifabric.configs.nvlink import nvlink_cabling_csv
from aifabric.configs.sonic import SwitchContext, render_config_db
from aifabric.configs.tables import addressing_csv, bom_csv, cabling_csv, mgmt_cabling_csv
from aifabric.spec import dump_spec
from aifabric.topology import Fabric, LinkKind, NodeKind
from aifabric.topology.management import ManagementPlan, plan_management

__all__ = ["BuildContext", "build_files", "render_build", "write_build"]

#: a build folder holds this file; ``aifabric check`` reads the plan back from it
SPEC_FILE = "spec.yaml"

Progress = Callable[[int], None]
#: more files of a build from its context, e.g. :func:`aifabric.telemetry.monitoring.
#: render_monitoring` (``monitoring/``): the caller that assembles a build passes them
#: (configs know nothing above them)
Renderer = Callable[["BuildContext"], Iterable[tuple[str, str]]]


@dataclass(eq=False)
class BuildContext:
    """The address plan and the per-device views every renderer shares."""

    plan: AddressPlan
    ends: Endpoints
    switches: SwitchContext
    hosts: HostContext
    #: the frontend (storage) network's own fabric and plan; None without ``frontend``
    frontend: FrontendContext | None = None
    #: the out-of-band management network (None: the spec has no ``management:``)
    mgmt: ManagementPlan | None = None

    @classmethod
    def of(cls, fabric: Fabric) -> BuildContext:
        plan = plan_addresses(fabric)
        mgmt = plan_management(fabric)
        ends = Endpoints.of(plan)
        return cls(plan, ends, SwitchContext(plan, ends, mgmt), HostContext.of(plan, ends),
                   FrontendContext.of(fabric), mgmt)

    @property
    def fabric(self) -> Fabric:
        return self.plan.fabric


_ENTRY = json.JSONEncoder(sort_keys=True, separators=(", ", ": ")).encode
_KEY = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def config_db_json(db: dict) -> str:
    """A CONFIG_DB document: tables and keys sorted, one entry per line.

    Same JSON as ``json.dumps(db, sort_keys=True)``, laid out for reading and diffing;
    written with the C encoder per entry (the indenting encoder is pure Python and
    would dominate the build time of a large fabric).
    """
    tables = []
    for t in sorted(db):
        entries = db[t]
        body = ",\n".join(f"        {_KEY(k)}: {_ENTRY(entries[k])}" for k in sorted(entries))
        tables.append(f"    {_KEY(t)}: {{\n{body}\n    }}" if body else f"    {_KEY(t)}: {{}}")
    return "{\n" + ",\n".join(tables) + "\n}\n"


def lacp_json(ctx: SwitchContext, node: int) -> str:
    """HPN ToR: the LACP identity and ARP/broadcast settings of its host ports."""
    dep = ctx.dep
    rows = range(int(ctx.ends.start[node]), int(ctx.ends.stop[node]))
    ports = {ctx.portchannel(r): {"member": ctx.port_name[r], "host": ctx.peer_device[r],
                                  "host_port": ctx.peer_port[r],
                                  "lacp_port_id": ctx.lacp_port_id(r)}
             for r in rows if ctx.kind[r] == LinkKind.ACCESS}
    doc = {"system_mac": dep.hpn.lacp_system_mac.lower(),
           "port_id_offset": dep.hpn.lacp_port_id_offset,
           "side": "ab"[max(0, int(ctx.f.nodes.side[node]))],
           "vlan": f"Vlan{dep.nic.host_vlan}", "broadcast": "off", "proxy_arp": "on",
           "host_routes": "arp", "portchannels": ports}
    return json.dumps(doc, indent=2) + "\n"


def n_files(fabric: Fabric) -> int:
    """Devices rendered (the unit of progress)."""
    return int(fabric.is_switch.sum()) + len(fabric.host_node) + 1


def render_build(ctx: BuildContext, progress: Progress | None = None, *,
                 extra: Sequence[Renderer] = ()) -> Iterator[tuple[str, str]]:
    """Every file of the build as ``(relative path, text)``, in a fixed order; ``extra``:
    more files rendered from the context (``aifabric build`` adds ``monitoring/``)."""
    f = ctx.fabric
    nodes = f.nodes
    sw = ctx.switches
    spec_text = dump_spec(f.spec)
    yield SPEC_FILE, spec_text
    if getattr(f.spec, "transport", "roce") == "infiniband":  # no Ethernet switch configs
        from aifabric.configs.infiniband import render_infiniband

        yield "addressing.csv", addressing_csv(ctx.plan, ctx.ends, ctx.mgmt)
        yield "bom.csv", bom_csv(ctx.plan, ctx.ends, ctx.mgmt)
        if ctx.mgmt is not None:
            yield "mgmt-cabling.csv", mgmt_cabling_csv(ctx.mgmt)
        yield from render_infiniband(ctx)
        if ctx.frontend is not None:  # the frontend is Ethernet whatever the backend
            yield from render_frontend(ctx.frontend, config_db_json)
        if progress:  # (the monitoring extras watch SONiC switches: not written here)
            progress(n_files(f))
        return
    lld = render_lld(ctx.plan, ctx.ends)
    if ctx.mgmt is not None:  # (a section only with a management network)
        lld += render_lld_management(ctx.mgmt)
    yield "LLD.md", lld
    yield "cabling.csv", cabling_csv(ctx.plan, ctx.ends)
    yield "addressing.csv", addressing_csv(ctx.plan, ctx.ends, ctx.mgmt)
    yield "bom.csv", bom_csv(ctx.plan, ctx.ends, ctx.mgmt)
    if ctx.mgmt is not None:  # the out-of-band management network's cables
        yield "mgmt-cabling.csv", mgmt_cabling_csv(ctx.mgmt)
    nvl = nvlink_cabling_csv(f)
    if nvl is not None:  # a scale-up domain: every NVLink link, chip port and cartridge
        yield "nvlink-cabling.csv", nvl
    if progress:
        progress(1)
    for n in ctx.plan.switches.tolist():
        name = str(nodes.name[n])
        yield f"switches/{name}/config_db.json", config_db_json(render_config_db(sw, n))
        yield f"switches/{name}/frr.conf", render_frr(sw, n)
        if sw.hpn and nodes.kind[n] == NodeKind.TOR:
            yield f"switches/{name}/lacp.json", lacp_json(sw, n)
        if progress:
            progress(1)
    for h in range(len(f.host_node)):
        name = str(nodes.name[f.host_node[h]])
        yield f"hosts/{name}/nic-setup.sh", render_nic_script(ctx.hosts, h)
        yield f"hosts/{name}/nccl-topo.xml", render_nccl_topo(ctx.hosts, h)
        yield f"hosts/{name}/nccl.env", nccl_env(ctx.hosts, h)
        if progress:
            progress(1)
    if ctx.frontend is not None:  # the frontend (storage) network: its own fabric
        yield from render_frontend(ctx.frontend, config_db_json)
    for render in extra:  # e.g. the operate layer's Prometheus/Grafana files
        yield from render(ctx)
    # the Ansible inventory and playbooks that push this build and collect facts
    from aifabric.configs.ansible import render_ansible

    yield from render_ansible(ctx, spec_text)


def build_files(fabric: Fabric, *, extra: Sequence[Renderer] = ()) -> dict[str, str]:
    """The whole build in memory (for tests and small fabrics)."""
    return dict(render_build(BuildContext.of(fabric), extra=extra))


def write_build(fabric: Fabric, out: Path, progress: Progress | None = None,
                ctx: BuildContext | None = None, *, extra: Sequence[Renderer] = ()) -> int:
    """Write the build of ``fabric`` to folder ``out`` atomically; returns the file count.

    The files go to a temporary folder beside ``out`` that is renamed into place at the
    end (:func:`aifabric.outputs.atomic_folder`); a previous build in ``out`` is replaced.
    ``out`` must be absent, empty, or a previous build (it holds ``spec.yaml``), never
    another folder. Files and folders get the umask's permissions (scripts executable).
    ``extra``: more files rendered from the context (see :func:`render_build`).
    """
    from aifabric.outputs import BUILD, atomic_folder, umask

    ctx = ctx or BuildContext.of(fabric)
    count = 0
    script_mode = 0o777 & ~umask()
    with atomic_folder(out, option="--out", **BUILD) as tmp:
        made: set[str] = set()
        for rel, text in render_build(ctx, progress, extra=extra):
            d = os.path.dirname(rel)
            if d and d not in made:
                os.makedirs(tmp / d, exist_ok=True)
                made.add(d)
            path = tmp / rel
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            if rel.endswith(".sh"):
                os.chmod(path, script_mode)
            count += 1
    return count
