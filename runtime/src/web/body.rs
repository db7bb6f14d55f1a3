//! Request bodies: read once, bounded in size and time, and JSON bodies decoded into the
//! route's serde struct by one extractor, [`ApiJson`]. Every refusal is an [`ApiError`]
//! (`{"error": …}`): 413 over the route's limit (before reading when `Content-Length` says so),
//! 408 past `HTTP_BODY_TIMEOUT_SECONDS`, 400 for JSON syntax, NUL characters (PostgreSQL
//! cannot store them) or a broken stream, and the body type's own status for a wrong shape.

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, StatusCode, header};
use serde::de::DeserializeOwned;

use super::{ApiError, AppState};

/// Largest body of a JSON API request: statuses, votes, follows, cleanups are a few hundred
/// bytes.
pub const JSON_MAX_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    #[error("the body did not arrive within {0:?}")]
    Timeout(Duration),
    #[error("reading the body: {0}")]
    Unreadable(String),
    #[error("body is not JSON: {0}")]
    NotJson(serde_json::Error),
    #[error("invalid body: {0}")]
    Shape(serde_json::Error, StatusCode),
    #[error("NUL characters are not accepted")]
    Nul,
}

impl From<BodyError> for ApiError {
    fn from(e: BodyError) -> Self {
        let status = match &e {
            BodyError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            BodyError::Timeout(_) => StatusCode::REQUEST_TIMEOUT,
            BodyError::Unreadable(_) | BodyError::NotJson(_) | BodyError::Nul => {
                StatusCode::BAD_REQUEST
            }
            BodyError::Shape(_, status) => *status,
        };
        ApiError(status, e.to_string())
    }
}

/// `Content-Length`, when the client declared one.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

/// The body's media type as sent, lower-cased (media types are case-insensitive, RFC 9110
/// §8.3.1); empty when there is none or it is not text.
pub fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase()
}

/// Whether the body is a `media` (`multipart/form-data`, …), whatever its parameters.
pub fn is_content_type(headers: &HeaderMap, media: &str) -> bool {
    content_type(headers).starts_with(media)
}

/// The whole body, at most `limit` bytes, within `deadline`. A declared length over the limit
/// is refused before a byte is read.
pub async fn read_limited(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    deadline: Duration,
) -> Result<Bytes, BodyError> {
    if declared_length(headers).is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge(limit));
    }
    match tokio::time::timeout(deadline, axum::body::to_bytes(body, limit)).await {
        Err(_) => Err(BodyError::Timeout(deadline)),
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            if too_large {
                Err(BodyError::TooLarge(limit))
            } else {
                Err(BodyError::Unreadable(e.to_string()))
            }
        }
    }
}

/// Whether JSON text holds a NUL character. JSON can only spell one as the escape `\u0000`
/// (a raw control character is a syntax error); an escaped backslash before `u0000` is text.
pub fn json_has_nul(json: &[u8]) -> bool {
    let mut i = 0;
    while i < json.len() {
        if json[i] == b'\\' {
            if json.get(i + 1) == Some(&b'u') && json.get(i + 2..i + 6) == Some(b"0000") {
                return true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    false
}

/// A request body type: its limit, and the status of JSON that is not of its shape (a
/// missing field, a wrong type, an unknown variant). Syntax errors are always 400.
pub trait RequestBody: DeserializeOwned {
    const MAX_BYTES: usize = JSON_MAX_BYTES;
    const SHAPE_STATUS: StatusCode;
}

/// Parses JSON into `T`, refusing NUL characters (PostgreSQL cannot store them). Nesting is
/// bounded by serde_json's recursion limit (128 levels, a syntax error past it: 400), so a
/// deep body can neither overflow the stack here nor in the walks and drops after it; nothing
/// in the tree enables its `unbounded_depth` feature (R-API).
pub fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    shape_status: StatusCode,
) -> Result<T, BodyError> {
    let value = serde_json::from_slice(bytes).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => BodyError::Shape(e, shape_status),
        _ => BodyError::NotJson(e),
    })?;
    if json_has_nul(bytes) {
        return Err(BodyError::Nul);
    }
    Ok(value)
}

