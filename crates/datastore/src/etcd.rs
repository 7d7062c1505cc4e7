//! The etcd v3 backend: several endpoints, optional TLS (CA, client certificate and key), and
//! connection checked up front so an unreachable etcd fails fast with the endpoints named.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Certificate, Client, Compare as EtcdCompare, CompareOp, ConnectOptions, DeleteOptions,
    EventType, GetOptions, Identity, PutOptions, TlsOptions, Txn, TxnOp as EtcdTxnOp, WatchOptions,
};
use futures::stream::{self, StreamExt};

use crate::watch::{self, Break, ChangeStream, Source, Start, Watch, WatchEvent};
use crate::{Compare, Datastore, DatastoreError, Expect, KvPair, TxnOp};

/// The etcd endpoints when neither a flag nor `ETCD_ENDPOINTS` names any.
pub const DEFAULT_ENDPOINTS: &str = "http://127.0.0.1:2379";

/// How to reach etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdConfig {
    /// `http://host:port` or `https://host:port`; several for a cluster.
    pub endpoints: Vec<String>,
    /// The CA that signed etcd's server certificate (PEM).
    pub ca_file: Option<PathBuf>,
    /// The client certificate presented to etcd (PEM); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// The private key of the client certificate (PEM).
    pub key_file: Option<PathBuf>,
    /// How long connecting may take before the endpoint counts as unreachable.
    pub connect_timeout: Duration,
    /// How long one request may take.
    pub request_timeout: Duration,
}

