"""``aifabric serve``: the web view of a design, a finished run or the running lab.

The modules: :mod:`.topology` (aggregated graph, drill-down, search — pure numpy over
the Fabric's arrays), :mod:`.loads` (per-arc loads over time from a routed design or a
run folder), :mod:`.twin` (the served model), :mod:`.app` (the FastAPI app) and
``static/`` (the single page). Nothing here is imported by ``aifabric --help``, and the
simulators and routing never import this package (it sits above them).
"""
