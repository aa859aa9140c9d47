"""Writing a Fabric for other tools: node-link JSON (NetworkX), GraphML (Gephi, NetworkX,
yEd) and DOT (Graphviz).

The text is built with vectorised string operations over the node and link arrays, so
exporting a 65,536-GPU fabric does not loop in Python over its links.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import IO

import numpy as np

from aifabric.topology.fabric import Fabric, LinkKind, Medium, NodeKind

__all__ = ["FORMATS", "write_dot", "write_graphml", "write_json"]


def _label(enum: type, values: np.ndarray) -> np.ndarray:
    names = np.array([e.label for e in sorted(enum, key=int)])
    return names[values.astype(np.int64)]


def _s(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.str_)


def _cat(*parts: str | np.ndarray) -> np.ndarray:
    out: np.ndarray | str = ""
    for p in parts:
        out = np.strings.add(out, p)
    return np.asarray(out)


def _one_line(text: str) -> str:
    """One line: control characters as ``\\uNNNN`` (names are validated; quoted anyway)."""
    return "".join(f"\\u{ord(c):04x}" if ord(c) < 32 or 127 <= ord(c) < 160
                   or c in "\u2028\u2029" else c for c in text)


def _xml_escape(a: np.ndarray) -> np.ndarray:
    for old, new in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;")):
        a = np.strings.replace(a, old, new)
    return a


def _node_columns(f: Fabric) -> dict[str, tuple[str, np.ndarray]]:
    n = f.nodes
    return {
        "kind": ("string", _label(NodeKind, n.kind)),
        "tier": ("int", _s(n.tier)),
        "pod": ("int", _s(n.pod)),
        "segment": ("int", _s(n.segment)),
        "plane": ("int", _s(n.plane)),
        "rail": ("int", _s(n.rail)),
        "host": ("int", _s(n.host)),
        "backup": ("boolean", np.where(n.backup, "true", "false")),
    }


def _link_columns(f: Fabric) -> dict[str, tuple[str, np.ndarray]]:
    li = f.links
    a_name = _port_names(f, li.a, li.a_port)
    b_name = _port_names(f, li.b, li.b_port)
    return {
        "kind": ("string", _label(LinkKind, li.kind)),
        "capacity_up_gbps": ("double", _s(li.capacity_gbps[:, 0])),
        "capacity_down_gbps": ("double", _s(li.capacity_gbps[:, 1])),
        "latency_ns": ("int", _s(li.latency_ns)),
        "medium": ("string", _label(Medium, li.medium)),
        "a_port": ("string", a_name),
        "b_port": ("string", b_name),
    }


def _port_names(f: Fabric, node: np.ndarray, port: np.ndarray) -> np.ndarray:
    kind = f.nodes.kind[node]
    sw = np.isin(kind, (NodeKind.TOR, NodeKind.AGG, NodeKind.CORE))
    nic = kind == NodeKind.NIC
    out = np.full(len(node), "", dtype="<U24")
    out[sw] = _cat("Ethernet", _s(port[sw]))
    out[nic] = _cat("ens", _s(f.nodes.rail[node[nic]]), "f", _s(f.nodes.side[node[nic]]))
    return out


def write_json(f: Fabric, out: IO[str]) -> None:
    """Node-link JSON: ``networkx.node_link_graph(data, edges="links")`` reads it back as a
    MultiGraph."""
    names = _json_str(f.nodes.name)
    cols = _node_columns(f)
    node_lines = _cat('{"id": ', names, *[
        p for key, (typ, vals) in cols.items()
        for p in (f', "{key}": ', vals if typ != "string" else _json_str(vals))], "}")
    lcols = _link_columns(f)
    link_lines = _cat('{"source": ', names[f.links.a], ', "target": ', names[f.links.b],
                      ', "key": ', _s(np.arange(f.n_links)), *[
                          p for key, (typ, vals) in lcols.items()
                          for p in (f', "{key}": ', vals if typ != "string"
                                    else _json_str(vals))], "}")
    out.write('{"directed": false, "multigraph": true, "graph": {"name": ')
    out.write(json.dumps(f.name) + f', "family": "{f.family}"}},\n "nodes": [\n')
    out.write(",\n".join(node_lines.tolist()))
    out.write('\n],\n "links": [\n')
    out.write(",\n".join(link_lines.tolist()))
    out.write("\n]}\n")


def _json_str(a: np.ndarray) -> np.ndarray:
    a = np.strings.replace(np.asarray(a).astype(np.str_), "\\", "\\\\")
    return _cat('"', np.strings.replace(a, '"', '\\"'), '"')


def write_graphml(f: Fabric, out: IO[str]) -> None:
    """GraphML with typed node and edge attributes (Gephi, ``networkx.read_graphml``)."""
    cols, lcols = _node_columns(f), _link_columns(f)
    out.write('<?xml version="1.0" encoding="UTF-8"?>\n'
              '<graphml xmlns="http://graphml.graphdrawing.org/xmlns">\n')
    for key, (typ, _) in cols.items():
        out.write(f'  <key id="n_{key}" for="node" attr.name="{key}" attr.type="{typ}"/>\n')
    for key, (typ, _) in lcols.items():
        out.write(f'  <key id="e_{key}" for="edge" attr.name="{key}" attr.type="{typ}"/>\n')
    gid = _xml_escape(np.array([_one_line(f.name)]))[0]
    out.write(f'  <graph id="{gid}" edgedefault="undirected">\n')
    names = _xml_escape(f.nodes.name.astype(np.str_))
    node_lines = _cat('    <node id="', names, '">', *[
        p for key, (_, vals) in cols.items()
        for p in (f'<data key="n_{key}">', vals, "</data>")], "</node>")
    out.write("\n".join(node_lines.tolist()))
    edge_lines = _cat('\n    <edge source="', names[f.links.a], '" target="', names[f.links.b],
                      '">', *[p for key, (_, vals) in lcols.items()
                              for p in (f'<data key="e_{key}">', vals, "</data>")], "</edge>")
    out.write("".join(edge_lines.tolist()))
    out.write("\n  </graph>\n</graphml>\n")


def write_dot(f: Fabric, out: IO[str]) -> None:
    """Graphviz DOT (``strict`` off: parallel links are kept)."""
    names = _cat('"', np.strings.replace(f.nodes.name.astype(np.str_), '"', '\\"'), '"')
    cols = _node_columns(f)
    gname = _one_line(f.name).replace("\\", "\\\\").replace('"', '\\"')
    out.write(f'graph "{gname}" {{\n  graph [family="{f.family}"];\n')
    node_lines = _cat("  ", names, " [", *[
        p for i, (key, (_, vals)) in enumerate(cols.items())
        for p in (("" if i == 0 else ", ") + f'{key}="', vals, '"')], "];")
    out.write("\n".join(node_lines.tolist()))
    lcols = _link_columns(f)
    edge_lines = _cat("\n  ", names[f.links.a], " -- ", names[f.links.b], " [", *[
        p for i, (key, (_, vals)) in enumerate(lcols.items())
        for p in (("" if i == 0 else ", ") + f'{key}="', vals, '"')], "];")
    out.write("".join(edge_lines.tolist()))
    out.write("\n}\n")


FORMATS: dict[str, tuple[str, Callable[[Fabric, IO[str]], None]]] = {
    "json": (".json", write_json),
    "graphml": (".graphml", write_graphml),
    "dot": (".dot", write_dot),
}
