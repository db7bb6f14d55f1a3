//! The token holder's own account: `GET /api/v1/accounts/verify_credentials` (the
//! CredentialAccount, with `source`) and `PATCH /api/v1/accounts/update_credentials`
//! (display name, note, locked, bot, profile fields, and the posting defaults in `source[…]`),
//! as JSON, an urlencoded form or a multipart form — Mastodon apps send any of them. The change
//! and the `Update` of the actor to the followers are one transaction; a refused body changes
//! nothing. Posting defaults are not federated: changing only them sends no `Update`.
//! `GET /api/v1/preferences` reads them (R-MAPI-6).
//!
//! Avatar and header (R-MAPI-6): the multipart form's `avatar` and `header` files, each
//! checked like a media upload (422 for a type that is not JPEG, PNG, GIF or WebP by its bytes,
//! or over `MEDIA_MAX_BYTES` / `MEDIA_MAX_PIXELS`), then processed and stored by
//! `media::profile_images`; `DELETE /api/v1/profile/avatar` and `/header` remove them (200 with
//! the CredentialAccount, also when there was none). Both need `write:accounts`.

use std::collections::BTreeMap;

use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, patch};
use axum::{Json, Router};
use serde_json::Value;

use crate::federation::actors::profiles::{self, Field, ProfileUpdate};
use crate::mastodon::CredentialAccount;
use crate::mastodon::Preferences;
use crate::media::processing::ProcessError;
use crate::media::profile_images::{self, ImagesUpdate, Slot};
use crate::statuses::preferences::{self, PostingUpdate};
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::body::{BodyError, JSON_MAX_BYTES, content_type, parse_json, read_limited};
use crate::web::{ApiError, AppState};

/// Room for the multipart framing and the text fields around the two images.
const FRAMING: usize = 64 * 1024;

pub fn routes(state: &AppState) -> Router<AppState> {
    // An avatar and a header, each up to MEDIA_MAX_BYTES, in one multipart form.
    let limit = DefaultBodyLimit::max(state.media.max_bytes.saturating_mul(2) + FRAMING);
    Router::new()
        .route(
            "/api/v1/accounts/verify_credentials",
            get(verify_credentials),
        )
        .route(
            "/api/v1/accounts/update_credentials",
            patch(update_credentials).layer(limit),
        )
        .route("/api/v1/profile/avatar", delete(remove_avatar))
        .route("/api/v1/profile/header", delete(remove_header))
        .route("/api/v1/preferences", get(preferences_handler))
}

/// What one `update_credentials` body asks: the federated profile and the posting defaults.
#[derive(Debug, Default, PartialEq, Eq)]
struct CredentialsUpdate {
    profile: ProfileUpdate,
    posting: PostingUpdate,
    /// Hollo's `theme_color` of the public pages (`pages::theme`): a colour name, or empty
    /// for the default.
    theme: Option<String>,
}

impl CredentialsUpdate {
    fn validate(self) -> Result<CredentialsUpdate, String> {
        if let Some(t) = self.theme.as_deref().filter(|t| !t.is_empty())
            && !crate::web::pages::theme::valid(t)
        {
            let names: Vec<&str> = crate::web::pages::theme::COLORS
                .iter()
                .map(|(n, _, _)| *n)
                .collect();
            return Err(format!(
                "theme_color {t:?} is not one of {} (or empty for the default)",
                names.join(", ")
            ));
        }
        Ok(CredentialsUpdate {
            profile: self.profile.validate()?,
            posting: self.posting,
            theme: self.theme,
        })
    }
}

/// One `source[key]` value, as forms and JSON bodies both give it.
fn posting_source(posting: &mut PostingUpdate, key: &str, v: &Value) -> Result<(), String> {
    let name = format!("source[{key}]");
    match key {
        "privacy" => posting.visibility = Some(PostingUpdate::privacy(&string(&name, v)?)?),
        "sensitive" => posting.sensitive = Some(boolean(&name, v)?),
        "language" => {
            posting.language = Some(match v {
                Value::Null => None,
                v => PostingUpdate::language(&string(&name, v)?)?,
            })
        }
        // `source[note]`, `source[fields]`, … are not read by Mastodon either.
        _ => {}
    }
    Ok(())
}

