/* The what-if view: fail switches, ports, links or a whole plane or pod (api/whatif),
 * drawn on the topology's groups (what is down, the load change per link, where the
 * moved flows went), what moved and why, what became unreachable, the loads before and
 * after; the failure set then colours every view. */

import { call, guarded } from "./client.js";
import { diverging, divergingLegend } from "./colour.js";
import { $, bytes, clear, detailRows, el, fillTable, fmt } from "./dom.js";
import { KIND_COLOUR, fitView, nodeLabel, readableLabels, stretch } from "./graph.js";
import { api, state } from "./state.js";
import { setFail, show } from "./views.js";

export async function openWhatif() {
  if ((state.whatif && !state.stale.whatif) || !state.fail.length) return;
  await doWhatif(state.fail);
}
export async function doWhatif(fail) {
  const t0 = performance.now();
  const data = await call("whatif", null, { body: { fail } });
  const dt = performance.now() - t0;
  state.whatif = Object.assign({}, data, { pageMs: dt });
  setFail(data.fail || fail);
  state.stale.whatif = false;
  $("whatif-time").textContent = "answered in " + (dt / 1000).toFixed(2) + " s"
    + (data.seconds !== undefined ? " (server " + Number(data.seconds).toFixed(2) + " s)" : "");
  $("whatif-result").hidden = false;
  const counts = $("whatif-counts"); clear(counts);
  const flows = data.flows || {};
  const impact = data.impact || {};
  const items = [["links down", "links_down", data.links_down]];
  for (const [k, v] of Object.entries(flows)) items.push([k.replace(/_/g, " "), k, v]);
  for (const k of ["nic_ports_down", "nics_degraded", "nics_isolated", "hosts_degraded", "hosts_unreachable"]) {
    if (impact[k] !== undefined) items.push([k.replace(/_/g, " "), "impact_" + k, impact[k]]);
  }
  for (const [k, v] of Object.entries(data.moved_why || {})) items.push(["moved: " + WHY_TEXT[k], "why_" + k, v]);
  for (const [label, key, v] of items) {
    const d = el("div"); d.dataset.key = key;
    d.appendChild(el("dt", label)); const dd = el("dd", fmt(v)); dd.dataset.key = key; d.appendChild(dd);
    counts.appendChild(d);
  }
  const tierCols = (rows) => (rows && rows.length ? Object.keys(rows[0]) : []);
  fillTable($("whatif-tiers-before"), tierCols(data.tiers_before), data.tiers_before || []);
  fillTable($("whatif-tiers-after"), tierCols(data.tiers_after), data.tiers_after || []);
  const moved = data.moved || [];
  // each row: only the hops that changed, between where the paths part and rejoin
  fillTable($("whatif-moved"), ["flow", "src_gpu", "dst_gpu", "before_hops", "after_hops", "why",
    "diverge_at", "rejoin_at"], moved,
  { headers: { before_hops: "before (changed hops)", after_hops: "after (changed hops)",
    diverge_at: "parts at", rejoin_at: "rejoins at" },
  format: { why: (v) => WHY_TEXT[v] || v },
  onClick: (row) => showMoved(row, data),
  empty: "No flow moved: no routed flow crossed what failed." });
  $("whatif-moved").classList.add("clickable");
  const why = data.moved_why || {};
  $("whatif-why").textContent = data.moved_total ? "Why they moved: " + fmt(why.path_lost || 0)
    + " lost their path (it crossed what failed), " + fmt(why.port || 0) + " left on their NIC's "
    + "other port, " + fmt(why.rehashed || 0) + " were rehashed: their old path is intact, but a "
    + "switch on it lost next hops, so its ECMP hash picks from a smaller set and lands elsewhere." : "";
  $("whatif-moved-note").textContent = moved.length ? "(" + fmt(moved.length) + " shown of "
    + fmt(data.moved_total !== undefined ? data.moved_total : moved.length) + ")" : "(none)";
  fillTable($("whatif-unreachable"), ["src_gpu", "dst_gpu"], data.unreachable || [],
    { empty: "No GPU pair became unreachable: every flow still has a path." });
  const b = (v) => bytes(v);
  fillTable($("whatif-hot-before"), ["from", "to", "tier", "value"], data.hottest_before || [],
    { headers: { value: "bytes" }, format: { value: b } });
  fillTable($("whatif-hot-after"), ["from", "to", "tier", "before", "value", "delta"], data.hottest_after || [],
    { headers: { value: "after", delta: "change" },
      format: { before: b, value: b, delta: (v) => (v > 0 ? "+" : v < 0 ? "−" : "") + bytes(Math.abs(v)) },
      empty: "No link carries traffic after the failure." });
  drawGraph(data);
  return data;
}
const WHY_TEXT = { port: "NIC port failover", path_lost: "path lost", rehashed: "rehashed (ECMP set shrank)" };
/** The failure on the overview's groups: what is down (dashed red), each group link
 *  coloured by its load change (blue less, red more), wider the more moved flows cross
 *  it; a click shows before/after. */
