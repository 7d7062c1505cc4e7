//! The client against small servers on loopback and a unix socket made by each test: answers
//! read whole with their headers, kept connections reused, errors that name the server, and
//! https checked against the CA it is given.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use calico_http::{Client, Endpoint, HttpError, Request, Tls, send_on, unix};
use calico_testkit::Pki;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, UnixListener};

/// Answers every request of a connection with 200 and `path=<path> n=<request number>`, kept
/// alive; counts connections.
async fn serve<S: AsyncRead + AsyncWrite + Unpin>(stream: S) {
    let mut reader = BufReader::new(stream);
    let mut n = 0;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).await.unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_owned();
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).await.unwrap();
        n += 1;
        let text = format!("path={path} n={n} body={}", String::from_utf8_lossy(&body));
        let answer = format!(
            "HTTP/1.1 200 OK\r\nX-Token: secret\r\nContent-Length: {}\r\n\r\n{text}",
            text.len()
        );
        reader.get_mut().write_all(answer.as_bytes()).await.unwrap();
    }
}

/// A server on a free loopback port; the number of connections it accepted.
async fn tcp_server() -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(serve(stream));
        }
    });
    (base, connections)
}

#[tokio::test]
async fn answers_are_read_whole_and_connections_kept() {
    let (base, connections) = tcp_server().await;
    let client = Client::plain();
    let first = client.get(&base, "/one").await.unwrap();
    assert_eq!(first.status, 200);
    assert_eq!(first.body, "path=/one n=1 body=");
    assert_eq!(first.header("x-token"), Some("secret"));
    assert!(
        !format!("{first:?}").contains("secret"),
        "values stay out of Debug"
    );
    let second = client.get(&base, "/two").await.unwrap();
    assert_eq!(second.body, "path=/two n=2 body=", "on the kept connection");
    assert_eq!(connections.load(Ordering::SeqCst), 1);
    // A POST is never sent twice, so never on a kept connection the server may have closed.
    let endpoint = Endpoint::parse(&format!("{base}/v2.0")).unwrap();
    let posted = client
        .send(&endpoint, Request::new("POST", "/ports").json("{}".into()))
        .await
        .unwrap();
    assert_eq!(posted.body, "path=/v2.0/ports n=1 body={}");
    assert_eq!(connections.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn unix_sockets_and_given_streams_carry_requests_too() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("docker.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    let answer = unix::send(&socket, Request::get("/networks/abc"))
        .await
        .unwrap();
    assert_eq!(answer.body, "path=/networks/abc n=1 body=");

    let (ours, theirs) = tokio::io::duplex(4096);
    tokio::spawn(serve(theirs));
    let answer = send_on(ours, "localhost", Request::get("/metrics"))
        .await
        .unwrap();
    assert_eq!(answer.body, "path=/metrics n=1 body=");

    let gone = dir.path().join("gone.sock");
    let error = unix::send(&gone, Request::get("/")).await.unwrap_err();
    assert!(matches!(error, HttpError::Connect { .. }), "{error}");
    assert!(error.to_string().contains("gone.sock"), "{error}");
}

#[tokio::test]
async fn no_answer_and_no_server_are_errors_naming_the_server() {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let (stream, _) = silent.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(stream);
    });
    let client = Client::plain().with_timeout(Duration::from_millis(200));
    let error = client.get(&base, "/").await.unwrap_err();
    assert!(matches!(error, HttpError::Timeout { .. }), "{error}");
    assert!(error.to_string().contains(&base), "{error}");
    held.abort();

    let refusing = calico_testkit::refusing_port();
    let error = client.get(&refusing.url(), "/").await.unwrap_err();
    assert!(matches!(error, HttpError::Connect { .. }), "{error}");
    let error = Client::plain()
        .get("https://127.0.0.1:1", "/")
        .await
        .unwrap_err();
    assert!(matches!(error, HttpError::NoTls { .. }), "{error}");
    let error = Client::plain().get("127.0.0.1:1", "/").await.unwrap_err();
    assert!(
        error.to_string().contains("expected http://HOST:PORT"),
        "{error}"
    );
}

/// A TLS server with the PKI's server certificate.
async fn tls_server(pki: &Pki) -> String {
    let files = pki.server_tls();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert_file)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(&files.key_file).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                if let Ok(stream) = acceptor.accept(stream).await {
                    serve(stream).await;
                }
            });
        }
    });
    base
}

#[tokio::test]
async fn https_trusts_the_ca_it_is_given_and_nothing_else() {
    let pki = Pki::generate();
    let base = tls_server(&pki).await;
    let trusting = Client::new(&Tls {
        ca_file: Some(pki.ca_cert()),
        ..Tls::default()
    })
    .unwrap();
    let answer = trusting.get(&base, "/secure").await.unwrap();
    assert_eq!(answer.body, "path=/secure n=1 body=");

    let system = Client::new(&Tls {
        system_bundle: true,
        ..Tls::default()
    })
    .unwrap();
    let error = system.get(&base, "/secure").await.unwrap_err();
    assert!(error.is_certificate(), "{error}");
    assert!(error.to_string().contains("system's CA bundle"), "{error}");
}
