"""The scheduled fabric packet by packet (cell by cell): :class:`ScheduledNet` holds the
arrays of one run on a built fabric and drives :func:`~aifabric.sim.packet.scheduled.
kernel.run`.

The fabric it models (``spec.scheduled``): every NIC port is a host port that sends RoCE
frames at its line rate to its edge switch; the edge keeps one VOQ per destination port,
asks the destination port's scheduler for credits and, once granted, cuts frames into
cells sprayed over every shortest path through the fabric-only switches (each fabric
link runs at its rate x ``speedup``); the destination edge reassembles and reorders
them and sends the frames to the host at the port rate. PFC exists only between a host
and its edge (a VOQ at XOFF pauses the host port feeding it); the fabric has no PFC and
no drop: what is granted fits the receiving port's window, so a fabric queue holds at
most the window of the ports it leads to.

Not modelled: ACKs (a flow is done when its last byte reaches the destination host, in
order), host congestion control (the scheduler replaces it), link failures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from aifabric.errors import Problem, SpecError
from aifabric.sim.packet.heap import hpush
from aifabric.sim.packet.scheduled import layout as L
from aifabric.sim.packet.scheduled.kernel import WAIT_BIN_PS as _WAIT_BIN_PS
from aifabric.sim.packet.scheduled.kernel import run as _kernel
from aifabric.sim.paths import arc_latency_ns
from aifabric.topology.fabric import Fabric, LinkKind, NodeKind

__all__ = ["PS_PER_NS", "ScheduledNet"]

PS_PER_NS = 1_000
_WAIT_BINS = 1 << 16


def _grow_rows(a: np.ndarray, rows: int, fill: int = -1) -> np.ndarray:
    out = np.full((rows, *a.shape[1:]), fill, dtype=a.dtype)
    out[:len(a)] = a
    return out


class ScheduledNet:
    """One scheduled-fabric run on ``f`` (whose spec has a ``scheduled`` section) with
    the NIC framing ``mtu``/``header``/``wire`` bytes (a scenario's ``packet.nic``).

    ``log_grants`` keeps every grant ``(time_ps, port, bytes)`` in :attr:`grant_log`
    (tests). Flows are added with :meth:`add_flow` and run with :meth:`run`.
    """

    def __init__(self, f: Fabric, *, mtu: int = 4096, header: int = 62, wire: int = 20,
                 log_grants: bool = False, sched: Any = None) -> None:
        sch = sched if sched is not None else f.spec.scheduled
        if sch is None:
            raise SpecError(Problem("scheduled", "the fabric's spec has no scheduled "
                                    "section"))
        self.f, self.sch = f, sch
        src, dst, cap = f.arcs
        kind = np.repeat(f.links.kind, 2)
        lat_ps = np.round(arc_latency_ns(f) * PS_PER_NS).astype(np.int64)
        nk = f.nodes.kind
        # host ports: one per NIC port, with its access arcs up (to the edge) and down
        up = np.flatnonzero((kind == LinkKind.ACCESS) & (nk[src] == NodeKind.NIC))
        dn = np.flatnonzero((kind == LinkKind.ACCESS) & (nk[dst] == NodeKind.NIC))
        up = up[np.argsort(src[up], kind="stable")]
        dn = dn[np.argsort(dst[dn], kind="stable")]
        if not np.array_equal(src[up], dst[dn]):
            raise SpecError(Problem("scheduled", "the cell model needs exactly one access "
                                    "link per NIC port"))
        self.port_node = src[up].astype(np.int64)
        self.up_arc, self.dn_arc = up, dn
        n = f.n_nodes
        self.port_of = np.full(n, -1, dtype=np.int64)
        self.port_of[self.port_node] = np.arange(len(up))
        edge_nodes = np.unique(dst[up])
        self.edge_nodes = edge_nodes
        EDI = np.full(n, -1, dtype=np.int64)
        EDI[edge_nodes] = np.arange(len(edge_nodes))
        sw_nodes = np.flatnonzero(f.is_switch)
        SWI = np.full(n, -1, dtype=np.int64)
        SWI[sw_nodes] = np.arange(len(sw_nodes))
        P, E = len(up), len(edge_nodes)
        from aifabric.guard import refuse

        # the VOQ table and the next hops toward every edge, before they are allocated
        refuse("scheduled", f"the cell model keeps one VOQ per edge and destination port "
               f"({E:,} x {P:,}) and next hops from every switch to every edge",
               8 * (E * P * L.NVQ + 3 * int(f.is_switch.sum()) * E), None)
        # fabric ports: arcs between switches, at their rate x speedup
        fab = np.flatnonzero(f.is_switch[src] & f.is_switch[dst])
        self.fabric_arcs = fab
        PPBA = np.zeros(len(src))
        PPBA[fab] = 8 * PS_PER_NS / (cap[fab] * sch.speedup)
        AP = np.zeros((len(src), L.NAP), dtype=np.int64)
        AP[:, L.A_HEAD] = AP[:, L.A_TAIL] = AP[:, L.A_FH] = AP[:, L.A_FT] = -1
        AP[:, L.A_DST] = dst
        AP[:, L.A_LAT] = lat_ps
        # next hops: every switch's arcs on a shortest path to every edge
        g = sp.csr_matrix((np.ones(len(fab)), (SWI[src[fab]], SWI[dst[fab]])),
                          shape=(len(sw_nodes), len(sw_nodes)))
        D = shortest_path(g, unweighted=True, indices=SWI[edge_nodes], directed=False)
        su, sv = SWI[src[fab]], SWI[dst[fab]]
        ok = D[:, sv] == D[:, su] - 1  # edge x arc
        # cells never cross another edge switch on their way (edges do not transit)
        ok &= (EDI[dst[fab]] < 0)[None, :] | (EDI[dst[fab]][None, :]
                                               == np.arange(len(edge_nodes))[:, None])
        e_i, a_i = np.nonzero(ok)
        key = su[a_i] * E + e_i
        order = np.lexsort((fab[a_i], key))
        self.NHA = fab[a_i][order].astype(np.int64)
        self.NHP = np.zeros(len(sw_nodes) * E + 1, dtype=np.int64)
        np.cumsum(np.bincount(key, minlength=len(sw_nodes) * E), out=self.NHP[1:])
        reach = np.diff(self.NHP).reshape(len(sw_nodes), E)[SWI[edge_nodes]]
        np.fill_diagonal(reach, 1)
        if (reach == 0).any():
            i, j = np.argwhere(reach == 0)[0]
            raise SpecError(Problem("scheduled", f"edge {f.nodes.name[edge_nodes[i]]} cannot "
                                    f"reach edge {f.nodes.name[edge_nodes[j]]} through "
                                    "fabric-only switches; allowed: a fabric whose edges "
                                    "reach one another over the fabric"))
        self.RR = np.zeros(len(sw_nodes) * E, dtype=np.int64)
        # host ports, their edge, the scheduler of each as a destination
        HP = np.zeros((P, L.NHOST), dtype=np.int64)
        HP[:, L.H_NODE] = self.port_node
        HP[:, L.H_EDGE] = EDI[dst[up]]
        HP[:, L.H_ENODE] = dst[up]
        HP[:, L.H_UPLAT] = lat_ps[up]
        HP[:, L.H_DNLAT] = lat_ps[dn]
        for col in (L.H_PVOQ, L.H_FHEAD, L.H_FTAIL, L.H_EGH, L.H_EGT, L.S_HEAD, L.S_TAIL):
            HP[:, col] = -1
        self.PPBH = 8 * PS_PER_NS / cap[up].astype(np.float64)
        frame = mtu + header
        self.PACE = self.PPBH * (frame + wire) / frame
        cells = math.ceil(frame / (sch.cell_bytes - sch.cell_header_bytes))
        self.cells_per_frame = cells
        frame_share = frame / (cells * sch.cell_bytes)  # frame bytes per reorder byte
        win = min(sch.grant_window_credits * sch.credit_bytes,
                  int(sch.reorder_buffer_bytes * frame_share))
        self.window_bytes = max(win, sch.credit_bytes, frame)
        HP[:, L.S_WIN] = self.window_bytes
        self.HP = HP
        # VOQs: edge x destination port
        VQ = np.zeros((E * P, L.NVQ), dtype=np.int64)
        for col in (L.V_HEAD, L.V_TAIL, L.V_SNEXT, L.V_ROH, L.V_ROT):
            VQ[:, col] = -1
        self.VQ = VQ
        # the host ports of each edge (PFC XON)
        order = np.argsort(HP[:, L.H_EDGE], kind="stable")
        self.EHI = order.astype(np.int64)
        self.EHP = np.zeros(E + 1, dtype=np.int64)
        np.cumsum(np.bincount(HP[:, L.H_EDGE], minlength=E), out=self.EHP[1:])
        C = np.zeros(L.NC, dtype=np.int64)
        C[L.MTU], C[L.HDR], C[L.WIRE] = mtu, header, wire
        C[L.CELL], C[L.CELLH] = sch.cell_bytes, sch.cell_header_bytes
        C[L.CREDIT] = sch.credit_bytes
        C[L.RG_HALF] = sch.request_grant_ns * PS_PER_NS // 2
        rate_max = float(cap[up].max())
        headroom = int(2 * lat_ps[up].max() / PS_PER_NS * rate_max / 8) + 2 * (frame + wire)
        # a VOQ at XOFF pauses each host port whose frame arrives there, which then has
        # at most its headroom in flight: a VOQ fed by k ports of its edge may pass its
        # depth by (k - 1) headrooms (the ports' own ingress accounting is not modelled)
        self.headroom_bytes = headroom
        self.hosts_per_edge = int(np.diff(self.EHP).max())
        C[L.XOFF] = max(sch.voq_depth_bytes - headroom, frame)
        C[L.XON] = max(C[L.XOFF] - 2 * frame, 0)
        C[L.P], C[L.E] = P, E
        C[L.LOG] = int(log_grants)
        C[L.SPRAY] = L.SPRAY_LEAST if sch.spray == "least_loaded" else L.SPRAY_RR
        C[L.MARGIN] = (sch.credit_bytes // (header + 1) + 2) * cells + 16
        C[L.LOG_CAP] = 1 << 16 if log_grants else 0
        self.C = C
        self.AP, self.PPBA, self.EDI, self.SWI = AP, PPBA, EDI, SWI
        self.G = np.zeros(L.NG, dtype=np.int64)
        self.HT = np.zeros((1 << 12, 5), dtype=np.int64)
        self.FR = np.zeros((0, L.NFR), dtype=np.int64)
        self.CE = np.zeros((0, L.NCE), dtype=np.int64)
        self.G[L.FR_FREE] = self.G[L.CE_FREE] = -1
        self._grow_frames(1 << 12)
        self._grow_cells(1 << 14)
        self.FL = np.zeros((0, L.NFL), dtype=np.int64)
        self.n_flows = 0
        self.GL = np.zeros((max(int(C[L.LOG_CAP]), 1), 3), dtype=np.int64)
        self.WH = np.zeros(_WAIT_BINS, dtype=np.int64)
        self.on_done: Callable[[int], None] | None = None
        self.mtu, self.header, self.wire = mtu, header, wire

    # ----------------------------------------------------------------- pools
    def _grow_frames(self, rows: int) -> None:
        old = len(self.FR)
        self.FR = _grow_rows(self.FR, rows, 0)
        new = np.arange(old, rows)
        self.FR[new, L.F_NEXT] = np.append(new[1:], self.G[L.FR_FREE])
        self.G[L.FR_FREE] = old
        self.G[L.FR_NFREE] += rows - old

    def _grow_cells(self, rows: int) -> None:
        old = len(self.CE)
        self.CE = _grow_rows(self.CE, rows, 0)
        new = np.arange(old, rows)
        self.CE[new, L.C_NEXT] = np.append(new[1:], self.G[L.CE_FREE])
        self.G[L.CE_FREE] = old
        self.G[L.CE_NFREE] += rows - old

    def _grow(self) -> None:
        m = 4 * int(self.C[L.MARGIN])
        if self.G[L.FR_NFREE] < m:
            self._grow_frames(2 * len(self.FR) + m)
        if self.G[L.CE_NFREE] < m:
            self._grow_cells(2 * len(self.CE) + m)
        if self.G[L.HSIZE] + m >= len(self.HT):
            self.HT = _grow_rows(self.HT, 2 * len(self.HT) + m, 0)
        if self.C[L.LOG] and self.G[L.NLOG] + 4 >= self.C[L.LOG_CAP]:
            self.C[L.LOG_CAP] *= 2
            self.GL = _grow_rows(self.GL, int(self.C[L.LOG_CAP]), 0)

    # ----------------------------------------------------------------- flows
    @property
    def now_ps(self) -> int:
        return int(self.G[L.NOW])

    @property
    def events(self) -> int:
        return int(self.G[L.COUNT])

    def add_flow(self, src_port: int, dst_port: int, size_bytes: int) -> int:
        """A flow (one QP) of ``size_bytes`` from host port ``src_port`` to
        ``dst_port`` (indices of :attr:`port_node`), starting now; its id."""
        i = self.n_flows
        if i >= len(self.FL):
            self.FL = _grow_rows(self.FL, max(64, 2 * len(self.FL)), -1)
        self.n_flows += 1
        row = self.FL[i]
        row[:] = -1
        row[L.L_SRC], row[L.L_DST] = src_port, dst_port
        row[L.L_SIZE] = row[L.L_LEFT] = max(int(size_bytes), 0)
        row[L.L_RX] = row[L.L_TXSEQ] = row[L.L_RXSEQ] = 0
        row[L.L_START] = self.now_ps
        row[L.L_INLIST] = 0
        if size_bytes <= 0:
            row[L.L_DONE] = self.now_ps
            return i
        hp = self.HP[src_port]
        row[L.L_INLIST] = 1
        if hp[L.H_FTAIL] >= 0:
            self.FL[hp[L.H_FTAIL], L.L_NEXT] = i
        else:
            hp[L.H_FHEAD] = i
        hp[L.H_FTAIL] = i
        if self.G[L.HSIZE] + 4 >= len(self.HT):
            self._grow()
        hpush(self.HT, self.G, self.now_ps, L.E_KICK, src_port, 0)
        return i

    def add_local_flow(self, size_bytes: int) -> int:
        """A flow that never reaches the network (between GPUs of one host): a row in the
        flow table, ports -1, started now; the caller completes it."""
        i = self.n_flows
        if i >= len(self.FL):
            self.FL = _grow_rows(self.FL, max(64, 2 * len(self.FL)), -1)
        self.n_flows += 1
        row = self.FL[i]
        row[:] = -1
        row[L.L_SIZE] = max(int(size_bytes), 0)
        row[L.L_LEFT] = row[L.L_RX] = row[L.L_TXSEQ] = row[L.L_RXSEQ] = row[L.L_INLIST] = 0
        row[L.L_START] = row[L.L_FIRST] = self.now_ps
        return i

    def run(self, until_ps: int | None = None, *, once: bool = False) -> int:
        """Run until nothing is left or ``until_ps``; ``on_done(flow)`` is called as
        each flow delivers its last byte (``once``: return right after the first such
        call). Returns the reason it stopped (``layout.R_*``)."""
        limit = (1 << 62) if until_ps is None else int(until_ps)
        while True:
            r = _kernel(self.G, self.C, self.HT, self.FR, self.CE, self.AP, self.PPBA,
                       self.HP, self.PPBH, self.PACE, self.VQ, self.FL, self.NHP, self.NHA,
                       self.RR, self.SWI, self.EDI, self.EHP, self.EHI, self.GL, self.WH,
                       limit)
            if r == L.R_GROW:
                self._grow()
                continue
            if r == L.R_FLOWDONE:
                if self.on_done is not None:
                    self.on_done(int(self.G[L.RET]))
                if once:
                    return int(r)
                continue
            return int(r)

    # ----------------------------------------------------------------- results
    @property
    def grant_log(self) -> np.ndarray:
        """Rows ``(time_ps, port, bytes)`` of every grant (with ``log_grants``)."""
        return self.GL[:int(self.G[L.NLOG])].copy()

    def flows(self) -> dict[str, np.ndarray]:
        """Per flow: ports, size, start, first frame sent and last byte delivered (ns,
        NaN: not done)."""
        FL = self.FL[:self.n_flows]

        def t(col: int) -> np.ndarray:
            v = FL[:, col].astype(np.float64)
            return np.where(v >= 0, v / PS_PER_NS, np.nan)

        return {"src_port": FL[:, L.L_SRC].copy(), "dst_port": FL[:, L.L_DST].copy(),
                "size_bytes": FL[:, L.L_SIZE].copy(), "start_ns": t(L.L_START),
                "first_tx_ns": t(L.L_FIRST), "done_ns": t(L.L_DONE),
                "delivered_bytes": FL[:, L.L_RX].copy()}

    def metrics(self) -> dict[str, Any]:
        """What the run says about the scheduled fabric (docs/scheduled.md): VOQ depth,
        grant latency, fabric queue occupancy, reorder buffer use, cell overhead, PFC
        toward hosts, the edge ports' queues toward the hosts, and the frames that reached
        a host out of order (none)."""
        G, HP, VQ, AP = self.G, self.HP, self.VQ, self.AP
        sch = self.sch
        used = VQ[:, L.V_MAX] > 0
        vmax = VQ[used, L.V_MAX]
        fq = AP[self.fabric_arcs, L.A_MAXQ]
        n_wait = int(G[L.WAIT_N])
        cum = np.cumsum(self.WH)
        p99 = (float(np.searchsorted(cum, 0.99 * n_wait) + 1) * _WAIT_BIN_PS / PS_PER_NS
               if n_wait else 0.0)
        fab = int(G[L.FAB_BYTES])
        local = int(G[L.LOCAL_FRAMES])
        frames = int(G[L.FRAMES])
        pay = int(G[L.PAY_BYTES])
        paused = HP[:, L.H_PAUSEDPS] + np.where(HP[:, L.H_PAUSED] != 0,
                                                 self.now_ps - HP[:, L.H_PSINCE], 0)
        cell_pay = int(AP[self.fabric_arcs, L.A_TXB].sum())
        return {
            "voq": {"max_bytes": int(vmax.max()) if len(vmax) else 0,
                    "p99_bytes": float(np.percentile(vmax, 99)) if len(vmax) else 0.0,
                    "used": int(used.sum()), "depth_bytes": sch.voq_depth_bytes},
            "grant_latency_ns": {
                "mean": round(float(G[L.WAIT_SUM]) / n_wait / PS_PER_NS, 3) if n_wait
                else 0.0,
                "p99": p99, "max": round(float(G[L.WAIT_MAX]) / PS_PER_NS, 3),
                "request_grant_ns": sch.request_grant_ns},
            "fabric_queue": {"max_bytes": int(fq.max()) if len(fq) else 0,
                             "p99_bytes": float(np.percentile(fq, 99)) if len(fq) else 0.0,
                             "window_bytes": self.window_bytes,
                             "max_outstanding_bytes": int(HP[:, L.S_OUTMAX].max())
                             if len(HP) else 0,
                             "pfc_pauses": 0},
            "reorder": {"max_bytes": int(HP[:, L.H_RBMAX].max()) if len(HP) else 0,
                        "buffer_bytes": sch.reorder_buffer_bytes,
                        "frames_completed_out_of_order": int(G[L.REORDERED]),
                        "frames_delivered_out_of_order": int(G[L.INORDER_BAD])},
            "cells": {"cells": int(G[L.CELLS]), "cells_per_frame": self.cells_per_frame,
                      "fabric_cell_bytes": fab, "cell_bytes_sent_on_links": cell_pay,
                      "frames_through_fabric": frames - local, "frames_local": local,
                      "fabric_payload_bytes": pay,
                      "overhead_bytes": fab - pay,
                      "host_link_overhead_bytes": int(G[L.HOST_OVH])},
            "egress_queue_max_bytes": int(HP[:, L.H_EGQMAX].max()) if len(HP) else 0,
            "pfc_to_hosts": {"pauses": int(G[L.PAUSES]),
                             "paused_ns": float(paused.sum() / PS_PER_NS),
                             "ports_paused": int((HP[:, L.H_PAUSES] > 0).sum())},
            "grants": {"bytes": int(HP[:, L.S_GRANTED].sum()),
                       "idle_credit_excess": int(G[L.CREDIT_BAD])},
            "events": self.events,
        }
