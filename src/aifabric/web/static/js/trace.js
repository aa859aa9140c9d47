/* The trace view: the paths of a collective, a job, a traffic pattern or a GPU pair,
 * drawn with each link's load; the bottleneck and who shares it; hop by hop. */

import { call, guarded } from "./client.js";
import { heat, legend, scaler } from "./colour.js";
import { $, bytes, clear, detailRows, el, fillTable, fmt, metricText, ms } from "./dom.js";
import { BIG_TRACE, KIND_COLOUR, fitView, nodeLabel, readableLabels, spreadRows, stretch } from "./graph.js";
import { api, state } from "./state.js";

export async function openTrace() {
  if (!state.trace.options) {
    const tr = await call("traces");
    state.trace.options = tr;
    const s = $("trace-select"); clear(s);
    const none = el("option", "— choose —"); none.value = ""; s.appendChild(none);
    const groups = [["collectives", "collective", tr.collectives || []], ["jobs", "job", tr.jobs || []],
      ["traffic patterns", "collective", tr.patterns || []]];
    for (const [label, key, items] of groups) {
      if (!items.length) continue;
      const g = document.createElement("optgroup"); g.label = label;
      for (const it of items) {
        const text = (it.name || it.id) + (it.op ? " · " + it.op : "") + (it.gpus ? " · " + fmt(it.gpus) + " GPUs"
          + (it.groups ? " (" + fmt(it.groups) + " groups of " + fmt(it.group_gpus) + ")" : "") : "")
          + (it.size_bytes ? " · " + bytes(it.size_bytes) : "") + (it.job && key === "collective" ? " · job " + it.job : "");
        const o = el("option", text);
        o.value = JSON.stringify([key, key === "job" ? it.name : (it.id !== undefined ? it.id : it.name)]);
        g.appendChild(o);
      }
      s.appendChild(g);
    }
  }
  if (state.trace.key && state.stale.trace) {
    await doTrace(state.trace.key);
  }
}
export async function doTrace(key) {
  state.trace.key = key;
  const t0 = performance.now();
  const params = { view: "auto" };
  params[key[0]] = key[1];
  if (key[0] === "pair") { params.src = key[1][0]; params.dst = key[1][1]; delete params.pair; }
  const data = await call("trace", params, { withFail: true });
  state.trace.data = data;
  state.stale.trace = false;
  const cy = api.traceCy;
  // a whole traffic pattern uses most of a pod's arcs: the server sends at most 20,000
  // (the bottleneck, the listed paths' arcs, then the heaviest) and says so
  const shown = data;
  state.trace.partial = !!data.truncated;
  const values = shown.edges.map((e) => (e.utilization !== undefined && e.utilization !== null ? e.utilization : e.value));
  const useUtil = shown.edges.some((e) => e.utilization !== undefined && e.utilization !== null);
  const scale = useUtil ? (v) => v : scaler("bytes", values);
  // a big trace (a collective over a whole segment: ~10,000 arcs) is drawn lean:
  // straight edges, names on the switches only (GPUs, NICs and hosts on click)
  const big = shown.edges.length > BIG_TRACE;
  const quiet = { gpu: 1, nic: 1, host: 1 };
  const nodes = shown.nodes.map((n) => ({ group: "nodes", position: { x: n.x, y: n.y },
    data: Object.assign({}, n, { label: big && quiet[n.kind] ? "" : (n.label || n.name),
      colour: KIND_COLOUR[n.kind] || "#999", size: big && quiet[n.kind] ? 8 : 22 }) }));
  const bn = data.bottleneck;
  const edges = shown.edges.map((e, i) => ({ group: "edges",
    classes: (e.bottleneck ? "bottleneck" : "") + (big ? " fast" : ""),
    data: Object.assign({}, e, { colour: heat(scale(values[i])),
      width: big ? 1 : 2 + Math.min(6, Math.log2(1 + (e.flows_here || 1))),
      label: e.bottleneck ? "bottleneck " + (useUtil ? metricText("utilization", e.utilization) : bytes(e.bytes)) : "" }) }));
  cy.resize();
  if (data.grouped) {
    drawGrouped(cy, data, useUtil, scale, values);
  } else {
    cy.batch(() => { cy.elements().remove(); cy.add(nodes.concat(edges)); });
    cy.batch(() => spreadRows(cy));
    fitView(cy);
    readableLabels(cy);
  }
  const tr = data.truncated;
  const gr = data.grouped;
  $("trace-summary").textContent = (data.what || "") + " — " + fmt(data.flows) + " flows, "
    + bytes(data.bytes) + ", " + fmt(gr ? gr.arcs : tr ? tr.edges_total : data.edges.length) + " links (arcs) used"
    + (gr ? "; drawn as " + fmt(data.edges.length) + " group links between " + fmt(data.nodes.length)
      + " groups (the topology's overview), each with the traced bytes and its busiest link's utilization" : "")
    + (data.utilization_window ? "; utilization over its own window " + ms(data.utilization_window.start_ns)
      + " – " + ms(data.utilization_window.end_ns) : "");
  const note = $("trace-truncated");
  note.hidden = !tr;
  note.textContent = tr ? "Truncated: " + fmt(tr.edges_sent) + " of " + fmt(tr.edges_total)
    + " arcs drawn (the bottleneck, the listed flows' paths, then the heaviest)." : "";
  legend($("trace-scale"), useUtil ? "utilization" : "bytes", useUtil ? 1 : scale.max,
    useUtil ? "utilization of each link (the whole traffic's load"
      + (data.utilization_window ? ", during the traced window)" : ")")
      + (gr ? "; a group link: its busiest link" : "")
      : "bytes of the traced flows on each link");
  showPaths(data);
  const b = $("trace-bottleneck"); clear(b);
  if (bn) {
    b.appendChild(el("h3", "Bottleneck", "bad"));
    b.appendChild(detailRows([["link", bn.from + " → " + bn.to], ["tier", bn.tier],
      [bn.window ? "utilization in its window" : "utilization",
        bn.utilization !== undefined ? metricText("utilization", bn.utilization) : null],
      ["window", bn.window ? ms(bn.window.start_ns) + " – " + ms(bn.window.end_ns) : null],
      ["utilization (whole run)", bn.window && bn.utilization_run !== undefined
        ? metricText("utilization", bn.utilization_run) : null],
      ["bytes", bytes(bn.bytes)], ["flows on it", fmt(bn.flows)],
      ["other collectives", (bn.collectives || []).join(", ")]]));
    b.appendChild(el("h3", "Flows sharing it"));
    fillTable($("trace-sharing"), ["src", "dst", "collective", "job", "bytes"], bn.sharing || [],
      { format: { bytes: (v) => bytes(v) },
        empty: "No other flow shares the bottleneck link: the traced flows have it alone." });
  } else {
    clear($("trace-sharing"));
  }
  state.trace.drawMs = performance.now() - t0;
}
/** A whole pattern on the overview's groups: the topology's layout and labels, one
 *  edge per group pair, width by the traced bytes, colour by its busiest link. */
