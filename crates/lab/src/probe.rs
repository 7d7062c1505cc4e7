//! What runs inside workloads: `serve` (TCP and UDP echo on the lab's ports) and `probe`
//! (did a packet get through?).

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::time::timeout;

/// The line the echo server prints once it listens on every port.
pub const SERVING: &str = "echo server listening";

/// Echoes TCP and UDP on every port in `ports`, on all addresses, until killed.
pub async fn serve(ports: &[u16]) -> anyhow::Result<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for &port in ports {
        let tcp = TcpListener::bind(("::", port))
            .await
            .with_context(|| format!("cannot listen on TCP port {port}"))?;
        tasks.spawn(async move {
            loop {
                let Ok((stream, _)) = tcp.accept().await else {
                    continue;
                };
                tokio::spawn(echo(stream));
            }
        });
        let udp = UdpSocket::bind(("::", port))
            .await
            .with_context(|| format!("cannot listen on UDP port {port}"))?;
        tasks.spawn(async move {
            let mut buf = [0u8; 1500];
            loop {
                if let Ok((n, from)) = udp.recv_from(&mut buf).await {
                    let _ = udp.send_to(&buf[..n], from).await;
                }
            }
        });
    }
    // `workload add` waits for this line (the output goes to the workload's log).
    println!("{} on TCP and UDP ports {ports:?}", SERVING);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

async fn echo(mut stream: TcpStream) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stream.read(&mut buf).await {
        if n == 0 || stream.write_all(&buf[..n]).await.is_err() {
            break;
        }
    }
}

/// A packet to try: `tcp:IP:PORT`, `udp:IP:PORT` or `icmp:IP` (IPv6 as `tcp:[IP]:PORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Tcp(SocketAddr),
    Udp(SocketAddr),
    Icmp(IpAddr),
}

impl FromStr for Target {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Target> {
        let bad =
            || format!("bad probe target {text:?}: expected tcp:IP:PORT, udp:IP:PORT or icmp:IP");
        let (proto, rest) = text.split_once(':').with_context(bad)?;
        Ok(match proto {
            "tcp" => Target::Tcp(rest.parse().with_context(bad)?),
            "udp" => Target::Udp(rest.parse().with_context(bad)?),
            "icmp" => Target::Icmp(rest.parse().with_context(bad)?),
            _ => bail!(bad()),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp(a) => write!(f, "tcp:{a}"),
            Target::Udp(a) => write!(f, "udp:{a}"),
            Target::Icmp(a) => write!(f, "icmp:{a}"),
        }
    }
}

/// What happened to a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer from the listener.
    Ok,
    /// The destination answered that nothing listens there: the packet did arrive.
    Refused,
    /// No answer in time: dropped on the way.
    Blocked,
    /// The network said it cannot deliver (no route).
    Unreachable,
}

impl Outcome {
    /// Whether the packet reached its destination.
    pub fn arrived(self) -> bool {
        matches!(self, Outcome::Ok | Outcome::Refused)
    }

    pub fn parse(word: &str) -> Option<Outcome> {
        Some(match word {
            "ok" => Outcome::Ok,
            "refused" => Outcome::Refused,
            "blocked" => Outcome::Blocked,
            "unreachable" => Outcome::Unreachable,
            _ => return None,
        })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Blocked => "blocked",
            Outcome::Unreachable => "unreachable",
        })
    }
}

/// Tries every target at once; the outcomes in the same order.
pub async fn probe_all(targets: &[Target], wait: Duration) -> Vec<Outcome> {
    let tasks: Vec<_> = targets
        .iter()
        .map(|&t| tokio::spawn(probe(t, wait)))
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap_or(Outcome::Blocked));
    }
    outcomes
}

