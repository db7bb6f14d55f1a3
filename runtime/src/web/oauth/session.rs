//! The sign-in session of the authorization pages and their CSRF protection. Both live in
//! cookies that are `HttpOnly` and `SameSite=Lax`, and `Secure` when the request came over
//! https (`PUBLIC_URL` is https, or `BEHIND_PROXY` and `X-Forwarded-Proto: https`). A session
//! is a random token whose SHA-256 is a row of `web_sessions`, so every web node knows it.
//! CSRF: a signed-in browser's forms carry a token derived from its session (a SHA-256 of the
//! session cookie, which no other site can read), so a token is good for that session only and
//! a cookie planted by someone else (a sibling subdomain, a plain-http hop) proves nothing; a
//! browser not yet signed in uses a double-submit token (a random `hollo_csrf` cookie repeated
//! in a hidden field). Every form POST also checks `Origin`, when the browser sends it, against
//! `PUBLIC_URL` (R-API).

use axum::http::{HeaderMap, HeaderValue, header};
use sqlx::PgPool;
use uuid::Uuid;

use crate::accounts::{self, Account, hash_token, new_token};
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

/// The CSRF token bound to a session cookie: not a secret of ours, but only someone who holds
/// the session cookie can compute it.
fn session_csrf(session: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(hash_token(&format!("csrf:{session}")))
}

/// The CSRF token of this browser, and whether it is new (then it must be set as a cookie).
pub fn csrf_token(headers: &HeaderMap) -> (String, bool) {
    if let Some(session) = cookie(headers, SESSION_COOKIE) {
        return (session_csrf(session), false);
    }
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

/// Whether a form's `csrf` field is the token of the browser's session (signed in) or repeats
/// its CSRF cookie (not signed in).
pub fn csrf_ok(headers: &HeaderMap, field: Option<&str>) -> bool {
    if let Some(session) = cookie(headers, SESSION_COOKIE) {
        return field
            .is_some_and(|f| super::same_bytes(session_csrf(session).as_bytes(), f.as_bytes()));
    }
    match (cookie(headers, CSRF_COOKIE), field) {
        (Some(c), Some(f)) => super::same_bytes(c.as_bytes(), f.as_bytes()),
        _ => false,
    }
}

/// Whether the request's `Origin`, when there is one, is our own (`PUBLIC_URL`'s origin). A
/// browser sends it with every form POST; `null` (a sandboxed or privacy-redirected page) is
/// not ours. Without the header (an old browser, a non-browser client) CSRF alone decides.
pub fn origin_ok(public_origin: &str, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let ours = public_origin.trim_end_matches('/');
    origin
        .to_str()
        .is_ok_and(|o| o.trim_end_matches('/').eq_ignore_ascii_case(ours))
}

/// Ends the request's session, if any (signing out).
pub async fn end(pool: &PgPool, headers: &HeaderMap) -> Result<(), sqlx::Error> {
    if let Some(token) = cookie(headers, SESSION_COOKIE) {
        sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1")
            .bind(hash_token(token))
            .execute(pool)
            .await?;
    }
    Ok(())
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
        // Signed in: the token is the session's, not the CSRF cookie's.
        assert!(!csrf_ok(&h, Some("abc")));
        assert!(csrf_ok(&h, Some(&session_csrf("xyz"))));
        assert_eq!(csrf_token(&h), (session_csrf("xyz"), false));
        assert!(!csrf_ok(&h, None));
        let mut anon = HeaderMap::new();
        anon.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; hollo_csrf=abc"),
        );
        assert!(csrf_ok(&anon, Some("abc")));
        assert!(!csrf_ok(&anon, Some("abd")));
        assert!(!csrf_ok(&anon, None));
    }

    #[test]
    fn only_our_own_origin_may_post_forms() {
        let ours = "https://h.example";
        let with = |o: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::ORIGIN, HeaderValue::from_static(o));
            h
        };
        assert!(origin_ok(ours, &HeaderMap::new()));
        assert!(origin_ok(ours, &with("https://h.example")));
        assert!(origin_ok(ours, &with("HTTPS://H.example")));
        for bad in [
            "https://evil.example",
            "null",
            "http://h.example",
            "https://h.example:444",
        ] {
            assert!(!origin_ok(ours, &with(bad)), "{bad}");
        }
    }

    #[test]
    fn cookies_are_httponly_lax_and_secure_over_https() {
        let c = set_cookie("n", "v", 60, true).expect("cookie");
        assert_eq!(c, "n=v; Path=/; Max-Age=60; HttpOnly; SameSite=Lax; Secure");
        let c = set_cookie("n", "v", 60, false).expect("cookie");
        assert!(!c.to_str().expect("text").contains("Secure"));
    }
}
