//! The scaffold as a daemon's `main()` uses it: the work's outcome is the exit code, a log
//! filter that does not parse stops the daemon before its work, the blocking pool holds the
//! threads asked for, SIGTERM ends the wait, and a helper task goes with its owner.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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

/// The most blocking tasks (`spawn_blocking`) seen running at once, of two that each wait (a
/// bounded while) for the other to be running beside it.
fn blocking_overlap(daemon: Daemon) -> usize {
    let running = Arc::new((Mutex::new((0usize, 0usize)), Condvar::new()));
    let work = {
        let running = running.clone();
        async move {
            let tasks: Vec<_> = (0..2)
                .map(|_| {
                    let running = running.clone();
                    tokio::task::spawn_blocking(move || {
                        let (lock, changed) = &*running;
                        let mut counts = lock.lock().unwrap();
                        counts.0 += 1;
                        counts.1 = counts.1.max(counts.0);
                        changed.notify_all();
                        let (mut counts, _) = changed
                            .wait_timeout_while(counts, Duration::from_secs(2), |c| c.0 < 2)
                            .unwrap();
                        counts.1 = counts.1.max(counts.0);
                        counts.0 -= 1;
                    })
                })
                .collect();
            for task in tasks {
                task.await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        }
    };
    assert_eq!(daemon.run(work), ExitCode::SUCCESS);
    running.0.lock().unwrap().1
}

#[test]
fn the_blocking_pool_holds_the_threads_asked_for() {
    assert_eq!(blocking_overlap(Daemon::new("t").blocking_threads(1)), 1);
    // Without the cap they run side by side: the measure sees an overlap.
    assert_eq!(blocking_overlap(Daemon::new("t")), 2);
    // None is refused before the work runs.
    let ran = Arc::new(AtomicBool::new(false));
    let work = {
        let ran = ran.clone();
        async move {
            ran.store(true, Ordering::SeqCst);
            Ok::<(), String>(())
        }
    };
    assert_eq!(
        Daemon::new("t").blocking_threads(0).run(work),
        ExitCode::FAILURE
    );
    assert!(!ran.load(Ordering::SeqCst), "the work never started");
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
