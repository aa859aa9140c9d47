/* The run view: the run folder's files, its report (rendered by the server) and its
 * tables page by page. */

import { call, guarded } from "./client.js";
import { $, bytes, clear, el, fillTable, fmt } from "./dom.js";
import { state } from "./state.js";

function fileUrl(path) { return "files/" + path.split("/").map(encodeURIComponent).join("/"); }
/** A relative URL the server did not already point at files/ (it normally does). */
function isRelative(u) {
  return u && !/^[a-z][a-z0-9+.-]*:/i.test(u) && !u.startsWith("/") && !u.startsWith("#")
    && !u.startsWith("files/");
}
export async function showRun() {
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
export async function showTable(name, offset) {
  const rt = state.runTable;
  const data = await call("run/table/" + name.split("/").map(encodeURIComponent).join("/"),
    { offset, limit: rt.limit });
  rt.name = name; rt.offset = offset; rt.total = data.total;
  $("run-table-title").textContent = "table " + name + " (" + fmt(data.total) + " rows)";
  fillTable($("run-table"), data.columns, data.rows,
    { empty: data.total ? "No rows from " + fmt(offset + 1) + " on." : "This table has no rows." });
  $("run-table-pager").hidden = data.total <= rt.limit;
  $("run-table-range").textContent = "rows " + fmt(offset + 1) + "–" + fmt(Math.min(data.total, offset + data.rows.length));
  $("run-prev").disabled = offset <= 0;
  $("run-next").disabled = offset + rt.limit >= data.total;
}