function drawGrouped(cy, data, useUtil, scale, values) {
  const top = Math.max(1, ...data.edges.map((e) => e.bytes || 0));
  const els = data.nodes.map((n) => ({ group: "nodes", position: { x: n.x, y: n.y },
    classes: n.kind === "tor" || n.kind === "host" ? "vlabel" : "",
    data: Object.assign({}, n, { label: nodeLabel(n).replace(n.kind === "tor" || n.kind === "host" ? "\n" : "\u0000", " "),
      colour: KIND_COLOUR[n.kind] || "#999", size: Math.min(50, 16 + 6 * Math.log2(1 + n.count)), lm: 0 }) }))
    .concat(data.edges.map((e, i) => ({ group: "edges", classes: e.bottleneck ? "bottleneck" : "",
      data: Object.assign({}, e, { colour: heat(scale(values[i])),
        width: 1.5 + 10 * Math.sqrt((e.bytes || 0) / top),
        label: e.bottleneck ? "bottleneck " + (useUtil ? metricText("utilization", e.utilization) : bytes(e.bytes)) : "" }) })));
  cy.batch(() => { cy.elements().remove(); cy.add(els); });
  stretch(cy);
  fitView(cy);
  readableLabels(cy);
}
/** The listed flows (first 50, and one through the bottleneck) in a picker; the
 *  picked flow's hops in a table. */
function showPaths(data) {
  const s = $("trace-flow"); clear(s);
  const paths = data.paths || [];
  $("trace-paths").hidden = paths.length === 0;
  paths.forEach((p, i) => {
    const o = el("option", "flow " + p.flow + ": " + p.src + " → " + p.dst + " · " + fmt(p.hops)
      + " hops" + (p.bottleneck ? " · through the bottleneck" : ""));
    o.value = String(i); s.appendChild(o);
  });
  let pick = paths.findIndex((p) => p.bottleneck);
  if (pick < 0) pick = 0;
  if (paths.length) { s.value = String(pick); showHops(data, pick); } else clear($("trace-hops"));
}
function showHops(data, i) {
  const hops = (data.hops || [])[i] || [];
  const rows = hops.map((h, k) => Object.assign({ hop: k + 1 }, h,
    { mark: h.bottleneck ? "bottleneck" : "" }));
  fillTable($("trace-hops"), ["hop", "from", "to", "tier", "utilization", "bytes", "flows",
    "flow_bytes", "mark"], rows, { headers: { bytes: "bytes on link", flows: "flows on link",
    flow_bytes: "this flow's bytes", mark: "" },
  format: { utilization: (v) => metricText("utilization", v), bytes: (v) => bytes(v),
    flow_bytes: (v) => bytes(v) } });
  $("trace-hops").querySelectorAll("tbody tr").forEach((tr, k) => {
    if (hops[k].bottleneck) tr.classList.add("bottleneck");
  });
  const cy = api.traceCy;
  // only the previous flow's edges change class: a restyle of a 10,000-edge trace
  // would take a second
  cy.batch(() => {
    cy.$("edge.highlight").removeClass("highlight");
    for (const h of hops) cy.getElementById(h.group_edge || "a:" + h.arc).addClass("highlight");
  });
}
export function bindTraceEvents() {
  $("trace-flow").addEventListener("change", (ev) => {
    if (state.trace.data) showHops(state.trace.data, Number(ev.target.value));
  });
  $("trace-select").addEventListener("change", (ev) => {
    const v = ev.target.value;
    if (!v) return;
    guarded(() => doTrace(JSON.parse(v)));
  });
  $("trace-pair").addEventListener("click", () => {
    const s = $("trace-src").value.trim(); const d = $("trace-dst").value.trim();
    if (s && d) guarded(() => doTrace(["pair", [s, d]]));
  });
  api.traceCy.on("mouseover", "node", (ev) => { api.traceCy.container().title = ev.target.data("name") || ""; });
  api.traceCy.on("mouseout", "node", () => { api.traceCy.container().title = ""; });
  api.traceCy.on("tap", "edge", (ev) => {
    const d = ev.target.data();
    $("trace-summary").textContent = d.tier + " " + (api.traceCy.getElementById(d.source).data("name"))
      + " → " + (api.traceCy.getElementById(d.target).data("name")) + ": " + bytes(d.bytes) + ", "
      + fmt(d.flows_here) + " flows" + (d.utilization !== undefined ? ", " + metricText("utilization", d.utilization) : "");
  });
}

