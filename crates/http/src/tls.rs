//! What https trusts and presents: a CA file (or, when asked, the system's bundle) and an
//! optional client certificate, read from PEM files. Every error names the file and the reason.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsConnector;

use crate::error::HttpError;

/// The CA bundle of Debian's `ca-certificates`.
pub const SYSTEM_CA_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// TLS settings, as flags and environment variables name them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tls {
    /// The CA that signed the servers' certificates.
    pub ca_file: Option<PathBuf>,
    /// A client certificate to present, with its key (both or neither).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Without `ca_file`: trust [`SYSTEM_CA_BUNDLE`] (`true`), or speak plain http only
    /// (`false`: an https URL is an error asking for the CA file).
    pub system_bundle: bool,
}

/// A connector and what it trusts, for messages.
pub(crate) struct Connector {
    pub(crate) tls: TlsConnector,
    pub(crate) trusted: String,
}

impl Tls {
    /// The connector these settings describe; `None` for plain http only.
    pub(crate) fn connector(&self) -> Result<Option<Connector>, HttpError> {
        let settings = |reason: String| HttpError::Settings { reason };
        let (ca_file, given) = match (&self.ca_file, self.system_bundle) {
            (Some(path), _) => (path.clone(), true),
            (None, true) => (PathBuf::from(SYSTEM_CA_BUNDLE), false),
            (None, false) => {
                if self.cert_file.is_some() || self.key_file.is_some() {
                    let reason = "a client certificate needs the CA file too".to_owned();
                    return Err(settings(reason));
                }
                return Ok(None);
            }
        };
        let mut roots = rustls::RootCertStore::empty();
        match certificates(&ca_file) {
            Ok(certs) => {
                for cert in certs {
                    roots.add(cert).map_err(|e| {
                        settings(format!("CA certificate {}: {e}", ca_file.display()))
                    })?;
                }
            }
            Err(reason) if given => return Err(settings(reason)),
            // No system bundle: https then fails naming what it checked against.
            Err(_) => {}
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| settings(e.to_string()))?
            .with_root_certificates(roots);
        let config = match (&self.cert_file, &self.key_file) {
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(
                    certificates(cert).map_err(settings)?,
                    private_key(key).map_err(settings)?,
                )
                .map_err(|e| settings(format!("client certificate {}: {e}", cert.display())))?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(settings(
                    "give both the client certificate and its key".to_owned(),
                ));
            }
        };
        let trusted = match given {
            true => format!("the CA file {}", ca_file.display()),
            false => format!("the system's CA bundle {}", ca_file.display()),
        };
        Ok(Some(Connector {
            tls: TlsConnector::from(Arc::new(config)),
            trusted,
        }))
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(tls: Tls) -> String {
        match tls.connector() {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{tls:?} was accepted"),
        }
    }

    #[test]
    fn bad_files_are_named() {
        let missing = Tls {
            ca_file: Some("/nonexistent/ca.pem".into()),
            ..Tls::default()
        };
        assert!(error(missing).contains("/nonexistent/ca.pem"));
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let empty = Tls {
            ca_file: Some(empty),
            ..Tls::default()
        };
        assert!(error(empty).contains("no PEM certificate"));
        let lone = Tls {
            cert_file: Some("/c.pem".into()),
            ..Tls::default()
        };
        assert!(error(lone).contains("needs the CA file"));
    }

    #[test]
    fn without_a_ca_file_it_is_plain_or_the_system_bundle() {
        assert!(Tls::default().connector().unwrap().is_none());
        let system = Tls {
            system_bundle: true,
            ..Tls::default()
        };
        let connector = system.connector().unwrap().expect("a connector");
        assert!(
            connector.trusted.contains(SYSTEM_CA_BUNDLE),
            "{}",
            connector.trusted
        );
    }
}
