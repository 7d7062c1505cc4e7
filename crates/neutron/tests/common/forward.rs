//! A TCP forwarder from a port on a network namespace's loopback to a port on the test's own
//! loopback: lets a process inside the namespace (the DHCP agent, calico-neutron) reach the
//! neutron-server the harness runs outside it. The listening socket is made on a thread that
//! entered the namespace (a socket stays in the namespace it was made in); connections to the
//! target are made from the test's own namespace.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

/// Forwards `127.0.0.1:port` in a namespace to `127.0.0.1:target` outside; stops on `Drop`.
pub struct Forwarder {
    pub port: u16,
    stop: Arc<AtomicBool>,
}

impl Forwarder {
    pub fn start(netns: &str, target: u16) -> Forwarder {
        let path = format!("/run/netns/{netns}");
        let listener = std::thread::spawn(move || {
            let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))
                .unwrap_or_else(|e| panic!("setns {path}: {e}"));
            TcpListener::bind("127.0.0.1:0").expect("bind in the namespace")
        })
        .join()
        .expect("the listening thread");
        let port = listener.local_addr().expect("local address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => relay(client, target),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
                }
            }
        });
        Forwarder { port, stop }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Copies both ways between `client` and a new connection to `target`, on two threads.
fn relay(client: TcpStream, target: u16) {
    let _ = client.set_nonblocking(false);
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
        return;
    };
    let pipe = |mut from: TcpStream, mut to: TcpStream| {
        std::thread::spawn(move || {
            let mut buffer = [0u8; 16384];
            while let Ok(n) = from.read(&mut buffer) {
                if n == 0 || to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        });
    };
    if let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) {
        pipe(client, server);
        pipe(s2, c2);
    }
}
