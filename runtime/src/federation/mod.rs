//! Federation (SPEC.md §8, R-AP, R-RPL-8): local actors and their keys, HTTP Signatures, the
//! guarded fetch client, WebFinger, the inbox's processing and the outbox's delivery.
//!
//! Every IRI derives from `PUBLIC_URL`, on web and worker nodes alike, so a worker signs with
//! the same key id a web node publishes.

pub mod actors;
pub mod bounds;
pub mod context;
pub mod crypto;
pub mod inbound;
pub mod iri;
pub mod normalize;
pub mod outbound;
pub mod transport;
pub mod vocab;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Result, anyhow};
use sqlx::{PgConnection, PgPool};
use tokio::sync::OnceCell;
use uuid::Uuid;

use crate::accounts::Account;
use crate::config::FederationConfig;
use actors::instance::InstanceKey;
use crypto::keys::KeyCipher;
use crypto::proofs::ProofKey;
use outbound::delivery::HostLimiter;
use transport::fetch::FetchClient;
use transport::signature::SigningKey;

/// Shared federation state of a node: built once at start, cloned as an `Arc`.
pub struct Federation {
    /// `PUBLIC_URL` without its trailing slash, e.g. `https://hollo.example.com`.
    pub origin: String,
    /// The WebFinger domain: host and, when not the default, port of `PUBLIC_URL`.
    pub domain: String,
    pub fetch: FetchClient,
    pub hosts: HostLimiter,
    cipher: KeyCipher,
    /// Decrypted keys by account, ready to sign: decrypting and validating a key on every
    /// delivery would be wasted work.
    keys: Mutex<HashMap<Uuid, Arc<ring::signature::RsaKeyPair>>>,
    /// The instance actor's key, loaded (or created) on first use and kept for the process.
    instance: OnceCell<InstanceKey>,
    /// FEP-8b32 proof keys by account (with the account's username), opened once per process.
    proof_keys: Mutex<HashMap<Uuid, (String, ed25519_dalek::SigningKey)>>,
    /// Delivery signing keys by account, with their key id: a fan-out signs thousands of
    /// requests with one account's key and needs its row once, not once per delivery. Account
    /// keys and usernames never change.
    signers: Mutex<HashMap<Uuid, SigningKey>>,
    /// Which signature scheme each remote host reads, as last read or learned (a minute).
    pub schemes: transport::schemes::SchemeCache,
    /// Remote keys recently verified with, parsed (a minute; see `crypto::keys::VerifiedKeys`).
    pub verified_keys: crypto::keys::VerifiedKeys,
    /// Mentions that failed to resolve lately, by handle and by unreachable host (see
    /// `outbound::mentions::FailedLookups`), so a post naming them again costs no fetch.
    pub failed_lookups: outbound::mentions::FailedLookups,
}

impl Federation {
    /// `None` when `SECRET_KEY` is unset: account keys can be neither made nor used then.
    pub fn from_config(cfg: &FederationConfig) -> Result<Option<Arc<Self>>> {
        let Some(secret) = &cfg.secret_key else {
            return Ok(None);
        };
        Ok(Some(Arc::new(Self::new(
            cfg.public_url.as_str(),
            secret.expose(),
            cfg.allow_private_address,
            cfg.host_concurrency,
        )?)))
    }

    pub fn new(
        public_url: &str,
        secret_key: &str,
        allow_private: bool,
        host_concurrency: usize,
    ) -> Result<Self> {
        let url = url::Url::parse(public_url).map_err(|e| anyhow!("PUBLIC_URL: {e}"))?;
        Ok(Federation {
            origin: public_url.trim_end_matches('/').to_string(),
            domain: transport::signature::host_header(&url),
            fetch: FetchClient::new(allow_private)?,
            hosts: HostLimiter::new(host_concurrency),
            cipher: KeyCipher::new(secret_key),
            keys: Mutex::new(HashMap::new()),
            instance: OnceCell::new(),
            proof_keys: Mutex::new(HashMap::new()),
            signers: Mutex::new(HashMap::new()),
            schemes: transport::schemes::SchemeCache::default(),
            verified_keys: crypto::keys::VerifiedKeys::default(),
            failed_lookups: outbound::mentions::FailedLookups::default(),
        })
    }