/// `GET /api/v1/preferences`: Mastodon's keys; the reading ones are Mastodon's defaults,
/// which this server does not let anyone change.
async fn preferences_handler(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
) -> Result<Json<Preferences>, ApiError> {
    let p = preferences::load(&s.pool, account.id).await?;
    Ok(Json(Preferences {
        language: p.language,
        sensitive: p.sensitive,
        visibility: p.visibility.as_str(),
        expand_media: "default",
        expand_spoilers: false,
    }))
}

async fn verify_credentials(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::Profile>,
) -> Result<Json<CredentialAccount>, ApiError> {
    federation(&s)?;
    Ok(Json(
        crate::mastodon::account::credential(&s.pool, s.site().urls, &account).await?,
    ))
}

async fn update_credentials(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    req: Request,
) -> Result<Json<CredentialAccount>, ApiError> {
    let fed = federation(&s)?;
    let (parts, body) = req.into_parts();
    let content_type = content_type(&parts.headers);
    let mut files = Vec::new();
    let mut update = if content_type.starts_with("multipart/form-data") {
        // Streamed, each file bounded as it arrives (the JSON limit is far too small for them).
        let req = Request::from_parts(parts, body);
        let deadline = s.http.body_timeout;
        let form = tokio::time::timeout(deadline, multipart_form(req, &s))
            .await
            .map_err(|_| ApiError::from(BodyError::Timeout(deadline)))??;
        files = form.files;
        from_pairs(form.text)
    } else {
        let bytes = read_limited(&parts.headers, body, JSON_MAX_BYTES, s.http.body_timeout).await?;
        if content_type.starts_with("application/json") {
            from_json(&parse_json::<Value>(
                &bytes,
                StatusCode::UNPROCESSABLE_ENTITY,
            )?)
        } else {
            from_pairs(
                url::form_urlencoded::parse(&bytes)
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect(),
            )
        }
    }
    .and_then(CredentialsUpdate::validate)
    .map_err(|e| ApiError::unprocessable(e.to_string()))?;
    update.profile.images = store_images(&s, files).await?;
    let written = update.profile.images.new_keys();
    let saved = async {
        let mut tx = s.pool.begin().await?;
        if !update.posting.is_empty() {
            preferences::update(&mut *tx, account.id, &update.posting).await?;
        }
        if let Some(t) = &update.theme {
            let color = Some(t.as_str()).filter(|t| !t.is_empty());
            crate::web::pages::theme::set(&mut tx, account.id, color).await?;
        }
        // The actor changes (and its followers hear of it) unless only posting defaults or
        // the page colour were sent.
        let mut replaced = Vec::new();
        if update.profile != ProfileUpdate::default()
            || (update.posting.is_empty() && update.theme.is_none())
        {
            replaced = profiles::update_in(&mut tx, fed, &account, &update.profile)
                .await?
                .replaced_images;
        }
        tx.commit().await?;
        Ok::<_, sqlx::Error>(replaced)
    }
    .await;
    match saved {
        Ok(replaced) => profile_images::discard(&s.drive, &replaced).await,
        Err(e) => {
            profile_images::discard(&s.drive, &written).await;
            return Err(e.into());
        }
    }
    Ok(Json(
        crate::mastodon::account::credential(&s.pool, s.site().urls, &account).await?,
    ))
}

