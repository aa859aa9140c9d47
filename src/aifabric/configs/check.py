"""Pre-flight checks: collected facts of hosts and switches against the plan.

An *inventory* is a YAML/JSON document of facts per device, as a collector gathers
them (``ethtool``, ``dcb``, ``/sys/class/net/<if>/ecn``, ``lldpctl`` on hosts;
``show`` commands on switches)::

    hosts:
      host-s00-h000:
        driver: mlx5_core
        driver_version: 24.04-0.6.6
        firmware_version: 28.39.1002
        interfaces:
          ens0f0: {mtu: 9000, speed_gbps: 200, trust: dscp, pfc_priorities: [3],
                   dscp_to_priority: {26: 3, 48: 6}, ecn_rp_enabled: true,
                   ecn_np_enabled: true, dcqcn: {rpg_ai_rate: 5, ...}, roce_tos: 104,
                   lldp: {device: tor-s00-r0-a, port: Ethernet0}}
    switches:
      tor-s00-r0-a:
        os_version: SONiC.202405
        interfaces:
          Ethernet0: {mtu: 9100, speed_gbps: 200, dscp_trust: true, pfc_priorities: [3],
                      ecn_enabled: true, ecn_min_threshold_bytes: 150000, ...,
                      lldp: {device: host-s00-h000, port: ens0f0}}

A field that is absent was not collected and is not compared. :func:`expected_inventory`
gives the planned facts in the same shape (``aifabric check --template`` writes it);
:func:`compare` lists every deviation with its device, field, expected and found value.
Driver and firmware versions the spec leaves unset (``deploy.expect``) must merely agree
across all hosts: the most common value found is the expected one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ConfigDict, Field, ValidationError

from aifabric.configs.build import BuildContext
from aifabric.errors import Problem, SpecError
from aifabric.spec.base import StrictModel
from aifabric.spec.load import load_json
from aifabric.spec.problems import problems_from_validation

__all__ = ["FACTS_VERSIONS", "REQUIRED_FACTS", "Deviation", "Inventory", "compare",
           "expected_inventory", "missing_facts", "parse_inventory", "read_facts_folder"]

#: versions of the facts-file schema (``aifabric-facts``) this code reads
FACTS_VERSIONS = (1,)


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Lldp(_Strict):
    device: str
    port: str


class HostInterface(_Strict):
    mtu: int | None = None
    speed_gbps: float | None = None
    trust: str | None = None
    pfc_priorities: list[int] | None = None
    dscp_to_priority: dict[int, int] | None = None
    ecn_rp_enabled: bool | None = None
    ecn_np_enabled: bool | None = None
    dcqcn: dict[str, int] | None = None
    roce_tos: int | None = None
    lldp: Lldp | None = None


class HostFacts(_Strict):
    driver: str | None = None
    driver_version: str | None = None
    firmware_version: str | None = None
    gpu_count: int | None = None
    # informational (collected by preflight.yml, not compared)
    os: str | None = None
    kernel: str | None = None
    nic_model: str | None = None
    interfaces: dict[str, HostInterface] = Field(default_factory=dict)


class SwitchInterface(_Strict):
    mtu: int | None = None
    speed_gbps: float | None = None
    dscp_trust: bool | None = None
    pfc_priorities: list[int] | None = None
    ecn_enabled: bool | None = None
    ecn_min_threshold_bytes: int | None = None
    ecn_max_threshold_bytes: int | None = None
    ecn_max_mark_percent: int | None = None
    pfc_watchdog: bool | None = None
    lldp: Lldp | None = None


class SwitchFacts(_Strict):
    os_version: str | None = None
    bgp_established: int | None = None
    # informational (collected by preflight.yml, not compared)
    kernel: str | None = None
    frr_version: str | None = None
    interfaces: dict[str, SwitchInterface] = Field(default_factory=dict)


class Inventory(_Strict):
    """Collected facts: ``hosts`` and ``switches`` by device name."""

    hosts: dict[str, HostFacts] = Field(default_factory=dict)
    switches: dict[str, SwitchFacts] = Field(default_factory=dict)


#: the group a deviation is reported under, by field name
GROUPS = {
    "driver": "driver and firmware", "driver_version": "driver and firmware",
    "firmware_version": "driver and firmware", "os_version": "driver and firmware",
    "mtu": "MTU", "speed_gbps": "link speed",
    "trust": "QoS (trust, DSCP, PFC)", "dscp_trust": "QoS (trust, DSCP, PFC)",
    "pfc_priorities": "QoS (trust, DSCP, PFC)", "dscp_to_priority": "QoS (trust, DSCP, PFC)",
    "roce_tos": "QoS (trust, DSCP, PFC)", "pfc_watchdog": "QoS (trust, DSCP, PFC)",
    "ecn_rp_enabled": "ECN / DCQCN", "ecn_np_enabled": "ECN / DCQCN", "dcqcn": "ECN / DCQCN",
    "ecn_enabled": "ECN / DCQCN", "ecn_min_threshold_bytes": "ECN / DCQCN",
    "ecn_max_threshold_bytes": "ECN / DCQCN", "ecn_max_mark_percent": "ECN / DCQCN",
    "lldp": "cabling (LLDP neighbours)", "device": "missing facts",
    "interface": "missing facts", "gpu_count": "GPUs", "bgp_established": "BGP sessions",
    "facts file": "facts files (not compared)",
}
_VERSIONS = {"hosts": ("driver_version", "firmware_version"), "switches": ("os_version",)}


@dataclass(frozen=True)
class Deviation:
    """One fact that differs from the plan."""

    group: str
    device: str
    field: str
    expected: str
    found: str


def parse_inventory(data: Any, file: str, ctx: BuildContext) -> Inventory:
    """Validate an inventory document; unknown fields, devices or interfaces are bad
    input (SpecError naming the file and the field path)."""
    if not isinstance(data, dict):
        raise SpecError(Problem("", "an inventory must be a mapping with hosts: and/or "
                                f"switches:, got {type(data).__name__}", file))
    try:
        inv = Inventory.model_validate(data)
    except ValidationError as err:
        raise SpecError(problems_from_validation(err, Inventory, file)) from None
    known = _known_devices(ctx)
    problems = []
    for section in ("hosts", "switches"):
        for dev, facts in getattr(inv, section).items():
            if dev not in known[section]:
                what = "host" if section == "hosts" else "switch"
                problems.append(Problem(f"{section}.{dev}", f"unknown {what}, not in the plan; "
                                        f"allowed: the {len(known[section])} {section} of the "
                                        "built fabric", file))
                continue
            for ifname in facts.interfaces:
                if ifname not in known[section][dev]:
                    problems.append(Problem(f"{section}.{dev}.interfaces.{ifname}",
                                            "unknown interface; allowed: "
                                            f"{_few(sorted(known[section][dev]))}", file))
    if problems:
        raise SpecError(problems)
    return inv


def _few(names: list[str], n: int = 4) -> str:
    return ", ".join(names[:n]) + (f", ... ({len(names)})" if len(names) > n else "")


def _known_devices(ctx: BuildContext) -> dict[str, dict[str, set[str]]]:
    """Device names of the plan by section, each with its interface names."""
    f = ctx.fabric
    e = ctx.ends
    names = f.nodes.name
    out: dict[str, dict[str, set[str]]] = {
        "hosts": {str(names[h]): set() for h in f.host_node.tolist()},
        "switches": {str(names[s]): set() for s in ctx.plan.switches.tolist()}}
    is_sw = f.is_switch[e.node].tolist()
    for dev, pn, s in zip(e.device.tolist(), ctx.switches.port_name, is_sw, strict=True):
        out["switches" if s else "hosts"][dev].add(pn)
    return out


def expected_inventory(ctx: BuildContext) -> dict[str, Any]:
    """The planned facts of every device, in inventory shape (JSON-ready)."""
    f = ctx.fabric
    dep = f.spec.deploy
    q = dep.qos
    lossless = q.mode == "lossless"
    pfc = [q.roce_tc] if lossless else []
    e = ctx.ends
    sw = ctx.switches
    own_dev = e.device.tolist()
    gpus = f.spec.hosts.gpus_per_host
    hosts: dict[str, Any] = {str(f.nodes.name[h]): {
        "driver": dep.expect.driver, "driver_version": dep.expect.driver_version,
        "firmware_version": dep.expect.firmware_version, "gpu_count": gpus, "interfaces": {}}
        for h in f.host_node.tolist()}
    # one eBGP session per switch-to-switch cable (configs.frr)
    fabric_row = f.is_switch[e.node] & f.is_switch[e.peer]
    sessions = np.bincount(e.node[fabric_row], minlength=f.n_nodes)
    switches: dict[str, Any] = {str(f.nodes.name[s]): {
        "os_version": dep.expect.switch_os_version, "bgp_established": int(sessions[s]),
        "interfaces": {}} for s in ctx.plan.switches.tolist()}
    dcqcn = {**dep.dcqcn.rp(), **dep.dcqcn.np(), "cnp_dscp": q.cnp_dscp,
             "cnp_802p_prio": q.cnp_tc}
    is_sw = f.is_switch[e.node].tolist()
    for i in range(len(e.node)):
        lldp = {"device": sw.peer_device[i], "port": sw.peer_port[i]}
        speed = sw.speed[i] / 1000
        if is_sw[i]:
            wred = q.wred_for(speed) or q.ecn  # the port speed's profile (build checked)
            switches[own_dev[i]]["interfaces"][sw.port_name[i]] = {
                "mtu": dep.mtu.switch, "speed_gbps": speed, "dscp_trust": True,
                "pfc_priorities": pfc, "ecn_enabled": True,
                "ecn_min_threshold_bytes": wred.min_threshold_bytes,
                "ecn_max_threshold_bytes": wred.max_threshold_bytes,
                "ecn_max_mark_percent": wred.max_mark_percent,
                "pfc_watchdog": lossless and q.pfc_watchdog.enabled, "lldp": lldp}
        else:
            hosts[own_dev[i]]["interfaces"][sw.port_name[i]] = {
                "mtu": dep.mtu.host, "speed_gbps": speed, "trust": "dscp",
                "pfc_priorities": pfc,
                "dscp_to_priority": {q.roce_dscp: q.roce_tc, q.cnp_dscp: q.cnp_tc},
                "ecn_rp_enabled": True, "ecn_np_enabled": True, "dcqcn": dict(dcqcn),
                "roce_tos": q.roce_tos, "lldp": lldp}
    return {"hosts": hosts, "switches": switches}


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fmt(x)}" for k, x in v.items())
    if isinstance(v, list):
        return "[" + ", ".join(_fmt(x) for x in v) + "]"
    return str(v)


def _majority(values: list[str]) -> str | None:
    if not values:
        return None
    counts = Counter(values)
    best = max(counts.values())
    return sorted(v for v, c in counts.items() if c == best)[0]


def compare(expected: dict[str, Any], inv: Inventory, *, partial: bool = False,
            progress: Callable[[int], None] | None = None) -> list[Deviation]:
    """Every deviation of ``inv`` from ``expected``; ``partial`` ignores devices and
    interfaces missing from the inventory."""
    found = inv.model_dump(exclude_none=True)
    out: list[Deviation] = []
    for section in ("hosts", "switches"):
        exp_sec, got_sec = expected[section], found.get(section, {})
        versions = {}
        for field in _VERSIONS[section]:
            want = next((d[field] for d in exp_sec.values() if d.get(field)), None)
            if want is None:
                want = _majority([d[field] for d in got_sec.values() if field in d])
            versions[field] = want
        for dev, exp in exp_sec.items():
            if progress:
                progress(1)
            got = got_sec.get(dev)
            if got is None:
                if not partial:
                    out.append(Deviation(GROUPS["device"], dev, "device", "in inventory",
                                         "missing"))
                continue
            for field, want in exp.items():
                if field == "interfaces":
                    continue
                if field in versions:
                    want = versions[field]
                if want is not None and field in got and got[field] != want:
                    out.append(Deviation(GROUPS[field], dev, field, _fmt(want),
                                         _fmt(got[field])))
            got_if = got.get("interfaces", {})
            for ifname, exp_if in exp["interfaces"].items():
                g = got_if.get(ifname)
                if g is None:
                    if not partial and got_if:
                        out.append(Deviation(GROUPS["interface"], dev, f"{ifname}",
                                             "in inventory", "missing"))
                    continue
                for field, want in exp_if.items():
                    if field not in g:
                        continue
                    have = g[field]
                    if field == "dscp_to_priority":
                        have = {k: have.get(k) for k in want}
                    elif field == "dcqcn":
                        have = {k: have[k] for k in want if k in have}
                        want = {k: want[k] for k in have}
                    elif field == "pfc_priorities":
                        have = sorted(have)
                    if have != want:
                        if field == "dcqcn":
                            for k in sorted(want):
                                if have[k] != want[k]:
                                    out.append(Deviation(GROUPS[field], dev,
                                                         f"{ifname}.dcqcn.{k}",
                                                         _fmt(want[k]), _fmt(have[k])))
                            continue
                        out.append(Deviation(GROUPS[field], dev, f"{ifname}.{field}",
                                             _fmt(want), _fmt(have)))
    return out



#: facts the build's collectors read on every device of a section (the switch's OS and
#: its BGP daemon's sessions; every port's MTU from the kernel): missing from a facts
#: file, they are a deviation of that device even when the file gives no reason
REQUIRED_FACTS = {"switches": ("os_version", "bgp_established"), "hosts": ()}
REQUIRED_PORT_FACTS = ("mtu",)


def missing_facts(expected: dict[str, Any], inv: Inventory,
                  unread: dict[str, dict[str, str]]) -> list[Deviation]:
    """A deviation per fact the plan expects that a device's facts file lacks, when the
    plan gives it a value and the fact is required (:data:`REQUIRED_FACTS`: a collector
    always reads it) or its collector listed it as unread (``"unread":
    {"bgp_established": "bgpd is not running"}``). The found value names the reason.
    Devices without a file are reported by :func:`compare` (``device: missing``)."""
    found = inv.model_dump(exclude_none=True)
    out: list[Deviation] = []
    group = GROUPS["device"]
    for section in ("hosts", "switches"):
        need = REQUIRED_FACTS[section]
        for dev, got in found.get(section, {}).items():
            exp = expected[section].get(dev)
            if exp is None:
                continue
            why = unread.get(dev, {})

            def no(key: str, want: Any, dev: str = dev, why: dict[str, str] = why) -> None:
                reason = why.get(key) or "not in the facts file, and it gives no reason"
                out.append(Deviation(group, dev, key, _fmt(want) if want is not None
                                     else "collected", f"missing: {reason}"))

            for field, want in exp.items():
                if field != "interfaces" and field not in got and (
                        (field in need and want is not None) or field in why):
                    no(field, want)
            got_if = got.get("interfaces", {})
            for ifname, exp_if in exp["interfaces"].items():
                g = got_if.get(ifname)
                if g is None:
                    continue  # a missing interface is compare's deviation
                for field, want in exp_if.items():
                    key = f"interfaces.{ifname}.{field}"
                    if field not in g and ((field in REQUIRED_PORT_FACTS and want is not None)
                                           or key in why):
                        no(key, want)
    return out


def read_facts_folder(folder: Path, ctx: BuildContext, plan: dict[str, str],
                      unread: dict[str, dict[str, str]] | None = None
                      ) -> tuple[dict[str, Any], list[Deviation]]:
    """The facts files of ``folder`` (``<device>.json``, written by the build's
    ``ansible/preflight.yml``) as one inventory document, and a deviation per file
    that cannot be used: unreadable, another schema or version, collected for another
    plan (``plan.name`` or ``plan.digest`` differ: facts of a different fabric or of an
    older version of this one), a device not in the plan or facts that do not
    validate. Such a file is left out and reported on its own line; every other device
    is still compared.

    A facts file (schema ``aifabric-facts``, version 1)::

        {"schema": "aifabric-facts", "version": 1, "device": "tor-s00",
         "kind": "switch",                       # or "host"
         "plan": {"name": "...", "digest": "..."},  # the build's ansible inventory
         "facts": {...},                         # one device of the inventory format
         "notes": ["what could not be collected, and why"],
         "unread": {"bgp_established": "bgpd is not running"}, ...}

    ``unread`` (when given) is filled with each usable file's ``unread`` map: the
    facts its collector could not read, with the reason (:func:`missing_facts`).
    """
    from aifabric.configs.ansible import FACTS_SCHEMA

    known = _known_devices(ctx)
    inv: dict[str, Any] = {"hosts": {}, "switches": {}}
    bad: list[Deviation] = []
    group = GROUPS["facts file"]
    for path in sorted(folder.glob("*.json")):
        dev = path.stem

        def no(field: str, expected: str, found: str, dev: str = dev) -> None:
            bad.append(Deviation(group, dev, field, expected, found))

        try:
            doc = load_json(path)
        except SpecError as exc:
            no("file", "a JSON facts document", f"unreadable ({exc.problems[0].message})")
            continue
        if not isinstance(doc, dict):
            no("file", "a JSON object", type(doc).__name__)
            continue
        if doc.get("schema") != FACTS_SCHEMA:
            no("schema", FACTS_SCHEMA, _fmt(doc.get("schema")))
            continue
        if doc.get("version") not in FACTS_VERSIONS:
            no("version", " or ".join(map(str, FACTS_VERSIONS)), _fmt(doc.get("version")))
            continue
        got = doc.get("plan") if isinstance(doc.get("plan"), dict) else {}
        if got.get("name") != plan["name"]:
            no("plan.name", plan["name"], _fmt(got.get("name")))
            continue
        if got.get("digest") != plan["digest"]:
            no("plan.digest", plan["digest"], f"{_fmt(got.get('digest'))} (another version "
               "of the plan: collect again with this build's inventory)")
            continue
        section = {"host": "hosts", "switch": "switches"}.get(str(doc.get("kind")))
        if section is None:
            no("kind", "host or switch", _fmt(doc.get("kind")))
            continue
        if doc.get("device") != dev or dev not in known[section]:
            no("device", f"a {doc.get('kind')} of the plan named like its file",
               _fmt(doc.get("device")))
            continue
        try:
            parse_inventory({section: {dev: doc.get("facts") or {}}}, str(path), ctx)
        except SpecError as err:
            p = err.problems[0]
            no("facts", "valid facts", f"{p.path}: {p.message}"[:200])
            continue
        inv[section][dev] = doc.get("facts") or {}
        if unread is not None and isinstance(doc.get("unread"), dict):
            unread[dev] = {str(k): " ".join(str(v).split())[:300]
                           for k, v in doc["unread"].items()}
    return inv, bad
