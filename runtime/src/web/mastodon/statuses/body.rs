//! Status request bodies as Mastodon apps send them: JSON, `application/x-www-form-urlencoded`
//! or `multipart/form-data` (text fields only), with Rails' bracket keys (`media_ids[]=…`,
//! `poll[options][]=…`, `poll[expires_in]=…`) read into the same JSON shape, so one serde
//! struct serves all three. Wrong shapes are 422, malformed JSON 400, as the polls API was.

use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::web::body::{BodyError, JSON_MAX_BYTES, content_type, parse_json, read_limited};
use crate::web::{ApiError, AppState};

/// A status request body of any of the three encodings, decoded into `T`.
pub struct StatusBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for StatusBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, s: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = req.into_parts();
        let content_type = content_type(&parts.headers);
        let bytes = read_limited(&parts.headers, body, JSON_MAX_BYTES, s.http.body_timeout).await?;
        let value = if content_type.starts_with("application/x-www-form-urlencoded") {
            from_pairs(url::form_urlencoded::parse(&bytes).into_owned().collect())?
        } else if content_type.starts_with("multipart/form-data") {
            let req = Request::from_parts(parts, axum::body::Body::from(bytes));
            from_pairs(multipart_fields(req, s).await?)?
        } else if bytes.iter().all(u8::is_ascii_whitespace) {
            Value::Object(Map::new())
        } else {
            parse_json::<Value>(&bytes, StatusCode::UNPROCESSABLE_ENTITY)?
        };
        serde_json::from_value(value)
            .map(StatusBody)
            .map_err(|e| ApiError::unprocessable(e.to_string()))
    }
}

async fn multipart_fields(req: Request, s: &AppState) -> Result<Vec<(String, String)>, ApiError> {
    let bad = |e: String| ApiError::bad_request(format!("bad multipart body: {e}"));
    let mut form = axum::extract::Multipart::from_request(req, s)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let mut pairs = Vec::new();
    while let Some(field) = form.next_field().await.map_err(|e| bad(e.to_string()))? {
        let name = field.name().unwrap_or_default().to_string();
        let value = field.text().await.map_err(|e| bad(e.to_string()))?;
        pairs.push((name, value));
    }
    Ok(pairs)
}

/// Deepest bracket key a form may send (`a[b][c]` is 3 levels). Mastodon's deepest is
/// `poll[options][]` (3); the bound is checked before anything is built, because building and
/// dropping the JSON value recurse once per level: 15 000 levels in a 45 KB body overflowed a
/// worker's stack and aborted the whole process (R-API).
pub const MAX_FORM_DEPTH: usize = 32;

/// Form pairs as JSON: `a[]` appends to an array, `a[b]` sets a key of an object. A key nested
/// deeper than [`MAX_FORM_DEPTH`] is 422, before any of the value is built.
pub fn from_pairs(pairs: Vec<(String, String)>) -> Result<Value, ApiError> {
    if let Some((key, _)) = pairs.iter().find(|(k, _)| key_depth(k) > MAX_FORM_DEPTH) {
        let shown: String = key.chars().take(40).collect();
        return Err(ApiError::unprocessable(format!(
            "form key {shown}… is nested deeper than {MAX_FORM_DEPTH} levels"
        )));
    }
    let mut root = Value::Object(Map::new());
    for (key, value) in pairs {
        if value.contains('\0') {
            return Err(ApiError::unprocessable(BodyError::Nul.to_string()));
        }
        let (head, rest) = key.split_once('[').unwrap_or((&key, ""));
        let mut segments = vec![head];
        if !rest.is_empty() {
            segments.extend(rest.trim_end_matches(']').split("]["));
        }
        set(&mut root, &segments, value);
    }
    Ok(root)
}

/// The levels of a bracket key: its head and one per `[`, counted without splitting.
fn key_depth(key: &str) -> usize {
    1 + key.bytes().filter(|b| *b == b'[').count()
}

