//! Account passwords: argon2id hashes in PHC form (`$argon2id$v=19$…`, salt and parameters
//! inside), checked in constant time by the `argon2` crate. Hashing costs ~20 MiB and tens of
//! milliseconds on purpose, so it runs on the blocking pool, never on an async worker.
//!
//! Sign-in checks go through one [`Hashing`] per node (R-API): at most
//! `PASSWORD_HASH_CONCURRENCY` run at once, each in a 19 MiB buffer that is kept and reused
//! (one per running check, so the node's hashing memory is at most that many buffers), and
//! at most [`QUEUE_PER_PERMIT`] times as many more may wait; any further attempt is refused at
//! once ([`Busy`], answered 503 with `Retry-After`) rather than queued holding a connection.
//! Before this, 400 parallel sign-ins each allocated their own 19 MiB on the blocking pool
//! (up to 512 threads) and took a node from 1.4 to 8.3 GB.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use argon2::{Algorithm, Argon2, Block, Params, Version};
use sqlx::PgPool;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::accounts::{self, Account};

/// Shortest password accepted (Mastodon's minimum).
pub const MIN_CHARS: usize = 8;
/// Longest password accepted: longer ones are no stronger and cost hashing time.
pub const MAX_BYTES: usize = 1024;

/// argon2id with the RFC 9106 second recommended parameters as the crate defaults them
/// (m = 19 MiB, t = 2, p = 1), named here so a crate upgrade cannot silently change them.
fn hasher() -> Argon2<'static> {
    let params = Params::new(M_COST_KIB, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

/// Memory of one hash, in KiB (= argon2 blocks): 19 MiB.
const M_COST_KIB: u32 = 19 * 1024;

/// How many more checks may wait per running one before an attempt is refused.
pub const QUEUE_PER_PERMIT: usize = 4;

/// Seconds a refused (busy) attempt is told to wait.
pub const BUSY_RETRY_SECONDS: u64 = 1;

/// The node is checking as many passwords as it allows and as many more are waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("too many sign-ins at once; try again in a moment")]
pub struct Busy;

/// The node's bound on password checks: who may check now, who may wait, and the buffers
/// the running checks reuse.
pub struct Hashing {
    /// Checks running at once.
    running: Arc<Semaphore>,
    /// Checks running or waiting: taken without waiting, so a full queue is refused at once.
    admitted: Arc<Semaphore>,
    /// One buffer per running check, kept for the next (allocated on first use).
    buffers: Mutex<Vec<Box<[Block]>>>,
}

/// An admitted check: it holds its place in the queue until it has run.
pub struct Ticket {
    _place: OwnedSemaphorePermit,
}

impl Hashing {
    /// At most `concurrency` checks at once (at least one).
    pub fn new(concurrency: usize) -> Arc<Self> {
        let concurrency = concurrency.max(1);
        Arc::new(Hashing {
            running: Arc::new(Semaphore::new(concurrency)),
            admitted: Arc::new(Semaphore::new(concurrency * (1 + QUEUE_PER_PERMIT))),
            buffers: Mutex::new(Vec::with_capacity(concurrency)),
        })
    }

    /// A place in the queue, or [`Busy`] when it is full. Taken before any other work of a
    /// sign-in, so a flood of them is refused without touching the database.
    pub fn admit(&self) -> Result<Ticket, Busy> {
        self.admitted
            .clone()
            .try_acquire_owned()
            .map(|place| Ticket { _place: place })
            .map_err(|_| Busy)
    }

    /// Whether `password` matches the PHC string `stored` (false for a malformed one), once a
    /// running place is free; the check runs on the blocking pool in a reused buffer.
    pub async fn verify(&self, _ticket: &Ticket, password: &str, stored: &str) -> bool {
        let Ok(_running) = self.running.acquire().await else {
            return false; // never closed
        };
        let mut buffer = self
            .buffers
            .lock()
            .ok()
            .and_then(|mut b| b.pop())
            .unwrap_or_else(new_buffer);
        let (password, stored) = (password.to_owned(), stored.to_owned());
        let done = tokio::task::spawn_blocking(move || {
            let ok = verify_in(password.as_bytes(), &stored, &mut buffer);
            (ok, buffer)
        })
        .await;
        match done {
            Ok((ok, buffer)) => {
                if let Ok(mut b) = self.buffers.lock() {
                    b.push(buffer);
                }
                ok
            }
            Err(_) => false,
        }
    }

    /// Buffers allocated so far (at most the concurrency).
    pub fn buffers(&self) -> usize {
        self.buffers.lock().map(|b| b.len()).unwrap_or_default()
    }
}

fn new_buffer() -> Box<[Block]> {
    vec![Block::default(); M_COST_KIB as usize].into_boxed_slice()
}

/// [`verify`] in `memory`: the same parameters, salt and constant-time comparison as the
/// crate's `verify_password`, without allocating the memory. A stored hash whose parameters
/// need more than `memory` (none we write) is checked in memory of its own.
fn verify_in(password: &[u8], stored: &str, memory: &mut [Block]) -> bool {
    let Ok(phc) = PasswordHash::new(stored) else {
        return false;
    };
    let (Ok(algorithm), Some(salt), Some(expected)) =
        (Algorithm::try_from(phc.algorithm), phc.salt, phc.hash)
    else {
        return false;
    };
    let version = match phc.version.map(Version::try_from).transpose() {
        Ok(v) => v.unwrap_or_default(),
        Err(_) => return false,
    };
    let Ok(params) = Params::try_from(&phc) else {
        return false;
    };
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    let blocks = params.block_count();
    let argon = Argon2::new(algorithm, version, params);
    let mut out = vec![0u8; expected.len()];
    let hashed = if blocks <= memory.len() {
        argon.hash_password_into_with_memory(password, salt, &mut out, &mut memory[..blocks])
    } else {
        argon.hash_password_into(password, salt, &mut out)
    };
    // `Output`'s equality is constant-time.
    hashed.is_ok()
        && argon2::password_hash::Output::new(&out).is_ok_and(|computed| computed == expected)
}

/// Why a password is refused, in words a person can act on.
pub fn check_rules(password: &str) -> Result<()> {
    if password.chars().count() < MIN_CHARS {
        bail!("the password is too short: use at least {MIN_CHARS} characters");
    }
    if password.len() > MAX_BYTES {
        bail!("the password is too long: use at most {MAX_BYTES} bytes");
    }
    if password.contains('\0') {
        bail!("the password must not contain NUL characters");
    }
    Ok(())
}

/// A fresh argon2id hash of `password` (which must pass [`check_rules`]).
pub async fn hash(password: &str) -> Result<String> {
    check_rules(password)?;
    let password = password.to_owned();
    tokio::task::spawn_blocking(move || {
        let salt = SaltString::generate(&mut rand::rngs::OsRng);
        hasher()
            .hash_password(password.as_bytes(), &salt)
            .map(|h| h.to_string())
            .map_err(|e| anyhow::anyhow!("hashing the password: {e}"))
    })
    .await
    .context("the hashing task")?
}

/// Whether `password` matches the PHC string `stored` (false for a malformed one), outside
/// any [`Hashing`] bound (one-shot commands and tests).
pub async fn verify(password: &str, stored: &str) -> bool {
    let (password, stored) = (password.to_owned(), stored.to_owned());
    tokio::task::spawn_blocking(move || verify_in(password.as_bytes(), &stored, &mut []))
        .await
        .unwrap_or(false)
}

/// A hash of nothing anyone can type, verified when the account does not exist or has no
/// password, so a sign-in takes as long whether or not the name is taken.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$0sE3s0p9Bf4mYwM1Zz8kYmJmYcYx3M6G0Zlq2m5Z8xI";

/// Sets (or replaces) the password of the account named `username`, and — in the same
/// transaction — ends what the old password opened (R-API, as Mastodon does on a
/// password change): every sign-in session, every token issued to an app through OAuth and
/// every unused authorization code. Tokens made by `hollo account create` (no app) stay: they
/// are the operator's, not something a password ever granted.
pub async fn set(pool: &PgPool, username: &str, password: &str) -> Result<Account> {
    let hashed = hash(password).await?;
    let account = accounts::by_username(pool, username)
        .await?
        .with_context(|| format!("no account named {username:?}"))?;
    let mut tx = pool.begin().await?;
    sqlx::query("UPDATE accounts SET password_hash = $1 WHERE id = $2")
        .bind(&hashed)
        .bind(account.id)
        .execute(&mut *tx)
        .await?;
    for revoke in [
        "DELETE FROM web_sessions WHERE account_id = $1",
        "DELETE FROM account_tokens WHERE account_id = $1 AND app_id IS NOT NULL",
        "DELETE FROM oauth_codes WHERE account_id = $1 AND used_at IS NULL",
    ] {
        sqlx::query(revoke)
            .bind(account.id)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(account)
}

/// The account whose name and password these are, or `None`; the check waits for a running
/// place of `hashing` (which `ticket` was admitted by).
pub async fn sign_in(
    pool: &PgPool,
    hashing: &Hashing,
    ticket: &Ticket,
    username: &str,
    password: &str,
) -> Result<Option<Account>, sqlx::Error> {
    let account = accounts::by_username(pool, username).await?;
    let stored: Option<String> = match &account {
        Some(a) => {
            sqlx::query_scalar("SELECT password_hash FROM accounts WHERE id = $1")
                .bind(a.id)
                .fetch_one(pool)
                .await?
        }
        None => None,
    };
    let ok = hashing
        .verify(ticket, password, stored.as_deref().unwrap_or(DECOY))
        .await;
    Ok(account.filter(|_| ok && stored.is_some()))
}

/// A password read from standard input: everything, less one trailing line break (what
/// `echo` or a heredoc adds).
pub fn from_stdin_text(text: &str) -> &str {
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.strip_suffix('\r').unwrap_or(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_are_argon2id_salted_and_verify() {
        let a = hash("correct horse").await.expect("hash");
        let b = hash("correct horse").await.expect("hash");
        assert!(a.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{a}");
        assert_ne!(a, b, "each hash has its own salt");
        assert!(verify("correct horse", &a).await);
        assert!(!verify("correct horsE", &a).await);
        assert!(!verify("correct horse", "not a hash").await);
        assert!(!verify("anything", DECOY).await);
    }

    #[test]
    fn rules_and_stdin() {
        assert!(check_rules("short").is_err());
        assert!(check_rules(&"x".repeat(MAX_BYTES + 1)).is_err());
        assert!(check_rules("nul\0nul\0nul").is_err());
        assert!(check_rules("long enough").is_ok());
        assert_eq!(from_stdin_text("secret pw\n"), "secret pw");
        assert_eq!(from_stdin_text("secret pw\r\n"), "secret pw");
        assert_eq!(from_stdin_text("secret pw \n\n"), "secret pw \n");
    }
}
