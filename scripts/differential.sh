#!/usr/bin/env bash
# The differential test at volume: the kernel's verdict against `calicoctl policy explain` for
# at least FLOWS random flows (default 10,000), over as many seeds as that takes (5 scenarios of
# random profiles and tiered policies per seed, CALICO_DIFF_FLOWS different flows per scenario,
# default 100). CI runs the same test on one fixed seed as part of `cargo test`. Prints each
# seed's counts, every mismatch (seed, scenario, flow, both explanations, the scenario's keys),
# a summary and the time; exits non-zero on any mismatch. Needs root (the lab makes namespaces).
#
#   scripts/differential.sh                           # >= 10,000 flows from the CI seed on
#   scripts/differential.sh 50000
#   CALICO_DIFF_SEED=random scripts/differential.sh   # other seeds than the last run's
#
# Replay one seed: CALICO_DIFF_SEED=S CALICO_DIFF_SEEDS=1 CALICO_DIFF_FLOWS=100 \
#   cargo test -p calico-lab --test differential -- --nocapture
set -euo pipefail
cd "$(dirname "$0")/.."

total="${1:-10000}"
if ! [[ "$total" =~ ^[1-9][0-9]*$ ]]; then
    echo "FLOWS: expected a positive number of flows, not '$total'" >&2
    exit 2
fi
if [[ "$(id -u)" != 0 ]]; then
    echo "needs root: the lab creates network namespaces, veths and iptables rules" >&2
    exit 2
fi
export CALICO_DIFF_FLOWS="${CALICO_DIFF_FLOWS:-100}"
export CALICO_DIFF_SEEDS=$(((total + 5 * CALICO_DIFF_FLOWS - 1) / (5 * CALICO_DIFF_FLOWS)))
# A debug build: most of the run is `calicoctl policy explain` processes (two per flow), and
# one takes about 19 ms in debug against 15 ms in release (it is mostly a request to etcd), far
# less than building every binary in release would cost.
started=$SECONDS
echo "== building"
cargo build -j2 -p calico-felix -p calico-node -p calico-cni -p calico-lab -p calico-ctl
cargo test -j2 -p calico-lab --test differential --no-run
built=$SECONDS

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "== ${CALICO_DIFF_SEEDS} seeds from ${CALICO_DIFF_SEED:-the default}, 5 scenarios each," \
    "${CALICO_DIFF_FLOWS} flows per scenario"
status=0
cargo test -j2 -p calico-lab --test differential -- --nocapture >"$log" 2>&1 &
test_pid=$!
tail -n +1 --pid="$test_pid" -f "$log" |
    grep --line-buffered -vE "^ *(Compiling|Finished|Running|Blocking|running 1 test|$)" || true
wait "$test_pid" || status=$?

echo
echo "== summary"
grep -E "^differential: [0-9]+ seeds" "$log" || echo "the test did not finish: see its output above"
echo "mismatches: $(grep -c '^MISMATCH' "$log" || true)"
grep '^MISMATCH' "$log" | sed 's/^/  /' || true
echo "time: $((SECONDS - started)) s in all ($((built - started)) s building)"
exit "$status"