/// Checks every file before any is processed or stored (a refusal leaves nothing), then
/// processes and stores each; a failure removes what this request stored.
async fn store_images(s: &AppState, files: Vec<(Slot, Vec<u8>)>) -> Result<ImagesUpdate, ApiError> {
    let checked = files
        .into_iter()
        .map(|(slot, bytes)| {
            profile_images::check(&s.media, &bytes)
                .map(|probe| (slot, bytes, probe))
                .map_err(|e| named(slot, e.into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut images = ImagesUpdate::default();
    for (slot, bytes, probe) in checked {
        match profile_images::store(&s.drive, &s.media, slot, bytes, probe).await {
            Ok(img) => images.set(slot, Some(img)),
            Err(e) => {
                profile_images::discard(&s.drive, &images.new_keys()).await;
                return Err(named(slot, e.into()));
            }
        }
    }
    Ok(images)
}

async fn remove_avatar(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
) -> Result<Json<CredentialAccount>, ApiError> {
    remove(s, account, Slot::Avatar).await
}

async fn remove_header(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
) -> Result<Json<CredentialAccount>, ApiError> {
    remove(s, account, Slot::Header).await
}

/// `DELETE /api/v1/profile/{avatar,header}`: the placeholder again, and an `Update` of the
/// actor (without its `icon`/`image`) to the followers. Removing what is not there changes
/// nothing and sends nothing, and is still a 200 (Mastodon's answer).
async fn remove(
    s: AppState,
    account: crate::accounts::Account,
    slot: Slot,
) -> Result<Json<CredentialAccount>, ApiError> {
    let fed = federation(&s)?;
    let mut tx = s.pool.begin().await?;
    let (avatar, header) = profile_images::current_keys(&mut tx, account.id).await?;
    let present = match slot {
        Slot::Avatar => avatar.is_some(),
        Slot::Header => header.is_some(),
    };
    let mut replaced = Vec::new();
    if present {
        let mut update = ProfileUpdate::default();
        update.images.set(slot, None);
        replaced = profiles::update_in(&mut tx, fed, &account, &update)
            .await?
            .replaced_images;
    }
    tx.commit().await?;
    profile_images::discard(&s.drive, &replaced).await;
    Ok(Json(
        crate::mastodon::account::credential(&s.pool, s.site().urls, &account).await?,
    ))
}

/// An error about one image, naming which (a form may carry both).
fn named(slot: Slot, e: ApiError) -> ApiError {
    ApiError(e.0, format!("{}: {}", slot.name(), e.1))
}

/// A multipart form: its text fields, and the `avatar` and `header` files.
struct Form {
    text: Vec<(String, String)>,
    files: Vec<(Slot, Vec<u8>)>,
}

/// Longest text field read from a multipart form (the JSON body's limit).
const MAX_TEXT_FIELD: usize = JSON_MAX_BYTES;

/// Reads a multipart form, each file bounded by `MEDIA_MAX_BYTES` (past it: 422 at once, the
/// rest unread, as media uploads), each text field by [`MAX_TEXT_FIELD`]. Other files are
/// refused.
async fn multipart_form(req: Request, s: &AppState) -> Result<Form, ApiError> {
    let too_large =
        || ApiError::unprocessable(ProcessError::TooLarge(s.media.max_bytes).to_string());
    let bad = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::bad_request(format!("bad multipart body: {e}"))
        }
    };
    let mut form = axum::extract::Multipart::from_request(req, s)
        .await
        .map_err(|e| ApiError::bad_request(format!("bad multipart body: {e}")))?;
    let mut out = Form {
        text: Vec::new(),
        files: Vec::new(),
    };
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        let slot = Slot::from_field(&name);
        if slot.is_none() && field.file_name().is_some() {
            return Err(ApiError::unprocessable(format!(
                "{name}: only avatar and header may be files"
            )));
        }
        let limit = if slot.is_some() {
            s.media.max_bytes
        } else {
            MAX_TEXT_FIELD
        };
        let mut buf = Vec::new();
        while let Some(chunk) = field.chunk().await.map_err(bad)? {
            if buf.len() + chunk.len() > limit {
                return Err(match slot {
                    Some(slot) => named(slot, too_large()),
                    None => ApiError::unprocessable(format!("{name} is too long")),
                });
            }
            buf.extend_from_slice(&chunk);
        }
        match slot {
            Some(slot) => {
                out.files.retain(|(s, _)| *s != slot);
                out.files.push((slot, buf));
            }
            None => {
                let value = String::from_utf8(buf)
                    .map_err(|_| ApiError::unprocessable(format!("{name} is not UTF-8")))?;
                out.text.push((name, value));
            }
        }
    }
    Ok(out)
}

/// `true`/`false`, or the strings Rails accepts for them (forms send `"1"`, `"true"`).
fn boolean(key: &str, v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) => match s.as_str() {
            "true" | "1" | "on" => Ok(true),
            "false" | "0" | "off" | "" => Ok(false),
            _ => Err(format!("{key} must be a boolean")),
        },
        _ => Err(format!("{key} must be a boolean")),
    }
}

