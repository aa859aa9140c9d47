"""The ``goodput:`` section of a scenario: failure rates, recovery, checkpoint levels,
horizon and Monte Carlo trials.

.. code-block:: yaml

    goodput:
      job: gpt-13b                 # a job of the scenario (default: the first)
      horizon: 30d                 # durations: 90s, 10min, 4h, 30d, 1y, or seconds
      trials: 1000
      seed: 0
      rates: defaults              # classes not in failures: published defaults (or none)
      failures:                    # per component instance
        gpu: {rate_per_month: 0.00834, repair: 3d}
        tor: {mtbf: 160y}
        software: {rate_per_month: 0}
        host: {rate_per_month: 0.0219, shape: 0.7}   # Weibull: failures bunch early
        job: {rate_per_month: 2}   # per job, whatever its size (software, the scheduler)
      bad_hosts: {fraction: 0.005, rate_per_month: 15, removed_after: 2}
      recovery: {detect: 3min, restart: 10min, swap: 15min, backup_hosts: fabric,
                 scheduler_wait: 20min}
      jobs: all                    # every job of the scenario; cluster ETTR by job size
      checkpoint:
        levels:
          - {name: memory, store: host_memory, every: 10min, save: 2s, restore: 1min}
          - {name: storage, store: storage, every: 2h, save: 5s, upload: 15min,
             restore: 10min}
      sweep: {level: memory, points: 25}

A level's ``save`` is the stall of training while it snapshots; ``upload`` the time the
copy then takes in the background (it is usable only once uploaded); unset times are
derived from the checkpoint size (the job's parameters x ``bytes_per_param``) and the
level's bandwidth (see :mod:`aifabric.reliability.checkpoint`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, model_validator

from aifabric.reliability.rates import CLASSES
from aifabric.sim.scenario import SimScenario
from aifabric.spec.base import StrictModel
from aifabric.spec.names import Name
from aifabric.spec.units import duration_value

__all__ = ["JOB_CLASS", "BadHosts", "CheckpointLevel", "CheckpointSpec", "ClassRate",
           "Duration", "GoodputScenario", "GoodputSpec", "Recovery", "Sweep",
           "horizon_problem", "parse_duration", "shortest_interval_s"]

#: the failure class counted per job, not per component: software, the framework, the
#: scheduler; one rate whatever the job's size (no default: 0 unless given)
JOB_CLASS = "job"

#: the longest duration accepted anywhere: 100 years
MAX_S = 100 * 365 * 86400.0


def parse_duration(v: Any) -> Any:
    """``90s``, ``10min``, ``4h``, ``30d``, ``2w``, ``1y``, ``500ms`` or a number of seconds
    -> seconds (float); other input unchanged so that validation reports it. The grammar:
    :mod:`aifabric.spec.units` (docs/spec.md, "Units"); the fields below use its
    validator, whose error names the allowed forms."""
    try:
        return duration_value(v)
    except ValueError:
        return v


#: a duration >= 0 (seconds, or a string with a unit)
Duration = Annotated[float, BeforeValidator(duration_value), Field(ge=0, le=MAX_S)]
Positive = Annotated[float, BeforeValidator(duration_value), Field(gt=0, le=MAX_S)]


def _percent(v: Any) -> Any:
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            return float(v.strip()[:-1]) / 100
        except ValueError:
            return v
    return v


class _Strict(StrictModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClassRate(_Strict):
    """How often one instance of a class fails, and how long it stays out."""

    rate_per_month: Annotated[float, BeforeValidator(_percent)] | None = Field(
        default=None, ge=0, le=1e6, description="failures per instance per 30 days "
        "(0.00057 or '0.057%')")
    mtbf: Positive | None = Field(default=None, description="mean time between failures "
                                  "of one instance (instead of rate_per_month)")
    repair: Duration | None = Field(default=None, description="time until the part is "
                                    "back (default: per class)")
    shape: Annotated[float, Field(ge=0.2, le=5.0)] = Field(
        default=1.0, description="Weibull shape of the class's failure times, every part "
        "new at the start: 1 = a constant rate (the exponential); < 1 = failures bunch "
        "early (burn-in), > 1 = late (wear-out); the rate stays the mean over the horizon")

    @model_validator(mode="after")
    def _one(self) -> ClassRate:
        if self.rate_per_month is not None and self.mtbf is not None:
            raise ValueError("give rate_per_month or mtbf, not both")
        return self


def _classes(v: Any) -> Any:
    if isinstance(v, dict):
        bad = [k for k in v if k not in (*CLASSES, JOB_CLASS)]
        if bad:
            raise ValueError(f"unknown failure class {bad[0]!r}; allowed: "
                             f"{', '.join((*CLASSES, JOB_CLASS))}")
    return v


class BadHosts(_Strict):
    """Hosts that fail again and again (a bad DIMM, a flaky PCIe link) until a detection
    policy removes them: a few in the cluster, a failure rate far above the host class's.
    Each trial draws how many of the job's hosts are bad (binomial with ``fraction``, or
    ``count``); a bad host's failure interrupts the job and loses its host memory; the
    host is back after ``repair`` (a reboot and health checks that pass) and fails again,
    until its ``removed_after``-th failure: then it is taken out of service and a backup
    host replaces it (as for a failed host)."""

    fraction: Annotated[float, BeforeValidator(_percent), Field(ge=0, le=1)] | None = Field(
        default=None, description="share of the hosts that are bad (0.005 or '0.5%')")
    count: Annotated[int, Field(ge=0, le=100_000)] | None = Field(
        default=None, description="bad hosts in the job (instead of fraction)")
    rate_per_month: Annotated[float, Field(gt=0, le=1e4)] = Field(
        description="failures of one bad host per 30 days")
    repair: Duration = Field(default=3600.0, description="until a failed bad host is back "
                             "(reboot, health checks): default 1h")
    removed_after: Literal["never"] | Annotated[int, Field(ge=1, le=1000)] = Field(
        default=2, description="the detection policy: a host is removed at its n-th "
        "failure (never: not detected)")

    @model_validator(mode="after")
    def _one(self) -> BadHosts:
        if (self.fraction is None) == (self.count is None):
            raise ValueError("give exactly one of fraction, count")
        return self


class Recovery(_Strict):
    """What an interruption costs besides the lost work."""

    detect: Duration = Field(default=180.0, description="until the failure is noticed "
                             "(NCCL timeout, health checks): default 3min")
    restart: Duration = Field(default=600.0, description="relaunch, NCCL init, before the "
                              "checkpoint restore: default 10min")
    swap: Duration = Field(default=900.0, description="swapping a backup host in: "
                           "default 15min")
    backup_hosts: Literal["fabric"] | Annotated[int, Field(ge=0, le=100_000)] = Field(
        default="fabric", description="spare hosts per pool: 'fabric' = the fabric's "
        "standby hosts per segment, or a number")
    spare_scope: Literal["segment", "cluster"] = Field(
        default="segment", description="a spare replaces hosts of its own segment (HPN) "
        "or of any segment (a scheduler's cluster-wide pool)")
    scheduler_wait: Duration = Field(
        default=0.0, description="after every interruption, the wait in the scheduler's "
        "queue before the job has its nodes again: default 0")


class CheckpointLevel(_Strict):
    """One checkpoint level: where it is kept, how often, what it costs."""

    name: Name
    store: Literal["host_memory", "peer_memory", "storage"] = Field(
        description="host_memory is lost with its host; peer_memory and storage survive it")
    every: Positive | None = Field(default=None, description="interval of training "
                                   "progress between checkpoints")
    every_steps: Annotated[int, Field(ge=1, le=10**9)] | None = Field(
        default=None, description="interval in training steps (needs step_time)")
    save: Duration | None = Field(default=None, description="training stall per checkpoint")
    upload: Duration | None = Field(default=None, description="background copy after the "
                                    "stall (usable once done)")
    restore: Duration | None = Field(default=None, description="loading it after a restart")
    gbytes_per_s: Annotated[float, Field(gt=0, le=1e7)] | None = Field(
        default=None, description="bandwidth of the level for derived times, GB/s: per "
        "host (host_memory, peer_memory) or in total (storage)")

    @model_validator(mode="after")
    def _interval(self) -> CheckpointLevel:
        if (self.every is None) == (self.every_steps is None):
            raise ValueError("give exactly one of every, every_steps")
        return self


class CheckpointSpec(_Strict):
    """Checkpoint levels, and what derives the times a level leaves unset."""

    levels: list[CheckpointLevel] = Field(min_length=1, max_length=8)
    bytes_per_param: Annotated[float, Field(gt=0, le=1000)] = Field(
        default=14.0, description="checkpoint bytes per model parameter: bf16 weights (2) + "
        "fp32 master weights (4) + Adam moments (8)")
    host_memory_gbytes_per_s: Annotated[float, Field(gt=0, le=1e7)] = Field(
        default=100.0, description="GPU -> host memory copy per host, GB/s (the stall of "
        "every level)")
    storage_gbytes_per_s: Annotated[float, Field(gt=0, le=1e7)] = Field(
        default=200.0, description="storage network, in total for the job, GB/s")
    storage_from: Literal["given", "frontend"] = Field(
        default="given", description="storage levels' upload and restore: at "
        "storage_gbytes_per_s (given), or simulated on the spec's frontend network "
        "(frontend: the job's hosts write and read the checkpoint on its storage nodes)")

    @model_validator(mode="after")
    def _names(self) -> CheckpointSpec:
        names = [lv.name for lv in self.levels]
        if len(set(names)) != len(names):
            raise ValueError("two checkpoint levels have the same name")
        return self


class Sweep(_Strict):
    """A sweep of one level's checkpoint interval, the other levels' kept. Levels stay
    nested: the most frequent level sweeps over whole fractions of the interval the
    others share (1h / k), another level over whole multiples of the most frequent
    one's; the requested intervals are rounded to those."""

    level: Name | None = Field(default=None, description="default: the first level")
    intervals: list[Positive] | None = Field(default=None, max_length=200,
                                             description="default: around Young's interval")
    points: Annotated[int, Field(ge=3, le=200)] = 25
    trials: Annotated[int, Field(ge=1, le=1_000_000)] = Field(
        default=250, description="trials per sweep point (at most goodput.trials); all "
        "points see the same failures")