    /// The URLs minted from `PUBLIC_URL` alone (what rendering uses; no keys needed).
    pub fn urls(&self) -> crate::mastodon::Urls<'_> {
        crate::mastodon::Urls::new(&self.origin)
    }
    pub fn actor_iri(&self, username: &str) -> String {
        self.urls().actor(username)
    }
    pub fn key_id(&self, username: &str) -> String {
        format!("{}#main-key", self.actor_iri(username))
    }
    /// The `verificationMethod` of the account's FEP-8b32 proofs.
    pub fn proof_key_id(&self, username: &str) -> String {
        format!("{}#ed25519-key", self.actor_iri(username))
    }
    pub fn inbox(&self, username: &str) -> String {
        format!("{}/inbox", self.actor_iri(username))
    }
    pub fn outbox(&self, username: &str) -> String {
        format!("{}/outbox", self.actor_iri(username))
    }
    /// A local status's ActivityPub id (as `polls::create_status` mints it).
    pub fn status_iri(&self, username: &str, id: Uuid) -> String {
        self.urls().status(username, id)
    }

    pub fn followers(&self, username: &str) -> String {
        format!("{}/followers", self.actor_iri(username))
    }
    pub fn following(&self, username: &str) -> String {
        format!("{}/following", self.actor_iri(username))
    }
    /// The pinned statuses (Mastodon's path, so peers that guess it find it).
    pub fn featured(&self, username: &str) -> String {
        format!("{}/collections/featured", self.actor_iri(username))
    }
    /// The featured hashtags.
    pub fn featured_tags(&self, username: &str) -> String {
        format!("{}/collections/tags", self.actor_iri(username))
    }
    /// The instance actor (`type: Application`), whose key signs fetches no account makes.
    pub fn instance_actor_iri(&self) -> String {
        format!("{}/actor", self.origin)
    }
    pub fn instance_key_id(&self) -> String {
        format!("{}#main-key", self.instance_actor_iri())
    }
    pub fn instance_inbox(&self) -> String {
        format!("{}/inbox", self.instance_actor_iri())
    }
    pub fn instance_outbox(&self) -> String {
        format!("{}/outbox", self.instance_actor_iri())
    }
    pub fn shared_inbox(&self) -> String {
        format!("{}/inbox", self.origin)
    }
    /// A fresh, stable activity id: stored with the activity and reused by every redelivery.
    pub fn new_activity_id(&self) -> String {
        format!("{}/activities/{}", self.origin, Uuid::now_v7())
    }

    /// The local account an IRI names, if it is one of ours (`<origin>/users/<name>`).
    pub fn local_username<'a>(&self, iri: &'a str) -> Option<&'a str> {
        self.urls().local_username(iri)
    }

    pub fn cipher(&self) -> &KeyCipher {
        &self.cipher
    }

    /// The account's signing key, decrypted once per process.
    pub fn signing_key(&self, account: &Account) -> Result<SigningKey> {
        let cached = self
            .keys
            .lock()
            .ok()
            .and_then(|m| m.get(&account.id).cloned());
        let key = match cached {
            Some(k) => k,
            None => {
                let private = self.cipher.decrypt(account.id, &account.private_key_enc)?;
                let k = SigningKey::pair_of(&private).map_err(anyhow::Error::msg)?;
                if let Ok(mut m) = self.keys.lock() {
                    m.insert(account.id, k.clone());
                }
                k
            }
        };
        Ok(SigningKey::from_pair(self.key_id(&account.username), key))
    }

    /// The instance actor's key: loaded from PostgreSQL (made there by the first process that
    /// needs it) once per process. A failed load is not cached, so the next use tries again.
    pub async fn instance_key(&self, pool: &PgPool) -> Result<&InstanceKey> {
        self.instance
            .get_or_try_init(|| actors::instance::load_or_create(self, pool))
            .await
    }

    /// The account's FEP-8b32 proof key (Ed25519), made and stored sealed on first use —
    /// accounts older than proofs get theirs then — and cached for the process. Concurrent
    /// first uses store one key: the first write wins and everyone reads it back.
    pub async fn proof_key(&self, conn: &mut PgConnection, account: Uuid) -> Result<ProofKey> {
        let cached = self
            .proof_keys
            .lock()
            .ok()
            .and_then(|m| m.get(&account).cloned());
        if let Some((username, key)) = cached {
            return Ok(ProofKey {
                id: self.proof_key_id(&username),
                key,
            });
        }
        let (username, sealed): (String, Option<Vec<u8>>) =
            sqlx::query_as("SELECT username, proof_key_enc FROM accounts WHERE id = $1")
                .bind(account)
                .fetch_optional(&mut *conn)
                .await?
                .ok_or_else(|| anyhow!("account {account} no longer exists"))?;
        let sealed = match sealed {
            Some(s) => s,
            None => {
                let fresh = ed25519_dalek::SigningKey::generate(&mut rand::rngs::OsRng);
                let sealed = self.cipher.seal_ed25519(account, &fresh.to_bytes())?;
                sqlx::query_scalar(
                    "UPDATE accounts SET proof_key_enc = COALESCE(proof_key_enc, $2)
                      WHERE id = $1 RETURNING proof_key_enc",
                )
                .bind(account)
                .bind(&sealed)
                .fetch_one(&mut *conn)
                .await?
            }
        };
        let key =
            ed25519_dalek::SigningKey::from_bytes(&self.cipher.open_ed25519(account, &sealed)?);
        if let Ok(mut m) = self.proof_keys.lock() {
            m.insert(account, (username.clone(), key.clone()));
        }
        Ok(ProofKey {
            id: self.proof_key_id(&username),
            key,
        })
    }

    pub async fn signing_key_of(&self, pool: &PgPool, account_id: Uuid) -> Result<SigningKey> {
        if let Some(k) = self
            .signers
            .lock()
            .ok()
            .and_then(|m| m.get(&account_id).cloned())
        {
            return Ok(k);
        }
        let account = crate::accounts::by_id(pool, account_id)
            .await?
            .ok_or_else(|| anyhow!("account {account_id} no longer exists"))?;
        let key = self.signing_key(&account)?;
        if let Ok(mut m) = self.signers.lock() {
            m.insert(account_id, key.clone());
        }
        Ok(key)
    }
}
