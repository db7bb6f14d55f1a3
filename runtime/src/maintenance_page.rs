//! `hollo maintenance-page` (R-OP-ZD): while an upgrade stops every web node to migrate
//! the schema, the operator runs this in the web Service's place so clients get a clean
//! `503 Service Unavailable` with `Retry-After` instead of refused connections. Remote servers
//! back off and retry deliveries (R-FED delivery retries honour `Retry-After`), apps show an
//! error, browsers a small notice.
//!
//! No database, no secret, no state: every path answers 503, except `/healthz` and `/readyz`
//! (200, for the pod's probes). JSON (`{"error": …}`, Mastodon's error shape) for the API,
//! OAuth, inboxes, ActivityPub and `.well-known` paths and for any client that asks for JSON
//! or ActivityStreams; a small HTML page for everything else.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use crate::config::{Env, vars};

/// What one request gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: StatusCode,
    pub content_type: &'static str,
    pub body: String,
}

const ERROR: &str = "This server is being upgraded and will be back shortly; retry later.";

/// Whether a request wants JSON: API, OAuth, federation and discovery paths, or an `Accept`
/// naming JSON or ActivityStreams (a remote server fetching an actor or delivering).
pub fn wants_json(path: &str, accept: Option<&str>) -> bool {
    let json_path = ["/api/", "/oauth/", "/.well-known/", "/nodeinfo/", "/inbox"]
        .iter()
        .any(|p| path.starts_with(p))
        || path.ends_with("/inbox")
        || path.ends_with("/outbox")
        || path.starts_with("/users/") && !accept.is_some_and(|a| a.contains("text/html"));
    let json_accept = accept.is_some_and(|a| {
        a.contains("application/json") || a.contains("activity+json") || a.contains("ld+json")
    }) && !accept.is_some_and(|a| a.starts_with("text/html"));
    json_path || json_accept
}

/// The answer to `path` (pure, so it is tested without a socket).
pub fn answer(path: &str, accept: Option<&str>, retry_after: u64) -> Answer {
    if path == "/healthz" || path == "/readyz" {
        return Answer {
            status: StatusCode::OK,
            content_type: "text/plain; charset=utf-8",
            body: "ok\n".into(),
        };
    }
    if wants_json(path, accept) {
        return Answer {
            status: StatusCode::SERVICE_UNAVAILABLE,
            content_type: "application/json",
            body: serde_json::json!({ "error": ERROR, "retry_after": retry_after }).to_string(),
        };
    }
    let minutes = retry_after.div_ceil(60).max(1);
    Answer {
        status: StatusCode::SERVICE_UNAVAILABLE,
        content_type: "text/html; charset=utf-8",
        body: format!(
            "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width\">\
             <meta http-equiv=\"refresh\" content=\"{retry_after}\">\
             <title>Upgrading</title></head>\n<body style=\"font-family:sans-serif;\
             max-width:32em;margin:4em auto;padding:0 1em\"><h1>Back in a moment</h1>\
             <p>This server is being upgraded. Please try again in about {minutes} \
             minute{s}; this page reloads by itself.</p></body></html>\n",
            s = if minutes == 1 { "" } else { "s" }
        ),
    }
}

fn respond(method: &Method, uri: &Uri, headers: &HeaderMap, retry_after: u64) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let a = answer(uri.path(), accept, retry_after);
    let mut res = if *method == Method::HEAD {
        a.status.into_response()
    } else {
        (a.status, a.body).into_response()
    };
    let h = res.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(a.content_type),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Every request on a new connection: when the Service moves back to the web pods, no
    // client stays on this one.
    h.insert(header::CONNECTION, HeaderValue::from_static("close"));
    if a.status == StatusCode::SERVICE_UNAVAILABLE {
        h.insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
    }
    res
}

/// The router: every method and path.
pub fn router(retry_after: u64) -> Router {
    Router::new().fallback(
        move |method: Method, uri: Uri, headers: HeaderMap| async move {
            respond(&method, &uri, &headers, retry_after)
        },
    )
}

/// Serves on `addr` until `shutdown` resolves (SIGTERM in the binary).
pub async fn serve(
    addr: SocketAddr,
    retry_after: u64,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    tracing::info!(%addr, retry_after, "maintenance page: answering 503 with Retry-After");
    axum::serve(listener, router(retry_after))
        .with_graceful_shutdown(shutdown)
        .await
}

