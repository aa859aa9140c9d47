/* The heatmap view: per-tier statistics, the hottest links, the tier x time grid and
 * one cell per aggregated link group (a click shows it in the topology). */

import { call, guarded } from "./client.js";
import { apiScaler, heat, legend, perLink, scaler } from "./colour.js";
import { $, fillTable, fmt, metricText, ms, short } from "./dom.js";
import { api, state } from "./state.js";
import { applyHighlight, drill, goTo, level } from "./topology.js";
import { show } from "./views.js";

export async function openHeatmap() {
  if (state.heat.data === null || state.stale.heatmap) await drawHeatmap();
}
export async function drawHeatmap() {
  const h = state.heat;
  const data = await call("heatmap", { metric: h.metric, t: h.t, k: 20, scope: h.scope || "all" },
    { withFail: true });
  h.data = data;
  const times = data.times_ns || (state.info.times_ns || []);
  $("heat-time-label").textContent = h.t < 0 ? "whole run" : "step " + h.t + " of " + times.length
    + (times[h.t] !== undefined ? " (" + ms(times[h.t]) + ")" : "");
  fillTable($("heat-tiers"), ["tier", "direction", "arcs", "mean", "active", "mean_active", "p99", "max"],
    data.tiers || [],
    { headers: { arcs: "links", mean: "mean (all links)", active: "active links",
      mean_active: "mean (active links)" },
      format: { mean: (v) => metricText(h.metric, v), mean_active: (v) => metricText(h.metric, v),
      p99: (v) => metricText(h.metric, v), max: (v) => metricText(h.metric, v) } });
  const hot = data.hottest || [];
  const cols = ["from", "from_port", "to", "to_port", "tier", "value"];
  if (hot.some((r) => r.driver !== undefined)) cols.push("driver", "job");
  fillTable($("heat-hottest"), cols, hot,
    { headers: { driver: "driven by (collective / pattern)", job: "job" },
      format: { value: (v) => metricText(h.metric, v),
        driver: (v, row) => (v ? v + (row.drivers > 1 ? " (" + Math.round(100 * row.driver_share)
          + "% of its bytes; " + fmt(row.drivers) + " share it)" : "") : "—") },
      onClick: (row) => guarded(() => showLink(row)) });
  const when = h.t < 0 ? "in the whole run" : "at step " + h.t;
  empty("heat-tiers-empty", !(data.tiers || []).length,
    "No tier statistics: the fabric's links are not known here (a run folder without its scenario).");
  empty("heat-hottest-empty", !hot.length, "No link carried " + h.metric + " " + when
    + (state.fail.length ? " with the failure set" : "") + ": every value is 0.");
  drawSeries(data.series, h, times);
  if (state.info.fabric) {
    h.links = await call("topology", { metric: h.metric, t: h.t, stat: state.topo.stat },
      { withFail: true });
    drawLinkGrid(h.links, h.metric);
  } else {
    $("heat-links").hidden = true;
  }
  state.stale.heatmap = false;
}
/** Show ``text`` in the message element ``id`` when ``isEmpty``, else hide it. */
function empty(id, isEmpty, text) {
  const box = $(id);
  box.hidden = !isEmpty;
  box.textContent = isEmpty ? text : "";
}
/** Up to ``most`` step indices spread over ``n`` steps, the first and the last included. */
function ticks(n, most) {
  if (n <= 1) return n ? [0] : [];
  const k = Math.min(n, most);
  const out = [];
  for (let i = 0; i < k; i += 1) out.push(Math.round((i * (n - 1)) / (k - 1)));
  return Array.from(new Set(out));
}
/** A time for an axis label: ms with as few digits as the span needs. */
function tickText(ns, spanNs) {
  const x = Number(ns) / 1e6;
  const d = spanNs >= 1e7 ? 0 : spanNs >= 1e6 ? 1 : spanNs >= 1e5 ? 2 : 3;
  return x.toFixed(d) + " ms";
}
/** Tier × time grid of the per-tier series, with a time axis (each step's start) and
 *  its colour scale; a click on a column sets the time slider. */
