//! GoToSocial as a test peer (R-INTEROP): the real server, v0.18.3, built from its Go module by
//! `tests/gotosocial/install` into `target/gotosocial/`, run as a child process on a loopback
//! address under a host name, with SQLite and its own TLS (the test CA's certificate of
//! `tests/gotosocial/tls/`). It is driven only as its users would drive it: accounts made with
//! its admin command, tokens through its OAuth sign-in, everything else through its
//! Mastodon-compatible client API.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use serde_json::{Value, json};

use super::api::Client;

/// The version `tests/gotosocial/install` builds.
pub const VERSION: &str = "v0.18.3";

/// Where `tests/gotosocial/install` put the binary and its web folders:
/// `HOLLO_GOTOSOCIAL_DIR`, else the workspace's `target/gotosocial`.
pub fn install_dir() -> PathBuf {
    std::env::var_os("HOLLO_GOTOSOCIAL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/gotosocial"))
}

/// A file of the test CA fixtures (`ca.pem`, `server.pem`, `server.key`): one certificate for
/// every `*.gts-interop.test` name the interop tests use.
pub fn tls_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gotosocial/tls")
        .join(name)
}

/// An HTTP client that trusts the test CA and follows no redirects (the OAuth flow reads them).
/// It names itself: GoToSocial answers 418 to a request without a `User-Agent`.
pub fn http_client() -> reqwest::Client {
    let ca = std::fs::read(tls_fixture("ca.pem")).expect("the test CA");
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&ca).expect("a PEM certificate"))
        .redirect(reqwest::redirect::Policy::none())
        .user_agent("hollo-interop-test/1.0")
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

/// The password of every test user (GoToSocial wants a strong one).
const PASSWORD: &str = "interop-Test-passw0rd-61-correct-horse";

/// A running GoToSocial; killed (and its files removed) when dropped.
pub struct GoToSocial {
    child: Child,
    dir: PathBuf,
    /// `https://<host>`.
    pub base: String,
    pub host: String,
}

fn binary() -> PathBuf {
    let dir = install_dir();
    let bin = dir.join("gotosocial");
    assert!(
        bin.is_file() && dir.join("web/template").is_dir(),
        "GoToSocial {VERSION} is not installed in {} (its binary or web/template is missing): \
         run runtime/tests/gotosocial/install (scripts/test does; it needs Go and the Go module \
         proxy, and builds for about 5 minutes once)",
        dir.display()
    );
    bin
}

fn config(dir: &Path, host: &str, addr: &str) -> String {
    let web = install_dir().join("web");
    let path = |p: &Path| p.to_str().expect("a UTF-8 path").to_string();
    format!(
        r#"log-level: "info"
log-client-ip: false
host: "{host}"
protocol: "https"
bind-address: "{addr}"
port: 443
db-type: "sqlite"
db-address: "{db}"
storage-backend: "local"
storage-local-base-path: "{storage}"
web-template-base-dir: "{template}/"
web-asset-base-dir: "{assets}/"
tls-certificate-chain: "{cert}"
tls-certificate-key: "{key}"
accounts-registration-open: false
instance-languages: []
media-description-min-chars: 0
cache:
  memory-target: "64MiB"
http-client:
  allow-ips: ["127.0.0.0/8"]
  tls-insecure-skip-verify: false
advanced-rate-limit-requests: 0
advanced-throttling-multiplier: 0
"#,
        db = path(&dir.join("sqlite.db")),
        storage = path(&dir.join("storage")),
        template = path(&web.join("template")),
        assets = path(&web.join("assets")),
        cert = path(&tls_fixture("server.pem")),
        key = path(&tls_fixture("server.key")),
    )
}

