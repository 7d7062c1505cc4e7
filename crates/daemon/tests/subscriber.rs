//! A daemon that brings its own subscriber (Felix: the screen and a file, levels set later)
//! logs through it: the work's lines and the error that ends it reach the caller's writer.
//! Its own test binary: the global subscriber is the process's, installed once.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use calico_daemon::Daemon;
use tracing_subscriber::fmt::MakeWriter;

/// Everything written, kept.
#[derive(Debug, Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
}

#[test]
fn the_callers_subscriber_is_the_log() {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    let work = async {
        tracing::info!("starting the work");
        Err::<(), _>("etcd is gone")
    };
    // A filter given first is replaced by the subscriber given after it.
    let code = Daemon::new("t")
        .log("--log", "off")
        .subscriber(subscriber)
        .run(work);
    assert_eq!(code, ExitCode::FAILURE);
    let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(log.contains("INFO"), "{log}");
    assert!(log.contains("starting the work"), "{log}");
    assert!(
        log.contains("ERROR") && log.contains("etcd is gone"),
        "{log}"
    );
}
