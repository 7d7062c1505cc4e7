//! The one HTTP client of calicoctl: a GET on a fresh HTTP/1.1 connection (hyper), over plain
//! TCP or TLS (rustls with ring; the CA given, optionally a client certificate), for etcd's v2
//! API and Felix's health endpoints.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// TLS files for https endpoints, as the `--etcd-*-file` flags name them.
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    pub ca_file: Option<PathBuf>,
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
}

/// A client for http and (with a CA) https URLs.
#[derive(Clone, Default)]
pub struct Client {
    tls: Option<TlsConnector>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("https", &self.tls.is_some())
            .finish()
    }
}

impl Client {
    /// A client for plain http only.
    pub fn plain() -> Client {
        Client::default()
    }

    /// A client that also speaks https, trusting `ca_file` (needed for https), presenting the
    /// client certificate when both `cert_file` and `key_file` are given.
    pub fn new(files: &TlsFiles) -> Result<Client, String> {
        let Some(ca_file) = &files.ca_file else {
            if files.cert_file.is_some() || files.key_file.is_some() {
                return Err("a client certificate needs the CA file too".to_owned());
            }
            return Ok(Client::plain());
        };
        let mut roots = rustls::RootCertStore::empty();
        for cert in certificates(ca_file)? {
            roots
                .add(cert)
                .map_err(|e| format!("CA certificate {}: {e}", ca_file.display()))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let config = match (&files.cert_file, &files.key_file) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(certificates(cert)?, private_key(key)?)
                .map_err(|e| format!("client certificate {}: {e}", cert.display()))?,
            (None, None) => builder.with_no_client_auth(),
            _ => return Err("give both the client certificate and its key".to_owned()),
        };
        Ok(Client {
            tls: Some(TlsConnector::from(Arc::new(config))),
        })
    }

    /// GET `path` from `base` (`http://HOST:PORT` or `https://HOST:PORT`): the status and the
    /// body as text, or why not. The caller bounds the time it may take.
    pub async fn get(&self, base: &str, path: &str) -> Result<(u16, String), String> {
        let (https, authority) = match base.split_once("://") {
            Some(("http", rest)) => (false, rest.trim_end_matches('/')),
            Some(("https", rest)) => (true, rest.trim_end_matches('/')),
            _ => {
                return Err(format!(
                    "{base:?} is not http://HOST:PORT or https://HOST:PORT"
                ));
            }
        };
        if authority.is_empty() || authority.contains('/') {
            return Err(format!(
                "{base:?} is not http://HOST:PORT or https://HOST:PORT"
            ));
        }
        let stream = TcpStream::connect(authority)
            .await
            .map_err(|e| e.to_string())?;
        if !https {
            return exchange(stream, authority, path).await;
        }
        let Some(tls) = &self.tls else {
            return Err(format!("{base} is https: give the CA certificate file"));
        };
        let host = authority
            .rsplit_once(':')
            .map_or(authority, |(host, _)| host)
            .trim_start_matches('[')
            .trim_end_matches(']');
        let name = ServerName::try_from(host.to_owned()).map_err(|e| e.to_string())?;
        let stream = tls
            .connect(name, stream)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))?;
        exchange(stream, authority, path).await
    }
}

/// One request and its response on an open connection.
async fn exchange<S>(stream: S, authority: &str, path: &str) -> Result<(u16, String), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    // The connection task ends with the response; it is aborted once the body is read.
    let driver = tokio::spawn(connection);
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, authority)
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    drop(sender);
    driver.abort();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate", path.display()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: {e}", path.display()))
}
