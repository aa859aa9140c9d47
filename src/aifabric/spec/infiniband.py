"""InfiniBand as the fabric's transport: the ``infiniband`` block of a spec.

``transport: infiniband`` turns a fabric of any family into one InfiniBand subnet per
connected set of switches, routed by a subnet manager (OpenSM) instead of BGP/ECMP. The
block says how: the link generation (``speed``), the routing engine and LMC, the virtual
lanes (how many data VLs, the SL-to-VL table, the buffer credits of each VL).

Every field is documented in ``docs/infiniband.md``. Checks that need only the spec are
here (``sl2vl`` naming a VL the ports do not have, ``vl_credits`` of the wrong length, a
NIC speed that is not the named generation's); checks that need the built fabric (an
engine that cannot route the topology) are in
:mod:`aifabric.routing.infiniband`.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from aifabric.spec.base import StrictModel

__all__ = ["DEFAULT_PKEY", "IB_SPEEDS", "MAX_DATA_VLS", "NUM_SLS", "VLARB_ENTRIES",
           "IbEngine", "IbSpeed", "InfiniBand", "Partition", "VlArbEntry", "VlArbitration"]

#: data rate of one 4x port of each generation, Gbit/s (IBTA: HDR 50G, NDR 100G, XDR
#: 200G per lane, 4 lanes)
IB_SPEEDS: dict[str, int] = {"hdr": 200, "ndr": 400, "xdr": 800}
#: VL0..VL14 carry data; VL15 is the subnet management lane (IBTA vol. 1, 7.6)
MAX_DATA_VLS = 15
#: service levels a packet can carry (4 bits)
NUM_SLS = 16
#: one flow-control credit is 64 bytes of receive buffer (IBTA vol. 1, 7.9.4)
CREDIT_BYTES = 64
#: entries of each VLArbitration table (IBTA vol. 1, 7.6.9: VLArbHighCap and VLArbLowCap
#: are at most 64; the table's blocks hold 32 entries each, two per priority)
VLARB_ENTRIES = 64

IbSpeed = Literal["hdr", "ndr", "xdr"]
IbEngine = Literal["ftree", "updn", "minhop"]

_VL = Annotated[int, Field(ge=0, le=MAX_DATA_VLS - 1)]
#: the default partition's P_Key (IBTA vol. 1, 10.9.1.2); a tenant takes another
DEFAULT_PKEY = 0x7FFF


def _pkey(v: object) -> object:
    """A P_Key as a number or a string (``0x0101``, ``257``)."""
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return v
    return v


class Partition(StrictModel):
    """One tenant or job group: a P_Key and the hosts whose HCA ports are its full
    members (written to OpenSM's partitions.conf; NCCL uses its P_Key index)."""

    name: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$",
                      description="partition name in partitions.conf")
    pkey: Annotated[int, BeforeValidator(_pkey)] = Field(
        ge=0, le=0xFFFF, description="the P_Key, 0x0001..0x7ffe (15 bits; 0x7fff is the "
        "default partition's)")
    hosts: list[str] = Field(default_factory=list, description="host names (every HCA "
                             "port of each host is a full member)")
    gpus: list[str] = Field(default_factory=list, description="GPU names (the ports of "
                            "each GPU's own NIC are full members): a job group that "
                            "shares hosts with another")
    shared: bool = Field(default=False, description="its ports may also be full members "
                         "of other partitions (a tenant-wide or storage partition over "
                         "job groups); two partitions that are not shared never share a "
                         "port")
    ipoib: bool = Field(default=True, description="IPoIB on this partition")


class VlArbEntry(StrictModel):
    """One entry of a VLArbitration table (IBTA vol. 1, 7.6.9): a VL and the bytes it may
    send per turn, in 64-byte units (0: the entry is skipped)."""

    vl: int = Field(ge=0, le=MAX_DATA_VLS - 1, description="a data VL (below data_vls)")
    weight: int = Field(ge=0, le=255, description="64-byte units the VL may send per "
                        "turn (the packet that crosses the weight completes); 0: skipped")


