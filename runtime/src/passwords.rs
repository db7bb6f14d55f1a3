//! Account passwords: argon2id hashes in PHC form (`$argon2id$v=19$…`, salt and parameters
//! inside), checked in constant time by the `argon2` crate. Hashing costs ~20 MiB and tens of
//! milliseconds on purpose, so it runs on the blocking pool, never on an async worker.

use anyhow::{Context, Result, bail};
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use sqlx::PgPool;

use crate::federation::accounts::{self, Account};

/// Shortest password accepted (Mastodon's minimum).
pub const MIN_CHARS: usize = 8;
/// Longest password accepted: longer ones are no stronger and cost hashing time.
pub const MAX_BYTES: usize = 1024;

/// argon2id with the RFC 9106 second recommended parameters as the crate defaults them
/// (m = 19 MiB, t = 2, p = 1), named here so a crate upgrade cannot silently change them.
fn hasher() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).unwrap_or_default();
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
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

/// Whether `password` matches the PHC string `stored` (false for a malformed one).
pub async fn verify(password: &str, stored: &str) -> bool {
    let (password, stored) = (password.to_owned(), stored.to_owned());
    tokio::task::spawn_blocking(move || {
        PasswordHash::new(&stored)
            .is_ok_and(|h| hasher().verify_password(password.as_bytes(), &h).is_ok())
    })
    .await
    .unwrap_or(false)
}

/// A hash of nothing anyone can type, verified when the account does not exist or has no
/// password, so a sign-in takes as long whether or not the name is taken.
const DECOY: &str = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$0sE3s0p9Bf4mYwM1Zz8kYmJmYcYx3M6G0Zlq2m5Z8xI";

/// Sets (or replaces) the password of the account named `username`, and — in the same
/// transaction — ends what the old password opened (issue 28 item 10, as Mastodon does on a
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

/// The account whose name and password these are, or `None`.
pub async fn sign_in(
    pool: &PgPool,
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
    let ok = verify(password, stored.as_deref().unwrap_or(DECOY)).await;
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
