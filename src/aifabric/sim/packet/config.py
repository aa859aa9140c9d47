"""Settings of the packet-level simulator: buffers, PFC, ECN, the RoCE NIC and its
congestion control — the ``packet:`` section of a scenario.

Units are in the names (``_bytes``, ``_us``, ``_mbps``). The DCQCN fields carry the names
NVIDIA (mlx5) NICs expose under ``/sys/class/net/<if>/ecn/roce_rp|roce_np`` and in
``mlxreg``/``mlxconfig``, with their defaults, so a tuned NIC profile can be pasted in.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from aifabric.errors import Problem, SpecError
from aifabric.spec.base import StrictModel
from aifabric.spec.units import size_value

#: a byte count field: a number of bytes or a size with a unit (docs/spec.md, "Units")
Size = Annotated[int, BeforeValidator(size_value)]
OptSize = Annotated[int | None, BeforeValidator(size_value)]

__all__ = ["CC_NAMES", "BufferConfig", "CcConfig", "DcqcnParams", "DctcpParams",
           "EcnConfig", "EcnProfile", "EntropyConfig", "HostPfcConfig", "HpccParams",
           "LbConfig", "NicConfig", "NsccParams", "PacketConfig", "PfcConfig", "RcccParams",
           "SharpPacketConfig", "SwitchConfig", "TimelyParams", "TrimConfig",
           "deployed_packet_settings", "effective_packet_config", "packet_config_from_dict"]

CC_NAMES = ("none", "dcqcn", "hpcc", "timely", "dctcp", "nscc", "rccc", "nscc+rccc",
            "ibcc")
#: the largest buffer, threshold or window (bytes): 64 GiB, beyond the deepest (HBM)
#: switch buffers
MAX_BUFFER = 1 << 36
#: the largest rate (Mbit/s): 1.6 Tbit/s, beyond any port
MAX_RATE_MBPS = 1_600_000.0


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BufferConfig(_Strict):
    """A switch's packet buffer: a headroom pool for PFC (every lossless port and
    priority) and a shared pool with dynamic thresholds (DT, Choudhury-Hahne) for the
    rest: a queue may grow to ``alpha`` x the free shared pool."""

    size_bytes: OptSize = Field(default=None, ge=16 << 10, le=MAX_BUFFER,
                                description="buffer of every switch, a what-if "
                                "override; default: each switch's model in the fabric "
                                "(buffer_mb, the number the SONiC build writes)")
    alpha: float = Field(default=1.0, ge=1 / 128, le=64, description="dynamic-threshold "
                         "factor (Broadcom's DT: 1/128 .. 8; up to 64 for what-ifs)")


class PfcConfig(_Strict):
    """802.1Qbb priority flow control, per ingress port and lossless priority."""

    enabled: bool = True
    priorities: list[int] = Field(default=[3], max_length=8,
                                  description="lossless traffic classes")
    xoff_bytes: Size = Field(default=256 << 10, ge=1, le=MAX_BUFFER, description="ingress "
                             "bytes of one port+priority that trigger a pause (XOFF); also "
                             "capped by buffer.alpha x free shared buffer")
    xon_bytes: Size = Field(default=240 << 10, ge=0, le=MAX_BUFFER,
                            description="resume (XON) at or below")
    headroom_bytes: OptSize = Field(default=None, ge=1, le=MAX_BUFFER, description="reserved "
                                    "per port and lossless priority for bytes in flight after "
                                    "XOFF; default: 2 x (propagation + 1 us response) x "
                                    "rate + 2 MTU, per link")
    watchdog_ms: float = Field(default=200.0, ge=0.001, le=60_000, description="PFC "
                               "watchdog detection time: a queue paused continuously this "
                               "long is a PFC storm (SONiC's default: 200 ms)")
    allow_overcommit: bool = Field(default=False, description="run a switch whose buffer "
                                   "cannot hold its PFC headroom pool plus one XOFF "
                                   "threshold (refused otherwise), and report the risk")

    @model_validator(mode="before")
    @classmethod
    def _removed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "storm_fraction" in data:
            raise ValueError("storm_fraction is no longer a setting: a PFC storm is a queue "
                             "paused continuously for watchdog_ms (SONiC's PFC watchdog); "
                             "shorter pauses are reported as pause ratios; allowed: "
                             "watchdog_ms")
        return data

    @model_validator(mode="after")
    def _check(self) -> PfcConfig:
        if self.xoff_bytes < self.xon_bytes:
            raise ValueError(f"xoff_bytes ({self.xoff_bytes}) is below xon_bytes "
                             f"({self.xon_bytes}); allowed: xon_bytes <= xoff_bytes")
        bad = [p for p in self.priorities if not 0 <= p <= 7]
        if bad:
            raise ValueError(f"priority {bad[0]} is not a traffic class; allowed: 0..7")
        return self


class EcnProfile(_Strict):
    """One WRED/ECN profile: marking probability 0 up to Kmin, rising linearly to Pmax at
    Kmax, 1 from Kmax (queue bytes of the packet's traffic class on the egress port).
    Defaults: ns-3's RDMA simulator (HPCC repository, mix/config.txt) for 25 Gbit/s
    ports: KMIN_MAP 100 KB, KMAX_MAP 400 KB, PMAX_MAP 0.2."""

    kmin_bytes: Size = Field(default=100_000, ge=0, le=MAX_BUFFER)
    kmax_bytes: Size = Field(default=400_000, ge=0, le=MAX_BUFFER)
    pmax: float = Field(default=0.2, ge=0, le=1, description="marking probability at Kmax")

    @model_validator(mode="after")
    def _check(self) -> EcnProfile:
        if self.kmin_bytes > self.kmax_bytes:
            raise ValueError(f"kmin_bytes ({self.kmin_bytes}) is above kmax_bytes "
                             f"({self.kmax_bytes}); allowed: kmin_bytes <= kmax_bytes")
        return self


#: a port speed as a ``by_speed`` key, Gbit/s
PortGbps = Annotated[int, Field(ge=1, le=int(MAX_RATE_MBPS / 1000))]


class EcnConfig(EcnProfile):
    """WRED-style ECN marking on switch egress ports: ``kmin_bytes``, ``kmax_bytes``,
    ``pmax`` for every port, or ``by_speed``: one profile per port speed, as real
    deployments set them (SONiC binds a WRED_PROFILE per port and queue; ns-3's RDMA
    simulator: KMIN_MAP/KMAX_MAP/PMAX_MAP by link rate)."""

    enabled: bool = True
    by_speed: dict[PortGbps, EcnProfile] = Field(
        default={}, description="profile per port speed (Gbit/s); when set, every speed "
        "of the run's switch ports must be listed and the single profile is not used")

    def for_speed(self, gbps: float) -> EcnProfile | None:
        """The profile of a switch port of ``gbps``; None when ``by_speed`` lacks it."""
        if not self.by_speed:
            return self
        return self.by_speed.get(int(gbps)) if float(gbps).is_integer() else None


class TrimConfig(_Strict):
    """Packet trimming (``packet.switch.trim``), the lossy mode of Ultra Ethernet (UEC 1.0;
    NDP, Handley et al., SIGCOMM'17; htsim's CompositeQueue): a switch that would queue a
    data packet beyond the threshold (or drop it) cuts its payload and forwards the header
    in the highest class (the CNP class, ``nic.cnp_dscp``); the receiver answers the
    header with a NACK, the sender retransmits that packet. Trimming applies to the lossy
    classes only (not to ``pfc.priorities`` while PFC is on)."""

    enabled: bool = Field(default=False, description="trim data packets of lossy classes")
    threshold_bytes: OptSize = Field(
        default=None, ge=1, le=MAX_BUFFER, description="trim a data packet that would "
        "find more than this many bytes in its egress queue (its class), as UEC's trim "
        "threshold; default: only a packet the buffer would drop (htsim: the queue's "
        "size); at most the switch buffer")
    header_bytes: int = Field(default=64, ge=16, le=256, description="the trimmed frame: "
                              "the headers, padded to Ethernet's minimum frame (64)")


class SwitchConfig(_Strict):
    """Switch behaviour beyond buffers, PFC and ECN thresholds."""

    ecn_mark: Literal["enqueue", "dequeue"] = Field(
        default="enqueue", description="when WRED decides a packet's ECN mark: enqueue = "
        "on egress admission, on the queue ahead of the packet (RED/WRED as defined, "
        "Floyd & Jacobson 1993: a decision per arriving packet); dequeue = "
        "when it leaves, on the queue it leaves behind (ns-3's RDMA simulator "
        "SwitchNode::SwitchNotifyDequeue, htsim's ECNQueue): earlier feedback")
    trim: TrimConfig = TrimConfig()


class HostPfcConfig(_Strict):
    """The receiving NIC's port buffer and the PFC it sends upstream when the host drains
    it slower than frames arrive (``nic.rx_gbps``). Defaults: an NVIDIA ConnectX port's
    lossless receive buffer (port buffer 262016 bytes split into two 130944-byte buffers,
    the lossless priority in one: Mellanox "HowTo Tune Receive Buffers on Mellanox
    Adapter Cards"); thresholds as the Linux mlx5 driver sets them (port_buffer.c
    update_xoff_threshold: XOFF = buffer - headroom for the cable and speed, XON = XOFF -
    one MTU)."""

    enabled: bool = Field(default=True, description="the NIC sends PFC pause on the "
                          "lossless priorities (pfc.priorities) when its receive buffer "
                          "passes xoff_bytes; false: a frame that does not fit is dropped")
    rx_buffer_bytes: Size = Field(default=130944, ge=1 << 10, le=MAX_BUFFER,
                                  description="receive buffer of one NIC (ConnectX: 130944 "
                                  "per lossless buffer)")
    xoff_bytes: OptSize = Field(default=None, ge=1, le=MAX_BUFFER, description="pause "
                                "above this many buffered bytes; default: rx_buffer_bytes "
                                "- the headroom of the NIC's link (2 x (propagation + 1 "
                                "us) x rate + 2 frames, as for switch ports)")
    xon_bytes: OptSize = Field(default=None, ge=0, le=MAX_BUFFER, description="resume at "
                               "or below; default: xoff - one frame (mlx5)")

    @model_validator(mode="after")
    def _check(self) -> HostPfcConfig:
        if self.xoff_bytes is not None and self.xoff_bytes > self.rx_buffer_bytes:
            raise ValueError(f"xoff_bytes ({self.xoff_bytes}) is above rx_buffer_bytes "
                             f"({self.rx_buffer_bytes}); allowed: xoff_bytes <= "
                             "rx_buffer_bytes")
        if self.xoff_bytes is not None and self.xon_bytes is not None and \
                self.xon_bytes > self.xoff_bytes:
            raise ValueError(f"xon_bytes ({self.xon_bytes}) is above xoff_bytes "
                             f"({self.xoff_bytes}); allowed: xon_bytes <= xoff_bytes")
        return self


#: entropy values a QP may use at most: the 16-bit UDP source port (RoCEv2) or EV (UET)
MAX_ENTROPY_VALUES = 1 << 16


class EntropyConfig(_Strict):
    """NIC-side spraying (``packet.nic.entropy``): the entropy value (EV) each data packet
    carries in the header field the switches hash (the UDP source port of RoCEv2, the EV
    of Ultra Ethernet). A QP's values are its own source port + i (mod 65,536) for i in
    0 .. values - 1 (i = 0: the port its route was hashed with); the switches' own hash
    (``routing.hash``, ``hash_fields``, ``seed``, ``seed_mode``, ``selection``) picks
    each packet's next hop from its EV, so the path follows from the hash."""

    algorithm: Literal["fixed", "oblivious", "round_robin", "reps"] = Field(
        default="fixed", description="fixed = every packet of a QP carries its one source "
        "port (a RoCE NIC; as before); oblivious = a random value per packet (UEC's "
        "oblivious spraying); round_robin = the values in turn (uet-htsim's UecMpOblivious "
        "cycle); reps = Recycled Entropy Packet Spraying (Bonato et al., 2024; uet-htsim "
        "UecMpReps): the first min(values, BDP packets) packets take the values in turn, "
        "then a packet reuses the oldest value that came back in an ACK without an ECN "
        "mark, a random one when none waits; marked and lost values are not reused")
    values: int = Field(default=256, ge=1, le=MAX_ENTROPY_VALUES, description="entropy "
                        "values per QP (uet-htsim's _path_entropy_size: 256)")
    reps_buffer: int = Field(default=8, ge=1, le=1024, description="reps: the unmarked "
                             "values kept for reuse, oldest first (REPS' circular buffer: "
                             "8 entries, htsim CircularBufferREPS::repsBufferSize); a "
                             "full buffer drops its oldest")

    @field_validator("values", mode="before")
    @classmethod
    def _values(cls, v: Any) -> Any:
        if isinstance(v, int) and not isinstance(v, bool) and \
                not 1 <= v <= MAX_ENTROPY_VALUES:
            raise ValueError(f"{v} entropy values: allowed: 1 .. {MAX_ENTROPY_VALUES:,} (the "
                             "16-bit UDP source port or UET entropy value)")
        return v


class NicConfig(_Strict):
    """The RoCE NIC: packetization, priorities, ACKs and loss recovery (go-back-N)."""

    mtu_payload_bytes: int = Field(default=4096, ge=256, le=4096, description="RDMA payload "
                                   "per packet: RoCE's path MTU is one of 256, 512, 1024, "
                                   "2048, 4096 (the InfiniBand MTUs; RoCE caps at 4096 "
                                   "even on 9000-byte Ethernet); values between are "
                                   "accepted for what-ifs (ns-3's RDMA simulator: 1000)")
    header_bytes: int = Field(default=62, ge=0, le=256, description="Ethernet 14 + FCS 4 "
                              "+ IPv4 20 + UDP 8 + BTH 12 + ICRC 4")
    wire_overhead_bytes: int = Field(default=20, ge=0, le=64, description="preamble 8 + "
                                     "inter-frame gap 12")
    ack_bytes: int = Field(default=64, ge=16, le=1500, description="ACK/NAK/CNP frame")
    dscp: int = Field(default=26, ge=0, le=63, description="DSCP of RoCE data")
    cnp_dscp: int = Field(default=48, ge=0, le=63, description="DSCP of CNPs")
    dscp_to_tc: dict[int, int] = Field(default={26: 3, 48: 6}, description="DSCP -> "
                                       "traffic class (unlisted DSCPs: TC 0)")
    ack_interval_packets: int = Field(default=1, ge=1, le=1024,
                                      description="ACK every n packets")
    rto_us: float = Field(default=1000.0, ge=1, le=10_000_000,
                          description="retransmission timeout")
    start_rate: Literal["line"] = "line"
    ack_path: Literal["hashed", "reverse"] = Field(
        default="hashed", description="the path of ACKs, NAKs and CNPs: hashed = their own "
        "5-tuple (IPs swapped, the same UDP source port: rdma_calc_flow_label is symmetric "
        "in the two QP numbers, Linux mlx5) routed by the fabric's routing like any flow, "
        "as real switches and ns-3's RDMA simulator (HPCC repository) do; reverse = the "
        "data route reversed")
    window: int | Literal["none", "bdp"] = Field(
        default="none", description="the most bytes a QP has un-acknowledged: none = "
        "rate-based only (NVIDIA NICs with DCQCN; ns-3's RDMA simulator HAS_WIN 0 for "
        "DCQCN); bdp = the QP's base RTT x its line rate (ns-3 HAS_WIN 1, GLOBAL_T 0: "
        "pairBdp); or a byte count of at least one MTU payload. The congestion control's "
        "own window (HPCC, DCTCP) applies too: the smaller wins")
    window_scales_with_rate: bool = Field(
        default=True, description="the window is window x current rate / line rate (ns-3 "
        "RDMA simulator's VAR_WIN, set wherever HAS_WIN is: rdma-queue-pair.cc GetWin)")
    rx_gbps: float | None = Field(
        default=None, ge=1, le=MAX_RATE_MBPS / 1000, description="the rate the host takes "
        "data out of the NIC's receive buffer (PCIe, memory), Gbit/s of payload; none: as "
        "fast as frames arrive (no receive buffer modelled, no cost)")
    host_pfc: HostPfcConfig = HostPfcConfig()
    receiver: Literal["go_back_n", "ooo"] = Field(
        default="go_back_n", description="what the receiving NIC does with a packet ahead "
        "of the next expected one: go_back_n = discard it and NAK once per gap (a RoCE NIC "
        "such as a plain ConnectX: the sender goes back to the NAK's sequence); ooo = "
        "accept it into an out-of-order bitmap and ACK cumulatively when the holes fill "
        "(UEC RUD; RDMA with out-of-order placement, as Spectrum-X SuperNICs do)")
    ooo_bitmap_packets: int = Field(
        default=1024, ge=1, le=1 << 16, description="receiver: ooo only: how many packets "
        "ahead of the next expected one the bitmap tracks; a packet further ahead is "
        "discarded (counted) and comes again after the retransmission timeout")
    entropy: EntropyConfig = EntropyConfig()
    fast_retransmit_packets: int = Field(
        default=0, ge=0, le=1 << 16, description="receiver: ooo only: 0 = off (as "
        "before); n > 0 = the receiver also ACKs every packet it takes ahead of a hole "
        "(echoing the cumulative point, like a SACK) and the sender retransmits the first "
        "unacknowledged packet once after n such ACKs (UEC RUD's loss recovery from "
        "selective ACKs; TCP's fast retransmit after 3 duplicate ACKs) instead of waiting "
        "for the retransmission timeout")
    ooo_acks: Literal["per_packet", "coalesced"] = Field(
        default="per_packet", description="receiver: ooo only: when it ACKs. per_packet "
        "(as before) = in-order packets every ack_interval_packets and when holes fill; a "
        "packet ahead of a hole on its own (a selective ACK) with fast_retransmit_packets "
        "> 0 or entropy reps, else not at all. coalesced = the UEC RUD receiver of "
        "uet-htsim (UecSink): every packet taken, in order or ahead, counts, and an ACK "
        "goes every ack_interval_packets packets, at once for an ECN-marked packet, the "
        "QP's first packet, a duplicate, and a packet whose sender asks for one (its ar "
        "flag: a retransmission, the QP's last packet, one after which the congestion "
        "window or RCCC credit holds the next packet back), and again when the packets "
        "held out of order after such a request have drained")

    @model_validator(mode="after")
    def _check(self) -> NicConfig:
        for d, tc in self.dscp_to_tc.items():
            if not 0 <= d <= 63 or not 0 <= tc <= 7:
                raise ValueError(f"dscp_to_tc {d}: {tc}: allowed: DSCP 0..63 -> TC 0..7")
        return self

    @field_validator("window", mode="before")
    @classmethod
    def _window(cls, w: Any, info: ValidationInfo) -> Any:
        mtu = info.data.get("mtu_payload_bytes", 256)
        ack = info.data.get("ack_interval_packets", 1)
        if w in ("none", "bdp") and isinstance(w, str):
            return w
        if not isinstance(w, int) or isinstance(w, bool) or not mtu <= w <= MAX_BUFFER:
            raise ValueError(f"window {w!r} is not none, bdp, or a byte count from one MTU "
                             f"payload ({mtu} bytes) to {MAX_BUFFER}; allowed: none, bdp, "
                             "or bytes >= mtu_payload_bytes")
        if w < ack * mtu:  # the receiver ACKs every `ack` packets: a smaller window stalls
            raise ValueError(f"window {w} is below one ACK interval ({ack} packets of "
                             f"{mtu} bytes = {ack * mtu}): the sender would wait for the "
                             "retransmission timeout every round; allowed: window >= "
                             "ack_interval_packets x mtu_payload_bytes")
        return w


class DcqcnParams(_Strict):
    """DCQCN with NVIDIA's parameter names, units and defaults (mlx5 ``ecn/roce_rp`` and
    ``ecn/roce_np``; NVIDIA's "DCQCN parameters" page)."""

    rpg_ai_rate: float = Field(default=5.0, gt=0, le=MAX_RATE_MBPS, description="target-"
                               "rate step of additive increase, Mbit/s")
    rpg_hai_rate: float = Field(default=50.0, gt=0, le=MAX_RATE_MBPS, description="target-"
                                "rate step of hyper increase, Mbit/s")
    rpg_time_reset: float = Field(default=300.0, ge=1, le=1_000_000,
                                  description="rate-increase timer, us")
    rpg_byte_reset: int = Field(default=32767, ge=0, le=1 << 31, description="rate-increase "
                                "byte counter, bytes (0: off, the timer alone)")
    rpg_threshold: int = Field(default=1, ge=1, le=31, description="increase events of "
                               "each clock in fast recovery before additive increase "
                               "(DCQCN's F)")
    rpg_gd: int = Field(default=11, ge=1, le=20, description="log2 of the divisor of alpha "
                        "(1024 scale) in a rate cut: cut = rate x alpha / 2^rpg_gd")
    rpg_min_dec_fac: int = Field(default=50, ge=1, le=100, description="a cut keeps at "
                                 "least this percent of the rate")
    rpg_min_rate: float = Field(default=1.0, gt=0, le=MAX_RATE_MBPS,
                                description="floor, Mbit/s")
    rpg_max_rate: float = Field(default=0.0, ge=0, le=MAX_RATE_MBPS,
                                description="ceiling, Mbit/s (0: line)")
    dce_tcp_g: int = Field(default=1019, ge=0, le=1024, description="alpha EWMA weight "
                           "(1024 scale): alpha = alpha x g/1024 + F x (1 - g/1024)")
    dce_tcp_rtt: float = Field(default=1.0, ge=0.01, le=1_000_000,
                               description="alpha update period, us")
    initial_alpha_value: int = Field(default=1023, ge=0, le=1024, description="alpha at "
                                     "the first CNP (1024 scale)")
    rate_reduce_monitor_period: float = Field(default=4.0, ge=0, le=1_000_000,
                                              description="at most one cut per period, us")
    rate_to_set_on_first_cnp: float = Field(default=0.0, ge=0, le=MAX_RATE_MBPS,
                                            description="current and target rate set by "
                                            "a QP's first CNP, Mbit/s (0: the usual cut)")
    clamp_tgt_rate: bool = Field(default=False, description="every cut sets the target "
                                 "rate to the current rate (else only after a byte-counter "
                                 "increase, see clamp_tgt_rate_after_time_inc)")
    clamp_tgt_rate_after_time_inc: bool = Field(default=True, description="a cut also sets "
                                                "the target rate to the current rate after "
                                                "a timer increase")
    min_time_between_cnps: float = Field(default=4.0, ge=0, le=1_000_000, description="NP: "
                                         "at most one CNP per QP per this many us")


class HpccParams(_Strict):
    """HPCC (Li et al., SIGCOMM'19): window from in-band telemetry."""

    target_utilization: float = Field(default=0.95, ge=0.01, le=1, description="eta")
    max_stage: int = Field(default=5, ge=0, le=100, description="additive steps before a "
                           "multiplicative update")
    ai_rate_mbps: float = Field(default=50.0, gt=0, le=MAX_RATE_MBPS,
                                description="W_AI as a rate")
    base_rtt_us: float | None = Field(default=None, ge=0.01, le=100_000, description="T; "
                                      "default: the largest unloaded RTT of the flows")


class TimelyParams(_Strict):
    """TIMELY (Mittal et al., SIGCOMM'15): rate from the RTT gradient. The paper's
    10G settings scaled to 100G links (delta 10 -> 100 Mbit/s, thresholds above the
    few-microsecond base RTT of one data-center fabric)."""

    ewma_alpha: float = Field(default=0.875, gt=0, le=1, description="EWMA weight of new "
                              "RTT differences")
    beta: float = Field(default=0.8, gt=0, le=1, description="multiplicative decrease")
    delta_mbps: float = Field(default=100.0, gt=0, le=MAX_RATE_MBPS,
                              description="additive step")
    t_low_us: float = Field(default=10.0, ge=0, le=1_000_000)
    t_high_us: float = Field(default=100.0, gt=0, le=1_000_000)
    hai_after: int = Field(default=5, ge=1, le=1000, description="negative gradients in a "
                           "row before hyper-active increase (N x delta)")
    min_rate_mbps: float = Field(default=100.0, gt=0, le=MAX_RATE_MBPS)

    @model_validator(mode="after")
    def _check(self) -> TimelyParams:
        if self.t_low_us > self.t_high_us:
            raise ValueError(f"t_low_us ({self.t_low_us}) is above t_high_us "
                             f"({self.t_high_us}); allowed: t_low_us <= t_high_us")
        return self


class DctcpParams(_Strict):
    """DCTCP-style window control: ECN echoed in ACKs, alpha per window."""

    g: float = Field(default=1 / 16, gt=0, le=1, description="alpha EWMA gain")
    init_window_bytes: OptSize = Field(default=None, ge=1, le=MAX_BUFFER,
                                       description="default: one bandwidth-delay "
                                       "product")
    min_window_bytes: Size = Field(default=4096, ge=1, le=MAX_BUFFER)


class NsccParams(_Strict):
    """UEC 1.0 NSCC (network-signal congestion control, sender-based): a window moved by
    two signals, the ECN mark each ACK echoes and the queueing delay (RTT - base RTT).
    No mark and delay under the target: proportional increase (fast increase by
    ``fast_increase_scale`` x acked bytes while the delay is under
    ``fast_increase_delay_us`` for a window's worth of ACKs); no mark and delay over:
    fair increase; a mark and delay over: multiplicative decrease by ``gamma`` x (average
    delay - target) / average delay, at most once per base RTT and never below half; a
    mark and delay under: nothing (a path problem, not the window's). Increases are
    collected and applied once per ``adjust_bytes_mtus`` MTUs acknowledged or per network
    RTT (as ``increase / cwnd``, plus ``eta`` per period); quick adapt cuts the window to
    what was acknowledged in the last base RTT + target when the delay passes
    ``quick_adapt_factor`` x target. Defaults: the UEC 1.0 specification's, as the UEC
    consortium's reference simulator (uet-htsim, ``UecSrc::initNsccParams``) sets them;
    every byte quantity scales with a = network BDP / (reference_gbps x reference_rtt_us)
    and the proportional gain also with b = target / reference_rtt_us."""

    target_qdelay_us: float | None = Field(
        default=None, gt=0, le=100_000, description="target queueing delay; default: the "
        "network RTT (UEC's default without packet trimming; x 0.75 with trimming)")
    network_rtt_us: float | None = Field(
        default=None, gt=0, le=100_000, description="the network's largest unloaded RTT, "
        "which scales every constant and is each QP's first base RTT (uet-htsim: "
        "network_max_unloaded_rtt); default: the largest base RTT of the run's QPs")
    reference_gbps: float = Field(default=100.0, ge=1, le=MAX_RATE_MBPS / 1000,
                                  description="UEC's reference network for scaling: 100 "
                                  "Gbit/s ...")
    reference_rtt_us: float = Field(default=12.0, gt=0, le=100_000,
                                    description="... and a 12 us RTT (BDP 150 KB)")
    alpha_factor: float = Field(default=4.0, gt=0, le=1000, description="proportional "
                                "increase gain: alpha = alpha_factor x MSS x a x b / target "
                                "(bytes per acked byte per ps under the target)")
    fair_increase_mtus: float = Field(default=5.0, ge=0, le=1000, description="fair "
                                      "increase: fi = this x MSS x a (per acked byte, "
                                      "applied / cwnd)")
    eta_mtus: float = Field(default=0.15, ge=0, le=1000, description="additive increase "
                            "per adjustment period: eta = this x MSS x a")
    fast_increase_scale: float = Field(default=0.25, ge=0, le=100, description="fast "
                                       "increase: cwnd += acked bytes x this x a")
    fast_increase_delay_us: float = Field(default=1.0, ge=0, le=100_000,
                                          description="fast increase while the delay is "
                                          "below this")
    gamma: float = Field(default=0.8, gt=0, le=1, description="multiplicative decrease "
                         "gain")
    delay_ewma: float = Field(default=0.0125, gt=0, le=1, description="gain of the "
                              "average-delay EWMA")
    quick_adapt: bool = Field(default=True, description="quick adapt on")
    quick_adapt_factor: float = Field(default=4.0, gt=0, le=1000, description="quick "
                                      "adapt when a delay passes this x target")
    quick_adapt_gate: int = Field(default=3, ge=0, le=20, description="quick adapt only "
                                  "while the bytes acknowledged in its period are below "
                                  "max window / 2^this")
    adjust_bytes_mtus: int = Field(default=8, ge=1, le=1 << 20, description="apply the "
                                   "collected increase after this many MTUs acknowledged...")
    adjust_period_us: float | None = Field(default=None, gt=0, le=100_000,
                                           description="... or this long; default: the "
                                           "network RTT")
    max_window_bdp: float = Field(default=1.5, gt=0, le=100, description="max window: "
                                  "this x the QP's BDP (base RTT x line rate)")
    init_window_bytes: OptSize = Field(default=None, ge=1, le=MAX_BUFFER, description="the "
                                       "first window; default: the max window")


class RcccParams(_Strict):
    """UEC 1.0 RCCC (receiver credit-based congestion control, for incast): each
    receiving NIC runs a credit pacer at ``pacer_fraction`` x ``receiver_gbps`` (the
    granted packets as they cross its link) that grants ``credit_mtus`` MTUs at a time,
    round robin over the QPs asking it for credit; a sender
    starts with ``speculative_bdp`` x its BDP of credit (the speculative window) and may
    send while its credit is positive; each data packet asks for the credit its
    remaining bytes need. Defaults: uet-htsim's (``UecPullPacer`` at 0.99 of the line rate,
    ``UecSink::_mtus_per_pull`` 4, a 1.5 BDP first window)."""

    receiver_gbps: float | None = Field(default=None, ge=1, le=MAX_RATE_MBPS / 1000,
                                        description="the rate a receiver grants credit "
                                        "at, Gbit/s on its link (the granted packets with "
                                        "their headers): no default (set the receiving "
                                        "NIC's line rate, or what its host can take)")
    pacer_fraction: float = Field(default=0.99, gt=0, le=1, description="the pacer runs "
                                  "at this x receiver_gbps")
    credit_mtus: int = Field(default=4, ge=1, le=1024, description="credit per grant, "
                             "MTU payloads")
    speculative_bdp: float = Field(default=1.5, ge=0, le=100, description="credit a QP "
                                   "starts with, x its BDP (also the most credit it holds)")


class IbccSl(_Strict):
    """InfiniBand congestion control of one service level (IBTA vol. 1 annex A10,
    CACongestionSetting: a CCTI_Increase, CCTI_Timer and CCTI_Min per SL, and the
    Control_Map bit that turns the SL's congestion control on); unset: the ``ibcc``
    value."""

    enabled: bool = Field(default=True, description="the SL's bit of the CA's control map: "
                          "false, its QPs ignore BECNs (no rate reduction)")
    ccti_increase: int | None = Field(default=None, ge=1, le=255, description="CCTI added "
                                      "per BECN")
    ccti_timer: int | None = Field(default=None, ge=1, le=0xFFFF, description="CCTI timer, "
                                   "units of 1.024 us")
    ccti_min: int | None = Field(default=None, ge=0, le=0x3FFF, description="the lowest "
                                 "CCTI")


class IbccParams(_Strict):
    """InfiniBand congestion control (IBTA vol. 1 annex A10; ``algorithm: ibcc``, the
    default on an InfiniBand fabric). OpenSM ships it off with every setting 0
    (``opensm --create-config``): these defaults are aifabric's, documented in
    docs/infiniband.md."""

    threshold: int = Field(default=8, ge=0, le=15, description="switch FECN threshold "
                           "(IBTA 0 = off .. 15 = most aggressive): a data packet joining "
                           "an egress queue of its VL that holds more than (16 - "
                           "threshold)/16 of one VL buffer is eligible for FECN")
    marking_rate: int = Field(default=0, ge=0, le=0xFFFF, description="eligible packets "
                              "between FECN marks (0: mark every eligible packet)")
    ccti_increase: int = Field(default=1, ge=1, le=255, description="CCTI added per BECN")
    ccti_timer: int = Field(default=10, ge=1, le=0xFFFF, description="CCTI timer, units "
                            "of 1.024 us: CCTI drops by one each time it expires")
    ccti_min: int = Field(default=0, ge=0, le=0x3FFF, description="the lowest CCTI (a "
                          "floor on the delay)")
    cct: list[Annotated[float, Field(ge=0, le=1024)]] | None = Field(
        default=None, min_length=1, max_length=128, description="the Congestion Control "
        "Table: entry i is the injection-rate delay at CCTI i, in wire times of the packet "
        "sent (rate = line / (1 + entry)); default: i / 64 for i = 0..127 (CCTI 64: half "
        "the line rate)")

    sl: dict[int, IbccSl] = Field(
        default_factory=dict, description="per service level (IBTA's CACongestionSetting "
        "entries; OpenSM's cc_ca_cong_setting_* <SL> <value> and its control map): the "
        "CA's settings for QPs of that SL, each unset one the value above")
    victim_mask: Literal["all", "none", "hca_ports"] = Field(
        default="all", description="the switches' Victim_Mask (OpenSM's "
        "cc_sw_cong_setting_victim_mask): the ports that mark FECN also while they are a "
        "victim of congestion (their VL out of credit), not only as its root; all (the "
        "default: every port marks on its queue alone), none (OpenSM's default), "
        "hca_ports (the ports cabled to HCAs); victim_ports adds port numbers")
    victim_ports: list[Annotated[int, Field(ge=0, le=254)]] | None = Field(
        default=None, description="switch port numbers (0..254, OpenSM's numbering) in "
        "the Victim_Mask of every switch, with victim_mask none or hca_ports")

    @field_validator("sl")
    @classmethod
    def _sls(cls, sls: dict[int, IbccSl]) -> dict[int, IbccSl]:
        bad = [x for x in sls if not 0 <= x <= 15]
        if bad:
            raise ValueError(f"SL {bad[0]}; allowed: service levels 0..15")
        return sls

    @model_validator(mode="after")
    def _table(self) -> IbccParams:
        n = len(self.cct) if self.cct is not None else 128
        if self.ccti_min >= n:
            raise ValueError(f"ccti_min {self.ccti_min} is past the table's last index "
                             f"({n - 1}); allowed: 0..{n - 1}")
        if self.victim_ports is not None and self.victim_mask == "all":
            raise ValueError("victim_ports: given with victim_mask all (every port is in "
                             "the mask already); allowed: victim_mask none or hca_ports "
                             "with victim_ports")
        for sl, e in sorted(self.sl.items()):
            if e.ccti_min is not None and e.ccti_min >= n:
                raise ValueError(f"sl.{sl}.ccti_min {e.ccti_min} is past the table's last "
                                 f"index ({n - 1}); allowed: 0..{n - 1}")
        return self

    def for_sl(self, sl: int) -> tuple[bool, int, int, int]:
        """The CA's settings of QPs on service level ``sl``: (on, ccti_increase,
        ccti_timer, ccti_min)."""
        e = self.sl.get(sl)
        if e is None:
            return True, self.ccti_increase, self.ccti_timer, self.ccti_min
        return (e.enabled,
                self.ccti_increase if e.ccti_increase is None else e.ccti_increase,
                self.ccti_timer if e.ccti_timer is None else e.ccti_timer,
                self.ccti_min if e.ccti_min is None else e.ccti_min)

    def table(self) -> list[float]:
        """The CCT: ``cct`` or the default (entry i = i/64)."""
        return list(self.cct) if self.cct is not None else [i / 64 for i in range(128)]


class CcConfig(_Strict):
    """The congestion control of every QP and its parameters."""

    algorithm: Literal["none", "dcqcn", "hpcc", "timely", "dctcp", "nscc", "rccc",
                       "nscc+rccc", "ibcc"] = Field(
        default="dcqcn", description="nscc, rccc, nscc+rccc: the UEC 1.0 congestion "
        "controls (sender window; receiver credits; both, a packet needs window and "
        "credit); ibcc: InfiniBand's (FECN/BECN, CCTI; the default and the only one on "
        "an InfiniBand fabric, with none)")
    dcqcn: DcqcnParams = DcqcnParams()
    hpcc: HpccParams = HpccParams()
    timely: TimelyParams = TimelyParams()
    dctcp: DctcpParams = DctcpParams()
    nscc: NsccParams = NsccParams()
    rccc: RcccParams = RcccParams()
    ibcc: IbccParams = IbccParams()

    @model_validator(mode="after")
    def _rccc_rate(self) -> CcConfig:
        if "rccc" in self.algorithm and self.rccc.receiver_gbps is None:
            from pydantic_core import InitErrorDetails, PydanticCustomError

            msg = (f"algorithm {self.algorithm} needs the receiver's rate, which has no "
                   "default; allowed: a rate in Gbit/s (0 < receiver_gbps <= 1600, e.g. "
                   "the receiving NIC's line rate)")
            raise ValidationError.from_exception_data("CcConfig", [InitErrorDetails(
                type=PydanticCustomError("missing_rate", msg),
                loc=("rccc", "receiver_gbps"), input=None)])
        return self


class LbConfig(_Strict):
    """Per-packet load balancing at every switch (``packet.lb``), over the ECMP next hops
    of the packet's destination at that switch (the fabric's forwarding tables). The
    vocabulary is ``routing.policy``'s: ``spray`` and ``adaptive`` are the packet-level
    counterparts of the flow model's fluid split and least-loaded placement."""

    mode: Literal["ecmp", "spray", "adaptive"] | None = Field(
        default=None, description="ecmp = every packet of a flow follows the flow's route "
        "(the routing policy's choice, as today); spray = each packet picks a next hop at "
        "every switch (see spray); adaptive = each packet (or flowlet, flowlet_gap_ns) "
        "takes the next hop whose egress queue holds the fewest bytes, ties to the flow's "
        "hash (its ECMP route); default: routing.policy's counterpart (spray -> spray, "
        "adaptive -> adaptive, others -> ecmp)")
    spray: Literal["random", "round_robin"] = Field(
        default="random", description="spray: random = uniform per packet (seeded); "
        "round_robin = each switch's group takes its members in turn")
    flowlet_gap_ns: float = Field(
        default=0.0, ge=0, le=1e9, description="adaptive: a flow keeps its choice at a "
        "switch while its packets there are less than this apart (a flowlet, Broadcom "
        "DLB / CONGA); 0: every packet chooses")
    seed: int | None = Field(default=None, ge=0, le=(1 << 64) - 1, description="seed of "
                             "random spraying; default: packet.seed")


class SharpPacketConfig(_Strict):
    """SHARP AllReduces at packet level (``packet.sharp``; InfiniBand with
    ``algorithm: sharp`` or ``dp_algorithm: sharp``): the chunks hosts send up the
    reduction trees and the switches' aggregation units
    (:mod:`aifabric.sim.packet.sharp`)."""

    chunk_bytes: Size = Field(default=512 << 10, ge=256, le=1073741792, description="one "
                              "SHARP operation's message: the buffer is sent and reduced "
                              "in chunks of this size (default: NCCL's CollNet buffer slot, "
                              "NCCL_BUFFSIZE 4 MiB / NCCL_STEPS 8; at most SHARP's "
                              "streaming-aggregation maximum, 1,073,741,792 bytes)")
    outstanding: int = Field(default=8, ge=1, le=1024, description="chunk operations a "
                             "host keeps posted before their result is back (NCCL_STEPS)")
    aggregation_latency_ns: float = Field(default=200.0, ge=0, le=1_000_000,
                                          description="a switch's reduction latency, ns "
                                          "(aifabric's value: no published figure)")
    aggregation_gbps: float | None = Field(default=None, ge=1, le=1_000_000,
                                           description="a switch's reduction rate, Gbit/s; "
                                           "default: its whole port bandwidth (line rate on "
                                           "every port)")


class PacketConfig(_Strict):
    """The ``packet:`` section of a scenario."""

    buffer: BufferConfig = BufferConfig()
    pfc: PfcConfig = PfcConfig()
    ecn: EcnConfig = EcnConfig()
    switch: SwitchConfig = SwitchConfig()
    nic: NicConfig = NicConfig()
    cc: CcConfig = CcConfig()
    lb: LbConfig = LbConfig()
    sample_us: float = Field(default=10.0, ge=1, le=1_000_000,
                             description="time-series interval")
    until_ms: float = Field(default=1000.0, gt=0, le=60_000, description="stop after this "
                            "much simulated time (unfinished transfers are reported)")
    deadlock_check_us: float = Field(default=50.0, ge=1, le=1_000_000, description="interval "
                                     "of the paused-cycle check")
    seed: int = Field(default=0, ge=0, le=(1 << 64) - 1)
    ib_sl: dict[str, Annotated[int, Field(ge=0, le=15)]] = Field(
        default_factory=dict, description="InfiniBand only: the service level of QPs by "
        "what they carry: a job's name (the job's NCCL_IB_SL), a scenario collective's "
        "name (<op>-<i> when unnamed; every repetition) or a traffic entry (traffic.<i>); "
        "a collective's SL over its job's; its VL is infiniband.sl2vl of it; other "
        "traffic uses infiniband.nccl_sl")
    sharp: SharpPacketConfig = SharpPacketConfig()

    @model_validator(mode="after")
    def _check(self) -> PacketConfig:
        h = self.pfc.headroom_bytes
        size = self.buffer.size_bytes
        if self.pfc.enabled and h is not None and size is not None and \
                size < h * len(self.pfc.priorities) and not self.pfc.allow_overcommit:
            raise ValueError(f"buffer.size_bytes ({size}) is smaller than the headroom of "
                             f"one port ({h} x {len(self.pfc.priorities)} lossless "
                             "priorities); allowed: a buffer that holds the headroom of "
                             "one port (every port's is checked when the run is built)")
        tr = self.switch.trim
        if tr.enabled and tr.threshold_bytes is not None and size is not None and \
                tr.threshold_bytes > size:
            raise ValueError(f"switch.trim.threshold_bytes ({tr.threshold_bytes}) is above "
                             f"buffer.size_bytes ({size}); allowed: a threshold a queue "
                             "can reach, at most the buffer")
        data_tc = self.nic.dscp_to_tc.get(self.nic.dscp, 0)
        if tr.enabled and self.pfc.enabled and data_tc in self.pfc.priorities:
            raise ValueError(f"switch.trim.enabled: the data class (TC{data_tc}, nic.dscp "
                             f"{self.nic.dscp}) is lossless (pfc.priorities): trimming is "
                             "the lossy mode; allowed: pfc.enabled false, or a data class "
                             "outside pfc.priorities")
        return self


def packet_config_from_dict(data: Any, *, file: str | None = None,
                            path: str = "packet") -> PacketConfig:
    """Validate a ``packet:`` mapping; every problem as one :class:`Problem` whose field
    path starts with ``path``."""
    from aifabric.spec.problems import problems_from_validation

    try:
        return PacketConfig.model_validate(data or {})
    except ValidationError as err:
        raise SpecError([Problem(f"{path}.{p.path}" if p.path else path, p.message, p.file)
                         for p in problems_from_validation(err, PacketConfig, file)]) from None


def deployed_packet_settings(deploy: Any) -> dict[str, Any]:
    """The fabric's deployed QoS (the spec's ``deploy`` section: what ``aifabric build``
    writes into the switch and NIC configurations) as ``packet:`` settings: lossless or
    lossy, the RoCE priority, ECN WRED thresholds, DSCPs and their traffic classes, the
    PFC-watchdog time and every DCQCN parameter the simulator models (same names)."""
    q, d = deploy.qos, deploy.dcqcn
    dcqcn: dict[str, Any] = {}
    for name in DcqcnParams.model_fields:
        if hasattr(d, name):
            v = getattr(d, name)
            dcqcn[name] = bool(v) if name.startswith("clamp_tgt_rate") else v
    return {
        "pfc": {"enabled": q.mode == "lossless", "priorities": [q.roce_tc],
                "watchdog_ms": float(q.pfc_watchdog.detection_ms)},
        "ecn": {**_profile(q.ecn), "by_speed": {
            speed: _profile(e) for speed, e in sorted(q.wred.items())}},
        "nic": {"dscp": q.roce_dscp, "cnp_dscp": q.cnp_dscp,
                "dscp_to_tc": {q.roce_dscp: q.roce_tc, q.cnp_dscp: q.cnp_tc}},
        "cc": {"dcqcn": dcqcn},
    }


def _profile(e: Any) -> dict[str, Any]:
    """A ``deploy.qos.ecn`` / ``deploy.qos.wred`` profile as ``packet.ecn`` fields."""
    return {"kmin_bytes": e.min_threshold_bytes, "kmax_bytes": e.max_threshold_bytes,
            "pmax": e.max_mark_percent / 100.0}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) \
            and k != "dscp_to_tc" else v
    return out


def effective_packet_config(packet: PacketConfig, deploy: Any, *, file: str | None = None
                            ) -> PacketConfig:
    """The settings a scenario's packet run uses: the fabric's deployed QoS
    (:func:`deployed_packet_settings`), overridden by what the scenario's ``packet:``
    section sets itself. What you tune in the simulator is then what ``aifabric build``
    deploys once copied into ``deploy``; and an untouched scenario simulates the fabric
    as deployed."""
    own = packet.model_dump(exclude_unset=True)
    deployed = deployed_packet_settings(deploy)
    ecn = own.get("ecn", {})
    if ecn.keys() & {"by_speed", "kmin_bytes", "kmax_bytes", "pmax"}:
        # the scenario's own thresholds replace the deployed map whole: its by_speed map,
        # or its single profile (merged with the deployed one) for every port
        deployed["ecn"].pop("by_speed", None)
    merged = _merge(deployed, own)
    return packet_config_from_dict(merged, file=file)
