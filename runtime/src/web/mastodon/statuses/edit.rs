//! `PUT /api/v1/statuses/:id`: new text, content warning, sensitivity, language, media, or
//! the poll's end (options cannot change). Each edit keeps the version it replaces and is
//! federated as an `Update`.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::Value;

use super::body::{StatusBody, flag, media_ids, text};
use super::visible_one;
use crate::polls::validation::{EditStatusRequest, PollEditRequest};
use crate::statuses::write::{self, Edit};
use crate::web::auth::{Needs, need};
use crate::web::mastodon::RecordId;
use crate::web::polls::schedule;
use crate::web::{ApiError, AppState};

#[derive(Debug, Deserialize)]
pub struct EditRequest {
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    spoiler_text: Option<String>,
    #[serde(default)]
    sensitive: Option<Value>,
    #[serde(default)]
    language: Option<String>,
    #[serde(default)]
    media_ids: Option<Vec<String>>,
    #[serde(default)]
    poll: Option<PollEditRequest>,
}

impl EditRequest {
    fn into_edit(self) -> Result<Edit, ApiError> {
        let sensitive = flag("sensitive", self.sensitive.as_ref())?;
        let media = media_ids(self.media_ids)?;
        let nothing = self.status.is_none()
            && self.poll.is_none()
            && self.spoiler_text.is_none()
            && sensitive.is_none()
            && self.language.is_none()
            && media.is_none();
        // The text and the poll follow the polls module's rules (only `expires_in` changes).
        let poll_edit = if self.status.is_none() && self.poll.is_none() && !nothing {
            Default::default()
        } else {
            EditStatusRequest {
                status: self.status,
                poll: self.poll,
            }
            .validate()
            .map_err(|e| ApiError::unprocessable(e.to_string()))?
        };
        Ok(Edit {
            poll_edit,
            spoiler_text: self.spoiler_text,
            sensitive,
            language: text(self.language),
            media_ids: media,
        })
    }
}

pub async fn edit(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    RecordId(id): RecordId,
    StatusBody(req): StatusBody<EditRequest>,
) -> Result<Json<crate::mastodon::Status>, ApiError> {
    let e = req.into_edit()?;
    let poll = write::edit(&s.pool, s.fed.as_deref(), &s.drive, &account, id, &e).await?;
    if let (Some(p), Some(_)) = (poll, e.poll_edit.expires_in) {
        // An earlier expiry pulls the stored wakeup earlier; a later one is re-read when the
        // current wakeup runs (it reschedules).
        schedule(&s, p).await;
    }
    Ok(Json(visible_one(&s, Some(account.id), id).await?))
}