class VlArbitration(StrictModel):
    """IBTA's VL arbitration (vol. 1, 7.6.9): the high-priority table is served first,
    up to ``high_limit`` x 4,096 bytes between chances of the low-priority table; each
    table's entries take turns, each sending up to its weight. OpenSM's
    ``qos_vlarb_high``, ``qos_vlarb_low``, ``qos_high_limit``."""

    high: list[VlArbEntry] = Field(default_factory=list, max_length=VLARB_ENTRIES,
                                   description="the high-priority table (default: empty, "
                                   "every VL low priority)")
    low: list[VlArbEntry] | None = Field(default=None, max_length=VLARB_ENTRIES,
                                         description="the low-priority table (default: "
                                         "one entry per data VL with its vl_weights "
                                         "weight, 64 each without)")
    high_limit: int = Field(default=0, ge=0, le=255, description="LimitOfHighPriority: "
                            "bytes of high-priority packets, in 4,096-byte units, sent "
                            "before the low-priority table gets a chance (the packet that "
                            "crosses it completes; 0: one packet; 255: unbounded)")


class InfiniBand(StrictModel):
    """How an InfiniBand fabric is run: speed, routing engine and LMC, virtual lanes."""

    speed: IbSpeed = Field(default="ndr", description="link generation: hdr (200 Gbit/s "
                           "per 4x port), ndr (400), xdr (800); hosts.port_gbps must match")
    routing_engine: IbEngine = Field(default="minhop", description="OpenSM's unicast "
                                     "routing engine (OpenSM's default is minhop)")
    adaptive_routing: bool = Field(default=False, description="adaptive routing as "
                                   "NVIDIA Quantum switches do it (AR group = the ports "
                                   "with least hops to the destination; flow level: a "
                                   "flow split evenly over its least-hop paths)")
    lmc: int = Field(default=0, ge=0, le=7, description="LID mask control: 2^lmc LIDs "
                     "(paths) per port")
    data_vls: int = Field(default=8, ge=1, le=MAX_DATA_VLS,
                          description="data virtual lanes per port (VL0..VL14)")
    sl2vl: list[_VL] | None = Field(default=None, min_length=NUM_SLS, max_length=NUM_SLS,
                                    description="VL of each of the 16 SLs (default: SL "
                                    "mod data_vls)")
    vl_credits: list[Annotated[int, Field(ge=1, le=1 << 20)]] | None = Field(
        default=None, description="receive buffer of each data VL, in 64-byte credits "
        "(default: the port's buffer split evenly)")
    vl_weights: list[Annotated[int, Field(ge=0, le=255)]] | None = Field(
        default=None, description="VL arbitration (low-priority table): the weight of "
        "each data VL, in 64-byte units per turn (default: 64 each)")
    nccl_sl: int = Field(default=0, ge=0, le=15, description="the service level NCCL's "
                         "queue pairs use (NCCL_IB_SL); its VL is sl2vl[nccl_sl]")
    port_buffer_kb: int = Field(default=256, ge=1, le=1 << 20, description="receive "
                                "buffer of one switch port for its data VLs, KiB")
    partitions: list[Partition] = Field(default_factory=list, description="tenant or "
                                        "job-group partitions (default: the default "
                                        "partition only)")
    pkey_table_size: int = Field(default=128, ge=2, le=32768, description="P_Key table "
                                 "entries of an HCA port (ConnectX HCAs: 128, "
                                 "ibv_devinfo's max_pkeys): the default P_Key and every "
                                 "partition of the port must fit")
    vl_arbitration: VlArbitration | None = Field(
        default=None, description="IBTA's VL arbitration with both tables: high (served "
        "first, up to high_limit) and low (default: vl_weights' table)")

    @property
    def port_gbps(self) -> int:
        return IB_SPEEDS[self.speed]

    def sl_to_vl(self) -> list[int]:
        """The VL of each SL: ``sl2vl`` as given, else SL mod ``data_vls``."""
        if self.sl2vl is not None:
            return list(self.sl2vl)
        return [sl % self.data_vls for sl in range(NUM_SLS)]

    def credits(self) -> list[int]:
        """Buffer credits (64 bytes each) of every data VL."""
        if self.vl_credits is not None:
            return list(self.vl_credits)
        per = self.port_buffer_kb * 1024 // CREDIT_BYTES // self.data_vls
        return [per] * self.data_vls

    def problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """What is inconsistent inside the block: ``(location, message)`` pairs."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        if self.sl2vl is not None:
            for sl, vl in enumerate(self.sl2vl):
                if vl >= self.data_vls:
                    out.append((("sl2vl", sl), f"SL {sl} maps to VL {vl}, which the ports "
                                f"do not have; allowed: VL 0..{self.data_vls - 1} "
                                f"(data_vls: {self.data_vls})"))
        if self.vl_credits is not None and len(self.vl_credits) != self.data_vls:
            out.append((("vl_credits",), f"{len(self.vl_credits)} entries; allowed: one "
                        f"per data VL ({self.data_vls})"))
        seen: dict[int, int] = {}
        names: dict[str, int] = {}
        for i, part in enumerate(self.partitions):
            if not 0x0001 <= part.pkey <= 0x7FFF:
                out.append((("partitions", i, "pkey"), f"0x{part.pkey:x}: a P_Key is 15 "
                            "bits; allowed: 0x0001..0x7ffe"))
            elif part.pkey == DEFAULT_PKEY:
                out.append((("partitions", i, "pkey"), "0x7fff is the default "
                            "partition's; allowed: 0x0001..0x7ffe"))
            elif part.pkey in seen:
                out.append((("partitions", i, "pkey"), f"0x{part.pkey:04x} is also "
                            f"partitions.{seen[part.pkey]}'s; allowed: one P_Key per "
                            "partition"))
            seen.setdefault(part.pkey, i)
            if part.name in names or part.name == "Default":
                out.append((("partitions", i, "name"), f"{part.name!r} is taken; allowed: "
                            "a name of its own (not Default)"))
            names.setdefault(part.name, i)
            if not part.hosts and not part.gpus:
                out.append((("partitions", i, "hosts"), "empty: a partition needs hosts "
                            "or gpus; allowed: host names, GPU names"))
        if self.vl_weights is not None and len(self.vl_weights) != self.data_vls:
            out.append((("vl_weights",), f"{len(self.vl_weights)} entries; allowed: one "
                        f"per data VL ({self.data_vls})"))
        arb = self.vl_arbitration
        if arb is not None:
            if arb.low is not None and self.vl_weights is not None:
                out.append((("vl_arbitration", "low"), "given with vl_weights (which is "
                            "the low-priority table too); allowed: one of them"))
            for table in ("high", "low"):
                for i, e in enumerate(getattr(arb, table) or []):
                    if e.vl >= self.data_vls:
                        out.append((("vl_arbitration", table, i, "vl"), f"VL {e.vl} is not "
                                    "a data VL of the ports; allowed: VL 0.."
                                    f"{self.data_vls - 1} (data_vls: {self.data_vls})"))
        return out

    def vlarb_tables(self) -> tuple[list[tuple[int, int]], list[tuple[int, int]], int]:
        """The VL arbitration as IBTA's tables: ``(high, low, high_limit)``, each table
        a list of ``(VL, weight)``; without ``vl_arbitration.low`` the low table is one
        entry per data VL with its :meth:`weights`."""
        arb = self.vl_arbitration
        low = [(vl, w) for vl, w in enumerate(self.weights())]
        if arb is None:
            return [], low, 0
        if arb.low is not None:
            low = [(e.vl, e.weight) for e in arb.low]
        return [(e.vl, e.weight) for e in arb.high], low, arb.high_limit

    def weights(self) -> list[int]:
        """VL arbitration weight of every data VL."""
        return list(self.vl_weights) if self.vl_weights is not None else \
            [64] * self.data_vls
