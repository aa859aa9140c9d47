"""The ``scheduled:`` section of a spec: a scheduled Ethernet fabric (China Mobile's GSE,
Broadcom's disaggregated scheduled fabric, DSF) built on a 2- or 3-tier family.

The switches that face the hosts are the *edge* (Jericho-like): each queues the traffic
it receives per destination port (virtual output queues, VOQs), asks the destination's
edge for credits, and sends only what was granted, cut into fixed-size cells sprayed
over every fabric link. The switches above the edge are *fabric elements* (Ramon-like):
they switch cells and carry no host. The egress edge grants credits at the rate its
port drains, puts the cells back in order (its reorder buffer) and hands the hosts
ordinary RoCE frames: PFC and ECN stay on the host-facing ports only.

Every field is documented in ``docs/spec.md`` ("Scheduled fabric") with its range.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from aifabric.spec.base import StrictModel
from aifabric.spec.units import size_value

__all__ = ["SCHEDULED_FAMILIES", "ScheduledFabric", "cell_efficiency", "cells_per_packet",
           "field_error"]

Size = Annotated[int, BeforeValidator(size_value)]

#: families whose hosts reach the fabric through one edge switch per NIC port; HPN puts
#: each NIC behind two ToRs that share its address (the dual-ToR pair is its edge)
SCHEDULED_FAMILIES = ("clos", "rail", "fat_tree", "single_tor", "multiplane")
#: the largest buffer (bytes): 64 GiB, beyond the deepest (HBM) switch buffers
MAX_BUFFER = 1 << 36


def field_error(model: str, field: str, message: str, value: Any) -> ValidationError:
    """A validation error located at ``field`` (so the problem names it), from a
    model-level check."""
    return ValidationError.from_exception_data(model, [InitErrorDetails(
        type=PydanticCustomError("scheduled", message), loc=(field,), input=value)])


class ScheduledFabric(StrictModel):
    """A scheduled fabric: VOQs at the ingress edge, credits from the egress edge, cells
    sprayed over every fabric link, reordering at the egress edge."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    cell_bytes: Size = Field(default=256, ge=64, le=16_384, description="size of one "
                             "cell/container on a fabric link, header included (DSF: 256; "
                             "GSE containers: up to a few KB)")
    cell_header_bytes: int = Field(default=16, ge=1, le=1024, description="cell header "
                                   "(destination port, sequence number, CRC)")
    speedup: float = Field(default=1.2, ge=1.0, le=4.0, description="fabric link rate "
                           "over the nominal rate the topology gives its links (the "
                           "headroom that pays for the cell overhead)")
    request_grant_ns: int = Field(default=1_500, ge=0, le=1_000_000, description="a "
                                  "credit request's trip to the egress edge and the grant's "
                                  "trip back, scheduler time included")
    credit_bytes: Size = Field(default=4_096, ge=64, le=1 << 20, description="bytes one "
                               "credit (grant) lets a VOQ send")
    grant_window_credits: int = Field(default=256, ge=1, le=65_536, description="credits an "
                                      "egress port keeps outstanding (granted, not yet "
                                      "arrived): bounds the fabric queues toward it")
    voq_depth_bytes: Size = Field(default=4 << 20, ge=4_096, le=MAX_BUFFER,
                                  description="one VOQ (ingress edge, per destination port); "
                                  "full: PFC pause toward the sending host")
    reorder_buffer_bytes: Size = Field(default=1 << 20, ge=64, le=MAX_BUFFER,
                                       description="reorder buffer of one egress port; at "
                                       "least one cell per fabric uplink of its edge")
    spray: Literal["round_robin", "least_loaded"] = Field(
        default="round_robin", description="how the ingress edge picks the fabric link of "
        "each cell")
    host_protocol: Literal["roce"] = Field(default="roce", description="what the edge "
                                           "speaks toward the hosts: RoCE, with PFC and ECN "
                                           "on host-facing ports only")

    @model_validator(mode="after")
    def _check(self) -> ScheduledFabric:
        if self.cell_bytes <= self.cell_header_bytes:
            raise field_error("ScheduledFabric", "cell_header_bytes",
                              f"a cell of {self.cell_bytes} bytes cannot hold its "
                              f"{self.cell_header_bytes}-byte header and any payload; "
                              "allowed: cell_header_bytes < cell_bytes",
                              self.cell_header_bytes)
        if self.reorder_buffer_bytes < self.cell_bytes:
            raise field_error("ScheduledFabric", "reorder_buffer_bytes",
                              f"{self.reorder_buffer_bytes} bytes is smaller than one cell "
                              f"({self.cell_bytes} bytes); allowed: at least one cell per "
                              "fabric uplink", self.reorder_buffer_bytes)
        return self

    @property
    def cell_payload_bytes(self) -> int:
        return self.cell_bytes - self.cell_header_bytes


def cells_per_packet(frame_bytes: int, cell_bytes: int, header_bytes: int) -> int:
    """Cells one frame of ``frame_bytes`` is cut into (the last one padded)."""
    return max(1, math.ceil(frame_bytes / (cell_bytes - header_bytes)))


def cell_efficiency(frame_bytes: int, cell_bytes: int, header_bytes: int) -> float:
    """Frame bytes over the fabric bytes that carry them: ``frame / (cells x cell)``."""
    return frame_bytes / (cells_per_packet(frame_bytes, cell_bytes, header_bytes)
                          * cell_bytes)
