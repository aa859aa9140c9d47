"""Checkpoint levels as the engine needs them: interval, stall, upload, restore in seconds.

Times a level leaves unset are derived from the checkpoint's size and bandwidths:

* size = the job's parameters x ``bytes_per_param`` (default 14: bf16 weights, fp32
  master weights and two Adam moments), sharded evenly over the job's hosts;
* ``save`` (the stall) = one host's shard / ``host_memory_gbytes_per_s`` — every level
  first snapshots GPU memory to host memory; what follows is asynchronous;
* ``upload`` (in the background): host_memory none; peer_memory the shard over the
  host's scale-out NICs (the fabric's ports of that host, or ``gbytes_per_s``); storage
  the whole checkpoint over ``storage_gbytes_per_s`` (or the level's ``gbytes_per_s``);
* ``restore``: the shard from host memory, from a peer over the NICs, or the whole
  checkpoint from storage.

Levels are nested: every level's interval must be a whole multiple of the most frequent
one's (as "in memory every N steps, to storage every k x N steps"), and no level may need
as long as its interval to save and upload (it could never finish).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from aifabric.errors import Problem, SpecError
from aifabric.reliability.spec import CheckpointSpec

__all__ = ["ResolvedLevel", "nest", "resolve_levels"]


@dataclass(frozen=True)
class ResolvedLevel:
    name: str
    store: str
    every_s: float
    save_s: float
    upload_s: float
    restore_s: float

    @property
    def host_memory(self) -> bool:
        return self.store == "host_memory"


def resolve_levels(ck: CheckpointSpec, *, params: float, hosts: int, nic_gbytes_per_s: float,
                   step_s: float | None, where: str = "goodput.checkpoint",
                   storage_write_gbytes_per_s: float | None = None,
                   storage_read_gbytes_per_s: float | None = None) -> list[ResolvedLevel]:
    """Every level with all its times in seconds (SpecError listing every problem).
    ``storage_write/read_gbytes_per_s``: the storage rates simulated on the frontend
    network (``storage_from: frontend``), in place of ``storage_gbytes_per_s``."""
    total = params * ck.bytes_per_param
    shard = total / max(hosts, 1)
    snap = shard / (ck.host_memory_gbytes_per_s * 1e9)
    out: list[ResolvedLevel] = []
    problems: list[Problem] = []
    for i, lv in enumerate(ck.levels):
        at = f"{where}.levels.{i}"
        if lv.every is not None:
            every = float(lv.every)
        elif step_s is None:
            problems.append(Problem(f"{at}.every_steps", "needs a step time; allowed: "
                                    "goodput.step_time, or every: a duration"))
            continue
        else:
            every = float(lv.every_steps or 1) * step_s
        if lv.store == "host_memory":
            bw, up_bytes, rest_bytes = lv.gbytes_per_s or ck.host_memory_gbytes_per_s, 0.0, shard
        elif lv.store == "peer_memory":
            bw, up_bytes, rest_bytes = lv.gbytes_per_s or nic_gbytes_per_s, shard, shard
        else:
            bw, up_bytes, rest_bytes = lv.gbytes_per_s or ck.storage_gbytes_per_s, total, total
        up_bw = rest_bw = bw
        if lv.store == "storage" and lv.gbytes_per_s is None:  # simulated on the frontend
            up_bw = storage_write_gbytes_per_s or bw
            rest_bw = storage_read_gbytes_per_s or bw
        save = float(lv.save) if lv.save is not None else snap
        upload = float(lv.upload) if lv.upload is not None else up_bytes / (up_bw * 1e9)
        restore = float(lv.restore) if lv.restore is not None else rest_bytes / (rest_bw * 1e9)
        if save + upload >= every:
            problems.append(Problem(at, f"level {lv.name!r} is slower than its interval: "
                                    f"save {save:.4g} s + upload {upload:.4g} s >= every "
                                    f"{every:.4g} s; allowed: a longer interval, or a faster "
                                    "save/upload"))
            continue
        out.append(ResolvedLevel(lv.name, lv.store, every, save, upload, restore))
    if problems:
        raise SpecError(problems)
    return out


def nest(levels: list[ResolvedLevel],
         where: str = "goodput.checkpoint") -> tuple[float, np.ndarray]:
    """The base interval (the most frequent level's) and each level's multiple of it."""
    base = min(lv.every_s for lv in levels)
    mult = []
    for i, lv in enumerate(levels):
        r = lv.every_s / base
        m = round(r)
        if abs(r - m) > 1e-6 * r:
            raise SpecError(Problem(f"{where}.levels.{i}.every", f"{lv.every_s:g} s is not a "
                                    f"whole multiple of the most frequent level's "
                                    f"{base:g} s; allowed: nested levels ({m} x or "
                                    f"{m + 1} x {base:g} s)"))
        mult.append(m)
    return base, np.array(mult, dtype=np.int64)
