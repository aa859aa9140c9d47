#!/usr/bin/env python3
"""aifabric pre-flight collector of one switch (preflight.yml runs it; stdlib only).

Prints one JSON document (schema aifabric-facts, version 1; the playbook adds the plan
it was collected for): OS version (SONiC's build, else the OS), kernel, FRR version,
BGP sessions (established count and every peer's state), and per port the live MTU
(kernel) and, from the running CONFIG_DB (``sonic-cfggen -d``; off SONiC the
``config_db.json`` installed by deploy-switches.yml) its configured speed, DSCP trust,
PFC priorities, ECN (WRED) thresholds and PFC watchdog, plus its LLDP neighbour.
A fact that cannot be read is left out; the reason goes to "notes" and, keyed by the
fact (``bgp_established``, ``interfaces.Ethernet0.mtu``), to "unread" -- ``aifabric check
--facts`` reports such a fact as a deviation of this switch with that reason (a dead
bgpd is a failed pre-flight, not a switch with no BGP facts).
Argument: a JSON object {device, ports, config_db, frr_socket, sysfs}.
"""

import json
import os
import platform
import re
import shutil
import subprocess
import sys


def read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError:
        return None


def run(cmd):
    return run_why(cmd)[0]


def run_why(cmd):
    """(stdout, None) when ``cmd`` succeeds, else (None, why): its own message (vtysh's
    ``bgpd is not running``), the exit status, or that it is missing or timed out."""
    if shutil.which(cmd[0]) is None:
        return None, f"{cmd[0]} not found"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=False)
    except subprocess.TimeoutExpired:
        return None, f"{cmd[0]} did not answer in 15 s"
    except OSError as err:
        return None, f"{cmd[0]}: {err.strerror or err}"
    if p.returncode == 0:
        return p.stdout, None
    said = " ".join((p.stdout + " " + p.stderr).split())[:200]
    return None, said or f"{cmd[0]} exit status {p.returncode}"


def os_version():
    sonic = read("/etc/sonic/sonic_version.yml")
    if sonic:
        m = re.search(r"^build_version:\s*'?([^'\n]+)'?", sonic, re.M)
        if m:
            return "SONiC." + m.group(1)
    text = read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.system()


def config_db(path, notes):
    out = run(["sonic-cfggen", "-d", "--print-data"])
    if out:
        try:
            return json.loads(out)
        except ValueError:
            pass
    text = read(path)
    if text is None:
        notes.append(f"no running CONFIG_DB and no {path}: no port QoS facts")
        return {}
    try:
        return json.loads(text)
    except ValueError:
        notes.append(f"{path} is not JSON: no port QoS facts")
        return {}


def main():
    args = json.loads(sys.argv[1])
    sysfs = args.get("sysfs") or "/sys"
    notes = []
    unread = {}
    vty = ["vtysh"] + (["--vty_socket", args["frr_socket"]] if args.get("frr_socket") else [])
    facts = {"os_version": os_version(), "kernel": platform.release(), "interfaces": {}}
    ver, why = run_why([*vty, "-c", "show version"])
    m = re.search(r"FRRouting (\S+)|FRR (\S+)", ver or "")
    if m:
        facts["frr_version"] = m.group(1) or m.group(2)
    else:
        why = why or "no FRR version in its answer"
        notes.append(f"FRR: vtysh `show version` failed: {why}")
        unread["frr_version"] = why
    peers = {}
    summary, why = run_why([*vty, "-c", "show bgp ipv4 unicast summary json"])
    if summary is not None:
        try:
            doc = json.loads(summary or "{}")
            if not isinstance(doc, dict):
                raise ValueError("not a JSON object")
            peers = {ip: str(p.get("state", "?")) for ip, p in doc.get("peers", {}).items()}
            facts["bgp_established"] = sum(1 for s in peers.values() if s == "Established")
        except (ValueError, AttributeError) as err:
            why = f"unreadable answer ({err})"
    if "bgp_established" not in facts:
        notes.append(f"BGP: vtysh `show bgp ipv4 unicast summary json` failed: {why}")
        unread["bgp_established"] = why
    db = config_db(args["config_db"], notes)
    port_t, qos_t = db.get("PORT", {}), db.get("PORT_QOS_MAP", {})
    wred_t, queue_t, wd_t = db.get("WRED_PROFILE", {}), db.get("QUEUE", {}), db.get("PFC_WD", {})
    wred_of = {}
    for key, q in queue_t.items():
        if "|" in key and q.get("wred_profile"):
            wred_of.setdefault(key.split("|")[0], q["wred_profile"])
    for port in args["ports"]:
        i = {}
        mtu = read(os.path.join(sysfs, "class/net", port, "mtu"))
        if mtu is None and port in port_t:
            mtu = port_t[port].get("mtu")
        if mtu is not None:
            i["mtu"] = int(mtu)
        else:
            why = f"no {port} in the kernel and no PORT|{port} mtu in CONFIG_DB"
            notes.append(f"{port}: {why}")
            unread[f"interfaces.{port}.mtu"] = why
        if port in port_t and port_t[port].get("speed"):
            i["speed_gbps"] = int(port_t[port]["speed"]) / 1000
        if db:
            q = qos_t.get(port, {})
            i["dscp_trust"] = bool(q.get("dscp_to_tc_map"))
            i["pfc_priorities"] = sorted(int(p) for p in q.get("pfc_enable", "").split(",")
                                         if p.strip())
            prof = wred_t.get(wred_of.get(port, ""), {})
            i["ecn_enabled"] = bool(prof) and prof.get("ecn", "") not in ("", "ecn_none")
            if prof:
                i["ecn_min_threshold_bytes"] = int(prof["green_min_threshold"])
                i["ecn_max_threshold_bytes"] = int(prof["green_max_threshold"])
                i["ecn_max_mark_percent"] = int(prof["green_drop_probability"])
            i["pfc_watchdog"] = port in wd_t
        facts["interfaces"][port] = i
    json.dump({"schema": "aifabric-facts", "version": 1, "device": args["device"],
               "kind": "switch", "facts": facts, "notes": notes, "unread": unread,
               "bgp_peers": peers},
              sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
