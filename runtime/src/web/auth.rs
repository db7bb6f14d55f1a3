//! Who is calling: the account of a bearer token, or the admin (`ADMIN_TOKEN`). Both are
//! request-part extractors, and axum runs those before the one extractor that reads the body,
//! so a handler that takes one refuses an unauthenticated request without reading its body.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::header;
use axum::http::request::Parts;

use super::{ApiError, AppState};
use crate::accounts::{self, Account};
use crate::scopes::Scopes;

/// The token of `Authorization: Bearer <token>`. The scheme is case-insensitive (RFC 9110
/// §11.1), the token is what follows it, trimmed; an empty token is no token.
fn bearer(parts: &Parts) -> Option<&str> {
    bearer_of(&parts.headers)
}

/// [`bearer`] of a header map (handlers that read tokens themselves).
pub fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim_start().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The account whose bearer token the request carries, whatever its scopes; 401 without one
/// or with a wrong one. Client-API routes take [`Needs`] instead, which also checks scopes.
pub struct Caller(pub Account);

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let (account, _) = token_holder(parts, s).await?;
        Ok(Caller(account))
    }
}

async fn token_holder(parts: &Parts, s: &AppState) -> Result<(Account, Scopes), ApiError> {
    let token = bearer(parts).ok_or_else(|| ApiError::unauthorized("missing bearer token"))?;
    if let Some(holder) = accounts::by_token(&s.pool, token).await? {
        return Ok(holder);
    }
    // A client-credentials token is valid but acts for no account: Mastodon's answer.
    if super::oauth::tokens::is_app_only(&s.pool, token).await? {
        return Err(ApiError::unprocessable(
            "This method requires an authenticated user",
        ));
    }
    Err(ApiError::unauthorized("invalid bearer token"))
}

/// A route's scope requirement: the token must hold one of `ANY_OF` (R-MAPI).
pub trait Need: Send + Sync + 'static {
    const ANY_OF: &'static [&'static str];
}

/// The marker types for [`Needs`], one per scope a route can require.
pub mod need {
    macro_rules! needs {
        ($($name:ident => [$($scope:literal),+];)*) => {$(
            pub struct $name;
            impl super::Need for $name {
                const ANY_OF: &'static [&'static str] = &[$($scope),+];
            }
        )*
            /// Every marker by its name, with the scopes it takes (the HTTP routes
            /// reference names a route's scopes from the marker in its handler's signature).
            pub const ALL: &[(&str, &[&str])] = &[$((stringify!($name), &[$($scope),+])),*];
        };
    }
    needs! {
        // `verify_credentials` is what the `profile` scope exists for.
        Profile => ["profile", "read:accounts"];
        ReadAccounts => ["read:accounts"];
        ReadBlocks => ["read:blocks"];
        ReadBookmarks => ["read:bookmarks"];
        ReadFavourites => ["read:favourites"];
        ReadFilters => ["read:filters"];
        ReadFollows => ["read:follows"];
        ReadLists => ["read:lists"];
        ReadMutes => ["read:mutes"];
        ReadNotifications => ["read:notifications"];
        ReadSearch => ["read:search"];
        ReadStatuses => ["read:statuses"];
        WriteAccounts => ["write:accounts"];
        WriteBlocks => ["write:blocks"];
        WriteBookmarks => ["write:bookmarks"];
        WriteConversations => ["write:conversations"];
        WriteFavourites => ["write:favourites"];
        WriteFilters => ["write:filters"];
        WriteFollows => ["write:follows"];
        WriteLists => ["write:lists"];
        WriteMedia => ["write:media"];
        WriteMutes => ["write:mutes"];
        WriteNotifications => ["write:notifications"];
        WriteReports => ["write:reports"];
        WriteStatuses => ["write:statuses"];
    }
}

/// A token holder whose token grants the scope `N` names: 401 without a valid token, 403 with
/// Mastodon's body when the token lacks the scope. Like [`Caller`] it runs before the body is
/// read. Take it as `Needs(account, _): Needs<need::ReadAccounts>`.
pub struct Needs<N: Need>(pub Account, pub PhantomData<N>);

impl<N: Need> FromRequestParts<AppState> for Needs<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        let (account, scopes) = token_holder(parts, s).await?;
        if !N::ANY_OF.iter().any(|need| scopes.grants(need)) {
            return Err(ApiError::forbidden(
                "This action is outside the authorized scopes",
            ));
        }
        Ok(Needs(account, PhantomData))
    }
}

/// Like [`Needs`] for routes anonymous readers may use too (public statuses, timelines):
/// `None` without an `Authorization` header; a header is checked exactly as [`Needs`] does
/// (401 for a bad token, 403 for a token without the scope), never silently anonymous.
pub struct MaybeNeeds<N: Need>(pub Option<Account>, pub PhantomData<N>);

impl<N: Need> FromRequestParts<AppState> for MaybeNeeds<N> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, ApiError> {
        if !parts.headers.contains_key(header::AUTHORIZATION) {
            return Ok(MaybeNeeds(None, PhantomData));
        }
        let Needs(account, _) = Needs::<N>::from_request_parts(parts, s).await?;
        Ok(MaybeNeeds(Some(account), PhantomData))
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
            return Err(ApiError::forbidden(
                "admin endpoints are disabled: set ADMIN_TOKEN",
            ));
        };
        match bearer(parts) {
            Some(given) if token_matches(given, want) => Ok(Admin),
            _ => Err(ApiError::unauthorized("missing or wrong bearer token")),
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