fn set(target: &mut Value, segments: &[&str], value: String) {
    match segments.split_first() {
        None => *target = Value::String(value),
        Some((&"", rest)) => {
            if !target.is_array() {
                *target = Value::Array(Vec::new());
            }
            if let Value::Array(items) = target {
                // Rails: `a[][k]=1&a[][j]=2` is one element {k, j}; a key the last element
                // already has starts the next (`a[][k]=1&a[][k]=2` is two).
                let continues = match (items.last(), rest.first()) {
                    (Some(Value::Object(m)), Some(key)) if !key.is_empty() => !m.contains_key(*key),
                    _ => false,
                };
                if !continues {
                    items.push(Value::Null);
                }
                if let Some(last) = items.last_mut() {
                    set(last, rest, value);
                }
            }
        }
        Some((name, rest)) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(m) = target {
                set(
                    m.entry(name.to_string()).or_insert(Value::Null),
                    rest,
                    value,
                );
            }
        }
    }
}

/// `true`/`false` or the strings forms send for them.
pub fn flag(key: &str, v: Option<&Value>) -> Result<Option<bool>, ApiError> {
    let bad = || ApiError::unprocessable(format!("{key} must be a boolean"));
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(Value::String(s)) => match s.as_str() {
            "true" | "1" | "on" => Ok(Some(true)),
            "false" | "0" | "off" | "" => Ok(Some(false)),
            _ => Err(bad()),
        },
        Some(_) => Err(bad()),
    }
}

/// An optional text field: empty is absent (forms send every field).
pub fn text(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.trim().is_empty())
}

/// `media_ids`: upload ids; one that is not a UUID names no upload (422).
pub fn media_ids(v: Option<Vec<String>>) -> Result<Option<Vec<uuid::Uuid>>, ApiError> {
    v.map(|ids| {
        ids.iter()
            .filter(|s| !s.is_empty())
            .map(|s| {
                uuid::Uuid::parse_str(s).map_err(|_| {
                    ApiError::unprocessable(format!(
                        "Validation failed: media attachment {s} not found"
                    ))
                })
            })
            .collect()
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pairs(s: &str) -> Value {
        from_pairs(
            url::form_urlencoded::parse(s.as_bytes())
                .into_owned()
                .collect(),
        )
        .expect("pairs")
    }

    #[test]
    fn bracket_keys_read_as_json() {
        assert_eq!(
            pairs(
                "status=hi&media_ids[]=a&media_ids[]=b&poll[options][]=x&poll[options][]=y&poll[expires_in]=60&sensitive=true"
            ),
            json!({"status": "hi", "media_ids": ["a", "b"], "sensitive": "true",
                   "poll": {"options": ["x", "y"], "expires_in": "60"}})
        );
        assert!(from_pairs(vec![("status".into(), "a\0".into())]).is_err());
    }

    #[test]
    fn arrays_of_objects_group_like_rails() {
        assert_eq!(
            pairs(
                "keywords_attributes[][keyword]=a&keywords_attributes[][whole_word]=false&keywords_attributes[][keyword]=b"
            ),
            json!({"keywords_attributes": [{"keyword": "a", "whole_word": "false"},
                                           {"keyword": "b"}]})
        );
    }

    #[test]
    fn form_keys_nested_past_the_bound_are_refused_before_building() {
        let key = |depth: usize| format!("poll{}", "[a]".repeat(depth - 1));
        let ok = from_pairs(vec![(key(MAX_FORM_DEPTH), "1".into())]).expect("at the bound");
        assert!(ok["poll"].is_object());
        let err =
            from_pairs(vec![(key(MAX_FORM_DEPTH + 1), "1".into())]).expect_err("past the bound");
        assert_eq!(err.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(err.1.contains("nested deeper than 32 levels"), "{}", err.1);
        // The deep-nesting attack (R-API): 15 000 levels in 45 KB, which overflowed the stack. Run on
        // a thread with a small stack, so a recursion proportional to the depth fails here.
        let deep = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || from_pairs(vec![(key(15_000), "1".into())]).is_err())
            .expect("thread")
            .join()
            .expect("no stack overflow");
        assert!(deep);
    }

    #[test]
    fn flags_read_like_rails() {
        assert_eq!(flag("s", Some(&json!("1"))).ok(), Some(Some(true)));
        assert_eq!(flag("s", Some(&json!(false))).ok(), Some(Some(false)));
        assert_eq!(flag("s", None).ok(), Some(None));
        assert!(flag("s", Some(&json!("maybe"))).is_err());
        assert!(flag("s", Some(&json!(3))).is_err());
    }
}
