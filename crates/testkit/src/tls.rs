//! A throwaway CA, server and client certificate made with the openssl CLI, for tests of
//! etcd over TLS.

use std::path::PathBuf;
use std::process::Command;

use crate::{ServerTls, require_tool};
use tempfile::TempDir;

/// The files of a throwaway public key infrastructure, removed on drop.
#[derive(Debug)]
pub struct Pki {
    dir: TempDir,
}

impl Pki {
    /// A CA, a server certificate for 127.0.0.1/localhost and a client certificate.
    pub fn generate() -> Pki {
        require_tool("openssl");
        let pki = Pki {
            dir: tempfile::tempdir().unwrap(),
        };
        pki.openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=test-ca",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ]);
        pki.issue("server", "subjectAltName=IP:127.0.0.1,DNS:localhost");
        pki.issue("client", "extendedKeyUsage=clientAuth");
        pki
    }

    /// A key and a certificate signed by the CA.
    fn issue(&self, name: &str, extension: &str) {
        let ext_file = self.dir.path().join(format!("{name}.ext"));
        std::fs::write(&ext_file, format!("{extension}\n")).unwrap();
        self.openssl(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &format!("{name}.pem"),
            "-extfile",
            &ext_file.display().to_string(),
        ]);
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl runs");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn server_tls(&self) -> ServerTls {
        ServerTls {
            cert_file: self.path("server.pem"),
            key_file: self.path("server.key"),
            client_ca_file: self.path("ca.pem"),
        }
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.path("ca.pem")
    }

    pub fn client_cert(&self) -> PathBuf {
        self.path("client.pem")
    }

    pub fn client_key(&self) -> PathBuf {
        self.path("client.key")
    }
}
