"""FRR ``frr.conf`` of every switch: eBGP to every neighbour switch, ECMP, host routes.

* One eBGP session per point-to-point /31 (RFC 7938), ``bgp bestpath as-path
  multipath-relax`` (equal paths through neighbours of different ASNs share ECMP) and
  ``maximum-paths`` = the number of sessions (at least 2, at most FRR's 256).
* Loopbacks are redistributed (connected, filtered to the loopback pool).
* ToRs also announce their hosts' /32s: HPN dual-ToRs learn them from ARP on the host
  VLAN (installed as kernel routes, ``redistribute kernel``), so a ToR whose port
  to a host goes down withdraws that host; single-attached ToRs carry the plan's
  /32s as static routes to the host VLAN (``redistribute static``).

Everything comes from the Fabric and the address plan; the template sits beside this
file (``templates/frr.conf.j2``).
"""

from __future__ import annotations

from functools import cache

import jinja2

from aifabric.configs.addressing import ip_str
from aifabric.configs.quote import FILTERS
from aifabric.configs.sonic import SwitchContext
from aifabric.topology import LinkKind, NodeKind

__all__ = ["MAX_PATHS", "render_frr", "template_env"]

#: FRR's compiled ECMP limit on Debian (--enable-multipath=256)
MAX_PATHS = 256


@cache
def template_env() -> jinja2.Environment:
    """The jinja2 environment of the templates beside the renderers, with the quoting
    filters of :mod:`aifabric.configs.quote` (every value a template writes goes
    through one)."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("aifabric.configs", "templates"),
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined, autoescape=False)
    env.filters.update(FILTERS)
    return env


def render_frr(ctx: SwitchContext, node: int) -> str:
    """The ``frr.conf`` of switch ``node``."""
    f, plan = ctx.f, ctx.plan
    spec = f.spec
    rows = range(int(ctx.ends.start[node]), int(ctx.ends.stop[node]))
    neighbors = []
    static = []
    vlan = f"Vlan{spec.deploy.nic.host_vlan}"
    for r in rows:
        if ctx.kind[r] == LinkKind.ACCESS:
            static.append(ctx.nic_ip[r])
            continue
        neighbors.append({"ip": ctx.peer_ip[r], "asn": ctx.peer_asn[r],
                          "device": ctx.peer_device[r], "port": ctx.peer_port[r],
                          "local_port": ctx.port_name[r], "local_ip": ctx.local_ip[r]})
    tor = int(f.nodes.kind[node]) == NodeKind.TOR
    host_routes = "none"
    static_routes: list[dict[str, str]] = []
    if tor and static:
        if ctx.hpn:
            host_routes = "arp"
        else:
            host_routes = "static"
            uniq = sorted(set(static))
            static_routes = [{"ip": s, "dev": vlan} for s in ip_str(uniq).tolist()]
    return template_env().get_template("frr.conf.j2").render(
        name=str(f.nodes.name[node]), spec_name=spec.name, asn=int(plan.asn[node]),
        loopback=ip_str(plan.loopback[node:node + 1])[0],
        loopback_pool=str(spec.deploy.pools.loopback), nic_pool=str(spec.addressing.nic_pool),
        tor=tor, neighbors=neighbors, host_routes=host_routes, static_routes=static_routes,
        maximum_paths=max(2, min(MAX_PATHS, len(neighbors))))
