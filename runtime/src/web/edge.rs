//! What every request passes on its way in and out (R-API): a request line or head too big is
//! refused as JSON (414/431) below the server's own parser limit, a URL that spells a NUL
//! character (`%00`, which PostgreSQL cannot store) is a 400, and an error response that is
//! not JSON yet (axum's own 405 or extractor rejections) gets the `{"error": …}` shape. While
//! the node stops, every response tells its client to close the connection.

use std::sync::atomic::Ordering;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::body::is_content_type;
use super::{ApiError, AppState};

/// Longest request target (path and query) accepted.
pub const MAX_URI_BYTES: usize = 8 * 1024;
/// Most bytes of header names and values one request may carry.
pub const MAX_HEADER_BYTES: usize = 32 * 1024;
/// Most bytes of a non-JSON error body turned into the error message.
const MAX_ERROR_TEXT: usize = 4 * 1024;

fn header_bytes(headers: &HeaderMap) -> usize {
    headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len())
        .sum()
}

/// `/a/b/` → `/a/b` (the query kept), as Mastodon's router treats them alike; `/` stays.
pub fn trim_trailing_slash(mut req: Request) -> Request {
    let path = req.uri().path();
    if path.len() <= 1 || !path.ends_with('/') {
        return req;
    }
    let trimmed = match path.trim_end_matches('/') {
        "" => "/",
        t => t,
    };
    let target = match req.uri().query() {
        Some(q) => format!("{trimmed}?{q}"),
        None => trimmed.to_string(),
    };
    let mut parts = req.uri().clone().into_parts();
    if let Ok(pq) = target.parse() {
        parts.path_and_query = Some(pq);
        if let Ok(uri) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    req
}

/// Whether a percent-encoded URL part decodes to a NUL character.
fn spells_nul(s: &str) -> bool {
    s.as_bytes().windows(3).any(|w| w == b"%00")
}

/// Refuses requests whose line or head is too big, or whose URL holds a NUL character.
pub async fn guard(req: Request, next: Next) -> Response {
    let target = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if target > MAX_URI_BYTES {
        return ApiError(
            StatusCode::URI_TOO_LONG,
            format!("the request target is longer than {MAX_URI_BYTES} bytes"),
        )
        .into_response();
    }
    if header_bytes(req.headers()) > MAX_HEADER_BYTES {
        return ApiError(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!("the request headers are larger than {MAX_HEADER_BYTES} bytes"),
        )
        .into_response();
    }
    if spells_nul(req.uri().path()) || req.uri().query().is_some_and(spells_nul) {
        return ApiError::bad_request("NUL characters are not accepted in URLs").into_response();
    }
    next.run(req).await
}

fn is_json(headers: &HeaderMap) -> bool {
    is_content_type(headers, "application/json")
}

fn is_html(headers: &HeaderMap) -> bool {
    is_content_type(headers, "text/html")
}

/// Gives an error response that is not JSON the `{"error": …}` shape, keeping its status and
/// its other headers (`Allow` of a 405, say); its text, if any, becomes the message. HTML pages
/// (the OAuth sign-in pages' errors, for people in a browser) stay as they are.
pub async fn json_errors(resp: Response) -> Response {
    let status = resp.status();
    if !(status.is_client_error() || status.is_server_error())
        || is_json(resp.headers())
        || is_html(resp.headers())
    {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let text = axum::body::to_bytes(body, MAX_ERROR_TEXT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("error")
            .to_ascii_lowercase()
    } else {
        text
    };
    let mut out = ApiError(status, message).into_response();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}

/// A response's body as it goes out, for tests of this module.
#[cfg(test)]
async fn body_json(resp: Response) -> serde_json::Value {
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 16)
        .await
        .expect("body");
    serde_json::from_slice(&bytes).expect("JSON")
}

/// After SIGTERM (readiness already false) a node keeps serving through its pre-stop delay, but
/// answers every request with `Connection: close`: a keep-alive client then opens its next
/// connection through the Service, which by then routes to other pods, instead of holding on
/// to this one until its listener closes. hyper closes the connection once this response is
/// written.
pub async fn close_when_stopping(State(s): State<AppState>, mut resp: Response) -> Response {
    if !s.accepting.load(Ordering::SeqCst) {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_slashes_are_trimmed_before_routing() {
        for (given, want) in [
            ("/api/v1/instance/", "/api/v1/instance"),
            (
                "/api/v1/accounts/relationships/?id[]=1",
                "/api/v1/accounts/relationships?id[]=1",
            ),
            ("/", "/"),
            ("/a", "/a"),
            ("//", "/"),
        ] {
            let req = Request::builder()
                .uri(given)
                .body(axum::body::Body::empty())
                .expect("req");
            assert_eq!(trim_trailing_slash(req).uri().to_string(), want, "{given}");
        }
    }

    #[test]
    fn percent_encoded_nul_is_found() {
        assert!(spells_nul("/users/%00"));
        assert!(spells_nul("resource=acct:%00@host"));
        assert!(!spells_nul("/users/%2500"));
        assert!(!spells_nul("/users/a%20b"));
    }

    #[tokio::test]
    async fn text_errors_become_json_and_keep_their_headers() {
        let resp = (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET,HEAD")],
            "",
        )
            .into_response();
        let out = json_errors(resp).await;
        assert_eq!(out.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(out.headers()[header::ALLOW], "GET,HEAD");
        assert_eq!(
            body_json(out).await["error"],
            serde_json::json!("method not allowed")
        );
        let out = json_errors((StatusCode::BAD_REQUEST, "Failed to parse").into_response()).await;
        assert_eq!(body_json(out).await["error"], "Failed to parse");
        let ok = json_errors((StatusCode::OK, "fine").into_response()).await;
        assert_eq!(ok.status(), StatusCode::OK);
    }
}
