"""The lab: a scaled-down copy of a fabric on real routing daemons, on one Linux machine.

``up`` builds the copy (:mod:`~aifabric.lab.scale`) as network namespaces joined by
veth pairs (:mod:`~aifabric.lab.netns`) and starts FRR in every switch with the configs
``aifabric build`` generates (:mod:`~aifabric.lab.daemons`); ``check_lab`` checks BGP
sessions, kernel ECMP groups against the routing model, reachability and hop counts
(:mod:`~aifabric.lab.verify`, :mod:`~aifabric.lab.check`); ``fail`` takes a link or a
switch down and measures convergence (:mod:`~aifabric.lab.inject`); ``down`` removes
every namespace, veth and process the lab made (:mod:`~aifabric.lab.core`).

Needs root, ``ip netns`` and FRR (Debian: ``apt-get install frr iputils-ping``).
"""

from aifabric.lab._system import INSTALL_HINT, LabError, preflight
from aifabric.lab.check import LabTest, check_lab
from aifabric.lab.core import Lab, default_dir, down, lab_namespaces, load_lab, teardown, up
from aifabric.lab.inject import FailResult, fail
from aifabric.lab.netns import lab_prefix
from aifabric.lab.scale import MAX_SWITCHES, SCALES, Scale, parse_scale, scale_fabric, scale_spec

__all__ = [
    "INSTALL_HINT",
    "MAX_SWITCHES",
    "SCALES",
    "FailResult",
    "Lab",
    "LabError",
    "LabTest",
    "Scale",
    "check_lab",
    "default_dir",
    "down",
    "fail",
    "lab_namespaces",
    "lab_prefix",
    "load_lab",
    "parse_scale",
    "preflight",
    "scale_fabric",
    "scale_spec",
    "teardown",
    "up",
]
