/* The lab view: links, rates and BGP sessions of the running lab, every 3 s while shown. */

import { call, guarded } from "./client.js";
import { $, fillTable, fmt } from "./dom.js";
import { state } from "./state.js";

let labTimer = null;
export async function showLab() {
  const data = await call("lab");
  const up = data.up || {};
  $("lab-summary").textContent = "targets up: " + Object.values(up).filter(Boolean).length + " of "
    + Object.keys(up).length + (data.failures && data.failures.length ? " · failures: "
      + data.failures.map((f) => (typeof f === "string" ? f : JSON.stringify(f))).join(", ") : "")
    + " · updated in " + fmt(data.seconds) + " s";
  fillTable($("lab-links"), ["device", "iface", "peer", "up", "rx_bps", "tx_bps"], data.links || [],
    { format: { up: (v) => (v ? "up" : "DOWN") },
      empty: "No link of the fabric answered: is the lab up (aifabric lab up)?" });
  fillTable($("lab-bgp"), ["switch", "peer", "state"], data.bgp || [],
    { empty: "No BGP session reported by the lab's routers." });
  clearTimeout(labTimer);
  labTimer = setTimeout(() => { if (state.view === "lab") guarded(showLab); }, 3000);
}

