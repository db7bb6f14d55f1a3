//! Mastodon's ScheduledStatus entity (<https://docs.joinmastodon.org/entities/ScheduledStatus/>):
//! what will be posted and when, with the uploads it will attach.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::media::MediaAttachment;
use crate::media::Drive;
use crate::statuses::scheduled::{PollParams, Scheduled};

#[derive(Clone, Debug, Serialize)]
pub struct ScheduledStatus {
    pub id: String,
    pub scheduled_at: DateTime<Utc>,
    pub params: Params,
    pub media_attachments: Vec<MediaAttachment>,
}

/// `params`, in Mastodon's field names (ids as strings; what we do not keep is its default).
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    pub text: String,
    pub poll: Option<PollParams>,
    pub media_ids: Option<Vec<String>>,
    pub sensitive: bool,
    pub spoiler_text: Option<String>,
    pub visibility: &'static str,
    pub in_reply_to_id: Option<String>,
    pub language: Option<String>,
    pub application_id: Option<String>,
    pub scheduled_at: Option<DateTime<Utc>>,
    pub idempotency: Option<String>,
    pub with_rate_limit: bool,
}

/// The entities of `rows` (one query for their uploads), in the rows' order.
pub async fn render(
    conn: &mut PgConnection,
    drive: &Drive,
    rows: &[Scheduled],
) -> Result<Vec<ScheduledStatus>, sqlx::Error> {
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let mut media: HashMap<Uuid, Vec<crate::media::entity::MediaRow>> = HashMap::new();
    for (scheduled, row) in crate::media::attach::rows_kept_for(conn, &ids).await? {
        media.entry(scheduled).or_default().push(row);
    }
    Ok(rows
        .iter()
        .map(|r| {
            let p = &r.params;
            let kept = media.remove(&r.id).unwrap_or_default();
            // In the order the request named them.
            let attachments = p
                .media_ids
                .iter()
                .flatten()
                .filter_map(|id| kept.iter().find(|m| m.id == *id))
                .map(|m| MediaAttachment::local(drive, m))
                .collect();
            ScheduledStatus {
                id: r.id.to_string(),
                scheduled_at: r.scheduled_at,
                params: Params {
                    text: p.text.clone(),
                    poll: p.poll.clone(),
                    media_ids: p
                        .media_ids
                        .as_ref()
                        .map(|m| m.iter().map(Uuid::to_string).collect()),
                    sensitive: p.sensitive,
                    spoiler_text: p.spoiler_text.clone(),
                    visibility: p.visibility.as_str(),
                    in_reply_to_id: p.in_reply_to_id.map(|i| i.to_string()),
                    language: p.language.clone(),
                    application_id: None,
                    scheduled_at: None,
                    idempotency: None,
                    with_rate_limit: false,
                },
                media_attachments: attachments,
            }
        })
        .collect())
}
