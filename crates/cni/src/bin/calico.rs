//! The `calico` CNI plugin. Runtimes call it with `CNI_COMMAND` (ADD, DEL, CHECK, VERSION) and
//! the network configuration on stdin; see docs/cni.md.

fn main() -> std::process::ExitCode {
    calico_cni::main(calico_cni::Plugin::Calico)
}
