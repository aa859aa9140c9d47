/* The page of `aifabric serve`: vanilla JS, no build step.
 *
 * Everything shown comes from the JSON API next to this file (api/..., documented in
 * openapi.json) and goes into the page as text only — element.textContent or cytoscape
 * element data drawn on a canvas — so a hostile name in a spec, scenario or run folder is
 * shown literally and never runs. The single exception is the run's report, which the
 * server renders from report.md with raw HTML disabled (escaped); see showRun().
 *
 * For tests and scripts the page exposes window.aifabric = {cy, traceCy, state, ready, ...}
 * and sets document.body.dataset.ready = "1" once the first view is drawn.
 */
(function () {
  "use strict";

  const state = {
    info: null,
    view: null,
    fail: [],           // the failure set every load-bearing request carries as fail=
    topo: { metric: null, t: -1, segment: null, data: null },
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
  const api = { state, ready, cy: null, traceCy: null };
  window.aifabric = api;

  const $ = (id) => document.getElementById(id);

  // ---------------------------------------------------------------- DOM helpers (text only)
  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function fmt(v, digits) {
    if (v === null || v === undefined) return "";
    if (typeof v === "boolean") return v ? "yes" : "no";
    if (typeof v !== "number") return String(v);
    if (!Number.isFinite(v)) return String(v);
    if (Number.isInteger(v)) return v.toLocaleString("en-US");
    const d = digits === undefined ? 4 : digits;
    return Number(v.toPrecision(d)).toLocaleString("en-US", { maximumFractionDigits: 6 });
  }
  function bytes(v) {
    if (v === null || v === undefined) return "";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let i = 0; let x = Number(v);
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
    return (i ? x.toFixed(2) : String(x)) + " " + units[i];
  }
  function metricText(metric, v) {
    if (v === null || v === undefined) return "";
    if (metric === "utilization") return (100 * v).toFixed(1) + "%";
    if (metric === "bytes" || metric === "queue_bytes") return bytes(v);
    return fmt(v);
  }
  /** Fill a <table> from column names and rows (arrays or objects), every cell as text. */
  function fillTable(table, columns, rows, opts) {
    const o = opts || {};
    clear(table);
    const thead = el("thead"); const hr = el("tr");
    for (const c of columns) hr.appendChild(el("th", o.headers && o.headers[c] ? o.headers[c] : c));
    thead.appendChild(hr); table.appendChild(thead);
    const tbody = el("tbody");
    rows.forEach((row, i) => {
      const tr = el("tr");
      columns.forEach((c, j) => {
        const v = Array.isArray(row) ? row[j] : row[c];
        const f = o.format && o.format[c];
        const td = el("td", f ? f(v, row) : fmt(v));
        if (typeof v === "number") td.className = "num";
        tr.appendChild(td);
      });
      if (o.onClick) tr.addEventListener("click", () => o.onClick(row, i));
      tbody.appendChild(tr);
    });
    table.appendChild(tbody);
  }
  function showError(msg) {
    const box = $("error");
    if (!msg) { box.hidden = true; box.textContent = ""; return; }
    box.textContent = msg; box.hidden = false;
  }

  // ---------------------------------------------------------------- the API
  /** GET (or POST when body is given) api/<path>; params may hold arrays (repeated keys).
   *  withFail adds the current failure set as repeated fail= parameters. */
  async function call(path, params, opts) {
    const o = opts || {};
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) {
      if (v === null || v === undefined || v === "") continue;
      if (Array.isArray(v)) v.forEach((x) => q.append(k, x)); else q.append(k, v);
    }
    if (o.withFail) state.fail.forEach((f) => q.append("fail", f));
    const qs = q.toString();
    const url = "api/" + path + (qs ? "?" + qs : "");
    const init = o.body === undefined ? {} : {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify(o.body),
    };
    state.requests += 1; state.pending += 1;
    document.body.dataset.pending = String(state.pending);
    try {
      const r = await fetch(url, init);
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      if (!r.ok) {
        const msg = body && (body.error || body.detail) ? (body.error || JSON.stringify(body.detail))
          : r.status + " " + r.statusText;
        throw new ApiError(String(msg));
      }
      return body;
    } finally {
      state.pending -= 1;
      document.body.dataset.pending = String(state.pending);
    }
  }
  class ApiError extends Error {}
  /** Run an async UI action; an API error is shown in the page (never thrown to the console). */
  async function guarded(fn) {
    try { showError(null); return await fn(); } catch (e) {
      showError(e instanceof ApiError ? e.message : "page error: " + (e && e.message));
      return null;
    }
  }

  // ---------------------------------------------------------------- colours
  /** 0..1 -> a colour from cool grey-blue through amber to red. */
  function heat(v) {
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
  function scaler(metric, values) {
    if (metric === "utilization") { const f = (v) => v; f.max = 1; return f; }
    let m = 0;
    for (const v of values) if (Number.isFinite(v) && v > m) m = v;
    const f = m > 0 ? (v) => v / m : () => 0;
    f.max = m;
    return f;
  }
  /** The colour of an edge: its per-link figure (a group edge's sum over its links
   *  divided by their number; a mean or max as it is), else its value. */
  function perLink(e) {
    return e.per_link !== undefined && e.per_link !== null ? e.per_link : e.value;
  }
  /** A legend (colour -> value) into ``box``: a gradient from 0 to the scale's top, and
   *  what the colour means. */
  function legend(box, metric, top, note) {
    clear(box);
    if (!metric) { box.hidden = true; return; }
    box.hidden = false;
    box.appendChild(el("span", "colour: " + note));
    const bar = el("span", null, "bar");
    const stops = [0, 0.25, 0.5, 0.75, 1].map((x) => heat(x) + " " + (100 * x) + "%");
    bar.style.background = "linear-gradient(to right, " + stops.join(", ") + ")";
    box.appendChild(el("span", metricText(metric, 0) || "0", "lo"));
    box.appendChild(bar);
    box.appendChild(el("span", metricText(metric, top), "hi"));
    box.dataset.max = String(top);
  }

  // ---------------------------------------------------------------- cytoscape
  const KIND_COLOUR = { core: "#6a4c93", spine: "#6a4c93", agg: "#1982c4", tor: "#2a9d8f",
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
    { selector: "edge.fast", style: { "curve-style": "haystack", "opacity": 1 } },
    { selector: ":selected", style: { "overlay-color": "#1f6fb2", "overlay-opacity": 0.2 } },
  ];
  /** Stretch a wide, flat preset layout vertically (tiers further apart) so that it
   *  fills the view's shape instead of a thin band; x order and tiers are kept. */
  function stretch(cy) {
    const bb = positionsBox(cy);
    const w = cy.width(); const h = cy.height();
    if (!bb || !bb.w || !bb.h || !w || !h) return;
    const k = Math.min(6, (bb.w / bb.h) / (w / h));
    if (k <= 1.05) return;
    cy.nodes().positions((n) => ({ x: n.position("x"), y: n.position("y") * k }));
  }
  /** Spread each row of nodes (same y: one tier) evenly across the view's width, in
   *  their x order: a trace's GPUs, NICs and switches each fill one readable row. */
  function spreadRows(cy) {
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
  /** Fit the view to the nodes' positions, with room for node sizes and labels. */
  function fitView(cy) {
    const bb = positionsBox(cy);
    if (!bb) return;
    const pad = 40;
    const w = Math.max(1, cy.width() - 2 * pad); const h = Math.max(1, cy.height() - 2 * pad);
    const z = Math.max(cy.minZoom(), Math.min(2, w / Math.max(bb.w, 1), h / Math.max(bb.h, 1)));
    cy.viewport({ zoom: z, pan: { x: pad + (w - bb.w * z) / 2 - bb.x1 * z,
      y: pad + (h - bb.h * z) / 2 - bb.y1 * z } });
  }
  /** Labels about 11 px on screen at the fitted zoom (they still scale when zooming). */
  function readableLabels(cy) {
    const z = cy.zoom() || 1;
    // host labels stay small (hidden until zoomed in: a segment has 136 of them), except
    // the highlighted one
    cy.style().fromJson(cyStyle.concat([
      { selector: "node", style: { "font-size": Math.max(6, 11 / z) } },
      { selector: "node[kind = 'host']", style: { "font-size": 8 } },
      { selector: "node.partdown", style: { "border-color": "#c62828", "border-width": 3 } },
    { selector: "edge.partdown", style: { "line-style": "dashed" } },
    { selector: "node.highlight", style: { "font-size": Math.max(6, 12 / z) } },
    ])).update();
  }
  function makeCy(container) {
    // eslint-disable-next-line no-undef
    return cytoscape({ container, style: cyStyle, layout: { name: "preset" },
      minZoom: 0.005, maxZoom: 8, boxSelectionEnabled: false,
      hideEdgesOnViewport: true, textureOnViewport: true });
  }

  // ---------------------------------------------------------------- views and tabs
  const BIG_TRACE = 1500;
  const VIEWS = ["topology", "heatmap", "trace", "whatif", "run", "lab"];
  function availableViews() {
    const v = (state.info && state.info.views) || ["topology"];
    return VIEWS.filter((x) => v.includes(x));
  }
  async function show(view, opts) {
    if (!availableViews().includes(view)) return;
    state.view = view;
    for (const b of document.querySelectorAll("#tabs button")) {
      b.setAttribute("aria-selected", b.dataset.view === view ? "true" : "false");
    }
    for (const s of document.querySelectorAll("section.view")) s.hidden = s.dataset.view !== view;
    if (location.hash !== "#" + view) history.replaceState(null, "", "#" + view);
    // a view is drawn the first time it is shown, and again when the failure set changed
    const draw = { topology: openTopology, heatmap: openHeatmap, trace: openTrace,
      whatif: openWhatif, run: showRun, lab: showLab }[view];
    const ok = await guarded(async () => { await draw(); return true; });
    if (view === "topology" && api.cy) api.cy.resize();
    if (view === "trace" && api.traceCy) api.traceCy.resize();
    return ok === true;
  }

  // ---------------------------------------------------------------- header / info
  function showInfo(info) {
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
  function ms(ns) { return (Number(ns) / 1e6).toFixed(3) + " ms"; }
  function renderFailLine() {
    $("fail-line").hidden = state.fail.length === 0;
    $("fail-list").textContent = state.fail.join(", ");
  }
  /** Change the failure set: every view re-queries with it when next drawn. */
  function setFail(list) {
    state.fail = Array.from(new Set(list));
    renderFailLine();
    for (const v of VIEWS) state.stale[v] = true;
  }

  // ---------------------------------------------------------------- topology
  function nodeSize(n) {
    if (n.count) return Math.min(70, 18 + 8 * Math.log2(1 + n.count));
    return n.kind === "host" ? 14 : 26;
  }
  function edgeWidth(e) {
    if (e.links) return Math.min(14, 1 + 1.6 * Math.log2(1 + e.links));
    return 1.5;
  }
  function topoElements(data, metric) {
    const scale = scaler(metric, data.edges.map(perLink));
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
  async function openTopology() {
    if (state.topo.data === null || state.stale.topology) await drawTopology(state.topo.data === null);
  }
  async function drawTopology(refit) {
    if (!state.info.fabric) return;
    const t = state.topo;
    let data;
    if (t.segment === null) {
      data = await call("topology", { metric: t.metric, t: t.t }, { withFail: true });
    } else {
      data = await call("segment/" + encodeURIComponent(t.segment), { metric: t.metric, t: t.t },
        { withFail: true });
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
      (t.metric || "") + " " + (data.colour_by || "per link") + (t.t >= 0 ? ", step " + t.t : ""));
    if (state.highlight) applyHighlight(state.highlight);
  }
  async function drill(segment) {
    state.topo.segment = segment;
    state.highlight = null;
    await drawTopology(true);
  }
  function detailRows(pairs) {
    const dl = el("table", null, "data");
    const tb = el("tbody");
    for (const [k, v] of pairs) {
      if (v === undefined || v === null || v === "") continue;
      const tr = el("tr"); tr.appendChild(el("th", k)); tr.appendChild(el("td", v)); tb.appendChild(tr);
    }
    dl.appendChild(tb);
    return dl;
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
  function bindTopologyEvents(cy) {
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
  function applyHighlight(h) {
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
  async function goToHit(hit) {
    $("search-hits").hidden = true;
    await show("topology", { keep: true });
    const seg = hit.segment;
    const h = { id: "n:" + hit.node, name: hit.name, link: hit.link, hit };
    if (seg !== null && seg !== undefined && seg >= 0 && (hit.kind === "tor" || hit.kind === "host"
        || hit.kind === "gpu" || hit.kind === "nic" || hit.link !== null)) {
      if (state.topo.segment !== seg) await drill(seg);
    } else if (state.topo.segment !== null) {
      state.topo.segment = null; await drawTopology(true);
    }
    state.highlight = h;
    const ok = applyHighlight(h);
    const box = $("topo-detail"); clear(box);
    box.appendChild(el("h3", hit.label || hit.name));
    box.appendChild(detailRows([["kind", hit.kind], ["match", hit.match], ["segment", hit.segment],
      ["pod", hit.pod], ["plane", hit.plane], ["rail", hit.rail]]));
    if (!ok) box.appendChild(el("p", "not drawn at this level", "hint"));
  }
  async function runSearch(q) {
    const hits = await call("search", { q });
    const ul = $("search-hits"); clear(ul);
    if (!hits.length) { ul.appendChild(el("li", "no match for " + q)); ul.hidden = false; return hits; }
    hits.forEach((h) => {
      const li = el("li", h.label || h.name);
      li.addEventListener("click", () => guarded(() => goToHit(h)));
      ul.appendChild(li);
    });
    ul.hidden = hits.length === 1;
    await goToHit(hits[0]);
    return hits;
  }

  // ---------------------------------------------------------------- heatmap
  async function openHeatmap() {
    if (state.heat.data === null || state.stale.heatmap) await drawHeatmap();
  }
  async function drawHeatmap() {
    const h = state.heat;
    const data = await call("heatmap", { metric: h.metric, t: h.t, k: 20 }, { withFail: true });
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
    fillTable($("heat-hottest"), ["from", "from_port", "to", "to_port", "tier", "value"], hot,
      { format: { value: (v) => metricText(h.metric, v) }, onClick: (row) => guarded(() => showLink(row)) });
    drawSeries(data.series, h);
    if (state.info.fabric) {
      h.links = await call("topology", { metric: h.metric, t: h.t }, { withFail: true });
      drawLinkGrid(h.links, h.metric);
    } else {
      $("heat-links").hidden = true;
    }
    state.stale.heatmap = false;
  }
  /** Tier × time grid of the per-tier series; a click on a column sets the time slider. */
  function drawSeries(series, h) {
    const cv = $("heat-series"); const ctx = cv.getContext("2d");
    ctx.clearRect(0, 0, cv.width, cv.height);
    if (!series || !series.tiers) return;
    const names = Object.keys(series.tiers);
    const n = (series.times_ns || []).length;
    if (!names.length || !n) return;
    const all = []; for (const k of names) for (const v of series.tiers[k]) all.push(v);
    const scale = scaler(h.metric, all);
    const left = 110; const rowH = Math.max(8, Math.floor((cv.height - 4) / names.length));
    cv.height = rowH * names.length + 4;
    const w = (cv.width - left) / n;
    ctx.font = "11px sans-serif"; ctx.textBaseline = "middle";
    names.forEach((k, i) => {
      ctx.fillStyle = "#1b2430"; ctx.fillText(k, 2, i * rowH + rowH / 2 + 2);
      series.tiers[k].forEach((v, j) => {
        ctx.fillStyle = heat(scale(v)); ctx.fillRect(left + j * w, i * rowH + 2, Math.ceil(w), rowH - 1);
      });
    });
    if (h.t >= 0) { ctx.strokeStyle = "#000"; ctx.strokeRect(left + h.t * w, 1, Math.max(2, w), cv.height - 2); }
    cv.onclick = (ev) => {
      const r = cv.getBoundingClientRect();
      const x = (ev.clientX - r.left) * (cv.width / r.width) - left;
      if (x < 0) return;
      const t = Math.min(n - 1, Math.floor(x / w));
      $("heat-time").value = String(t); h.t = t; guarded(drawHeatmap);
    };
  }
  /** One cell per aggregated link group of the overview, sorted by tier then value. */
  function drawLinkGrid(topo, metric) {
    const cv = $("heat-links"); cv.hidden = false; const ctx = cv.getContext("2d");
    const edges = topo.edges.slice().sort((a, b) => (a.tier < b.tier ? -1 : a.tier > b.tier ? 1 : b.value - a.value));
    const scale = scaler(metric, edges.map(perLink));
    const cols = Math.max(1, Math.ceil(Math.sqrt(edges.length * 4)));
    const cell = Math.max(4, Math.floor(cv.width / cols));
    cv.height = Math.max(20, Math.ceil(edges.length / cols) * cell);
    ctx.clearRect(0, 0, cv.width, cv.height);
    edges.forEach((e, i) => {
      const down = e.links && e.links_down >= e.links;
      ctx.fillStyle = down ? "#000" : heat(scale(perLink(e)));
      ctx.fillRect((i % cols) * cell, Math.floor(i / cols) * cell, cell - 1, cell - 1);
    });
    const down = edges.filter((e) => e.links_down > 0).reduce((s, e) => s + e.links_down, 0);
    $("heat-links-label").textContent = fmt(edges.length) + " link groups, coloured per link "
      + "(0 to " + metricText(metric, scale.max) + "); " + fmt(down)
      + " links down (black = every link of the group down)";
    cv.onclick = (ev) => {
      const r = cv.getBoundingClientRect();
      const x = Math.floor((ev.clientX - r.left) * (cv.width / r.width) / cell);
      const y = Math.floor((ev.clientY - r.top) * (cv.height / r.height) / cell);
      const e = edges[y * cols + x];
      if (!e) return;
      $("heat-links-label").textContent = e.tier + ": " + e.source + " — " + e.target + " · "
        + fmt(e.links) + " links · up " + metricText(metric, e.up) + " · down " + metricText(metric, e.down);
      guarded(async () => {
        await show("topology", { keep: true });
        if (state.topo.segment !== null) { state.topo.segment = null; await drawTopology(true); }
        applyHighlight({ id: e.id });
      });
    };
  }
  /** A hottest row: open its segment (when it has one) and highlight the link. */
  async function showLink(row) {
    if (!state.info.fabric) return;
    await show("topology", { keep: true });
    if (row.segment !== null && row.segment !== undefined && row.segment >= 0) {
      if (state.topo.segment !== row.segment) await drill(row.segment);
    } else if (state.topo.segment !== null) { state.topo.segment = null; await drawTopology(true); }
    const h = { id: "l:" + row.link, link: row.link, name: row.from };
    if (!applyHighlight(h)) {
      applyHighlight({ name: row.to }) || applyHighlight({ name: row.from });
    }
  }

  // ---------------------------------------------------------------- trace
  async function openTrace() {
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
          const text = (it.name || it.id) + (it.op ? " · " + it.op : "") + (it.gpus ? " · " + fmt(it.gpus) + " GPUs" : "")
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
  async function doTrace(key) {
    state.trace.key = key;
    const params = {};
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
    cy.batch(() => { cy.elements().remove(); cy.add(nodes.concat(edges)); });
    cy.batch(() => spreadRows(cy));
    fitView(cy);
    readableLabels(cy);
    const tr = data.truncated;
    $("trace-summary").textContent = (data.what || "") + " — " + fmt(data.flows) + " flows, "
      + bytes(data.bytes) + ", " + fmt(tr ? tr.edges_total : data.edges.length) + " links (arcs) used";
    const note = $("trace-truncated");
    note.hidden = !tr;
    note.textContent = tr ? "Truncated: " + fmt(tr.edges_sent) + " of " + fmt(tr.edges_total)
      + " arcs drawn (the bottleneck, the listed flows' paths, then the heaviest)." : "";
    legend($("trace-scale"), useUtil ? "utilization" : "bytes", useUtil ? 1 : scale.max,
      useUtil ? "utilization of each link (the whole traffic's load)"
        : "bytes of the traced flows on each link");
    showPaths(data);
    const b = $("trace-bottleneck"); clear(b);
    if (bn) {
      b.appendChild(el("h3", "Bottleneck", "bad"));
      b.appendChild(detailRows([["link", bn.from + " → " + bn.to], ["tier", bn.tier],
        ["utilization", bn.utilization !== undefined ? metricText("utilization", bn.utilization) : null],
        ["bytes", bytes(bn.bytes)], ["flows on it", fmt(bn.flows)],
        ["other collectives", (bn.collectives || []).join(", ")]]));
      b.appendChild(el("h3", "Flows sharing it"));
      fillTable($("trace-sharing"), ["src", "dst", "collective", "job", "bytes"], bn.sharing || [],
        { format: { bytes: (v) => bytes(v) } });
    } else {
      clear($("trace-sharing"));
    }
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
      for (const h of hops) cy.getElementById("a:" + h.arc).addClass("highlight");
    });
  }
  function bindTraceEvents() {
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

  // ---------------------------------------------------------------- what-if
  async function openWhatif() {
    if ((state.whatif && !state.stale.whatif) || !state.fail.length) return;
    await doWhatif(state.fail);
  }
  async function doWhatif(fail) {
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
    for (const [label, key, v] of items) {
      const d = el("div"); d.dataset.key = key;
      d.appendChild(el("dt", label)); const dd = el("dd", fmt(v)); dd.dataset.key = key; d.appendChild(dd);
      counts.appendChild(d);
    }
    const tierCols = (rows) => (rows && rows.length ? Object.keys(rows[0]) : []);
    fillTable($("whatif-tiers-before"), tierCols(data.tiers_before), data.tiers_before || []);
    fillTable($("whatif-tiers-after"), tierCols(data.tiers_after), data.tiers_after || []);
    const moved = data.moved || [];
    fillTable($("whatif-moved"), ["flow", "src_gpu", "dst_gpu", "before", "after"], moved);
    $("whatif-moved-note").textContent = moved.length ? "(" + fmt(moved.length) + " shown of "
      + fmt(data.moved_total !== undefined ? data.moved_total : moved.length) + ")" : "(none)";
    fillTable($("whatif-unreachable"), ["src_gpu", "dst_gpu"], data.unreachable || []);
    const hotCols = ["from", "to", "tier", "value"];
    fillTable($("whatif-hot-before"), hotCols, data.hottest_before || []);
    fillTable($("whatif-hot-after"), hotCols, data.hottest_after || []);
    return data;
  }
  async function failFromPage(add) {
    await guarded(async () => {
      await show("whatif", { keep: true });
      $("whatif-input").value = add.join(" ");
      await doWhatif(state.fail.concat(add));
    });
  }
  function bindWhatifEvents() {
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
    $("fail-clear").addEventListener("click", restore);
    $("whatif-input").addEventListener("input", () => {
      clearTimeout(timer);
      const q = $("whatif-input").value.trim().split(/[\s,]+/).pop();
      if (!q || q.length < 3) return;
      timer = setTimeout(() => guarded(async () => {
        const hits = await call("search", { q });
        const dl = $("whatif-suggest"); clear(dl);
        for (const h of hits) {
          if (h.kind === "host" || h.kind === "gpu" || h.kind === "nic") continue;
          const o = el("option"); o.value = h.name; dl.appendChild(o);
        }
      }), 250);
    });
  }

  // ---------------------------------------------------------------- run
  function fileUrl(path) { return "files/" + path.split("/").map(encodeURIComponent).join("/"); }
  /** A relative URL the server did not already point at files/ (it normally does). */
  function isRelative(u) {
    return u && !/^[a-z][a-z0-9+.-]*:/i.test(u) && !u.startsWith("/") && !u.startsWith("#")
      && !u.startsWith("files/");
  }
  async function showRun() {
    if (state.run) return;
    const run = await call("run");
    state.run = run;
    const rep = $("run-report"); clear(rep);
    if (run.report_html) {
      // The one place that inserts HTML: the server renders report.md with markdown-it,
      // raw HTML disabled, so every name in it arrives escaped (tested with a hostile name).
      rep.innerHTML = run.report_html;
      // the report's relative links and images point into the run folder: the server
      // already points them at files/; any it left are pointed there too
      for (const img of rep.querySelectorAll("img")) {
        const s = img.getAttribute("src"); if (isRelative(s)) img.setAttribute("src", fileUrl(s));
      }
      for (const a of rep.querySelectorAll("a")) {
        const h = a.getAttribute("href"); if (isRelative(h)) a.setAttribute("href", fileUrl(h));
      }
    } else {
      rep.appendChild(el("p", "no report.md in this run", "hint"));
    }
    const nav = $("run-files"); clear(nav);
    const plots = $("run-plots"); clear(plots);
    const inReport = new Set(Array.from(rep.querySelectorAll("img")).map((i) => i.getAttribute("src")));
    let folder = "";
    for (const f of run.files || []) {
      // files come top level first, then one sub-folder after another (compare, demo)
      const dir = f.path.includes("/") ? f.path.slice(0, f.path.lastIndexOf("/")) : "";
      if (dir !== folder) { folder = dir; nav.appendChild(el("div", dir + "/", "folder")); }
      if (f.kind === "table") {
        const b = el("button", f.path + " (" + bytes(f.size) + ")"); b.type = "button";
        b.addEventListener("click", () => guarded(() => showTable(tableName(f.path), 0)));
        nav.appendChild(b);
      } else {
        const a = el("a", f.path + " (" + bytes(f.size) + ")", "other"); a.href = fileUrl(f.path);
        nav.appendChild(a);
      }
      if (f.kind === "plot" && !inReport.has(fileUrl(f.path))) {
        const fig = el("figure"); const img = el("img"); img.src = fileUrl(f.path); img.alt = f.path;
        fig.appendChild(img); fig.appendChild(el("figcaption", f.path)); plots.appendChild(fig);
      }
    }
    const firstTable = (run.files || []).find((f) => f.kind === "table");
    if (firstTable) await showTable(tableName(firstTable.path), 0);
  }
  /** The API names a table by its path in the run folder (extension optional). */
  function tableName(path) { return path; }
  async function showTable(name, offset) {
    const rt = state.runTable;
    const data = await call("run/table/" + name.split("/").map(encodeURIComponent).join("/"),
      { offset, limit: rt.limit });
    rt.name = name; rt.offset = offset; rt.total = data.total;
    $("run-table-title").textContent = "table " + name + " (" + fmt(data.total) + " rows)";
    fillTable($("run-table"), data.columns, data.rows);
    $("run-table-pager").hidden = data.total <= rt.limit;
    $("run-table-range").textContent = "rows " + fmt(offset + 1) + "–" + fmt(Math.min(data.total, offset + data.rows.length));
    $("run-prev").disabled = offset <= 0;
    $("run-next").disabled = offset + rt.limit >= data.total;
  }

  // ---------------------------------------------------------------- lab
  let labTimer = null;
  async function showLab() {
    const data = await call("lab");
    const up = data.up || {};
    $("lab-summary").textContent = "targets up: " + Object.values(up).filter(Boolean).length + " of "
      + Object.keys(up).length + (data.failures && data.failures.length ? " · failures: "
        + data.failures.map((f) => (typeof f === "string" ? f : JSON.stringify(f))).join(", ") : "")
      + " · updated in " + fmt(data.seconds) + " s";
    fillTable($("lab-links"), ["device", "iface", "peer", "up", "rx_bps", "tx_bps"], data.links || [],
      { format: { up: (v) => (v ? "up" : "DOWN") } });
    fillTable($("lab-bgp"), ["switch", "peer", "state"], data.bgp || []);
    clearTimeout(labTimer);
    labTimer = setTimeout(() => { if (state.view === "lab") guarded(showLab); }, 3000);
  }

  // ---------------------------------------------------------------- wiring
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
    $("topo-time").addEventListener("change", (ev) => { state.topo.t = Number(ev.target.value); guarded(() => drawTopology(false)); });
    $("heat-metric").addEventListener("change", (ev) => { state.heat.metric = ev.target.value; guarded(drawHeatmap); });
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
    state.readyMs = performance.now();
    document.body.dataset.ready = ok ? "1" : "error";
    resolveReady(ok === true);
  }

  Object.assign(api, {
    show: (v) => show(v), drill: (s) => guarded(() => drill(s)),
    search: (q) => guarded(() => runSearch(q)), whatif: (f) => guarded(() => doWhatif(f)),
    trace: (key) => guarded(() => doTrace(key)), heat, fmt,
  });

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
