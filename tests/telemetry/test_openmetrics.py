"""``aifabric metrics RUN_DIR``: a finished run as OpenMetrics, checked with the real
promtool and read back from a real Prometheus server after backfill."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from aifabric.telemetry.catalog import CATALOG
from aifabric.telemetry.openmetrics import DEFAULT_START, parse_start
from tests._require import require_importorskip

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
PACKET = SCENARIOS / "incast-dcqcn.yaml"  # 8-to-1 incast: queues, ECN, PFC, CNPs
FLOW = SCENARIOS / "allreduce-hpn.yaml"  # a ring AllReduce on HPN, flow level

_SAMPLE = re.compile(r'^([a-z_]+)(\{[^}]*\})? (\S+) (\S+)$')


def _aifabric(*args: object, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "aifabric", *map(str, args)], text=True,
                          capture_output=True, check=check, timeout=600)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A packet run and a flow run written by ``simulate --out`` (once per module)."""
    base = tmp_path_factory.mktemp("runs")
    out = {}
    for name, scn in (("packet", PACKET), ("flow", FLOW)):
        _aifabric("simulate", scn, "--out", base / name)
        out[name] = base / name
    return out


def _metrics(run: Path, out: Path, *args: object) -> str:
    scn = PACKET if run.name == "packet" else FLOW
    _aifabric("metrics", run, "--scenario", scn, "--out", out, *args)
    return out.read_text()


def parse(text: str) -> dict[tuple[str, str], list[tuple[float, float]]]:
    """Series (name, labels) -> [(timestamp s, value)] in file order."""
    series: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        assert m, line
        series[(m[1], m[2] or "")].append((float(m[4]), float(m[3])))
    return series


def _table(path: Path) -> dict[str, np.ndarray]:
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


# ------------------------------------------------------------------ promtool checks
@pytest.mark.parametrize("kind", ["packet", "flow"])
def test_promtool_check_metrics_passes(runs, kind, tmp_path, promtool):
    """promtool lints the text format (names, _total counters, units, HELP/TYPE): no
    problem reported. (It reads the 0.0.4 text format, whose timestamps are ms: the
    --format prometheus rendering of the same samples.)"""
    text = _metrics(runs[kind], tmp_path / "run.prom", "--format", "prometheus")
    assert text.count("\n") > 30
    p = subprocess.run([promtool, "check", "metrics"], input=text, text=True,
                       capture_output=True, timeout=120)
    assert p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(), p


@pytest.mark.parametrize("kind", ["packet", "flow"])
def test_both_formats_carry_the_same_samples(runs, kind, tmp_path):
    """The OpenMetrics (seconds) and the text format (ms) hold the same series, values
    and instants."""
    om = parse(_metrics(runs[kind], tmp_path / "run.om"))
    prom = parse(_metrics(runs[kind], tmp_path / "run.prom", "--format", "prometheus"))
    assert om.keys() == prom.keys()
    for k, v in om.items():
        assert [(round(t * 1000), x) for t, x in v] == [(round(t), x) for t, x in prom[k]]


@pytest.mark.parametrize("kind", ["packet", "flow"])
def test_openmetrics_is_well_formed(runs, kind, tmp_path):
    """TYPE, UNIT (where the catalog has a unit), HELP before every family's samples,
    counters sampled as _total, only catalog names, # EOF last; each series' timestamps
    strictly increase from --start; counters never decrease."""
    text = _metrics(runs[kind], tmp_path / "run.om")
    assert text.endswith("# EOF\n") and text.count("# EOF") == 1
    catalog = {m.family: m for m in CATALOG}
    families = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    assert families and len({f for f, _ in families}) == len(families)
    for fam, typ in families:
        m = catalog[fam]
        assert typ == m.type
        assert (f"# UNIT {fam} {m.unit}\n" in text) == bool(m.unit)
        assert f"# HELP {fam} {m.help}\n" in text
    start = parse_start(DEFAULT_START)
    series = parse(text)
    assert series
    for (name, labels), pts in series.items():
        m = next(x for x in CATALOG if x.name == name)
        keys = re.findall(r'(\w+)="', labels)
        assert set(keys) <= set(m.labels), (name, keys)
        t = np.array([p[0] for p in pts])
        assert t[0] >= start and (np.diff(t) > 0).all(), name
        if m.type == "counter":
            assert (np.diff([p[1] for p in pts]) >= 0).all(), (name, labels)


