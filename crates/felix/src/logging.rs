//! Felix's log: to the screen (standard output) at `LogSeverityScreen`, and to `LogFilePath` at
//! `LogSeverityFile`. Logging starts before the configuration is known (it may come from etcd),
//! at INFO on the screen only; [`Logging::configure`] then applies the configuration. The
//! subscriber [`Logging::new`] builds is installed by `calico-daemon` (`Daemon::subscriber`).
//! `FELIX_LOG` (a `tracing` filter such as `calico_felix=debug`) overrides the screen level.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use tracing::Dispatch;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::{EnvFilter, Layer, reload};

use crate::config::Config;

/// The log file, once it is open.
#[derive(Debug, Clone, Default)]
struct FileSlot(Arc<Mutex<Option<File>>>);

/// Writes to the file if one is open; otherwise the line is dropped.
#[derive(Debug)]
struct SlotWriter(Arc<Mutex<Option<File>>>);

impl Write for SlotWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.0.lock().expect("log file lock").as_mut() {
            Some(file) => file.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.0.lock().expect("log file lock").as_mut() {
            Some(file) => file.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for FileSlot {
    type Writer = SlotWriter;

    fn make_writer(&'a self) -> SlotWriter {
        SlotWriter(self.0.clone())
    }
}

/// Sets a layer's level.
type SetLevel = Box<dyn Fn(LevelFilter) -> Result<(), reload::Error> + Send + Sync>;

/// Adjusts the log once the configuration is loaded.
pub struct Logging {
    /// `None` when `FELIX_LOG` decides the screen's filter.
    screen: Option<SetLevel>,
    file_level: SetLevel,
    file: FileSlot,
}

impl std::fmt::Debug for Logging {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Logging")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl Logging {
    /// The log's handles and the subscriber to install: screen at INFO (or `FELIX_LOG`), no
    /// file yet.
    pub fn new() -> (Logging, Dispatch) {
        let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
        let file = FileSlot::default();
        let (file_filter, file_level) = reload::Layer::new(LevelFilter::OFF);
        let file_layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(file.clone())
            .with_filter(file_filter);
        let registry = tracing_subscriber::registry();
        match EnvFilter::try_from_env("FELIX_LOG") {
            Ok(env) => {
                let screen = tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_filter(env);
                let subscriber = Dispatch::new(registry.with(file_layer).with(screen));
                let file_level: SetLevel = Box::new(move |level| file_level.reload(level));
                let logging = Logging {
                    screen: None,
                    file_level,
                    file,
                };
                (logging, subscriber)
            }
            Err(_) => {
                let (filter, handle) = reload::Layer::new(LevelFilter::INFO);
                let screen = tracing_subscriber::fmt::layer()
                    .with_ansi(ansi)
                    .with_filter(filter);
                let subscriber = Dispatch::new(registry.with(file_layer).with(screen));
                let file_level: SetLevel = Box::new(move |level| file_level.reload(level));
                let screen: SetLevel = Box::new(move |level| handle.reload(level));
                let logging = Logging {
                    screen: Some(screen),
                    file_level,
                    file,
                };
                (logging, subscriber)
            }
        }
    }

    /// Applies `LogSeverityScreen`, `LogFilePath` and `LogSeverityFile`.
    pub fn configure(&self, config: &Config) -> anyhow::Result<()> {
        if let Some(screen) = &self.screen {
            screen(LevelFilter::from_level(config.log_severity_screen))?;
        }
        if let Some(path) = &config.log_file_path {
            let file = open(path).map_err(|e| {
                anyhow::anyhow!(
                    "cannot open LogFilePath {}: {e}; set it to none to log to the screen only",
                    path.display()
                )
            })?;
            *self.file.0.lock().expect("log file lock") = Some(file);
            (self.file_level)(LevelFilter::from_level(config.log_severity_file))?;
        }
        Ok(())
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    OpenOptions::new().create(true).append(true).open(path)
}
