//! The relay: lets the caller's shell reach etcd, which lives on the fabric, without giving the
//! caller's namespace an address. It listens on 127.0.0.1 in the caller's namespace, then moves
//! itself into the fabric namespace, where every connection it makes to etcd starts. (A socket
//! keeps the namespace it was made in.)

use std::fs::File;
use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use nix::sched::{CloneFlags, setns};
use tokio::net::{TcpListener, TcpStream};

/// Moves the calling thread into the named network namespace.
pub fn enter_netns(name: &str) -> anyhow::Result<()> {
    let path = format!("/run/netns/{name}");
    let file = File::open(&path).with_context(|| format!("cannot open {path}"))?;
    setns(&file, CloneFlags::CLONE_NEWNET)
        .with_context(|| format!("cannot enter network namespace {name}"))
}

/// Runs the relay until killed; writes the port it listens on to `port_file`.
pub fn run(netns: &str, to: SocketAddr, port_file: &Path) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("relay: bind")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    enter_netns(netns)?;
    // A single-threaded runtime: every socket is made on this thread, inside the fabric.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = TcpListener::from_std(listener)?;
        std::fs::write(port_file, port.to_string())
            .with_context(|| format!("cannot write {}", port_file.display()))?;
        loop {
            let (mut inbound, _) = listener.accept().await?;
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    })
}
