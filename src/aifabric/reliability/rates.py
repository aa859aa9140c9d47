"""Failure classes and their default rates, with where each number comes from.

Rates are *per component instance* and per month (30 days): ``0.00057`` = 0.057 % of the
NIC-ToR links fail in a month. The defaults come from two published sources:

* **HPN** — Alibaba HPN (Qian et al., SIGCOMM 2024, section 2): NIC-ToR link failures
  0.057 % per month, ToR switch failures 0.051 % per month (their production
  clusters). Dual-ToR is designed so that a ToR failure no longer stops a job, and each
  segment has backup hosts to replace a failed server.
* **Llama 3** — "The Llama 3 Herd of Models" (Meta, 2024, section 3.3.4): a 54-day
  pre-training snapshot on 16,384 H100 GPUs saw 466 job interruptions, 419 of them
  unexpected; about 78 % of the unexpected ones were attributed to hardware, GPU issues
  being the largest class (58.7 %); the job kept more than 90 % effective training time.

Derived defaults (``16,384 GPUs = 2,048 hosts``, 54 days = 1.8 months):

* ``gpu``: 58.7 % x 419 = 246 interruptions / (16,384 GPUs x 1.8 months) = 0.834 %/month;
* ``host``: the rest of the hardware share, (78 % - 58.7 %) x 419 = 81 /
  (2,048 hosts x 1.8 months) = 2.19 %/month (CPU, memory, PSU, PCIe, host maintenance;
  Llama 3 counts NICs and network in this share too, so a scenario that uses both the
  network classes and this default counts the network twice — lower it when you
  calibrate);
* ``software``: the remaining 22 % x 419 = 92 / (16,384 GPUs x 1.8 months) =
  0.313 %/month *per GPU of the job* (software bugs, NCCL timeouts, ...);
* ``access_link`` (NIC-ToR link and its optics/AOC): HPN's 0.057 %/month;
* ``tor``: HPN's 0.051 %/month;
* ``nic_port``: no published per-port figure in these sources; assumed equal to the
  link figure (0.057 %/month) — *an assumption*;
* ``agg``, ``core``: no published figure; assumed equal to the ToR's 0.051 %/month —
  *an assumption*;
* ``fabric_link`` (switch-to-switch links, ToR-agg and agg-core, with their optics):
  assumed equal to the NIC-ToR link figure, 0.057 %/month — *an assumption*.

Repair times (how long a failed part stays out: a host swapped for a spare comes back as
a spare after it) are assumptions, editable per class: GPU/host 3 days (RMA or on-site
swap), NIC/links 4 hours (reseat or replace an optic), switches 8 hours.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLASSES", "DEFAULTS", "HOST_CLASSES", "MONTH_S", "SWITCH_CLASSES", "ClassInfo"]

#: one month, as the rates count it: 30 days
MONTH_S = 30 * 86400.0


@dataclass(frozen=True)
class ClassInfo:
    """What one failure class is, its default rate (per instance per month), default
    repair time (s) and where the rate comes from."""

    name: str
    what: str
    rate_per_month: float
    repair_s: float
    source: str


_H = 3600.0
_D = 86400.0
_LLAMA = "Llama 3 (Meta 2024, sec. 3.3.4): 16,384 H100 GPUs, 54 days, 419 unexpected"
DEFAULTS: dict[str, ClassInfo] = {c.name: c for c in (
    ClassInfo("gpu", "a GPU of the job (its host is replaced)", 0.00834, 3 * _D,
              f"{_LLAMA}; GPUs 58.7 % of them"),
    ClassInfo("host", "a host of the job: CPU, memory, PSU, PCIe, maintenance", 0.0219,
              3 * _D, f"{_LLAMA}; hardware 78 % less GPUs"),
    ClassInfo("nic_port", "one NIC port of a host", 0.00057, 4 * _H,
              "assumption: as HPN's NIC-ToR link rate"),
    ClassInfo("access_link", "a NIC-ToR link with its optics or AOC", 0.00057, 4 * _H,
              "HPN (SIGCOMM 2024, sec. 2): NIC-ToR links 0.057 %/month"),
    ClassInfo("tor", "a ToR switch", 0.00051, 8 * _H,
              "HPN (SIGCOMM 2024, sec. 2): ToR switches 0.051 %/month"),
    ClassInfo("agg", "an aggregation switch", 0.00051, 8 * _H,
              "assumption: as HPN's ToR rate"),
    ClassInfo("core", "a core switch", 0.00051, 8 * _H, "assumption: as HPN's ToR rate"),
    ClassInfo("fabric_link", "a switch-to-switch link (ToR-agg, agg-core) with optics",
              0.00057, 4 * _H, "assumption: as HPN's NIC-ToR link rate"),
    ClassInfo("software", "software and other causes, per GPU of the job", 0.00313, 0.0,
              f"{_LLAMA}; the 22 % not hardware"),
)}

#: every class, in report order
CLASSES: tuple[str, ...] = tuple(DEFAULTS)
#: classes whose failure takes a host out of the job (a spare replaces it, or the job
#: waits for the repair); network ones only when the routing model says the host is cut off
HOST_CLASSES = ("gpu", "host", "nic_port", "access_link")
#: classes whose interrupting failure is waited out (the switch or link is repaired)
SWITCH_CLASSES = ("tor", "agg", "core", "fabric_link")
