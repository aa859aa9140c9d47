/* The page's state, and window.aifabric: what tests and scripts read (state, ready, the
 * two cytoscape instances) and call (show, drill, search, whatif, trace; see main.js). */

export const state = {
  info: null,
  view: null,
  fail: [],           // the failure set every load-bearing request carries as fail=
  topo: { metric: null, t: -1, stat: "max", segment: null, plane: null, tor: null, data: null,
    drawMs: null },  // the level drawn: overview, plane {pod, plane}, segment or tor (a name)
  heat: { metric: null, t: -1, data: null, links: null },
  trace: { data: null, key: null },
  whatif: null,
  run: null,
  runTable: { name: null, offset: 0, limit: 100, total: 0 },
  highlight: null,    // {id, name} of the node/edge the search or a click highlighted
  stale: {},          // view -> true when the failure set changed since it was drawn
  readyMs: null,      // performance.now() when the first view was drawn
  requests: 0,        // API requests made (tests read it)
  pending: 0,         // API requests in flight
};

let resolveReady;
const ready = new Promise((r) => { resolveReady = r; });

/** window.aifabric: cy (topology) and traceCy are set by main.js once made. */
export const api = { state, ready, cy: null, traceCy: null, whatifCy: null };
window.aifabric = api;

/** Say the first view is drawn (ok) or failed: body[data-ready] and the ready promise. */
export function markReady(ok) {
  state.readyMs = performance.now();
  document.body.dataset.ready = ok ? "1" : "error";
  resolveReady(ok === true);
}
