"""The running lab, live: link states and rates from counter deltas, BGP sessions."""

from __future__ import annotations

import time
from typing import Any

from aifabric.errors import Problem, SpecError
from aifabric.web.twin.core import TwinCore

__all__ = ["LabView"]


class LabView(TwinCore):
    """lab_state, close."""

    def lab_state(self) -> dict[str, Any]:
        """The running lab now: links (state, rates from counter deltas between calls),
        BGP sessions, which targets answered, the injected failures."""
        if self.mode != "lab":
            raise SpecError(Problem("lab", "not serving a lab; allowed: serve --lab"))
        with self._lab_lock:
            return self._lab_state()

    def _lab_state(self) -> dict[str, Any]:
        from aifabric.telemetry.exporter import LabCollector

        t0 = time.perf_counter()
        if self._collector is None:
            self._collector = LabCollector(self.lab_dir, probes=0)
        sc = self._collector.read()
        now = time.monotonic()
        counters: dict[tuple[str, str], tuple[float, float]] = {}
        links = []
        prev = self._lab_prev
        port_of = self._collector.port_of  # (device, iface) -> labels of a fabric cable
        for dev in sorted(sc.links):  # the lab's devices: tens
            for lk in sc.links[dev]:
                ifname = str(lk.get("ifname", ""))
                labels = port_of.get((dev, ifname))
                if labels is None:
                    continue  # lo, bridges: not a cable of the fabric
                st = lk.get("stats64") or lk.get("stats") or {}
                rx = float((st.get("rx") or {}).get("bytes", 0))
                tx = float((st.get("tx") or {}).get("bytes", 0))
                counters[(dev, ifname)] = (rx, tx)
                rate = (0.0, 0.0)
                if prev is not None and (dev, ifname) in prev[1] and now > prev[0]:
                    p_rx, p_tx = prev[1][(dev, ifname)]
                    dt = now - prev[0]
                    rate = (max(rx - p_rx, 0.0) * 8 / dt, max(tx - p_tx, 0.0) * 8 / dt)
                links.append({"device": dev, "iface": ifname,
                              "up": lk.get("operstate") == "UP",
                              "rx_bps": rate[0], "tx_bps": rate[1], "peer": str(labels[2])})
        self._lab_prev = (now, counters)
        bgp = [{"switch": sw, "peer": peer, "state": str(v.get("state", ""))}
               for sw in sorted(sc.bgp) for peer, v in sorted(sc.bgp[sw].items())]
        return {"links": links, "bgp": bgp, "up": dict(sc.up), "failures": sc.failures,
                "seconds": round(time.perf_counter() - t0, 4)}

    def close(self) -> None:
        """Release the lab collector's threads (lab mode)."""
        if self._collector is not None:
            self._collector.close()
            self._collector = None
