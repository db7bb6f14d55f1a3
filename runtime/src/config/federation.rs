//! Federation: the public origin, the key that encrypts account keys, outbound fetches.

use std::fmt;
use std::time::Duration;

use super::{ConfigError, Env, vars};

/// The PEM bundle `EXTRA_CA_CERTS_FILE` names, if any (R-OP-OPS): CA certificates trusted
/// for outgoing federation requests besides the compiled-in public roots (webpki), for a
/// server behind a private CA or a TLS-inspecting proxy. The operator mounts it from
/// `spec.pod.caBundle`. Read from the process environment, where the HTTP client is built.
pub fn extra_ca_certs_file() -> Option<std::path::PathBuf> {
    Env::from_process().path(&vars::EXTRA_CA_CERTS_FILE)
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
    /// `PUBLIC_URL`: scheme, host and port only.
    pub public_url: url::Url,
    /// `SECRET_KEY`: at least 32 characters. Unset → federation is disabled on this node.
    pub secret_key: Option<Secret>,
    /// `ALLOW_PRIVATE_ADDRESS`: let remote fetches and deliveries reach loopback and private
    /// addresses over plain http (development and tests only).
    pub allow_private_address: bool,
    /// `DELIVERY_HOST_CONCURRENCY`: deliveries to one remote host running at once per process.
    pub host_concurrency: usize,
    /// `PREVIEW_CARDS`: fetch link previews for posts (`cards`). Off, no page
    /// is fetched and posts show no card.
    pub preview_cards: bool,
    /// `PREVIEW_CARD_TIMEOUT_SECONDS`: the whole fetch of one card (page,
    /// oEmbed, image) gives up after this; a slow page gets no card.
    pub preview_card_timeout: Duration,
    /// `PREVIEW_CARD_CONCURRENCY`: card fetches in flight per worker
    /// process, in slots of their own beside the task slots, so slow pages delay no other
    /// task.
    pub preview_card_concurrency: usize,
}

/// Minimum length of `SECRET_KEY`: it is the root of the account key encryption.
pub const SECRET_KEY_MIN_LEN: usize = 32;

impl FederationConfig {
    pub fn from_env(env: &Env, port: u16) -> Result<Self, ConfigError> {
        let raw = env
            .url(&vars::PUBLIC_URL)?
            .unwrap_or_else(|| format!("http://localhost:{port}"));
        // The default passes the same check as a value that is set.
        vars::PUBLIC_URL.check(&raw)?;
        let public_url = url::Url::parse(&raw)
            .map_err(|e| ConfigError::Inconsistent(format!("PUBLIC_URL={raw:?}: {e}")))?;
        Ok(FederationConfig {
            public_url,
            secret_key: env.secret(&vars::SECRET_KEY)?,
            allow_private_address: env.bool(&vars::ALLOW_PRIVATE_ADDRESS)?,
            host_concurrency: env.int(&vars::DELIVERY_HOST_CONCURRENCY)?,
            preview_cards: env.bool(&vars::PREVIEW_CARDS)?,
            preview_card_timeout: env.duration(&vars::PREVIEW_CARD_TIMEOUT_SECONDS)?,
            preview_card_concurrency: env.int(&vars::PREVIEW_CARD_CONCURRENCY)?,
        })
    }
}
