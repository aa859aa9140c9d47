/* The what-if view: fail switches, ports or links (api/whatif), what moved, what became
 * unreachable, the loads before and after; the failure set then colours every view. */

import { call, guarded } from "./client.js";
import { $, clear, el, fillTable, fmt } from "./dom.js";
import { state } from "./state.js";
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
  for (const [label, key, v] of items) {
    const d = el("div"); d.dataset.key = key;
    d.appendChild(el("dt", label)); const dd = el("dd", fmt(v)); dd.dataset.key = key; d.appendChild(dd);
    counts.appendChild(d);
  }
  const tierCols = (rows) => (rows && rows.length ? Object.keys(rows[0]) : []);
  fillTable($("whatif-tiers-before"), tierCols(data.tiers_before), data.tiers_before || []);
  fillTable($("whatif-tiers-after"), tierCols(data.tiers_after), data.tiers_after || []);
  const moved = data.moved || [];
  fillTable($("whatif-moved"), ["flow", "src_gpu", "dst_gpu", "before", "after"], moved,
    { empty: "No flow moved: no routed flow crossed what failed." });
  $("whatif-moved-note").textContent = moved.length ? "(" + fmt(moved.length) + " shown of "
    + fmt(data.moved_total !== undefined ? data.moved_total : moved.length) + ")" : "(none)";
  fillTable($("whatif-unreachable"), ["src_gpu", "dst_gpu"], data.unreachable || [],
    { empty: "No GPU pair became unreachable: every flow still has a path." });
  const hotCols = ["from", "to", "tier", "value"];
  fillTable($("whatif-hot-before"), hotCols, data.hottest_before || []);
  fillTable($("whatif-hot-after"), hotCols, data.hottest_after || [],
    { empty: "No link carries traffic after the failure." });
  return data;
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

