//! Compiles the translator (bpf/xlat.bpf.c) with clang `-target bpf`; the object is embedded in
//! the crate, so hosts that run it need no compiler.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let source = "bpf/xlat.bpf.c";
    println!("cargo:rerun-if-changed={source}");
    println!("cargo:rerun-if-env-changed=CLANG");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let object = out.join("xlat.bpf.o");
    let clang = std::env::var("CLANG").unwrap_or_else(|_| "clang".to_owned());
    // <asm/types.h> lives under the multiarch include directory on Debian.
    let multiarch = match std::env::var("CARGO_CFG_TARGET_ARCH").as_deref() {
        Ok("aarch64") => "aarch64-linux-gnu",
        _ => "x86_64-linux-gnu",
    };
    let status = Command::new(&clang)
        .args(["-O2", "-g0", "-Wall", "-Werror", "-target", "bpf"])
        .arg(format!("-I/usr/include/{multiarch}"))
        .args(["-c", source, "-o"])
        .arg(&object)
        .status();
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => panic!(
            "{clang} -target bpf failed on {source} ({s}); the translator needs clang and the \
             kernel headers: run scripts/setup-test-deps.sh (apt-get install -y clang linux-libc-dev)"
        ),
        Err(e) => panic!(
            "cannot run {clang} to compile {source}: {e}; the translator is eBPF compiled by \
             clang: run scripts/setup-test-deps.sh (apt-get install -y clang linux-libc-dev)"
        ),
    }
}
