"""The cluster spec: validated input models.

A spec describes a GPU cluster in a few lines: its hosts, the switch models it is
built from, the topology family with its parameters, link latencies, cabling media
and address pools. Every field is documented in ``docs/spec.md`` with its default
and unit; units are part of the field names (``port_gbps``, ``cable_ns_per_m``).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, PositiveInt, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from aifabric.spec.base import StrictModel
from aifabric.spec.deploy import Asn, Deploy, Mtu, Qos
from aifabric.spec.infiniband import InfiniBand
from aifabric.spec.names import Name, Text
from aifabric.spec.scheduled import SCHEDULED_FAMILIES, ScheduledFabric, field_error

__all__ = [
    "BUILTIN_SCALEUP_SWITCHES",
    "BUILTIN_SWITCH_MODELS",
    "Addressing",
    "Cabling",
    "ClosTopology",
    "FatTreeTopology",
    "Frontend",
    "FrontendPools",
    "Hosts",
    "HpnTopology",
    "Latency",
    "Management",
    "MultiplaneTopology",
    "RailTopology",
    "Routing",
    "ScaleupDomain",
    "ScaleupSwitch",
    "SingleTorTopology",
    "Spec",
    "StorageNodes",
    "SwitchModel",
    "SwitchRole",
    "Topology",
]


#: physical bounds: a larger value is a typo, and would overflow the fabric's arrays
MAX_GBPS = 100_000  # Gbit/s of one port or GPU link (100 Tbit/s)
MAX_HOP_NS = 1_000_000  # ns of one switch, NVLink or PCIe hop (1 ms)
MAX_CABLE_M = 100_000.0  # metres of one cable (100 km)
MAX_ROLE_PORTS = 65_536  # logical ports of one switch (physical ports x breakout)
MAX_SWITCH_PORTS = 4_096  # physical front-panel ports of one switch
MAX_LANES = 64  # SerDes lanes of one port, and ways to break one port out
MIN_GBPS = 1.0  # Gbit/s: the slowest link modelled (slower is a unit slip: Mbit/s, GB/s)
MAX_HOSTS = 1_000_000  # GPU servers of one fabric
MAX_GPUS = 10_000_000  # GPUs of one fabric
MAX_COUNT = 1_000_000  # switches of one tier, segments, pods
MAX_SEED = (1 << 64) - 1  # seeds: unsigned 64-bit


class _Strict(StrictModel):
    """Base: unknown fields are errors (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SwitchModel(_Strict):
    """A switch ASIC/box: physical ports, their speed and how they can be broken out."""

    ports: PositiveInt = Field(le=MAX_SWITCH_PORTS, description="physical front-panel ports")
    port_gbps: PositiveInt = Field(le=MAX_GBPS, description="speed of one physical port, Gbit/s")
    breakouts: list[Annotated[int, Field(gt=0, le=MAX_LANES)]] = Field(
        default=[1, 2, 4, 8], description="allowed ways to split one physical port"
    )
    lanes_per_port: int = Field(default=4, ge=1, le=MAX_LANES,
        description="SerDes lanes per physical port (SONiC names ports by lane)"
    )
    latency_ns: int = Field(default=800, ge=0, le=MAX_HOP_NS,
                                       description="port-to-port latency, ns")
    buffer_mb: float = Field(default=114.0, ge=0.01, le=1_000_000.0,
                                     description="packet buffer, MB: the PFC headroom pool "
                                     "plus the shared pool (SONiC BUFFER_POOL, and the "
                                     "packet simulator's switch buffer)")
    sharp: bool = Field(default=False, description="InfiniBand: the switch aggregates "
                        "(SHARP, as NVIDIA Quantum and Quantum-2 do); needed by "
                        "algorithm: sharp")
    sharp_trees: int = Field(default=511, ge=1, le=65535, description="SHARP streaming "
                             "aggregation trees the switch can hold (Quantum-2: 511, "
                             "Quantum: 63; NVIDIA SHARP Rev 3.13.0, General Information)")
    sharp_active_ops: int | None = Field(default=None, ge=1, le=65535, description="SHARP "
                                         "streaming aggregation operations active at once "
                                         "on the switch (default: one per port, as "
                                         "Quantum-2; Quantum: 1)")

    @property
    def capacity_gbps(self) -> int:
        return self.ports * self.port_gbps


#: Switch models every spec can name without defining them.
BUILTIN_SWITCH_MODELS: dict[str, SwitchModel] = {
    # 51.2 Tbit/s single chip, as in Alibaba HPN (128 x 400G).
    "tomahawk5": SwitchModel(ports=128, port_gbps=400, lanes_per_port=4, latency_ns=800),
    "tomahawk5-64x800g": SwitchModel(ports=64, port_gbps=800, lanes_per_port=8, latency_ns=800),
    # 25.6 Tbit/s: 64 x 400G.
    "tomahawk4": SwitchModel(ports=64, port_gbps=400, lanes_per_port=8, latency_ns=700,
                             buffer_mb=64.0),
    # 12.8 Tbit/s: 32 x 400G / 64 x 200G.
    "tomahawk3": SwitchModel(ports=32, port_gbps=400, lanes_per_port=8, latency_ns=650,
                             buffer_mb=64.0),
}


class Hosts(_Strict):
    """The GPU servers and their backend (scale-out) NICs."""

    count: int | None = Field(default=None, ge=1, le=MAX_HOSTS, description="active hosts")
    gpus: int | None = Field(default=None, ge=1, le=MAX_GPUS,
                                     description="active GPUs (instead of count)")
    gpus_per_host: int = Field(default=8, ge=1, le=1024)
    nics_per_host: int = Field(default=8, ge=1, le=256, description="backend NICs = rails")
    ports_per_nic: int = Field(default=1, ge=1, le=MAX_LANES,
                                       description="ports per NIC (HPN: 2)")
    port_gbps: int = Field(default=400, ge=1, le=MAX_GBPS,
                                   description="speed of one NIC port, Gbit/s")
    scaleup_gbps: float = Field(
        default=3600.0, ge=MIN_GBPS, le=MAX_GBPS,
        description="NVLink bandwidth per GPU per direction, Gbit/s"
    )
    scaleup: Literal["nvswitch", "mesh"] = Field(
        default="nvswitch", description="intra-host scale-up wiring"
    )
    pcie_gbps: float = Field(
        default=512.0, ge=MIN_GBPS, le=MAX_GBPS,
        description="GPU<->NIC PCIe bandwidth per direction, Gbit/s"
    )
    backup_per_segment: int = Field(default=0, ge=0, le=MAX_ROLE_PORTS,
        description="standby hosts wired into each segment"
    )

    @property
    def nic_gbps(self) -> int:
        return self.ports_per_nic * self.port_gbps


class SwitchRole(_Strict):
    """How one tier of switches uses its ports.

    ``down_ports``/``up_ports`` are logical ports at ``down_gbps``/``up_gbps``; a down
    speed below the model's port speed uses breakout (400G port -> 2 x 200G).
    Unset values are derived by the family builder.
    """

    model: Name = Field(default="tomahawk5", description="a switch model name")
    down_ports: int | None = Field(default=None, ge=1, le=MAX_ROLE_PORTS)
    up_ports: int | None = Field(default=None, ge=0, le=MAX_ROLE_PORTS)
    down_gbps: int | None = Field(default=None, ge=1, le=MAX_GBPS)
    up_gbps: int | None = Field(default=None, ge=1, le=MAX_GBPS)
    count: int | None = Field(default=None, ge=1, le=MAX_COUNT,
        description="number of switches in the tier (derived if "
        "unset)"
    )


class ClosTopology(_Strict):
    """2-tier leaf-spine Clos, any oversubscription; optionally rail-optimized."""

    family: Literal["clos"]
    leaf: SwitchRole = SwitchRole()
    spine: SwitchRole = SwitchRole()
    oversubscription: float | None = Field(
        default=None, ge=0.01, le=100.0,
        description="leaf active down:up bandwidth (1.0 if unset and no leaf "
        "ports are given); conflicts with leaf.up_ports"
    )
    rail_optimized: bool = False


class RailTopology(_Strict):
    """Rail-optimized groups: NIC i of every host in a group goes to leaf i of the group."""

    family: Literal["rail"]
    leaf: SwitchRole = SwitchRole()
    spine: SwitchRole = SwitchRole()
    oversubscription: float | None = Field(
        default=None, ge=0.01, le=100.0, description="as for clos"
    )


class SingleTorTopology(_Strict):
    """The classic baseline: every port of a host to one ToR (DCN+-like small segments)."""

    family: Literal["single_tor"]
    tor: SwitchRole = SwitchRole()
    agg: SwitchRole = SwitchRole()
    core: SwitchRole = SwitchRole()
    oversubscription: float | None = Field(
        default=None, ge=0.01, le=100.0,
        description="ToR (and, with pods, agg) active down:up bandwidth; 1.0 "
        "if unset and no ports are given; conflicts with tor/agg.up_ports"
    )
    hosts_per_tor: int | None = Field(default=None, ge=1, le=65536,
        description="hosts per ToR (a segment); derived from the ports if unset"
    )
    tors_per_pod: int | None = Field(default=None, ge=1, le=65536,
        description="ToRs under one agg set; more ToRs than this add a core tier"
    )


class FatTreeTopology(_Strict):
    """3-tier k-ary fat-tree: pods of k/2 leaves + k/2 spines; spine i of every pod to core
    group i."""

    family: Literal["fat_tree"]
    k: int | None = Field(default=None, ge=1, le=MAX_ROLE_PORTS,
                                  description="switch radix; default model ports")
    switch: SwitchRole = SwitchRole()
    rail_optimized: bool = True
    pods: int | None = Field(default=None, ge=1, le=MAX_COUNT,
                                     description="pods built (default: as needed)")


class MultiplaneTopology(_Strict):
    """Each rail (NIC port index) is its own independent 2-tier fat-tree (a plane)."""

    family: Literal["multiplane"]
    leaf: SwitchRole = SwitchRole()
    spine: SwitchRole = SwitchRole()


class HpnTopology(_Strict):
    """Alibaba HPN: dual-ToR segments, dual-plane aggregation, pods over a core layer."""

    family: Literal["hpn"]
    planes: Literal[1, 2] = 2
    hosts_per_segment: int = Field(default=128, ge=1, le=MAX_ROLE_PORTS,
                                           description="active hosts per segment")
    segments_per_pod: int | None = Field(default=None, ge=1, le=MAX_COUNT,
        description="derived from the agg down ports if unset"
    )
    tor: SwitchRole = SwitchRole(up_ports=60)
    agg: SwitchRole = SwitchRole(down_ports=120, up_ports=8)
    core: SwitchRole | None = SwitchRole()


Topology = Annotated[
    ClosTopology
    | RailTopology
    | SingleTorTopology
    | FatTreeTopology
    | MultiplaneTopology
    | HpnTopology,
    Field(discriminator="family"),
]


class Latency(_Strict):
    """Link latencies. Cable latency = length x ns per metre; switch latency is in the model."""

    scaleup_ns: int = Field(default=500, ge=0, le=MAX_HOP_NS, description="one NVLink hop")
    pcie_ns: int = Field(default=300, ge=0, le=MAX_HOP_NS, description="GPU<->NIC over PCIe")
    cable_ns_per_m: float = Field(default=5.0, ge=3.3, le=100.0,
                                  description="propagation in fibre/copper (light in "
                                  "vacuum: 3.34 ns/m)")
    access_m: float = Field(default=3.0, ge=0.1, le=MAX_CABLE_M,
                            description="host<->ToR cable length")
    leaf_spine_m: float = Field(default=50.0, ge=0.1, le=MAX_CABLE_M,
                                description="ToR<->agg cable length")
    spine_core_m: float = Field(default=200.0, ge=0.1, le=MAX_CABLE_M,
                                description="agg<->core cable length")


Medium = Literal["dac", "aoc", "optic"]


class Cabling(_Strict):
    """Cable medium per tier: ``dac`` copper, ``aoc`` active optical, ``optic`` = two
    transceivers + fibre."""

    access: Medium = "aoc"
    leaf_spine: Medium = "optic"
    spine_core: Medium = "optic"


class Addressing(_Strict):
    """Address pools. One /32 per NIC (dual-ToR ports share it)."""

    nic_pool: ipaddress.IPv4Network = Field(default=ipaddress.IPv4Network("10.0.0.0/8"))


HashField = Literal["src_ip", "dst_ip", "protocol", "src_port", "dst_port"]


class Routing(_Strict):
    """How switches and NICs spread flows: the fabric-wide routing policy.

    Scenarios may override it; switch configurations take their ECMP hash settings
    (function, fields, seed) from here.
    """

    policy: Literal["ecmp", "spray", "adaptive", "source_port", "pinned"] = "ecmp"
    hash: Literal["crc32", "crc32c", "crc16_ccitt", "xor"] = Field(
        default="crc32", description="switch ECMP hash function")
    hash_fields: list[HashField] = Field(
        default=["src_ip", "dst_ip", "protocol", "src_port", "dst_port"],
        description="header fields fed to the hash")
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="ECMP hash seed")
    seed_mode: Literal["same", "per_switch"] = Field(
        default="same", description="same seed on every switch (polarizes) or one per switch")
    selection: Literal["mod", "table"] = Field(
        default="mod", description="member = hash mod n, or through a fixed-size member table")
    table_size: int = Field(default=256, ge=1, le=MAX_ROLE_PORTS,
                                    description="member-table entries")
    qps_per_connection: int = Field(default=1, ge=1, le=1024,
        description="NCCL QPs per connection (each QP is a flow)")
    nic_port_choice: Literal["hash", "round_robin"] = Field(
        default="hash", description="dual-port NICs: which port a QP uses")


