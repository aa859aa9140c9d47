/* The topology view: the aggregated graph, one segment drilled into, a node's or a
 * link's details (with a button to fail it), and the highlight of a search hit. */

import { guarded, call } from "./client.js";
import { apiScaler, heat, legend, perLink } from "./colour.js";
import { $, clear, detailRows, el, fmt, metricText } from "./dom.js";
import { BIG_TRACE, KIND_COLOUR, fitView, readableLabels, stretch } from "./graph.js";
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
    // groups: their member count (the full label is in the details on click)
    const label = n.count ? "×" + fmt(n.count) + (n.down ? " (" + fmt(n.down) + " down)" : "")
      : (n.label || n.name || n.id);
    const d = Object.assign({}, n, { label, title: n.name || n.label || n.id,
      colour: KIND_COLOUR[n.kind] || "#999", size: nodeSize(n) });
    const down = n.alive === false || (n.count && n.down >= n.count);
    const part = !down && n.down > 0;
    return { group: "nodes", data: d, position: { x: n.x, y: n.y },
      classes: down ? "down" : part ? "partdown" : "" };
  });
  const edges = data.edges.map((e) => {
    const d = Object.assign({}, e, { colour: heat(scale(perLink(e))), width: edgeWidth(e) });
    const down = e.alive === false || (e.links && e.links_down >= e.links);
    const cls = (down ? "down" : e.links_down > 0 ? "partdown" : "") + (big && !e.links ? " fast" : "");
    return { group: "edges", data: d, classes: cls };
  });
  return nodes.concat(edges);
}
function setCrumbs() {
  const c = $("crumbs"); clear(c);
  const a = el("a", "overview");
  a.addEventListener("click", () => { state.topo.segment = null; guarded(() => drawTopology(true)); });
  c.appendChild(a);
  if (state.topo.segment !== null) c.appendChild(el("span", " › segment " + state.topo.segment));
}
export async function openTopology() {
  if (state.topo.data === null || state.stale.topology) await drawTopology(state.topo.data === null);
}
export async function drawTopology(refit) {
  if (!state.info.fabric) return;
  const t = state.topo;
  let data;
  if (t.segment === null) {
    data = await call("topology", { metric: t.metric, t: t.t, stat: t.stat }, { withFail: true });
  } else {
    data = await call("segment/" + encodeURIComponent(t.segment),
      { metric: t.metric, t: t.t, stat: t.stat }, { withFail: true });
  }
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
  box.appendChild(el("p", "Click a group to drill into its segment; click a node or link for "
    + "its details" + (state.info.whatif ? " or to fail it." : "."), "hint"));
  $("topo-legend").textContent = t.segment === null
    ? (data.level ? "level: " + data.level + " · " : "") + fmt(data.nodes.length) + " groups, "
      + fmt(data.edges.length) + " group links; colour = " + (t.metric || "none")
    : fmt(cy.nodes("[kind = 'tor']").length) + " ToRs, " + fmt(cy.nodes("[kind = 'host']").length)
      + " hosts, " + fmt(data.edges.length) + " links; colour = " + (t.metric || "none");
  legend($("topo-scale"), t.metric, topoElements.scale ? topoElements.scale.max : 0,
    (t.metric || "") + " " + (data.colour_by || "per link") + (t.t >= 0 ? ", step " + t.t : ""),
    data.scale);
  if (state.highlight) applyHighlight(state.highlight);
}
export async function drill(segment) {
  state.topo.segment = segment;
  state.highlight = null;
  await drawTopology(true);
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
  const isSwitch = d.kind === "tor" || d.kind === "agg" || d.kind === "core";
  if (isSwitch && d.node !== undefined && d.node !== null && !d.count && state.info.whatif) {
    const b = el("button", "fail this switch", "fail");
    b.type = "button";
    b.addEventListener("click", () => failFromPage([d.name]));
    box.appendChild(b);
  }
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
    ["alive", d.alive === undefined ? null : fmt(d.alive)]]));
  if (d.to_port && state.info.whatif) {
    const port = dst.name + ":" + d.to_port;
    const b = el("button", "fail port " + port, "fail");
    b.type = "button";
    b.addEventListener("click", () => failFromPage([port]));
    box.appendChild(b);
  }
}
export function bindTopologyEvents(cy) {
  cy.on("tap", "node", (ev) => {
    const d = ev.target.data();
    showNodeDetail(d);
    if (state.topo.segment === null && d.drill !== undefined && d.drill !== null) {
      guarded(() => drill(d.drill));
    }
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
  cy.center(target);
  return true;
}
