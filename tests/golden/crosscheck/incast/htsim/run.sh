#!/bin/sh
# Run htsim's RoCE datacenter binary (csg-htsim, sim/datacenter: make) on this folder:
#   HTSIM=/path/to/csg-htsim/sim/datacenter sh run.sh
set -e
cd "$(dirname "$0")"
"${HTSIM:?set HTSIM to csg-htsim's sim/datacenter folder}"/htsim_roce -tm connections.cm -topo fabric.topo -nodes 16 -strat ecmp_host -paths 256 -linkspeed 100000 -mtu 4114 -q 2718 -queue_type lossless_input -pfc_thresholds 68 73 -end 20000 -seed 0