class ScaleupSwitch(_Strict):
    """A scale-up (NVLink) switch chip: its ports, their speed and whether it reduces.

    ``port_gbps`` is one NVLink port per direction; ``reduction`` says whether the chip
    can reduce and multicast in the switch (NVLink SHARP, what NCCL's NVLS algorithms
    use); ``nvls_efficiency`` the fraction of the port rate that NVLS traffic sustains.
    """

    ports: PositiveInt = Field(le=MAX_SWITCH_PORTS, description="NVLink ports of one chip")
    port_gbps: float = Field(ge=MIN_GBPS, le=MAX_GBPS,
                             description="one NVLink port, Gbit/s per direction")
    reduction: bool = Field(default=False,
                            description="in-switch reduction and multicast (NVLS)")
    nvls_efficiency: float = Field(default=1.0, gt=0.0, le=1.0,
                                   description="fraction of the port rate NVLS traffic "
                                   "sustains (see docs/scaleup.md)")
    p2p_efficiency: float = Field(default=1.0, gt=0.0, le=1.0,
                                  description="fraction of the port rate point-to-point "
                                  "NVLink copies (rings, trees) sustain")
    latency_ns: int = Field(default=250, ge=0, le=MAX_HOP_NS,
                            description="port-to-port latency, ns")


