//! The scaffold as a daemon's `main()` uses it: the work's outcome is the exit code, a log
//! filter that does not parse stops the daemon before its work, SIGTERM ends the wait, and a
//! helper task goes with its owner.

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use calico_daemon::{Daemon, Shutdown, Task};

#[test]
fn the_works_outcome_is_the_exit_code() {
    let ok = Daemon::new("t").run(async { Ok::<(), String>(()) });
    assert_eq!(ok, ExitCode::SUCCESS);
    let failed = Daemon::new("t")
        .worker_threads(1)
        .run(async { Err::<(), _>("etcd is gone") });
    assert_eq!(failed, ExitCode::FAILURE);
}

#[test]
fn a_log_filter_that_does_not_parse_stops_the_daemon_before_its_work() {
    let ran = Arc::new(AtomicBool::new(false));
    let work = {
        let ran = ran.clone();
        async move {
            ran.store(true, Ordering::SeqCst);
            Ok::<(), String>(())
        }
    };
    let code = Daemon::new("t").log("--log", "info,=[").run(work);
    assert_eq!(code, ExitCode::FAILURE);
    assert!(!ran.load(Ordering::SeqCst), "the work never started");
    let fine = Daemon::new("t").log("--log", "warn,calico_daemon=debug");
    assert_eq!(fine.run(async { Ok::<(), String>(()) }), ExitCode::SUCCESS);
}

#[tokio::test]
async fn sigterm_ends_the_wait_and_a_task_goes_with_its_owner() {
    let shutdown = Shutdown::listen().expect("signal handlers");
    let pid = std::process::id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill runs");
    assert!(sent.success());
    tokio::time::timeout(Duration::from_secs(10), shutdown.wait())
        .await
        .expect("SIGTERM ends the wait");

    let (alive, mut watch) = tokio::sync::oneshot::channel::<()>();
    let task = Task::spawn(async move {
        let _alive = alive;
        std::future::pending::<()>().await;
    });
    drop(task);
    let closed = tokio::time::timeout(Duration::from_secs(10), &mut watch).await;
    assert!(
        matches!(closed, Ok(Err(_))),
        "the task was aborted: {closed:?}"
    );
}
