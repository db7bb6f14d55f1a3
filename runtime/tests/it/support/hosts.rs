//! Names for loopback addresses in `/etc/hosts`, for tests whose peers must reach each other by
//! host name (WebFinger, TLS certificates, `Host`-derived URLs): the entries are added when a
//! [`HostNames`] is made and removed when it is dropped, panic included.
//!
//! Other tests of the same binary resolve names (`localhost`) while the file changes, so it is
//! never rewritten while ours are added or removed: the entries are appended in one write and
//! taken away by cutting the file back to its old length, so a reader sees the file either with
//! or without them. Only a run killed before its `Drop` leaves lines behind; each line names the
//! process that added it, and the next run removes those of processes that no longer exist
//! (test runs of other work trees may be using theirs).

use std::io::Write;
use std::sync::Mutex;

const HOSTS: &str = "/etc/hosts";

/// One edit at a time in this process.
static EDIT: Mutex<()> = Mutex::new(());

/// `/etc/hosts` entries that exist while this value lives.
pub struct HostNames {
    block: String,
    marker: String,
}

impl HostNames {
    /// Adds `address name` for each pair; `tag` (a word) marks the lines as this test's.
    pub fn add(tag: &str, entries: &[(&str, &str)]) -> HostNames {
        let marker = format!("# hollo-test:{tag}:{}", std::process::id());
        let _guard = EDIT.lock().unwrap_or_else(|e| e.into_inner());
        let current = std::fs::read_to_string(HOSTS).expect("read /etc/hosts");
        let stale = |line: &str| {
            line.rsplit_once("# hollo-test:")
                .and_then(|(_, m)| m.rsplit_once(':'))
                .and_then(|(_, pid)| pid.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        };
        if current.lines().any(stale) {
            // Left by a run that was killed: drop them before adding ours.
            let kept: String = current
                .lines()
                .filter(|l| !stale(l))
                .map(|l| format!("{l}\n"))
                .collect();
            std::fs::write(HOSTS, kept).expect("rewrite /etc/hosts");
        }
        let current = std::fs::read_to_string(HOSTS).expect("read /etc/hosts");
        let mut block = String::new();
        if !current.is_empty() && !current.ends_with('\n') {
            block.push('\n');
        }
        for (addr, name) in entries {
            block.push_str(&format!("{addr} {name} {marker}\n"));
        }
        std::fs::OpenOptions::new()
            .append(true)
            .open(HOSTS)
            .and_then(|mut f| f.write_all(block.as_bytes()))
            .unwrap_or_else(|e| {
                panic!(
                    "this test names loopback addresses in {HOSTS} and cannot write it ({e}): \
                     run the tests as root (scripts/test does)"
                )
            });
        HostNames { block, marker }
    }
}

impl Drop for HostNames {
    fn drop(&mut self) {
        let _guard = EDIT.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(current) = std::fs::read_to_string(HOSTS) else {
            return;
        };
        if let Some(before) = current.strip_suffix(&self.block) {
            // Still the last lines: cut them off, atomically for readers.
            if let Ok(f) = std::fs::OpenOptions::new().write(true).open(HOSTS) {
                let _ = f.set_len(before.len() as u64);
            }
        } else {
            let kept: String = current
                .lines()
                .filter(|l| !l.ends_with(&self.marker))
                .map(|l| format!("{l}\n"))
                .collect();
            let _ = std::fs::write(HOSTS, kept);
        }
    }
}
