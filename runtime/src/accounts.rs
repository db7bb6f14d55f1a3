//! Local accounts and their API bearer tokens. A token is shown once, at creation; only its
//! SHA-256 is stored, so a database dump does not hand out API access.

use anyhow::{Result, bail};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::federation::crypto::keys::{self, KeyCipher};
use crate::scopes::Scopes;

#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Account {
    pub id: Uuid,
    pub username: String,
    pub admin: bool,
    pub public_key_pem: String,
    pub private_key_enc: Vec<u8>,
}

const COLUMNS: &str = "id, username, admin, public_key_pem, private_key_enc";

/// Mastodon's rule: letters, digits and underscores, at most 30.
pub fn valid_username(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 30
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

pub fn hash_token(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// A fresh random token (256 bits, URL-safe): bearer tokens, OAuth codes, sessions.
pub fn new_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

/// Creates an account with a fresh key pair (its private half encrypted by `cipher`, the
/// federation's) and returns it with its first bearer token.
pub async fn create(
    pool: &PgPool,
    cipher: &KeyCipher,
    username: &str,
    admin: bool,
) -> Result<(Account, String)> {
    create_with_password(pool, cipher, username, admin, None).await
}

/// [`create`], with the argon2id hash of its password (`crate::passwords::hash`) written in
/// the same transaction, so a refused password leaves no account behind.
pub async fn create_with_password(
    pool: &PgPool,
    cipher: &KeyCipher,
    username: &str,
    admin: bool,
    password_hash: Option<&str>,
) -> Result<(Account, String)> {
    let new = NewAccount {
        username,
        admin,
        password_hash,
        token: true,
    };
    match create_unless_taken(pool, cipher, new).await? {
        Some((account, Some(token))) => Ok((account, token)),
        Some((_, None)) => bail!("account {username:?} was created without its token"),
        None => bail!("account {username:?} already exists"),
    }
}

/// What [`create_unless_taken`] makes.
#[derive(Debug, Clone, Copy)]
pub struct NewAccount<'a> {
    pub username: &'a str,
    pub admin: bool,
    /// The argon2id hash of its password (`crate::passwords::hash`), if it has one.
    pub password_hash: Option<&'a str>,
    /// Make its first bearer token too (in the same transaction).
    pub token: bool,
}

/// Creates `new` with a fresh key pair and returns it with its token when one was asked for;
/// `None` when the name is taken (in any letter case), a concurrent create's included: the
/// declarative first account (`hollo account create --if-absent`) then leaves it alone.
pub async fn create_unless_taken(
    pool: &PgPool,
    cipher: &KeyCipher,
    new: NewAccount<'_>,
) -> Result<Option<(Account, Option<String>)>> {
    let username = new.username;
    if !valid_username(username) {
        bail!("invalid account name {username:?}: use 1–30 letters, digits or underscores");
    }
    if by_username(pool, username).await?.is_some() {
        return Ok(None);
    }
    let keys = NewKeys::generate(cipher).await?;
    let mut tx = pool.begin().await?;
    let Some(account) = keys
        .insert(&mut tx, username, new.admin, new.password_hash)
        .await?
    else {
        return Ok(None);
    };
    let token = if new.token {
        let token = new_token();
        sqlx::query("INSERT INTO account_tokens (token_hash, account_id) VALUES ($1, $2)")
            .bind(hash_token(&token))
            .bind(account.id)
            .execute(&mut *tx)
            .await?;
        Some(token)
    } else {
        None
    };
    tx.commit().await?;
    Ok(Some((account, token)))
}

/// Creates the owner — an administrator, as `hollo account create --admin` makes — only while
/// no account exists: the first-run page's account. The table is locked against every other
/// insert for the check and the insert (`SHARE ROW EXCLUSIVE` conflicts with itself and with
/// `INSERT`), so two at once make one owner, and an account the CLI creates meanwhile closes
/// the page too. The setup tokens go in the same transaction. `None`: an account exists.
pub async fn create_owner(
    pool: &PgPool,
    cipher: &KeyCipher,
    username: &str,
    password_hash: &str,
) -> Result<Option<Account>> {
    if !valid_username(username) {
        bail!("invalid account name {username:?}: use 1–30 letters, digits or underscores");
    }
    let keys = NewKeys::generate(cipher).await?;
    let mut tx = pool.begin().await?;
    sqlx::query("LOCK TABLE accounts IN SHARE ROW EXCLUSIVE MODE")
        .execute(&mut *tx)
        .await?;
    let any: bool = sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM accounts)")
        .fetch_one(&mut *tx)
        .await?;
    if any {
        return Ok(None);
    }
    let account = keys
        .insert(&mut tx, username, true, Some(password_hash))
        .await?;
    sqlx::query("DELETE FROM setup_tokens")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(account)
}

