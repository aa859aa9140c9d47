"""Print the "Physical ranges" table of docs/spec.md: every numeric field of the spec and
of the route, simulate and goodput scenarios with its bounds (aifabric.spec.ranges)."""

from __future__ import annotations

from aifabric.reliability.spec import GoodputScenario
from aifabric.routing.scenario import Scenario
from aifabric.sim.scenario import SimScenario
from aifabric.spec.models import Spec
from aifabric.spec.ranges import markdown

#: the models whose numbers are listed (a goodput scenario holds a simulate scenario,
#: which holds the spec's fields)
MODELS = [Spec, Scenario, SimScenario, GoodputScenario]

if __name__ == "__main__":
    print(markdown(MODELS), end="")
