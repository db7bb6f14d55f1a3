//! Caching of the public pages (R-WEB-1 "cacheable"): every page and feed is the anonymous
//! reader's view, the same for everyone, so it is `Cache-Control: public` for a minute, with a
//! strong `ETag` and `Last-Modified` (the newest thing shown). The ETag of profiles, tag pages,
//! their feeds and the home page is computed from database facts before rendering
//! (`validator`), so a revalidation is answered without a render; a post's page (its thread)
//! still hashes its body. A request whose `If-None-Match` names the current ETag gets `304 Not
//! Modified` without the body. `If-Modified-Since` alone is not trusted for a 304: a page changes with things that
//! have no time of their own (a count, a deletion), the ETag sees every change.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use sha2::Digest;

/// How long a shared cache or a browser may reuse a page without asking again.
pub const MAX_AGE_SECONDS: u32 = 60;

/// The strong validator of a body.
pub fn etag(body: &str) -> String {
    let d = sha2::Sha256::digest(body.as_bytes());
    let hex: String = d.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("\"{hex}\"")
}

/// Whether `If-None-Match` (a list, `*`, weak or strong tags) names `tag`.
pub fn matches(req: &HeaderMap, tag: &str) -> bool {
    req.get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .any(|t| t == "*" || t.trim_start_matches("W/") == tag)
}

/// 200 with `body`, or 304 when the reader already has it; validators and `Cache-Control`
/// on both. `tag` is the page's validator when it was computed before rendering; else the
/// body's hash.
pub fn conditional(
    req: &HeaderMap,
    body: String,
    last_modified: Option<DateTime<Utc>>,
    tag: Option<String>,
) -> Response {
    let tag = tag.unwrap_or_else(|| etag(&body));
    let mut resp = if matches(req, &tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (StatusCode::OK, body).into_response()
    };
    validators(&mut resp, &tag, last_modified);
    resp
}

/// The 304 for a reader whose copy is current by a validator computed before rendering, or
/// `None` (render the page).
pub fn not_modified(req: &HeaderMap, tag: &str) -> Option<Response> {
    matches(req, tag).then(|| {
        let mut resp = StatusCode::NOT_MODIFIED.into_response();
        validators(&mut resp, tag, None);
        resp
    })
}

/// `ETag`, `Last-Modified` (when known) and `Cache-Control`.
fn validators(resp: &mut Response, tag: &str, last_modified: Option<DateTime<Utc>>) {
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(header::ETAG, v);
    }
    if let Some(at) = last_modified {
        let at = std::time::SystemTime::from(at);
        if let Ok(v) = HeaderValue::from_str(&httpdate::fmt_http_date(at)) {
            h.insert(header::LAST_MODIFIED, v);
        }
    }
    if let Ok(v) = HeaderValue::from_str(&format!("public, max-age={MAX_AGE_SECONDS}")) {
        h.insert(header::CACHE_CONTROL, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_current_copy_is_not_sent_again() {
        let tag = etag("page");
        let mut req = HeaderMap::new();
        let r = conditional(&req, "page".into(), None, None);
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::ETAG], tag.as_str());
        for given in [
            tag.clone(),
            format!("W/{tag}"),
            format!("\"x\", {tag}"),
            "*".into(),
        ] {
            req.insert(
                header::IF_NONE_MATCH,
                HeaderValue::from_str(&given).expect("h"),
            );
            let r = conditional(&req, "page".into(), None, None);
            assert_eq!(r.status(), StatusCode::NOT_MODIFIED, "{given}");
        }
        assert!(not_modified(&req, &tag).is_some());
        assert!(not_modified(&req, "\"other\"").is_some(), "`*` matches any");
        req.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"old\""));
        assert!(not_modified(&req, &tag).is_none());
        assert_eq!(
            conditional(&req, "page".into(), None, None).status(),
            StatusCode::OK
        );
    }
}
