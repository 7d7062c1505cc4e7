"""Calico's ML2 mechanism driver for Neutron (the Rust project's): binds VM ports as TAP
interfaces with L3 connectivity. All other logic (endpoints, profiles, routing) is Rust:
calico-neutron reads Neutron's API and writes etcd. See docs/openstack.md."""
