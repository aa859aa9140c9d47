/* The cytoscape.js graphs (topology and trace): style, layout helpers, fitting. The
 * vendored cytoscape.min.js is a classic script loaded before the modules (index.html):
 * it defines the global ``cytoscape``. */

/** Past this many edges a graph is drawn lean (straight edges, fewer labels). */
export const BIG_TRACE = 1500;

export const KIND_COLOUR = { core: "#6a4c93", spine: "#6a4c93", agg: "#1982c4", tor: "#2a9d8f",
  leaf: "#2a9d8f", host: "#8d99ae", gpu: "#adb5bd", nic: "#adb5bd" };
const cyStyle = [
  { selector: "node", style: {
    "label": "data(label)", "font-size": 10, "text-wrap": "wrap", "text-max-width": 140,
    "text-valign": "bottom", "text-halign": "center", "text-margin-y": 2, "color": "#1b2430",
    "background-color": "data(colour)", "width": "data(size)", "height": "data(size)",
    "shape": "round-rectangle", "border-width": 1, "border-color": "#ffffff",
    "min-zoomed-font-size": 6 } },
  { selector: "node[kind = 'host']", style: { "shape": "ellipse", "font-size": 7 } },
  { selector: "node.down", style: { "background-color": "#ffffff", "border-color": "#c62828",
    "border-width": 3, "border-style": "dashed" } },
  { selector: "node.partdown", style: { "border-color": "#c62828", "border-width": 3 } },
  { selector: "edge.partdown", style: { "line-style": "dashed" } },
  { selector: "node.highlight", style: { "border-color": "#ff00aa", "border-width": 5,
    "z-index": 100, "font-weight": "bold" } },
  { selector: "edge", style: {
    "width": "data(width)", "line-color": "data(colour)", "curve-style": "bezier",
    "opacity": 0.85 } },
  { selector: "edge.down", style: { "line-style": "dashed", "line-color": "#c62828",
    "opacity": 1 } },
  { selector: "edge.highlight", style: { "line-color": "#ff00aa", "width": 6, "z-index": 100 } },
  { selector: "edge.bottleneck", style: { "line-color": "#d00000", "width": 7,
    "label": "data(label)", "font-size": 9, "color": "#d00000",
    "text-background-color": "#fff", "text-background-opacity": 1 } },
  { selector: "edge.moved", style: { "line-style": "solid" } },
  { selector: "edge.was", style: { "line-color": "#1e5ac8", "line-style": "dashed", "width": 4,
    "opacity": 1, "target-arrow-shape": "triangle", "target-arrow-color": "#1e5ac8" } },
  { selector: "edge.now", style: { "line-color": "#ff00aa", "width": 4, "opacity": 1,
    "target-arrow-shape": "triangle", "target-arrow-color": "#ff00aa" } },
  { selector: "edge.both", style: { "line-color": "#5b6675", "width": 3, "opacity": 1,
    "target-arrow-shape": "triangle", "target-arrow-color": "#5b6675" } },
  { selector: "edge.fast", style: { "curve-style": "haystack", "opacity": 1 } },
  { selector: ":selected", style: { "overlay-color": "#1f6fb2", "overlay-opacity": 0.2 } },
];
/** Stretch a wide, flat preset layout vertically (tiers further apart) so that it
 *  fills the view's shape instead of a thin band; x order and tiers are kept. */
export function stretch(cy) {
  const bb = positionsBox(cy);
  const w = cy.width(); const h = cy.height();
  if (!bb || !bb.w || !bb.h || !w || !h) return;
  const k = Math.min(6, (bb.w / bb.h) / (w / h));
  if (k <= 1.05) return;
  cy.nodes().positions((n) => ({ x: n.position("x"), y: n.position("y") * k }));
}
/** Spread each row of nodes (same y: one tier) evenly across the view's width, in
 *  their x order: a trace's GPUs, NICs and switches each fill one readable row. */
