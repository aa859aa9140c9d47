"""The page of ``aifabric serve`` in a real headless Chromium (issue 14's browser tests).

Each test drives the page like a user (clicks on the graph canvas, the tabs, the
search box, the what-if form) against a real ``aifabric serve`` subprocess, and checks
what the page shows against an independent source: the built Fabric, the routing model
or ``aifabric route``'s own JSON. Every page must stay on its origin (no CDN) and log no
console or page error. Screenshots of each view go to the folder the ``shots`` fixture
prints.
"""

from __future__ import annotations

import csv
import ipaddress
import itertools
import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from aifabric import build_fabric, load_spec
from aifabric.topology.fabric import NodeKind

from .conftest import Probe, Served, open_page

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
HPN = EXAMPLES / "hpn-pod.yaml"
ALLREDUCE = EXAMPLES / "scenarios" / "allreduce-hpn.yaml"
TOR_FAILURE = EXAMPLES / "scenarios" / "hpn-tor-failure.yaml"
HOSTILE = "<img src=x onerror=window.__pwned=1>"

#: the issue's numbers (page interactive < 3 s, what-if of a ToR < 2 s) are held by
#: benchmarks/bench_web.py; the tests allow 3x them: a CI machine's 2 cores run the
#: server, Chromium and other tests at once, and a slow page or what-if (a regression:
#: seconds to tens of seconds) still fails
READY_S = 3 * 3.0
WHATIF_S = 3 * 2.0


