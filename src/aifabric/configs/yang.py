"""CONFIG_DB -> SONiC YANG JSON, and validation of switch configs with libyang.

SONiC's CONFIG_DB keeps every value as a string under ``TABLE -> "key|parts" ->
fields``; its YANG models want one module container per table, one ``<TABLE>_LIST``
element per entry (the ``|``-separated key split over the list's key leaves), map
tables as nested lists, and RFC 7951 typed values (8-32-bit integers as JSON numbers,
64-bit integers as strings, YANG booleans as ``true``/``false``), as SONiC's
``sonic-yang-models`` package lays them out; :func:`to_yang` applies these rules to every
table :mod:`aifabric.configs.sonic` writes.

:func:`validate_config_dbs` runs the real ``yanglint`` (Debian ``libyang2-tools``) on
many documents in one process and returns every failure with its message. The models
are not shipped with aifabric: the folder holding SONiC's ``sonic-*.yang`` files (from
``src/sonic-yang-models/yang-models`` of sonic-buildimage) is named by the environment
variable ``AIFABRIC_SONIC_YANG`` (see :func:`models_problem`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

__all__ = ["MODELS_ENV", "UNMODELLED", "YangFailure", "default_models_dir", "models_problem",
           "to_yang", "validate_config_dbs"]

# table -> (module, shape); shape: "container", ("map", key leaf, value leaf) or
# {number of key parts: (list name, key leaves)}
_List = dict[int, tuple[str, tuple[str, ...]]]
_TABLES: dict[str, tuple[str, Any]] = {
    "DEVICE_METADATA": ("sonic-device_metadata", "container"),
    "PORT": ("sonic-port", {1: ("PORT_LIST", ("name",))}),
    "INTERFACE": ("sonic-interface", {1: ("INTERFACE_LIST", ("name",)),
                                      2: ("INTERFACE_IPPREFIX_LIST", ("name", "ip-prefix"))}),
    "LOOPBACK_INTERFACE": ("sonic-loopback-interface", {
        1: ("LOOPBACK_INTERFACE_LIST", ("name",)),
        2: ("LOOPBACK_INTERFACE_IPPREFIX_LIST", ("name", "ip-prefix"))}),
    "DEVICE_NEIGHBOR": ("sonic-device_neighbor", {1: ("DEVICE_NEIGHBOR_LIST", ("peer_name",))}),
    "BGP_NEIGHBOR": ("sonic-bgp-neighbor", {1: ("BGP_NEIGHBOR_TEMPLATE_LIST", ("neighbor",)),
                                            2: ("BGP_NEIGHBOR_LIST", ("vrf_name", "neighbor"))}),
    "VLAN": ("sonic-vlan", {1: ("VLAN_LIST", ("name",))}),
    "VLAN_MEMBER": ("sonic-vlan", {2: ("VLAN_MEMBER_LIST", ("name", "port"))}),
    "VLAN_INTERFACE": ("sonic-vlan", {1: ("VLAN_INTERFACE_LIST", ("name",)),
                                      2: ("VLAN_INTERFACE_IPPREFIX_LIST", ("name", "ip-prefix"))}),
    "SAG": ("sonic-static-anycast-gateway", {1: ("SAG_LIST", ("name",))}),
    "PORTCHANNEL": ("sonic-portchannel", {1: ("PORTCHANNEL_LIST", ("name",))}),
    "PORTCHANNEL_MEMBER": ("sonic-portchannel", {2: ("PORTCHANNEL_MEMBER_LIST",
                                                     ("name", "port"))}),
    "DSCP_TO_TC_MAP": ("sonic-dscp-tc-map", ("map", "dscp", "tc")),
    "TC_TO_QUEUE_MAP": ("sonic-tc-queue-map", ("map", "tc", "qindex")),
    "TC_TO_PRIORITY_GROUP_MAP": ("sonic-tc-priority-group-map", ("map", "tc", "pg")),
    "MAP_PFC_PRIORITY_TO_QUEUE": ("sonic-pfc-priority-queue-map",
                                  ("map", "pfc_priority", "qindex")),
    "CABLE_LENGTH": ("sonic-cable-length", ("map", "port", "length")),
    "PORT_QOS_MAP": ("sonic-port-qos-map", {1: ("PORT_QOS_MAP_LIST", ("ifname",))}),
    "WRED_PROFILE": ("sonic-wred-profile", {1: ("WRED_PROFILE_LIST", ("name",))}),
    "SCHEDULER": ("sonic-scheduler", {1: ("SCHEDULER_LIST", ("name",))}),
    "QUEUE": ("sonic-queue", {2: ("QUEUE_LIST", ("ifname", "qindex"))}),
    "BUFFER_POOL": ("sonic-buffer-pool", {1: ("BUFFER_POOL_LIST", ("name",))}),
    "BUFFER_PROFILE": ("sonic-buffer-profile", {1: ("BUFFER_PROFILE_LIST", ("name",))}),
    "BUFFER_PG": ("sonic-buffer-pg", {2: ("BUFFER_PG_LIST", ("port", "pg_num"))}),
    "BUFFER_QUEUE": ("sonic-buffer-queue", {2: ("BUFFER_QUEUE_LIST", ("port", "qindex"))}),
    "PFC_WD": ("sonic-pfcwd", {1: ("PFC_WD_LIST", ("ifname",))}),
    "SWITCH_HASH": ("sonic-hash", "container"),
    "FLEX_COUNTER_TABLE": ("sonic-flex_counter", "container"),
    "MGMT_PORT": ("sonic-mgmt_port", {1: ("MGMT_PORT_LIST", ("name",))}),
    "MGMT_INTERFACE": ("sonic-mgmt_interface", {2: ("MGMT_INTERFACE_LIST",
                                                    ("name", "ip_prefix"))}),
    "MGMT_VRF_CONFIG": ("sonic-mgmt_vrf", "container"),
}

#: tables written to config_db.json that have no YANG model in SONiC's snapshot
#: (``SWITCH`` holds the ECMP hash seed); left out of validation on purpose
UNMODELLED = frozenset({"SWITCH"})

# leaves whose YANG type is an 8/16/32-bit integer (JSON number in RFC 7951)
_NUMBER = {
    "DEVICE_METADATA": {"bgp_asn"},
    "PORT": {"speed", "mtu", "index"},
    "VLAN": {"vlanid", "mtu"},
    "PORTCHANNEL": {"mtu", "min_links"},
    "BGP_NEIGHBOR": {"asn", "keepalive", "holdtime"},
    "SCHEDULER": {"weight", "priority"},
    "BUFFER_PROFILE": {"dynamic_th"},
    "PFC_WD": {"detection_time", "restoration_time", "POLL_INTERVAL"},
    "TC_TO_QUEUE_MAP": {"tc"},
    "TC_TO_PRIORITY_GROUP_MAP": {"tc"},
    "DSCP_TO_TC_MAP": {"tc"},
    "MGMT_PORT": {"speed", "mtu"},
}
# leaves whose YANG type is ``boolean``
_BOOL = {
    "WRED_PROFILE": {"wred_green_enable", "wred_yellow_enable", "wred_red_enable"},
    "MGMT_VRF_CONFIG": {"mgmtVrfEnabled", "in_band_mgmt_enabled"},
}


def _typed(table: str, field: str, value: Any) -> Any:
    if isinstance(value, list):
        return [_typed(table, field, v) for v in value]
    if field in _NUMBER.get(table, ()):
        return int(value)
    if field in _BOOL.get(table, ()):
        return str(value).lower() == "true"
    return value


def to_yang(config_db: dict[str, Any]) -> dict[str, Any]:
    """The YANG JSON instance of a CONFIG_DB document (one module container per table).

    Raises KeyError for a table this translator does not know (so a new table cannot
    slip past validation unnoticed); tables in :data:`UNMODELLED` are left out.
    """
    out: dict[str, Any] = {}
    for table, entries in config_db.items():
        if table in UNMODELLED:
            continue
        module, shape = _TABLES[table]
        top = out.setdefault(f"{module}:{module}", {})
        if shape == "container":
            top[table] = {k: {f: _typed(table, f, v) for f, v in fields.items()}
                          for k, fields in entries.items()}
        elif isinstance(shape, tuple):
            _, kleaf, vleaf = shape
            top[table] = {f"{table}_LIST": [
                {"name": name, table: [{kleaf: _typed(table, kleaf, k),
                                        vleaf: _typed(table, vleaf, v)}
                                       for k, v in pairs.items()]}
                for name, pairs in entries.items()]}
        else:
            lists: dict[str, list[dict[str, Any]]] = {}
            for key, fields in entries.items():
                parts = key.split("|")
                list_name, leaves = shape[len(parts)]
                item = {leaf: _typed(table, leaf, p) for leaf, p in zip(leaves, parts,
                                                                        strict=True)}
                item.update({f: _typed(table, f, v) for f, v in fields.items()})
                lists.setdefault(list_name, []).append(item)
            top[table] = lists
    return out


#: the environment variable naming the folder of SONiC's YANG models
MODELS_ENV = "AIFABRIC_SONIC_YANG"
#: a model every CONFIG_DB document needs; its presence marks a models folder
_PROBE = "sonic-port.yang"


def default_models_dir() -> Path | None:
    """The folder named by ``$AIFABRIC_SONIC_YANG``, or None when it is unset or empty."""
    env = os.environ.get(MODELS_ENV, "").strip()
    return Path(env).expanduser() if env else None


def models_problem(models: Path | None = None) -> str | None:
    """Why YANG validation cannot run, in one line (None: ``yanglint`` and the models
    are both there). Names exactly what is missing: the ``yanglint`` binary, the
    ``AIFABRIC_SONIC_YANG`` setting, or the models in the folder it names."""
    if shutil.which("yanglint") is None:
        return ("yanglint not found on PATH; install it (Debian/Ubuntu package "
                "libyang2-tools)")
    models = models or default_models_dir()
    if models is None:
        return (f"SONiC YANG models not configured: set {MODELS_ENV} to the folder holding "
                f"SONiC's sonic-*.yang models (sonic-buildimage "
                f"src/sonic-yang-models/yang-models)")
    if not (models / _PROBE).is_file():
        return (f"{MODELS_ENV}={models}: no {_PROBE} there; it must name the folder "
                f"holding SONiC's sonic-*.yang models")
    return None


class YangFailure(tuple):
    """``(label, message)`` of one document that failed validation."""

    __slots__ = ()

    def __new__(cls, label: str, message: str) -> YangFailure:
        return super().__new__(cls, (label, message))


_FAILED_FILE = re.compile(r'Failed to parse input data file "([^"]+)"')


def _run_batch(exe: str, models: Path, files: list[str], labels: dict[str, str]
               ) -> list[YangFailure]:
    """Validate ``files`` with one yanglint process per pass; after a failure, resume
    after the failed file so that every failure is found."""
    first = str(models / "sonic-device_metadata.yang")
    yang = sorted(str(p) for p in models.glob("*.yang"))
    failures: list[YangFailure] = []
    pending = files
    while pending:
        proc = subprocess.run([exe, "-p", str(models), "-t", "config", first, *yang, *pending],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            break
        text = proc.stderr + proc.stdout
        m = _FAILED_FILE.search(text)
        if m is None or m.group(1) not in labels:
            failures.append(YangFailure("yanglint", text.strip()))
            break
        bad = m.group(1)
        msg = " ".join(line.strip() for line in text.splitlines()
                       if "err" in line.lower() and "Failed to parse" not in line)
        failures.append(YangFailure(labels[bad], msg or text.strip()))
        pending = pending[pending.index(bad) + 1:]
    return failures


def validate_config_dbs(docs: Sequence[tuple[str, dict[str, Any]]],
                        models: Path | None = None, *, batch: int = 50,
                        jobs: int | None = None) -> list[YangFailure]:
    """Validate CONFIG_DB documents ``[(label, config_db), ...]`` with ``yanglint``.

    The models are loaded once per batch of ``batch`` documents; batches run in
    ``jobs`` yanglint processes at once (default: the CPUs this process may use). A
    document that fails is reported and validation resumes after it, so every failure
    is found. Returns the failures in document order (empty: all valid). Raises
    FileNotFoundError, with the one line of :func:`models_problem`, when yanglint or the
    models are missing.
    """
    problem = models_problem(models)
    if problem is not None:
        raise FileNotFoundError(problem)
    exe = shutil.which("yanglint")
    models = models or default_models_dir()
    assert exe is not None and models is not None
    # the management network's tables need their modules (a models folder from before
    # them lacks them: say so instead of yanglint's unknown-module error per document)
    needs = {_TABLES[t][0] for _, db in docs for t in db if t.startswith("MGMT_")}
    needs |= {"sonic-mgmt_port"} if needs else set()
    missing = sorted(f"{m}.yang" for m in needs if not (models / f"{m}.yang").is_file())
    if missing:
        raise FileNotFoundError(f"{MODELS_ENV}={models}: no {', '.join(missing)} there (the "
                                "management network's MGMT_* tables; sonic-buildimage "
                                "src/sonic-yang-models/yang-models)")
    jobs = jobs or len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="aifabric-yang-") as tmp:
        files: list[str] = []
        labels: dict[str, str] = {}
        for i, (label, db) in enumerate(docs):
            path = os.path.join(tmp, f"d{i}.json")
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(to_yang(db), fh)
            files.append(path)
            labels[path] = label
        batches = [files[i:i + batch] for i in range(0, len(files), batch)]
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = pool.map(lambda b: _run_batch(exe, models, b, labels), batches)
            return [f for r in results for f in r]