export function spreadRows(cy) {
  const rows = new Map();
  cy.nodes().forEach((n) => {
    const y = n.position("y");
    if (!rows.has(y)) rows.set(y, []);
    rows.get(y).push(n);
  });
  const ys = Array.from(rows.keys()).sort((a, b) => a - b);
  const width = 1000 * Math.max(1, cy.width() / Math.max(1, cy.height())) * 0.8;
  const gap = ys.length > 1 ? 1000 / (ys.length - 1) : 0;
  ys.forEach((y, r) => {
    const row = rows.get(y).sort((a, b) => a.position("x") - b.position("x"));
    row.forEach((n, i) => n.position({ x: ((i + 0.5) / row.length) * width, y: r * gap }));
  });
}
/** The box of the nodes' positions (cheap: no label or edge geometry, unlike
 *  cytoscape's boundingBox, which measures every label of a 10,000-element trace). */
function positionsBox(cy) {
  let x1 = Infinity; let x2 = -Infinity; let y1 = Infinity; let y2 = -Infinity;
  cy.nodes().forEach((n) => {
    const p = n.position();
    if (p.x < x1) x1 = p.x; if (p.x > x2) x2 = p.x; if (p.y < y1) y1 = p.y; if (p.y > y2) y2 = p.y;
  });
  if (x1 === Infinity) return null;
  return { x1, x2, y1, y2, w: x2 - x1, h: y2 - y1 };
}
/** Fit the view to the nodes' positions, with room for node sizes and labels (and
 *  for upright labels under the bottom row, when some are drawn). */
export function fitView(cy) {
  const bb = positionsBox(cy);
  if (!bb) return;
  const pad = 40;
  const below = cy.nodes(".vlabel").length ? 110 : 0;
  const w = Math.max(1, cy.width() - 2 * pad); const h = Math.max(1, cy.height() - 2 * pad - below);
  const z = Math.max(cy.minZoom(), Math.min(2, w / Math.max(bb.w, 1), h / Math.max(bb.h, 1)));
  cy.viewport({ zoom: z, pan: { x: pad + (w - bb.w * z) / 2 - bb.x1 * z,
    y: pad + (h - bb.h * z) / 2 - bb.y1 * z } });
}
/** Labels about 11 px on screen at the fitted zoom (they still scale when zooming). */
export function readableLabels(cy) {
  const z = cy.zoom() || 1;
  // host labels stay small (hidden until zoomed in: a segment has 136 of them), except
  // the highlighted one
  cy.style().fromJson(cyStyle.concat([
    { selector: "node", style: { "font-size": Math.max(6, 11 / z), "text-max-width": 150 / z } },
    // hosts 48 apart in a segment's rows: as large as their short names fit side by side
    { selector: "node[kind = 'host']", style: { "font-size": Math.min(17, Math.max(6, 9 / z)) } },
    { selector: "node.partdown", style: { "border-color": "#c62828", "border-width": 3 } },
  { selector: "edge.partdown", style: { "line-style": "dashed" } },
  { selector: "node.highlight", style: { "font-size": Math.max(6, 12 / z) } },
  // a dense row (a pod's ToR groups, a ToR's NIC ports): labels read top to bottom
  { selector: "node.vlabel", style: { "text-rotation": -Math.PI / 2, "text-wrap": "none",
    "text-valign": "center", "text-margin-y": "data(lm)", "font-size": Math.max(6, 10 / z) } },
  ])).update();
  const fs = Math.max(6, 10 / z);
  cy.nodes(".vlabel").forEach((n) => {
    n.data("lm", 0.29 * fs * String(n.data("label") || "").length + n.data("size") / 2 + 3 / z);
  });
}
export function makeCy(container) {
  // eslint-disable-next-line no-undef
  return cytoscape({ container, style: cyStyle, layout: { name: "preset" },
    minZoom: 0.005, maxZoom: 8, boxSelectionEnabled: false,
    hideEdgesOnViewport: true, textureOnViewport: true });
}


/** The label drawn on a node: a group names what it holds (segment, tier, plane:
 *  "seg 3 ToRs plane 0") and its member count; a switch its (short) name. */
export function nodeLabel(n) {
  if (n.count) {
    return (n.label || n.name || n.id) + "\n×" + fmtCount(n.count)
      + (n.down ? " (" + fmtCount(n.down) + " down)" : "");
  }
  return n.label || n.name || n.id;
}
function fmtCount(v) { return Number(v).toLocaleString("en-US"); }