async fn probe(target: Target, wait: Duration) -> Outcome {
    match target {
        Target::Tcp(addr) => match timeout(wait, TcpStream::connect(addr)).await {
            Err(_) => Outcome::Blocked,
            Ok(Ok(_)) => Outcome::Ok,
            Ok(Err(e)) => io_outcome(&e),
        },
        Target::Udp(addr) => {
            let local: SocketAddr = if addr.is_ipv4() {
                "0.0.0.0:0".parse().expect("address")
            } else {
                "[::]:0".parse().expect("address")
            };
            let attempt = async {
                let socket = UdpSocket::bind(local).await?;
                socket.connect(addr).await?;
                socket.send(b"calico-lab probe").await?;
                let mut buf = [0u8; 64];
                socket.recv(&mut buf).await
            };
            match timeout(wait, attempt).await {
                Err(_) => Outcome::Blocked,
                Ok(Ok(_)) => Outcome::Ok,
                Ok(Err(e)) => io_outcome(&e),
            }
        }
        Target::Icmp(addr) => {
            let secs = format!("{:.1}", wait.as_secs_f64().max(0.1));
            let status = tokio::process::Command::new("ping")
                .args(["-n", "-q", "-c", "1", "-W", &secs, &addr.to_string()])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status()
                .await;
            match status {
                Ok(s) if s.success() => Outcome::Ok,
                _ => Outcome::Blocked,
            }
        }
    }
}

fn io_outcome(error: &std::io::Error) -> Outcome {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => Outcome::Refused,
        std::io::ErrorKind::HostUnreachable | std::io::ErrorKind::NetworkUnreachable => {
            Outcome::Unreachable
        }
        _ => Outcome::Blocked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip() {
        for text in [
            "tcp:10.65.0.2:80",
            "udp:[fd00::2]:53",
            "icmp:10.65.0.3",
            "icmp:fd00::3",
        ] {
            let target: Target = text.parse().unwrap();
            assert_eq!(target.to_string(), text);
        }
        let err = "sctp:1.2.3.4:5".parse::<Target>().unwrap_err().to_string();
        assert!(err.contains("sctp:1.2.3.4:5"), "{err}");
    }

    #[test]
    fn retransmitted_segments_are_read_from_snmp() {
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 1 64\n\
                    Tcp: RtoAlgorithm RtoMin ActiveOpens InSegs OutSegs RetransSegs InErrs\n\
                    Tcp: 1 200 3 1000 990 17 0\n";
        assert_eq!(retrans_segs(snmp), Some(17));
        assert_eq!(retrans_segs("Tcp: A B\n"), None);
    }
}

/// What a long-running flow saw.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FlowReport {
    pub sent: u32,
    pub echoed: u32,
    /// The longest wait for an echo, in milliseconds.
    pub max_gap_ms: u128,
    /// The echoes that took longer than the flow's `late` threshold, or during which TCP sent
    /// a segment again (counted in the namespace the flow runs in, which holds only the flow:
    /// a lost request, echo or acknowledgement shows there).
    #[serde(default)]
    pub late: Vec<LateEcho>,
    /// Why the flow ended before its time, if it did (the connection reset, or an echo that
    /// did not come within the patience).
    #[serde(default)]
    pub cut: Option<String>,
}

/// One echo that was late or lost a segment on the way: when its message was sent
/// (milliseconds since the Unix epoch), how long its echo took, and how many TCP segments the
/// flow's namespace sent again meanwhile (each one a packet lost in either direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LateEcho {
    pub sent_at_ms: u64,
    pub took_ms: u64,
    #[serde(default)]
    pub retransmits: u64,
}

/// How a flow paces and judges its echoes.
#[derive(Debug, Clone, Copy)]
pub struct FlowPace {
    /// A message every this long.
    pub every: Duration,
    /// How long one echo may take before the flow counts as cut.
    pub patience: Duration,
    /// An echo slower than this is reported as late.
    pub late: Duration,
}

/// Keeps one TCP connection to an echo server busy for `duration`: a message every
/// `pace.every`, each waited for (up to `pace.patience`). Stops at the first echo that does not
/// come, or when the connection fails.
pub async fn flow(
    to: SocketAddr,
    duration: Duration,
    pace: FlowPace,
) -> anyhow::Result<FlowReport> {
    let mut stream = timeout(pace.patience, TcpStream::connect(to))
        .await
        .with_context(|| format!("cannot connect to {to}: timed out"))?
        .with_context(|| format!("cannot connect to {to}"))?;
    let mut report = FlowReport {
        sent: 0,
        echoed: 0,
        max_gap_ms: 0,
        late: Vec::new(),
        cut: None,
    };
    let end = tokio::time::Instant::now() + duration;
    let mut buf = [0u8; 8];
    while tokio::time::Instant::now() < end {
        let started = tokio::time::Instant::now();
        let sent_at_ms = unix_ms();
        let retransmitted = retransmitted_segments();
        if let Err(error) = stream.write_all(b"ping\n").await {
            report.cut = Some(format!("sending failed: {error}"));
            break;
        }
        report.sent += 1;
        match timeout(pace.patience, stream.read_exact(&mut buf[..5])).await {
            Ok(Ok(_)) => report.echoed += 1,
            Ok(Err(error)) => {
                report.cut = Some(format!("receiving failed: {error}"));
                break;
            }
            Err(_) => {
                report.cut = Some(format!("no echo within {:?}", pace.patience));
                break;
            }
        }
        let took = started.elapsed();
        report.max_gap_ms = report.max_gap_ms.max(took.as_millis());
        let retransmits = retransmitted_segments().saturating_sub(retransmitted);
        if took > pace.late || retransmits > 0 {
            report.late.push(LateEcho {
                sent_at_ms,
                took_ms: took.as_millis() as u64,
                retransmits,
            });
        }
        tokio::time::sleep(pace.every).await;
    }
    Ok(report)
}

