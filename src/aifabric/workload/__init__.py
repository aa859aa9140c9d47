"""Workloads: training jobs placed on GPUs, compiled into DAGs of transfers."""

from aifabric.workload.collectives import ALGORITHMS, OPS, add_collective, busbw_factor
from aifabric.workload.dag import Collective, DAGBuilder, TransferDAG

__all__ = ["ALGORITHMS", "OPS", "Collective", "DAGBuilder", "TransferDAG", "add_collective",
           "busbw_factor"]