/// A JSON request body decoded into `T` (any content type is read as JSON, as before).
pub struct ApiJson<T>(pub T);

impl<T: RequestBody> FromRequest<AppState> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, s: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let bytes = read_limited(&parts.headers, body, T::MAX_BYTES, s.http.body_timeout).await?;
        Ok(ApiJson(parse_json(&bytes, T::SHAPE_STATUS)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_match_whatever_their_case_and_parameters() {
        let mut h = HeaderMap::new();
        assert_eq!(content_type(&h), "");
        assert!(!is_content_type(&h, "application/json"));
        h.insert(
            header::CONTENT_TYPE,
            "Multipart/Form-Data; boundary=XyZ".parse().unwrap(),
        );
        assert_eq!(content_type(&h), "multipart/form-data; boundary=xyz");
        assert!(is_content_type(&h, "multipart/form-data"));
        assert!(!is_content_type(&h, "application/x-www-form-urlencoded"));
    }

    #[test]
    fn nul_escapes_are_found_and_escaped_backslashes_are_not() {
        assert!(json_has_nul(br#"{"a":"x\u0000y"}"#));
        assert!(json_has_nul(br#"{"a\u0000":1}"#));
        assert!(!json_has_nul(br#"{"a":"x\\u0000y"}"#));
        assert!(json_has_nul(br#"{"a":"x\\\u0000y"}"#));
        assert!(json_has_nul(br#"{"a":"\u00001"}"#));
        assert!(!json_has_nul(br#"{"a":"\u0001"}"#));
        assert!(!json_has_nul(b"\\"));
    }

    #[derive(serde::Deserialize, Debug)]
    struct Url {
        #[allow(dead_code)]
        url: String,
    }

    #[test]
    fn json_errors_are_classified() {
        let shape = StatusCode::UNPROCESSABLE_ENTITY;
        assert!(matches!(
            parse_json::<Url>(b"{not json", shape),
            Err(BodyError::NotJson(_))
        ));
        assert!(matches!(
            parse_json::<Url>(br#"{"url":1}"#, shape),
            Err(BodyError::Shape(_, s)) if s == shape
        ));
        let dup = parse_json::<Url>(br#"{"url":"a","url":"b"}"#, shape);
        assert!(
            matches!(&dup, Err(BodyError::Shape(e, _)) if e.to_string().contains("duplicate")),
            "{dup:?}"
        );
        assert!(matches!(
            parse_json::<Url>(br#"{"url":"a\u0000"}"#, shape),
            Err(BodyError::Nul)
        ));
        assert!(parse_json::<Url>(br#"{"url":"a"}"#, shape).is_ok());
    }

    /// Every JSON body goes through `parse_json` (or `serde_json` directly, as the OAuth forms
    /// do), so serde_json's recursion limit bounds the depth of every value built from a request:
    /// 128 levels parse, deeper is a syntax error, and 60 000 levels (a whole 64 KiB body of
    /// `[`) neither overflow nor build anything — checked on a small stack.
    #[test]
    fn json_nesting_is_bounded_before_anything_deep_is_built() {
        let nested = |depth: usize| format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let shape = StatusCode::UNPROCESSABLE_ENTITY;
        assert!(parse_json::<serde_json::Value>(nested(127).as_bytes(), shape).is_ok());
        let refused = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || {
                [nested(129), nested(60_000), "{\"a\":".repeat(30_000)].map(|body| {
                    matches!(
                        parse_json::<serde_json::Value>(body.as_bytes(), shape),
                        Err(BodyError::NotJson(_))
                    )
                })
            })
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert_eq!(refused, [true, true, true]);
    }
}