class GoodputSpec(_Strict):
    """The ``goodput:`` section."""

    job: Name | None = Field(default=None, description="the job (default: the first)")
    horizon: Positive = Field(default=30 * 86400.0, description="wall-clock time simulated")
    trials: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    seed: Annotated[int, Field(ge=0, le=(1 << 63) - 1)] = 0
    step_time: Positive | None = Field(default=None, description="one training step, for "
                                       "every_steps (default: the flow model's iteration)")
    rates: Literal["defaults", "none"] | None = Field(
        default=None, description="the classes not in failures: 'defaults' (the published "
        "defaults of aifabric.reliability.rates) or 'none' (they never fail); unset: "
        "defaults, and the report says so")
    failures: Annotated[dict[str, ClassRate], BeforeValidator(_classes)] = Field(
        default_factory=dict, description="per class: rate and repair; others: see rates")
    bad_hosts: BadHosts | None = Field(default=None, description="hosts that fail "
                                       "repeatedly until removed (none by default)")
    jobs: Literal["all"] | Annotated[list[Name], Field(min_length=1, max_length=1000)] | None \
        = Field(default=None, description="several jobs at once: 'all' or their names; "
                "the report adds each job's ETTR and the cluster's, weighted by GPUs")
    recovery: Recovery = Recovery()
    checkpoint: CheckpointSpec
    slowdown: Literal["flow", "none"] = Field(
        default="flow", description="slowdown of a degraded job (a dual-ToR port lost): "
        "simulated with the flow model, or none")
    sweep: Sweep | None = Field(default_factory=Sweep, description="null: no sweep")

    @model_validator(mode="after")
    def _consistent(self) -> GoodputSpec:
        """A swept level that exists, and a horizon that holds a checkpoint: found at
        load, before the routing and flow models run."""
        names = [lv.name for lv in self.checkpoint.levels]
        if self.sweep is not None and self.sweep.level is not None \
                and self.sweep.level not in names:
            raise ValueError(f"sweep.level: no level {self.sweep.level!r}; allowed: "
                             f"{', '.join(names)}")
        why = horizon_problem(self, self.horizon)
        if why:
            raise ValueError(f"horizon: {why}")
        if isinstance(self.jobs, list) and len(set(self.jobs)) != len(self.jobs):
            raise ValueError("jobs: a job is named twice")
        return self


