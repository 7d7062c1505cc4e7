#!/usr/bin/env bash
# Bad input at volume: every parser that reads outside input (keys, values, selectors, bundles,
# BIRD's output, CNI's stdin and environment, an IPAM plugin's result, Felix's config) fed
# CALICO_FUZZ_CASES inputs each (default 1,000,000), in release. CI runs the same tests with
# 20,000 inputs each as part of `cargo test`. Prints each parser's counts and time; exits
# non-zero if any input panicked, hung or was refused without a clear error.
#
#   scripts/fuzz.sh                      # 1,000,000 inputs per parser
#   CALICO_FUZZ_CASES=50000 scripts/fuzz.sh
#   CALICO_FUZZ_SEED=0x1234 scripts/fuzz.sh   # another run than CI's fixed one
set -euo pipefail
cd "$(dirname "$0")/.."

export CALICO_FUZZ_CASES="${CALICO_FUZZ_CASES:-1000000}"
targets=(
    "calico-model fuzz"
    "calico-bgp fuzz"
    "calico-cni fuzz"
    "calico-felix fuzz_config"
)

log="$(mktemp)"
trap 'rm -f "$log" "$log.out"' EXIT
failed=()
started=$SECONDS
for target in "${targets[@]}"; do
    read -r package test <<<"$target"
    echo "== $package --test $test ($CALICO_FUZZ_CASES inputs per parser)"
    if ! cargo test --release -j2 -p "$package" --test "$test" -- --nocapture >"$log.out" 2>&1; then
        failed+=("$package/$test")
        grep -E "^fuzz .* failed|^input:|panicked at|^\(reproduce" "$log.out" | head -20 || true
    fi
    grep -E "^fuzz " "$log.out" | grep -v " failed: " | tee -a "$log" || true
    grep -E "^test result:" "$log.out" || true
done

echo
echo "== summary: $(grep -c '^fuzz ' "$log") parsers, $((SECONDS - started)) s in all"
sed -E 's/^fuzz ([^:]*): ([0-9]+) inputs.*, ([0-9.]+) s \(([0-9]+) inputs\/s\).*/  \1: \2 inputs in \3 s (\4\/s)/' "$log"
if ((${#failed[@]})); then
    echo "FAILED: ${failed[*]}" >&2
    exit 1
fi
