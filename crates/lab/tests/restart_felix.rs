//! `calico-lab restart-felix` starts the Felix binary `up --felix PATH` was given (the lab
//! remembers it in its state), not the one beside calico-lab, even without `$CALICO_FELIX`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use calico_testkit::eventually;
use common::{BIN, TestLab};

/// A copy of calico-felix under a name of its own, removed on drop.
struct Copy(PathBuf);

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.0.parent().expect("in a directory"));
    }
}

fn copy_of_felix() -> Copy {
    let felix = Path::new(BIN).with_file_name("calico-felix");
    assert!(felix.is_file(), "build it: cargo build -p calico-felix");
    let dir = std::env::temp_dir().join(format!("restart-felix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("felix-given");
    std::fs::copy(&felix, &copy).unwrap();
    Copy(copy)
}

/// The processes of `lab`'s `host` that run `exe`.
fn running(lab: &TestLab, host: &str, exe: &Path) -> Vec<i32> {
    calico_testkit::processes_in_netns(&format!("{}.{host}", lab.name))
        .into_iter()
        .map(|(pid, _)| pid)
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == exe))
        .collect()
}

#[test]
fn restart_felix_starts_the_binary_up_was_given() {
    let copy = copy_of_felix();
    let given = copy.0.to_str().unwrap();
    let lab = TestLab::up_with(1, &["--felix", given]);
    let first = running(&lab, "host1", &copy.0);
    assert!(!first.is_empty(), "up started {given}");
    assert_eq!(lab.state().felix.as_deref(), Some(copy.0.as_path()));

    lab.ok(&["restart-felix", "host1"]);
    eventually("the restarted Felix", Duration::from_secs(20), || {
        let now = running(&lab, "host1", &copy.0);
        if now.iter().any(|pid| !first.contains(pid)) {
            Ok(())
        } else {
            Err(format!(
                "no new {given} in host1 (it ran as {first:?}; now {now:?})"
            ))
        }
    });
    lab.wait();
}
