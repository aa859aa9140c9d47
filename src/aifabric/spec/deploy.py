"""Deployment settings: what ``aifabric build`` needs beyond the topology.

RoCE QoS (lossless with PFC or lossy ECN-only), ECN/WRED and DCQCN parameters, the
address pools of switch loopbacks and point-to-point links, the private ASN range of
the eBGP design, MTUs, the HPN dual-ToR LACP identity and the driver/firmware versions
``aifabric check`` expects. Host addresses are not here: they come from
``addressing.nic_pool`` (one /32 per NIC). Every field is documented in ``docs/spec.md``.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from aifabric.spec.base import StrictModel
from aifabric.spec.names import Text

__all__ = [
    "Asn",
    "Dcqcn",
    "Deploy",
    "Ecn",
    "Expect",
    "HpnDeploy",
    "Monitoring",
    "Mtu",
    "NicDeploy",
    "PfcWatchdog",
    "Pools",
    "Qos",
]

Dscp = int
#: the largest DCQCN rate (Mbit/s): 1.6 Tbit/s, beyond any port
_RATE = 1_600_000
_MAC = r"^[0-9A-Fa-f]{2}(:[0-9A-Fa-f]{2}){5}$"
MAX_GBPS = 100_000  # a port's speed (spec.models.MAX_GBPS; that module imports this one)


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Ecn(_Strict):
    """ECN marking (WRED with ECN) on the RoCE queue: mark from ``min_threshold_bytes``,
    linearly up to ``max_mark_percent`` at ``max_threshold_bytes``."""

    min_threshold_bytes: int = Field(default=150_000, ge=1, le=1 << 36)  # 64 GiB
    max_threshold_bytes: int = Field(default=1_500_000, ge=1, le=1 << 36)
    max_mark_percent: int = Field(default=5, ge=0, le=100)

    @model_validator(mode="after")
    def _order(self) -> Ecn:
        if self.max_threshold_bytes < self.min_threshold_bytes:
            raise ValueError("max_threshold_bytes must be >= min_threshold_bytes")
        return self


def _is_default(ecn: object) -> bool:
    """``ecn`` (a mapping or an :class:`Ecn`) holds Ecn's defaults."""
    try:
        return Ecn.model_validate(ecn) == Ecn()
    except ValueError:  # invalid: not the defaults (its own problems are reported too)
        return False


class PfcWatchdog(_Strict):
    """PFC watchdog: a queue paused longer than ``detection_ms`` is a storm."""

    enabled: bool = True
    detection_ms: int = Field(default=200, ge=100, le=5000)
    restoration_ms: int = Field(default=200, ge=100, le=60000)
    action: Literal["drop", "forward", "alert"] = "drop"
    poll_interval_ms: int = Field(default=200, ge=100, le=1000)