function drawSeries(series, h, stepTimes) {
  const cv = $("heat-series"); const ctx = cv.getContext("2d");
  ctx.clearRect(0, 0, cv.width, cv.height);
  const names = series && series.tiers ? Object.keys(series.tiers) : [];
  const times = (series && series.times_ns) || stepTimes || [];
  const n = times.length;
  const none = !names.length || !n;
  empty("heat-series-empty", none, "No series over time: " + (n ? "no tier has values."
    : "this run has no time steps (a design, or a run without its samples)."));
  cv.hidden = none;
  if (none) { legend($("heat-series-scale"), null); cv.dataset.ticks = "[]"; return; }
  const all = []; for (const k of names) for (const v of series.tiers[k]) all.push(v);
  const scale = scaler(h.metric, all);
  const left = 110; const axis = 30;
  const rowH = Math.max(12, Math.min(22, Math.floor(200 / names.length)));
  cv.height = rowH * names.length + 4 + axis;
  const w = (cv.width - left) / n;
  ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
  names.forEach((k, i) => {
    ctx.fillStyle = "#1b2430"; ctx.fillText(k, 2, i * rowH + rowH / 2 + 2);
    series.tiers[k].forEach((v, j) => {
      ctx.fillStyle = heat(scale(v)); ctx.fillRect(left + j * w, i * rowH + 2, Math.ceil(w), rowH - 1);
    });
  });
  // the time axis: a tick at the start of a few steps, labelled in ms
  const y0 = rowH * names.length + 4;
  const span = Number(times[n - 1]) - Number(times[0]);
  const labels = [];
  ctx.strokeStyle = "#5b6675"; ctx.fillStyle = "#1b2430"; ctx.textBaseline = "top";
  ctx.beginPath(); ctx.moveTo(left, y0 + 0.5); ctx.lineTo(cv.width, y0 + 0.5); ctx.stroke();
  const picks = ticks(n, Math.max(2, Math.floor((cv.width - left) / 90)));
  picks.forEach((j, i) => {
    const x = left + j * w;
    const text = tickText(times[j], span);
    labels.push(text);
    ctx.beginPath(); ctx.moveTo(x + 0.5, y0); ctx.lineTo(x + 0.5, y0 + 5); ctx.stroke();
    const tw = ctx.measureText(text).width;
    ctx.textAlign = "left";
    ctx.fillText(text, Math.min(Math.max(left, x - tw / 2), cv.width - tw - 1), y0 + 7);
    if (i === 0) { ctx.fillText("step start", 2, y0 + 7); }
  });
  cv.dataset.ticks = JSON.stringify(labels);
  cv.dataset.steps = String(n);
  legend($("heat-series-scale"), h.metric, scale.max, h.metric + " per tier and step");
  if (h.t >= 0) { ctx.strokeStyle = "#000"; ctx.strokeRect(left + h.t * w, 1, Math.max(2, w), y0 - 2); }
  cv.onclick = (ev) => {
    const r = cv.getBoundingClientRect();
    const x = (ev.clientX - r.left) * (cv.width / r.width) - left;
    if (x < 0) return;
    const t = Math.min(n - 1, Math.floor(x / w));
    $("heat-time").value = String(t); h.t = t; guarded(drawHeatmap);
  };
}
/** One cell per aggregated link group of the overview: one block of rows per tier,
 *  labelled with the tier and its group count on the left, cells by value (hottest
 *  first); a cell big enough carries its figure. */
