#!/usr/bin/env bash
# The demo command of the README: installs the prerequisites, builds calicoctl, starts a local
# etcd, loads the seed examples from examples/ through calicoctl and prints them back.
# etcd keeps running afterwards so you can explore; `scripts/demo.sh down` stops it.
set -euo pipefail
cd "$(dirname "$0")/.."

STATE=${CALICO_DEMO_DIR:-/tmp/calico-demo}

down() {
  if [[ -f $STATE/etcd.pid ]]; then
    kill "$(cat "$STATE/etcd.pid")" 2>/dev/null || true
  fi
  rm -rf "$STATE"
}

if [[ ${1:-} == down ]]; then
  down
  echo "demo stopped, $STATE removed"
  exit 0
fi

scripts/setup-test-deps.sh
cargo build -j2 -p calico-ctl --bin calicoctl
CALICOCTL=$PWD/target/debug/calicoctl

down
mkdir -p "$STATE"
port=23790
while ss -Htln "sport = :$port" | grep -q . || ss -Htln "sport = :$((port + 1))" | grep -q .; do
  port=$((port + 2))
done
export ETCD_ENDPOINTS=http://127.0.0.1:$port
etcd --name demo --data-dir "$STATE/data" \
  --listen-client-urls "$ETCD_ENDPOINTS" --advertise-client-urls "$ETCD_ENDPOINTS" \
  --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
  --initial-cluster "demo=http://127.0.0.1:$((port + 1))" >"$STATE/etcd.log" 2>&1 &
echo $! >"$STATE/etcd.pid"
for _ in $(seq 100); do
  ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint health >/dev/null 2>&1 && break
  sleep 0.2
done
ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" endpoint health >/dev/null ||
  { echo "etcd did not start; see $STATE/etcd.log" >&2; exit 1; }

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; "$@"; }

echo "etcd is running at $ETCD_ENDPOINTS (data in $STATE)"
for bundle in examples/*.json; do
  step "$CALICOCTL" load -f "$bundle"
done

step "$CALICOCTL" get /calico/v1/policy/tier/my-tier/policy/webserver
step "$CALICOCTL" get /calico/
echo
echo "An invalid object is refused with the field and the reason, and nothing is written:"
step "$CALICOCTL" put /calico/v1/policy/profile/bad/rules \
  '{"inbound_rules": [{"dst_ports": [80], "action": "allow"}]}' || true
step "$CALICOCTL" validate /calico/v1/host/my-host/endpoint/eth9 '{"labels": {"foo": "bar"}}' || true
echo
echo "Selectors can be checked before they are deployed:"
printf '%s\n' \
  '{"selector": "role == \"webserver\" && environment != \"dev\"", "labels": {"role": "webserver"}}' \
  '{"selector": "tier in {\"frontend\", \"backend\"}", "labels": {"tier": "db"}}' \
  '{"selector": "role = \"webserver\"", "labels": {}}' |
  { printf '\n\033[1m$ calicoctl selector eval  # three JSON lines on stdin\033[0m\n'; "$CALICOCTL" selector eval; }
echo
echo "How the policy judges a packet: frontend-1 (10.65.0.2) connecting to postgres-1 on 5432:"
step "$CALICOCTL" policy explain \
  --endpoint /calico/v1/host/my-host/workload/docker/postgres-1/endpoint/eth0 \
  --src 10.65.0.2 --protocol tcp --dst-port 5432
echo
echo "The same keys work with etcdctl:"
step env ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" get /calico/v1/Ready

cat <<MSG

Explore:   export ETCD_ENDPOINTS=$ETCD_ENDPOINTS
           $CALICOCTL get /calico/v1/policy/ -o json
Tear down: scripts/demo.sh down
MSG
