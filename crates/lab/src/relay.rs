//! The relay: lets the caller's shell reach etcd, which lives on the fabric, without giving the
//! caller's namespace an address. It listens on 127.0.0.1 in the caller's namespace, then runs
//! on a thread inside the fabric namespace, where every connection it makes to etcd starts. (A
//! socket keeps the namespace it was made in.) There is one relay per etcd member; while its
//! member is down it does not listen, so clients fail over as they would on the fabric.

use std::fs::File;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use calico_linux::{Netns, in_netns};
use tokio::net::{TcpListener, TcpStream};

/// Runs the relay until killed; writes the port it listens on to `port_file`.
pub fn run(netns: &str, to: SocketAddr, port_file: &Path) -> anyhow::Result<()> {
    // The caller's namespace, to listen in again after the member came back.
    let home = File::open("/proc/self/ns/net").context("relay: open own namespace")?;
    let listener = bind(0)?;
    let port = listener.local_addr()?.port();
    // A single-threaded runtime on the fabric's thread: every socket to etcd is made inside
    // the fabric.
    let relay = || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(serve(listener, to, &home, port, port_file))
    };
    in_netns(&Netns::named(netns), || {
        relay().map_err(std::io::Error::other)
    })
    .with_context(|| format!("relay into namespace {netns}"))
}

fn bind(port: u16) -> anyhow::Result<std::net::TcpListener> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("relay: bind 127.0.0.1:{port}"))?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}

/// Listens on `port` again, in the caller's namespace (`home`): from a thread that enters it.
fn bind_at_home(home: &File, port: u16) -> anyhow::Result<std::net::TcpListener> {
    let home = Netns::at_path(format!("/proc/self/fd/{}", home.as_raw_fd()));
    in_netns(&home, || bind(port).map_err(std::io::Error::other))
        .context("relay: listen again in its own namespace")
}

/// Relays every connection to `to`. When `to` refuses (the member is down), the relay stops
/// listening until it answers again, so that clients see their connections refused, as they
/// would with the member itself, and fail over to another member at once.
async fn serve(
    listener: std::net::TcpListener,
    to: SocketAddr,
    home: &File,
    port: u16,
    port_file: &Path,
) -> anyhow::Result<()> {
    let mut listener = TcpListener::from_std(listener)?;
    std::fs::write(port_file, port.to_string())
        .with_context(|| format!("cannot write {}", port_file.display()))?;
    loop {
        let (mut inbound, _) = listener.accept().await?;
        match TcpStream::connect(to).await {
            Ok(mut outbound) => {
                // Small gRPC writes go on at once (with Nagle each request waited ~40 ms).
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                tokio::spawn(async move {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
            Err(_) => {
                drop((inbound, listener));
                while TcpStream::connect(to).await.is_err() {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                listener = TcpListener::from_std(bind_at_home(home, port)?)?;
            }
        }
    }
}
