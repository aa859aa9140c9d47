#!/bin/sh
# Run ns-3's RDMA simulator (HPCC repository, simulation/) on this folder:
#   NS3=/path/to/High-Precision-Congestion-Control/simulation sh run.sh
# Outputs land here: fct.txt (sip dip sport dport size start_ns fct_ns standalone_fct_ns), pfc.txt.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "${NS3:?set NS3 to the HPCC repository's simulation folder}"
./waf --run "scratch/third config.txt" --cwd="$here"
