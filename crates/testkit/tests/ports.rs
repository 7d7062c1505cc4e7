//! The ports testkit hands out: reserved ones outside the kernel's ephemeral range, and
//! refusing ones that refuse for as long as they are held.

use std::io::ErrorKind;
use std::net::{TcpListener, TcpStream};

#[test]
fn reserved_ports_are_below_the_ephemeral_range_distinct_and_locked() {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
    let ephemeral_start: u16 = range.split_whitespace().next().unwrap().parse().unwrap();
    let ports: Vec<u16> = (0..20).map(|_| calico_testkit::free_port()).collect();
    for port in &ports {
        assert!(
            *port < ephemeral_start,
            "{port} is in the ephemeral range {range}"
        );
        // Free now: the server the test starts can bind it.
        drop(TcpListener::bind(("127.0.0.1", *port)).expect("a reserved port is bindable"));
    }
    let mut distinct = ports.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), ports.len(), "handed out twice: {ports:?}");
    // Another process sees each one locked (a file lock held by this process).
    let lock = std::fs::File::open(format!("/tmp/calico-testkit-ports/{}", ports[0])).unwrap();
    let script = format!(
        "flock --nonblock /tmp/calico-testkit-ports/{} true",
        ports[0]
    );
    let status = std::process::Command::new("sh")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(
        !status.success(),
        "another process could take port {}",
        ports[0]
    );
    drop(lock);
}

#[test]
fn a_refusing_port_refuses_while_held_and_cannot_be_taken() {
    let refusing = calico_testkit::refusing_port();
    for _ in 0..3 {
        let error = TcpStream::connect(("127.0.0.1", refusing.port())).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::ConnectionRefused, "{error}");
    }
    let taken = TcpListener::bind(("127.0.0.1", refusing.port()));
    assert!(
        taken.is_err(),
        "another server could listen on the refusing port"
    );
    assert_eq!(
        refusing.url(),
        format!("http://127.0.0.1:{}", refusing.port())
    );
}
