//! Federation: the public origin, the key that encrypts account keys, outbound fetches.

use std::fmt;
use std::time::Duration;

use super::{ConfigError, Env};

/// `EXTRA_CA_CERTS_FILE` (R-OP-OPS): a PEM bundle of CA certificates trusted for
/// outgoing federation requests besides the compiled-in public roots (webpki), for a server
/// behind a private CA or a TLS-inspecting proxy. The operator mounts it from
/// `spec.pod.caBundle`. Unset: the public roots only.
pub const EXTRA_CA_CERTS_FILE: &str = "EXTRA_CA_CERTS_FILE";

/// The path `EXTRA_CA_CERTS_FILE` names, if any (read from the process environment, where
/// the HTTP client is built).
pub fn extra_ca_certs_file() -> Option<std::path::PathBuf> {
    std::env::var_os(EXTRA_CA_CERTS_FILE)
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
}

/// A secret whose `Debug` never prints it, so a logged config cannot leak it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// Federation settings (SPEC.md §8, R-RPL-8): the public origin every IRI derives from, the key
/// that encrypts account private keys, and the outbound fetch guard.
#[derive(Clone, Debug)]
pub struct FederationConfig {
    /// `PUBLIC_URL`: scheme, host and port only (default `http://localhost:$PORT`).
    pub public_url: url::Url,
    /// `SECRET_KEY`: at least 32 characters. Unset → federation is disabled on this node.
    pub secret_key: Option<Secret>,
    /// `ALLOW_PRIVATE_ADDRESS`: let remote fetches and deliveries reach loopback and private
    /// addresses over plain http (development and tests only).
    pub allow_private_address: bool,
    /// `DELIVERY_HOST_CONCURRENCY`: deliveries to one remote host running at once per process.
    pub host_concurrency: usize,
    /// `PREVIEW_CARDS` (default true): fetch link previews for posts (`cards`). Off, no page
    /// is fetched and posts show no card.
    pub preview_cards: bool,
    /// `PREVIEW_CARD_TIMEOUT_SECONDS` (default 10, 1–60): the whole fetch of one card (page,
    /// oEmbed, image) gives up after this; a slow page gets no card.
    pub preview_card_timeout: Duration,
    /// `PREVIEW_CARD_CONCURRENCY` (default 4, 1–1000): card fetches in flight per worker
    /// process, in slots of their own beside the task slots, so slow pages delay no other
    /// task.
    pub preview_card_concurrency: usize,
}

/// Minimum length of `SECRET_KEY`: it is the root of the account key encryption.
pub const SECRET_KEY_MIN_LEN: usize = 32;

impl FederationConfig {
    pub fn from_env(env: &Env, port: u16) -> Result<Self, ConfigError> {
        let raw = env
            .get("PUBLIC_URL")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|| format!("http://localhost:{port}"));
        let public_url = parse_public_url(&raw)?;
        let secret_key = match env.get("SECRET_KEY") {
            None => None,
            Some(k) if k.len() < SECRET_KEY_MIN_LEN => {
                return Err(ConfigError::Invalid {
                    var: "SECRET_KEY",
                    value: "***".into(),
                    expected: format!(
                        "at least {SECRET_KEY_MIN_LEN} characters (e.g. `openssl rand -hex 32`)"
                    ),
                });
            }
            Some(k) => Some(Secret::new(k)),
        };
        Ok(FederationConfig {
            public_url,
            secret_key,
            allow_private_address: env.bool("ALLOW_PRIVATE_ADDRESS", false)?,
            host_concurrency: env.count("DELIVERY_HOST_CONCURRENCY", 4, 1, 1_000)? as usize,
            preview_cards: env.bool("PREVIEW_CARDS", true)?,
            preview_card_timeout: env.seconds("PREVIEW_CARD_TIMEOUT_SECONDS", 10, 1, 60)?,
            preview_card_concurrency: env.count("PREVIEW_CARD_CONCURRENCY", 4, 1, 1_000)? as usize,
        })
    }
}

/// `PUBLIC_URL` is an origin: actor ids are `<origin>/users/<name>`, so a path, query or
/// fragment would silently produce IRIs nobody serves.
fn parse_public_url(raw: &str) -> Result<url::Url, ConfigError> {
    let invalid = || ConfigError::Invalid {
        var: "PUBLIC_URL",
        value: raw.to_string(),
        expected: "an http(s) origin such as https://hollo.example.com (no path)".into(),
    };
    let url = url::Url::parse(raw).map_err(|_| invalid())?;
    let origin_only = matches!(url.path(), "" | "/")
        && url.query().is_none()
        && url.fragment().is_none()
        && url.username().is_empty()
        && url.password().is_none();
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() || !origin_only {
        return Err(invalid());
    }
    Ok(url)
}
