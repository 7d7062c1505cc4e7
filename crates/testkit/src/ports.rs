//! Ports for servers that cannot bind port 0: below the kernel's ephemeral range, each
//! reserved machine-wide by a lock file that this process holds until it exits.

use std::fs::File;
use std::net::TcpListener;
use std::sync::Mutex;

/// Where the lock files live; shared by every test process on the machine.
const LOCK_DIR: &str = "/tmp/calico-testkit-ports";
/// The lowest port handed out: above the well-known and most registered service ports.
const LOWEST: u16 = 20000;

/// The locks this process holds (released when it exits, however it exits).
static HELD: Mutex<Vec<(u16, File)>> = Mutex::new(Vec::new());

pub(crate) fn reserve() -> u16 {
    std::fs::create_dir_all(LOCK_DIR).unwrap_or_else(|e| panic!("cannot create {LOCK_DIR}: {e}"));
    let highest = ephemeral_start().saturating_sub(1);
    assert!(
        highest > LOWEST,
        "the kernel's ephemeral range starts at {}: no room below it for test ports",
        highest + 1
    );
    let span = u32::from(highest - LOWEST) + 1;
    let start = seed() % span;
    let mut held = HELD.lock().unwrap_or_else(|e| e.into_inner());
    for offset in 0..span {
        let port = LOWEST + ((start + offset) % span) as u16;
        if held.iter().any(|(p, _)| *p == port) {
            continue;
        }
        let Ok(lock) = File::create(format!("{LOCK_DIR}/{port}")) else {
            continue;
        };
        if lock.try_lock().is_err() {
            continue; // another test process holds it
        }
        if TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue; // something else serves on it
        }
        held.push((port, lock));
        return port;
    }
    panic!("no free loopback port in {LOWEST}-{highest}");
}

/// The first port of `net.ipv4.ip_local_port_range` (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768)
}

/// Where to start looking: different in each process and call, so that concurrent processes
/// rarely try the same port first.
fn seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    nanos ^ std::process::id().rotate_left(16)
}