function drawGraph(data) {
  const g = data.graph;
  const cy = api.whatifCy;
  if (!g || !cy) return;
  const top = (g.scale && g.scale.hi) || 0;
  const els = g.nodes.map((n) => {
    const down = n.count && n.down >= n.count;
    const vertical = n.count && (n.kind === "tor" || n.kind === "host");
    return { group: "nodes", position: { x: n.x, y: n.y },
      classes: (down ? "down" : n.down > 0 ? "partdown" : "") + (vertical ? " vlabel" : ""),
      data: Object.assign({}, n, { label: vertical ? nodeLabel(n).replace("\n", " ") : nodeLabel(n),
        title: n.label, colour: KIND_COLOUR[n.kind] || "#999", lm: 0,
        size: Math.min(60, 16 + 7 * Math.log2(1 + n.count)) }) };
  }).concat(g.edges.map((e) => {
    const down = e.links_down >= e.links;
    const moved = e.moved_in + e.moved_out;
    return { group: "edges", classes: (down ? "down" : e.links_down > 0 ? "partdown" : "")
      + (moved ? " moved" : ""),
    data: Object.assign({}, e, { colour: diverging(top > 0 ? e.delta / top : 0),
      width: 1.5 + Math.min(10, 1.2 * Math.log2(1 + moved)) }) };
  }));
  $("whatif-cy").parentElement.hidden = false;
  cy.resize();
  cy.container().dataset.mode = "groups";
  cy.batch(() => { cy.elements().remove(); cy.add(els); });
  stretch(cy);
  fitView(cy);
  readableLabels(cy);
  const down = g.edges.reduce((s, e) => s + e.links_down, 0);
  divergingLegend($("whatif-scale"), "bytes", top, "change of each group link's busiest link ("
    + "bytes, routing model); " + fmt(down) + " links down (dashed red)");
  $("whatif-scale").dataset.linksDown = String(down);
}
/** One moved flow drawn switch by switch: the hops both paths share on the middle row,
 *  where they part the old hops above (dashed blue, "was") and the new ones below
 *  (magenta, "now"); what failed is drawn red. "back" returns to the groups. */