impl Default for EtcdConfig {
    fn default() -> Self {
        EtcdConfig {
            endpoints: vec![DEFAULT_ENDPOINTS.to_owned()],
            ca_file: None,
            cert_file: None,
            key_file: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A connected etcd client. Cloning shares the connections.
///
/// Each endpoint has its own connection; requests go to the current one and fail over to the
/// next when an endpoint refuses connections, and are retried once when a connection turns
/// out to be stale (etcd restarted): in both cases the request never reached etcd.
#[derive(Clone)]
pub struct EtcdDatastore {
    clients: Arc<Vec<Client>>,
    current: Arc<AtomicUsize>,
    endpoints: String,
}

impl std::fmt::Debug for EtcdDatastore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdDatastore")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

impl EtcdDatastore {
    /// Connects and checks that etcd answers.
    pub async fn connect(config: EtcdConfig) -> Result<EtcdDatastore, DatastoreError> {
        if config.endpoints.is_empty() {
            return Err(DatastoreError::Config(
                "no etcd endpoints given (--etcd-endpoints / ETCD_ENDPOINTS)".to_owned(),
            ));
        }
        let endpoints = config.endpoints.join(",");
        let options = connect_options(&config)?;
        let unreachable = |reason: String| DatastoreError::Unreachable {
            endpoints: endpoints.clone(),
            reason,
        };
        let mut clients = Vec::new();
        for endpoint in &config.endpoints {
            let connecting = Client::connect([endpoint], Some(options.clone()));
            let client = tokio::time::timeout(config.connect_timeout, connecting)
                .await
                .map_err(|_| {
                    unreachable(format!(
                        "{endpoint}: no answer within {:?}",
                        config.connect_timeout
                    ))
                })?
                .map_err(|e| unreachable(format!("{endpoint}: {}", cause(&e))))?;
            clients.push(client);
        }
        // Each client starts at a random endpoint, as etcd's own clients balance: a thousand
        // agents started together spread their snapshots over the members.
        let first = crate::backoff::random_below(clients.len());
        let store = EtcdDatastore {
            clients: Arc::new(clients),
            current: Arc::new(AtomicUsize::new(first)),
            endpoints: endpoints.clone(),
        };
        let probe = store.call("get", "/calico/v1/Ready", |mut client| async move {
            client.get("/calico/v1/Ready", None).await
        });
        let answer = tokio::time::timeout(config.connect_timeout, probe)
            .await
            .map_err(|_| unreachable(format!("no answer within {:?}", config.connect_timeout)))?;
        answer.map_err(|error| without_client_certificate_hint(&config, error))?;
        Ok(store)
    }

    /// Runs one request, failing over between endpoints on errors that prove the request was
    /// not delivered.
    async fn call<T, F, Fut>(
        &self,
        operation: &'static str,
        key: &str,
        request: F,
    ) -> Result<T, DatastoreError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let attempts = 2 * self.clients.len() + 1;
        let mut attempt = 1;
        let mut election = Duration::ZERO;
        loop {
            let index = self.current.load(Ordering::Relaxed) % self.clients.len();
            let error = match request(self.clients[index].clone()).await {
                Ok(value) => return Ok(value),
                Err(error) => error,
            };
            // A cluster electing a leader answers "leader changed" / "no leader" for about an
            // election timeout: wait it out (a transaction is not retried: it may have been
            // applied, and its caller's compare-and-swap loop re-reads instead).
            if electing(&error) && operation != TRANSACTION && election < ELECTION_WAIT {
                tracing::debug!(%error, "etcd is electing a leader; retrying");
                tokio::time::sleep(ELECTION_STEP).await;
                election += ELECTION_STEP;
                continue;
            }
            match undelivered(&error) {
                Some(kind) if attempt < attempts => {
                    if kind == std::io::ErrorKind::ConnectionRefused {
                        let next = (index + 1) % self.clients.len();
                        let _ = self.current.compare_exchange(
                            index,
                            next,
                            Ordering::Relaxed,
                            Ordering::Relaxed,
                        );
                    }
                    tracing::debug!(%error, "etcd request not delivered; retrying");
                    attempt += 1;
                }
                _ => return Err(classify(&self.endpoints, operation, key, error)),
            }
        }
    }

    /// The connection to use for a long-running watch.
    fn client(&self) -> Client {
        self.clients[self.current.load(Ordering::Relaxed) % self.clients.len()].clone()
    }

    /// Compacts etcd's history up to `revision` (operators do this to bound etcd's size;
    /// watchers behind it resync).
    pub async fn compact(&self, revision: i64) -> Result<(), DatastoreError> {
        self.call("compact", "", |mut client| async move {
            client.compact(revision, None).await
        })
        .await?;
        Ok(())
    }

    /// The current store revision.
    pub async fn revision(&self) -> Result<i64, DatastoreError> {
        let response = self
            .call("get", "/", |mut client| async move {
                let options = GetOptions::new().with_count_only();
                client.get("/", Some(options)).await
            })
            .await?;
        Ok(response.header().map_or(0, |h| h.revision()))
    }
}

/// The operation name of a transaction, which is never retried on an election.
const TRANSACTION: &str = "transaction on";
/// How long a request waits for a cluster to elect a leader (about two election timeouts of
/// etcd's defaults), and the step between tries.
const ELECTION_WAIT: Duration = Duration::from_secs(2);
const ELECTION_STEP: Duration = Duration::from_millis(100);

/// Whether etcd refused the request because its cluster has no leader right now.
fn electing(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(status)
        if status.code() == tonic::Code::Unavailable
            && (status.message().contains("leader changed") || status.message().contains("no leader")))
}

/// The kind of I/O error behind `error` when it proves the request never reached etcd: the
/// connection was refused, or the (stale) connection was already closed when sending.
fn undelivered(error: &etcd_client::Error) -> Option<std::io::ErrorKind> {
    use std::io::ErrorKind;
    io_cause(error).filter(|kind| {
        matches!(
            kind,
            ErrorKind::ConnectionRefused | ErrorKind::BrokenPipe | ErrorKind::NotConnected
        )
    })
}

/// What went wrong in the fewest words that still say it: the last two links of the chain of
/// errors behind `error` (e.g. `tcp connect error: Connection refused (os error 111)`), or
/// etcd's own message when there is no chain (e.g. `etcdserver: leader changed`).
fn cause(error: &etcd_client::Error) -> String {
    let mut links: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = match error {
        etcd_client::Error::GRpcStatus(status) => {
            links.push(status.message().to_owned());
            std::error::Error::source(status)
        }
        etcd_client::Error::TransportError(transport) => Some(transport),
        etcd_client::Error::IoError(io) => Some(io),
        _ => None,
    };
    while let Some(cause) = source {
        links.push(cause.to_string());
        source = cause.source();
    }
    links.retain(|link| !link.is_empty());
    // A link often repeats the one below it ("error trying to connect: tcp connect error").
    links.dedup_by(|inner, outer| outer.contains(inner.as_str()));
    match links.len() {
        0 => error.to_string(),
        n => links[n.saturating_sub(2)..].join(": "),
    }
}

/// The kind of the I/O error somewhere behind `error`, if any.
fn io_cause(error: &etcd_client::Error) -> Option<std::io::ErrorKind> {
    // etcd_client::Error has no `source()`: start from the error it wraps.
    let mut source: Option<&(dyn std::error::Error + 'static)> = match error {
        etcd_client::Error::GRpcStatus(status) => Some(status),
        etcd_client::Error::TransportError(transport) => Some(transport),
        etcd_client::Error::IoError(io) => Some(io),
        _ => None,
    };
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = cause.source();
    }
    None
}