class Qos(_Strict):
    """RoCE QoS: ``lossless`` (PFC on the RoCE priority + ECN) or ``lossy`` (ECN only)."""

    mode: Literal["lossless", "lossy"] = "lossless"
    roce_dscp: Dscp = Field(default=26, ge=0, le=63)
    roce_tc: int = Field(default=3, ge=0, le=7)
    cnp_dscp: Dscp = Field(default=48, ge=0, le=63)
    cnp_tc: int = Field(default=6, ge=0, le=7)
    roce_weight_percent: int = Field(default=60, ge=1, le=99)
    pfc_response_ns: int = Field(default=1_000, ge=0, le=1_000_000)  # at most 1 ms
    ecn: Ecn = Ecn()
    wred: dict[Annotated[int, Field(ge=1, le=MAX_GBPS)], Ecn] = Field(
        default={}, description="one WRED/ECN profile per port speed (Gbit/s); every "
        "speed of the fabric's switch ports must be listed. A single profile here is "
        "the same as ``ecn``")
    pfc_watchdog: PfcWatchdog = PfcWatchdog()

    @model_validator(mode="before")
    @classmethod
    def _wred_or_ecn(cls, data: Any) -> Any:
        """``wred`` replaces ``ecn``: a map by port speed, or one profile (then it is
        ``ecn``); setting it and a non-default ``ecn`` is an error (a dumped spec has
        both: ``wred`` empty, or ``ecn`` at its defaults)."""
        if not isinstance(data, dict) or not data.get("wred"):
            return data
        w = data["wred"]
        single = isinstance(w, dict) and not all(
            isinstance(k, int) or (isinstance(k, str) and k.isdigit()) for k in w)
        e = data.get("ecn")
        if e is not None and (e != w if single else not _is_default(e)):
            raise ValueError("set either ecn (one profile for every port) or wred (a map "
                             "by port speed, or one profile), not both")
        if single:
            data = {k: v for k, v in data.items() if k != "wred"}
            data["ecn"] = w  # one profile for every speed
        return data

    @model_validator(mode="after")
    def _distinct(self) -> Qos:
        if self.roce_dscp == self.cnp_dscp:
            raise ValueError("roce_dscp and cnp_dscp must differ")
        if self.roce_tc == self.cnp_tc:
            raise ValueError("roce_tc and cnp_tc must differ")
        if 0 in (self.roce_tc, self.cnp_tc):
            raise ValueError("TC 0 is the default best-effort class; allowed: 1..7")
        return self

    def wred_for(self, speed_gbps: float) -> Ecn | None:
        """The WRED/ECN profile of a switch port of this speed: ``wred``'s entry, or
        ``ecn`` when ``wred`` is empty; None when ``wred`` lacks the speed."""
        if not self.wred:
            return self.ecn
        return self.wred.get(int(speed_gbps)) if float(speed_gbps).is_integer() else None

    def wred_missing(self, speeds_gbps: Any) -> str | None:
        """One line naming the port speeds (Gbit/s) ``wred`` lacks and the speeds it has,
        or None when every speed has a profile (or ``wred`` is empty: ``ecn`` applies)."""
        if not self.wred:
            return None
        speeds = sorted({float(s) for s in speeds_gbps})
        missing = [s for s in speeds if self.wred_for(s) is None]
        if not missing:
            return None
        show = ", ".join(f"{s:g}" for s in missing)
        return (f"no profile for port speed {show} Gbit/s used by the fabric's switch "
                f"ports; allowed: a map by every port speed (has: "
                f"{', '.join(str(k) for k in sorted(self.wred))})")

    @property
    def roce_tos(self) -> int:
        """The IP ToS byte of RoCE packets (DSCP << 2; the NIC sets the ECN bits)."""
        return self.roce_dscp << 2


class Dcqcn(_Strict):
    """DCQCN parameters of the NIC (mlx5 sysfs names under ``ecn/roce_rp`` and
    ``ecn/roce_np``); units are the driver's."""

    # the ranges are the packet simulator's (what it can run: `aifabric simulate` of this
    # fabric uses these values), within what the driver accepts
    rpg_ai_rate: int = Field(default=5, ge=1, le=_RATE, description="Mbit/s")
    rpg_hai_rate: int = Field(default=50, ge=1, le=_RATE, description="Mbit/s")
    rpg_byte_reset: int = Field(default=32767, ge=0, le=1 << 31, description="bytes; 0: off")
    rpg_threshold: int = Field(default=1, ge=1, le=31)
    rpg_time_reset: int = Field(default=300, ge=1, le=1_000_000, description="us")
    rpg_gd: int = Field(default=11, ge=1, le=20)
    rpg_min_dec_fac: int = Field(default=50, ge=1, le=100, description="percent")
    rpg_min_rate: int = Field(default=1, ge=1, le=_RATE, description="Mbit/s")
    rpg_max_rate: int = Field(default=0, ge=0, le=_RATE, description="Mbit/s; 0: line")
    rate_to_set_on_first_cnp: int = Field(default=0, ge=0, le=_RATE,
                                          description="Mbit/s; 0: off")
    rate_reduce_monitor_period: int = Field(default=4, ge=0, le=1_000_000, description="us")
    initial_alpha_value: int = Field(default=1023, ge=0, le=1024)
    dce_tcp_g: int = Field(default=1019, ge=0, le=1024)
    dce_tcp_rtt: int = Field(default=1, ge=1, le=1_000_000, description="us")
    clamp_tgt_rate: int = Field(default=0, ge=0, le=1)
    clamp_tgt_rate_after_time_inc: int = Field(default=1, ge=0, le=1)
    min_time_between_cnps: int = Field(default=4, ge=0, le=1_000_000, description="us")

    def rp(self) -> dict[str, int]:
        """Reaction-point parameters (``ecn/roce_rp/<name>``)."""
        return {k: v for k, v in self.model_dump().items() if k != "min_time_between_cnps"}

    def np(self) -> dict[str, int]:
        """Notification-point parameters besides the CNP DSCP/priority."""
        return {"min_time_between_cnps": self.min_time_between_cnps}