/// A new account's id and key pair, made before any transaction opens: RSA generation is CPU
/// work of a second or so.
struct NewKeys {
    id: Uuid,
    public_key_pem: String,
    private_key_enc: Vec<u8>,
}

impl NewKeys {
    async fn generate(cipher: &KeyCipher) -> Result<NewKeys> {
        // Off the async workers.
        let key = tokio::task::spawn_blocking(keys::generate).await??;
        let id = Uuid::now_v7();
        Ok(NewKeys {
            id,
            public_key_pem: keys::public_key_pem(&key)?,
            private_key_enc: cipher.encrypt(id, &key)?,
        })
    }

    /// Inserts the account; `None` when the name is taken.
    async fn insert(
        self,
        tx: &mut sqlx::PgConnection,
        username: &str,
        admin: bool,
        password_hash: Option<&str>,
    ) -> Result<Option<Account>, sqlx::Error> {
        let inserted = sqlx::query(
            "INSERT INTO accounts (id, username, admin, public_key_pem, private_key_enc, password_hash)
             VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
        )
        .bind(self.id)
        .bind(username)
        .bind(admin)
        .bind(&self.public_key_pem)
        .bind(&self.private_key_enc)
        .bind(password_hash)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        Ok((inserted == 1).then(|| Account {
            id: self.id,
            username: username.to_string(),
            admin,
            public_key_pem: self.public_key_pem,
            private_key_enc: self.private_key_enc,
        }))
    }
}

/// Takes the row lock of `account` (`FOR UPDATE`) for the rest of the transaction: the writes
/// checked against a per-account limit (lists, filters, pins, featured tags, scheduled
/// statuses) take it first, so two at once cannot both pass the limit.
pub async fn lock<'e>(exec: impl PgExecutor<'e>, account: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE")
        .bind(account)
        .execute(exec)
        .await?;
    Ok(())
}

pub async fn by_username<'e>(
    exec: impl PgExecutor<'e>,
    username: &str,
) -> Result<Option<Account>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM accounts WHERE lower(username) = lower($1)"
    )))
    .bind(username)
    .fetch_optional(exec)
    .await
}

pub async fn by_id<'e>(
    exec: impl PgExecutor<'e>,
    id: Uuid,
) -> Result<Option<Account>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM accounts WHERE id = $1"
    )))
    .bind(id)
    .fetch_optional(exec)
    .await
}

/// Many accounts by id (one query), in no particular order; unknown ids are left out.
pub async fn by_ids<'e>(
    exec: impl PgExecutor<'e>,
    ids: &[Uuid],
) -> Result<Vec<Account>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM accounts WHERE id = ANY($1)"
    )))
    .bind(ids)
    .fetch_all(exec)
    .await
}

/// The account a bearer token belongs to and the scopes the token holds.
pub async fn by_token(
    pool: &PgPool,
    token: &str,
) -> Result<Option<(Account, Scopes)>, sqlx::Error> {
    #[derive(sqlx::FromRow)]
    struct Row {
        #[sqlx(flatten)]
        account: Account,
        scopes: String,
    }
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {}, t.scopes FROM accounts a JOIN account_tokens t ON t.account_id = a.id WHERE t.token_hash = $1",
        COLUMNS
            .split(", ")
            .map(|c| format!("a.{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    )))
    .bind(hash_token(token))
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|Row { account, scopes }| {
        // The column is written only from parsed scopes; an unknown one (a newer version's
        // scope after a rollback) must not widen the token, so it grants nothing.
        let scopes = Scopes::parse(&scopes).unwrap_or_default();
        (account, scopes)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usernames_follow_mastodon_rules() {
        assert!(valid_username("alice_01"));
        for bad in ["", "a b", "al/ice", "ålice", &"x".repeat(31)] {
            assert!(!valid_username(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_are_random_and_hashed() {
        let (a, b) = (new_token(), new_token());
        assert_ne!(a, b);
        assert_eq!(a.len(), 43);
        assert_eq!(hash_token(&a).len(), 32);
        assert_ne!(hash_token(&a), a.as_bytes());
    }
}