/// A TLS connection that etcd closed at once usually means etcd wants a client certificate: when
/// none was given, the error says so (etcd may close it with an alert or without a word).
fn without_client_certificate_hint(config: &EtcdConfig, error: DatastoreError) -> DatastoreError {
    let tls = config.endpoints.iter().any(|e| e.starts_with("https://"));
    if !tls || config.cert_file.is_some() {
        return error;
    }
    let hint = "(no client certificate was given: if etcd requires one, give --etcd-cert-file \
                and --etcd-key-file)";
    match error {
        DatastoreError::Unreachable { endpoints, reason } => DatastoreError::Unreachable {
            endpoints,
            reason: format!("{reason} {hint}"),
        },
        DatastoreError::Etcd {
            operation,
            key,
            reason,
        } => DatastoreError::Etcd {
            operation,
            key,
            reason: format!("{reason} {hint}"),
        },
        other => other,
    }
}

/// Connection-level failures (a transport error, an unavailable or cancelled call, a reset or
/// refused connection anywhere behind it) become `Unreachable`; the rest name the operation and key.
fn classify(
    endpoints: &str,
    operation: &'static str,
    key: &str,
    error: etcd_client::Error,
) -> DatastoreError {
    let unreachable = match &error {
        etcd_client::Error::TransportError(_) => true,
        // `Cancelled` is the connection closing under the request (we never cancel one).
        etcd_client::Error::GRpcStatus(status) => matches!(
            status.code(),
            tonic::Code::Unavailable | tonic::Code::DeadlineExceeded | tonic::Code::Cancelled
        ),
        _ => false,
    } || io_cause(&error).is_some_and(|kind| {
        use std::io::ErrorKind;
        // The connection failed (not, say, a refused certificate: that has its own message).
        matches!(
            kind,
            ErrorKind::ConnectionRefused
                | ErrorKind::ConnectionReset
                | ErrorKind::ConnectionAborted
                | ErrorKind::BrokenPipe
                | ErrorKind::NotConnected
                | ErrorKind::TimedOut
                | ErrorKind::UnexpectedEof
        )
    });
    if unreachable {
        return DatastoreError::Unreachable {
            endpoints: endpoints.to_owned(),
            reason: cause(&error),
        };
    }
    DatastoreError::Etcd {
        operation,
        key: key.to_owned(),
        reason: cause(&error),
    }
}

fn connect_options(config: &EtcdConfig) -> Result<ConnectOptions, DatastoreError> {
    let options = ConnectOptions::new()
        .with_connect_timeout(config.connect_timeout)
        .with_timeout(config.request_timeout)
        .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
    let uses_tls = config.endpoints.iter().any(|e| e.starts_with("https://"));
    let has_tls_files =
        config.ca_file.is_some() || config.cert_file.is_some() || config.key_file.is_some();
    if !uses_tls {
        if has_tls_files {
            return Err(DatastoreError::Config(
                "TLS files given but the endpoints are http://; use https:// endpoints".to_owned(),
            ));
        }
        return Ok(options);
    }
    Ok(options.with_tls(tls_options(config)?))
}

fn tls_options(config: &EtcdConfig) -> Result<TlsOptions, DatastoreError> {
    let mut tls = TlsOptions::new();
    if let Some(ca) = &config.ca_file {
        tls = tls.ca_certificate(Certificate::from_pem(read("CA certificate", ca)?));
    }
    match (&config.cert_file, &config.key_file) {
        (Some(cert), Some(key)) => {
            let identity =
                Identity::from_pem(read("client certificate", cert)?, read("client key", key)?);
            tls = tls.identity(identity);
        }
        (None, None) => {}
        _ => {
            return Err(DatastoreError::Config(
                "a client certificate needs its key and a key its certificate: give both \
                 --etcd-cert-file and --etcd-key-file"
                    .to_owned(),
            ));
        }
    }
    Ok(tls)
}

fn read(kind: &'static str, file: &Path) -> Result<Vec<u8>, DatastoreError> {
    std::fs::read(file).map_err(|e| DatastoreError::TlsFile {
        kind,
        file: file.to_owned(),
        reason: e.to_string(),
    })
}

fn to_pair(kv: &etcd_client::KeyValue) -> Result<KvPair, DatastoreError> {
    let key = String::from_utf8_lossy(kv.key()).into_owned();
    let value = kv
        .value_str()
        .map_err(|_| DatastoreError::NotText { key: key.clone() })?;
    Ok(KvPair {
        value: value.to_owned(),
        mod_revision: kv.mod_revision(),
        key,
    })
}

