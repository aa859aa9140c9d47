"""Hypothesis strategies: cluster specs of every family and simulation scenarios, as the
plain dicts a YAML file parses to; plausible ones (mostly valid, tiny fabrics) and broken
ones (a plausible document with one to three fields deleted, retyped, pushed out of range
or misspelt)."""

from __future__ import annotations

import copy
import math
import types
from functools import cache
from typing import Annotated, Any, Union, get_args, get_origin

from hypothesis import strategies as st
from pydantic import BaseModel

FAMILIES = ("clos", "rail", "fat_tree", "multiplane", "hpn", "single_tor")

#: a small custom switch model every generated spec may name (besides the built-ins)
TINY = "tiny"
MODELS = ("tomahawk3", TINY)

#: values that are wrong somewhere in most fields: types, signs, zero, non-finite
#: numbers, huge counts (the size guard must refuse those), hostile and empty text
BAD_VALUES: tuple[Any, ...] = (
    -1, 0, 1.5, True, False, None, "", "abc", "1e3", [], {}, [1, 2], {"x": 1},
    math.nan, math.inf, -math.inf, 10**9, 2**63, -(2**63), 10**30, 1e308,
    "x\ntouch /tmp/pwned", "fab [/old] :x:", "x" * 300, "tomahawk5",
)
#: values a misspelt or extra key gets
EXTRA_KEYS = ("bogus", "count_", "Name", "oversubscribtion", "")


