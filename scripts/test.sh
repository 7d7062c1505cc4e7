#!/usr/bin/env bash
# The test command of the README: installs the prerequisites, runs the whole suite
# (unit, golden, property and real-etcd tests) for every crate, then the lab's end-to-end tests
# again with Felix on its nftables backend (`CALICO_TEST_BACKEND=nftables`: every lab gets
# `--felix-config NFTablesMode=Enabled`; see crates/lab/tests/common/firewall.rs). Arguments go
# to the first `cargo test` only.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-test-deps.sh
cargo build --workspace --all-targets -j2
cargo test --workspace -j2 "$@"

# Every lab test with packets, on nftables. Not here: nftables.rs (it picks its backends
# itself, and ran above) and openstack*.rs (not yet run on nftables in CI).
nftables_lab_tests=(
  e2e host_endpoints masquerade metadata nat vxlan differential resilience etcd_cluster soak
  bgp non_pool_routes podman examples_yaml migrate_v2 docker flows flow_counts firewall_monitor
)
echo "== the lab tests again, on Felix's nftables backend"
CALICO_TEST_BACKEND=nftables cargo test -j2 -p calico-lab \
  $(printf -- '--test %s ' "${nftables_lab_tests[@]}")
