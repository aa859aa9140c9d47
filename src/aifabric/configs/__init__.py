"""From design to deployment: every file needed to cable and configure a fabric.

:func:`render_build` yields ``(relative path, text)`` for the whole build folder:
per switch its SONiC ``config_db.json`` and FRR ``frr.conf`` (HPN ToRs also
``lacp.json``), per host ``nic-setup.sh``, ``nccl-topo.xml`` and ``nccl.env``, and
fabric-wide ``cabling.csv``, ``addressing.csv``, ``bom.csv``, ``LLD.md`` and the
``spec.yaml`` it came from (which ``aifabric check`` reads back), and more files the
caller renders from the same context (``extra``: ``aifabric build`` adds the
``monitoring/`` of :mod:`aifabric.telemetry.monitoring`). :func:`write_build`
writes it into a temporary folder and moves it into place, so bad input or a failure
leaves nothing half-written. Every value comes from the Fabric and the spec.
"""

from aifabric.configs.addressing import AddressPlan, ip_str, plan_addresses
from aifabric.configs.build import BuildContext, build_files, render_build, write_build

__all__ = ["AddressPlan", "BuildContext", "build_files", "ip_str", "plan_addresses",
           "render_build", "write_build"]