def _pick(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    return st.sampled_from(options)


def tiny_model() -> st.SearchStrategy[dict]:
    """A small switch model (8-48 ports), sometimes with odd breakouts or lanes."""
    return st.fixed_dictionaries(
        {"ports": st.integers(8, 48), "port_gbps": _pick((400, 400, 400, 200, 800, 100))},
        optional={"breakouts": _pick(([1, 2, 4], [1, 2], [4], [2, 1], [1, 2, 4, 8, 8])),
                  "lanes_per_port": _pick((1, 2, 4, 8)),
                  "latency_ns": st.integers(0, 2000)})


@st.composite
def hosts(draw: st.DrawFn, family: str, max_hosts: int = 24) -> dict:
    gph = draw(_pick((2, 4, 8, 1) if family == "hpn" else (1, 2, 4, 8)))
    nics = draw(st.sampled_from([n for n in (2, 4, 8, 1) if n <= gph and gph % n == 0]))
    h: dict[str, Any] = {"gpus_per_host": gph, "nics_per_host": nics}
    if family == "hpn":
        h["ports_per_nic"] = 2
        h["port_gbps"] = draw(_pick((200, 200, 400)))
        if draw(st.booleans()):
            h["backup_per_segment"] = draw(st.integers(0, 2))
    else:
        h["port_gbps"] = draw(_pick((100, 200, 400)))
        if draw(st.integers(0, 4)) == 0:
            h["ports_per_nic"] = 2
    n = draw(st.integers(1, max_hosts))
    which = draw(st.integers(0, 5))
    if which == 0 and family == "fat_tree":
        pass  # all pods: the family's default (k is kept small below)
    elif which == 1:
        h["gpus"] = n * gph
    else:
        h["count"] = n
    if draw(st.integers(0, 5)) == 0:
        h["scaleup"] = "mesh"
    return h


@st.composite
def role(draw: st.DrawFn, *, down: tuple[int, int] | None = None,
         up: tuple[int, int] | None = None) -> dict:
    r: dict[str, Any] = {"model": draw(_pick(MODELS))}
    if down and draw(st.booleans()):
        r["down_ports"] = draw(st.integers(*down))
    if up and draw(st.booleans()):
        r["up_ports"] = draw(st.integers(*up))
    return r


@st.composite
def topology(draw: st.DrawFn, family: str) -> dict:
    t: dict[str, Any] = {"family": family}
    if family in ("clos", "rail"):
        t["leaf"] = draw(role(down=(1, 16), up=(1, 16)))
        t["spine"] = draw(role())
        if "up_ports" not in t["leaf"] and draw(st.booleans()):
            t["oversubscription"] = draw(_pick((1.0, 2.0, 3.0, 0.5, 1.5)))
        if family == "clos" and draw(st.booleans()):
            t["rail_optimized"] = True
    elif family == "multiplane":
        t["leaf"] = draw(role(down=(1, 16)))
        t["spine"] = draw(role())
    elif family == "fat_tree":
        t["k"] = draw(_pick((4, 6, 8, 8, 12)))
        t["switch"] = {"model": draw(_pick(MODELS))}
        if draw(st.booleans()):
            t["pods"] = draw(st.integers(1, 4))
        t["rail_optimized"] = draw(st.booleans())
    elif family == "hpn":
        t["hosts_per_segment"] = draw(st.integers(1, 12))
        t["tor"] = {"model": draw(_pick(MODELS)), "up_ports": draw(st.integers(1, 12))}
        t["agg"] = {"model": draw(_pick(MODELS)), "down_ports": draw(st.integers(2, 32)),
                    "up_ports": draw(st.integers(1, 6))}
        t["planes"] = draw(_pick((1, 2, 2)))
        if draw(st.booleans()):
            t["segments_per_pod"] = draw(st.integers(1, 4))
        if draw(st.integers(0, 3)) == 0:
            t["core"] = None  # the aggs are the top tier: no up ports
            if draw(st.integers(0, 3)):
                del t["agg"]["up_ports"]
    else:  # single_tor
        t["tor"] = draw(role())
        t["agg"] = draw(role())
        t["core"] = draw(role())
        if draw(st.booleans()):
            t["hosts_per_tor"] = draw(st.integers(1, 8))
        if draw(st.booleans()):
            t["tors_per_pod"] = draw(st.integers(1, 6))
        if draw(st.booleans()):
            t["oversubscription"] = draw(_pick((1.0, 2.0, 3.0, 0.5)))
    return t


@st.composite
def plausible_spec(draw: st.DrawFn, family: str | None = None) -> dict:
    """A spec of ``family`` (any if None) for a tiny fabric: mostly valid; where the
    knobs conflict, the builder must say so with a SpecError."""
    fam = family or draw(_pick(FAMILIES))
    d: dict[str, Any] = {"name": f"fz-{fam.replace('_', '-')}",
                         "hosts": draw(hosts(fam)),
                         "topology": draw(topology(fam))}
    if TINY in repr(d["topology"]) or draw(st.integers(0, 3)) == 0:
        d["switch_models"] = {TINY: draw(tiny_model())}
    if draw(st.integers(0, 4)) == 0:
        d["cabling"] = {"access": draw(_pick(("dac", "aoc", "optic")))}
    if draw(st.integers(0, 4)) == 0:
        d["routing"] = {"policy": draw(_pick(("ecmp", "spray", "adaptive", "source_port"))),
                        "seed": draw(st.integers(0, 7))}
    if draw(st.integers(0, 5)) == 0:
        d["seed"] = draw(st.integers(0, 2**31))
    return d


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into nested dicts/lists (the leaves and the containers)."""
    out = [prefix] if prefix else []
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, (*prefix, i))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for k in path[:-1]:
        doc = doc[k]
    return doc


def _submodels(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field holds directly (through Optional/Annotated/unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = get_origin(annotation)
    if origin is Annotated:
        return _submodels(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        return [m for a in get_args(annotation) for m in _submodels(a)]
    return []


def model_paths(model: type[BaseModel], prefix: tuple = (),
                skip: frozenset[str] = frozenset()) -> list[tuple]:
    """Every field path of ``model``, nested models included (lists and maps not)."""
    out = []
    for name, f in model.model_fields.items():
        if name in skip:
            continue
        key = (*prefix, f.alias or name)
        out.append(key)
        for sub in _submodels(f.annotation):
            out += model_paths(sub, key)
    return out


@cache
def spec_paths(family: str) -> tuple[tuple, ...]:
    """Every field of a spec of ``family``: the paths a broken spec may set."""
    from aifabric.spec import models

    topo = {"clos": models.ClosTopology, "rail": models.RailTopology,
            "fat_tree": models.FatTreeTopology, "multiplane": models.MultiplaneTopology,
            "hpn": models.HpnTopology, "single_tor": models.SingleTorTopology}[family]
    return tuple(model_paths(models.Spec, skip=frozenset({"topology"}))
                 + model_paths(topo, ("topology",)))


@cache
def scenario_paths() -> tuple[tuple, ...]:
    """Every field of a simulation scenario (its first collective and job included)."""
    from aifabric.sim.scenario import CollectiveSpec, JobSpec, SimScenario

    return tuple(model_paths(SimScenario, skip=frozenset({"spec"}))
                 + model_paths(CollectiveSpec, ("collectives", 0))
                 + model_paths(JobSpec, ("jobs", 0)))


def _known_paths(doc: Any) -> tuple[tuple, ...]:
    if not isinstance(doc, dict):
        return ()
    if isinstance(doc.get("topology"), dict):
        fam = doc["topology"].get("family")
        return spec_paths(fam) if fam in FAMILIES else ()
    if "spec" in doc:
        return scenario_paths() + tuple(("spec", *p) for p in _known_paths(doc["spec"]))
    return ()


def _set(doc: dict, path: tuple, value: Any) -> None:
    """Set ``path`` in ``doc``, making the mappings on the way (not list items)."""
    for k in path[:-1]:
        nxt = doc[k] if isinstance(doc, list) and isinstance(k, int) and k < len(doc) else (
            doc.get(k) if isinstance(doc, dict) else None)
        if not isinstance(nxt, dict | list):
            if not isinstance(doc, dict) or isinstance(k, int):
                return
            nxt = doc[k] = {}
        doc = nxt
    if isinstance(doc, dict):
        doc[path[-1]] = value


def nonfinite(doc: Any) -> bool:
    """Whether a document holds a NaN or an infinity anywhere."""
    if isinstance(doc, float):
        return not math.isfinite(doc)
    if isinstance(doc, dict):
        return any(nonfinite(v) for v in doc.values())
    if isinstance(doc, list):
        return any(nonfinite(v) for v in doc)
    return False


@st.composite
def broken(draw: st.DrawFn, base: st.SearchStrategy[dict]) -> Any:
    """A document of ``base`` with 1-3 mutations: a key deleted, a value replaced by a
    bad one or by a number out of any sensible range, any field of the model (given or
    not) set to a bad value, an unknown key added; or not a mapping at all."""
    doc = copy.deepcopy(draw(base))
    if draw(st.integers(0, 40).map(lambda x: x == 17)):
        return draw(_pick((None, [], "spec", 3, [doc])))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(doc)
        how = draw(st.integers(0, 4))
        if how == 4:
            known = _known_paths(doc)
            if known:
                _set(doc, draw(_pick(known)), draw(st.one_of(
                    _pick(BAD_VALUES), st.integers(-(10**6), 10**6),
                    st.floats(allow_nan=True, allow_infinity=True))))
            continue
        if how == 3 or not paths:
            target = _parent(doc, (*draw(_pick(((), *paths))), ""))
            if isinstance(target, dict):
                target[draw(_pick(EXTRA_KEYS))] = draw(_pick(BAD_VALUES))
            continue
        path = draw(_pick(tuple(paths)))
        parent = _parent(doc, path)
        key = path[-1]
        if how == 0 and isinstance(parent, dict):
            del parent[key]
        elif how == 1:
            parent[key] = draw(_pick(BAD_VALUES))
        else:
            parent[key] = draw(st.one_of(st.integers(-(10**6), 10**6),
                                         st.floats(allow_nan=True, allow_infinity=True),
                                         st.text(max_size=8)))
    return doc


def specs() -> st.SearchStrategy[Any]:
    """Plausible or broken specs of any family (about half each)."""
    return st.one_of(plausible_spec(), broken(plausible_spec()))


# ------------------------------------------------------------------ scenarios
#: one tiny, valid spec per family that the scenarios run on (at most 16 hosts)
SMALL_SPECS: dict[str, dict] = {
    "clos": {"name": "s-clos", "hosts": {"count": 4, "nics_per_host": 2, "gpus_per_host": 2},
             "topology": {"family": "clos", "leaf": {"model": "tomahawk3"},
                          "spine": {"model": "tomahawk3"}}},
    "rail": {"name": "s-rail", "hosts": {"count": 8, "nics_per_host": 2, "gpus_per_host": 2},
             "topology": {"family": "rail", "leaf": {"model": "tomahawk3", "down_ports": 4},
                          "spine": {"model": "tomahawk3"}}},
    "fat_tree": {"name": "s-fat-tree", "hosts": {"count": 8, "nics_per_host": 2,
                                                 "gpus_per_host": 2},
                 "topology": {"family": "fat_tree", "k": 8, "pods": 2,
                              "switch": {"model": "tomahawk3"}}},
    "multiplane": {"name": "s-multiplane", "hosts": {"count": 4, "nics_per_host": 2,
                                                     "gpus_per_host": 2},
                   "topology": {"family": "multiplane",
                                "leaf": {"model": "tomahawk3", "down_ports": 2},
                                "spine": {"model": "tomahawk3"}}},
    "hpn": {"name": "s-hpn", "hosts": {"count": 8, "nics_per_host": 2, "gpus_per_host": 2,
                                       "ports_per_nic": 2, "port_gbps": 200,
                                       "backup_per_segment": 1},
            "topology": {"family": "hpn", "hosts_per_segment": 4, "tor": {"up_ports": 4},
                         "agg": {"down_ports": 8, "up_ports": 2}}},
    "single_tor": {"name": "s-single-tor", "hosts": {"count": 6, "nics_per_host": 2,
                                                     "gpus_per_host": 2, "port_gbps": 200},
                   "topology": {"family": "single_tor", "hosts_per_tor": 2,
                                "tors_per_pod": 2, "tor": {"model": "tomahawk3"},
                                "agg": {"model": "tomahawk3"},
                                "core": {"model": "tomahawk3"}}},
}
SIMS = ("flow", "analytic", "packet")
OP_ALGOS = {"allreduce": ("ring", "tree", "halving_doubling", "hierarchical"),
            "reduce_scatter": ("ring", "halving_doubling"),
            "allgather": ("ring", "halving_doubling"), "alltoall": ("direct",),
            "broadcast": ("ring",), "p2p": ("direct",)}
SIZES = ("4KiB", "64KiB", 65536, 1000, "1e4", 256 * 1024)
#: packet runs move every frame: keep them to a few hundred KB
PACKET_SIZES = ("4KiB", "16KiB", 8192, 1000)


def _gpus(draw: st.DrawFn, n_gpus: int) -> Any:
    """A GPU count or an explicit list of GPU indices (sometimes out of range)."""
    if draw(st.integers(0, 4)) == 0:
        k = draw(st.integers(1, min(n_gpus, 6)))
        return draw(st.lists(st.integers(0, n_gpus + 1), min_size=k, max_size=k, unique=True))
    return draw(st.integers(1, n_gpus + 2))


@st.composite
def collective(draw: st.DrawFn, n_gpus: int, sizes: tuple) -> dict:
    op = draw(_pick(tuple(OP_ALGOS)))
    c: dict[str, Any] = {"op": op, "size_bytes": draw(_pick(sizes)), "gpus": _gpus(draw, n_gpus)}
    if draw(st.booleans()):
        c["algorithm"] = draw(_pick(OP_ALGOS[op]))
    if draw(st.integers(0, 2)) == 0:
        c["placement"] = draw(_pick(("pack", "spread", "random")))
        if c["placement"] == "spread" and draw(st.booleans()):
            c["segments"] = draw(st.integers(1, 3))
    if draw(st.integers(0, 2)) == 0:
        c["channels"] = draw(st.integers(1, 3))
    if draw(st.integers(0, 3)) == 0:
        c["repeat"] = draw(st.integers(1, 2))
    if draw(st.integers(0, 3)) == 0:
        c["start_ms"] = draw(_pick((0.0, 0.01, 0.5)))
    if op == "p2p" and draw(st.booleans()):
        c["peers"] = draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    return c


@st.composite
def job(draw: st.DrawFn, n_gpus: int) -> dict:
    par = {k: draw(_pick((1, 1, 2))) for k in ("dp", "tp", "pp")}
    par["ep"] = draw(_pick((1, par["dp"])))
    gpus = par["dp"] * par["tp"] * par["pp"]
    j: dict[str, Any] = {
        "gpus": gpus if draw(st.integers(0, 4)) else draw(st.integers(1, n_gpus + 1)),
        "parallel": par,
        "model": {"params": draw(_pick((1e6, 5e6))), "layers": draw(st.integers(1, 4)),
                  "hidden": draw(_pick((64, 128))), "seq_len": draw(_pick((16, 64))),
                  "moe_every": draw(_pick((0, 0, 1)))},
        "micro_batches": draw(st.integers(1, 2)),
        "compute": {"fwd_ms_per_layer": draw(_pick((0.0, 0.01)))},
        "buckets": draw(st.integers(1, 2)),
    }
    if draw(st.booleans()):
        j["dp_algorithm"] = draw(_pick(("ring", "tree", "halving_doubling", "hierarchical")))
    return j


@st.composite
def traffic(draw: st.DrawFn, n_gpus: int, sizes: tuple) -> dict:
    kind = draw(_pick(("permutation", "all_to_all", "ring", "incast")))
    t: dict[str, Any] = {"pattern": kind,
                         "size_bytes": draw(_pick(tuple(x for x in sizes if isinstance(x, int))))}
    if kind == "permutation" and draw(st.booleans()):
        t["shift"] = draw(st.integers(-3, n_gpus + 1))
    if kind == "ring" and draw(st.booleans()):
        t["channels"] = draw(st.integers(1, 2))
    if kind == "incast":
        t["to"] = draw(_pick(("0", "1", "host-s00-h000-gpu0", "nonexistent-gpu")))
    if draw(st.booleans()):  # a GPU set: indices (sometimes out of range) or GPU names
        k = draw(st.integers(2, min(n_gpus, 6)))
        t["senders" if kind == "incast" else "gpus"] = draw(st.one_of(
            st.just(f"0:{k}"), st.just(f"1:{n_gpus + 1}:2"), st.just("-3:"),
            st.just(["host-s00-h000-gpu0", "host-s00-h001-gpu0"]), st.just("all")))
    return t


#: GPUs of each small spec (active hosts x GPUs per host)
def n_gpus(family: str) -> int:
    h = SMALL_SPECS[family]["hosts"]
    return h["count"] * h["gpus_per_host"]


@st.composite
def plausible_scenario(draw: st.DrawFn, sim: str | None = None) -> dict:
    """A scenario on one of :data:`SMALL_SPECS` with 1-3 pieces of work; tiny sizes."""
    fam = draw(_pick(FAMILIES))
    sim = sim or draw(_pick(SIMS))
    n = n_gpus(fam)
    sizes = PACKET_SIZES if sim == "packet" else SIZES
    d: dict[str, Any] = {"name": f"fz-{sim}-{fam}", "spec": copy.deepcopy(SMALL_SPECS[fam]),
                         "sim": sim}
    work = draw(st.lists(_pick(("collective", "job", "traffic")), min_size=1,
                         max_size=2 if sim == "packet" else 3))
    for w in work:
        if w == "collective":
            d.setdefault("collectives", []).append(draw(collective(n, sizes)))
        elif w == "job" and sim != "packet":
            d.setdefault("jobs", []).append(draw(job(n)))
        else:
            d.setdefault("traffic", []).append(draw(traffic(n, sizes)))
    if draw(st.integers(0, 3)) == 0:
        d["routing"] = {"policy": draw(_pick(("ecmp", "spray", "adaptive", "source_port"))),
                        "qps_per_connection": draw(st.integers(1, 2))}
    if draw(st.integers(0, 5)) == 0:
        d["failures"] = [draw(_pick(({"switch": "nonexistent"},
                                     {"link": ["a", "b"]}, {"port": "x:y"})))]
    if sim == "flow" and draw(st.integers(0, 3)) == 0:
        d["tolerance"] = draw(_pick((0.0, 0.01, 0.1)))
    if sim == "packet" and draw(st.integers(0, 2)) == 0:
        d["packet"] = draw(packet_settings())
    if draw(st.integers(0, 5)) == 0:
        d["seed"] = draw(st.integers(0, 99))
    return d


@st.composite
def packet_settings(draw: st.DrawFn) -> dict:
    p: dict[str, Any] = {}
    if draw(st.booleans()):
        p["cc"] = {"algorithm": draw(_pick(("dcqcn", "hpcc", "timely", "dctcp", "none")))}
    if draw(st.booleans()):
        p["pfc"] = {"enabled": draw(st.booleans())}
    if draw(st.booleans()):
        p["ecn"] = {"enabled": draw(st.booleans())}
    return p


def scenarios(sim: str | None = None) -> st.SearchStrategy[Any]:
    """Plausible or broken scenarios (about two thirds plausible)."""
    good = plausible_scenario(sim)
    return st.one_of(good, good, broken(good))
