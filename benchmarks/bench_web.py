"""Benchmark: the web view's data on one core — the aggregated topology of the HPN pod
and the fat-tree k64, one segment drilled into, search, and per-arc loads of a packet run
(100K+ sample rows) and a binned flow run.

Each case runs in a fresh child process pinned to one CPU (the fabric is built first,
untimed); times include the first call on a fresh fabric (the grouping and the search
index are built then and cached) and, for the topology, turning the result into JSON;
module imports are done before the clock starts (a server pays them once).
Limits from issue 14: the topology API (aggregated) for the HPN pod < 1 s; search
< 0.1 s per query (the "warm" column: the index is built once per fabric, at the first
query, shown as "first s" with a 0.3 s limit); loads of a 320-host packet run <= 1 s;
what-if of a ToR failure on the HPN pod < 2 s, re-route included (the twin is opened
first, untimed); the page interactive < 3 s in headless Chromium (``aifabric serve
examples/hpn-pod.yaml``, Debian's chromium through Playwright as the browser tests drive
it; not pinned: the server, the browser and its renderer are separate processes; the
figure is the page's own ``readyMs``, navigation start to the first view drawn; skipped
when chromium or playwright is missing). In the same pages (issue 30, limit 1 s each,
the worst of 3 held, printed in the "warm s" column): the overview to a ToR's view (its
196 ports with their load and flows) and the pod's whole traffic pattern traced (drawn
on the overview's groups), each from the request to drawn by the page's clock. The tests
check these with generous bounds (a busy 2-core CI machine); the issue's limits are held
here.

Reads under load (issue 30): ``aifabric serve examples/hpn-pod.yaml`` (15,360 GPUs,
96,960 links, 15,360 flows routed; a what-if of one ToR re-routes in ~0.3 s) with 4
client threads each posting what-ifs of ToRs one after the other (each a failure set
not routed before, so every one routes), while one more client asks ``/api/info`` every
20 ms: its latency p50/p95 against the limit of 50 ms at p95, next to ``/api/info``
alone (the server computes what-ifs half its cores at a time, the rest wait). Not
pinned (the server and clients are separate processes); the clients run in
processes of their own (httpx, one connection each), the probe in this one.

    python benchmarks/bench_web.py [--json] [--only-concurrent]
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from _harness import finish, run_isolated

ROOT = Path(__file__).resolve().parents[1]
CASES = [
    # name, what, example, time limit (s)
    ("overview, HPN pod (15,360 GPUs)", "overview", "hpn-pod", 1.0),
    ("overview, fat-tree k64", "overview", "fat-tree-k64", 1.0),
    ("overview, multiplane 8x128", "overview", "multiplane-8x128", 1.0),
    ("segment 0, HPN pod", "segment", "hpn-pod", 1.0),
    ("search, HPN pod", "search", "hpn-pod", 0.1),
    ("search, fat-tree k64", "search", "fat-tree-k64", 0.1),
    ("packet loads, 120K rows", "packet", None, 1.0),
    ("flow loads, 8K transfers, HPN pod", "flow", "hpn-pod", 1.0),
    ("what-if ToR failure, HPN pod", "whatif", None, 2.0),
]
#: the page case (not pinned, see the docstring)
PAGE_CASE = ("page interactive, HPN pod", "page", "hpn-pod", 3.0)
#: measured in the same page (issue 30): the overview to one ToR's view (its 196 ports,
#: their load and flows), and the HPN pod's whole traffic pattern traced (80,436 arcs,
#: drawn on the overview's groups); each from the click to drawn, the page's own clock
TOR_CASE = ("overview -> ToR view, HPN pod", 1.0)
PATTERN_CASE = ("whole-pattern trace, HPN pod", 1.0)

@contextlib.contextmanager
def _served(example: str, wait_s: float) -> Iterator[str]:
    """``aifabric serve examples/<example>.yaml`` on 127.0.0.1 (a free port) for the
    duration of the block: its URL, once it printed one within ``wait_s``; stopped by its
    pid afterwards."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with log.open("wb") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "aifabric", "serve",
                                     str(ROOT / "examples" / f"{example}.yaml"), "--listen",
                                     "127.0.0.1:0"], stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + wait_s
            url = None
            while url is None and time.monotonic() < deadline and proc.poll() is None:
                m = re.search(r"http://127\.0\.0\.1:\d+/", log.read_text(errors="replace"))
                url = m.group(0) if m else None
                time.sleep(0.1)
            if url is None:
                raise RuntimeError(f"aifabric serve gave no URL: {log.read_text()[-500:]}")
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)