/// TCP segments this network namespace has sent again (`RetransSegs` of `/proc/net/snmp`,
/// which shows the namespace of the reader); 0 if it cannot be read.
fn retransmitted_segments() -> u64 {
    let text = std::fs::read_to_string("/proc/net/snmp").unwrap_or_default();
    retrans_segs(&text).unwrap_or(0)
}

/// `RetransSegs` from the text of `/proc/net/snmp` (a `Tcp:` line of names, then one of
/// values).
fn retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let at = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Now, in milliseconds since the Unix epoch.
pub fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Tries a TCP connection every `attempt` (each with that timeout) until one succeeds;
/// returns when it did, as nanoseconds since the Unix epoch (to compare with a write made by
/// another process on the same machine).
pub async fn first_open(
    to: SocketAddr,
    attempt: Duration,
    deadline: Duration,
) -> anyhow::Result<u128> {
    let end = tokio::time::Instant::now() + deadline;
    while tokio::time::Instant::now() < end {
        if let Ok(Ok(_)) = timeout(attempt, TcpStream::connect(to)).await {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            return Ok(now.as_nanos());
        }
    }
    bail!("{to} did not open within {deadline:?}")
}

/// What [`connect_rate`] measured: connections per second, and how long each took from
/// `connect()` to its echoed byte (milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ConnectRate {
    pub per_second: f64,
    pub connections: usize,
    pub median_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

/// New TCP connections per second to `to` over `duration`, `parallel` (at least 1) at a time: each one
/// connects, exchanges one byte with the echo server (so the handshake went through every
/// chain both ways) and closes with a reset (no TIME_WAIT left behind, so runs do not slow each
/// other down). Fails if a connection fails.
pub async fn connect_rate(
    to: SocketAddr,
    duration: Duration,
    parallel: usize,
) -> anyhow::Result<ConnectRate> {
    let started = tokio::time::Instant::now();
    let end = started + duration;
    let mut workers = tokio::task::JoinSet::new();
    anyhow::ensure!(parallel > 0, "parallel: at least one connection at a time");
    for _ in 0..parallel {
        workers.spawn(async move {
            let mut took = Vec::new();
            let mut byte = [0u8; 1];
            while tokio::time::Instant::now() < end {
                let began = tokio::time::Instant::now();
                let mut stream = timeout(Duration::from_secs(2), TcpStream::connect(to))
                    .await
                    .with_context(|| format!("connecting to {to} timed out"))?
                    .with_context(|| format!("connecting to {to}"))?;
                stream.write_all(b"x").await?;
                stream.read_exact(&mut byte).await?;
                took.push(began.elapsed().as_secs_f64() * 1000.0);
                // Close with a reset: a FIN would leave the port in TIME_WAIT for a minute, and
                // a few seconds at this rate fill the ephemeral port range (then connect() itself
                // slows down, whatever the path).
                socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO))?;
            }
            anyhow::Ok(took)
        });
    }
    let mut took = Vec::new();
    while let Some(done) = workers.join_next().await {
        took.extend(done??);
    }
    anyhow::ensure!(
        !took.is_empty(),
        "no connection to {to} completed in {duration:?}"
    );
    let per_second = took.len() as f64 / started.elapsed().as_secs_f64();
    took.sort_by(f64::total_cmp);
    let at = |q: f64| took[((took.len() - 1) as f64 * q).round() as usize];
    Ok(ConnectRate {
        per_second,
        connections: took.len(),
        median_ms: at(0.5),
        p99_ms: at(0.99),
        max_ms: at(1.0),
    })
}