fn etcd_compare(compare: &Compare) -> EtcdCompare {
    match compare.expect {
        Expect::Absent => EtcdCompare::version(compare.key.as_str(), CompareOp::Equal, 0),
        Expect::ModRevision(revision) => {
            EtcdCompare::mod_revision(compare.key.as_str(), CompareOp::Equal, revision)
        }
    }
}

fn etcd_op(op: &TxnOp) -> EtcdTxnOp {
    match op {
        TxnOp::Put { key, value } => EtcdTxnOp::put(key.as_str(), value.as_str(), None),
        TxnOp::Delete { key } => EtcdTxnOp::delete(key.as_str(), None),
    }
}

#[async_trait]
impl Datastore for EtcdDatastore {
    async fn get(&self, key: &str) -> Result<Option<KvPair>, DatastoreError> {
        let response = self
            .call("get", key, |mut client| async move {
                client.get(key, None).await
            })
            .await?;
        response.kvs().first().map(to_pair).transpose()
    }

    async fn list(&self, prefix: &str) -> Result<Vec<KvPair>, DatastoreError> {
        Ok(self.snapshot(prefix).await?.0)
    }

    async fn put(&self, key: &str, value: &str) -> Result<i64, DatastoreError> {
        let response = self
            .call("put", key, |mut client| async move {
                client.put(key, value, None).await
            })
            .await?;
        Ok(response.header().map_or(0, |h| h.revision()))
    }

    async fn put_with_ttl(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<i64, DatastoreError> {
        let seconds = i64::try_from(ttl.as_secs().max(1)).unwrap_or(i64::MAX);
        let response = self
            .call("put", key, |mut client| async move {
                let lease = client.lease_grant(seconds, None).await?;
                let options = PutOptions::new().with_lease(lease.id());
                client.put(key, value, Some(options)).await
            })
            .await?;
        Ok(response.header().map_or(0, |h| h.revision()))
    }

    async fn delete(&self, key: &str) -> Result<bool, DatastoreError> {
        let response = self
            .call("delete", key, |mut client| async move {
                client.delete(key, None).await
            })
            .await?;
        Ok(response.deleted() > 0)
    }

    async fn delete_prefix(&self, prefix: &str) -> Result<u64, DatastoreError> {
        let response = self
            .call("delete", prefix, |mut client| async move {
                let options = DeleteOptions::new().with_prefix();
                client.delete(prefix, Some(options)).await
            })
            .await?;
        Ok(u64::try_from(response.deleted()).unwrap_or(0))
    }

    async fn transaction(
        &self,
        compares: &[Compare],
        ops: &[TxnOp],
    ) -> Result<bool, DatastoreError> {
        let txn = Txn::new()
            .when(compares.iter().map(etcd_compare).collect::<Vec<_>>())
            .and_then(ops.iter().map(etcd_op).collect::<Vec<_>>());
        let first = compares
            .first()
            .map(|c| c.key.as_str())
            .or_else(|| ops.first().map(op_key))
            .unwrap_or("");
        let response = self
            .call(TRANSACTION, first, |mut client| {
                let txn = txn.clone();
                async move { client.txn(txn).await }
            })
            .await?;
        Ok(response.succeeded())
    }

    async fn watch(&self, prefix: &str) -> Result<Watch, DatastoreError> {
        Ok(watch::spawn(self.clone(), prefix, Start::Snapshot))
    }

    async fn resume_watch(
        &self,
        prefix: &str,
        known: Vec<KvPair>,
        revision: i64,
    ) -> Result<Watch, DatastoreError> {
        Ok(watch::spawn(
            self.clone(),
            prefix,
            Start::Resume { known, revision },
        ))
    }
}

fn op_key(op: &TxnOp) -> &str {
    match op {
        TxnOp::Put { key, .. } | TxnOp::Delete { key } => key,
    }
}

#[async_trait]
impl Source for EtcdDatastore {
    /// Every key under `prefix` at one revision, read in pages of [`PAGE`] keys pinned to the
    /// first page's revision: one response for everything would pass gRPC's 4 MiB message limit
    /// at about 13,000 endpoints, and a pinned revision keeps the pages one consistent view.
    async fn snapshot(&self, prefix: &str) -> Result<(Vec<KvPair>, i64), DatastoreError> {
        let end = prefix_end(prefix);
        let mut pairs = Vec::new();
        let mut from = prefix.as_bytes().to_vec();
        let mut revision = 0;
        loop {
            let start = from.clone();
            let end = end.clone();
            let response = self
                .call("list", prefix, |client| {
                    let mut options = GetOptions::new().with_range(end.clone()).with_limit(PAGE);
                    if revision > 0 {
                        options = options.with_revision(revision);
                    }
                    let start = start.clone();
                    async move {
                        let mut kv = client.kv_client().max_decoding_message_size(MAX_MESSAGE);
                        kv.get(start, Some(options)).await
                    }
                })
                .await?;
            if revision == 0 {
                revision = response.header().map_or(0, |h| h.revision());
            }
            for kv in response.kvs() {
                pairs.push(to_pair(kv)?);
            }
            match response.kvs().last() {
                Some(last) if response.more() => {
                    // The next page starts just after the last key.
                    from = last.key().to_vec();
                    from.push(0);
                }
                _ => return Ok((pairs, revision)),
            }
        }
    }

