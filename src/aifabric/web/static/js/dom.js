/* DOM helpers: every piece of data goes into the page as text (textContent), never as
 * markup; number, byte and metric formatting. */

export const $ = (id) => document.getElementById(id);

export function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}
export function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
export function fmt(v, digits) {
  if (v === null || v === undefined) return "";
  if (typeof v === "boolean") return v ? "yes" : "no";
  if (typeof v !== "number") return String(v);
  if (!Number.isFinite(v)) return String(v);
  if (Number.isInteger(v)) return v.toLocaleString("en-US");
  const d = digits === undefined ? 4 : digits;
  return Number(v.toPrecision(d)).toLocaleString("en-US", { maximumFractionDigits: 6 });
}
export function bytes(v) {
  if (v === null || v === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  let i = 0; let x = Number(v);
  while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
  return (i ? x.toFixed(2) : String(x)) + " " + units[i];
}
export function metricText(metric, v) {
  if (v === null || v === undefined) return "";
  if (metric === "utilization") return (100 * v).toFixed(1) + "%";
  if (metric === "bytes" || metric === "queue_bytes") return bytes(v);
  return fmt(v);
}
/** A figure in at most 4 characters for a small cell: 87%, 128M (bytes, binary), 1.2k. */
export function short(metric, v) {
  if (v === null || v === undefined || !Number.isFinite(v)) return "";
  if (metric === "utilization") return Math.round(100 * v) + "%";
  const bin = metric === "bytes" || metric === "queue_bytes";
  const k = bin ? 1024 : 1000;
  const units = ["", "k", "M", "G", "T", "P"];
  let x = Math.abs(v); let i = 0;
  while (x >= k && i < units.length - 1) { x /= k; i += 1; }
  const t = x >= 10 || i === 0 ? String(Math.round(x)) : x.toFixed(1);
  return (v < 0 ? "-" : "") + t + units[i];
}
export function ms(ns) { return (Number(ns) / 1e6).toFixed(3) + " ms"; }
/** Fill a <table> from column names and rows (arrays or objects), every cell as text;
 *  with no rows, ``opts.empty`` (a sentence saying why) goes in as the table's caption. */
export function fillTable(table, columns, rows, opts) {
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
  if (!rows.length && o.empty) table.insertBefore(el("caption", o.empty, "empty"), thead);
}
/** A two-column table of [label, value] pairs (empty values left out). */
export function detailRows(pairs) {
  const dl = el("table", null, "data");
  const tb = el("tbody");
  for (const [k, v] of pairs) {
    if (v === undefined || v === null || v === "") continue;
    const tr = el("tr"); tr.appendChild(el("th", k)); tr.appendChild(el("td", v)); tb.appendChild(tr);
  }
  dl.appendChild(tb);
  return dl;
}
export function showError(msg) {
  const box = $("error");
  if (!msg) { box.hidden = true; box.textContent = ""; return; }
  box.textContent = msg; box.hidden = false;
}