#: Scale-up switch chips every spec can name without defining them (docs/scaleup.md gives
#: the sources): NVSwitch gen2 (A100, no reduction), gen3 (H100/H200), gen4 (B200/GB200)
BUILTIN_SCALEUP_SWITCHES: dict[str, ScaleupSwitch] = {
    "nvswitch2": ScaleupSwitch(ports=36, port_gbps=200, reduction=False,
                               p2p_efficiency=0.80),
    "nvswitch3": ScaleupSwitch(ports=64, port_gbps=200, reduction=True,
                               nvls_efficiency=0.67, p2p_efficiency=0.80),
    "nvswitch4": ScaleupSwitch(ports=72, port_gbps=400, reduction=True,
                               nvls_efficiency=round(0.67 * 0.74 / 0.85, 4),
                               p2p_efficiency=0.80),
}


NcclAlgo = Literal["Ring", "Tree", "NVLS", "NVLSTree", "PAT", "CollnetDirect", "CollnetChain"]


class ScaleupDomain(_Strict):
    """A scale-up (NVLink) domain: ``gpus`` GPUs over one or more hosts (trays) joined by
    NVLink switch chips. 8 GPUs in one host is today's HGX server; 72 over 18 trays is a
    GB200 NVL72 rack. Every topology family takes one."""

    gpus: int = Field(ge=1, le=MAX_GPUS, description="GPUs per domain (a whole number of "
                      "hosts; the domains must divide the hosts)")
    switch: Name = Field(default="nvswitch3", description="a scale-up switch chip name")
    switch_models: dict[Name, ScaleupSwitch] = Field(
        default_factory=dict, description="the spec's own scale-up switch chips")
    links_per_gpu: int = Field(default=18, ge=1, le=MAX_SWITCH_PORTS,
                               description="NVLink links of one GPU")
    link_gbps: float | None = Field(default=None, ge=MIN_GBPS, le=MAX_GBPS,
                                    description="one link per direction, Gbit/s (default: "
                                    "the switch port speed)")
    switch_chips: int | None = Field(default=None, ge=1, le=MAX_COUNT,
                                     description="switch chips per domain (default: as "
                                     "many as the GPU links need)")
    chips_per_tray: int = Field(default=2, ge=1, le=64,
                                description="switch chips per switch tray, when the "
                                "domain spans hosts")
    nvls: bool | None = Field(default=None, description="in-switch reduction (NVLS) on; "
                              "default: on when the switch reduces")
    links_per_cartridge: int = Field(default=324, ge=1, le=MAX_ROLE_PORTS,
                                     description="NVLink links of one cable cartridge of "
                                     "the rack's spine (NVL72: 1,296 links in 4)")
    scaleout_efficiency: float = Field(default=1.0, gt=0.0, le=1.0,
                                       description="fraction of the NIC rate collectives "
                                       "reach (headers, RDMA)")
    nccl_algo: list[NcclAlgo] | None = Field(
        default=None, description="NCCL_ALGO written to every host's nccl.env (the "
        "algorithms NCCL may use); unset: NCCL chooses")
    nccl_proto: list[Literal["LL", "LL128", "Simple"]] | None = Field(
        default=None, description="NCCL_PROTO written to every host's nccl.env")

    def switch_model(self) -> ScaleupSwitch | None:
        return self.switch_models.get(self.switch) or BUILTIN_SCALEUP_SWITCHES.get(self.switch)


