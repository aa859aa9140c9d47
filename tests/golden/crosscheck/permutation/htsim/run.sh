#!/bin/sh
# Run htsim's RoCE datacenter binary (csg-htsim, sim/datacenter: make) on this folder:
#   HTSIM=/path/to/csg-htsim/sim/datacenter sh run.sh
set -e
cd "$(dirname "$0")"
"${HTSIM:?set HTSIM to csg-htsim's sim/datacenter folder}"/htsim_roce -tm connections.cm -topo fabric.topo -nodes 16 -strat ecmp_host -paths 256 -linkspeed 100000 -mtu 1042 -q 8050 -queue_type lossless_input -pfc_thresholds 236 252 -end 50000 -seed 0
