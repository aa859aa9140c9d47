#!/usr/bin/env python3
"""aifabric pre-flight collector of one host (preflight.yml runs it; stdlib only).

Prints one JSON document (schema aifabric-facts, version 1; the playbook adds the plan
it was collected for): OS and kernel, GPU count, and per backend port its MTU and --
where a physical NIC is behind it -- driver, driver and firmware versions, NIC model,
link speed, RoCE/QoS state (trust, PFC priorities, DSCP map from dcb(8); ECN enables
and DCQCN parameters from sysfs; the RoCE ToS from configfs) and its LLDP neighbour.
A fact that cannot be read here is left out (it is not compared) and the reason goes
to "notes": a virtual interface (a lab namespace's veth) has no NIC, driver or speed.
A fact that applies here but fails to read (nvidia-smi present and failing) is also
listed in "unread" with the reason: ``aifabric check --facts`` reports it as a
deviation of this host.
Argument: a JSON object {device, ports, netdevs, sysfs}.
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
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def integer(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def os_release():
    text = read("/etc/os-release") or ""
    m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
    return m.group(1) if m else platform.system()


def gpu_count(sysfs):
    out = run(["nvidia-smi", "-L"])
    if out is not None:
        return sum(1 for line in out.splitlines() if line.startswith("GPU "))
    drv = os.path.join(sysfs, "bus/pci/drivers/nvidia")
    if os.path.isdir(drv):
        return sum(1 for d in os.listdir(drv) if re.match(r"[0-9a-f]{4}:", d))
    return None


def dcb_facts(port):
    """trust, PFC priorities and DSCP map of ``port`` from dcb(8), where it answers."""
    out = {}
    pfc = run(["dcb", "pfc", "show", "dev", port, "prio-pfc"])
    if pfc is not None:
        out["pfc_priorities"] = sorted(int(p) for p, s in re.findall(r"(\d+):(on|off)", pfc)
                                       if s == "on")
    app = run(["dcb", "app", "show", "dev", port, "dscp-prio"])
    if app is not None:
        out["dscp_to_priority"] = {int(d): int(p) for d, p in re.findall(r"(\d+):(\d+)", app)}
    trust = run(["dcb", "apptrust", "show", "dev", port, "order"])
    if trust is not None:
        words = trust.replace("order", "").split()
        out["trust"] = words[0] if words else "none"
    return out


def ecn_facts(net, prio):
    out = {}
    params = {}
    for side, key in (("roce_rp", "ecn_rp_enabled"), ("roce_np", "ecn_np_enabled")):
        base = os.path.join(net, "ecn", side)
        if not os.path.isdir(base):
            continue
        enable = read(os.path.join(base, "enable", str(prio)))
        if enable is not None:
            out[key] = enable == "1"
        for name in sorted(os.listdir(base)):
            value = integer(read(os.path.join(base, name)))
            if value is not None:
                params[name] = value
    if params:
        out["dcqcn"] = params
    return out


def lldp_neighbours():
    out = run(["lldpctl", "-f", "json"])
    if not out:
        return {}
    try:
        ifaces = json.loads(out).get("lldp", {}).get("interface", [])
    except ValueError:
        return {}
    if isinstance(ifaces, dict):
        ifaces = [{k: v} for k, v in ifaces.items()]
    got = {}
    for entry in ifaces:
        for name, data in entry.items():
            chassis = data.get("chassis", {})
            dev = next(iter(chassis), None) if isinstance(chassis, dict) else None
            port = data.get("port", {}).get("id", {}).get("value")
            if dev and port:
                got[name] = {"device": dev, "port": port}
    return got


def main():
    args = json.loads(sys.argv[1])
    sysfs = args.get("sysfs") or "/sys"
    prio = int(args.get("roce_prio", 3))
    facts = {"os": os_release(), "kernel": platform.release(), "interfaces": {}}
    notes = []
    unread = {}
    gpus = gpu_count(sysfs)
    if gpus is None and shutil.which("nvidia-smi"):
        why = "nvidia-smi -L failed (GPU driver not answering)"
        notes.append(f"GPUs: {why}")
        unread["gpu_count"] = why
    elif gpus is None:
        notes.append("GPUs: no NVIDIA driver (nvidia-smi or sysfs), not counted")
    else:
        facts["gpu_count"] = gpus
    lldp = lldp_neighbours()
    for port in args["ports"]:
        net = os.path.join(sysfs, "class/net", port)
        if not os.path.isdir(net):
            notes.append(f"{port}: no such interface")
            continue
        i = {}
        mtu = integer(read(os.path.join(net, "mtu")))
        if mtu is not None:
            i["mtu"] = mtu
        if os.path.exists(os.path.join(net, "device")):
            driver = os.path.basename(os.path.realpath(os.path.join(net, "device/driver")))
            facts.setdefault("driver", driver)
            version = read(os.path.join(sysfs, "module", driver, "version"))
            if version:
                facts.setdefault("driver_version", version)
            ib = os.path.join(net, "device/infiniband")
            rdma = sorted(os.listdir(ib)) if os.path.isdir(ib) else []
            if rdma:
                dev = os.path.join(sysfs, "class/infiniband", rdma[0])
                fw = read(os.path.join(dev, "fw_ver"))
                if fw:
                    facts.setdefault("firmware_version", fw)
                model = read(os.path.join(dev, "hca_type"))
                if model:
                    facts.setdefault("nic_model", model)
                tos = integer(read(os.path.join(sysfs, "kernel/config/rdma_cm", rdma[0],
                                                "ports/1/default_roce_tos")))
                if tos is not None:
                    i["roce_tos"] = tos
            speed = integer(read(os.path.join(net, "speed")))
            if speed and speed > 0:
                i["speed_gbps"] = speed / 1000
            i.update(ecn_facts(net, prio))
            if sysfs == "/sys":  # dcb(8) speaks netlink to the real device
                i.update(dcb_facts(port))
        else:
            notes.append(f"{port}: virtual interface, no NIC behind it (no driver, "
                         "firmware, speed or RoCE/QoS facts)")
        if port in lldp:
            i["lldp"] = lldp[port]
        facts["interfaces"][port] = i
    json.dump({"schema": "aifabric-facts", "version": 1, "device": args["device"],
               "kind": "host", "facts": facts, "notes": notes, "unread": unread},
              sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
