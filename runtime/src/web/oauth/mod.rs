//! OAuth 2 as Mastodon speaks it (R-MAPI-1): apps register (`apps`), people sign in and consent
//! on server-rendered pages (`authorize`, `pages`, `session`, `throttle`), apps trade codes for
//! tokens and revoke them (`token`), and `metadata` describes it all (RFC 8414). The first-run
//! page that creates the owner (`setup`) is one of these pages too. Codes and
//! tokens are stored hashed (`codes`, `tokens`); scopes are `crate::scopes`.

use axum::Router;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::json;

use super::AppState;

pub mod apps;
pub mod authorize;
pub mod codes;
pub mod form;
pub mod metadata;
pub mod pages;
pub mod session;
pub mod setup;
pub mod throttle;
pub mod token;
pub mod tokens;

/// `urn:ietf:wg:oauth:2.0:oob`: show the code on a page instead of redirecting.
pub const OOB: &str = "urn:ietf:wg:oauth:2.0:oob";

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/apps", post(apps::create))
        .route(
            "/api/v1/apps/verify_credentials",
            get(apps::verify_credentials),
        )
        .route(
            "/oauth/authorize",
            get(authorize::show).post(authorize::decide),
        )
        .route("/oauth/sign_in", post(authorize::sign_in))
        .route("/auth/sign_in", get(authorize::sign_in_form))
        .route("/setup", get(setup::show).post(setup::create))
        .route("/auth/sign_out", post(authorize::sign_out))
        .route("/oauth/token", post(token::token))
        .route("/oauth/revoke", post(token::revoke))
        .route(
            "/.well-known/oauth-authorization-server",
            get(metadata::metadata),
        )
}

/// An RFC 6749 §5.2 error: `{"error": code, "error_description": …}` with its status.
#[derive(Debug)]
pub struct OAuthError {
    pub status: StatusCode,
    pub code: &'static str,
    pub description: String,
}

impl OAuthError {
    pub fn new(status: StatusCode, code: &'static str, description: impl Into<String>) -> Self {
        OAuthError {
            status,
            code,
            description: description.into(),
        }
    }
    pub fn invalid_request(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", description)
    }
    pub fn invalid_grant(description: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_grant", description)
    }
    pub fn invalid_client() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.",
        )
    }
}

impl IntoResponse for OAuthError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            axum::Json(json!({ "error": self.code, "error_description": self.description })),
        )
            .into_response();
        // RFC 6749 §5.2: a 401 names the scheme the client may authenticate with.
        if self.status == StatusCode::UNAUTHORIZED
            && let Ok(v) = header::HeaderValue::from_str("Basic realm=\"oauth\"")
        {
            resp.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        // §5.1: token responses and their errors must not be cached.
        resp.headers_mut().insert(
            header::CACHE_CONTROL,
            header::HeaderValue::from_static("no-store"),
        );
        resp
    }
}

impl From<sqlx::Error> for OAuthError {
    fn from(e: sqlx::Error) -> Self {
        tracing::warn!(error = %e, "database error while serving an OAuth request");
        OAuthError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "temporarily_unavailable",
            "database unavailable",
        )
    }
}

/// Client credentials of `Authorization: Basic` (RFC 6749 §2.3.1: each part form-urlencoded),
/// when the request carries them.
pub fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (id, secret) = text.split_once(':')?;
    let unescape = |s: &str| {
        url::form_urlencoded::parse(format!("x={s}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
    };
    Some((unescape(id)?, unescape(secret)?))
}

/// Constant-time equality of two byte strings of public length (hashes).
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_are_decoded_and_unescaped() {
        let mut h = HeaderMap::new();
        let enc = base64::engine::general_purpose::STANDARD.encode("my%20app:s%3Acret");
        h.insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_str(&format!("Basic {enc}")).expect("header"),
        );
        assert_eq!(
            basic_credentials(&h),
            Some(("my app".to_string(), "s:cret".to_string()))
        );
        h.insert(
            header::AUTHORIZATION,
            header::HeaderValue::from_static("Bearer abc"),
        );
        assert_eq!(basic_credentials(&h), None);
    }
}
