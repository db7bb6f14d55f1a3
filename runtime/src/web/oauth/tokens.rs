//! Bearer tokens issued through OAuth: rows of `account_tokens` (only a SHA-256 of the token)
//! with their scopes and app. A client-credentials token has an app and no account: it may
//! call app-level endpoints (`/api/v1/apps/verify_credentials`), and account endpoints answer
//! it 422 "This method requires an authenticated user", as Mastodon does.

use sqlx::{PgExecutor, PgPool};
use uuid::Uuid;

use crate::accounts::{hash_token, new_token};
use crate::scopes::Scopes;

/// Stores a fresh token for `account` (or none: client credentials) and `app`; returns it.
pub async fn issue<'e>(
    exec: impl PgExecutor<'e>,
    account: Option<Uuid>,
    app: Uuid,
    scopes: &Scopes,
) -> Result<String, sqlx::Error> {
    let token = new_token();
    sqlx::query(
        "INSERT INTO account_tokens (token_hash, account_id, app_id, scopes) VALUES ($1, $2, $3, $4)",
    )
    .bind(hash_token(&token))
    .bind(account)
    .bind(app)
    .bind(scopes.to_string())
    .execute(exec)
    .await?;
    Ok(token)
}

/// The app a token was issued to (`None` for unknown tokens and CLI-made ones).
pub async fn app_of(pool: &PgPool, token: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT app_id FROM account_tokens WHERE token_hash = $1 AND app_id IS NOT NULL",
    )
    .bind(hash_token(token))
    .fetch_optional(pool)
    .await
}

/// Whether `token` is a client-credentials token (an app's, no account's).
pub async fn is_app_only(pool: &PgPool, token: &str) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM account_tokens WHERE token_hash = $1 AND account_id IS NULL)",
    )
    .bind(hash_token(token))
    .fetch_one(pool)
    .await
}

/// Revokes `token` if `app` owns it; another app's token or an unknown one is left alone
/// (RFC 7009 §2.2 answers 200 either way).
pub async fn revoke(pool: &PgPool, app: Uuid, token: &str) -> Result<bool, sqlx::Error> {
    let deleted = sqlx::query("DELETE FROM account_tokens WHERE token_hash = $1 AND app_id = $2")
        .bind(hash_token(token))
        .bind(app)
        .execute(pool)
        .await?
        .rows_affected();
    Ok(deleted > 0)
}
