//! Who is calling: the account of a bearer token, or the admin (`ADMIN_TOKEN`). Both are
//! request-part extractors, and axum runs those before the one extractor that reads the body,
//! so a handler that takes one refuses an unauthenticated request without reading its body.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{StatusCode, header};

use super::{ApiError, AppState};
use crate::federation::accounts::{self, Account};

/// The token of `Authorization: Bearer <token>`. The scheme is case-insensitive (RFC 9110
/// §11.1), the token is what follows it, trimmed; an empty token is no token.
fn bearer(parts: &Parts) -> Option<&str> {
    let value = parts.headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The account whose bearer token the request carries; 401 without one or with a wrong one.
pub struct Caller(pub Account);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts)
            .ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "missing bearer token".into()))?;
        accounts::by_token(&s.pool, token)
            .await?
            .map(Caller)
            .ok_or_else(|| ApiError(StatusCode::UNAUTHORIZED, "invalid bearer token".into()))
    }
}

/// Anonymous or an account: `None` without an `Authorization` header; a header that does not
/// name an account is still a 401, never silently anonymous.
pub struct MaybeCaller(pub Option<Account>);

impl FromRequestParts<AppState> for MaybeCaller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        if !parts.headers.contains_key(header::AUTHORIZATION) {
            return Ok(MaybeCaller(None));
        }
        let Caller(account) = Caller::from_request_parts(parts, s).await?;
        Ok(MaybeCaller(Some(account)))
    }
}

/// `Authorization: Bearer $ADMIN_TOKEN`; with no token configured admin endpoints answer 403.
pub struct Admin;

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let Some(want) = s.admin_token.as_deref() else {
            return Err(ApiError(
                StatusCode::FORBIDDEN,
                "admin endpoints are disabled: set ADMIN_TOKEN".into(),
            ));
        };
        match bearer(parts) {
            Some(given) if token_matches(given, want) => Ok(Admin),
            _ => Err(ApiError(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token".into(),
            )),
        }
    }
}

/// Constant-time comparison, so the token cannot be guessed byte by byte from timings.
fn token_matches(given: &str, want: &str) -> bool {
    let (a, b) = (given.as_bytes(), want.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(auth: &str) -> Parts {
        let (parts, ()) = axum::http::Request::builder()
            .header(header::AUTHORIZATION, auth)
            .body(())
            .expect("request")
            .into_parts();
        parts
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive_and_the_token_trimmed() {
        for h in ["Bearer abc", "bearer abc", "BEARER  abc ", " Bearer abc"] {
            assert_eq!(bearer(&parts(h)), Some("abc"), "{h:?}");
        }
        for h in ["Basic abc", "Bearer", "Bearer   ", "Bearerabc"] {
            assert_eq!(bearer(&parts(h)), None, "{h:?}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches("secret", "secret"));
        assert!(!token_matches("secre", "secret"));
        assert!(!token_matches("secreT", "secret"));
    }
}