/// `Retry-After` from `RETRY_AFTER_SECONDS` within its range, else (unset or not) its default:
/// the page starts whatever it is given.
pub fn retry_after_from(env: &Env) -> u64 {
    env.int_if_valid(&vars::RETRY_AFTER_SECONDS)
        .unwrap_or(vars::RETRY_AFTER_SECONDS.int_default() as u64)
}

/// How long the binary waits for in-flight answers on SIGTERM (they are tiny).
pub const DRAIN: Duration = Duration::from_secs(2);

/// How long it keeps answering after SIGTERM: `SHUTDOWN_PRESTOP_SECONDS` within its range,
/// else [`PRE_STOP_DEFAULT`] (not the node's default of 0: the endpoint removal reaches every
/// node's proxy meanwhile, so no connection is refused when the Service moves back to the
/// web pods; the operator sets it anyway).
pub fn pre_stop_from(env: &Env) -> Duration {
    Duration::from_secs(
        env.int_if_valid(&vars::SHUTDOWN_PRESTOP_SECONDS)
            .unwrap_or(PRE_STOP_DEFAULT),
    )
}

/// The page's pre-stop delay when `SHUTDOWN_PRESTOP_SECONDS` is unset or out of range.
pub const PRE_STOP_DEFAULT: u64 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_inbox_and_activitypub_get_json() {
        for (path, accept) in [
            ("/api/v1/timelines/home", None),
            ("/oauth/token", None),
            ("/inbox", Some("*/*")),
            ("/users/alice/inbox", None),
            ("/.well-known/webfinger", None),
            ("/@alice", Some("application/activity+json")),
            (
                "/@alice",
                Some("application/ld+json; profile=\"https://www.w3.org/ns/activitystreams\""),
            ),
        ] {
            let a = answer(path, accept, 30);
            assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(a.content_type, "application/json", "{path} {accept:?}");
            let v: serde_json::Value = serde_json::from_str(&a.body).expect("json");
            assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
            assert_eq!(v["retry_after"], 30);
        }
    }

    #[test]
    fn browsers_get_a_small_page_and_probes_pass() {
        let a = answer("/@alice", Some("text/html,application/xhtml+xml"), 120);
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(a.content_type.starts_with("text/html"));
        assert!(a.body.contains("about 2 minutes"), "{}", a.body);
        assert!(a.body.contains("content=\"120\""));
        assert_eq!(
            answer("/", None, 30).content_type,
            "text/html; charset=utf-8"
        );
        assert_eq!(answer("/healthz", None, 30).status, StatusCode::OK);
        assert_eq!(answer("/readyz", None, 30).status, StatusCode::OK);
    }

    #[test]
    fn retry_after_is_bounded() {
        let retry_after = |v: Option<&str>| {
            retry_after_from(&Env::from_pairs(v.map(|v| ("RETRY_AFTER_SECONDS", v))))
        };
        assert_eq!(retry_after(None), 30);
        assert_eq!(retry_after(Some("90")), 90);
        assert_eq!(retry_after(Some("0")), 30);
        assert_eq!(retry_after(Some("3601")), 30);
        assert_eq!(retry_after(Some("x")), 30);
        let pre_stop = |v: Option<&str>| {
            pre_stop_from(&Env::from_pairs(v.map(|v| ("SHUTDOWN_PRESTOP_SECONDS", v))))
        };
        assert_eq!(pre_stop(None), Duration::from_secs(5));
        assert_eq!(pre_stop(Some("0")), Duration::ZERO);
        assert_eq!(pre_stop(Some("300")), Duration::from_secs(300));
        assert_eq!(pre_stop(Some("999")), Duration::from_secs(5));
    }

    /// Over a real socket: status, `Retry-After`, content type, no refused connection.
    #[tokio::test]
    async fn a_real_request_gets_503_with_retry_after() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let server = tokio::spawn(async move {
            axum::serve(listener, router(45)).await.expect("serve");
        });
        let client = reqwest::Client::new();
        let res = client
            .post(format!("http://{addr}/inbox"))
            .header("content-type", "application/activity+json")
            .body("{}")
            .send()
            .await
            .expect("request");
        assert_eq!(res.status().as_u16(), 503);
        assert_eq!(
            res.headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok()),
            Some("45")
        );
        assert_eq!(
            res.headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json")
        );
        assert_eq!(
            res.headers()
                .get("connection")
                .and_then(|v| v.to_str().ok()),
            Some("close")
        );
        let res = client
            .get(format!("http://{addr}/"))
            .header("accept", "text/html")
            .send()
            .await
            .expect("request");
        assert_eq!(res.status().as_u16(), 503);
        assert!(res.text().await.expect("body").contains("Back in a moment"));
        server.abort();
    }
}
