/* The topology view, level by level: the aggregated overview (pod), one plane (every agg
 * and core), one segment (every ToR, host and port), one ToR (its ports, their load and
 * flows); a node's or a link's details (with a button to fail it), and the highlight of a
 * search hit (the view refits on it). */

import { guarded, call } from "./client.js";
import { apiScaler, heat, legend, perLink } from "./colour.js";
import { $, bytes, clear, detailRows, el, fillTable, fmt, metricText } from "./dom.js";
import { BIG_TRACE, KIND_COLOUR, fitView, nodeLabel, readableLabels, stretch } from "./graph.js";
import { api, state } from "./state.js";
import { failFromPage } from "./whatif.js";

function nodeSize(n) {
  if (n.count) return Math.min(70, 18 + 8 * Math.log2(1 + n.count));
  return n.kind === "host" ? 14 : 26;
}
function edgeWidth(e) {
  if (e.links) return Math.min(14, 1 + 1.6 * Math.log2(1 + e.links));
  return 1.5;
}
function topoElements(data, metric) {
  const scale = apiScaler(data.scale, metric, data.edges.map(perLink));
  topoElements.scale = scale;
  // a segment has ~2,000 access links: drawn straight (haystack), which is much cheaper
  const big = data.edges.length > BIG_TRACE;
  const nodes = data.nodes.map((n) => {
    const d = Object.assign({}, n, { label: nodeLabel(n), title: n.name || n.label || n.id,
      colour: KIND_COLOUR[n.kind] || "#999", size: nodeSize(n) });
    const down = n.alive === false || (n.count && n.down >= n.count);
    const part = !down && n.down > 0;
    // rows of many nodes side by side (ToR and host groups, a ToR's NIC ports): one-line
    // labels turned upright so that neighbours do not overlap
    const vertical = (n.count && (n.kind === "tor" || n.kind === "host")) || n.kind === "nic";
    if (vertical) d.label = d.label.replace("\n", " ");
    d.lm = 0;
    return { group: "nodes", data: d, position: { x: n.x, y: n.y },
      classes: (down ? "down" : part ? "partdown" : "") + (vertical ? " vlabel" : "") };
  });
  const edges = data.edges.map((e) => {
    const d = Object.assign({}, e, { colour: heat(scale(perLink(e))), width: edgeWidth(e) });
    const down = e.alive === false || (e.links && e.links_down >= e.links);
    const cls = (down ? "down" : e.links_down > 0 ? "partdown" : "") + (big && !e.links ? " fast" : "");
    return { group: "edges", data: d, classes: cls };
  });
  return nodes.concat(edges);
}
/** Which level is drawn: overview, plane, segment or tor (state.topo). */
export function level() {
  const t = state.topo;
  if (t.tor) return "tor";
  if (t.segment !== null) return "segment";
  if (t.plane) return "plane";
  return "overview";
}
function crumb(c, text, go) {
  if (c.firstChild) c.appendChild(el("span", " › "));
  if (!go) { c.appendChild(el("span", text)); return; }
  const a = el("a", text);
  a.addEventListener("click", () => guarded(go));
  c.appendChild(a);
}
function setCrumbs() {
  const c = $("crumbs"); clear(c);
  const t = state.topo; const d = t.data || {};
  const lv = level();
  crumb(c, "overview", lv === "overview" ? null : () => goTo({}));
  if (lv === "plane") crumb(c, "pod " + t.plane.pod + (t.plane.plane >= 0 ? " plane " + t.plane.plane : ""), null);
  if (lv === "segment") crumb(c, "segment " + t.segment, null);
  if (lv === "tor") {
    if (d.segment !== undefined && d.segment >= 0) crumb(c, "segment " + d.segment, () => goTo({ segment: d.segment }));
    crumb(c, t.tor, null);
  }
}
/** Draw another level: {} the overview, {plane: {pod, plane} | {switch}}, {segment}, {tor}. */
export async function goTo(where) {
  const t = state.topo;
  t.segment = where.segment !== undefined ? where.segment : null;
  t.plane = where.plane || null;
  t.tor = where.tor || null;
  state.highlight = null;
  await drawTopology(true);
}
export async function openTopology() {
  if (state.topo.data === null || state.stale.topology) await drawTopology(state.topo.data === null);
}
function request(t) {
  const q = { metric: t.metric, t: t.t, stat: t.stat };
  const lv = level();
  if (lv === "tor") return call("tor/" + encodeURIComponent(t.tor), { metric: t.metric, t: t.t }, { withFail: true });
  if (lv === "segment") return call("segment/" + encodeURIComponent(t.segment), q, { withFail: true });
  if (lv === "plane") return call("plane", Object.assign(q, t.plane), { withFail: true });
  return call("topology", q, { withFail: true });
}
export async function drawTopology(refit) {
  if (!state.info.fabric) return;
  const t0 = performance.now();
  const t = state.topo;
  const data = await request(t);
  if (level() === "plane") t.plane = { pod: data.pod, plane: data.plane };
  t.data = data;
  state.stale.topology = false;
  const cy = api.cy;
  cy.resize();  // the container may have been hidden (size 0) when cy was made
  cy.batch(() => { cy.elements().remove(); cy.add(topoElements(data, t.metric)); });
  stretch(cy);
  if (refit !== false) fitView(cy);
  readableLabels(cy);
  setCrumbs();
  // the details panel described the graph as it was: start again from the hint
  const box = $("topo-detail"); clear(box);
  const lv = level();
  if (lv === "tor") showPorts(data);
  else if (lv === "plane" && state.info.whatif) {
    box.appendChild(el("p", "Every agg and core of the plane is drawn: click one for its details "
      + "or to fail it; click a ToR group to open its segment.", "hint"));
    const unit = data.plane >= 0 ? "plane:" + data.plane : "pod:" + data.pod;
    const b = el("button", "fail the whole " + (data.plane >= 0 ? "plane " + data.plane : "pod " + data.pod), "fail");
    b.type = "button"; b.dataset.fail = unit;
    b.addEventListener("click", () => failFromPage([unit]));
    box.appendChild(b);
  } else {
    box.appendChild(el("p", (lv === "overview" ? "Click a group to drill into its segment or plane; "
      : lv === "plane" ? "Click a ToR group to open its segment; " : "Double-click a ToR to open its ports; ")
      + "click a node or link for its details" + (state.info.whatif ? " or to fail it." : "."), "hint"));
  }
  const what = "; colour = " + (t.metric || "none");
  $("topo-legend").textContent = lv === "overview"
    ? (data.level ? "level: " + data.level + " · " : "") + fmt(data.nodes.length) + " groups, "
      + fmt(data.edges.length) + " group links" + what
    : lv === "plane" ? fmt(data.aggs) + " aggs, " + fmt(data.cores) + " cores, "
      + fmt(data.tor_groups) + " ToR groups, " + fmt(data.edges.length) + " links" + what
    : lv === "tor" ? fmt(data.ports.length) + " ports (" + fmt(data.uplinks) + " up, "
      + fmt(data.downlinks) + " down)" + what
    : fmt(cy.nodes("[kind = 'tor']").length) + " ToRs, " + fmt(cy.nodes("[kind = 'host']").length)
      + " hosts, " + fmt(data.edges.length) + " links" + what;
  legend($("topo-scale"), t.metric, topoElements.scale ? topoElements.scale.max : 0,
    (t.metric || "") + " " + (data.colour_by || (lv === "tor" ? "per link: each port's busier direction" : "per link"))
      + (t.t >= 0 ? ", step " + t.t : ""), data.scale);
  if (state.highlight) applyHighlight(state.highlight);
  t.drawMs = performance.now() - t0;
  cy.container().dataset.level = lv;
}
export async function drill(segment) {
  await goTo({ segment });
}
/** The ToR view's side panel: every port, its load each way and its flows; a click on a
 *  row shows that port's heaviest flows. */
