#!/usr/bin/env bash
# Installs what the build, the tests and the demo need on a fresh Debian 12 machine (run as root).
# Idempotent: packages already present are not reinstalled, and apt-get update runs only when
# something is missing.
set -euo pipefail

# command on PATH -> Debian package that provides it
declare -A NEEDED=(
  [protoc]=protobuf-compiler   # etcd-client's build generates its gRPC code
  [etcd]=etcd-server           # the real datastore, started by the tests and the demo
  [etcdctl]=etcd-client        # operators' tool; the tests check our keys work with it
  [ss]=iproute2                # the demo looks for a free port
  [openssl]=openssl            # the TLS tests make a throwaway CA and certificates
  [iptables-restore]=iptables  # the rendered rules are loaded into a test network namespace
  [ipset]=ipset                # so are the rendered IP sets
  [conntrack]=conntrack        # tests list and insert connections (Felix itself uses ctnetlink)
  [ping]=iputils-ping          # the lab's connectivity probes (ICMP)
  [sysctl]=procps              # the lab sets host sysctls
  [iperf3]=iperf3              # the lab's throughput benchmark
  [bird]=bird2                 # BGP: calico-node renders BIRD 2's config and runs it
  [nsenter]=util-linux         # kernel tools inside a container's namespace file (CNI_NETNS)
  [podman]=podman              # the real-runtime test: podman calls our CNI plugins
  [runc]=runc                  # podman's runtime here (crun refuses this kind of VM's cgroups)
  [ctr]=containerd             # the CNI test runs `ctr run --cni` against its own containerd
  [unshare]=util-linux         # … in a private mount namespace (ctr's CNI paths are fixed)
  [dockerd]=docker.io          # the Docker tests drive our libnetwork driver with a real dockerd
  [nft]=nftables               # Felix's nftables backend: its tests and `calicoctl diags` list the ruleset
  [chromium]=chromium           # the flow console's browser test (headless, driven over WebDriver)
  [chromedriver]=chromium-driver  # … by chromedriver; nothing is downloaded at run time
  [clang]=clang                 # calico-xlat: the address-space translator, a tc eBPF program (clang -target bpf)
)

missing=()
for tool in "${!NEEDED[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("${NEEDED[$tool]}")
done

# The reference CNI plugins (ptp, host-local): delegated-IPAM tests and the CNI benchmark.
[[ -x /usr/lib/cni/host-local ]] || missing+=(containernetworking-plugins)

# The podman test's containers run a copy of busybox: it must be the static build.
dpkg -s busybox-static >/dev/null 2>&1 || missing+=(busybox-static)

# protoc needs the well-known .proto files (google/protobuf/descriptor.proto, ...)
[[ -f /usr/include/google/protobuf/descriptor.proto ]] || missing+=(libprotobuf-dev)

# calico-xlat's eBPF program includes the kernel's uapi headers (linux/bpf.h, ...)
[[ -f /usr/include/linux/bpf.h ]] || missing+=(linux-libc-dev)

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "error: missing packages ${missing[*]}; run this script as root to install them" >&2
    exit 1
  fi
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# OpenStack: a real neutron-server, Keystone (uWSGI), the openstack CLI and MariaDB for
# crates/neutron's tests and the lab (nothing started).
"$(dirname "$0")/setup-neutron.sh"

if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found: install a Rust toolchain >= 1.95 (rustup) and re-run" >&2
  exit 1
fi