class StorageNodes(_Strict):
    """The storage nodes on the frontend network: how many, their NICs and media rates."""

    nodes: int = Field(default=0, ge=0, le=MAX_HOSTS, description="storage nodes")
    nic_gbps: float = Field(default=400.0, ge=MIN_GBPS, le=MAX_GBPS,
                            description="frontend NIC bandwidth of one node, Gbit/s")
    write_gbytes_per_s: float = Field(default=10.0, gt=0, le=1e6,
                                      description="media write rate of one node, GB/s")
    read_gbytes_per_s: float = Field(default=20.0, gt=0, le=1e6,
                                     description="media read rate of one node, GB/s")
    stripe: int = Field(default=8, ge=1, le=MAX_ROLE_PORTS,
                        description="storage nodes one host's data is striped over")


class FrontendPools(_Strict):
    """The frontend's address pools: a separate fabric, so separate from the backend's
    (``addressing.nic_pool``, ``deploy.pools``); the defaults sit in 172.16.0.0/12 beside
    the backend's loopbacks and never overlap the backend's defaults."""

    hosts: ipaddress.IPv4Network = Field(
        default=ipaddress.IPv4Network("172.20.0.0/14"),
        description="one /32 per frontend port of a host or storage node; the last "
        "usable address is the leaves' anycast gateway")
    loopback: ipaddress.IPv4Network = Field(
        default=ipaddress.IPv4Network("172.17.0.0/16"),
        description="one /32 per frontend switch")
    p2p: ipaddress.IPv4Network = Field(
        default=ipaddress.IPv4Network("172.18.0.0/15"),
        description="one /31 per leaf-spine link")