def test_output_is_deterministic(runs, tmp_path):
    """Same run, same options: the same bytes; --start shifts every timestamp only."""
    a = _metrics(runs["packet"], tmp_path / "a.om")
    assert _metrics(runs["packet"], tmp_path / "b.om") == a
    c = parse(_metrics(runs["packet"], tmp_path / "c.om", "--start", "2026-01-01T01:00:00Z"))
    pa = parse(a)
    assert c.keys() == pa.keys()
    k = next(iter(pa))
    assert [t + 3600 for t, _ in pa[k]] == pytest.approx([t for t, _ in c[k]])
    assert [v for _, v in pa[k]] == [v for _, v in c[k]]


@pytest.mark.parametrize("kind", ["packet", "flow"])
def test_a_parquet_run_gives_the_same_series(runs, kind, tmp_path):
    """simulate --format parquet: the same series and instants as the csv run, values
    equal to csv's 10 significant digits."""
    require_importorskip("pyarrow.parquet", "pyarrow")  # the parquet extra
    scn = PACKET if kind == "packet" else FLOW
    run = tmp_path / kind
    _aifabric("simulate", scn, "--out", run, "--format", "parquet")
    assert (run / "timeline.parquet").is_file() and not (run / "timeline.csv").exists()
    pq = parse(_metrics(run, tmp_path / "pq.om"))
    cs = parse(_metrics(runs[kind], tmp_path / "csv.om"))
    assert pq.keys() == cs.keys()
    for k, v in cs.items():
        assert [t for t, _ in pq[k]] == [t for t, _ in v]
        assert [x for _, x in pq[k]] == pytest.approx([x for _, x in v], rel=1e-9, abs=1e-15)


def test_without_the_scenario_ports_are_named_from_the_run(runs, tmp_path):
    """No --scenario: the same series and samples (no two ports share labels), each port
    labelled by device and peer node names and tier from links.csv, its port by its link's
    index (no interface name, plane, rail or segment)."""
    run = runs["packet"]
    full = parse(_metrics(run, tmp_path / "full.om"))
    _aifabric("metrics", run, "--out", tmp_path / "bare.om")
    bare = parse((tmp_path / "bare.om").read_text())
    assert len(bare) == len(full)
    assert sorted(map(len, bare.values())) == sorted(map(len, full.values()))
    names = set()
    for t in ("links.csv", "collective_links.csv"):  # the run's own node names
        if (run / t).is_file():
            tab = _table(run / t)
            names |= set(tab["from"]) | set(tab["to"])
    for (_, labels), _pts in bare.items():
        if 'device="' not in labels:
            continue
        assert re.search(r'device="([^"]*)"', labels)[1] in names
        assert "plane=" not in labels
        if 'peer="' in labels:  # a link's port: named by the link's index
            assert re.search(r'port="link\d+"', labels), labels


# ------------------------------------------------------------ values against the run
def test_packet_series_match_the_run_tables(runs, tmp_path):
    """The peak queue depth and the last byte counter of every port equal the run's
    packet_queues; the utilization integrated over the samples (with links.csv's
    capacities) gives back the port's bytes, within what links.csv counts to the end."""
    run = runs["packet"]
    series = parse(_metrics(run, tmp_path / "run.om"))
    q = _table(run / "packet_queues.csv")
    qb = q["queue_bytes"].astype(float)
    depth = [v for (n, _), pts in series.items() if n == "aifabric_queue_depth_bytes"
             for _, v in pts]
    assert max(depth) == qb.max() > 0
    # bytes sent: the last sample of each port = the table's last tx_bytes of that arc
    last = {}
    for arc, tx in zip(q["port"], q["tx_bytes"].astype(float), strict=True):
        last[arc] = tx  # rows are in time order
    sent = sorted(pts[-1][1] for (n, _), pts in series.items()
                  if n == "aifabric_interface_bytes_total")
    assert sent == sorted(v for v in last.values() if v > 0)
    # utilization x interval x capacity summed over the run = the link's bytes
    links = _table(run / "links.csv")
    util = {labels: pts for (n, labels), pts in series.items()
            if n == "aifabric_link_utilization_ratio"}
    assert util
    grid = np.unique(q["time_ns"].astype(float))
    start = parse_start(DEFAULT_START)
    checked = 0
    for i in range(len(links["link"])):
        frm, to, d = links["from"][i], links["to"][i], links["direction"][i]
        if not frm.startswith("leaf") or float(links["bytes"][i]) == 0:
            continue  # leaf ports: device = the leaf, peer = a spine or a host
        peer = to.rsplit("-nic", 1)[0]
        (key,) = [k for k in util if f'device="{frm}"' in k and f'peer="{peer}"' in k
                  and f'direction="{d}"' in k]
        t = (np.array([p[0] for p in util[key]]) - start) * 1e3  # s -> ns (scale 1e6)
        u = np.array([p[1] for p in util[key]])
        # the sample before (timestamps are whole ms = whole ns: the run's last sample
        # at a fraction of a ns is rounded)
        prev = np.concatenate([[0.0], grid])[np.searchsorted(grid, t - 0.5)]
        moved = (u * (t - prev) * float(links["capacity_gbps"][i]) / 8).sum()
        # = the port's byte counter at the last sample; links.csv counts to the end
        # of the run (the last ACKs may leave after the last sample)
        bkey = key.replace(f'direction="{d}"', 'direction="tx"')
        sent = series[("aifabric_interface_bytes_total", bkey)][-1][1]
        # exact but for the rounding of the last sample's time to a whole ns (at most
        # 0.5 ns of the interval, at the link's rate)
        rounding = u.max() * 0.5 * float(links["capacity_gbps"][i]) / 8
        assert abs(moved - sent) <= 1e-6 * sent + rounding, key
        assert sent <= float(links["bytes"][i]) <= sent + 0.05 * sent
        # bytes count when a frame starts: an interval may hold one frame more than
        # the line carries (4096-byte payload + headers)
        frame = 4096 + 100
        assert (u <= 1.0 + frame * 8 / (float(links["capacity_gbps"][i]) * (t - prev))).all()
        checked += 1
    assert checked >= 4


