//! A real S3-compatible server for the `DRIVE_DISK=s3` tests: moto's (`moto[server]`, pinned in
//! `tests/media/requirements.txt`), installed into a venv under target/ on first use, as the
//! client tests install Mastodon.py. A missing python3 or a failed install FAILS the test with
//! a message saying what is missing; nothing is skipped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn requirements() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/media/requirements.txt")
}

/// The venv's `moto_server`, made once per requirements content.
fn moto_server_bin() -> PathBuf {
    super::venv::installed(
        "moto-venv",
        &requirements(),
        "moto_server",
        "the S3 tests (moto's S3 server)",
    )
}

/// A running moto S3 server on a free local port; stopped when dropped.
pub struct Moto {
    pub endpoint: String,
    child: Child,
}

impl Moto {
    pub async fn start() -> Moto {
        let bin = tokio::task::spawn_blocking(moto_server_bin)
            .await
            .expect("install moto");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&bin)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start moto_server");
        let moto = Moto {
            endpoint: format!("http://127.0.0.1:{port}"),
            child,
        };
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            if http.get(&moto.endpoint).send().await.is_ok() {
                return moto;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "moto_server did not answer on {} within 60 s",
                moto.endpoint
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A server with the public `bucket` (`public_bucket`), and the URL its files are served
    /// from.
    pub async fn with_public_bucket(bucket: &str) -> (Moto, String) {
        let moto = Moto::start().await;
        moto.public_bucket(bucket).await;
        let base = format!("{}/{bucket}", moto.endpoint);
        (moto, base)
    }

    /// The settings of a node whose drive is `bucket` on this server, its files served from
    /// `url_base`.
    pub fn drive_env<'a>(&'a self, bucket: &'a str, url_base: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("DRIVE_DISK", "s3"),
            ("S3_BUCKET", bucket),
            ("S3_REGION", "us-east-1"),
            ("S3_ENDPOINT_URL", self.endpoint.as_str()),
            ("S3_FORCE_PATH_STYLE", "true"),
            ("AWS_ACCESS_KEY_ID", "testing"),
            ("AWS_SECRET_ACCESS_KEY", "testing-secret"),
            ("STORAGE_URL_BASE", url_base),
        ]
    }

    /// Creates `bucket` whose objects anyone may read (a bucket policy, as a deployment that
    /// serves files from the bucket has). moto accepts unsigned requests.
    pub async fn public_bucket(&self, bucket: &str) {
        let http = reqwest::Client::new();
        let resp = http
            .put(format!("{}/{bucket}", self.endpoint))
            .send()
            .await
            .expect("create bucket");
        assert!(
            resp.status().is_success(),
            "create bucket: {}",
            resp.status()
        );
        let policy = serde_json::json!({
            "Version": "2012-10-17",
            "Statement": [{
                "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
                "Resource": format!("arn:aws:s3:::{bucket}/*"),
            }],
        });
        let resp = http
            .put(format!("{}/{bucket}?policy", self.endpoint))
            .header("content-type", "application/json")
            .body(policy.to_string())
            .send()
            .await
            .expect("bucket policy");
        assert!(
            resp.status().is_success(),
            "bucket policy: {}",
            resp.status()
        );
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