def _frontend_asn() -> Asn:
    return Asn(first=64_512, last=65_534)


def _frontend_qos() -> Qos:
    """Lossy, as storage over TCP runs: no PFC; unmarked traffic (DSCP 0: storage,
    checkpoints, data loading) in the ECN-marked data class (TC 3, 90% of the DWRR),
    network control (CS6, DSCP 48) strictly first, other DSCPs best effort (TC 0)."""
    return Qos(mode="lossy", roce_dscp=0, roce_tc=3, cnp_dscp=48, cnp_tc=6,
               roce_weight_percent=90)


class Frontend(_Strict):
    """The frontend (storage, checkpoint, data) network: a second 2-tier leaf-spine with
    its own host NICs (HPN's ninth NIC: 2 x 200G), switches and oversubscription, and the
    storage nodes on it."""

    nics_per_host: int = Field(default=1, ge=1, le=64, description="frontend NICs per host")
    ports_per_nic: int = Field(default=2, ge=1, le=MAX_LANES, description="ports per NIC")
    port_gbps: int = Field(default=200, ge=1, le=MAX_GBPS, description="one port, Gbit/s")
    switch: Name = Field(default="tomahawk5", description="leaf and spine switch model")
    oversubscription: float = Field(default=1.0, ge=0.01, le=100.0,
                                    description="leaf down:up bandwidth")
    storage: StorageNodes = StorageNodes()
    pools: FrontendPools = Field(default_factory=FrontendPools,
                                 description="the frontend's own address pools")
    asn: Asn = Field(default_factory=_frontend_asn,
                     description="the frontend's private ASNs (default: the 2-byte "
                     "range, the backend's default takes the 4-byte one)")
    qos: Qos = Field(default_factory=_frontend_qos,
                     description="the frontend switches' QoS (default lossy: no PFC, "
                     "ECN on the storage class; docs/frontend.md)")
    mtu: Mtu = Field(default_factory=Mtu, description="frontend MTUs (jumbo)")

    @property
    def host_gbps(self) -> float:
        return float(self.nics_per_host * self.ports_per_nic * self.port_gbps)