class Pools(_Strict):
    """Switch address pools (hosts use ``addressing.nic_pool``)."""

    loopback: ipaddress.IPv4Network = ipaddress.IPv4Network("172.16.0.0/16")
    p2p: ipaddress.IPv4Network = ipaddress.IPv4Network("100.64.0.0/10")


class Asn(_Strict):
    """The private ASN range of the eBGP design (RFC 7938 style)."""

    first: int = Field(default=4_200_000_000, ge=1, le=4_294_967_294)
    last: int = Field(default=4_294_967_294, ge=1, le=4_294_967_294)
    tor: Literal["per_tor", "per_pair"] = "per_tor"

    @model_validator(mode="after")
    def _order(self) -> Asn:
        if self.last < self.first:
            raise ValueError("last must be >= first")
        return self


class Mtu(_Strict):
    """MTUs in bytes: switch ports above the hosts so that jumbo frames pass end to end."""

    switch: int = Field(default=9100, ge=1500, le=9216)
    host: int = Field(default=9000, ge=1500, le=9216)

    @model_validator(mode="after")
    def _order(self) -> Mtu:
        if self.host > self.switch:
            raise ValueError("host MTU must be <= switch MTU")
        return self


class HpnDeploy(_Strict):
    """HPN non-stacked dual-ToR: both ToRs of a pair answer LACP as one system."""

    lacp_system_mac: str = Field(default="00:00:5E:00:01:01", pattern=_MAC)
    lacp_port_id_offset: int = Field(default=300, ge=1, le=32768)


class NicDeploy(_Strict):
    """Host NIC naming and RDMA settings."""

    rdma_device_prefix: str = Field(default="mlx5_", pattern=r"^[A-Za-z0-9_]{1,24}$")
    gid_index: int = Field(default=3, ge=0, le=255)  # a GID table's 256 entries
    host_vlan: int = Field(default=1000, ge=2, le=4094)
    gateway_mac: str = Field(default="00:00:5E:00:01:FE", pattern=_MAC)


class Expect(_Strict):
    """What ``aifabric check`` expects of collected facts. Unset versions must merely
    agree across all hosts (the most common value is taken as expected)."""

    driver: Text = "mlx5_core"
    driver_version: Text | None = None
    firmware_version: Text | None = None
    switch_os_version: Text | None = None


class Monitoring(_Strict):
    """How often the build's Prometheus scrapes and evaluates its alerts
    (``monitoring/prometheus.yml``); the alerts' ``for:`` and rate windows scale with
    them (:mod:`aifabric.telemetry.alerts`). ``evaluation_interval_s`` unset: the scrape
    interval. Shorter intervals detect sooner (an ECMP group that lost a member fires
    after two intervals) at more scrape load on every device. The shortest scrape
    interval is 2 s: at 1 s, a scrape of the lab during a switch failure (a frozen
    daemon is waited for up to 0.5 s) overran the interval and fired FabricExporterDown
    (``benchmarks/bench_alert_latency.py``)."""

    scrape_interval_s: float = Field(default=15.0, ge=2.0, le=300.0, description="s")
    evaluation_interval_s: float | None = Field(default=None, ge=1.0, le=300.0,
                                                description="s")

    @property
    def evaluation_s(self) -> float:
        return self.scrape_interval_s if self.evaluation_interval_s is None \
            else self.evaluation_interval_s


class Deploy(_Strict):
    """Everything ``aifabric build`` and ``aifabric check`` need beyond the topology."""

    qos: Qos = Qos()
    dcqcn: Dcqcn = Dcqcn()
    pools: Pools = Pools()
    asn: Asn = Asn()
    mtu: Mtu = Mtu()
    hpn: HpnDeploy = HpnDeploy()
    nic: NicDeploy = NicDeploy()
    expect: Expect = Expect()
    monitoring: Monitoring = Monitoring()
