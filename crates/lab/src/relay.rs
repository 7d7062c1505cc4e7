//! The relay: lets the caller's shell reach etcd, which lives on the fabric, without giving the
//! caller's namespace an address. It listens on 127.0.0.1 in the caller's namespace, then runs
//! on a thread inside the fabric namespace, where every connection it makes to etcd starts. (A
//! socket keeps the namespace it was made in.)

use std::net::SocketAddr;
use std::path::Path;

use anyhow::Context;
use calico_linux::{Netns, in_netns};
use tokio::net::{TcpListener, TcpStream};

/// Runs the relay until killed; writes the port it listens on to `port_file`.
pub fn run(netns: &str, to: SocketAddr, port_file: &Path) -> anyhow::Result<()> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").context("relay: bind")?;
    listener.set_nonblocking(true)?;
    let port = listener.local_addr()?.port();
    // A single-threaded runtime on the fabric's thread: every socket is made inside the fabric.
    let relay = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(serve(listener, to, port, port_file))
    };
    in_netns(&Netns::named(netns), || {
        relay().map_err(std::io::Error::other)
    })
    .with_context(|| format!("relay into namespace {netns}"))
}

async fn serve(
    listener: std::net::TcpListener,
    to: SocketAddr,
    port: u16,
    port_file: &Path,
) -> anyhow::Result<()> {
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
}