    async fn changes(&self, prefix: &str, from: i64) -> Result<ChangeStream, Break> {
        let options = WatchOptions::new().with_prefix().with_start_revision(from);
        let stream = self
            .client()
            .watch_client()
            .max_decoding_message_size(MAX_MESSAGE)
            .watch(prefix, Some(options))
            .await
            .map_err(|e| Break::Lost(e.to_string()))?;
        Ok(stream::unfold(Some(stream), next_batch).boxed())
    }
}

/// Keys per page of a snapshot: ~300 KB at Calico's typical value sizes.
const PAGE: i64 = 1_000;

/// The largest response read (a page of large values, a watch batch of a big transaction):
/// gRPC's default of 4 MiB is too small for either, etcd allows 1.5 MiB per value.
const MAX_MESSAGE: usize = 256 << 20;

/// The first key after every key starting with `prefix` (etcd's range end for a prefix).
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte 0xff (or no prefix): to the end of the keyspace.
    vec![0]
}

/// Reads one watch response and turns it into a batch of changes, or the reason the watch
/// broke (after which the stream ends).
async fn next_batch(
    stream: Option<etcd_client::WatchStream>,
) -> Option<(
    Result<Vec<WatchEvent>, Break>,
    Option<etcd_client::WatchStream>,
)> {
    let mut stream = stream?;
    let item = match stream.message().await {
        Ok(Some(response)) if response.compact_revision() > 0 => Err(Break::Compacted),
        Ok(Some(response)) if response.canceled() => Err(Break::Lost(format!(
            "etcd cancelled the watch: {}",
            response.cancel_reason()
        ))),
        Ok(Some(response)) => Ok(response.events().iter().filter_map(to_event).collect()),
        Ok(None) => Err(Break::Lost("etcd closed the watch".to_owned())),
        Err(error) => Err(Break::Lost(error.to_string())),
    };
    let keep = item.is_ok().then_some(stream);
    Some((item, keep))
}

fn to_event(event: &etcd_client::Event) -> Option<WatchEvent> {
    let kv = event.kv()?;
    match event.event_type() {
        EventType::Put => match to_pair(kv) {
            Ok(pair) => Some(WatchEvent::Put(pair)),
            Err(error) => {
                tracing::warn!(%error, "ignoring a change that is not text");
                None
            }
        },
        EventType::Delete => Some(WatchEvent::Delete {
            key: String::from_utf8_lossy(kv.key()).into_owned(),
            mod_revision: kv.mod_revision(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_just_after_its_last_byte() {
        assert_eq!(prefix_end("/calico/"), b"/calico0");
        assert_eq!(prefix_end("a\u{7f}"), b"a\x80");
        assert_eq!(prefix_end(""), [0]);
    }

    #[test]
    fn an_election_is_told_apart_from_other_refusals() {
        let status =
            |code, message: &str| etcd_client::Error::GRpcStatus(tonic::Status::new(code, message));
        assert!(electing(&status(
            tonic::Code::Unavailable,
            "etcdserver: leader changed"
        )));
        assert!(electing(&status(
            tonic::Code::Unavailable,
            "etcdserver: no leader"
        )));
        assert!(!electing(&status(
            tonic::Code::Unavailable,
            "transport is closing"
        )));
        assert!(!electing(&status(
            tonic::Code::InvalidArgument,
            "etcdserver: leader changed"
        )));
    }

    #[test]
    fn a_connection_closed_under_a_request_names_the_endpoints() {
        let closed = etcd_client::Error::GRpcStatus(tonic::Status::new(
            tonic::Code::Cancelled,
            "operation was canceled",
        ));
        let error = classify("http://a:2379,http://b:2379", "get", "/k", closed);
        assert!(
            matches!(&error, DatastoreError::Unreachable { endpoints, .. } if endpoints.contains("b:2379")),
            "{error}"
        );
    }
}
