//! Running the Python client scripts of `tests/clients/` (R-MAPI-1, R-WEB-1): a venv with
//! `clients/requirements.txt` installed once per requirements content under target/, Debian's
//! Chromium and chromedriver found or named as missing. A missing python3, chromium or
//! chromedriver FAILS the test naming it; nothing is skipped silently.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one script may run.
pub const SCRIPT_DEADLINE: Duration = Duration::from_secs(180);

pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// `name` on PATH, or `None`.
pub fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// The browser and its driver: `CHROMIUM` / `CHROMEDRIVER` or Debian's paths.
pub fn browser_paths() -> (PathBuf, PathBuf) {
    let find = |var: &str, names: &[&str]| match std::env::var_os(var) {
        Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file()),
        None => names.iter().find_map(|n| which(n)),
    };
    let chromium = find("CHROMIUM", &["chromium", "chromium-browser"]);
    let driver = find("CHROMEDRIVER", &["chromedriver"]);
    let mut missing = Vec::new();
    if chromium.is_none() {
        missing.push("chromium (Debian package `chromium`)");
    }
    if driver.is_none() {
        missing.push("chromedriver (Debian package `chromium-driver`)");
    }
    assert!(
        missing.is_empty(),
        "the client tests need {}: install them (.ci/run does) — this test never skips",
        missing.join(" and ")
    );
    (chromium.unwrap(), driver.unwrap())
}

/// The venv with `clients/requirements.txt` installed, made once per requirements content.
pub fn venv_python() -> PathBuf {
    let python = std::env::var("HOLLO_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    assert!(
        which(&python).is_some() || Path::new(&python).is_file(),
        "the client tests need {python} (Debian packages `python3` and `python3-venv`): install them (.ci/run does) — this test never skips"
    );
    super::venv::installed(
        "client-venv",
        &clients_dir().join("requirements.txt"),
        "python",
        "the client tests",
    )
}

/// Runs `clients/<script> ARGS…` to completion within the deadline; its standard output.
pub async fn run(script: &str, args: &[&str]) -> String {
    let (chromium, driver) = browser_paths();
    let python = tokio::task::spawn_blocking(venv_python).await.unwrap();
    let child = tokio::process::Command::new(python)
        .arg(clients_dir().join(script))
        .args(args)
        .current_dir(clients_dir())
        .env("CHROMIUM", chromium)
        .env("CHROMEDRIVER", driver)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(SCRIPT_DEADLINE, child)
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish within {SCRIPT_DEADLINE:?}"))
        .expect("spawn the script");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    println!("{stdout}");
    stdout.into_owned()
}
