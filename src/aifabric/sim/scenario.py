"""The simulation scenario: a fabric, a routing policy, jobs and collectives, a simulator.

```yaml
name: allreduce-hpn
spec: ../hpn-pod.yaml            # a cluster spec, relative to this file
routing: {policy: source_port}   # overrides of the spec's routing
sim: flow                        # or analytic
collectives:
  - {op: allreduce, size_bytes: 1GiB, gpus: 1024, channels: 8}
jobs:
  - name: gpt
    gpus: 512
    parallel: {dp: 8, tp: 8, pp: 8}
    model: {params: 175e9, layers: 96, hidden: 12288, seq_len: 2048}
    compute: {fwd_ms_per_layer: 1.2}
```
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_serializer, model_validator

from aifabric.routing.scenario import Scenario
from aifabric.sim.packet.config import PacketConfig
from aifabric.spec.base import StrictModel
from aifabric.spec.names import Name
from aifabric.spec.units import size_value
from aifabric.workload.collectives import ALGORITHMS

__all__ = ["ChakraSpec", "CollectiveSpec", "JobSpec", "SimScenario", "parse_bytes"]


def parse_bytes(v: Any) -> Any:
    """``1GiB``, ``64 MiB``, ``1.5e9`` or an int -> bytes (int); other input unchanged so
    that validation reports it. The grammar: :mod:`aifabric.spec.units` (docs/spec.md,
    "Units"); the fields below use its validator, whose error names the allowed forms."""
    try:
        return size_value(v)
    except ValueError:
        return v


#: the largest size of one collective or transfer: 1 PiB
MAX_BYTES = 1 << 50
Bytes = Annotated[int, BeforeValidator(size_value), Field(gt=0, le=MAX_BYTES)]
#: NCCL's channel limit (MAXCHANNELS)
MAX_CHANNELS = 64
Count = Annotated[int, Field(ge=1, le=1_000_000)]


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


#: the most GPUs a fabric has (= aifabric.spec.models.MAX_GPUS)
MAX_GPUS = 10_000_000
#: a GPU's index among the fabric's active GPUs
GpuIndex = Annotated[int, Field(ge=0, le=MAX_GPUS - 1)]
#: a count, or explicit GPUs (plain types: one error, not one per union member; a count
#: is checked by ``_Placed._count``, explicit GPUs against the fabric's active GPUs)
GpuSel = int | list[int] | list[str]


class _Placed(_Strict):
    gpus: GpuSel = Field(description="a count (placed by `placement`), or explicit GPUs: "
                         "indices among the fabric's active GPUs or GPU names")
    placement: Literal["pack", "spread", "random"] = "pack"
    segments: Count | None = Field(default=None, description="spread: segments used")
    seed: int | None = Field(default=None, ge=0, le=(1 << 64) - 1)

    @model_validator(mode="after")
    def _count(self) -> _Placed:
        if isinstance(self.gpus, int) and not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus must be 1..{MAX_GPUS:,} (a count of GPUs)")
        return self


class CollectiveSpec(_Placed):
    """One collective on a set of GPUs."""

    name: Name | None = None
    op: Literal["allreduce", "reduce_scatter", "allgather", "alltoall", "broadcast", "p2p"]
    algorithm: str | None = None
    size_bytes: Bytes
    channels: int = Field(default=1, ge=1, le=MAX_CHANNELS)
    root: int = Field(default=0, ge=0, le=MAX_GPUS - 1)
    peers: list[GpuIndex] | None = Field(
        default=None, description="p2p: GPU i sends to peers[i] (positions in this "
        "collective's GPU list)")
    chunk_bytes: Annotated[int, BeforeValidator(size_value),
                           Field(ge=1024, le=MAX_BYTES)] = 4 << 20
    start_ms: float = Field(default=0.0, ge=0, le=1e9)
    repeat: int = Field(default=1, ge=1, le=100_000)

    @model_validator(mode="after")
    def _algo(self) -> CollectiveSpec:
        allowed = ALGORITHMS[self.op]
        if self.algorithm is not None and self.algorithm not in allowed:
            raise ValueError(f"{self.op} has no algorithm {self.algorithm!r}; allowed: "
                             f"{', '.join(allowed)}")
        return self


class Parallel(_Strict):
    dp: Count = 1
    tp: Count = 1
    pp: Count = 1
    ep: Count = 1


class ModelSpec(_Strict):
    params: float = Field(default=7e9, gt=0, le=1e15, description="parameters")
    layers: int = Field(default=32, ge=1, le=10_000)
    hidden: int = Field(default=4096, ge=1, le=1_000_000)
    seq_len: int = Field(default=4096, ge=1, le=100_000_000)
    micro_batch: int = Field(default=1, ge=1, le=100_000)
    bytes_per_value: int = Field(default=2, ge=1, le=8)
    moe_every: int = Field(default=0, ge=0, le=10_000, description="every k-th layer is "
                           "MoE; 0 = dense")
    top_k: int = Field(default=2, ge=1, le=1024)


class Compute(_Strict):
    fwd_ms_per_layer: float = Field(default=1.0, ge=0, le=1e6)
    bwd_ms_per_layer: float | None = Field(default=None, ge=0, le=1e6,
                                           description="default 2 x fwd")


class JobSpec(_Placed):
    """A training job: model, parallelism, placement."""

    name: Name | None = None
    parallel: Parallel = Parallel()
    model: ModelSpec = ModelSpec()
    micro_batches: int = Field(default=1, ge=1, le=100_000)
    compute: Compute = Compute()
    dp_algorithm: Literal["ring", "tree", "halving_doubling", "hierarchical",
                          "sharp"] = Field(
        default="ring", description="the DP gradient AllReduce; sharp: reduced in the "
        "InfiniBand switches (flow and packet simulators; ring where the switches' SHARP "
        "limits are full)")
    channels: int = Field(default=1, ge=1, le=MAX_CHANNELS)
    buckets: int = Field(default=4, ge=1, le=10_000)
    iterations: int = Field(default=1, ge=1, le=10_000)


class ChakraSpec(_Strict):
    """A workload read from a Chakra execution trace (one ``NAME.<rank>.et`` per rank),
    its ranks placed on GPUs like a job (:mod:`aifabric.workload.chakra`)."""

    chakra: str = Field(description="a folder of NAME.<rank>.et files (one NAME), or the "
                        "path prefix DIR/NAME; relative to the scenario file")
    ranks: Count | None = Field(default=None, description="ranks to place (default: the "
                                "trace's rank files)")
    placement: Literal["pack", "spread", "random", "explicit"] = "pack"
    gpus: list[GpuIndex] | list[str] | None = Field(
        default=None, description="explicit: the GPU of each rank (indices among the "
        "fabric's active GPUs, or GPU names)")
    segments: Count | None = Field(default=None, description="spread: segments used")
    seed: int | None = Field(default=None, ge=0, le=(1 << 64) - 1)
    gpu_tflops: float | None = Field(default=None, gt=0, le=1e6, description="compute "
                                     "nodes with num_ops take num_ops / this rate; others "
                                     "their duration")
    comm_groups: dict[str, list[GpuIndex]] | None = Field(
        default=None, description="process group name -> ranks (default: the trace "
        "folder's comm_group.json, else the ranks that use the group)")
    channels: int = Field(default=1, ge=1, le=MAX_CHANNELS)

    @model_validator(mode="after")
    def _explicit(self) -> ChakraSpec:
        if self.placement == "explicit" and not self.gpus:
            raise ValueError("placement explicit needs gpus: the GPU of each rank")
        if self.gpus is not None and self.placement != "explicit":
            raise ValueError("gpus is for placement: explicit")
        if self.gpus is not None and self.ranks is not None and len(self.gpus) != self.ranks:
            raise ValueError(f"gpus lists {len(self.gpus)} GPUs for {self.ranks} ranks; "
                             "allowed: one GPU per rank")
        return self


class SimScenario(Scenario):
    """A fabric + routing + traffic, jobs and collectives + the simulator to run them on.

    ``traffic`` patterns (from :class:`~aifabric.routing.scenario.Scenario`) are simulated too:
    each pattern is one stage of point-to-point transfers that start together.
    """

    jobs: list[JobSpec] = Field(default_factory=list)
    collectives: list[CollectiveSpec] = Field(default_factory=list)
    workload: ChakraSpec | None = Field(default=None, description="a Chakra execution "
                                        "trace to run (see ChakraSpec)")
    sim: Literal["flow", "analytic", "packet"] = "flow"
    packet: PacketConfig = Field(default_factory=PacketConfig,
                                 description="sim: packet settings (buffers, PFC, ECN, NIC, CC)")
    tolerance: float = Field(default=1e-2, ge=0, le=0.1,
                             description="flows finishing within this relative time of "
                             "each other finish in one event")
    classes: Literal["auto", "off"] = Field(
        default="auto", description="an All-to-All scenario (one alltoall collective, sim "
        "flow): auto runs it as exact classes of alike transfers with multiplicities "
        "where the routing's symmetry makes them exact (verified), else per transfer; "
        "off: always per transfer")

    @model_serializer(mode="wrap")
    def _default_classes_unsaid(self, handler: Any) -> Any:
        # run.json records the scenario: the default stays out, so records of runs that
        # never set it are what they were before the setting existed
        data = handler(self)
        if isinstance(data, dict) and data.get("classes") == "auto":
            data.pop("classes")
        return data
