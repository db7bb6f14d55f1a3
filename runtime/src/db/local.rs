//! A PostgreSQL server of our own, for `hollo serve` without `DATABASE_URL` and for tests.
//!
//! The cluster lives in `<dir>/data`, listens only on a Unix socket in `<dir>/run` (no port to
//! collide with), and is started with the machine's `initdb`/`pg_ctl`. PostgreSQL refuses to run
//! as root, so when we are root the server runs as the `postgres` user (or `HOLLO_PG_USER`).

use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};

use crate::config::{Env, vars};

pub struct LocalPostgres {
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<String>,
}

/// The socket port number: PostgreSQL names its socket `.s.PGSQL.<port>` even when it opens
/// no TCP port, so any fixed number works.
const SOCKET_PORT: u16 = 5432;

impl LocalPostgres {
    /// Finds the PostgreSQL binaries; a clear error says what to install when there are none.
    pub fn new(dir: impl Into<PathBuf>) -> Result<Self> {
        let dir = dir.into();
        let dir = if dir.is_absolute() {
            dir
        } else {
            std::env::current_dir()?.join(dir)
        };
        let path = std::env::var_os("PATH");
        let env = Env::from_process();
        let explicit = env.path(&vars::PG_BIN_DIR);
        let bin = find_bin_dir(explicit.as_deref(), Path::new("/usr/lib/postgresql"), path.as_deref()).ok_or_else(|| {
            anyhow!(
                "DATABASE_URL is not set and no PostgreSQL server binaries (initdb, pg_ctl) were found \
                 on PATH or under /usr/lib/postgresql/*/bin. Install PostgreSQL (for example \
                 `apt-get install postgresql`) or set DATABASE_URL to an existing database."
            )
        })?;
        let run_as = if is_root() {
            let user = env.text(&vars::HOLLO_PG_USER).unwrap_or_default();
            let exists = Command::new("id")
                .arg("-u")
                .arg(&user)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if !exists.map(|s| s.success()).unwrap_or(false) {
                bail!(
                    "running as root: PostgreSQL refuses to run as root and there is no '{user}' user to \
                     run it as. Create one (`useradd --system {user}`), set HOLLO_PG_USER, or set DATABASE_URL."
                );
            }
            Some(user)
        } else {
            None
        };
        Ok(LocalPostgres { dir, bin, run_as })
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn socket_dir(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// URL of database `db` on this server (the superuser is whoever runs it).
    pub fn url(&self, db: &str) -> String {
        let user = self.run_as.clone().unwrap_or_else(current_user);
        format!(
            "postgres://{user}@localhost/{db}?host={}&port={SOCKET_PORT}",
            self.socket_dir().display()
        )
    }

    /// Creates the cluster when missing and starts it when stopped. Safe to call from several
    /// processes at once (a file lock serialises them). Returns the admin URL (`postgres` db).
    pub fn ensure_started(&self) -> Result<String> {
        fs::create_dir_all(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let lock = File::create(self.dir.join("lock"))
            .context("creating the local PostgreSQL lock file")?;
        lock.lock()
            .context("locking the local PostgreSQL directory")?;
        let result = self.start_locked();
        let _ = lock.unlock();
        result?;
        Ok(self.url("postgres"))
    }

    fn start_locked(&self) -> Result<()> {
        let data = self.data_dir();
        let run = self.socket_dir();
        fs::create_dir_all(&run)?;
        if let Some(user) = &self.run_as {
            // The server user must reach the directory and own its own files.
            for d in [&self.dir, &run] {
                chown(user, d)?;
            }
            make_traversable(&self.dir)?;
        }
        if !data.join("PG_VERSION").exists() {
            tracing::info!(dir = %data.display(), "initialising a local PostgreSQL cluster");
            fs::create_dir_all(&data)?;
            fs::set_permissions(&data, fs::Permissions::from_mode(0o700))?;
            if let Some(user) = &self.run_as {
                chown(user, &data)?;
            }
            self.run(
                "initdb",
                &[
                    "-D",
                    &data.to_string_lossy(),
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-locale",
                    "-U",
                    &self.superuser(),
                ],
            )?;
        }
        if self
            .run("pg_ctl", &["status", "-D", &data.to_string_lossy()])
            .is_ok()
        {
            return Ok(());
        }
        // A crashed server leaves a stale pid file that pg_ctl handles; a stale socket lock too.
        let opts = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -p {SOCKET_PORT} -c max_connections=400 \
             -c shared_buffers=128MB -c fsync=on",
            run.display()
        );
        let log = self.dir.join("postgres.log");
        if self.run_as.is_some() {
            let _ = File::create(&log);
            chown(self.run_as.as_deref().unwrap_or("postgres"), &log)?;
        }
        self.run(
            "pg_ctl",
            &[
                "start",
                "-w",
                "-t",
                "60",
                "-D",
                &data.to_string_lossy(),
                "-l",
                &log.to_string_lossy(),
                "-o",
                &opts,
            ],
        )
        .with_context(|| format!("starting local PostgreSQL (log: {})", log.display()))?;
        Ok(())
    }

    /// Stops the server if it runs (fast mode: sessions are cut, data is safe).
    pub fn stop(&self) -> Result<()> {
        let data = self.data_dir();
        if !data.join("PG_VERSION").exists() {
            return Ok(());
        }
        if self
            .run("pg_ctl", &["status", "-D", &data.to_string_lossy()])
            .is_err()
        {
            return Ok(());
        }
        self.run(
            "pg_ctl",
            &["stop", "-m", "fast", "-w", "-D", &data.to_string_lossy()],
        )
    }

    fn superuser(&self) -> String {
        self.run_as.clone().unwrap_or_else(current_user)
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<()> {
        let exe = self.bin.join(tool);
        let mut cmd = match &self.run_as {
            Some(user) => {
                let mut c = Command::new("runuser");
                c.arg("-u").arg(user).arg("--").arg(&exe);
                c
            }
            None => Command::new(&exe),
        };
        cmd.args(args).stdin(Stdio::null()).current_dir("/");
        let out = cmd
            .output()
            .with_context(|| format!("running {}", exe.display()))?;
        if !out.status.success() {
            bail!(
                "{tool} {} failed ({}): {}{}",
                args.first().unwrap_or(&""),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim(),
                String::from_utf8_lossy(&out.stdout).trim()
            );
        }
        Ok(())
    }
}

/// `PG_BIN_DIR` first, then the newest `<versioned_root>/<version>/bin`, then `PATH`.
fn find_bin_dir(
    explicit: Option<&Path>,
    versioned_root: &Path,
    path: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Some(d) = explicit.filter(|d| has_tools(d)) {
        return Some(d.to_path_buf());
    }
    // Versioned Debian directories before PATH: PATH often holds wrappers (pg_wrapper) that
    // pick a cluster from /etc/postgresql instead of running the tool.
    let mut versioned: Vec<PathBuf> = fs::read_dir(versioned_root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|d| has_tools(d))
        .collect();
    versioned.sort();
    if let Some(d) = versioned.pop() {
        return Some(d);
    }
    path.map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .find(|d| has_tools(d))
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn current_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| {
            Command::new("id")
                .arg("-un")
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_else(|_| "postgres".into())
        })
}

fn chown(user: &str, path: &Path) -> Result<()> {
    let status = Command::new("chown").arg(user).arg(path).status()?;
    if !status.success() {
        bail!("chown {user} {} failed", path.display());
    }
    Ok(())
}

/// The server user needs to traverse every parent of its directory.
fn make_traversable(dir: &Path) -> Result<()> {
    for parent in dir.ancestors().skip(1) {
        if parent.as_os_str().is_empty() {
            break;
        }
        if let Ok(meta) = fs::metadata(parent) {
            let mode = meta.permissions().mode();
            if mode & 0o001 == 0 {
                fs::set_permissions(parent, fs::Permissions::from_mode(mode | 0o001))
                    .with_context(|| {
                        format!(
                            "making {} traversable for the PostgreSQL user",
                            parent.display()
                        )
                    })?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_tools(dir: &Path) {
        fs::create_dir_all(dir).expect("mkdir");
        for t in ["initdb", "pg_ctl"] {
            fs::write(dir.join(t), "").expect("write");
        }
    }

    #[test]
    fn no_binaries_anywhere_is_none_and_versioned_dirs_win_over_path() {
        let root = std::env::temp_dir().join(format!("pgbin-{}", uuid::Uuid::new_v4().simple()));
        let empty = root.join("empty");
        fs::create_dir_all(&empty).expect("mkdir");
        assert_eq!(
            find_bin_dir(None, &root.join("nothing"), Some(empty.as_os_str())),
            None
        );

        let on_path = root.join("path");
        fake_tools(&on_path);
        assert_eq!(
            find_bin_dir(None, &root.join("nothing"), Some(on_path.as_os_str())),
            Some(on_path.clone())
        );
        fake_tools(&root.join("lib/14/bin"));
        fake_tools(&root.join("lib/15/bin"));
        assert_eq!(
            find_bin_dir(None, &root.join("lib"), Some(on_path.as_os_str())),
            Some(root.join("lib/15/bin"))
        );
        assert_eq!(
            find_bin_dir(Some(&on_path), &root.join("lib"), None),
            Some(on_path)
        );
        let _ = fs::remove_dir_all(&root);
    }
}