@pytest.fixture(scope="module")
def hpn_fabric() -> Any:
    return build_fabric(load_spec(HPN))


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``aifabric simulate allreduce-hpn.yaml --out RUN`` (the real CLI, ~10 s, once)."""
    out = tmp_path_factory.mktemp("sim") / "run"
    proc = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(ALLREDUCE),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def run_server(start_serve: Any, sim_run: Path) -> Served:
    return start_serve(sim_run)


def click_node(probe: Probe, cy: str, selector: str) -> str:
    """Click (with the mouse, on the canvas) the first node of ``cy`` matching ``selector``;
    its id."""
    page = probe.page
    where = page.evaluate(
        """([cy, sel]) => {
             const c = window.aifabric[cy]; const n = c.nodes(sel)[0];
             const p = n.renderedPosition(); const r = c.container().getBoundingClientRect();
             return {id: n.id(), x: r.left + p.x, y: r.top + p.y};
           }""", [cy, selector])
    page.mouse.click(where["x"], where["y"])
    return where["id"]


def show_tab(probe: Probe, view: str) -> None:
    probe.page.click(f"#tabs button[data-view={view}]")
    probe.page.wait_for_function(
        "(v) => window.aifabric.state.view === v && window.aifabric.state.pending === 0", arg=view)


def shoot(probe: Probe, shots: Path, name: str) -> None:
    probe.page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    assert (shots / f"{name}.png").stat().st_size > 1000


@pytest.fixture
def closing() -> Iterator[list[Probe]]:
    """Pages opened by a test, closed (with their context) at its end."""
    probes: list[Probe] = []
    yield probes
    for p in probes:
        p.page.context.close()


# ------------------------------------------------------------------ 1. topology
def test_topology_loads_drills_and_searches(browser: Any, start_serve: Any, hpn_fabric: Any,
                                            shots: Path, closing: list[Probe]) -> None:
    served = start_serve(HPN)
    probe = open_page(browser, served)
    wall = probe.ready_wall_s
    closing.append(probe)
    page = probe.page
    ready_ms = page.evaluate("window.aifabric.state.readyMs")
    print(f"\npage ready: {ready_ms:.0f} ms after navigation start "
          f"(wall clock from goto: {wall:.2f} s)")
    assert ready_ms < READY_S * 1000
    assert wall < READY_S

    # the overview: aggregates (groups with member counts) of every switch tier and hosts
    groups = page.evaluate("window.aifabric.cy.nodes().map(n => [n.data('kind'), n.data('count')])")
    kinds = {k for k, _ in groups}
    assert {"host", "tor", "agg", "core"} <= kinds
    assert all(c is not None and c >= 1 for _, c in groups)
    n_tors = int((hpn_fabric.nodes.kind == NodeKind.TOR).sum())
    assert sum(c for k, c in groups if k == "tor") == n_tors
    assert max(c for _, c in groups) > 1
    shoot(probe, shots, "topology-overview")

    # drill into segment 0 by clicking one of its groups on the canvas
    click_node(probe, "cy", "[drill = 0][kind = 'tor']")
    page.wait_for_function("() => window.aifabric.state.topo.segment === 0 && "
                           "window.aifabric.state.pending === 0")
    tors = page.evaluate("window.aifabric.cy.nodes(\"[kind = 'tor']\").map(n => n.data('name'))")
    n = hpn_fabric.nodes
    want = n.name[(n.kind == NodeKind.TOR) & (n.segment == 0)]
    assert len(want) == 16
    assert sorted(tors) == sorted(want.tolist())
    # 16 ToRs side by side: short labels ("r0-a"), none overlapping another on screen
    boxes = page.evaluate("window.aifabric.cy.nodes(\"[kind = 'tor']\").map(n => [n.data('label'),"
                          " n.renderedBoundingBox({includeNodes: false, includeEdges: false,"
                          " includeLabels: true})]).sort((a, b) => a[1].x1 - b[1].x1)")
    assert [lb for lb, _ in boxes] == [t.split("-", 2)[2] for t in sorted(want.tolist())]
    assert all(a["x2"] <= b["x1"] for (_, a), (_, b) in itertools.pairwise(boxes))
    # colour per link, with a legend: a group of uplinks (60 links each) is coloured by
    # its hottest link (the default, max), never by its sum: no figure drawn exceeds the
    # fabric's hottest single link, and the access links are not washed out
    scale = page.evaluate("""() => { const cy = window.aifabric.cy; const box =
        document.getElementById('topo-scale'); const acc = cy.edges("[tier = 'access']")
        .map(e => e.data('per_link')); return {shown: !box.hidden, max: Number(box.dataset.max),
        text: box.textContent, drawn: Math.max(...cy.edges().map(e => e.data('per_link'))),
        access: Math.max(...acc)}; }""")
    assert scale["shown"] and "per link" in scale["text"]
    hottest = served.get(f"api/heatmap?metric={page.evaluate('window.aifabric.state.topo.metric')}"
                         "&k=1")["hottest"][0]["value"]
    assert scale["max"] == scale["drawn"] <= hottest and scale["access"] > 0, scale
    shoot(probe, shots, "topology-segment0")

    # search a host by name: it is highlighted (in its segment)
    page.fill("#search", "host-s00-h001")
    page.press("#search", "Enter")
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.cy.$('node.highlight').length > 0")
    hl = page.evaluate("window.aifabric.cy.$('node.highlight').map(n => n.data('name'))")
    assert hl == ["host-s00-h001"]

    # search a NIC's IP (from the Fabric): its host in segment 1 is highlighted
    nic = np.flatnonzero((n.kind == NodeKind.NIC) & (n.segment == 1) & (n.ip != 0))[5]
    ip = str(ipaddress.ip_address(int(n.ip[nic])))
    host = str(n.name[(n.kind == NodeKind.HOST) & (n.host == n.host[nic])][0])
    page.fill("#search", ip)
    page.press("#search", "Enter")
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.state.topo.segment === 1 && "
                           "window.aifabric.cy.$('node.highlight').length > 0")
    hl = page.evaluate("window.aifabric.cy.$('node.highlight').map(n => n.data('name'))")
    assert host in hl, (ip, host, hl)
    shoot(probe, shots, "topology-search")

    # the heatmap of the design draws its tier table
    show_tab(probe, "heatmap")
    assert page.locator("#heat-tiers tbody tr").count() > 0
    shoot(probe, shots, "heatmap-design")
    probe.assert_clean()


# ------------------------------------------------------------------ 2. trace
def test_trace_collective_highlights_its_links(browser: Any, run_server: Served, sim_run: Path,
                                               shots: Path, closing: list[Probe]) -> None:
    from aifabric.web.twin import Twin

    probe = open_page(browser, run_server)
    closing.append(probe)
    page = probe.page
    show_tab(probe, "trace")
    options = page.evaluate("Array.from(document.querySelectorAll('#trace-select option'))"
                            ".map(o => o.value).filter(Boolean)")
    coll = [json.loads(v) for v in options if json.loads(v)[0] == "collective"]
    assert coll, options
    page.select_option("#trace-select", json.dumps(coll[0], separators=(",", ":")))
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.traceCy.edges().length > 0")
    drawn = page.evaluate("window.aifabric.traceCy.edges().map(e => e.data('arc'))")
    twin = Twin.open(sim_run)
    want = twin.trace_arcs(collective=coll[0][1])
    assert page.evaluate("window.aifabric.state.trace.data.truncated") is None
    assert sorted(drawn) == sorted(int(a) for a in want)
    assert len(drawn) == len(set(drawn))
    # and the bytes drawn on each arc are the run's own collective_links.csv rows for
    # that collective (sim.results.collective_links: another code path than the twin's)
    sel = str(coll[0][1])
    cname = next(c["name"] for c in twin.traces()["collectives"]
                 if sel in (c["name"], str(c["id"])))
    with (sim_run / "collective_links.csv").open(newline="") as fh:
        rows = {(int(r["link"]), r["direction"]): int(r["bytes"]) for r in csv.DictReader(fh)
                if r["collective"] == cname}
    on_page = page.evaluate("window.aifabric.traceCy.edges().map(e => [e.data('link'), "
                            "e.data('arc') % 2 ? 'down' : 'up', e.data('bytes')])")
    got = {(int(lk), d): round(b) for lk, d, b in on_page if round(b) > 0}
    assert rows and got == rows
    # the bottleneck is drawn red and named
    assert page.evaluate("window.aifabric.traceCy.edges('.bottleneck').length") >= 1
    assert "Bottleneck" in page.text_content("#trace-bottleneck")
    assert page.is_visible("#trace-scale") and page.is_hidden("#trace-truncated")
    # hop by hop: the flow through the bottleneck (shown first), then another picked;
    # each table has the flow's path in the routing model, hop for hop, the bottleneck
    # hop marked
    routed = twin._state(()).routed
    paths = page.evaluate("window.aifabric.state.trace.data.paths")
    first = next(i for i, p in enumerate(paths) if p["bottleneck"])
    assert page.input_value("#trace-flow") == str(first)
    for pick in (first, 0 if first else len(paths) - 1):
        if pick != first:
            page.select_option("#trace-flow", str(pick))
        arcs = routed.path_arcs(paths[pick]["flow"])
        rows = page.locator("#trace-hops tbody tr")
        assert rows.count() == len(arcs) == paths[pick]["hops"]
        marked = page.evaluate("Array.from(document.querySelectorAll('#trace-hops tbody tr'))"
                               ".map(r => r.classList.contains('bottleneck'))")
        b = page.evaluate("window.aifabric.state.trace.data.bottleneck.arc")
        assert marked == (arcs == b).tolist()
        assert any(marked) == (pick == first or paths[pick]["bottleneck"])
    shoot(probe, shots, "trace")
    probe.assert_clean()


# ------------------------------------------------------------------ 3. what-if
def test_whatif_tor_failure_matches_route(browser: Any, start_serve: Any, tmp_path: Path,
                                          shots: Path, closing: list[Probe]) -> None:
    scen = yaml.safe_load(TOR_FAILURE.read_text())
    scen.pop("failures")
    scen["spec"] = str(HPN)
    path = tmp_path / "hpn-tor-nofail.yaml"
    path.write_text(yaml.safe_dump(scen))
    served = start_serve(path)
    route = subprocess.run([sys.executable, "-m", "aifabric", "route", str(TOR_FAILURE),
                            "--json"], capture_output=True, text=True, timeout=120)
    assert route.returncode == 0, route.stderr[-2000:]
    want = json.loads(route.stdout)["failures"]

    probe = open_page(browser, served)
    closing.append(probe)
    page = probe.page
    show_tab(probe, "heatmap")
    tiers_before = page.text_content("#heat-tiers")

    # fail the ToR from the segment view: click it on the canvas, then "fail this switch"
    show_tab(probe, "topology")
    click_node(probe, "cy", "[drill = 0][kind = 'tor']")
    page.wait_for_function("() => window.aifabric.state.topo.segment === 0 && "
                           "window.aifabric.state.pending === 0")
    click_node(probe, "cy", "[name = 'tor-s00-r0-a']")
    page.click("#topo-detail button.fail")
    page.wait_for_function("() => window.aifabric.state.whatif !== null && "
                           "window.aifabric.state.pending === 0")
    seconds = page.evaluate("window.aifabric.state.whatif.pageMs") / 1000
    server_s = page.evaluate("window.aifabric.state.whatif.seconds")
    print(f"\nwhat-if tor-s00-r0-a answered in {seconds:.2f} s (page clock; "
          f"server {server_s:.2f} s)")
    shown = {k: page.text_content(f"#whatif-counts dd[data-key={k}]")
             for k in want["flows"]}
    assert {k: int(v.replace(",", "")) for k, v in shown.items()} == want["flows"]
    links_down = int(page.text_content("#whatif-counts dd[data-key=links_down]").replace(",", ""))
    assert links_down == want["impact"]["links_down"]
    # the moved flows table: some rows (the first 200 at most), each path changed
    moved = page.evaluate("Array.from(document.querySelectorAll('#whatif-moved tbody tr'))"
                          ".map(r => Array.from(r.cells).map(c => c.textContent))")
    assert 0 < len(moved) <= 200
    assert all(row[3] != row[4] for row in moved)
    assert page.text_content("#fail-list") == "tor-s00-r0-a"
    # an empty result says why instead of showing an empty table (dual-ToR: no GPU pair
    # loses its last path with one ToR down)
    assert want["flows"]["newly_unreachable"] == 0
    assert page.locator("#whatif-unreachable tbody tr").count() == 0
    assert "No GPU pair became unreachable" in page.text_content("#whatif-unreachable caption")
    assert page.locator("#whatif-moved caption").count() == 0  # it has rows
    shoot(probe, shots, "whatif")

    # the heatmap re-queries with the failure: its tier table changes
    show_tab(probe, "heatmap")
    assert page.text_content("#heat-tiers") != tiers_before
    assert f"{links_down} links down" in page.text_content("#heat-links-label")
    shoot(probe, shots, "heatmap-failed")
    # and the topology shows the failed links as down, every one of them: in segment 0
    # (where the ToR was clicked) its access links one by one plus its uplinks per group,
    # then in the overview's groups
    count_down = ("() => window.aifabric.cy.edges().map(e => (e.data('links_down') || 0)"
                  " + (e.data('alive') === false ? 1 : 0)).reduce((a, b) => a + b, 0)")
    show_tab(probe, "topology")
    assert page.evaluate("window.aifabric.state.topo.segment") == 0
    assert page.evaluate(count_down) == links_down
    assert page.evaluate("window.aifabric.cy.$(\"[name = 'tor-s00-r0-a']\").hasClass('down')")
    shoot(probe, shots, "segment-failed")
    page.click("#crumbs a")
    page.wait_for_function("() => window.aifabric.state.topo.segment === null && "
                           "window.aifabric.state.pending === 0")
    assert page.evaluate(count_down) == links_down
    assert page.evaluate("window.aifabric.cy.nodes().filter(n => n.data('down') > 0).length") >= 1
    shoot(probe, shots, "topology-failed")
    probe.assert_clean()
    # the number, checked last so that the checks above always run
    assert seconds < WHATIF_S


# ------------------------------------------------------------------ 4. hostile name
def test_hostile_name_is_text(browser: Any, start_serve: Any, sim_run: Path,
                              tmp_path: Path, shots: Path, closing: list[Probe]) -> None:
    run = tmp_path / HOSTILE
    shutil.copytree(sim_run, run)
    (run / "run.json").unlink()  # no topology: the run view alone, quick to serve
    report = run / "report.md"
    report.write_text(f"# {HOSTILE}\n\n{HOSTILE}\n\n" + report.read_text())
    shutil.copy(run / "jobs.csv", run / f"{HOSTILE}.csv")
    served = start_serve(run)
    probe = open_page(browser, served)
    closing.append(probe)
    page = probe.page
    show_tab(probe, "run")
    body = page.text_content("body")
    assert HOSTILE in body
    assert page.text_content("#twin-name") == HOSTILE or HOSTILE in page.text_content("#run-files")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.evaluate("document.querySelectorAll('img[src=\"x\"]').length") == 0
    shoot(probe, shots, "hostile")
    probe.assert_clean()


# ------------------------------------------------------------------ 5. run view
def test_run_view(browser: Any, run_server: Served, sim_run: Path, shots: Path,
                  closing: list[Probe]) -> None:
    probe = open_page(browser, run_server)
    closing.append(probe)
    page = probe.page
    show_tab(probe, "run")
    assert "allreduce-hpn" in page.text_content("#run-report h1")
    page.wait_for_function("() => Array.from(document.querySelectorAll('#view-run img'))"
                           ".some(i => i.complete && i.naturalWidth > 0)")
    rows = page.locator("#run-table tbody tr").count()
    name = page.text_content("#run-table-title")
    table = name.split()[1]
    with (sim_run / table).open(newline="") as fh:
        lines = list(csv.reader(fh))
    assert rows == min(100, len(lines) - 1) and rows > 0
    first = page.locator("#run-table tbody tr").first.locator("td").all_text_contents()
    assert first == lines[1]
    shoot(probe, shots, "run")
    probe.assert_clean()


# ------------------------------------------------------- colour: the hottest link shows
def test_the_hottest_link_of_a_run_is_the_top_colour(browser: Any, run_server: Served,
                                                     hpn_fabric: Any, shots: Path,
                                                     closing: list[Probe]) -> None:
    """Issue 30: a group coloured by the mean of its links washes a hot link out. By
    default (max) the overview edge that holds the run's hottest drawn link has that
    link's utilization as its figure and the top colour of the scale, and the legend's
    top is that value, with its unit."""
    from aifabric.web.topology import _groups

    info = run_server.get("api/info")
    assert "utilization" in info["metrics"]
    topo = run_server.get("api/topology?metric=utilization")
    assert topo["stat"] == "max"
    g = _groups(hpn_fabric, "auto")  # the grouping the API used (level auto)
    hot = [h for h in run_server.get("api/heatmap?metric=utilization&k=1000")["hottest"]
           if g.link_edge[h["link"]] >= 0]  # drawn as (part of) an overview edge
    assert hot, "no drawn link carried traffic"
    top = hot[0]
    edge_id = topo["edges"][int(g.link_edge[top["link"]])]["id"]
    assert topo["scale"]["hi"] == pytest.approx(top["value"])
    assert topo["scale"]["unit"] == "fraction of capacity"

    probe = open_page(browser, run_server)
    closing.append(probe)
    page = probe.page
    page.select_option("#topo-metric", "utilization")
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.state.topo.data.metric === 'utilization'")
    drawn = page.evaluate("""(id) => { const e = window.aifabric.cy.getElementById(id);
        const box = document.getElementById('topo-scale');
        return {colour: e.data('colour'), per_link: e.data('per_link'),
                hi: Number(box.dataset.max), unit: box.dataset.unit, text: box.textContent,
                tops: window.aifabric.cy.edges().filter(x => x.data('colour') ===
                    e.data('colour')).length}; }""", edge_id)
    assert drawn["colour"] == "rgb(200,30,30)", drawn  # heat(1): the scale's top
    assert drawn["per_link"] == pytest.approx(top["value"])
    assert drawn["hi"] == pytest.approx(top["value"]) and drawn["unit"] == "fraction of capacity"
    assert "hottest" in drawn["text"] and "fraction of capacity" in drawn["text"]
    shoot(probe, shots, "topology-run-max")

    # the group statistic is the page's choice: the mean gives that edge its mean
    page.select_option("#topo-stat", "mean")
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.state.topo.data.stat === 'mean'")
    mean = run_server.get("api/topology?metric=utilization&stat=mean")
    want = next(e["per_link"] for e in mean["edges"] if e["id"] == edge_id)
    got = page.evaluate("(id) => window.aifabric.cy.getElementById(id).data('per_link')",
                        edge_id)
    assert got == pytest.approx(want) and want <= top["value"]
    probe.assert_clean()


# ------------------------------------------------- heatmap: scales, time axis, empty
@pytest.fixture(scope="module")
def gap_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of two small AllReduces 2 ms apart: the steps between them are idle."""
    work = tmp_path_factory.mktemp("gap")
    scen = work / "scenario.yaml"
    scen.write_text(f"name: gap\nspec: {ROOT / 'tests' / 'golden' / 'hpn' / 'spec.yaml'}\n"
                    "collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: 8}\n"
                    "  - {op: allreduce, size_bytes: 1MiB, gpus: 8, start_ms: 2}\n",
                    encoding="utf-8")
    out = work / "run"
    proc = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(scen), "--out",
                           str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_heatmap_has_scales_a_time_axis_and_says_when_a_step_is_idle(
        browser: Any, start_serve: Any, gap_run: Path, shots: Path,
        closing: list[Probe]) -> None:
    served = start_serve(gap_run)
    info = served.get("api/info")
    times = info["times_ns"]
    idle = [t for t in range(len(times))
            if not served.get(f"api/heatmap?metric=bytes&t={t}&k=1")["hottest"]]
    assert idle, "the gap between the collectives has no idle step"
    probe = open_page(browser, served)
    closing.append(probe)
    page = probe.page
    show_tab(probe, "heatmap")
    page.select_option("#heat-metric", "bytes")
    page.wait_for_function("() => window.aifabric.state.pending === 0 && "
                           "window.aifabric.state.heat.data.metric === 'bytes'")
    got = page.evaluate("""() => { const cv = document.getElementById('heat-series');
        const s = document.getElementById('heat-series-scale');
        const l = document.getElementById('heat-links-scale');
        return {ticks: JSON.parse(cv.dataset.ticks), steps: Number(cv.dataset.steps),
                series: {shown: !s.hidden, max: Number(s.dataset.max), text: s.textContent},
                links: {shown: !l.hidden, max: Number(l.dataset.max), unit: l.dataset.unit},
                empty: !document.getElementById('heat-hottest-empty').hidden}; }""")
    # the time axis: the first and last steps' starts, in ms, increasing
    assert got["steps"] == len(times) and len(got["ticks"]) >= 2
    ms = [float(x.split()[0]) for x in got["ticks"]]
    assert ms == sorted(ms) and ms[0] == pytest.approx(times[0] / 1e6, abs=1e-3)
    assert ms[-1] == pytest.approx(times[-1] / 1e6, rel=0.05, abs=1e-3)
    # both colour scales: the series' top is its largest tier value; the grid's the
    # largest group figure, with the unit
    series = served.get("api/heatmap?metric=bytes")["series"]
    top = max(max(v) for v in series["tiers"].values())
    assert got["series"]["shown"] and got["series"]["max"] == pytest.approx(top)
    topo = served.get("api/topology?metric=bytes")
    assert got["links"]["shown"] and got["links"]["unit"] == "bytes"
    assert got["links"]["max"] == pytest.approx(topo["scale"]["hi"])
    assert not got["empty"]  # the whole run carried traffic
    shoot(probe, shots, "heatmap-scales")
    # an idle step: the hottest list is empty and says why
    page.evaluate("(t) => { const s = document.getElementById('heat-time'); s.value = t; "
                  "s.dispatchEvent(new Event('change')); }",
                  str(idle[0]))
    page.wait_for_function("(t) => window.aifabric.state.pending === 0 && "
                           "window.aifabric.state.heat.data.t === t", arg=idle[0])
    msg = page.locator("#heat-hottest-empty")
    assert msg.is_visible() and f"at step {idle[0]}" in msg.text_content()
    assert "No link carried bytes" in msg.text_content()
    assert page.locator("#heat-hottest tbody tr").count() == 0
    shoot(probe, shots, "heatmap-idle-step")
    probe.assert_clean()