class Management(_Strict):
    """The out-of-band management network (docs/spec.md, Management): one address per
    managed port from ``pool`` -- every switch's ``eth0``, every host's OS management NIC
    and (``bmc``) its BMC -- on 1G copper access switches of ``ports_per_switch`` ports,
    each with ``uplinks`` to an aggregation layer of that many switches (one per uplink)
    when more than one access switch is needed, and a core of ``uplinks`` switches when
    the access switches need more than one aggregation block of ``agg_ports``."""

    pool: ipaddress.IPv4Network = Field(
        default=ipaddress.IPv4Network("192.168.0.0/16"),
        description="management addresses: the first is the gateway (the site's "
        "management router), then every managed port, then the management switches")
    ports_per_switch: int = Field(default=48, ge=2, le=1024,
                                  description="access ports of one management switch")
    port_gbps: Literal[1] = Field(default=1, description="access port speed, Gbit/s "
                                  "(1000BASE-T: SONiC's MGMT_PORT speed)")
    uplinks: int = Field(default=2, ge=1, le=16, description="uplinks of one access "
                         "switch, one to each aggregation switch")
    uplink_gbps: int = Field(default=10, ge=1, le=MAX_GBPS,
                             description="uplink speed, Gbit/s")
    agg_ports: int = Field(default=64, ge=1, le=MAX_SWITCH_PORTS,
                           description="access-facing ports of one aggregation switch "
                           "(access switches per aggregation block) and ports of a core "
                           "switch (at most that many blocks)")
    bmc: bool = Field(default=True, description="every host's BMC gets a port and address")
    bmc_exporter: Annotated[str, Field(pattern=r"^[A-Za-z0-9.-]{1,253}:[0-9]{1,5}$")] = Field(
        default="127.0.0.1:9290", description="HOST:PORT of the ipmi_exporter (remote "
        "mode) Prometheus asks for every BMC (the ``bmc`` job)")
    host_interface: Annotated[str, Field(pattern=r"^[a-z][a-z0-9]{0,14}$")] = Field(
        default="eno1", description="the hosts' OS management NIC")
    vrf: bool = Field(default=True, description="SONiC management VRF (MGMT_VRF_CONFIG): "
                      "eth0's routes apart from the fabric's")
    access_m: float = Field(default=3.0, ge=0.1, le=100.0,
                            description="access patch cable length (100 m: 1000BASE-T)")
    uplink_m: float = Field(default=30.0, ge=0.1, le=MAX_CABLE_M,
                            description="uplink cable length")
    uplink_medium: Medium = Field(default="optic", description="uplink medium")


