//! Content negotiation on actor and post IRIs (R-WEB-1): the same URL answers a browser with
//! the page and an ActivityPub client with the JSON document. Our `/users/…` IRIs default to
//! JSON (what federation has always fetched there), Hollo's `/@handle` paths to the page;
//! whichever the `Accept` header ranks higher (by `q`) wins, a tie keeps the path's default.
//! Both answers carry `Vary: Accept`, so a shared cache keeps them apart.

use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::Response;

/// What a path answers when `Accept` does not decide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    Html,
    Json,
}

/// The highest `q` the `Accept` value gives any of `types` (`*/*` and `type/*` count at the
/// `q` they are given; a missing `q` is 1). Malformed parts are skipped.
fn quality(accept: &str, types: &[&str]) -> f32 {
    let mut best = 0.0f32;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or_default().trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        // Other parameters (`profile="…activitystreams"` of ld+json) do not change the type.
        for p in parts {
            let p = p.trim();
            if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                q = v.trim().parse::<f32>().unwrap_or(0.0).clamp(0.0, 1.0);
            }
        }
        let matches = types.iter().any(|t| {
            media == *t
                || media == "*/*"
                || media
                    .strip_suffix("/*")
                    .is_some_and(|major| t.split('/').next() == Some(major))
        });
        // A wildcard matches both sides: it counts only as a tie-breaker, never as a preference
        // for one (a browser's `*/*;q=0.8` must not beat its `text/html`).
        let exact = types.iter().any(|t| media == *t);
        let q = if exact { q } else { q * 0.001 };
        if matches && q > best {
            best = q;
        }
    }
    best
}

const HTML: &[&str] = &["text/html", "application/xhtml+xml"];
const ACTIVITY: &[&str] = &[
    "application/activity+json",
    "application/ld+json",
    "application/json",
];

/// Whether the request is answered with the HTML page.
pub fn wants_html(headers: &HeaderMap, default: Default) -> bool {
    let Some(accept) = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .filter(|a| !a.trim().is_empty())
    else {
        return default == Default::Html;
    };
    let (html, json) = (quality(accept, HTML), quality(accept, ACTIVITY));
    if html > json {
        true
    } else if json > html {
        false
    } else {
        default == Default::Html
    }
}

/// Adds `Vary: Accept` (keeping any other `Vary` the response has).
pub fn vary(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    let value = match h.get(header::VARY).and_then(|v| v.to_str().ok()) {
        Some(v) if v.to_ascii_lowercase().contains("accept") => return resp,
        Some(v) if !v.is_empty() => format!("{v}, Accept"),
        _ => "Accept".to_string(),
    };
    if let Ok(v) = HeaderValue::from_str(&value) {
        h.insert(header::VARY, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_str(v).expect("header"));
        h
    }

    #[test]
    fn browsers_get_pages_and_servers_get_json() {
        let firefox = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
        let mastodon = "application/activity+json, application/ld+json";
        let ld = "application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\"";
        for d in [Default::Html, Default::Json] {
            assert!(wants_html(&accept(firefox), d));
            assert!(!wants_html(&accept(mastodon), d));
            assert!(!wants_html(&accept(ld), d));
            assert!(!wants_html(&accept("application/json"), d));
            assert!(wants_html(
                &accept("text/html;q=0.9, application/json;q=0.5"),
                d
            ));
            assert!(!wants_html(
                &accept("text/html;q=0.1, application/activity+json"),
                d
            ));
        }
        // No preference: the path decides.
        for a in [
            "*/*",
            "",
            "image/png",
            "text/html;q=0, application/json;q=0",
        ] {
            assert!(wants_html(&accept(a), Default::Html), "{a:?}");
            assert!(!wants_html(&accept(a), Default::Json), "{a:?}");
        }
        assert!(wants_html(&HeaderMap::new(), Default::Html));
        assert!(!wants_html(&HeaderMap::new(), Default::Json));
        // Garbage is no preference.
        assert!(!wants_html(&accept(";;,q=x,text/"), Default::Json));
    }
}
