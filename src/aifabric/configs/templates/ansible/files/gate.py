#!/usr/bin/env python3
"""aifabric health gate of one switch (deploy-switches.yml runs it; stdlib only).

Passes when every BGP peer of the plan is Established and the switch's ECMP groups
toward the NIC /32s are as planned: how many NICs it delivers itself ("direct", a route
with no gateway) and how many it routes over 1, 2, ... distinct next hops -- the
histogram the routing model gives (aifabric.configs.ansible.ecmp_plan). Polls once a
second until both hold or the timeout passes; prints one JSON line; exit 1 on failure.
Argument: a JSON object {peers, ecmp, nic_pool, timeout, frr_socket}.
"""

import ipaddress
import json
import subprocess
import sys
import time


def sh(cmd):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=15, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return p.stdout


def sessions(vty):
    try:
        peers = json.loads(sh([*vty, "-c", "show bgp ipv4 unicast summary json"]) or "{}")
    except ValueError:
        return {}
    return {ip: str(p.get("state", "?")) for ip, p in peers.get("peers", {}).items()}


def ecmp(pool):
    try:
        routes = json.loads(sh(["ip", "-json", "route", "show", "table", "main"]) or "[]")
    except ValueError:
        return {}
    hist = {}
    for r in routes:
        dst = r.get("dst", "")
        if "linkdown" in r.get("flags", []) or dst in ("", "default"):
            continue
        try:
            net = ipaddress.ip_network(dst if "/" in dst else dst + "/32")
        except ValueError:
            continue
        if net.prefixlen != 32 or not net.subnet_of(pool):
            continue
        hops = r.get("nexthops") or ([r] if r.get("gateway") else [])
        gws = {h.get("gateway") for h in hops
               if "linkdown" not in h.get("flags", []) and "dead" not in h.get("flags", [])}
        key = "direct" if not hops else str(len(gws))
        if key != "0":
            hist[key] = hist.get(key, 0) + 1
    return hist


def main():
    a = json.loads(sys.argv[1])
    vty = ["vtysh"] + (["--vty_socket", a["frr_socket"]] if a.get("frr_socket") else [])
    pool = ipaddress.ip_network(a["nic_pool"])
    want_ecmp = {k: int(v) for k, v in a["ecmp"].items()}
    t0 = time.monotonic()
    while True:
        got = sessions(vty)
        bad = {p: got.get(p, "missing") for p in a["peers"] if got.get(p) != "Established"}
        hist = ecmp(pool) if not bad else {}
        ok = not bad and hist == want_ecmp
        if ok or time.monotonic() - t0 > float(a["timeout"]):
            break
        time.sleep(1.0)
    report = {"ok": ok, "waited_s": round(time.monotonic() - t0, 1),
              "sessions_expected": len(a["peers"]),
              "sessions_established": len(a["peers"]) - len(bad), "sessions_bad": bad,
              "ecmp_planned": want_ecmp, "ecmp_found": hist}
    print(json.dumps(report, sort_keys=True))
    if not ok:
        what = (f"{len(bad)} of {len(a['peers'])} BGP sessions not Established: "
                + ", ".join(f"{p} {s}" for p, s in sorted(bad.items())[:4])) if bad else \
            f"ECMP groups {hist} differ from the plan {want_ecmp}"
        print(f"GATE FAILED: {what}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