function showMoved(row, data) {
  const cy = api.whatifCy;
  if (!cy) return;
  const pb = row.before.split(" > "); const pa = row.after.split(" > ");
  let k = 0;
  while (k < Math.min(pb.length, pa.length) && pb[k] === pa[k]) k += 1;
  let j = 0;
  while (j < Math.min(pb.length, pa.length) - k && pb[pb.length - 1 - j] === pa[pa.length - 1 - j]) j += 1;
  const gap = Math.max(pb.length, pa.length) - k - j;
  const pos = new Map();
  for (let i = 0; i < k; i += 1) pos.set(pb[i], { x: i * 150, y: 0 });
  pb.slice(k, pb.length - j).forEach((n, i) => pos.set("b|" + n, { x: (k + i + (gap - (pb.length - k - j)) / 2) * 150, y: -110 }));
  pa.slice(k, pa.length - j).forEach((n, i) => pos.set("a|" + n, { x: (k + i + (gap - (pa.length - k - j)) / 2) * 150, y: 110 }));
  for (let i = 0; i < j; i += 1) pos.set(pb[pb.length - j + i], { x: (k + gap + i) * 150, y: 0 });
  const failed = new Set(data.fail || []);
  const idOf = (side, path, i) => (i < k || i >= path.length - j ? path[i] : side + "|" + path[i]);
  const els = [];
  for (const [id, p] of pos) {
    const name = id.includes("|") ? id.split("|")[1] : id;
    els.push({ group: "nodes", position: p, classes: failed.has(name) ? "down" : "",
      data: { id: "p:" + id, name, label: name, colour: "#2a9d8f", size: 18, lm: 0 } });
  }
  const edges = new Map();
  for (const [side, path, cls] of [["b", pb, "was"], ["a", pa, "now"]]) {
    for (let i = 0; i + 1 < path.length; i += 1) {
      const s = "p:" + idOf(side, path, i); const t = "p:" + idOf(side, path, i + 1);
      const key = s + ">" + t;
      const shared = i + 1 < k || i >= path.length - j;
      if (!edges.has(key)) edges.set(key, { s, t, cls: shared ? "both" : cls });
    }
  }
  for (const [key, e] of edges) {
    els.push({ group: "edges", classes: e.cls, data: { id: "pe:" + key, source: e.s, target: e.t,
      colour: "#8d99ae", width: 3 } });
  }
  cy.batch(() => { cy.elements().remove(); cy.add(els); });
  readableLabels(cy);
  cy.fit(cy.elements(), 30);  // a dozen nodes: fit with their labels
  if (cy.zoom() > 1.5) { cy.zoom(1.5); cy.center(); }
  readableLabels(cy);
  cy.container().dataset.mode = "flow";
  const box = $("whatif-detail"); clear(box);
  box.appendChild(el("h3", "flow " + row.flow + ": " + row.src_gpu + " → " + row.dst_gpu));
  box.appendChild(detailRows([["why", WHY_TEXT[row.why] || row.why], ["parts at", row.diverge_at],
    ["before", row.before_hops], ["after", row.after_hops], ["rejoins at", row.rejoin_at]]));
  box.appendChild(el("p", "Old hops above (dashed blue), new hops below (magenta); what failed "
    + "is drawn red.", "hint"));
  const back = el("button", "back to the groups"); back.type = "button"; back.id = "whatif-graph-back";
  back.addEventListener("click", () => drawGraph(data));
  box.appendChild(back);
}
function showGraphDetail(d, cy) {
  const box = $("whatif-detail"); clear(box);
  if (d.source) {
    const s = cy.getElementById(d.source).data(); const t = cy.getElementById(d.target).data();
    box.appendChild(el("h3", s.label + " — " + t.label));
    box.appendChild(detailRows([["tier", d.tier], ["links", fmt(d.links)], ["links down", fmt(d.links_down)],
      ["busiest link before", bytes(d.before)], ["busiest link after", bytes(d.after)],
      ["largest increase (one link)", bytes(d.gain)], ["largest decrease (one link)", bytes(d.loss)],
      ["moved flows now crossing", fmt(d.moved_in)], ["moved flows that crossed", fmt(d.moved_out)]]));
  } else {
    box.appendChild(el("h3", d.label));
    box.appendChild(detailRows([["kind", d.kind], ["members", fmt(d.count)], ["down", fmt(d.down)]]));
  }
}
export async function failFromPage(add) {
  await guarded(async () => {
    await show("whatif", { keep: true });
    $("whatif-input").value = add.join(" ");
    await doWhatif(state.fail.concat(add));
  });
}
export function bindWhatifEvents() {
  let timer = null;  // the suggestions' debounce: a submit cancels a pending lookup
  $("whatif-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    clearTimeout(timer);
    const items = $("whatif-input").value.split(/[\s,]+/).map((x) => x.trim()).filter(Boolean);
    if (items.length) guarded(() => doWhatif(state.fail.concat(items)));
  });
  const restore = () => guarded(async () => {
    setFail([]);
    state.whatif = null;
    $("whatif-result").hidden = true;
    $("whatif-time").textContent = "";
    await show(state.view, { keep: true });
  });
  $("whatif-clear").addEventListener("click", restore);
  if (api.whatifCy) {
    api.whatifCy.on("tap", "node", (ev) => showGraphDetail(ev.target.data(), api.whatifCy));
    api.whatifCy.on("tap", "edge", (ev) => showGraphDetail(ev.target.data(), api.whatifCy));
  }
  $("fail-clear").addEventListener("click", restore);
  $("whatif-input").addEventListener("input", () => {
    clearTimeout(timer);
    const q = $("whatif-input").value.trim().split(/[\s,]+/).pop();
    if (!q || q.length < 3) return;
    timer = setTimeout(() => guarded(async () => {
      const hits = await call("search", { q });
      const dl = $("whatif-suggest"); clear(dl);
      const f = state.info.fabric || {};
      for (const [unit, n] of [["plane", f.planes], ["pod", f.pods]]) {
        for (let i = 0; i < (n || 0) && i < 64; i += 1) {
          if ((unit + ":" + i).startsWith(q)) { const o = el("option"); o.value = unit + ":" + i; dl.appendChild(o); }
        }
      }
      for (const h of hits) {
        if (h.kind === "host" || h.kind === "gpu" || h.kind === "nic") continue;
        const o = el("option"); o.value = h.name; dl.appendChild(o);
      }
    }), 250);
  });
}

