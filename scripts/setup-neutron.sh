#!/usr/bin/env bash
# Installs a real OpenStack Neutron server and Keystone (Debian's Zed packages; Keystone served
# by uWSGI, neutron-server with keystonemiddleware), the operator's client
# (python3-openstackclient), MariaDB, dnsmasq and a DHCP client for the OpenStack tests
# (`cargo test -p calico-neutron`) and `calico-lab up --openstack` on a Debian 12 machine (run
# as root). Nothing is started and nothing is configured: the tests and the lab run their own
# neutron-server, keystone (its own configuration, database and fernet keys) and mariadbd in
# private directories.
# Idempotent: packages already present are not reinstalled, and apt-get update runs only when
# something is missing.
set -euo pipefail

# What the tests run -> the Debian package that provides it.
declare -A NEEDED=(
  [/usr/bin/neutron-server]=neutron-server       # the API server the sync reads
  [/usr/bin/neutron-db-manage]=python3-neutron   # creates the schema (alembic migrations)
  [/usr/sbin/mariadbd]=mariadb-server            # Neutron's database: parallel writers work
  [/usr/bin/mariadb-install-db]=mariadb-server   # … in a throwaway data directory per test
  [/usr/bin/mariadb]=mariadb-server              # … where the test creates the database
  [/usr/sbin/dnsmasq]=dnsmasq-base               # what calico-dhcp-agent runs (tests/dhcp.rs)
  [/sbin/dhclient]=isc-dhcp-client               # the DHCPv6 client of a VM namespace (tests/dhcp.rs, the lab's dual-stack VMs; busybox has none)
  [/usr/bin/keystone-manage]=keystone            # db_sync and bootstrap of the tests' keystone
  [/usr/bin/keystone-wsgi-public]=keystone       # the WSGI application uWSGI serves
  [/usr/bin/uwsgi]=uwsgi-core                    # serves keystone (HTTP/1.1, several workers)
  [/usr/lib/uwsgi/plugins/python3_plugin.so]=uwsgi-plugin-python3
  [/usr/bin/openstack]=python3-openstackclient   # the operator's client (docs/openstack.md, the lab's tests)
)

missing=()
for path in "${!NEEDED[@]}"; do
  package=${NEEDED[$path]}
  if [[ ! -e $path && " ${missing[*]} " != *" $package "* ]]; then
    missing+=("$package")
  fi
done
# pymysql: the driver of the `mysql+pymysql://` connection URL.
/usr/bin/python3 -c 'import pymysql' 2>/dev/null || missing+=(python3-pymysql)
# neutron-server's auth_strategy = keystone loads the middleware.
/usr/bin/python3 -c 'import keystonemiddleware' 2>/dev/null || missing+=(python3-keystonemiddleware)

if ((${#missing[@]} == 0)); then
  echo "neutron-server, keystone, the openstack client, mariadb-server and dnsmasq are installed"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "error: missing packages ${missing[*]}; run this script as root to install them" >&2
  exit 1
fi

# The packages' install scripts start neutron-api, neutron-rpc-server, keystone and mariadb through
# invoke-rc.d; a policy-rc.d that refuses (exit 101) keeps them all stopped. Ours stands in
# for the machine's own (if any) during the install and the original is put back afterwards.
policy=/usr/sbin/policy-rc.d
saved=""
if [[ -e $policy ]]; then
  saved=$(mktemp /usr/sbin/policy-rc.d.saved.XXXXXX)
  cp -p "$policy" "$saved"
fi
restore_policy() {
  if [[ -n $saved ]]; then mv -f "$saved" "$policy"; else rm -f "$policy"; fi
}
trap restore_policy EXIT
printf '#!/bin/sh\n# written by setup-neutron.sh: no service starts during the install\nexit 101\n' >"$policy"
chmod 755 "$policy"

# Another apt run may hold the dpkg lock: wait for it (up to 10 minutes) instead of failing.
apt_wait=(-o DPkg::Lock::Timeout=600)
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get "${apt_wait[@]}" update -qq
apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null

echo "neutron-server, keystone, the openstack client, mariadb-server and dnsmasq are installed"
