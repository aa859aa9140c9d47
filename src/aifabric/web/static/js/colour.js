/* Colours of loads: the heat scale, a metric's normaliser and the legend. */

import { clear, el, metricText } from "./dom.js";

/** 0..1 -> a colour from cool grey-blue through amber to red. */
export function heat(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "#b8c2cc";
  const x = Math.max(0, Math.min(1, v));
  const stops = [[0, [160, 180, 200]], [0.5, [240, 190, 40]], [1, [200, 30, 30]]];
  let a = stops[0]; let b = stops[1];
  if (x > 0.5) { a = stops[1]; b = stops[2]; }
  const f = (x - a[0]) / (b[0] - a[0]);
  const c = a[1].map((ca, i) => Math.round(ca + f * (b[1][i] - ca)));
  return "rgb(" + c.join(",") + ")";
}
/** A normaliser for a metric: utilization is already 0..1; others scale by the max
 *  (the function's .max says which value is the top colour, for the legend). */
export function scaler(metric, values) {
  if (metric === "utilization") { const f = (v) => v; f.max = 1; return f; }
  let m = 0;
  for (const v of values) if (Number.isFinite(v) && v > m) m = v;
  const f = m > 0 ? (v) => v / m : () => 0;
  f.max = m;
  return f;
}
/** The normaliser of a graph the API sent with its colour ``scale`` ({lo, hi, min, max,
 *  unit}): lo is the bottom colour, hi (the largest figure drawn) the top one, for every
 *  metric, so the hottest group is always the top colour. Without a scale: scaler(). */
export function apiScaler(scale, metric, values) {
  if (!scale) return scaler(metric, values);
  const lo = Number(scale.lo) || 0; const hi = Number(scale.hi) || 0;
  const f = hi > lo ? (v) => (v - lo) / (hi - lo) : () => 0;
  f.max = hi; f.min = lo; f.scale = scale;
  return f;
}
/** The colour of an edge: its per-link figure (a group edge's sum over its links
 *  divided by their number; a mean or max as it is), else its value. */
export function perLink(e) {
  return e.per_link !== undefined && e.per_link !== null ? e.per_link : e.value;
}
/** A legend (colour -> value) into ``box``: a gradient from the scale's bottom to its
 *  top with both values, what the colour means, and (given the API's ``scale``) the
 *  range drawn and the unit. */
export function legend(box, metric, top, note, scale) {
  clear(box);
  if (!metric) { box.hidden = true; return; }
  box.hidden = false;
  box.appendChild(el("span", "colour: " + note));
  const bar = el("span", null, "bar");
  const stops = [0, 0.25, 0.5, 0.75, 1].map((x) => heat(x) + " " + (100 * x) + "%");
  bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
  const lo = scale ? Number(scale.lo) || 0 : 0;
  box.appendChild(el("span", metricText(metric, lo) || "0", "lo"));
  box.appendChild(bar);
  box.appendChild(el("span", metricText(metric, top), "hi"));
  if (scale) {
    box.appendChild(el("span", "drawn " + metricText(metric, scale.min) + " to "
      + metricText(metric, scale.max) + " (" + scale.unit + ")", "range"));
    box.dataset.min = String(scale.min);
    box.dataset.unit = String(scale.unit);
  }
  box.dataset.lo = String(lo);
  box.dataset.max = String(top);
}
/** -1..1 -> a diverging colour: blue (less load) through light grey (no change) to red
 *  (more load): a what-if's change per link. */
export function diverging(v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "#b8c2cc";
  const x = Math.max(-1, Math.min(1, v));
  const mid = [205, 210, 216]; const end = x < 0 ? [30, 90, 200] : [200, 30, 30];
  const f = Math.abs(x);
  return "rgb(" + mid.map((m, i) => Math.round(m + f * (end[i] - m))).join(",") + ")";
}
/** A diverging legend: ``lo`` (blue) .. 0 (grey) .. ``hi`` (red) with their values. */
export function divergingLegend(box, metric, top, note) {
  clear(box);
  box.hidden = false;
  box.appendChild(el("span", note));
  const bar = el("span", null, "bar");
  const stops = [-1, -0.5, 0, 0.5, 1].map((x) => diverging(x) + " " + (50 + 50 * x) + "%");
  bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
  box.appendChild(el("span", "−" + (metricText(metric, top) || "0"), "lo"));
  box.appendChild(bar);
  box.appendChild(el("span", "+" + (metricText(metric, top) || "0"), "hi"));
  box.dataset.max = String(top);
}
