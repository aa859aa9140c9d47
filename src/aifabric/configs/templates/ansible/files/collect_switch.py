#!/usr/bin/env python3
"""aifabric pre-flight collector of one switch (preflight.yml runs it; stdlib only).

Prints one JSON document (schema aifabric-facts, version 1; the playbook adds the plan
it was collected for): OS version (SONiC's build, else the OS), kernel, FRR version,
BGP sessions (established count and every peer's state), and per port the live MTU
(kernel) and, from the running CONFIG_DB (``sonic-cfggen -d``; off SONiC the
``config_db.json`` installed by deploy-switches.yml) its configured speed, DSCP trust,
PFC priorities, ECN (WRED) thresholds and PFC watchdog, plus its LLDP neighbour.
A fact that cannot be read is left out (not compared); the reason goes to "notes".
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
    if shutil.which(cmd[0]) is None:
        return None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


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
    vty = ["vtysh"] + (["--vty_socket", args["frr_socket"]] if args.get("frr_socket") else [])
    facts = {"os_version": os_version(), "kernel": platform.release(), "interfaces": {}}
    ver = run([*vty, "-c", "show version"])
    m = re.search(r"FRRouting (\S+)|FRR (\S+)", ver or "")
    if m:
        facts["frr_version"] = m.group(1) or m.group(2)
    else:
        notes.append("FRR: vtysh did not answer `show version`")
    peers = {}
    summary = run([*vty, "-c", "show bgp ipv4 unicast summary json"])
    if summary:
        try:
            peers = {ip: str(p.get("state", "?"))
                     for ip, p in json.loads(summary).get("peers", {}).items()}
            facts["bgp_established"] = sum(1 for s in peers.values() if s == "Established")
        except ValueError:
            notes.append("BGP: unreadable `show bgp summary json`")
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
               "kind": "switch", "facts": facts, "notes": notes, "bgp_peers": peers},
              sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
