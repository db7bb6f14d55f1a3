//! A status's versions (`GET /api/v1/statuses/:id/history`), Mastodon's `StatusEdit`
//! entities oldest first: each replaced version from `status_edits`, then the current one.
//! A status never edited (or a remote one, whose earlier versions we do not keep) has one.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Account, CustomEmoji, MediaAttachment, Status};
use crate::content;
use crate::federation::outbound::mentions;

/// One version of a status (fields in the order Mastodon's JSON sorts them).
#[derive(Clone, Debug, Serialize)]
pub struct StatusEdit {
    pub account: Arc<Account>,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub emojis: Vec<CustomEmoji>,
    /// The current version's; earlier versions' attachments are not kept.
    pub media_attachments: Vec<MediaAttachment>,
    pub poll: Option<EditPoll>,
    pub sensitive: bool,
    pub spoiler_text: String,
}

/// A version's poll: its options' titles.
#[derive(Clone, Debug, Serialize)]
pub struct EditPoll {
    pub options: Vec<EditOption>,
}

#[derive(Clone, Debug, Serialize)]
pub struct EditOption {
    pub title: String,
}

impl EditPoll {
    fn of_titles<'a>(titles: impl Iterator<Item = &'a str>) -> EditPoll {
        EditPoll {
            options: titles
                .map(|t| EditOption {
                    title: t.to_string(),
                })
                .collect(),
        }
    }
}

#[derive(sqlx::FromRow)]
struct Version {
    content: String,
    spoiler_text: String,
    sensitive: bool,
    poll_options: Option<Value>,
    created_at: DateTime<Utc>,
}

/// The versions of `current` (a Status entity the caller may see), oldest first.
pub async fn history(
    conn: &mut PgConnection,
    current: &Status,
) -> Result<Vec<StatusEdit>, sqlx::Error> {
    let now = StatusEdit {
        account: current.account.clone(),
        content: current.content.clone(),
        created_at: current.edited_at.unwrap_or(current.created_at),
        emojis: Vec::new(),
        media_attachments: current.media_attachments.clone(),
        poll: current
            .poll
            .as_ref()
            .map(|p| EditPoll::of_titles(p.options.iter().map(|o| o.title.as_str()))),
        sensitive: current.sensitive,
        spoiler_text: current.spoiler_text.clone(),
    };
    let Ok(id) = Uuid::parse_str(&current.id) else {
        return Ok(vec![now]);
    };
    let stored: Option<(String, Value)> =
        sqlx::query_as("SELECT uri, mentions FROM statuses WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    let Some((uri, stored_mentions)) = stored else {
        return Ok(vec![now]);
    };
    let mentioned = mentions::parse_stored(stored_mentions);
    let older: Vec<Version> = sqlx::query_as(
        "SELECT content, spoiler_text, sensitive, poll_options, created_at
           FROM status_edits WHERE status_id = $1 ORDER BY id",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let mut out: Vec<StatusEdit> = older
        .into_iter()
        .map(|v| StatusEdit {
            account: current.account.clone(),
            content: content::render(&v.content, &uri, &mentioned).html,
            created_at: v.created_at,
            emojis: Vec::new(),
            media_attachments: Vec::new(),
            poll: v
                .poll_options
                .as_ref()
                .and_then(Value::as_array)
                .map(|titles| EditPoll::of_titles(titles.iter().filter_map(Value::as_str))),
            sensitive: v.sensitive,
            spoiler_text: v.spoiler_text,
        })
        .collect();
    out.push(now);
    Ok(out)
}
