/* The tabs (views) and the header: which views apply, showing one (drawn the first time
 * and again when the failure set changed), the fabric line, the failure set. */

import { guarded } from "./client.js";
import { $, clear, el, fmt, ms } from "./dom.js";
import { api, state } from "./state.js";

const VIEWS = ["topology", "heatmap", "trace", "whatif", "run", "lab"];
/** view -> its async draw function (main.js registers them: onView) */
const DRAW = {};
export function onView(view, draw) { DRAW[view] = draw; }
export function availableViews() {
  const v = (state.info && state.info.views) || ["topology"];
  return VIEWS.filter((x) => v.includes(x));
}
export async function show(view, opts) {
  if (!availableViews().includes(view)) return;
  state.view = view;
  for (const b of document.querySelectorAll("#tabs button")) {
    b.setAttribute("aria-selected", b.dataset.view === view ? "true" : "false");
  }
  for (const s of document.querySelectorAll("section.view")) s.hidden = s.dataset.view !== view;
  if (location.hash !== "#" + view) history.replaceState(null, "", "#" + view);
  // a view is drawn the first time it is shown, and again when the failure set changed
  const draw = DRAW[view];
  const ok = await guarded(async () => { await draw(); return true; });
  if (view === "topology" && api.cy) api.cy.resize();
  if (view === "trace" && api.traceCy) api.traceCy.resize();
  if (view === "whatif" && api.whatifCy) api.whatifCy.resize();
  return ok === true;
}

// ---------------------------------------------------------------- header / info
export function showInfo(info) {
  $("twin-name").textContent = info.name || "";
  $("twin-mode").textContent = info.mode ? "(" + info.mode + ")" : "";
  document.title = "aifabric — " + (info.name || "");
  const f = info.fabric;
  $("fabric-line").textContent = f ? [
    f.family, fmt(f.gpus) + " GPUs", fmt(f.hosts) + " hosts", fmt(f.switches) + " switches",
    fmt(f.links) + " links", fmt(f.segments) + " segments", fmt(f.pods) + " pods",
    fmt(f.planes) + " planes"].join(" · ") : "no topology";
  const views = availableViews();
  for (const b of document.querySelectorAll("#tabs button")) b.hidden = !views.includes(b.dataset.view);
  const miss = info.missing || [];
  $("missing").hidden = miss.length === 0;
  const ul = $("missing-list"); clear(ul);
  for (const m of miss) ul.appendChild(el("li", m));
  const metrics = info.metrics || [];
  for (const id of ["topo-metric", "heat-metric"]) {
    const s = $(id); clear(s);
    for (const m of metrics) { const o = el("option", m); o.value = m; s.appendChild(o); }
  }
  state.topo.metric = metrics[0] || null;
  state.heat.metric = metrics[0] || null;
  const times = info.times_ns || [];
  const ts = $("topo-time"); clear(ts);
  const all = el("option", "whole run"); all.value = "-1"; ts.appendChild(all);
  times.forEach((t, i) => { const o = el("option", "step " + i + " (" + ms(t) + ")"); o.value = String(i); ts.appendChild(o); });
  ts.disabled = times.length <= 1;
  const range = $("heat-time");
  range.min = "-1"; range.max = String(Math.max(-1, times.length - 1)); range.value = "-1";
  range.disabled = times.length <= 1;
  $("search-form").hidden = !f;
}
function renderFailLine() {
  $("fail-line").hidden = state.fail.length === 0;
  $("fail-list").textContent = state.fail.join(", ");
}
/** Change the failure set: every view re-queries with it when next drawn. */
export function setFail(list) {
  state.fail = Array.from(new Set(list));
  renderFailLine();
  for (const v of VIEWS) state.stale[v] = true;
}