def test_flow_collective_progress_reaches_one_and_never_falls(runs, tmp_path):
    """A collective that finished ends at progress 1 at its end time (collectives.csv);
    in between, progress never decreases; tier utilization stays within [0, 1]."""
    run = runs["flow"]
    series = parse(_metrics(run, tmp_path / "run.om"))
    co = _table(run / "collectives.csv")
    start = parse_start(DEFAULT_START)
    prog = {k: v for k, v in series.items() if k[0] == "aifabric_collective_progress_ratio"}
    assert len(prog) == len(co["collective"])
    for (_, labels), pts in prog.items():
        i = list(co["collective"]).index(re.search(r'collective="([^"]*)"', labels)[1])
        v = np.array([p[1] for p in pts])
        assert (np.diff(v) >= 0).all() and v[0] == 0 and v[-1] == 1
        first_one = next(t for t, x in pts if x == 1)
        assert first_one == pytest.approx(start + float(co["end_ns"][i]) / 1e3, abs=2e-3)
    util = [v for (n, _), pts in series.items() if n == "aifabric_tier_utilization_ratio"
            for _, v in pts]
    assert util and min(util) >= 0 and max(util) <= 1 + 1e-9


# ------------------------------------------------------------- backfill into Prometheus
def test_backfill_then_query_the_peak_queue_depth(runs, tmp_path, promtool,
                                                  start_prometheus):
    """promtool imports the packet run; a real Prometheus on those blocks answers
    max_over_time of the queue depth with the run's peak (packet_queues), per port of
    the hottest queue too; counters show no reset over the run."""
    run = runs["packet"]
    text = _metrics(run, tmp_path / "run.om")
    blocks = tmp_path / "data"
    p = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics",
                        str(tmp_path / "run.om"), str(blocks)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    n_samples = sum(len(v) for v in parse(text).values())
    imported = sum(int(r.split()[4]) for r in p.stdout.splitlines()[1:] if r.strip())
    assert imported == n_samples

    server = start_prometheus(storage=blocks)
    start = parse_start(DEFAULT_START)
    end = max(t for pts in parse(text).values() for t, _ in pts)
    window = f"{int(end - start) + 2}s"
    q = _table(run / "packet_queues.csv")
    qb = q["queue_bytes"].astype(float)
    peak = server.query(f"max(max_over_time(aifabric_queue_depth_bytes[{window}]))", end)
    assert float(peak[0]["value"][1]) == qb.max()
    # the hottest (port, priority): its own series' maximum
    i = int(np.argmax(qb))
    hot = server.query(f"topk(1, max_over_time(aifabric_queue_depth_bytes[{window}]))", end)
    assert hot[0]["metric"]["priority"] == q["tc"][i]
    assert hot[0]["metric"]["device"] == q["port"][i].split(" -> ")[0]
    assert float(hot[0]["value"][1]) == qb.max()
    # counters: no reset anywhere; every family of the file is there
    resets = server.query(f'sum(resets({{__name__=~"aifabric_.*_total"}}[{window}]))', end)
    assert float(resets[0]["value"][1]) == 0
    names = set(server.get("label/__name__/values"))
    assert names == {n for n, _ in parse(text)}