def shortest_interval_s(gp: GoodputSpec) -> float | None:
    """The most frequent checkpoint level's interval in seconds, where it is known
    without the flow model (``every``, or ``every_steps`` with ``step_time``)."""
    known = [lv.every if lv.every is not None
             else (lv.every_steps * gp.step_time if gp.step_time is not None
                   and lv.every_steps is not None else None)
             for lv in gp.checkpoint.levels]
    given = [float(x) for x in known if x is not None]
    return min(given) if given else None


def horizon_problem(gp: GoodputSpec, horizon_s: float,
                    interval_s: float | None = None) -> str | None:
    """Why ``horizon_s`` cannot be simulated (None when it can): it must hold one
    checkpoint interval of the most frequent level (``interval_s``, or the one
    :func:`shortest_interval_s` knows), else the run would report no checkpoint, no
    failure and an ETTR of 1."""
    every = interval_s if interval_s is not None else shortest_interval_s(gp)
    if every is None or horizon_s >= every:
        return None
    return (f"{_dur(horizon_s)} is shorter than one checkpoint interval ({_dur(every)}); "
            f"allowed: a horizon of at least {_dur(every)} (a training run: days, like "
            "30d)")


def _dur(s: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if s >= size:
            return f"{s / size:.4g}{unit}"
    return f"{s:.4g}s"


class GoodputScenario(SimScenario):
    """A simulation scenario (fabric, jobs) with a ``goodput:`` section."""

    goodput: GoodputSpec
