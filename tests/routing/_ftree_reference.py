"""The plain-Python routing walk of OpenSM's ftree engine, as aifabric ran it before the
walk was compiled (routing/_ftree_kernel.py): a line-by-line transcription of
``fabric_route_upgoing_by_going_down`` / ``fabric_route_downgoing_by_going_up`` of
``osm_ucast_ftree.c`` (OpenSM 3.3.23) on the engine's own group objects. The tests run
both on the same prepared fabric and require the same bytes."""

from __future__ import annotations

import numpy as np

from aifabric.routing.ftree import NO_PATH, _Group, _Sw


def python_router(sws: list[_Sw], m: int, width: int, leaves: list[int], max_cn: int,
                  own: list[int]) -> np.ndarray:
    """The routing loop of ``ftree_tables`` over :class:`_Router` (the ``router`` hook)."""
    lft = np.full((m, width), NO_PATH, dtype=np.uint8)
    hops = np.full((m, width), NO_PATH, dtype=np.int64)
    r = _Router(sws, lft, hops)
    for s in leaves:
        sw = sws[s]
        routed = 0
        for g in sw.down:
            if g.to_switch:
                continue
            lid = g.remote_lid
            lft[s, lid] = g.ports[0].num
            hops[s, lid] = 1
            r.down_by_up(s, -1, lid, True, 1)
            routed += 1
        for _ in range(max_cn - routed):  # dummy targets: LID 0, counted, then cleared
            hops[s, 0] = 1
            r.down_by_up(s, -1, 0, True, 1)
            hops[:, 0] = NO_PATH
            lft[:, 0] = NO_PATH
    for s in own:
        lid = sws[s].lid
        lft[s, lid] = 0
        hops[s, lid] = 0
        r.down_by_up(s, -1, lid, False, 0)
    return lft


class _Router:
    """OpenSM's two recursions, on shared counters and per-switch hop tables."""

    def __init__(self, sws: list[_Sw], lft: np.ndarray, hops: np.ndarray) -> None:
        self.sws, self.lft, self.hops = sws, lft, hops

    def _index_cmp(self, a: _Group, b: _Group) -> int:
        ta, tb = self.sws[a.remote].tuple, self.sws[b.remote].tuple
        return (ta > tb) - (ta < tb)

    def _cmp_up(self, a: _Group, b: _Group) -> int:
        d = a.counter_up - b.counter_up
        if d:
            return 1 if d > 0 else -1
        return self._index_cmp(a, b)

    def _cmp_down(self, a: _Group, b: _Group) -> int:
        d = a.counter_down - b.counter_down
        if d:
            return 1 if d > 0 else -1
        if self.sws[a.remote].min_counter_down > self.sws[b.remote].min_counter_down:
            return 1
        return self._index_cmp(a, b)

    @staticmethod
    def _bubble(arr: list[_Group], cmp) -> None:
        swapped, i = True, 0
        while swapped:
            swapped = False
            for j in range(1, len(arr) - i):
                if cmp(arr[j], arr[j - 1]) < 0:
                    arr[j - 1], arr[j] = arr[j], arr[j - 1]
                    swapped = True
            i += 1

    def up_by_down(self, s: int, prev: int, lid: int, cur: int) -> bool:
        """fabric_route_upgoing_by_going_down: from ``s`` down every down group."""
        sw = self.sws[s]
        if not sw.down:
            return False
        if sw.counter_up_changed:
            self._bubble(sw.down, self._cmp_up)
            sw.counter_up_changed = False
        created = False
        prev_lid = self.sws[prev].lid if prev >= 0 else -1
        for g in sw.down:
            if not g.to_switch:
                created = True
                continue
            if prev >= 0 and g.remote_lid == prev_lid:
                continue
            if not g.ports:
                continue
            pmin = g.ports[0]
            for p in g.ports[1:]:
                if p.counter_up < pmin.counter_up:
                    pmin = p
            far = g.remote
            least = self.hops[far, lid]
            if least != NO_PATH and cur + 1 >= least:
                continue
            self.lft[far, lid] = pmin.remote_num
            self.hops[far, lid] = cur + 1
            routed = self.up_by_down(far, -1, lid, cur + 1)
            created |= routed
            if routed:
                pmin.counter_up += 1
                g.counter_up += 1
                sw.counter_up_changed = True
        if created:
            sw.down_idx = (sw.down_idx + 1) % len(sw.down)
        return created

    def down_by_up(self, s: int, prev: int, lid: int, main: bool, cur: int) -> bool:
        """fabric_route_downgoing_by_going_up (no reverse hops: no I/O nodes)."""
        created = self.up_by_down(s, prev, lid, cur)
        sw = self.sws[s]
        if sw.rank == 0:
            return created
        self._bubble(sw.up, self._cmp_down)
        lft, hops = self.lft, self.hops
        if main:
            gmin = sw.up[0]
            pmin = gmin.ports[0]
            for p in gmin.ports[1:]:
                if p.counter_down < pmin.counter_down:
                    pmin = p
            far = gmin.remote
            gmin.counter_down += 1
            pmin.counter_down += 1
            fsw = self.sws[far]
            if gmin.counter_down == fsw.min_counter_down + 1:
                fsw.min_counter_down = min((g.counter_down for g in fsw.down),
                                           default=1 << 30)
            if lft[far, lid] == NO_PATH or cur + 1 < hops[far, lid]:
                lft[far, lid] = pmin.remote_num
                hops[far, lid] = cur + 1
            created |= self.down_by_up(far, s, lid, main, cur + 1)
        for i in range(1 if main else 0, len(sw.up)):
            g = sw.up[i]
            far = g.remote
            if lft[far, lid] != NO_PATH and cur + 1 >= hops[far, lid]:
                continue
            if not g.ports:
                continue
            pmin = g.ports[0]
            for p in g.ports[1:]:
                if p.counter_down < pmin.counter_down:
                    pmin = p
            lft[far, lid] = pmin.remote_num
            hops[far, lid] = cur + 1
            created |= self.down_by_up(far, s, lid, False, cur + 1)
        return created
