/* Search (the header's box): the hits of api/search; a hit opens the topology where it
 * is drawn (its segment for a ToR, host, GPU or port; its plane for an agg or a core),
 * highlights it, refits the view on it and offers to fail a switch or port. */

import { call, guarded } from "./client.js";
import { $, clear, detailRows, el } from "./dom.js";
import { state } from "./state.js";
import { applyHighlight, drill, goTo, level } from "./topology.js";
import { show } from "./views.js";
import { failFromPage } from "./whatif.js";

async function goToHit(hit) {
  $("search-hits").hidden = true;
  await show("topology", { keep: true });
  const seg = hit.segment;
  const h = { id: "n:" + hit.node, name: hit.name, link: hit.link, hit };
  const t = state.topo;
  const sw = hit.kind === "agg" || hit.kind === "core";
  if (sw) {
    // aggs and cores are drawn one by one in their plane's view
    const want = hit.kind === "agg" && hit.pod >= 0 ? { pod: hit.pod, plane: hit.plane } : { plane: hit.plane };
    const here = t.plane && t.plane.plane === want.plane && (want.pod === undefined || t.plane.pod === want.pod)
      && t.segment === null && !t.tor;
    if (!here) await goTo({ plane: want });
  } else if (seg !== null && seg !== undefined && seg >= 0 && (hit.kind === "tor" || hit.kind === "host"
      || hit.kind === "gpu" || hit.kind === "nic" || hit.link !== null)) {
    if (t.tor && hit.kind === "tor" && t.tor === hit.name) { /* its own ToR view */ }
    else if (t.segment !== seg) await drill(seg);
  } else if (level() !== "overview") {
    await goTo({});
  }
  state.highlight = h;
  const ok = applyHighlight(h);
  const box = $("topo-detail"); clear(box);
  box.appendChild(el("h3", hit.label || hit.name));
  box.appendChild(detailRows([["kind", hit.kind], ["match", hit.match], ["segment", hit.segment],
    ["pod", hit.pod], ["plane", hit.plane], ["rail", hit.rail]]));
  if (!ok) box.appendChild(el("p", "not drawn at this level", "hint"));
  if (hit.kind === "tor" && hit.match !== "port") {
    const b = el("button", "open ToR view (ports, load, flows)"); b.type = "button"; b.className = "open-tor";
    b.addEventListener("click", () => guarded(() => goTo({ tor: hit.name })));
    box.appendChild(b);
  }
  if ((sw || hit.kind === "tor") && state.info.whatif) {
    const what = hit.match === "port" ? hit.name : hit.name;
    const b = el("button", (hit.match === "port" ? "fail port " : "fail this switch ") + what, "fail");
    b.type = "button";
    b.addEventListener("click", () => failFromPage([what]));
    box.appendChild(b);
  }
}
export async function runSearch(q) {
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

