"""The alert rules of a fabric (``monitoring/alerts.yml`` of ``aifabric build``).

One table, :func:`alert_rules`, says every alert: its PromQL (on the catalog's metric
names only, :mod:`aifabric.telemetry.catalog`), how long it must hold (``for``), its
severity, a summary and a runbook line. :func:`render_alerts` writes them as a
Prometheus rule file that ``promtool check rules`` accepts; ``tests/telemetry/
test_alert_rules.py`` runs ``promtool test rules`` on every alert (fires on a bad series,
silent on a good one, resolves).

The intervals are the spec's ``deploy.monitoring`` (scrape and evaluation, default 15 s
each). A ``for:`` that confirms a state (an ECMP group short of members, twin drift, an
exporter or target down) is two of the longer of the two intervals: two samples in a
row, each seen by an evaluation -- 30 s at the default, 4 s at 2 s. Windows scale with
the scrape interval where they must (a ``rate`` needs two samples in its window); the
PFC watchdog storm uses the spec's ``deploy.qos.pfc_watchdog.
detection_ms`` (SONiC's semantics: a queue held by PFC pause, without a break, for at
least the detection time), widened to two scrape intervals when Prometheus samples
more coarsely than that (it cannot see finer than it samples).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from aifabric.spec.models import Spec

__all__ = ["Alert", "alert_rules", "duration", "intervals", "render_alerts"]

_Q = json.encoder.encode_basestring_ascii  # type: ignore[attr-defined]

#: thresholds of the rate alerts (per port and priority); tune them to the fabric.
#: A sustained pause ratio above 10 % means a lossless class is throttled by PFC a tenth
#: of the time (the congestion control is not keeping queues below Xoff).
PAUSE_RATIO = 0.10
#: ECN marks per second on one port, sustained: 100 k/s is ~1 % of the packets of a
#: 400G port at 4 KiB MTU (12.2 M packets/s): persistent congestion, not an incast burst.
ECN_MARKS_PER_S = 100_000
#: CNPs per second received by one NIC port, sustained (DCQCN's NP sends at most one CNP
#: per flow per 50 us, i.e. 20 k/s per congested flow): several flows held back.
CNP_PER_S = 20_000
#: retransmitted bytes over sent bytes on a NIC port: 0.1 % on a lossless fabric means
#: drops (buffer, CRC) that go-back-N multiplies.
RETX_RATIO = 0.001


@dataclass(frozen=True)
class Alert:
    """One alerting rule. ``for_s`` is how long the condition must hold (0: at once);
    ``summary`` may use ``{{ $labels.x }}``; ``runbook`` is the first thing to do."""

    name: str
    group: str
    expr: str
    for_s: float
    severity: str
    summary: str
    runbook: str


def duration(seconds: float) -> str:
    """A Prometheus duration of ``seconds`` in whole milliseconds (``15s``, ``200ms``,
    ``1m30s`` -> ``90s``)."""
    ms = round(seconds * 1000)
    if ms % 60_000 == 0 and ms:
        return f"{ms // 60_000}m"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


def intervals(spec: Spec, scrape_interval_s: float | None = None,
              evaluation_interval_s: float | None = None) -> tuple[float, float]:
    """(scrape, evaluation) interval in seconds: the arguments, else the spec's
    ``deploy.monitoring`` (an unset evaluation interval is the scrape interval)."""
    mon = spec.deploy.monitoring
    scrape = mon.scrape_interval_s if scrape_interval_s is None else scrape_interval_s
    if evaluation_interval_s is not None:
        return scrape, evaluation_interval_s
    if scrape_interval_s is not None and mon.evaluation_interval_s is None:
        return scrape, scrape
    return scrape, mon.evaluation_s


def alert_rules(spec: Spec, scrape_interval_s: float | None = None,
                evaluation_interval_s: float | None = None) -> list[Alert]:
    """Every alert of the fabric of ``spec``, scraped and evaluated at the intervals of
    :func:`intervals`."""
    iv, ev = intervals(spec, scrape_interval_s, evaluation_interval_s)
    hold = 2 * max(iv, ev)  # two samples in a row, each seen by an evaluation
    wd = spec.deploy.qos.pfc_watchdog
    storm = duration(max(wd.detection_ms / 1000.0, 2 * iv))
    long = duration(max(300.0, 4 * iv))  # the window of the sustained-rate alerts
    port = "{{ $labels.device }} {{ $labels.port }}"
    queue = port + " priority {{ $labels.priority }}"
    return [
        Alert("FabricLinkDown", "links",
              "aifabric_interface_oper_up == 0", 0, "critical",
              f"link {port} -> {{{{ $labels.peer }}}} ({{{{ $labels.tier }}}}) is down",
              "check optics and cable (show interfaces transceiver), then the peer; "
              "traffic has moved to the other ECMP members"),
        Alert("FabricInterfaceErrors", "links",
              f"rate(aifabric_interface_errors_total[{long}]) > 0", 2 * 300.0, "warning",
              f"CRC/FEC errors still counting on {port} ({{{{ $labels.direction }}}})",
              "errors that persist for 10 minutes: clean or replace the optic/cable; "
              "shut the port if the rate grows (RoCE retransmits every loss)"),
        Alert("FabricBgpSessionDown", "bgp",
              "aifabric_bgp_session_up == 0", 0, "critical",
              f"BGP session {port} -> {{{{ $labels.peer }}}} is not Established",
              "vtysh -c 'show bgp summary' on both ends; link down first, then ASN/address "
              "mismatch against the build's frr.conf"),
        Alert("FabricEcmpGroupDegraded", "bgp",
              "aifabric_ecmp_next_hops < aifabric_ecmp_planned_next_hops", hold,
              "warning",
              "ECMP group of {{ $labels.destination }} on {{ $labels.device }} is smaller "
              "than planned",
              "find the missing uplinks (FabricLinkDown, FabricBgpSessionDown); the "
              "remaining members carry the load: watch their utilization"),
        Alert("FabricTwinDrift", "bgp",
              "aifabric_twin_drift != 0", hold, "warning",
              "{{ $labels.device }}: the kernel's next hops to {{ $labels.destination }} "
              "differ from the twin's",
              "compare ip route in the device with aifabric route for the same failures; "
              "a config not from this build, or a failure the twin does not know of"),
        Alert("FabricPfcWatchdogStorm", "roce",
              f"rate(aifabric_pfc_paused_seconds_total[{storm}]) >= 0.99", 0, "critical",
              f"PFC storm: {queue} paused without a break for {storm} (watchdog "
              f"detection {wd.detection_ms} ms)",
              "find the pause source downstream (a stuck NIC or a loop): show pfcwd "
              "stats; the SONiC watchdog action is " + wd.action),
        Alert("FabricPfcPauseSustained", "roce",
              f"rate(aifabric_pfc_paused_seconds_total[{long}]) > {PAUSE_RATIO:g}",
              300.0, "warning",
              f"{queue} paused by PFC more than {PAUSE_RATIO:.0%} of the time",
              "congestion control is not holding queues below Xoff: check ECN/DCQCN "
              "settings on the NICs and incast (all-to-all) jobs behind the port"),
        Alert("FabricEcnMarkRateHigh", "roce",
              f"rate(aifabric_ecn_marked_packets_total[{long}]) > {ECN_MARKS_PER_S}",
              600.0, "warning",
              f"{port} ECN-marks more than {ECN_MARKS_PER_S} packets/s",
              "persistent congestion: find the hottest links of the tier and the jobs "
              "crossing them (collective dashboard); rebalance or spread the jobs"),
        Alert("FabricCnpRateHigh", "roce",
              f"rate(aifabric_cnp_received_total[{long}]) > {CNP_PER_S}", 600.0, "warning",
              f"{port} receives more than {CNP_PER_S} CNPs/s",
              "its senders are held back by DCQCN: look for the congested egress with "
              "FabricEcnMarkRateHigh"),
        Alert("FabricRetransmissions", "roce",
              f"rate(aifabric_retransmitted_bytes_total[{long}]) / ignoring(direction) "
              f"rate(aifabric_interface_bytes_total{{direction=\"tx\"}}[{long}]) "
              f"> {RETX_RATIO:g}", 300.0, "warning",
              f"{port} retransmits more than {RETX_RATIO:.1%} of what it sends",
              "losses on a lossless class: check drops and CRC errors on its path and "
              "the PFC configuration (lossless priority, headroom)"),
        # without these, a dead exporter or a device it cannot read turns every alert
        # above into silence: its series go stale and firing alerts resolve
        Alert("FabricExporterDown", "telemetry",
              'up{job="aifabric"} == 0', hold, "critical",
              "the aifabric exporter at {{ $labels.instance }} does not answer scrapes",
              "restart aifabric monitor lab; until then the link, BGP and ECMP alerts "
              "cannot fire"),
        Alert("FabricTargetUnreadable", "telemetry",
              "aifabric_up == 0", hold, "warning",
              "the exporter cannot read {{ $labels.target }} on {{ $labels.device }}",
              "the device's namespace or daemon does not answer (a frozen bgpd, a "
              "removed namespace): its other series are missing, so its alerts are blind"),
    ]


def render_alerts(spec: Spec, scrape_interval_s: float | None = None,
                  evaluation_interval_s: float | None = None) -> str:
    """``alerts.yml``: every alert of :func:`alert_rules` as a Prometheus rule file."""
    lines = [f"# alert rules of the fabric {_Q(spec.name)}, from aifabric build",
             "# (promtool check rules alerts.yml); the metrics are aifabric's catalog",
             "groups:"]
    groups: dict[str, list[Alert]] = {}
    for a in alert_rules(spec, scrape_interval_s, evaluation_interval_s):
        groups.setdefault(a.group, []).append(a)
    for g, alerts in groups.items():
        lines += [f"  - name: aifabric-{g}", "    rules:"]
        for a in alerts:
            lines += [f"      - alert: {a.name}", f"        expr: {_Q(a.expr)}"]
            if a.for_s:
                lines.append(f"        for: {duration(a.for_s)}")
            lines += ["        labels:", f"          severity: {a.severity}",
                      "        annotations:", f"          summary: {_Q(a.summary)}",
                      f"          runbook: {_Q(a.runbook)}"]
    return "\n".join(lines) + "\n"