function showPorts(data) {
  const box = $("topo-detail"); clear(box);
  const m = state.topo.metric;
  box.appendChild(el("h3", data.tor));
  box.appendChild(detailRows([["segment", data.segment], ["pod", data.pod],
    ["plane", data.plane !== -1 ? data.plane : null], ["rail", data.rail !== -1 ? data.rail : null],
    ["ports", fmt(data.ports.length) + " (" + fmt(data.uplinks) + " up, " + fmt(data.downlinks) + " down)"]]));
  if (state.info.whatif) {
    const b = el("button", "fail this switch", "fail"); b.type = "button";
    b.addEventListener("click", () => failFromPage([data.tor]));
    box.appendChild(b);
  }
  const flows = $("tor-port-flows") || el("div");
  flows.id = "tor-port-flows";
  const table = el("table", null, "data clickable"); table.id = "tor-ports";
  fillTable(table, ["iface", "peer", "peer_iface", "tier", "out", "in", "flows_out", "flows_in"],
    data.ports, { headers: { iface: "port", peer_iface: "peer port", out: "out (" + (m || "") + ")",
      in: "in (" + (m || "") + ")", flows_out: "flows out", flows_in: "flows in" },
    format: { out: (v) => metricText(m, v), in: (v) => metricText(m, v) },
    onClick: (row) => showPortFlows(row) });
  table.querySelectorAll("tbody tr").forEach((tr, i) => {
    tr.dataset.link = String(data.ports[i].link);
    if (!data.ports[i].alive) tr.classList.add("bad");
  });
  box.appendChild(el("h3", "Ports"));
  box.appendChild(table);
  clear(flows);
  box.appendChild(flows);
}
function showPortFlows(row) {
  const box = $("tor-port-flows"); clear(box);
  box.appendChild(el("h3", row.iface + " ↔ " + row.peer + ":" + row.peer_iface));
  for (const [dir, list, n] of [["out", row.top_out, row.flows_out], ["in", row.top_in, row.flows_in]]) {
    box.appendChild(el("p", (dir === "out" ? "leaving the ToR: " : "arriving: ") + fmt(n || 0)
      + " flows" + (list.length ? ", the heaviest " + list.length + ":" : "")));
    const t = el("table", null, "data"); t.dataset.dir = dir;
    fillTable(t, ["src", "dst", "bytes", "collective", "job"], list || [],
      { format: { bytes: (v) => bytes(v) }, empty: "No flow crosses this port " + dir + "." });
    box.appendChild(t);
  }
  const e = api.cy.getElementById("l:" + row.link);
  if (!e.empty()) { api.cy.elements().removeClass("highlight"); e.addClass("highlight"); }
  if (state.info.whatif) {
    const b = el("button", "fail port " + state.topo.tor + ":" + row.iface, "fail"); b.type = "button";
    b.addEventListener("click", () => failFromPage([state.topo.tor + ":" + row.iface]));
    box.appendChild(b);
  }
}
function showNodeDetail(d) {
  const box = $("topo-detail"); clear(box);
  box.appendChild(el("h3", d.name || d.title || d.id));
  box.appendChild(detailRows([["kind", d.kind], ["members", d.count !== undefined ? fmt(d.count) : null],
    ["down", d.down ? fmt(d.down) : null], ["pod", d.pod], ["segment", d.segment],
    ["plane", d.plane !== -1 ? d.plane : null], ["rail", d.rail !== -1 ? d.rail : null],
    ["side", d.side], ["backup", d.backup === undefined ? null : fmt(d.backup)],
    ["alive", d.alive === undefined ? null : fmt(d.alive)]]));
  if (d.drill !== undefined && d.drill !== null) {
    const b = el("button", "open segment " + d.drill);
    b.type = "button";
    b.addEventListener("click", () => guarded(() => drill(d.drill)));
    box.appendChild(b);
  }
  if (d.count && (d.kind === "agg" || d.kind === "core") && d.plane !== undefined) {
    const b = el("button", "open plane " + d.plane + " (every agg and core)");
    b.type = "button"; b.className = "open-plane";
    b.addEventListener("click", () => guarded(() => goTo({ plane: planeOf(d) })));
    box.appendChild(b);
  }
  if (d.kind === "tor" && !d.count && d.name && level() !== "tor") {
    const b = el("button", "open ToR view (ports, load, flows)");
    b.type = "button"; b.className = "open-tor";
    b.addEventListener("click", () => guarded(() => goTo({ tor: d.name })));
    box.appendChild(b);
  }
  const isSwitch = d.kind === "tor" || d.kind === "agg" || d.kind === "core";
  if (isSwitch && d.node !== undefined && d.node !== null && !d.count && state.info.whatif) {
    const b = el("button", "fail this switch", "fail");
    b.type = "button";
    b.addEventListener("click", () => failFromPage([d.name]));
    box.appendChild(b);
  }
}
/** The plane view a group of aggs or cores opens: its pod and plane (cores: the
 *  plane's first pod, which the server picks when no pod is given). */
