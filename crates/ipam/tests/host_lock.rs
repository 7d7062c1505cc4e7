//! The per-host IPAM lock on a real file: holders take it in turn, a waiter gives up naming the
//! file, and a file that cannot be made is an error naming it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use calico_ipam::{HostLock, IpamError};

/// A directory of this test's own, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("calico-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_second_holder_waits_until_the_first_lets_go() {
    let scratch = Scratch::new("lock-turns");
    // The directory does not exist yet: taking the lock makes it.
    let lock = HostLock::new(scratch.0.join("run/ipam.lock"));
    let first = lock.acquire().await.expect("the first holder");
    assert!(lock.path().is_file(), "the lock file is made");
    assert!(
        lock.try_acquire().unwrap().is_none(),
        "a second open of the file must not get the lock while the first holds it"
    );
    let impatient = lock.clone().waiting(Duration::from_millis(200));
    let e = impatient.acquire().await.unwrap_err();
    assert!(matches!(e, IpamError::Lock { busy: true, .. }), "{e:?}");
    assert_eq!(
        e.to_string(),
        format!(
            "the per-host IPAM lock {}: another process has held it for over 0.2 s",
            lock.path().display()
        )
    );
    let waiting = tokio::spawn({
        let lock = lock.clone();
        async move { lock.acquire().await }
    });
    drop(first);
    let second = waiting
        .await
        .unwrap()
        .expect("the second holder, once the first let go");
    assert!(lock.try_acquire().unwrap().is_none());
    drop(second);
    assert!(lock.try_acquire().unwrap().is_some(), "free again");
}

/// Eight threads, each with its own runtime, take the lock 50 times each and check that nobody
/// else is inside while they are.
#[test]
fn holders_on_many_threads_are_never_inside_at_once() {
    let scratch = Scratch::new("lock-many");
    let lock = HostLock::new(scratch.0.join("ipam.lock"));
    let inside = Arc::new(AtomicUsize::new(0));
    let entered = Arc::new(AtomicUsize::new(0));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (lock, inside, entered) = (lock.clone(), inside.clone(), entered.clone());
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async {
                    for _ in 0..50 {
                        let _held = lock.acquire().await.expect("lock");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two holders");
                        entered.fetch_add(1, Ordering::SeqCst);
                        // Give another thread every chance to get in if the lock let it.
                        tokio::task::yield_now().await;
                        std::thread::yield_now();
                        assert_eq!(inside.fetch_sub(1, Ordering::SeqCst), 1, "two holders");
                    }
                });
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a holder thread");
    }
    assert_eq!(entered.load(Ordering::SeqCst), 400);
}

#[tokio::test]
async fn a_lock_file_that_cannot_be_made_is_an_error_naming_it() {
    let scratch = Scratch::new("lock-bad");
    std::fs::create_dir_all(&scratch.0).unwrap();
    // A regular file where the lock's directory should be.
    let blocker = scratch.0.join("not-a-dir");
    std::fs::write(&blocker, "").unwrap();
    let lock = HostLock::new(blocker.join("ipam.lock"));
    let e = lock.acquire().await.unwrap_err();
    assert!(matches!(e, IpamError::Lock { busy: false, .. }), "{e:?}");
    let e = e.to_string();
    let expected = format!(
        "the per-host IPAM lock {}: cannot create its directory {}: ",
        lock.path().display(),
        blocker.display()
    );
    assert!(e.starts_with(&expected), "{e}");
}