function drawLinkGrid(topo, metric) {
  const cv = $("heat-links"); cv.hidden = false; const ctx = cv.getContext("2d");
  const tiers = Array.from(new Set(topo.edges.map((e) => e.tier))).sort();
  const scale = apiScaler(topo.scale, metric, topo.edges.map(perLink));
  const left = 120;
  const per = tiers.map((t) => topo.edges.filter((e) => e.tier === t)
    .sort((a, b) => (perLink(b) || 0) - (perLink(a) || 0)));
  const n = topo.edges.length;
  const area = (cv.width - left) * 220;
  const cell = Math.max(6, Math.min(40, Math.floor(Math.sqrt(area / Math.max(1, n)))));
  const cols = Math.max(1, Math.floor((cv.width - left) / cell));
  const rows = per.map((es) => Math.max(1, Math.ceil(es.length / cols)));
  cv.height = Math.max(20, rows.reduce((a, b) => a + b, 0) * cell + 4 * tiers.length);
  ctx.clearRect(0, 0, cv.width, cv.height);
  const where = [];  // [x, y, edge] of each cell, for clicks
  const labels = [];
  let y = 0;
  ctx.textBaseline = "middle";
  per.forEach((es, ti) => {
    ctx.fillStyle = "#1b2430"; ctx.font = "11px sans-serif"; ctx.textAlign = "left";
    const label = tiers[ti] + " (" + fmt(es.length) + ")";
    labels.push(label);
    ctx.fillText(label, 2, y + Math.min(cell, rows[ti] * cell) / 2);
    es.forEach((e, i) => {
      const x = left + (i % cols) * cell; const yy = y + Math.floor(i / cols) * cell;
      const down = e.links && e.links_down >= e.links;
      const v = perLink(e);
      ctx.fillStyle = down ? "#000" : heat(scale(v));
      ctx.fillRect(x, yy, cell - 1, cell - 1);
      if (cell >= 30 && !down) {
        const x01 = scale(v);
        ctx.fillStyle = x01 > 0.6 ? "#fff" : "#1b2430"; ctx.font = "9px sans-serif"; ctx.textAlign = "center";
        ctx.fillText(short(metric, v), x + cell / 2, yy + cell / 2);
      }
      where.push([x, yy, e]);
    });
    y += rows[ti] * cell + 4;
  });
  cv.dataset.rows = JSON.stringify(labels);
  cv.dataset.cell = String(cell);
  cv.dataset.valued = String(cell >= 30);
  const down = topo.edges.filter((e) => e.links_down > 0).reduce((s, e) => s + e.links_down, 0);
  legend($("heat-links-scale"), metric, scale.max, metric + " " + (topo.colour_by || "per link"),
    topo.scale);
  $("heat-links-label").textContent = fmt(n) + " link groups, each coloured by the "
    + (topo.stat || "mean") + " of its links (" + metricText(metric, scale.min || 0) + " to "
    + metricText(metric, scale.max) + (topo.scale ? ", " + topo.scale.unit : "") + "); " + fmt(down)
    + " links down (black = every link of the group down)";
  cv.onclick = (ev) => {
    const r = cv.getBoundingClientRect();
    const px = (ev.clientX - r.left) * (cv.width / r.width);
    const py = (ev.clientY - r.top) * (cv.height / r.height);
    const hit = where.find(([x, yy]) => px >= x && px < x + cell && py >= yy && py < yy + cell);
    if (!hit) return;
    const e = hit[2];
    $("heat-links-label").textContent = e.tier + ": " + e.source + " — " + e.target + " · "
      + fmt(e.links) + " links · up " + metricText(metric, e.up) + " · down " + metricText(metric, e.down);
    guarded(async () => {
      await show("topology", { keep: true });
      if (level() !== "overview") await goTo({});
      applyHighlight({ id: e.id });
    });
  };
}
/** A hottest row: open its segment (when it has one) and highlight the link. */
async function showLink(row) {
  if (!state.info.fabric) return;
  await show("topology", { keep: true });
  if (row.view && row.tier !== "access") {
    // a ToR uplink or an agg-core link: the view that draws it one by one
    await goTo(row.view);
    const hit = applyHighlight({ id: "l:" + row.link, link: row.link, name: row.from });
    if (!hit && row.view.plane) {
      const a = api.cy.nodes().filter((n) => n.data("name") === row.from || n.data("name") === row.to);
      if (a.length === 2) applyHighlight({ id: a.edgesWith(a).id() || "" }) || applyHighlight({ name: row.from });
      else applyHighlight({ name: row.from });
    }
    return;
  }
  if (row.segment !== null && row.segment !== undefined && row.segment >= 0) {
    if (state.topo.segment !== row.segment) await drill(row.segment);
  } else if (level() !== "overview") await goTo({});
  const h = { id: "l:" + row.link, link: row.link, name: row.from };
  if (!applyHighlight(h)) {
    applyHighlight({ name: row.to }) || applyHighlight({ name: row.from });
  }
}

