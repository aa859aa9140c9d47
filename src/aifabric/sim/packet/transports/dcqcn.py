"""DCQCN (Zhu et al., SIGCOMM'15) as NVIDIA ConnectX NICs implement it.

Reaction point (sender): a CNP feeds the congestion estimate alpha (updated every
``dce_tcp_rtt`` us: ``alpha = alpha*g + F*(1-g)``, g = dce_tcp_g/1024, F = 1 if a CNP came
in the period) and cuts the rate at most once per ``rate_reduce_monitor_period``:
``rc -= rc * alpha_1024 / 2^rpg_gd`` (at least ``rpg_min_dec_fac`` % kept, never below
``rpg_min_rate``), remembering the target rate rt. The rate then recovers on two clocks, a
timer (``rpg_time_reset`` us) and a byte counter (``rpg_byte_reset`` bytes): while both
stage counters are below ``rpg_threshold`` fast recovery ``rc = (rt + rc)/2``; then
additive increase (rt += ``rpg_ai_rate``), and hyper increase (rt += i x
``rpg_hai_rate``) once both passed it. Notification point (receiver, in the NIC model):
one CNP per QP per ``min_time_between_cnps`` for ECN-marked packets.
"""

from __future__ import annotations

import math
from typing import Any

from aifabric.sim.packet.engine import PS_PER_US

__all__ = ["Dcqcn"]


class Dcqcn:
    """Per-QP DCQCN reaction point; ``rate`` in bit/s."""

    __slots__ = (
        "ai",
        "alpha",
        "bc_stage",
        "byte_count",
        "byte_reset",
        "clamp",
        "cnp_flag",
        "g",
        "gd_div",
        "gen",
        "hai",
        "increased",
        "keep",
        "last_cut",
        "max_rate",
        "min_rate",
        "monitor_ps",
        "net",
        "p_idx",
        "pending",
        "period_ps",
        "qp",
        "rate",
        "rt",
        "t_stage",
        "threshold",
        "time_reset_ps",
        "window",
    )

    def __init__(self, net: Any, qp: Any, p: Any) -> None:
        self.net = net
        self.qp = qp
        line = qp.line_bps
        self.max_rate = min(line, p.rpg_max_rate * 1e6) if p.rpg_max_rate > 0 else line
        self.rate = self.rt = self.max_rate
        self.window = math.inf
        self.ai = p.rpg_ai_rate * 1e6
        self.hai = p.rpg_hai_rate * 1e6
        self.min_rate = min(p.rpg_min_rate * 1e6, self.max_rate)
        self.time_reset_ps = int(p.rpg_time_reset * PS_PER_US)
        self.byte_reset = p.rpg_byte_reset
        self.threshold = p.rpg_threshold
        self.gd_div = float(1 << p.rpg_gd)
        self.keep = p.rpg_min_dec_fac / 100.0
        self.g = p.dce_tcp_g / 1024.0
        self.period_ps = max(int(p.dce_tcp_rtt * PS_PER_US), 1)
        self.alpha = p.initial_alpha_value / 1024.0
        self.monitor_ps = int(p.rate_reduce_monitor_period * PS_PER_US)
        self.clamp = p.clamp_tgt_rate
        self.p_idx = -1  # alpha's update clock starts with the first CNP
        self.cnp_flag = False
        self.last_cut = -(1 << 62)
        self.pending = False
        self.t_stage = self.bc_stage = 0
        self.byte_count = 0
        self.gen = 0
        self.increased = True

    def _sync_alpha(self, now: int) -> None:
        """Apply the alpha updates of the periods that ended before ``now`` (lazily:
        idle periods decay alpha by g each)."""
        k = now // self.period_ps
        if k > self.p_idx:
            g = self.g
            a = self.alpha * g + (1.0 - g) * (1.0 if self.cnp_flag else 0.0)
            n = k - self.p_idx - 1
            if n > 0:
                a *= g ** n
            self.alpha = a
            self.cnp_flag = False
            self.p_idx = k

    def on_cnp(self, now: int) -> None:
        if self.p_idx < 0:  # the first CNP puts the QP under a rate limiter
            self.p_idx = now // self.period_ps
        self._sync_alpha(now)
        self.cnp_flag = True
        if now - self.last_cut >= self.monitor_ps:
            self._cut(now)
        elif not self.pending:
            self.pending = True
            self.net.ev.at(self.last_cut + self.monitor_ps, self._pending_cut, self.gen)

    def _pending_cut(self, gen: int) -> None:
        self.pending = False
        self._cut(self.net.ev.now)

    def _cut(self, now: int) -> None:
        self._sync_alpha(now)
        rc = self.rate
        if self.clamp or self.increased:
            self.rt = rc
        new = rc - rc * (self.alpha * 1024.0) / self.gd_div
        new = max(new, rc * self.keep, self.min_rate)
        self.rate = new
        self.last_cut = now
        self.increased = False
        self.t_stage = self.bc_stage = 0
        self.byte_count = 0
        self.gen += 1
        self.net.ev.at(now + self.time_reset_ps, self._timer, self.gen)

    def _timer(self, gen: int) -> None:
        if gen != self.gen or self.qp.snd_una >= self.qp.size:
            return
        self.t_stage += 1
        self._increase()
        self.net.kick(self.qp.port)
        if self.rate < self.max_rate or self.rt < self.max_rate:
            self.net.ev.at(self.net.ev.now + self.time_reset_ps, self._timer, gen)

    def on_send(self, now: int, nbytes: int) -> None:
        if self.rate >= self.max_rate:
            return
        self.byte_count += nbytes
        if self.byte_count >= self.byte_reset:
            self.byte_count -= self.byte_reset
            self.bc_stage += 1
            self._increase()

    def _increase(self) -> None:
        th = self.threshold
        t, b = self.t_stage, self.bc_stage
        if max(t, b) < th:
            pass  # fast recovery: rt unchanged
        elif min(t, b) > th:
            self.rt += (min(t, b) - th + 1) * self.hai
        else:
            self.rt += self.ai
        if self.rt > self.max_rate:
            self.rt = self.max_rate
        self.rate = (self.rt + self.rate) / 2.0
        self.increased = True

    def on_ack(self, now: int, ack: Any) -> None:
        pass
