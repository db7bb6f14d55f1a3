//! The sign-in session of the authorization pages and their CSRF protection. Both live in
//! cookies that are `HttpOnly` and `SameSite=Lax`, and `Secure` when the request came over
//! https (`PUBLIC_URL` is https, or `BEHIND_PROXY` and `X-Forwarded-Proto: https`). A session
//! is a random token whose SHA-256 is a row of `web_sessions`, so every web node knows it.
//! CSRF is a double-submit token: a random `hollo_csrf` cookie that each form repeats in a
//! hidden field; another site can neither read the cookie nor (SameSite) send it with a POST.

use axum::http::{HeaderMap, HeaderValue, header};
use sqlx::PgPool;
use uuid::Uuid;

use crate::federation::accounts::{self, Account, hash_token, new_token};
use crate::web::AppState;

pub const SESSION_COOKIE: &str = "hollo_session";
pub const CSRF_COOKIE: &str = "hollo_csrf";
/// How long a sign-in lasts on a browser.
pub const SESSION_DAYS: i64 = 7;

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

/// Whether the browser reached us over https.
pub fn over_https(s: &AppState, headers: &HeaderMap) -> bool {
    s.public_origin.starts_with("https://")
        || s.behind_proxy
            && headers
                .get("x-forwarded-proto")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| {
                    v.split(',')
                        .next()
                        .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"))
                })
}

/// A `Set-Cookie` value with the attributes every cookie of ours has.
pub fn set_cookie(
    name: &str,
    value: &str,
    max_age_seconds: i64,
    secure: bool,
) -> Option<HeaderValue> {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path=/; Max-Age={max_age_seconds}; HttpOnly; SameSite=Lax{secure}"
    ))
    .ok()
}

/// The signed-in account of the request's session cookie.
pub async fn current(pool: &PgPool, headers: &HeaderMap) -> Result<Option<Account>, sqlx::Error> {
    let Some(token) = cookie(headers, SESSION_COOKIE) else {
        return Ok(None);
    };
    let id: Option<Uuid> = sqlx::query_scalar(
        "SELECT account_id FROM web_sessions WHERE id_hash = $1 AND expires_at > now()",
    )
    .bind(hash_token(token))
    .fetch_optional(pool)
    .await?;
    match id {
        Some(id) => accounts::by_id(pool, id).await,
        None => Ok(None),
    }
}

/// Starts a session for `account`; returns the cookie value.
pub async fn start(pool: &PgPool, account: Uuid) -> Result<String, sqlx::Error> {
    let token = new_token();
    sqlx::query(
        "INSERT INTO web_sessions (id_hash, account_id, expires_at)
         VALUES ($1, $2, now() + make_interval(days => $3))",
    )
    .bind(hash_token(&token))
    .bind(account)
    .bind(SESSION_DAYS as i32)
    .execute(pool)
    .await?;
    // Expired sessions go as new ones come; no sweeper needed.
    sqlx::query("DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day'")
        .execute(pool)
        .await?;
    Ok(token)
}

/// The CSRF token of this browser, and whether it is new (then it must be set as a cookie).
pub fn csrf_token(headers: &HeaderMap) -> (String, bool) {
    match cookie(headers, CSRF_COOKIE) {
        Some(t)
            if t.len() >= 32
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            (t.to_owned(), false)
        }
        _ => (new_token(), true),
    }
}

/// Whether a form's `csrf` field repeats the browser's CSRF cookie.
pub fn csrf_ok(headers: &HeaderMap, field: Option<&str>) -> bool {
    match (cookie(headers, CSRF_COOKIE), field) {
        (Some(c), Some(f)) => super::same_bytes(c.as_bytes(), f.as_bytes()),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_among_others() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; hollo_csrf=abc"),
        );
        h.append(
            header::COOKIE,
            HeaderValue::from_static("hollo_session=xyz"),
        );
        assert_eq!(cookie(&h, CSRF_COOKIE), Some("abc"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("xyz"));
        assert_eq!(cookie(&h, "b"), None);
        assert!(csrf_ok(&h, Some("abc")));
        assert!(!csrf_ok(&h, Some("abd")));
        assert!(!csrf_ok(&h, None));
    }

    #[test]
    fn cookies_are_httponly_lax_and_secure_over_https() {
        let c = set_cookie("n", "v", 60, true).expect("cookie");
        assert_eq!(c, "n=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
        let c = set_cookie("n", "v", 60, false).expect("cookie");
        assert!(!c.to_str().expect("text").contains("Secure"));
    }
}
