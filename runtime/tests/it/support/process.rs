//! The one child-process wrapper: the real `hollo` binary, with only the environment a test
//! gives it (no inherited `DATABASE_URL`/`NODE_TYPE`), its stderr in a log file the test can
//! read, signals, and SIGKILL when dropped so no process outlives its test.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use super::{HOLLO, eventually};

/// `hollo <args>` with only `env` set (and `RUST_LOG=info`, `BIND=127.0.0.1`, `HEALTH_PORT=0`
/// unless given: every node binds its health port, and parallel tests must not share one).
pub fn command(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(HOLLO);
    cmd.args(args)
        .env_remove("DATABASE_URL")
        .env_remove("NODE_TYPE")
        .env_remove("SECRET_KEY")
        .env_remove("RUST_LOG")
        .env("BIND", "127.0.0.1")
        .env("RUST_LOG", "info")
        .env("HEALTH_PORT", "0")
        // A test never wants the local PostgreSQL of the working directory.
        .env(
            "HOLLO_HOME",
            std::env::temp_dir().join("hollo-test-home-unused"),
        )
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs a one-shot command to completion (stdout and stderr captured).
pub fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    command(args, env).output().expect("run hollo")
}

/// A running `hollo` process.
pub struct Hollo {
    pub child: Child,
    log: PathBuf,
}

impl Hollo {
    /// `hollo serve` with `env`.
    pub fn serve(env: &[(&str, &str)]) -> Hollo {
        Self::spawn(&["serve"], env)
    }

    pub fn spawn(args: &[&str], env: &[(&str, &str)]) -> Hollo {
        let log =
            std::env::temp_dir().join(format!("hollo-test-{}.log", uuid::Uuid::new_v4().simple()));
        let file = std::fs::File::create(&log).expect("log file");
        let child = command(args, env)
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .expect("spawn hollo");
        Hollo { child, log }
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, sig: &str) {
        let status = Command::new("kill")
            .arg(format!("-{sig}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// Waits for the process to exit, failing the test (with its logs) after `deadline`.
    pub fn wait_exit(&mut self, deadline: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            if start.elapsed() > deadline {
                let _ = self.child.kill();
                panic!(
                    "process did not exit within {deadline:?}; logs:\n{}",
                    self.logs()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub async fn wait_log(&self, needle: &str, deadline: Duration) {
        eventually(deadline, needle, || async {
            self.logs().contains(needle).then_some(())
        })
        .await;
    }
}

impl Drop for Hollo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}
