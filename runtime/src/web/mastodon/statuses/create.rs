//! `POST /api/v1/statuses`: text, content warning, visibility, language, reply, poll, media
//! and `Idempotency-Key` (a retried post answers the first status and stores nothing).

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::body::{StatusBody, flag, media_ids, text};
use super::visible_one;
use crate::mastodon::scheduled_status as scheduled_entity;
use crate::polls::validation::PollRequest;
use crate::statuses::Visibility;
use crate::statuses::preferences::{self, Posting};
use crate::statuses::scheduled;
use crate::statuses::write::{self, NewStatus};
use crate::web::auth::{Needs, need};
use crate::web::mastodon::record_id;
use crate::web::mastodon::scheduled_statuses::parse_time;
use crate::web::polls::schedule;
use crate::web::{ApiError, AppState, write_limits};

#[derive(Debug, Deserialize)]
pub struct CreateRequest {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    visibility: Option<String>,
    #[serde(default)]
    spoiler_text: Option<String>,
    #[serde(default)]
    sensitive: Option<Value>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    in_reply_to_id: Option<String>,
    #[serde(default)]
    poll: Option<PollRequest>,
    #[serde(default)]
    media_ids: Option<Vec<String>>,
    /// Publish later (R-MAPI-6): the answer is then a ScheduledStatus, not a Status.
    #[serde(default)]
    scheduled_at: Option<String>,
    /// The status to quote (Mastodon 4.5; `quote_id` is Hollo's and Fedibird's name).
    #[serde(default, alias = "quote_id")]
    quoted_status_id: Option<String>,
    /// Who may quote this one: `public`, `followers` or `nobody`.
    #[serde(default)]
    quote_approval_policy: Option<String>,
}

impl CreateRequest {
    /// The status to write; what the request leaves out comes from the author's posting
    /// defaults (R-MAPI-6: never public by omission when the default is narrower).
    fn into_new(
        self,
        defaults: &Posting,
        idempotency_key: Option<String>,
    ) -> Result<NewStatus, ApiError> {
        let visibility = match text(self.visibility) {
            None => defaults.visibility,
            Some(v) => Visibility::parse(&v)
                .ok_or_else(|| ApiError::unprocessable(format!("Validation failed: visibility {v:?} is not one of public, unlisted, private, direct")))?,
        };
        let in_reply_to = match text(self.in_reply_to_id) {
            None => None,
            // A reply to something that cannot exist is a reply to nothing we know: 404.
            Some(id) => Some(record_id(&id)?),
        };
        let quoted = match text(self.quoted_status_id) {
            None => None,
            Some(id) => Some(record_id(&id)?),
        };
        let quote_policy = match text(self.quote_approval_policy) {
            None => None,
            Some(p) => Some(crate::quotes::Policy::parse(&p).ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "Validation failed: quote_approval_policy {p:?} is not one of public, followers, nobody"
                ))
            })?),
        };
        let poll = self
            .poll
            .as_ref()
            .map(PollRequest::validate)
            .transpose()
            .map_err(|e| ApiError::unprocessable(e.to_string()))?;
        Ok(NewStatus {
            text: self.status.unwrap_or_default(),
            visibility,
            spoiler_text: self.spoiler_text.unwrap_or_default(),
            sensitive: flag("sensitive", self.sensitive.as_ref())?.unwrap_or(defaults.sensitive),
            language: text(self.language).or_else(|| defaults.language.clone()),
            in_reply_to,
            poll,
            media_ids: media_ids(self.media_ids)?.unwrap_or_default(),
            idempotency_key,
            quoted,
            quote_policy,
        })
    }
}

/// The longest `Idempotency-Key` kept (bytes). Clients send UUIDs or hashes; a longer key is
/// refused 422 before the database sees it — an 8 KB one was past what PostgreSQL can index
/// and answered 503 (R-API).
pub const MAX_IDEMPOTENCY_KEY_BYTES: usize = 256;

/// The request's `Idempotency-Key`, if any, within [`MAX_IDEMPOTENCY_KEY_BYTES`].
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(raw) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    if raw.len() > MAX_IDEMPOTENCY_KEY_BYTES {
        return Err(ApiError::unprocessable(format!(
            "Validation failed: Idempotency-Key is longer than {MAX_IDEMPOTENCY_KEY_BYTES} bytes"
        )));
    }
    Ok(raw
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned))
}

pub async fn create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    headers: HeaderMap,
    StatusBody(req): StatusBody<CreateRequest>,
) -> Result<Response, ApiError> {
    let key = idempotency_key(&headers)?;
    let defaults = preferences::load(&s.pool, account.id).await?;
    let at = text(req.scheduled_at.clone())
        .map(|t| parse_time(&t))
        .transpose()?
        // A time already past is an ordinary post, as Mastodon's.
        .filter(|at| !scheduled::is_past(*at));
    let new = req.into_new(&defaults, key)?;
    if let Some(at) = at {
        let stored =
            scheduled::schedule(&s.pool, account.id, &new, at, s.writes.scheduled_min_offset)
                .await?;
        let mut conn = s.pool.acquire().await?;
        let entity = scheduled_entity::render(&mut conn, &s.drive, &[stored])
            .await?
            .pop()
            .ok_or_else(ApiError::record_not_found)?;
        return Ok(Json(entity).into_response());
    }
    if let Err(limited) =
        write_limits::take(&s.pool, &s.writes, account.id, write_limits::Action::Status).await?
    {
        return Ok(limited.into_response());
    }
    let w = write::create(&s.pool, s.fed.as_deref(), &s.drive, &account, &new).await?;
    // The author is local: every new poll is scheduled (after the commit).
    if let (Some(p), false) = (w.poll, w.replayed) {
        schedule(&s, p).await;
    }
    Ok(Json(visible_one(&s, Some(account.id), w.status).await?).into_response())
}