fn string(key: &str, v: &Value) -> Result<String, String> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{key} must be a string"))
}

/// One `fields_attributes` entry: `{"name","value"}` (either may be missing: empty).
fn field(v: &Value) -> Result<Field, String> {
    let part = |k: &str| match v.get(k) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(x) => string(&format!("fields_attributes {k}"), x),
    };
    if !v.is_object() {
        return Err("each of fields_attributes must be an object with name and value".into());
    }
    Ok(Field {
        name: part("name")?,
        value: part("value")?,
    })
}

/// The JSON body: `fields_attributes` as an array or as Rails' index-keyed object.
fn from_json(body: &Value) -> Result<CredentialsUpdate, String> {
    let Some(o) = body.as_object() else {
        return Err("the body must be a JSON object".into());
    };
    let mut all = CredentialsUpdate::default();
    let u = &mut all.profile;
    for (key, v) in o {
        match key.as_str() {
            "display_name" => u.display_name = Some(string(key, v)?),
            "note" => u.note = Some(string(key, v)?),
            "locked" => u.locked = Some(boolean(key, v)?),
            "bot" => u.bot = Some(boolean(key, v)?),
            "theme_color" => all.theme = Some(string(key, v)?),
            "fields_attributes" => {
                u.fields = Some(match v {
                    Value::Array(a) => a.iter().map(field).collect::<Result<_, _>>()?,
                    Value::Object(m) => {
                        let mut indexed: Vec<(u32, &Value)> = m
                            .iter()
                            .map(|(i, f)| {
                                i.parse().map(|i| (i, f)).map_err(|_| {
                                    "fields_attributes keys must be indexes".to_string()
                                })
                            })
                            .collect::<Result<_, _>>()?;
                        indexed.sort_by_key(|(i, _)| *i);
                        indexed
                            .into_iter()
                            .map(|(_, f)| field(f))
                            .collect::<Result<_, _>>()?
                    }
                    _ => return Err("fields_attributes must be a list".into()),
                })
            }
            "source" => {
                let Some(source) = v.as_object() else {
                    return Err("source must be an object".into());
                };
                for (k, v) in source {
                    posting_source(&mut all.posting, k, v)?;
                }
            }
            // Other settings apps send (discoverable, indexable, …) are not kept.
            _ => {}
        }
    }
    Ok(all)
}