impl GoToSocial {
    /// Starts GoToSocial as `https://<host>` on `addr`:443 with `users` (confirmed accounts,
    /// made with its admin command before it serves). `host` must resolve to `addr`.
    pub async fn start(host: &str, addr: &str, users: &[&str]) -> GoToSocial {
        let bin = binary();
        let dir = super::files::temp_dir("hollo-gotosocial");
        std::fs::create_dir_all(&dir).expect("GoToSocial's directory");
        std::fs::write(dir.join("config.yaml"), config(&dir, host, addr)).expect("config");
        let gts = |args: &[&str]| {
            let mut cmd = Command::new(&bin);
            cmd.arg("--config-path")
                .arg(dir.join("config.yaml"))
                .args(args)
                .current_dir(&dir)
                // Its outgoing requests trust the test CA (Go reads SSL_CERT_FILE), and the
                // ffmpeg WebAssembly it compiles at start is cached between runs.
                .env("SSL_CERT_FILE", tls_fixture("ca.pem"))
                .env(
                    "GTS_WAZERO_COMPILATION_CACHE",
                    install_dir().join("wazero-cache"),
                )
                .stdin(Stdio::null());
            cmd
        };
        for user in users {
            let email = format!("{user}@{host}");
            let create = [
                "admin",
                "account",
                "create",
                "--username",
                user,
                "--email",
                &email,
                "--password",
                PASSWORD,
            ];
            for args in [
                &create[..],
                &["admin", "account", "confirm", "--username", user],
            ] {
                let out = gts(args).output().expect("run gotosocial admin");
                assert!(
                    out.status.success(),
                    "gotosocial {}: {}{}",
                    args.join(" "),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        let log = std::fs::File::create(dir.join("server.log")).expect("log file");
        let child = gts(&["server", "start"])
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", bin.display()));
        let mut server = GoToSocial {
            child,
            dir,
            base: format!("https://{host}"),
            host: host.to_string(),
        };
        let http = http_client();
        let deadline = std::time::Instant::now() + Duration::from_secs(180);
        loop {
            let probe = http
                .get(format!("{}/api/v1/instance", server.base))
                .send()
                .await;
            match probe {
                Ok(r) if r.status().is_success() => break,
                other => {
                    let exited = server.child.try_wait().ok().flatten();
                    assert!(
                        exited.is_none() && std::time::Instant::now() < deadline,
                        "GoToSocial is not serving {} ({exited:?}; last probe: {other:?}); its \
                         log:\n{}",
                        server.base,
                        server.log_tail(30)
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        server
    }

    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The approval state GoToSocial recorded for its users' favourites of the post `uri`:
    /// (pending, the approval's IRI) per favourite. Its client API shows a favourite waiting for
    /// the post's author exactly as an approved one (`favourited: true`, counted), so this
    /// reads its database — read-only, with the `sqlite3` command — and nothing else does.
    pub fn fave_approvals(&self, uri: &str) -> Vec<(bool, String)> {
        let db = self.dir.join("sqlite.db");
        let sql = format!(
            "SELECT f.pending_approval, coalesce(f.approved_by_uri, '') FROM status_faves f \
             JOIN statuses s ON s.id = f.status_id WHERE s.uri = '{}'",
            uri.replace('\'', "''")
        );
        let out = Command::new("sqlite3")
            .args(["-readonly", "-separator", "|"])
            .arg(&db)
            .arg(&sql)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run sqlite3 (install it: the interop test reads GoToSocial's database): {e}")
            });
        assert!(
            out.status.success(),
            "sqlite3 {}: {}",
            db.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once('|'))
            .map(|(pending, by)| (pending.trim() == "1", by.trim().to_string()))
            .collect()
    }

    /// The last `n` lines of the server log (for failure messages), without the access-log
    /// lines of the test's own polling.
    pub fn log_tail(&self, n: usize) -> String {
        let logs = self.logs();
        let lines: Vec<&str> = logs
            .lines()
            .filter(|l| !(l.contains("userAgent=hollo-interop-test") && l.contains("method=GET")))
            .collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// A client API token of `user`, as an app gets one: register, sign in, authorize, and
    /// exchange the out-of-band code.
    pub async fn token(&self, user: &str) -> String {
        let http = http_client();
        let base = &self.base;
        let oob = "urn:ietf:wg:oauth:2.0:oob";
        let scope = "read write follow push";
        let app: Value = http
            .post(format!("{base}/api/v1/apps"))
            .json(&json!({ "client_name": "hollo interop test", "redirect_uris": oob, "scopes": scope }))
            .send()
            .await
            .expect("register an app")
            .json()
            .await
            .expect("the app");
        let (id, secret) = (app["client_id"].as_str(), app["client_secret"].as_str());
        let (id, secret) = (id.expect("client_id"), secret.expect("client_secret"));
        let mut cookies = Cookies::default();
        let authorize = format!(
            "{base}/oauth/authorize?{}",
            serde_urlencoded::to_string([
                ("client_id", id),
                ("redirect_uri", oob),
                ("response_type", "code"),
                ("scope", scope),
            ])
            .expect("query")
        );
        let r = cookies
            .send(http.get(&authorize).header("accept", "text/html"))
            .await;
        assert!(
            r.status().is_redirection(),
            "GET /oauth/authorize: {}",
            r.status()
        );
        let email = format!("{user}@{}", self.host);
        let r = cookies
            .send(
                http.post(format!("{base}/auth/sign_in"))
                    .header("accept", "text/html")
                    .form(&[("username", email.as_str()), ("password", PASSWORD)]),
            )
            .await;
        assert!(
            r.status().is_redirection(),
            "POST /auth/sign_in: {}",
            r.status()
        );
        let r = cookies
            .send(
                http.post(format!("{base}/oauth/authorize"))
                    .header("accept", "text/html"),
            )
            .await;
        let location = r.headers().get(LOCATION).and_then(|l| l.to_str().ok());
        let location = location.unwrap_or_else(|| panic!("POST /oauth/authorize: {}", r.status()));
        let code = url::Url::parse(base)
            .and_then(|b| b.join(location))
            .expect("the redirect")
            .query_pairs()
            .find(|(k, _)| k == "code")
            .map(|(_, v)| v.into_owned())
            .unwrap_or_else(|| panic!("no code in {location}"));
        let token: Value = http
            .post(format!("{base}/oauth/token"))
            .form(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("client_id", id),
                ("client_secret", secret),
                ("redirect_uri", oob),
                ("scope", scope),
            ])
            .send()
            .await
            .expect("token request")
            .json()
            .await
            .expect("token");
        token["access_token"]
            .as_str()
            .expect("access_token")
            .to_string()
    }

    /// A client API client of `user`.
    pub async fn client(&self, user: &str) -> Client {
        Client {
            base: self.base.clone(),
            token: Some(self.token(user).await),
            http: http_client(),
        }
    }
}

impl Drop for GoToSocial {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The session cookie of the sign-in flow (the workspace's reqwest has no cookie store).
#[derive(Default)]
struct Cookies(Vec<(String, String)>);

impl Cookies {
    async fn send(&mut self, req: reqwest::RequestBuilder) -> reqwest::Response {
        let header: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let req = if header.is_empty() {
            req
        } else {
            req.header(COOKIE, header.join("; "))
        };
        let resp = req.send().await.expect("request");
        for set in resp.headers().get_all(SET_COOKIE) {
            let Some((name, value)) = set
                .to_str()
                .ok()
                .and_then(|s| s.split(';').next())
                .and_then(|pair| pair.split_once('='))
            else {
                continue;
            };
            self.0.retain(|(k, _)| k != name);
            self.0
                .push((name.trim().to_string(), value.trim().to_string()));
        }
        resp
    }
}
