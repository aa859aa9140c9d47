/* The JSON API client (api/..., documented in openapi.json): every request goes to this
 * server; an API error is shown in the page, never thrown to the console. */

import { showError } from "./dom.js";
import { state } from "./state.js";

class ApiError extends Error {}

/** GET (or POST when body is given) api/<path>; params may hold arrays (repeated keys).
 *  withFail adds the current failure set as repeated fail= parameters. */
export async function call(path, params, opts) {
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

/** Run an async UI action; an API error is shown in the page (never thrown to the console). */
export async function guarded(fn) {
  try { showError(null); return await fn(); } catch (e) {
    showError(e instanceof ApiError ? e.message : "page error: " + (e && e.message));
    return null;
  }
}