class Spec(_Strict):
    """A GPU cluster, as a network architect describes it."""

    name: Name = Field(default="fabric", description="the fabric's name (see Names)")
    description: Text = Field(default="", description="one line of free text")
    hosts: Hosts = Hosts()
    switch_models: dict[Name, SwitchModel] = Field(default_factory=dict)
    topology: Topology
    latency: Latency = Latency()
    cabling: Cabling = Cabling()
    addressing: Addressing = Addressing()
    routing: Routing = Routing()
    deploy: Deploy = Deploy()
    seed: int = Field(default=0, ge=0, le=MAX_SEED,
                      description="seed for every random choice downstream")
    transport: Literal["roce", "infiniband"] = Field(
        default="roce", description="the backend's technology: RoCEv2 over Ethernet, or "
        "InfiniBand (docs/infiniband.md)")
    infiniband: InfiniBand = Field(default_factory=InfiniBand,
                                   description="how an InfiniBand fabric is run")
    scheduled: ScheduledFabric | None = Field(
        default=None, description="a scheduled fabric (GSE/DSF): VOQs and credits at the "
        "edge, cells sprayed over the fabric (aifabric.spec.scheduled)")
    scaleup_domain: ScaleupDomain | None = Field(
        default=None, description="the scale-up (NVLink) domain; unset: one per host at "
        "hosts.scaleup_gbps")
    frontend: Frontend | None = Field(
        default=None, description="the frontend/storage network; unset: none")
    management: Management | None = Field(
        default=None, description="the out-of-band management network; unset: none "
        "(monitoring and Ansible reach devices in band)")

    @model_validator(mode="after")
    def _infiniband_consistent(self) -> Spec:
        if self.transport != "infiniband":  # the block is kept, unused (dumps carry it)
            return self
        errors = [(("infiniband", *loc), msg) for loc, msg in self.infiniband.problems()]
        ib_gbps = self.infiniband.port_gbps
        if self.hosts.port_gbps != ib_gbps:
            errors.append((("hosts", "port_gbps"), f"{self.hosts.port_gbps} Gbit/s is not "
                           f"an {self.infiniband.speed.upper()} port; allowed: {ib_gbps} "
                           f"(infiniband.speed: {self.infiniband.speed})"))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, [
                InitErrorDetails(type=PydanticCustomError("infiniband", m), loc=loc,
                                 input={}) for loc, m in errors])
        return self

    @model_validator(mode="after")
    def _scheduled_family(self) -> Spec:
        if self.scheduled is not None and self.topology.family not in SCHEDULED_FAMILIES:
            raise field_error(
                "Spec", "scheduled", f"family {self.topology.family} has no separate edge "
                "for a scheduled fabric (its dual-ToR segments put each NIC behind two ToRs "
                "sharing one address, so no one egress switch owns a destination port); "
                f"allowed: {', '.join(SCHEDULED_FAMILIES)}", self.topology.family)
        if self.scheduled is not None and self.transport != "roce":
            raise field_error(
                "Spec", "scheduled", "a scheduled fabric is an Ethernet fabric (its edge "
                "speaks RoCE to the hosts); allowed with transport: roce only",
                self.transport)
        return self

    @model_validator(mode="after")
    def _frontend_disjoint(self) -> Spec:
        """The frontend is a separate fabric: its pools overlap none of the backend's
        (nor each other) and its ASNs are not the backend's."""
        fe = self.frontend
        if fe is None:
            return self
        backend = {"addressing.nic_pool": self.addressing.nic_pool,
                   "deploy.pools.loopback": self.deploy.pools.loopback,
                   "deploy.pools.p2p": self.deploy.pools.p2p}
        front = {"hosts": fe.pools.hosts, "loopback": fe.pools.loopback, "p2p": fe.pools.p2p}
        errors: list[tuple[tuple[str, ...], str, object]] = []
        names = list(front)
        for i, k in enumerate(names):
            net = front[k]
            clash = [f"{b} {n}" for b, n in backend.items() if net.overlaps(n)]
            clash += [f"frontend.pools.{o} {front[o]}" for o in names[:i]
                      if net.overlaps(front[o])]
            if clash:
                errors.append((("frontend", "pools", k), f"{net} overlaps {clash[0]}; "
                               "allowed: a pool disjoint from the backend's and the "
                               "frontend's other pools", str(net)))
        a, b = fe.asn, self.deploy.asn
        if a.first <= b.last and b.first <= a.last:
            errors.append((("frontend", "asn"), f"{a.first}..{a.last} overlaps deploy.asn "
                           f"{b.first}..{b.last}; allowed: a range disjoint from the "
                           "backend's", f"{a.first}..{a.last}"))
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, [
                InitErrorDetails(type=PydanticCustomError("frontend", m), loc=loc, input=v)
                for loc, m, v in errors])
        return self

    def switch_model(self, name: str) -> SwitchModel | None:
        """The model called ``name``: the spec's own first, then the built-ins."""
        return self.switch_models.get(name) or BUILTIN_SWITCH_MODELS.get(name)

    def known_models(self) -> list[str]:
        return sorted(set(self.switch_models) | set(BUILTIN_SWITCH_MODELS))
