"""``ansible/`` of ``aifabric build``: push the plan's configs and collect facts with Ansible.

=============================== ===========================================================
file                            what
=============================== ===========================================================
``ansible/inventory.yml``       every device with its plan variables (``aifabric_tier``,
                                ``aifabric_loopback``, ``aifabric_asn``, ``aifabric_rails``,
                                management address = ``ansible_host``...), grouped by role
                                (``switches``, ``servers``), tier (``tor``, ``agg``,
                                ``core``), ``plane<N>``, ``rail<N>``, ``segment<N>``,
                                ``pod<N>`` so ``--limit`` rolls out one of them at a time;
                                ``aifabric_plan`` (name + digest of ``spec.yaml``) in
                                ``all``
``ansible/ansible.cfg``         forks 20, SSH pipelining, no retry files
``ansible/preflight.yml``       facts of every device -> ``<build>/facts/<device>.json``
                                (:data:`FACTS_SCHEMA`, read by ``aifabric check --facts``)
``ansible/deploy-hosts.yml``    ``nic-setup.sh --check``, apply only on deviation, read back
``ansible/deploy-switches.yml`` one play per plane: a canary switch, then batches
                                (``aifabric_canary``, ``aifabric_batch``); both files
                                installed where they differ (one exec,
                                ``files/install.py``, the replaced files kept),
                                ``config_db.json`` (SONiC: ``config reload``),
                                ``frr.conf`` by FRR's ``frr-reload.py``, then the health
                                gate; a batch with a failure is rolled back as a whole
                                (``files/rollback.py``) and the rollout stops;
                                ``<build>/rollout.json`` (``files/rollout.py``) says what
                                changed, was rolled back and was never touched
``ansible/tasks/*.yml``         the task lists the plays import
``ansible/files/*.py``          the collectors, the installer and the gate (Python 3
                                stdlib, run on the device as ``python3 -c``)
=============================== ===========================================================

With a management network (the spec's ``management:``) ``ansible_host`` (and
``aifabric_mgmt``) is the device's management address -- a switch's ``eth0``, a host's OS
management NIC; a host also has ``aifabric_bmc``. Without one it is in band: a switch's
loopback and a host's first NIC /32 (as ``monitoring/prometheus.yml`` scrapes them).

The health gate's plan per switch is its BGP peers (from ``frr.conf``) and its ECMP
groups as a histogram -- how many NIC /32s the routing model
(:class:`aifabric.routing.Fib`, the model ``aifabric lab test`` checks the kernel
against) routes over 1, 2, ... next hops and how many the switch delivers itself --
computed for every switch at once, in blocks, from the FIB arrays.

Every value from the spec is written as a JSON string (a valid YAML double-quoted
scalar), so a name cannot add a key or a line. Same fabric, same bytes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from aifabric.configs.addressing import ip_str
from aifabric.configs.nic import host_nics
from aifabric.topology import LinkKind, NodeKind

if TYPE_CHECKING:
    from aifabric.configs.build import BuildContext

__all__ = ["FACTS_SCHEMA", "FACTS_VERSION", "STATIC_FILES", "ecmp_plan", "inventory_yml",
           "plan_id", "render_ansible"]

#: the ``schema`` of a facts file (one device, JSON) and the version this code writes
FACTS_SCHEMA = "aifabric-facts"
FACTS_VERSION = 1
#: files copied verbatim from ``templates/ansible/`` (relative to ``ansible/``)
STATIC_FILES = ("ansible.cfg", "preflight.yml", "deploy-hosts.yml", "tasks/deploy-switch.yml",
                "tasks/plan.yml", "files/collect_host.py",
                "files/collect_switch.py", "files/write_facts.py", "files/gate.py",
                "files/install.py", "files/rollback.py", "files/rollout.py")
#: switch-rows of the FIB evaluated at once (bounds memory on large fabrics)
_BLOCK = 1 << 20

_Q = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]


def plan_id(spec_text: str, name: str) -> dict[str, str]:
    """The plan a build (and every facts file collected for it) belongs to: the spec's
    name and the SHA-256 of the ``spec.yaml`` the build wrote (first 16 hex digits)."""
    return {"name": name, "digest": hashlib.sha256(spec_text.encode()).hexdigest()[:16]}


def ecmp_plan(ctx: BuildContext) -> dict[int, dict[str, int]]:
    """Per switch node: ``{"direct": n, "1": n, "2": n, ...}`` -- how many NIC /32s it
    delivers itself and how many it routes over that many next hops, by the model."""
    from aifabric.routing import Fib

    f = ctx.fabric
    fib = Fib(f)
    sw = fib.sw
    C = fib.n_classes
    cls_of_nic = fib.nic_class[fib.nic_class >= 0]
    weight = np.bincount(cls_of_nic, minlength=C)  # NICs per class
    out: dict[int, dict[str, int]] = {int(s): {} for s in sw.tolist()}
    if not C or not len(sw):
        return out
    per = max(1, _BLOCK // C)
    for lo in range(0, len(sw), per):
        block = sw[lo:lo + per]
        node = np.repeat(block, C)
        cls = np.tile(np.arange(C), len(block))
        direct = fib.delivers(node, cls)
        reach = fib.reachable(node, cls)
        _, count, _ = fib.members(node, cls)
        w = np.tile(weight, len(block))
        width = np.where(direct, 0, np.where(reach, count, -1)).reshape(len(block), C)
        w = w.reshape(len(block), C)
        top = int(width.max()) + 1 if width.size else 1
        for i, s in enumerate(block.tolist()):
            hist = np.bincount(np.maximum(width[i], 0), weights=np.where(width[i] >= 0, w[i], 0),
                               minlength=top).astype(np.int64)
            row = {("direct" if k == 0 else str(k)): int(v) for k, v in enumerate(hist.tolist())
                   if v}
            out[int(s)] = row
    return out


#: longest line written (yamllint's default for ansible-lint is 160)
_WIDTH = 150


def _value(key: str, value: Any, indent: int) -> list[str]:
    """``key: value`` with the value as JSON (valid YAML); a list or mapping too long
    for one line is written in block style, one item per line."""
    pad = " " * indent
    text = json.dumps(value, sort_keys=True)
    if len(pad) + len(key) + 2 + len(text) <= _WIDTH:
        return [f"{pad}{key}: {text}"]
    if isinstance(value, str):
        return _long_string(f"{pad}{key}: ", text, pad + "  ")
    if not isinstance(value, list | dict):
        return [f"{pad}{key}: {text}"]
    if isinstance(value, list):
        return [f"{pad}{key}:"] + [f"{pad}  - {json.dumps(v)}" for v in value]
    return [f"{pad}{key}:"] + [f"{pad}  {json.dumps(str(k))}: {json.dumps(v)}"
                               for k, v in sorted(value.items())]


def _long_string(head: str, text: str, pad: str) -> list[str]:
    """A JSON string too long for one line (a lab folder's paths in the SSH options)
    as a YAML double-quoted scalar over several lines, each ending in an escaped line
    break (``\\`` + newline: no character added or lost). A line is cut only before
    a character that is neither white space (YAML drops it at a continuation line's
    start) nor inside an escape sequence."""
    out: list[str] = []
    line, room = head, _WIDTH - len(head) - 1
    i = 0
    while i < len(text):
        cut = min(len(text), i + max(room, 8))
        while cut < len(text) and not _can_cut(text, cut):
            cut -= 1
            if cut <= i:  # no place to cut in reach: take the whole rest
                cut = len(text)
        if cut < len(text):
            out.append(line + text[i:cut] + "\\")
            line, room = pad, _WIDTH - len(pad) - 1
        else:
            out.append(line + text[i:cut])
        i = cut
    return out


def _can_cut(text: str, k: int) -> bool:
    """Whether a JSON string's text can be cut before position ``k``: the next
    character is not white space and ``k`` is not inside a backslash escape."""
    if text[k] in " \t" or k == 0:
        return False
    j = k - 1
    while j >= 0 and text[j] != "\\":  # the last backslash before k
        j -= 1
    if j < 0:
        return True
    run = 0  # backslashes in a row ending at j: an odd count starts an escape at j
    while j - run >= 0 and text[j - run] == "\\":
        run += 1
    if run % 2 == 0:
        return True
    esc = 6 if j + 1 < len(text) and text[j + 1] == "u" else 2
    return k >= j + esc


def _device(name: str, v: dict[str, Any]) -> list[str]:
    """One device of a group's ``hosts:`` with its variables, one per line."""
    out = [f"        {_Q(name)}:"]
    for k, x in v.items():
        out += _value(k, x, 10)
    return out


def _idx(v: int) -> int | None:
    return int(v) if v >= 0 else None


def management_addresses(ctx: BuildContext) -> dict[str, str]:
    """Device name -> the address Ansible reaches it at: its management address when the
    plan has a management network, else a switch's loopback and a host's first NIC /32."""
    f = ctx.fabric
    names = f.nodes.name
    if ctx.mgmt is not None:
        nodes = np.concatenate([ctx.plan.switches, np.asarray(f.host_node, dtype=np.int64)])
        return dict(zip(names[nodes].astype(str).tolist(),
                        ip_str(ctx.mgmt.node_address[nodes]).tolist(), strict=True))
    out = {str(names[n]): ip for n, ip in zip(
        ctx.plan.switches.tolist(), ip_str(ctx.plan.loopback[ctx.plan.switches]).tolist(),
        strict=True)}
    for h in range(len(f.host_node)):
        nics = host_nics(ctx.hosts, h)
        out[str(names[f.host_node[h]])] = nics[0]["ip"] if nics else ""
    return out


def inventory_yml(ctx: BuildContext, plan: dict[str, str],
                  extra: dict[str, dict[str, Any]] | None = None,
                  extra_all: dict[str, Any] | None = None) -> str:
    """``inventory.yml``: every device with its variables, grouped for ``--limit``.

    ``extra`` adds variables per device and ``extra_all`` to every device (the lab's
    connection settings, :mod:`aifabric.lab.ssh`)."""
    f = ctx.fabric
    nodes = f.nodes
    sw = ctx.switches
    extra = extra or {}
    kinds = {int(k): k.label for k in NodeKind}
    groups: dict[str, list[str]] = {}
    lines_sw: list[str] = []
    ecmp = ecmp_plan(ctx)
    lo = ip_str(ctx.plan.loopback[ctx.plan.switches]).tolist()
    mgmt = management_addresses(ctx) if ctx.mgmt is not None else {}
    nic_pool = str(f.spec.addressing.nic_pool)
    for n, loopback in zip(ctx.plan.switches.tolist(), lo, strict=True):
        name = str(nodes.name[n])
        rows = range(int(ctx.ends.start[n]), int(ctx.ends.stop[n]))
        tier = kinds[int(nodes.kind[n])]
        plane, rail = _idx(nodes.plane[n]), _idx(nodes.rail[n])
        seg, pod = _idx(nodes.segment[n]), _idx(nodes.pod[n])
        at = mgmt.get(name, loopback)
        v: dict[str, Any] = {
            "ansible_host": at, "aifabric_role": "switch", "aifabric_tier": tier,
            "aifabric_loopback": loopback, "aifabric_mgmt": at,
            "aifabric_asn": int(ctx.plan.asn[n]), "aifabric_plane": plane,
            "aifabric_rails": [rail] if rail is not None else [],
            "aifabric_segment": seg, "aifabric_pod": pod,
            "aifabric_ports": [sw.port_name[r] for r in rows],
            "aifabric_bgp_peers": sorted({sw.peer_ip[r] for r in rows
                                          if sw.kind[r] != LinkKind.ACCESS}),
            "aifabric_ecmp": ecmp.get(n, {}), "aifabric_nic_pool": nic_pool,
            **extra.get(name, {})}
        lines_sw += _device(name, v)
        groups.setdefault(tier, []).append(name)
        for g, i in (("plane", plane), ("rail", rail), ("segment", seg), ("pod", pod)):
            if i is not None:
                groups.setdefault(f"{g}{i}", []).append(name)
    lines_h: list[str] = []
    for h in range(len(f.host_node)):
        hn = int(f.host_node[h])
        name = str(nodes.name[hn])
        nics = host_nics(ctx.hosts, h)
        ports = [p["ifname"] for n_ in nics for p in n_["ports"]]
        rails = sorted({int(n_["index"]) for n_ in nics})
        first = nics[0]["ip"] if nics else ""
        seg, pod = _idx(nodes.segment[hn]), _idx(nodes.pod[hn])
        at = mgmt.get(name, first)
        bmc = ({"aifabric_bmc": str(ip_str(ctx.mgmt.bmc_address[hn:hn + 1])[0])}
               if ctx.mgmt is not None and ctx.mgmt.spec.bmc else {})
        v = {"ansible_host": at, "aifabric_role": "host", "aifabric_tier": "host",
             "aifabric_mgmt": at, **bmc, "aifabric_rails": rails, "aifabric_segment": seg,
             "aifabric_pod": pod, "aifabric_ports": ports,
             "aifabric_netdevs": [n_["netdev"] for n_ in nics],
             "aifabric_backup": bool(nodes.backup[hn]), **extra.get(name, {})}
        lines_h += _device(name, v)
        for r in rails:
            groups.setdefault(f"rail{r}", []).append(name)
        for g, i in (("segment", seg), ("pod", pod)):
            if i is not None:
                groups.setdefault(f"{g}{i}", []).append(name)
    all_vars = {"aifabric_plan": plan, "aifabric_facts_version": FACTS_VERSION,
                "aifabric_build": "{{ inventory_dir | dirname }}",
                "aifabric_roce_prio": int(f.spec.deploy.qos.roce_tc),
                "aifabric_root": "/", "aifabric_sysfs": "/sys", "aifabric_nic_args": "",
                "aifabric_sonic": True, "aifabric_config_db": "/etc/sonic/config_db.json",
                "aifabric_frr_conf": "/etc/frr/frr.conf", "aifabric_frr_socket": "/var/run/frr",
                "aifabric_frr_rundir": "/var/run/frr", "aifabric_frr_bindir": "/usr/bin",
                "aifabric_frr_reload": "/usr/lib/frr/frr-reload.py",
                "aifabric_gate_timeout": 60, **(extra_all or {})}
    out = ["---", f"# Ansible inventory of the fabric {_Q(f.spec.name)}, from aifabric build.",
           "# Groups: switches, servers; tor/agg/core; planeN, railN, segmentN, podN.",
           *(["# ansible_host: the device's out-of-band management address (a switch's",
              "# eth0, a host's OS management NIC; aifabric_bmc: its BMC)."]
             if ctx.mgmt is not None else
             ["# ansible_host: a switch's loopback, a host's first NIC /32 (the plan has no",
              "# management network; override it in host_vars for an out-of-band one)."]),
           "all:", "  vars:"]
    for k, x in all_vars.items():
        out += _value(k, x, 4)
    out += ["  children:", "    switches:", "      hosts:" + ("" if lines_sw else " {}")]
    out += lines_sw
    out += ["    servers:", "      hosts:" + ("" if lines_h else " {}")]
    out += lines_h

    def key(g: str) -> tuple[int, str, int]:
        order = ("tor", "agg", "core", "plane", "rail", "segment", "pod")
        base = g.rstrip("0123456789")
        return (order.index(base), base, int(g[len(base):] or 0))

    for g in sorted(groups, key=key):
        out += [f"    {g}:", "      hosts:"]
        out += [f"        {_Q(m)}:" for m in groups[g]]
    return "\n".join(out) + "\n"


def _static(rel: str) -> str:
    return (resources.files("aifabric.configs") / "templates" / "ansible" / rel
            ).read_text(encoding="utf-8")


def deploy_switches_yml(ctx: BuildContext) -> str:
    """One play per plane (then the switches of no plane), each rolled out as a canary
    (``aifabric_canary`` switches, default 1) and then batches of ``aifabric_batch``
    (default: the rest of the plane; ``aifabric_serial`` is its older name), each batch
    gated and, when any switch of it fails, rolled back as a whole to the files it
    replaced; then the rollout stops (later batches and planes are never touched).
    ``<build>/rollout.json`` records every batch (``files/rollout.py``)."""
    f = ctx.fabric
    planes = sorted({int(p) for p in f.nodes.plane[ctx.plan.switches].tolist() if p >= 0})
    targets = [(f"plane {p}", f"switches:&plane{p}") for p in planes]
    if planes:
        rest = "switches" + "".join(f":!plane{p}" for p in planes)
        targets.append(("switches of no plane", rest))
    else:
        targets = [("all switches", "switches")]
    batch = "aifabric_batch | default(aifabric_serial | default('100%'))"
    out = ["---",
           "# Switch rollout generated by aifabric build: plane by plane, each plane a canary",
           "# (-e aifabric_canary=N, default 1; 0: none) then batches (-e aifabric_batch=N or",
           "# N%, default the rest of the plane), each batch gated on its BGP sessions and ECMP",
           "# groups and rolled back as a whole when a switch of it fails; the first failure",
           "# stops the rollout. <build>/rollout.json: what changed, was rolled back, untouched.",
           "#   ansible-playbook -i inventory.yml deploy-switches.yml [--limit plane0]",
           "- name: Start the rollout record",
           "  hosts: switches",
           "  gather_facts: false",
           "  tasks:",
           "    - name: Start rollout.json with the switches this run targets",
           "      ansible.builtin.command:",
           "        argv: [\"{{ ansible_playbook_python }}\", "
           "\"{{ playbook_dir }}/files/rollout.py\",",
           "               \"{{ aifabric_build }}/rollout.json\", start]",
           "        stdin: \"{{ {'plan': aifabric_plan, 'targets': ansible_play_hosts_all, "
           "'check': ansible_check_mode} | to_json }}\"",
           "      delegate_to: localhost",
           "      run_once: true",
           "      changed_when: false",
           "      check_mode: false"]
    for what, hosts in targets:
        out += [f"- name: Deploy switch configs, {what}",
                f"  hosts: {_Q(hosts)}",
                "  gather_facts: false",
                "  vars:",
                f"    aifabric_rest: \"{{{{ {batch} }}}}\"",
                "    aifabric_first: \"{{ aifabric_canary | default(1) | int }}\"",
                "  serial:",
                "    - \"{{ aifabric_first if aifabric_first | int > 0 else aifabric_rest }}\"",
                "    - \"{{ aifabric_rest }}\"",
                # not any_errors_fatal: it would stop the rest of a batch while one
                # switch is being rescued; the batch's own verdict fails every switch
                # of it, and max_fail_percentage 0 then ends the playbook
                "  max_fail_percentage: 0",
                "  tasks:",
                "    - name: Deploy, gate, roll back a failed batch",
                "      ansible.builtin.import_tasks: tasks/deploy-switch.yml"]
    return "\n".join(out) + "\n"


def render_ansible(ctx: BuildContext, spec_text: str,
                   extra: dict[str, dict[str, Any]] | None = None,
                   extra_all: dict[str, Any] | None = None) -> Iterator[tuple[str, str]]:
    """Every file of ``ansible/`` as ``(relative path, text)``; ``spec_text`` is the
    ``spec.yaml`` of the build (its digest names the plan)."""
    plan = plan_id(spec_text, ctx.fabric.spec.name)
    yield "ansible/inventory.yml", inventory_yml(ctx, plan, extra, extra_all)
    yield "ansible/deploy-switches.yml", deploy_switches_yml(ctx)
    for rel in STATIC_FILES:
        yield f"ansible/{rel}", _static(rel)
