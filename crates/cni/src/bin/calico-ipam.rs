//! The `calico-ipam` CNI IPAM plugin: addresses from Calico IPAM; see docs/cni.md.

fn main() -> std::process::ExitCode {
    calico_cni::main(calico_cni::Plugin::CalicoIpam)
}