# ----------------------------------------------------------------------- bad input
def test_a_folder_without_time_series_is_one_line_and_nothing_written(tmp_path):
    """Not a run (or no time series): exit 2, one line naming RUN_DIR, no output file;
    a previous output stays as it was."""
    (tmp_path / "notes.txt").write_text("hello")
    out = tmp_path / "run.om"
    p = _aifabric("metrics", tmp_path, "--out", out, check=False)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no time series" in lines[0] and "RUN_DIR" in lines[0]
    assert not out.exists()
    out.write_text("old")
    p = _aifabric("metrics", tmp_path / "missing", "--out", out, check=False)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "is not a folder" in p.stderr and out.read_text() == "old"


def test_an_empty_or_damaged_table_is_one_line(tmp_path):
    """A timeline with no rows is no time series; a packet_queues without its columns
    names the file and the missing column."""
    (tmp_path / "timeline.csv").write_text("start_ns,end_ns,access_up_util\n")
    p = _aifabric("metrics", tmp_path, "--out", tmp_path / "x.om", check=False)
    assert p.returncode == 2 and "no time series" in p.stderr
    (tmp_path / "packet_queues.csv").write_text("time_ns,arc\n0,1\n")
    p = _aifabric("metrics", tmp_path, "--out", tmp_path / "x.om", check=False)
    assert p.returncode == 2 and "packet_queues.csv" in p.stderr and "tc" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr
    assert not (tmp_path / "x.om").exists()


def test_a_scenario_of_another_fabric_is_refused(runs, tmp_path):
    """--scenario must be the run's: another fabric is one line naming --scenario."""
    p = _aifabric("metrics", runs["flow"], "--scenario", PACKET, "--out", tmp_path / "x.om",
                  check=False)
    assert p.returncode == 2 and "--scenario" in p.stderr and "not in the" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.om").exists()


@pytest.mark.parametrize(("opt", "value", "says"), [
    ("--start", "yesterday", "--start"), ("--time-scale", "10", "--time-scale"),
    ("--start", "nan", "--start"), ("--start", "inf", "--start"),
    ("--start", "1e300", "--start")])
def test_bad_options_are_one_line(runs, tmp_path, opt, value, says):
    p = _aifabric("metrics", runs["flow"], "--out", tmp_path / "x.om", opt, value,
                  check=False)
    assert p.returncode == 2 and says in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.om").exists()


def test_label_values_are_escaped_and_kept_whole():
    """A name holding the text format's own characters stays one value: backslash, quote
    and newline escaped, a ',}' inside it left alone, empty values left out."""
    from aifabric.telemetry.openmetrics import _label_strings

    got = _label_strings({"a": np.array(["x,}y", "", 'q"\\\n']),
                          "b": np.array(["", "", "z"])}, ("a", "b"), 3)
    assert got.tolist() == ['{a="x,}y"}', "", '{a="q\\"\\\\\\n",b="z"}']


def test_parallel_links_stay_apart_without_the_scenario():
    """Two links between the same two devices, no fabric: two series, each with its own
    samples in time order (before, they shared one label set and the second link's
    samples went back in time, which promtool drops without a word)."""
    from aifabric.telemetry.openmetrics import arc_label_source

    links = {"link": np.array([3, 4]), "direction": np.array(["up", "up"], dtype=object),
             "from": np.array(["tor", "tor"], dtype=object),
             "to": np.array(["agg", "agg"], dtype=object),
             "tier": np.array(["leaf up", "leaf up"], dtype=object)}
    lab = arc_label_source({"links": links}, None)(np.array([6, 8]))
    keys = {tuple(lab[k][i] for k in sorted(lab)) for i in range(2)}
    assert len(keys) == 2 and list(lab["port"]) == ["link3", "link4"]


@pytest.mark.parametrize("value", ["", "inf", "-5"])
def test_a_damaged_timeline_is_one_line(runs, tmp_path, value):
    """A time that is not a time in timeline.csv: one line naming the table, exit 2."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(runs["flow"], run)
    lines = (run / "timeline.csv").read_text().splitlines()
    head = lines[0].split(",")
    last = lines[-1].split(",")
    last[head.index("end_ns")] = value
    lines[-1] = ",".join(last)
    (run / "timeline.csv").write_text("\n".join(lines) + "\n")
    p = _aifabric("metrics", run, "--out", tmp_path / "x.om", check=False)
    assert p.returncode == 2 and "timeline" in p.stderr and "end_ns" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "x.om").exists()
