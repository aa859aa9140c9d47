/* The page of `aifabric serve`: vanilla JS as ES modules, no build step (index.html
 * loads this module; the others are imported from here).
 *
 * Everything shown comes from the JSON API next to these files (api/..., documented in
 * openapi.json) and goes into the page as text only — element.textContent or cytoscape
 * element data drawn on a canvas — so a hostile name in a spec, scenario or run folder is
 * shown literally and never runs. The single exception is the run's report, which the
 * server renders from report.md with raw HTML disabled (escaped); see run.js, showRun().
 *
 * The modules, one per concern: state.js (the page's state, window.aifabric), dom.js
 * (text-only DOM helpers, formatting), client.js (the API client), colour.js, graph.js
 * (cytoscape), views.js (tabs, header, failure set), topology.js, search.js, heatmap.js,
 * trace.js, whatif.js, run.js and lab.js.
 *
 * For tests and scripts the page exposes window.aifabric = {cy, traceCy, state, ready, ...}
 * and sets document.body.dataset.ready = "1" once the first view is drawn.
 */

import { call, guarded } from "./client.js";
import { heat } from "./colour.js";
import { $, fmt } from "./dom.js";
import { makeCy } from "./graph.js";
import { drawHeatmap, openHeatmap } from "./heatmap.js";
import { showLab } from "./lab.js";
import { showRun, showTable } from "./run.js";
import { runSearch } from "./search.js";
import { api, markReady, state } from "./state.js";
import { bindTopologyEvents, drawTopology, drill, goTo, openTopology } from "./topology.js";
import { bindTraceEvents, doTrace, openTrace } from "./trace.js";
import { availableViews, onView, show, showInfo } from "./views.js";
import { bindWhatifEvents, doWhatif, openWhatif } from "./whatif.js";

onView("topology", openTopology);
onView("heatmap", openHeatmap);
onView("trace", openTrace);
onView("whatif", openWhatif);
onView("run", showRun);
onView("lab", showLab);

function bind() {
  for (const b of document.querySelectorAll("#tabs button")) {
    b.addEventListener("click", () => show(b.dataset.view));
  }
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const q = $("search").value.trim();
    if (q) guarded(() => runSearch(q));
  });
  $("topo-metric").addEventListener("change", (ev) => { state.topo.metric = ev.target.value; guarded(() => drawTopology(false)); });
  $("topo-stat").addEventListener("change", (ev) => {
    state.topo.stat = ev.target.value; state.stale.heatmap = true; guarded(() => drawTopology(false));
  });
  $("topo-time").addEventListener("change", (ev) => { state.topo.t = Number(ev.target.value); guarded(() => drawTopology(false)); });
  $("heat-metric").addEventListener("change", (ev) => { state.heat.metric = ev.target.value; guarded(drawHeatmap); });
  $("heat-scope").addEventListener("change", (ev) => { state.heat.scope = ev.target.value; guarded(drawHeatmap); });
  $("heat-time").addEventListener("change", (ev) => { state.heat.t = Number(ev.target.value); guarded(drawHeatmap); });
  $("run-prev").addEventListener("click", () => guarded(() => showTable(state.runTable.name, Math.max(0, state.runTable.offset - state.runTable.limit))));
  $("run-next").addEventListener("click", () => guarded(() => showTable(state.runTable.name, state.runTable.offset + state.runTable.limit)));
  bindTopologyEvents(api.cy);
  bindTraceEvents();
  bindWhatifEvents();
  window.addEventListener("hashchange", () => {
    const v = location.hash.slice(1);
    if (v && v !== state.view) show(v);
  });
}

async function start() {
  api.cy = makeCy($("cy"));
  api.traceCy = makeCy($("trace-cy"));
  api.whatifCy = makeCy($("whatif-cy"));
  bind();
  const ok = await guarded(async () => {
    const info = await call("info");
    state.info = info;
    showInfo(info);
    const views = availableViews();
    const wanted = location.hash.slice(1);
    const first = views.includes(wanted) ? wanted : views[0];
    return show(first);
  });
  markReady(ok);
}

Object.assign(api, {
  show: (v) => show(v), drill: (s) => guarded(() => drill(s)),
  goTo: (where) => guarded(() => goTo(where)),
  search: (q) => guarded(() => runSearch(q)), whatif: (f) => guarded(() => doWhatif(f)),
  trace: (key) => guarded(() => doTrace(key)), heat, fmt,
});

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
