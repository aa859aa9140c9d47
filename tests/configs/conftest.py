"""Small fabrics of every family (specs inline) and their builds, made once per session."""

from __future__ import annotations

import json
from functools import cache

from aifabric import build_fabric
from aifabric.configs import BuildContext, build_files
from aifabric.spec import spec_from_dict
from aifabric.telemetry.monitoring import render_monitoring
from tests._require import need_tool as _need_tool

#: one small spec per family; lossy QoS on one of them, per-pair ToR ASNs on HPN
SMALL: dict[str, dict] = {
    "hpn": {"name": "small-hpn",
            "hosts": {"count": 16, "nics_per_host": 4, "ports_per_nic": 2, "port_gbps": 200,
                      "backup_per_segment": 2},
            "topology": {"family": "hpn", "hosts_per_segment": 8, "tor": {"up_ports": 8},
                         "agg": {"down_ports": 32, "up_ports": 4}}},
    "clos": {"name": "small-clos", "hosts": {"count": 8, "nics_per_host": 2,
                                             "gpus_per_host": 2},
             "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                          "spine": {"model": "tomahawk3"}}},
    "rail": {"name": "small-rail", "hosts": {"count": 16, "nics_per_host": 4,
                                             "gpus_per_host": 4},
             "topology": {"family": "rail", "leaf": {"model": "tomahawk3", "down_ports": 8},
                          "spine": {"model": "tomahawk3"}},
             "deploy": {"qos": {"mode": "lossy"}}},
    "fat_tree": {"name": "small-fat-tree", "hosts": {"count": 20, "nics_per_host": 2,
                                                     "gpus_per_host": 2},
                 "topology": {"family": "fat_tree", "k": 8, "pods": 3,
                              "switch": {"model": "tomahawk3"}}},
    "multiplane": {"name": "small-multiplane", "hosts": {"count": 8, "nics_per_host": 2,
                                                         "gpus_per_host": 2},
                   "topology": {"family": "multiplane",
                                "leaf": {"model": "tomahawk3", "down_ports": 4},
                                "spine": {"model": "tomahawk3"}}},
    "single_tor": {"name": "small-single-tor", "hosts": {"count": 12, "nics_per_host": 2,
                                                         "gpus_per_host": 2,
                                                         "port_gbps": 200},
                   "topology": {"family": "single_tor", "hosts_per_tor": 2,
                                "tors_per_pod": 3, "tor": {"model": "tomahawk3"},
                                "agg": {"model": "tomahawk3"},
                                "core": {"model": "tomahawk3"}}},
}
FAMILIES = tuple(SMALL)


@cache
def small_ctx(family: str) -> BuildContext:
    return BuildContext.of(build_fabric(spec_from_dict(SMALL[family])))


@cache
def small_files(family: str) -> dict[str, str]:
    return build_files(small_ctx(family).fabric, extra=(render_monitoring,))  # all of it


@cache
def config_dbs(family: str) -> dict[str, dict]:
    """switch name -> parsed config_db.json of the small build."""
    return {rel.split("/")[1]: json.loads(text) for rel, text in small_files(family).items()
            if rel.endswith("config_db.json")}


#: the package that installs each program these tests run
PACKAGES = {"vtysh": "Debian package frr", "yanglint": "Debian package libyang2-tools",
            "ansible-playbook": "ansible-core, the test extra",
            "ansible-lint": "ansible-lint, the test extra"}


def need_tool(name: str) -> str:
    """The path of a real tool; skip naming it when it is missing, fail instead under
    ``AIFABRIC_REQUIRE_ALL=1`` or ``CI`` (see tests/_require.py)."""
    __tracebackhide__ = True
    package = PACKAGES.get(name, "Debian package frr" if "/frr/" in name else
                           "Debian package openssh-server" if name.endswith("sshd") else "")
    return _need_tool(name, package, flag="CI")
