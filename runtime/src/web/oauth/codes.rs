//! Authorization codes (RFC 6749 §4.1): random, stored hashed, valid for [`LIFETIME`], used
//! once. Trading one checks the app, the redirect URI it was issued for and, when the app sent
//! a PKCE challenge, the verifier (RFC 7636, S256 only). A second use of a code fails and
//! revokes the token the first use bought (§4.1.2: the code may have been stolen).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use super::OAuthError;
use super::apps::App;
use crate::accounts::{hash_token, new_token};
use crate::scopes::Scopes;

/// How long a code may wait for its exchange (Doorkeeper's default, which Mastodon uses).
pub const LIFETIME_SECONDS: i64 = 600;

/// What the consent page grants, stored under the code.
pub struct Grant<'a> {
    pub app: Uuid,
    pub account: Uuid,
    pub redirect_uri: &'a str,
    pub scopes: &'a Scopes,
    pub code_challenge: Option<&'a str>,
}

pub async fn create(pool: &PgPool, grant: &Grant<'_>) -> Result<String, sqlx::Error> {
    let code = new_token();
    sqlx::query(
        "INSERT INTO oauth_codes (code_hash, app_id, account_id, redirect_uri, scopes, code_challenge, expires_at)
         VALUES ($1, $2, $3, $4, $5, $6, now() + make_interval(secs => $7))",
    )
    .bind(hash_token(&code))
    .bind(grant.app)
    .bind(grant.account)
    .bind(grant.redirect_uri)
    .bind(grant.scopes.to_string())
    .bind(grant.code_challenge)
    .bind(LIFETIME_SECONDS as f64)
    .execute(pool)
    .await?;
    Ok(code)
}

/// `BASE64URL(SHA256(verifier)) == challenge` (RFC 7636 §4.6), the verifier 43–128
/// unreserved characters (§4.1).
pub fn pkce_matches(verifier: &str, challenge: &str) -> bool {
    let well_formed = (43..=128).contains(&verifier.len())
        && verifier
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    let computed = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    well_formed && super::same_bytes(computed.as_bytes(), challenge.as_bytes())
}

#[derive(sqlx::FromRow)]
struct Row {
    app_id: Uuid,
    account_id: Uuid,
    redirect_uri: String,
    scopes: String,
    code_challenge: Option<String>,
    expired: bool,
    used: bool,
    token_hash: Option<Vec<u8>>,
}

/// Trades `code` for a new token of its account, or an `invalid_grant`.
pub async fn exchange(
    pool: &PgPool,
    app: &App,
    code: &str,
    redirect_uri: Option<&str>,
    verifier: Option<&str>,
) -> Result<(String, Scopes), OAuthError> {
    let mut tx = pool.begin().await?;
    let row: Option<Row> = sqlx::query_as(
        "SELECT app_id, account_id, redirect_uri, scopes, code_challenge,
                expires_at < now() AS expired, used_at IS NOT NULL AS used, token_hash
           FROM oauth_codes WHERE code_hash = $1 FOR UPDATE",
    )
    .bind(hash_token(code))
    .fetch_optional(&mut *tx)
    .await?;
    let invalid = || {
        OAuthError::invalid_grant(
            "The provided authorization grant is invalid, expired, revoked, does not match the redirection URI used in the authorization request, or was issued to another client.",
        )
    };
    let Some(row) = row else {
        return Err(invalid());
    };
    if row.app_id != app.id {
        return Err(invalid());
    }
    if row.used {
        if let Some(hash) = &row.token_hash {
            sqlx::query("DELETE FROM account_tokens WHERE token_hash = $1")
                .bind(hash)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        tracing::warn!(app = %app.client_id, "an authorization code was replayed; its token is revoked");
        return Err(invalid());
    }
    if row.expired || redirect_uri != Some(row.redirect_uri.as_str()) {
        return Err(invalid());
    }
    // An empty field is what a form sends for "none".
    let verifier = verifier.filter(|v| !v.is_empty());
    match (&row.code_challenge, verifier) {
        (Some(_), None) => {
            return Err(OAuthError::invalid_grant(
                "code_verifier is required: the authorization request sent a code_challenge",
            ));
        }
        (Some(challenge), Some(verifier)) if !pkce_matches(verifier, challenge) => {
            return Err(OAuthError::invalid_grant(
                "the code_verifier does not match the code_challenge",
            ));
        }
        // A verifier for a code issued without a challenge: a PKCE downgrade (RFC 9700
        // §2.1.1: the server must refuse it), R-API.
        (None, Some(_)) => {
            return Err(OAuthError::invalid_grant(
                "code_verifier sent, but the authorization request had no code_challenge",
            ));
        }
        _ => {}
    }
    let scopes = Scopes::parse(&row.scopes).unwrap_or_default();
    let token = super::tokens::issue(&mut *tx, Some(row.account_id), app.id, &scopes).await?;
    sqlx::query("UPDATE oauth_codes SET used_at = now(), token_hash = $2 WHERE code_hash = $1")
        .bind(hash_token(code))
        .bind(hash_token(&token))
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok((token, scopes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pkce_s256_matches_the_rfc_example() {
        // RFC 7636 appendix B.
        let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
        let challenge = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
        assert!(pkce_matches(verifier, challenge));
        assert!(!pkce_matches(
            "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXj",
            challenge
        ));
        assert!(!pkce_matches("short", challenge));
    }
}