export function planeOf(d) {
  if (d.kind === "agg" && d.pod >= 0) return { pod: d.pod, plane: d.plane };
  return { plane: d.plane };
}
function showEdgeDetail(d, cy) {
  const box = $("topo-detail"); clear(box);
  const m = state.topo.metric;
  const src = cy.getElementById(d.source).data(); const dst = cy.getElementById(d.target).data();
  box.appendChild(el("h3", (src.name || src.title) + " — " + (dst.name || dst.title)));
  box.appendChild(detailRows([["tier", d.tier], ["link", d.link], ["links", d.links !== undefined ? fmt(d.links) : null],
    ["links down", d.links_down ? fmt(d.links_down) : null],
    ["ports", d.from_port ? d.from_port + " → " + d.to_port : null], ["NIC", d.nic], ["IP", d.ip],
    ["capacity", d.capacity_gbps !== undefined ? fmt(d.capacity_gbps) + " Gb/s" : null],
    ["up (" + m + ")", metricText(m, d.up)], ["down (" + m + ")", metricText(m, d.down)],
    ["flows", d.flows !== undefined ? fmt(d.flows) : null],
    ["alive", d.alive === undefined ? null : fmt(d.alive)]]));
  if (d.to_port && state.info.whatif) {
    const port = dst.name + ":" + d.to_port;
    const b = el("button", "fail port " + port, "fail");
    b.type = "button";
    b.addEventListener("click", () => failFromPage([port]));
    box.appendChild(b);
  }
  if (level() === "tor" && d.link !== undefined) {
    const row = (state.topo.data.ports || []).find((p) => p.link === d.link);
    if (row) showPorts(state.topo.data), showPortFlows(row);
  }
}
export function bindTopologyEvents(cy) {
  cy.on("tap", "node", (ev) => {
    const d = ev.target.data();
    showNodeDetail(d);
    const lv = level();
    if ((lv === "overview" || lv === "plane") && d.drill !== undefined && d.drill !== null) {
      guarded(() => drill(d.drill));
    } else if (lv === "overview" && d.count && (d.kind === "agg" || d.kind === "core")) {
      guarded(() => goTo({ plane: planeOf(d) }));
    }
  });
  cy.on("dbltap", "node[kind = 'tor']", (ev) => {
    const d = ev.target.data();
    if (!d.count && d.name && level() !== "tor") guarded(() => goTo({ tor: d.name }));
  });
  cy.on("tap", "edge", (ev) => showEdgeDetail(ev.target.data(), cy));
  // the full name on hover (segment labels are short: "r0-a" for tor-s00-r0-a)
  cy.on("mouseover", "node", (ev) => { cy.container().title = ev.target.data("title") || ""; });
  cy.on("mouseout", "node", () => { cy.container().title = ""; });
}

