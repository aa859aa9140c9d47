#!/bin/sh
# Run the UEC consortium's reference simulator (uet-htsim: htsim/sim, cmake --build build --target htsim_uec) on this folder:
#   UET_HTSIM=/path/to/uet-htsim/htsim/sim/datacenter sh run.sh
set -e
cd "$(dirname "$0")"
"${UET_HTSIM:?set UET_HTSIM to uet-htsim's htsim/sim/datacenter folder}"/htsim_uec -tm connections.cm -topo fabric.topo -linkspeed 100000 -mtu 1106 -q 7584 -paths 1 -ecn 90 362 -disable_trim -end 50000 -seed 0
