//! OAuth request bodies: Mastodon apps send `application/x-www-form-urlencoded` (RFC 6749) or
//! JSON, so [`FormOrJson`] reads either into the same struct. A body that is neither parses
//! as nothing: 422 `{"error": …}`, as Mastodon answers malformed bodies. An empty body is `{}`,
//! so a missing parameter is the endpoint's own RFC 6749 error.

use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use crate::web::body::{BodyError, JSON_MAX_BYTES, is_content_type, json_has_nul, read_limited};
use crate::web::{ApiError, AppState};

pub struct FormOrJson<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for FormOrJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, s: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let form = is_content_type(&parts.headers, "application/x-www-form-urlencoded");
        let bytes = read_limited(&parts.headers, body, JSON_MAX_BYTES, s.http.body_timeout)
            .await
            .map_err(ApiError::from)?;
        parse(&bytes, form).map(FormOrJson)
    }
}

/// `bytes` as a form (when `form`) or JSON; empty is `{}`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8], form: bool) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return serde_json::from_str("{}").map_err(|e| ApiError::unprocessable(e.to_string()));
    }
    if form {
        if bytes.windows(3).any(|w| w == b"%00") || bytes.contains(&0) {
            return Err(ApiError::unprocessable(BodyError::Nul.to_string()));
        }
        return serde_urlencoded::from_bytes(bytes)
            .map_err(|e| ApiError::unprocessable(format!("invalid form body: {e}")));
    }
    if json_has_nul(bytes) {
        return Err(ApiError::unprocessable(BodyError::Nul.to_string()));
    }
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::unprocessable(format!("invalid JSON body: {e}")))
}

/// A list Mastodon accepts as one string (space- or newline-separated) or as a JSON array
/// (`redirect_uris`).
#[derive(serde::Deserialize, Debug, Clone)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => s.split_whitespace().map(str::to_owned).collect(),
            OneOrMany::Many(v) => v
                .iter()
                .flat_map(|s| s.split_whitespace())
                .map(str::to_owned)
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;

    #[derive(serde::Deserialize, Debug)]
    struct Body {
        a: Option<String>,
        list: Option<OneOrMany>,
    }

    #[test]
    fn forms_json_and_empty_bodies_read_alike() {
        let f: Body = parse(b"a=x+y&list=u1%20u2", true).expect("form");
        assert_eq!(f.a.as_deref(), Some("x y"));
        assert_eq!(f.list.expect("list").items(), ["u1", "u2"]);
        let j: Body = parse(br#"{"a":"x y","list":["u1","u2\nu3"]}"#, false).expect("json");
        assert_eq!(j.a.as_deref(), Some("x y"));
        assert_eq!(j.list.expect("list").items(), ["u1", "u2", "u3"]);
        let e: Body = parse(b"  ", false).expect("empty");
        assert!(e.a.is_none());
    }

    #[test]
    fn malformed_bodies_are_422() {
        for (body, form) in [
            (&b"{nope"[..], false),
            (br#"{"a":1}"#, false),
            (b"a=%00", true),
            (br#"{"a":"\u0000"}"#, false),
        ] {
            let err = parse::<Body>(body, form).expect_err("malformed");
            assert_eq!(err.0, StatusCode::UNPROCESSABLE_ENTITY);
        }
    }
}
