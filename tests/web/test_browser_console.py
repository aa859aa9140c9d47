"""The page as an SRE's console (issue 30), in a real headless Chromium: labels on every
group and switch, the levels pod -> plane -> segment -> ToR, aggs and cores drawn and
failable one by one, jumps that refit, the hottest list saying who drives each link.

Each check reads what the page drew (cytoscape's elements, the tables) and compares it
with an independent source: the built Fabric, the routing model, the run's own
``collective_links.csv``.
"""

from __future__ import annotations

import csv
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from aifabric.topology.fabric import LinkKind, NodeKind

from .conftest import Served, open_page
from .test_browser import ALLREDUCE, EXAMPLES, HPN, ROOT, click_node, shoot, show_tab

#: the issue's number (overview to ToR view under 1 s) is held by the benchmark; a test
#: allows 3x it (a CI machine's 2 cores run the server, Chromium and other tests at once)
TOR_VIEW_S = 3 * 1.0


@pytest.fixture(scope="module")
def hpn() -> Any:
    from aifabric import build_fabric, load_spec

    return build_fabric(load_spec(HPN))


def _simulate(scenario: Path, out: Path) -> Path:
    proc = subprocess.run([sys.executable, "-m", "aifabric", "simulate", str(scenario),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def allreduce_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``aifabric simulate allreduce-hpn.yaml`` (one 1 GiB AllReduce on 1,024 GPUs)."""
    return _simulate(ALLREDUCE, tmp_path_factory.mktemp("sim") / "run")


@pytest.fixture(scope="module")
def two_allreduces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run of two small AllReduces 2 ms apart: the steps between them are idle."""
    work = tmp_path_factory.mktemp("gap")
    scen = work / "scenario.yaml"
    scen.write_text(f"name: gap\nspec: {ROOT / 'tests' / 'golden' / 'hpn' / 'spec.yaml'}\n"
                    "collectives:\n  - {op: allreduce, size_bytes: 1MiB, gpus: 8}\n"
                    "  - {op: allreduce, size_bytes: 1MiB, gpus: 8, start_ms: 2}\n",
                    encoding="utf-8")
    return _simulate(scen, work / "run")


@pytest.fixture
def pages() -> Iterator[list[Any]]:
    """Pages opened by a test, closed (with their context) at its end."""
    opened: list[Any] = []
    yield opened
    for p in opened:
        p.page.context.close()


def wait_idle(page: Any, cond: str = "true") -> None:
    page.wait_for_function(f"() => window.aifabric.state.pending === 0 && ({cond})")


@pytest.fixture(scope="module")
def hpn_served(start_serve: Any) -> Served:
    return start_serve(HPN)


def inside_view(page: Any, selector: str) -> bool:
    """Every element of ``selector`` (topology cy) is drawn inside the canvas (the
    centre of its box), and there is one."""
    return page.evaluate("""(sel) => { const cy = window.aifabric.cy;
        const w = cy.width(), h = cy.height();
        const all = cy.$(sel);
        return all.length > 0 && all.every(x => { const b = x.renderedBoundingBox(
            {includeLabels: false}); const cx = (b.x1 + b.x2) / 2, cy_ = (b.y1 + b.y2) / 2;
            return cx >= 0 && cx <= w && cy_ >= 0 && cy_ <= h; }); }""", selector)


def test_every_group_and_switch_is_labelled_and_aggs_cores_are_drawn_one_by_one(
        browser: Any, hpn_served: Served, hpn: Any, shots: Path,
        pages: list[Any]) -> None:
    f = hpn
    n, L = f.nodes, f.links
    probe = open_page(browser, hpn_served)
    pages.append(probe)
    page = probe.page
    # the overview: every group's label names what it holds (tier, segment, plane) and
    # its member count, as the API labels it
    api = {nd["id"]: nd for nd in hpn_served.get("api/topology")["nodes"]}
    drawn = page.evaluate("window.aifabric.cy.nodes().map(x => [x.id(), x.data('label')])")
    assert len(drawn) == len(api)
    for nid, label in drawn:
        want = api[nid]
        assert label.startswith(want["label"]) and f"×{want['count']:,}" in label, (nid, label)
    tor_groups = [lb for nid, lb in drawn if api[nid]["kind"] == "tor"]
    assert tor_groups and all("ToRs" in lb and "seg " in lb and "plane " in lb
                              for lb in tor_groups)
    # upright labels in the dense rows do not overlap their neighbours
    boxes = page.evaluate("""() => window.aifabric.cy.nodes("[kind = 'tor']").map(x =>
        x.renderedBoundingBox({includeNodes: false, includeEdges: false, includeLabels: true}))
        .sort((a, b) => a.x1 - b.x1)""")
    assert all(a["x2"] <= b["x1"] + 0.5 for a, b in itertools.pairwise(boxes))
    shoot(probe, shots, "console-overview-labels")

    # click the aggs of plane 1 on the canvas: the plane view draws every agg of the plane
    # and every core cabled to them, one node each, labelled
    click_node(probe, "cy", "[kind = 'agg'][plane = 1]")
    wait_idle(page, "window.aifabric.state.topo.plane !== null && "
              "window.aifabric.state.topo.data.plane === 1")
    aggs = n.name[(n.kind == NodeKind.AGG) & (n.plane == 1)]
    on_page = page.evaluate("window.aifabric.cy.nodes(\"[kind = 'agg']\").map(x => "
                            "[x.data('name'), x.data('label')])")
    assert sorted(nm for nm, _ in on_page) == sorted(aggs.tolist())
    assert all(lb and nm.endswith(lb) for nm, lb in on_page)
    a_ids = np.flatnonzero((n.kind == NodeKind.AGG) & (n.plane == 1))
    cores = np.unique(L.b[np.isin(L.a, a_ids) & (n.kind[L.b] == NodeKind.CORE)])
    got = page.evaluate("window.aifabric.cy.nodes(\"[kind = 'core']\").map(x => x.data('name'))")
    assert sorted(got) == sorted(n.name[cores].tolist()) and len(got) > 0
    # each agg-core edge carries exactly the links between the two switches
    pairs = page.evaluate("""() => window.aifabric.cy.edges().filter(e =>
        e.target().data('kind') === 'core').map(e => [e.source().data('node'),
        e.target().data('node'), e.data('links')])""")
    for a, c, k in pairs:
        assert k == int((((L.a == a) & (L.b == c)) | ((L.a == c) & (L.b == a))).sum())
    assert "plane 1" in page.text_content("#crumbs")
    shoot(probe, shots, "console-plane")

    # search an agg of the other plane: its plane is drawn, the agg highlighted, the
    # view refitted on it (inside the canvas, zoomed in) and a fail button offered
    overview_zoom = page.evaluate("window.aifabric.cy.zoom()")
    name = str(aggs[0]).replace("pl1", "pl0")
    page.fill("#search", name)
    page.press("#search", "Enter")
    wait_idle(page, "window.aifabric.cy.$('node.highlight').length > 0")
    assert page.evaluate("window.aifabric.state.topo.data.plane") == 0
    assert page.evaluate("window.aifabric.cy.$('node.highlight').map(x => x.data('name'))") \
        == [name]
    assert inside_view(page, "node.highlight")
    assert page.evaluate("window.aifabric.cy.zoom()") > overview_zoom
    assert "not drawn" not in page.text_content("#topo-detail")
    btn = page.locator("#topo-detail button.fail")
    assert btn.count() == 1 and name in btn.text_content()
    # a core too
    core = str(n.name[cores[0]])
    page.fill("#search", core)
    page.press("#search", "Enter")
    wait_idle(page, "window.aifabric.cy.$('node.highlight').map(x => x.data('name'))[0] === "
              + json.dumps(core))
    assert inside_view(page, "node.highlight")
    assert page.locator("#topo-detail button.fail").count() == 1
    shoot(probe, shots, "console-search-core")
    probe.assert_clean()


def test_tor_view_lists_its_ports_load_and_flows(browser: Any, hpn_served: Served,
                                                 hpn: Any, shots: Path,
                                                 pages: list[Any]) -> None:
    from aifabric.telemetry.catalog import port_names
    from aifabric.web.twin import Twin

    f = hpn
    n, L = f.nodes, f.links
    tor = "tor-s03-r2-b"
    t = f.node_id(tor)
    probe = open_page(browser, hpn_served)
    pages.append(probe)
    page = probe.page
    # overview -> ToR view, timed in the page (request, drawing, the ports table)
    t0 = time.monotonic()
    page.evaluate("(name) => window.aifabric.goTo({tor: name})", tor)
    wait_idle(page, f"window.aifabric.state.topo.data.tor === {json.dumps(tor)}")
    wall = time.monotonic() - t0
    draw_ms = page.evaluate("window.aifabric.state.topo.drawMs")
    print(f"\noverview -> ToR view: {draw_ms:.0f} ms in the page ({wall:.2f} s wall clock)")
    # every port of the ToR, by port number, with its peer (the Fabric's cabling)
    mine = np.flatnonzero((L.a == t) | (L.b == t))
    port = np.where(L.a[mine] == t, L.a_port[mine], L.b_port[mine])
    peer = np.where(L.a[mine] == t, L.b[mine], L.a[mine])
    order = np.argsort(port, kind="stable")
    want = list(zip(port_names(f, np.full(len(mine), t), port[order]).tolist(),
                    n.name[peer[order]].tolist(), strict=True))
    rows = page.evaluate("Array.from(document.querySelectorAll('#tor-ports tbody tr'))"
                         ".map(r => [r.cells[0].textContent, r.cells[1].textContent])")
    assert rows == [list(w) for w in want] and len(rows) == 196
    drawn = page.evaluate("window.aifabric.cy.edges().map(e => e.data('link'))")
    assert sorted(drawn) == sorted(mine.tolist())
    # flows per port each way: the routing model's flows on the ToR's arcs
    twin = Twin.open(HPN)
    routed = twin._state(()).routed
    arc_flows = routed.arc_flows()
    ports = page.evaluate("window.aifabric.state.topo.data.ports")
    for p in ports:
        lk = p["link"]
        up = L.a[lk] == t  # the ToR is the lower end: its out arc is the link's up arc
        out_arc, in_arc = (2 * lk, 2 * lk + 1) if up else (2 * lk + 1, 2 * lk)
        assert (p["flows_out"], p["flows_in"]) == (arc_flows[out_arc], arc_flows[in_arc])
        assert len(p["top_out"]) == min(5, p["flows_out"])
        b = [x["bytes"] for x in p["top_out"]]
        assert b == sorted(b, reverse=True)
    assert sum(p["flows_out"] for p in ports) > 0
    # a busy uplink's row shows its heaviest flows, with their collective (pattern)
    busy = max(range(len(ports)), key=lambda i: (ports[i]["tier"] != "access",
                                                  ports[i]["flows_out"]))
    page.click(f"#tor-ports tbody tr:nth-child({busy + 1})")
    flows = page.locator("#tor-port-flows table[data-dir=out] tbody tr")
    assert flows.count() == min(5, ports[busy]["flows_out"]) > 0
    assert "traffic.0" in flows.first.text_content()
    assert page.evaluate(f"window.aifabric.cy.getElementById('l:{ports[busy]['link']}')"
                         ".hasClass('highlight')")
    shoot(probe, shots, "console-tor-view")
    # the crumbs lead back: segment 3, then the overview
    page.click("#crumbs a:nth-of-type(2)")
    wait_idle(page, "window.aifabric.state.topo.segment === 3")
    # the segment's 136 host labels are readable (>= 6 px on screen) and, row by row,
    # none overlaps its neighbour
    hosts = page.evaluate("""() => { const cy = window.aifabric.cy; const z = cy.zoom();
        return cy.nodes("[kind = 'host']").map(x => ({y: Math.round(x.position('y')),
            px: parseFloat(x.style('font-size')) * z, label: x.data('label'),
            box: x.renderedBoundingBox({includeNodes: false, includeEdges: false,
                                        includeLabels: true})})); }""")
    assert len(hosts) == 136 and min(h["px"] for h in hosts) >= 6
    rows: dict[int, list[Any]] = {}
    for h in hosts:
        rows.setdefault(h["y"], []).append(h["box"])
    for boxes in rows.values():
        boxes.sort(key=lambda b: b["x1"])
        assert all(a["x2"] <= b["x1"] + 0.5 for a, b in itertools.pairwise(boxes))
    # from a segment: click a ToR, then its "open ToR view" button
    click_node(probe, "cy", f"[name = '{tor}']")
    page.click("#topo-detail button.open-tor")
    wait_idle(page, f"window.aifabric.state.topo.data.tor === {json.dumps(tor)}")
    assert page.locator("#tor-ports tbody tr").count() == 196
    probe.assert_clean()
    assert wall < TOR_VIEW_S and draw_ms < TOR_VIEW_S * 1000


def test_hottest_list_says_which_collective_drives_each_link(
        browser: Any, start_serve: Any, allreduce_run: Path, shots: Path,
        pages: list[Any]) -> None:
    """Each hottest row names the collective with the most bytes on that link direction:
    the run's own collective_links.csv (the simulator's per-collective accounting)."""
    run_server = start_serve(allreduce_run)
    with (allreduce_run / "collective_links.csv").open(newline="") as fh:
        per: dict[tuple[int, str], dict[str, int]] = {}
        for r in csv.DictReader(fh):
            per.setdefault((int(r["link"]), r["direction"]), {})[r["collective"]] = \
                int(r["bytes"])
    probe = open_page(browser, run_server)
    pages.append(probe)
    page = probe.page
    show_tab(probe, "heatmap")
    page.select_option("#heat-metric", "bytes")
    wait_idle(page, "window.aifabric.state.heat.data.metric === 'bytes'")
    heads = page.evaluate("Array.from(document.querySelectorAll('#heat-hottest thead th'))"
                          ".map(h => h.textContent)")
    assert "driven by (collective / pattern)" in heads
    col = heads.index("driven by (collective / pattern)")
    rows = page.evaluate("window.aifabric.state.heat.data.hottest")
    cells = page.evaluate(f"Array.from(document.querySelectorAll('#heat-hottest tbody tr'))"
                          f".map(r => r.cells[{col}].textContent)")
    assert len(cells) == len(rows) > 0
    checked = 0
    for row, cell in zip(rows, cells, strict=True):
        got = per.get((row["link"], row["direction"]))
        if not got:
            continue  # a link inside a host (NVLink, PCIe): collective_links lists the fabric's
        top = max(got.values())
        assert got.get(row["driver"]) == top, (row, got)
        assert cell.startswith(row["driver"])
        checked += 1
    assert checked > 0
    # the run's hottest links are NVLink inside hosts: "fabric links" ranks the scale-out
    # links only: hottest first, the first one the busiest scale-out tier's max
    fabric = ("access", "leaf_spine", "spine_core")
    page.select_option("#heat-scope", "fabric")
    wait_idle(page, "window.aifabric.state.heat.data.scope === 'fabric'")
    fab = page.evaluate("window.aifabric.state.heat.data.hottest")
    tiers = run_server.get("api/heatmap?metric=bytes")["tiers"]
    assert fab and all(h["tier"] in fabric for h in fab)
    assert all(h["tier"] not in fabric for h in rows)
    assert [h["value"] for h in fab] == sorted((h["value"] for h in fab), reverse=True)
    assert fab[0]["value"] == pytest.approx(max(t["max"] for t in tiers
                                                if t["kind"] in fabric))
    assert page.locator("#heat-hottest tbody tr").count() == len(fab)
    # the link grid's rows are labelled with their tier and group count
    labels = json.loads(page.evaluate("document.getElementById('heat-links').dataset.rows"))
    kinds = {k.label for k in LinkKind}
    assert labels and all(lb.split(" ")[0] in kinds and lb.endswith(")") for lb in labels)
    shoot(probe, shots, "console-hottest-drivers")
    # the hottest fabric link, clicked: the view that draws it one by one (an access
    # link: its segment; an uplink: its ToR's view), the link highlighted and in sight
    top = fab[0]
    page.click("#heat-hottest tbody tr:nth-child(1)")
    level = "segment" if top["tier"] == "access" else "tor"
    wait_idle(page, "window.aifabric.state.view === 'topology' && "
              f"window.aifabric.cy.container().dataset.level === '{level}'")
    assert page.evaluate(f"window.aifabric.cy.getElementById('l:{top['link']}')"
                         ".hasClass('highlight')")
    assert inside_view(page, "edge.highlight")
    shoot(probe, shots, "console-hottest-link")
    probe.assert_clean()


# ------------------------------------------------------------------------ traces
#: the issue's number (a whole pattern of the HPN pod drawn under 1 s); 3x in a test
PATTERN_S = 3 * 1.0


def pick_trace(page: Any, want: str) -> dict[str, Any]:
    """Choose the dropdown option whose text starts with ``want``; the option's text and
    value, once the trace is drawn."""
    opts = page.evaluate("Array.from(document.querySelectorAll('#trace-select option'))"
                         ".map(o => [o.value, o.textContent])")
    value, text = next((v, t) for v, t in opts if v and t.startswith(want))
    page.evaluate("() => { window.aifabric.state.trace.drawMs = undefined; }")
    t0 = time.monotonic()
    page.select_option("#trace-select", value)
    wait_idle(page, "window.aifabric.state.trace.drawMs !== undefined")
    return {"value": json.loads(value), "text": text, "wall": time.monotonic() - t0,
            "ms": page.evaluate("window.aifabric.state.trace.drawMs")}


def test_a_whole_pattern_is_drawn_by_group_quickly_with_every_byte(
        browser: Any, hpn_served: Served, shots: Path, pages: list[Any]) -> None:
    from aifabric.web.topology import _groups
    from aifabric.web.twin import Twin

    probe = open_page(browser, hpn_served)
    pages.append(probe)
    page = probe.page
    show_tab(probe, "trace")
    got = pick_trace(page, "traffic.0")
    print(f"\nwhole pattern trace: {got['ms']:.0f} ms in the page ({got['wall']:.2f} s wall)")
    data = page.evaluate("window.aifabric.state.trace.data")
    assert data["grouped"] is not None and data["truncated"] is None
    # every byte of the pattern on its arcs (the routing model) is on one group link or
    # inside one group, and each group link is an edge of the overview
    twin = Twin.open(HPN)
    routed = twin._state(()).routed
    total = float(routed.arc_bytes().sum())
    drawn = page.evaluate("window.aifabric.traceCy.edges().map(e => [e.id(), e.data('bytes')])")
    assert len(drawn) == len(data["edges"]) < 500
    assert sum(b for _, b in drawn) + data["grouped"]["bytes_inside"] == pytest.approx(total)
    g = _groups(twin.fabric, "auto")
    overview = {f"e:{g.ids[s]}|{g.ids[t]}" for s, t in zip(g.edge_src, g.edge_dst, strict=True)}
    assert {i for i, _ in drawn} <= overview
    # readable: every group labelled with what it holds, the bottleneck's group link red
    labels = page.evaluate("window.aifabric.traceCy.nodes().map(n => n.data('label'))")
    assert labels and all(("ToRs" in x or "hosts" in x or "aggs" in x or "cores" in x)
                          and "×" in x for x in labels)
    assert page.evaluate("window.aifabric.traceCy.edges('.bottleneck').length") == 1
    assert "group links" in page.text_content("#trace-summary")
    shoot(probe, shots, "console-trace-pattern")
    probe.assert_clean()
    assert got["wall"] < PATTERN_S and got["ms"] < PATTERN_S * 1000


def test_a_collectives_bottleneck_is_over_its_own_window(
        browser: Any, start_serve: Any, two_allreduces: Path, shots: Path,
        pages: list[Any]) -> None:
    """Two 1 MiB AllReduces 2 ms apart: each one's links run busy during its own ~0.1 ms;
    over the whole run they are nearly idle. The bottleneck's utilization is the
    collective's bytes on that link (the run's collective_links.csv) over what the link
    carries in the collective's window (collectives.csv)."""
    from aifabric import build_fabric, load_spec

    served = start_serve(two_allreduces)
    with (two_allreduces / "collectives.csv").open(newline="") as fh:
        wins = {r["collective"]: (float(r["start_ns"]), float(r["end_ns"]))
                for r in csv.DictReader(fh)}
    with (two_allreduces / "collective_links.csv").open(newline="") as fh:
        cl = {(r["collective"], int(r["link"]), r["direction"]): int(r["bytes"])
              for r in csv.DictReader(fh)}
    f = build_fabric(load_spec(ROOT / "tests" / "golden" / "hpn" / "spec.yaml"))
    probe = open_page(browser, served)
    pages.append(probe)
    page = probe.page
    show_tab(probe, "trace")
    got = pick_trace(page, "allreduce-1")
    name = "allreduce-1"
    bn = page.evaluate("window.aifabric.state.trace.data.bottleneck")
    t0, t1 = wins[name]
    assert page.evaluate("window.aifabric.state.trace.data.utilization_window") == \
        {"start_ns": t0, "end_ns": t1}
    d = "up" if bn["arc"] % 2 == 0 else "down"
    cap = float(f.links.capacity_gbps[bn["link"], 0 if d == "up" else 1])
    want = cl[(name, bn["link"], d)] * 8.0 / (cap * (t1 - t0))
    assert bn["utilization"] == pytest.approx(want, rel=1e-6)
    assert bn["utilization"] <= 1.0 + 1e-9
    assert bn["utilization"] > 10 * bn["utilization_run"]  # the whole run dilutes it
    # no drawn link is busier in the window than the bottleneck
    utils = page.evaluate("window.aifabric.traceCy.edges().map(e => e.data('utilization'))")
    assert max(utils) == pytest.approx(bn["utilization"])
    text = page.text_content("#trace-bottleneck")
    assert "utilization in its window" in text and f"{100 * want:.1f}%" in text
    # the dropdown's GPU count is what is drawn
    gpus = int(got["text"].split(" GPUs")[0].rsplit("· ", 1)[1].replace(",", ""))
    assert page.evaluate("window.aifabric.traceCy.nodes(\"[kind = 'gpu']\").length") == gpus
    shoot(probe, shots, "console-trace-window")
    probe.assert_clean()


def test_the_dropdowns_gpu_count_is_what_is_drawn(browser: Any, start_serve: Any,
                                                   pages: list[Any]) -> None:
    """GPT on the HPN pod: a TP AllReduce of 8 GPUs runs in 16 replicas at once; the
    option says 128 GPUs (16 groups of 8) and the trace draws 128."""
    served = start_serve(EXAMPLES / "scenarios" / "gpt-hpn.yaml")
    probe = open_page(browser, served)
    pages.append(probe)
    page = probe.page
    show_tab(probe, "trace")
    got = pick_trace(page, "gpt-13b it0 fwd p0 m0 tp0")
    assert "128 GPUs (16 groups of 8)" in got["text"]
    assert page.evaluate("window.aifabric.traceCy.nodes(\"[kind = 'gpu']\").length") == 128
    got = pick_trace(page, "gpt-13b it0 pp fwd 0->1 m0")
    gpus = int(got["text"].split(" GPUs")[0].rsplit("· ", 1)[1].replace(",", ""))
    assert page.evaluate("window.aifabric.traceCy.nodes(\"[kind = 'gpu']\").length") == gpus
    probe.assert_clean()


# ------------------------------------------------------------------------ what-if
def test_whatif_is_drawn_on_the_topology_with_why_flows_moved(
        browser: Any, hpn_served: Served, hpn: Any, shots: Path,
        pages: list[Any]) -> None:
    f = hpn
    n, L = f.nodes, f.links
    agg = "agg-p00-pl0-05"
    a = f.node_id(agg)
    probe = open_page(browser, hpn_served)
    pages.append(probe)
    page = probe.page
    # an agg found by search and failed from its detail panel
    page.fill("#search", agg)
    page.press("#search", "Enter")
    wait_idle(page, "window.aifabric.cy.$('node.highlight').length > 0")
    page.click("#topo-detail button.fail")
    wait_idle(page, "window.aifabric.state.whatif !== null")
    data = page.evaluate("window.aifabric.state.whatif")
    want_down = int(((L.a == a) | (L.b == a)).sum())
    assert data["links_down"] == want_down
    # drawn: every failed link on a group link of the graph, the agg's group part down
    drawn = page.evaluate("""() => { const cy = window.aifabric.whatifCy;
        return {down: cy.edges().map(e => e.data('links_down')).reduce((x, y) => x + y, 0),
                part: cy.nodes('.partdown').map(x => x.data('label')),
                moved: cy.edges('.moved').length,
                red: cy.edges().filter(e => e.data('delta') > 0).map(e => e.data('colour')),
                blue: cy.edges().filter(e => e.data('delta') < 0).map(e => e.data('colour')),
                scale: document.getElementById('whatif-scale').dataset.linksDown}; }""")
    assert drawn["down"] == want_down and drawn["scale"] == str(want_down)
    assert any(lb.startswith("aggs pod 0 plane 0") for lb in drawn["part"])
    assert drawn["moved"] > 0 and drawn["red"] and drawn["blue"]
    # more load: red dominates; less: blue dominates
    rgb = [tuple(int(x) for x in c[4:-1].split(",")) for c in drawn["red"]]
    assert all(r > b for r, _, b in rgb)
    rgb = [tuple(int(x) for x in c[4:-1].split(",")) for c in drawn["blue"]]
    assert all(b > r for r, _, b in rgb)
    # why each shown flow moved: its old path crossed the failed agg (path lost) or not
    # (rehashed); the counts add up to the moved total
    why = data["moved_why"]
    assert sum(why.values()) == data["moved_total"] > 0 and why["rehashed"] > 0
    for row in data["moved"]:
        crossed = agg in row["before"].split(" > ")
        assert row["why"] == ("path_lost" if crossed else "rehashed"), row
        assert row["before_hops"] != row["after_hops"]
        assert row["before"].startswith(row["src_gpu"]) and row["diverge_at"] in row["before"]
    text = page.text_content("#whatif-why")
    assert f"{why['rehashed']:,} were rehashed" in text
    # hottest after: before, after and the change, which adds up
    for h in data["hottest_after"]:
        assert h["value"] - h["before"] == pytest.approx(h["delta"])
    heads = page.evaluate("Array.from(document.querySelectorAll('#whatif-hot-after th'))"
                          ".map(h => h.textContent)")
    assert heads == ["from", "to", "tier", "before", "after", "change"]
    # a path-lost flow clicked: its old and new paths drawn switch by switch, every hop
    # of each once; the failed agg only on the old one, drawn failed
    k = next(i for i, r in enumerate(data["moved"]) if r["why"] == "path_lost")
    row = data["moved"][k]
    page.click(f"#whatif-moved tbody tr:nth-child({k + 1})")
    got = page.evaluate("""() => { const cy = window.aifabric.whatifCy;
        const hop = e => [e.source().data('name'), e.target().data('name')];
        return {mode: cy.container().dataset.mode, was: cy.edges('.was').map(hop),
                now: cy.edges('.now').map(hop), both: cy.edges('.both').map(hop),
                down: cy.nodes('.down').map(x => x.data('name'))}; }""")
    assert got["mode"] == "flow"
    for path, mine in ((row["before"], got["was"]), (row["after"], got["now"])):
        hops = list(itertools.pairwise(path.split(" > ")))
        assert sorted(map(tuple, mine + got["both"])) == sorted(hops)
    assert got["down"] == [agg]
    assert any(agg in h for h in got["was"]) and not any(agg in h for h in got["now"])
    shoot(probe, shots, "console-whatif-flow")
    page.click("#whatif-graph-back")
    assert page.evaluate("window.aifabric.whatifCy.container().dataset.mode") == "groups"
    shoot(probe, shots, "console-whatif-agg")

    # a whole plane: from the plane view's button, in one entry
    page.click("#whatif-clear")
    wait_idle(page)
    show_tab(probe, "topology")
    page.evaluate("window.aifabric.goTo({plane: {pod: 0, plane: 1}})")
    wait_idle(page, "window.aifabric.state.topo.data.plane === 1")
    page.click("#topo-detail button.fail[data-fail='plane:1']")
    wait_idle(page, "window.aifabric.state.whatif !== null && "
              "window.aifabric.state.whatif.fail[0] === 'plane:1'")
    data = page.evaluate("window.aifabric.state.whatif")
    sw = f.is_switch & (n.plane == 1)
    assert data["links_down"] == int((sw[L.a] | sw[L.b]).sum())
    assert data["flows"]["newly_unreachable"] == 0  # dual-plane: the other plane carries all
    # every switch group of plane 1 drawn down (dashed), labelled with its count down
    down = page.evaluate("window.aifabric.whatifCy.nodes('.down').map(x => [x.id(), "
                         "x.data('label')])")
    groups = {nd["id"]: nd for nd in hpn_served.get("api/topology")["nodes"]
              if nd["kind"] in ("tor", "agg", "core") and nd["plane"] == 1}
    assert sorted(i for i, _ in down) == sorted(groups)
    assert all(f"({groups[i]['count']:,} down)" in lb for i, lb in down)
    assert page.text_content("#fail-list") == "plane:1"
    shoot(probe, shots, "console-whatif-plane")
    probe.assert_clean()