/// Form fields (urlencoded or multipart): `display_name=…&fields_attributes[0][name]=…&
/// fields_attributes[0][value]=…`.
fn from_pairs(pairs: Vec<(String, String)>) -> Result<CredentialsUpdate, String> {
    let mut all = CredentialsUpdate::default();
    let u = &mut all.profile;
    let mut fields: BTreeMap<u32, Field> = BTreeMap::new();
    let mut any_field = false;
    for (key, value) in pairs {
        if value.contains('\0') {
            return Err(BodyError::Nul.to_string());
        }
        let v = Value::String(value.clone());
        match key.as_str() {
            "display_name" => u.display_name = Some(value),
            "note" => u.note = Some(value),
            "locked" => u.locked = Some(boolean(&key, &v)?),
            "bot" => u.bot = Some(boolean(&key, &v)?),
            "theme_color" => all.theme = Some(value),
            k if k.starts_with("fields_attributes[") => {
                let rest = &k["fields_attributes[".len()..];
                let (index, part) = rest
                    .split_once("][")
                    .and_then(|(i, p)| Some((i.parse::<u32>().ok()?, p.strip_suffix(']')?)))
                    .ok_or_else(|| format!("{k}: expected fields_attributes[N][name|value]"))?;
                let f = fields.entry(index).or_insert(Field {
                    name: String::new(),
                    value: String::new(),
                });
                match part {
                    "name" => f.name = value,
                    "value" => f.value = value,
                    _ => return Err(format!("{k}: expected name or value")),
                }
                any_field = true;
            }
            k if k.starts_with("source[") => {
                let key = k["source[".len()..]
                    .strip_suffix(']')
                    .ok_or_else(|| format!("{k}: expected source[name]"))?;
                posting_source(&mut all.posting, key, &v)?;
            }
            _ => {}
        }
    }
    if any_field {
        u.fields = Some(fields.into_values().collect());
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn from_form(bytes: &[u8]) -> Result<CredentialsUpdate, String> {
        from_pairs(
            url::form_urlencoded::parse(bytes)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    #[test]
    fn forms_and_json_say_the_same() {
        let form = from_form(
            b"display_name=Al%20Ice&note=hi&locked=true&bot=0&fields_attributes[1][name]=b&fields_attributes[0][name]=a&fields_attributes[0][value]=1",
        )
        .expect("form");
        let json = from_json(&json!({
            "display_name": "Al Ice", "note": "hi", "locked": true, "bot": false,
            "fields_attributes": {"1": {"name": "b"}, "0": {"name": "a", "value": "1"}},
        }))
        .expect("json");
        assert_eq!(form, json);
        assert_eq!(
            form.profile.fields.as_ref().map(|f| f[0].name.as_str()),
            Some("a")
        );
        let array =
            from_json(&json!({"fields_attributes": [{"name": "a", "value": "1"}]})).expect("array");
        assert_eq!(array.profile.fields.map(|f| f.len()), Some(1));
    }

    #[test]
    fn posting_defaults_come_from_source_in_forms_and_json() {
        let form = from_form(b"source[privacy]=private&source[sensitive]=1&source[language]=de")
            .expect("form");
        let json = from_json(&json!({
            "source": {"privacy": "private", "sensitive": true, "language": "de"},
        }))
        .expect("json");
        assert_eq!(form, json);
        assert_eq!(
            form.posting,
            PostingUpdate {
                visibility: Some(crate::statuses::Visibility::Private),
                sensitive: Some(true),
                language: Some(Some("de".into())),
            }
        );
        assert_eq!(form.profile, ProfileUpdate::default(), "no profile change");
        let cleared = from_form(b"source[language]=").expect("empty language");
        assert_eq!(cleared.posting.language, Some(None));
        let cleared = from_json(&json!({"source": {"language": null}})).expect("null language");
        assert_eq!(cleared.posting.language, Some(None));
        for bad in [
            &b"source[privacy]=direct"[..],
            b"source[privacy]=everyone",
            b"source[sensitive]=perhaps",
            b"source[language]=english",
            b"source[privacy",
        ] {
            assert!(from_form(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
        for bad in [
            json!({"source": "private"}),
            json!({"source": {"privacy": 1}}),
            json!({"source": {"language": "<b>"}}),
        ] {
            assert!(from_json(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wrong_types_are_refused() {
        for bad in [
            json!({"display_name": 3}),
            json!({"locked": "maybe"}),
            json!({"fields_attributes": "x"}),
            json!({"fields_attributes": [3]}),
            json!([1]),
        ] {
            assert!(from_json(&bad).is_err(), "{bad}");
        }
        assert!(from_form(b"fields_attributes[x][name]=a").is_err());
        assert!(from_form(b"note=a%00b").is_err());
        assert!(from_form(b"locked=perhaps").is_err());
    }
}
