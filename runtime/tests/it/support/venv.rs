//! Python tools the tests run (Mastodon.py and the browser driver for the client tests,
//! moto's S3 server for the S3 tests), installed into a venv under target/ on first use. A
//! missing python3 or a failed install FAILS the test with a message saying what is missing;
//! nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The venv `target/tmp/<name>` with `requirements` installed (made again only when their
/// content changes); the path of its `bin/<bin>`. `needs` names who needs it, for the messages.
pub fn installed(name: &str, requirements: &Path, bin: &str, needs: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let python = std::env::var("HOLLO_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let wanted = std::fs::read_to_string(requirements)
        .unwrap_or_else(|e| panic!("{}: {e}", requirements.display()));
    let stamp = venv.join("requirements.installed");
    let bin = venv.join("bin").join(bin);
    if bin.is_file() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return bin;
    }
    let _ = std::fs::remove_dir_all(&venv);
    let out = Command::new(&python)
        .args(["-m", "venv"])
        .arg(&venv)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{needs} need {python} (Debian packages `python3` and `python3-venv`; .ci/run \
                 installs them): {e} — this test never skips"
            )
        });
    assert!(
        out.status.success(),
        "creating the venv {name} failed (Debian needs `python3-venv`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
        ])
        .arg(requirements)
        .output()
        .expect("run pip");
    assert!(
        out.status.success(),
        "installing {} failed ({needs} need it): {}{}",
        requirements.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&stamp, wanted).expect("stamp");
    bin
}
