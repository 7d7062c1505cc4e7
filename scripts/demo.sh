#!/usr/bin/env bash
# The demo command of the README: installs the prerequisites, builds every binary of the
# workspace (so that every command of every doc works afterwards: calico-libnetwork for
# docs/docker.md, calico-neutron and calico-dhcp-agent for `calico-lab up --openstack`), then
# runs `calico-lab demo`: a two-host cluster in network namespaces (etcd on a fabric bridge,
# calico-felix and calico-node (BGP) on each host, four workloads plugged in by the calico CNI
# plugin) with the seed examples applied step by step and the connectivity matrix after each
# step. The cluster stays up afterwards; `scripts/demo.sh down` removes it.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=$PWD/target/debug
if [[ ${1:-} == down ]]; then
  exec "$BIN/calico-lab" down
fi

scripts/setup-test-deps.sh
cargo build -j2 --workspace --bins
export PATH=$BIN:$PATH
"$BIN/calico-lab" down >/dev/null 2>&1 || true
"$BIN/calico-lab" demo
