"""``aifabric serve``: the web view of a design, a finished run or the running lab.

The modules: :mod:`.topology` (aggregated graph, drill-down, search — pure numpy over
the Fabric's arrays), :mod:`.loads` (per-arc loads over time from a routed design or a
run folder), :mod:`.twin` (the served model: a package, one module per part),
:mod:`.app` (the FastAPI app, wiring :mod:`.routes` — one router per area — with
:mod:`.models`, :mod:`.http` and :mod:`.runfolder`) and ``static/`` (the single page:
index.html and its ES modules in ``static/js``, no build step). Nothing here is imported
by ``aifabric --help``, and the simulators and routing never import this package (it
sits above them); it uses :mod:`aifabric.api` and the layers below, never the CLI.
"""
