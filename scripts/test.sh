#!/usr/bin/env bash
# The test command of the README: installs the prerequisites, then runs the whole suite
# (unit, golden, property and real-etcd tests) for every crate.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup-test-deps.sh
cargo build --workspace --all-targets -j2
cargo test --workspace -j2 "$@"
