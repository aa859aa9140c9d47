/* Search (the header's box): the hits of api/search; a hit opens the topology where it
 * is drawn (its segment for a ToR, host, GPU or port) and highlights it. */

import { call, guarded } from "./client.js";
import { $, clear, detailRows, el } from "./dom.js";
import { state } from "./state.js";
import { applyHighlight, drawTopology, drill } from "./topology.js";
import { show } from "./views.js";

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