def _hpn_no_failures(work: Path) -> Path:
    """examples/scenarios/hpn-tor-failure.yaml without its failure (same traffic)."""
    import yaml

    doc = yaml.safe_load((ROOT / "examples" / "scenarios" / "hpn-tor-failure.yaml")
                         .read_text())
    doc.pop("failures", None)
    doc["spec"] = str(ROOT / "examples" / "hpn-pod.yaml")
    p = work / "hpn-no-failures.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def _page(case: tuple) -> dict | None:
    """Seconds until the page of ``aifabric serve examples/hpn-pod.yaml`` is interactive
    (its readyMs), in headless Chromium; None without chromium/playwright."""
    import shutil

    chromium = shutil.which("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if chromium is None:
        return None
    with _served(case[2], 120) as url:
        pw = sync_playwright().start()
        try:
            b = pw.chromium.launch(executable_path=chromium, headless=True)
            best = None
            tor: list[float] = []
            pattern: list[float] = []
            idle = "() => window.aifabric.state.pending === 0 && "
            for i in range(3):  # best of 3 fresh pages (the first warms the server)
                ctx = b.new_context(viewport={"width": 1400, "height": 900})
                page = ctx.new_page()
                page.set_default_timeout(30_000)
                page.goto(url)
                page.wait_for_function("() => document.body.dataset.ready === '1'")
                ms = float(page.evaluate("window.aifabric.state.readyMs"))
                best = ms if best is None else min(best, ms)
                name = f"tor-s{3 + i:02d}-r2-b"  # a ToR not drawn before
                page.evaluate("(n) => window.aifabric.goTo({tor: n})", name)
                page.wait_for_function(idle + f"window.aifabric.state.topo.data.tor === '{name}'")
                tor.append(float(page.evaluate("window.aifabric.state.topo.drawMs")))
                page.click("#tabs button[data-view=trace]")
                page.wait_for_function(idle + "window.aifabric.state.view === 'trace'")
                page.select_option("#trace-select", '["collective",0]')
                page.wait_for_function(idle + "window.aifabric.state.trace.drawMs !== undefined")
                pattern.append(float(page.evaluate("window.aifabric.state.trace.drawMs")))
                ctx.close()
            b.close()
        finally:
            pw.stop()
    _page.extra = [  # type: ignore[attr-defined]
        {"name": TOR_CASE[0], "seconds": min(tor) / 1000, "worst_s": max(tor) / 1000,
         "size": "196 ports; best of 3 ToRs, click to drawn"},
        {"name": PATTERN_CASE[0], "seconds": min(pattern) / 1000,
         "worst_s": max(pattern) / 1000,
         "size": "80,436 arcs -> group links; best of 3"}]
    return {"name": case[0], "seconds": (best or 0.0) / 1000, "peak_mb": float("nan"),
            "size": "best of 3 page loads (readyMs)"}


def _run(case: tuple) -> dict:
    import numpy as np

    from aifabric import build_fabric, load_spec

    name, what, example, _ = case
    f = build_fabric(load_spec(ROOT / "examples" / f"{example}.yaml")) if example else None
    rng = np.random.default_rng(0)
    out: dict = {"name": name}
    if what == "overview":
        from aifabric.web.topology import overview

        v = rng.random(2 * f.n_links)
        t0 = time.perf_counter()
        o = overview(f, v)
        text = json.dumps(o)
        out["seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        json.dumps(overview(f, rng.random(2 * f.n_links)))
        out["warm_s"] = time.perf_counter() - t0
        out["size"] = f"{len(o['nodes'])} nodes, {len(o['edges'])} edges, {len(text) // 1000} KB"
    elif what == "segment":
        from aifabric.web.topology import segment_view

        v = rng.random(2 * f.n_links)
        t0 = time.perf_counter()
        sv = segment_view(f, 0, v)
        text = json.dumps(sv)
        out["seconds"] = time.perf_counter() - t0
        out["size"] = f"{len(sv['nodes'])} nodes, {len(sv['edges'])} edges, " \
                      f"{len(text) // 1000} KB"
    elif what == "search":
        import importlib

        from aifabric.web.topology import search

        for mod in ("aifabric.configs.addressing", "aifabric.telemetry.catalog"):
            importlib.import_module(mod)  # what search imports: once per server

        t0 = time.perf_counter()
        hits = search(f, "host-s01-h002")
        out["seconds"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        for q in ("tor-s00", "10.0.0.7", "gpu3", "host-s00-h000:ens1f0"):
            search(f, q)
        out["warm_s"] = (time.perf_counter() - t0) / 4
        out["size"] = f"{len(hits)} hits"
    elif what == "packet":
        from aifabric.web.loads import from_run

        # 2,000 ports x 60 samples, 1 traffic class: cumulative counters
        P, S = 2000, 60
        arc = np.repeat(np.arange(P) * 3, S).astype(np.float64)
        t = np.tile((np.arange(S) + 1) * 10_000.0, P)
        tx = np.cumsum(rng.integers(0, 100_000, (P, S)), axis=1).ravel().astype(np.float64)
        cum = np.cumsum(rng.integers(0, 3, (P, S)), axis=1).ravel().astype(np.float64)
        q = {"time_ns": t, "arc": arc, "tc": np.full(P * S, 3.0),
             "queue_bytes": rng.integers(0, 50_000, P * S).astype(np.float64),
             "ecn_marks": cum, "pfc_sent": cum, "pfc_received": cum,
             "paused_ns": cum, "drops": cum * 0, "tx_bytes": tx}
        n_links = 3 * P
        links = {"link": np.arange(n_links, dtype=np.float64).repeat(2),
                 "direction": np.tile(np.array(["up", "down"], dtype=object), n_links),
                 "capacity_gbps": np.full(2 * n_links, 400.0),
                 "from": np.full(2 * n_links, "a", dtype=object),
                 "to": np.full(2 * n_links, "b", dtype=object),
                 "tier": np.full(2 * n_links, "access up", dtype=object)}
        t0 = time.perf_counter()
        ls = from_run({"packet_queues": q, "links": links}, None)
        ls.hottest(None, "queue_bytes", 10)
        ls.tier_series(None, "utilization")
        out["seconds"] = time.perf_counter() - t0
        out["size"] = f"{P * S:,} rows, {ls.n_steps} steps"
    elif what == "flow":
        import scipy.sparse as sp

        from aifabric.web.loads import from_run

        n_t, hops = 8192, 12
        A = 2 * f.n_links
        rows = np.repeat(np.arange(n_t), hops)
        cols = rng.integers(0, A, n_t * hops)
        T = sp.csr_matrix((np.ones(n_t * hops), (rows, cols)), shape=(n_t, A))
        stage = rng.integers(0, 64, n_t)
        tr = {"start_ns": stage * 1000.0, "end_ns": stage * 1000.0 + 900.0,
              "size_bytes": np.full(n_t, 1e6), "repeat": np.ones(n_t)}
        t0 = time.perf_counter()
        ls = from_run({"transfers": tr, "timeline": {"start_ns": np.zeros(1),
                                                     "end_ns": np.array([64_000.0])}},
                      f, transfer_arcs=T)
        ls.hottest(f, "utilization", 3)
        out["seconds"] = time.perf_counter() - t0
        out["size"] = f"{n_t:,} transfers, {len(ls.rows):,} arcs x {ls.n_steps} steps"
    elif what == "whatif":
        import tempfile

        from aifabric.web.twin import Twin

        with tempfile.TemporaryDirectory() as tmp:
            tw = Twin.open(_hpn_no_failures(Path(tmp)))
            t0 = time.perf_counter()
            w = tw.whatif(("tor-s00-r0-a",))
            out["seconds"] = time.perf_counter() - t0
        out["size"] = (f"{len(tw._flows):,} flows, {w['flows']['rerouted']:,} rerouted, "
                       f"{w['flows']['moved_port']:,} moved port")
    return out


#: the reads-under-load case: name, example, clients, what-ifs per client, p95 limit (s)
CONCURRENT = ("/api/info while 4 clients run what-ifs", "hpn-pod", 4, 6, 0.050)


def _pct(xs: list[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(xs), q)) if xs else float("nan")


def _whatif_client(job: tuple[str, list[str]]) -> tuple[list[float], list[str]]:
    """One what-if client (a process): each failure set in turn; seconds and errors."""
    import httpx

    url, names = job
    took, errors = [], []
    with httpx.Client(base_url=url, timeout=120) as c:
        for name in names:
            t0 = time.perf_counter()
            r = c.post("/api/whatif", json={"fail": [name]})
            took.append(time.perf_counter() - t0)
            if r.status_code != 200:
                errors.append(r.text[:200])
    return took, errors


def _concurrent(case: tuple = CONCURRENT) -> dict:
    """/api/info latency alone and while ``clients`` threads run what-ifs (see the module
    docstring)."""

    import httpx

    name, example, clients, per_client, _ = case
    with _served(example, 180) as url:
        probe = httpx.Client(base_url=url, timeout=60)
        alone = []
        for _ in range(50):
            t0 = time.perf_counter()
            probe.get("/api/info").raise_for_status()
            alone.append(time.perf_counter() - t0)
        tors = [h["name"] for h in probe.get("/api/search", params={"q": "tor-"}).json()
                if h.get("kind") == "tor" or str(h["name"]).startswith("tor-")]
        need = clients * per_client
        if len(tors) < need:
            raise RuntimeError(f"{len(tors)} ToRs found, {need} needed")
        # the what-if clients are processes: in threads here they would share this
        # process's GIL with the probe and slow its readings down
        import multiprocessing as mp

        ctx = mp.get_context("fork")
        jobs = [(url, tors[i * per_client:(i + 1) * per_client]) for i in range(clients)]
        t_start = time.perf_counter()
        with ctx.Pool(clients) as pool:
            pending = pool.map_async(_whatif_client, jobs)
            loaded = []
            while not pending.ready():
                t0 = time.perf_counter()
                probe.get("/api/info").raise_for_status()
                loaded.append(time.perf_counter() - t0)
                time.sleep(0.02)
            wall = time.perf_counter() - t_start
            done = pending.get()
        whatif_s = [x for d in done for x in d[0]]
        errors = [e for d in done for e in d[1]]
        probe.close()
        if errors:
            raise RuntimeError(f"what-if failed: {errors[0]}")
    return {"name": name, "alone_p50_s": _pct(alone, 50), "alone_p95_s": _pct(alone, 95),
            "p50_s": _pct(loaded, 50), "p95_s": _pct(loaded, 95),
            "max_s": max(loaded) if loaded else float("nan"), "reads": len(loaded),
            "whatifs": len(whatif_s), "whatif_p50_s": _pct(whatif_s, 50), "wall_s": wall,
            "size": f"{example}: {clients} clients x {per_client} what-ifs"}


def _print_concurrent(r: dict, limit: float) -> bool:
    ok = r["p95_s"] < limit
    print(f"{r['name']}: {r['size']} ({r['whatifs']} what-ifs in {r['wall_s']:.1f} s, "
          f"median {r['whatif_p50_s'] * 1000:.0f} ms each)")
    print(f"  /api/info alone:     p50 {r['alone_p50_s'] * 1000:7.1f} ms  "
          f"p95 {r['alone_p95_s'] * 1000:7.1f} ms")
    print(f"  /api/info under load: p50 {r['p50_s'] * 1000:6.1f} ms  "
          f"p95 {r['p95_s'] * 1000:7.1f} ms  max {r['max_s'] * 1000:.1f} ms over "
          f"{r['reads']} reads; limit p95 < {limit * 1000:.0f} ms: "
          f"{'ok' if ok else 'OVER LIMIT'}")
    return ok


def main() -> int:
    failed = False
    if "--only-concurrent" in sys.argv:
        r = _concurrent()
        ok = _print_concurrent(r, CONCURRENT[4])
        if "--json" in sys.argv:
            print(json.dumps(r, indent=2))
        return 0 if ok else 1
    print(f"{'case':<36} {'first s':>8} {'warm s':>8} {'limit s':>8} {'peak MB':>8}  "
          f"{'size':<40} verdict")
    results = []
    for case in CASES:
        r = run_isolated(_run, case, timeout_s=300)
        assert r is not None
        lim = case[3]
        # search: per query; the first one also builds the index
        ok = (r["warm_s"] < lim and r["seconds"] < 0.3) if case[1] == "search" \
            else r["seconds"] < lim
        failed |= not ok
        warm = f"{r['warm_s']:.4f}" if "warm_s" in r else "-"
        print(f"{r['name']:<36} {r['seconds']:>8.4f} {warm:>8} {lim:>8} {r['peak_mb']:>8.0f}  "
              f"{r['size']:<40} {'ok' if ok else 'OVER LIMIT'}")
        results.append(r)
    r = _page(PAGE_CASE)
    if r is None:
        print(f"{PAGE_CASE[0]:<36} skipped: needs Debian's chromium and playwright")
    else:
        lim = PAGE_CASE[3]
        ok = r["seconds"] < lim
        failed |= not ok
        print(f"{r['name']:<36} {r['seconds']:>8.4f} {'-':>8} {lim:>8} {'-':>8}  "
              f"{r['size']:<40} {'ok' if ok else 'OVER LIMIT'}")
        results.append(r)
        for r, (_, lim) in zip(_page.extra, (TOR_CASE, PATTERN_CASE), strict=True):  # type: ignore[attr-defined]
            ok = r["worst_s"] < lim
            failed |= not ok
            print(f"{r['name']:<36} {r['seconds']:>8.4f} {r['worst_s']:>8.4f} {lim:>8} "
                  f"{'-':>8}  {r['size']:<40} {'ok' if ok else 'OVER LIMIT'}")
            results.append(r)
    r = _concurrent()
    failed |= not _print_concurrent(r, CONCURRENT[4])
    results.append(r)
    return finish(results, failed)


if __name__ == "__main__":
    sys.exit(main())