// ---------------------------------------------------------------- search
export function applyHighlight(h) {
  const cy = api.cy;
  cy.elements().removeClass("highlight");
  let target = h.id ? cy.getElementById(h.id) : cy.collection();
  if (target.empty() && h.name) {
    // a GPU / NIC hit: the longest drawn node name that prefixes it (its host)
    let best = null;
    cy.nodes().forEach((n) => {
      const nm = n.data("name");
      if (nm && h.name.startsWith(nm) && (!best || nm.length > best.data("name").length)) best = n;
    });
    if (best) target = best;
  }
  if (h.link !== null && h.link !== undefined) {
    const e = cy.getElementById("l:" + h.link);
    if (!e.empty()) target = target.union(e).union(e.connectedNodes());
  }
  if (target.empty()) return false;
  target.addClass("highlight");
  state.highlight = Object.assign({}, h, { shown: target.map((x) => x.id()) });
  fitTo(cy, target);
  return true;
}
/** Refit the view on ``target`` (a jump to a search hit or a hot link lands zoomed on
 *  it, not just centred at the old zoom): the target fills the middle third of the view,
 *  at most 1.5x zoom so its neighbours stay in sight; labels stay readable. */
export function fitTo(cy, target) {
  const pad = Math.min(cy.width(), cy.height()) / 3;
  cy.fit(target, pad);
  if (cy.zoom() > 1.5) cy.zoom(1.5);
  cy.center(target);
  readableLabels(cy);
}
