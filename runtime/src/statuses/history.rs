//! A local status's versions (`GET /api/v1/statuses/:id/history`), Mastodon's `StatusEdit`
//! entities oldest first: each replaced version from `status_edits`, then the current one.
//! A status never edited (or a remote one, whose earlier versions we do not keep) has one.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::content;
use crate::federation::outbound::mentions;

#[derive(sqlx::FromRow)]
struct Version {
    content: String,
    spoiler_text: String,
    sensitive: bool,
    poll_options: Option<Value>,
    created_at: DateTime<Utc>,
}

/// The versions of `current` (a rendered Status entity the caller may see), oldest first.
pub async fn versions(conn: &mut PgConnection, current: &Value) -> Result<Vec<Value>, sqlx::Error> {
    let now = json!({
        "content": current["content"], "spoiler_text": current["spoiler_text"],
        "sensitive": current["sensitive"],
        "created_at": current["edited_at"].as_str().map_or(current["created_at"].clone(), |e| json!(e)),
        "account": current["account"],
        "poll": current["poll"].as_object().map(|p| json!({
            "options": p.get("options").and_then(Value::as_array).map(|o| o.iter()
                .map(|x| json!({"title": x["title"]})).collect::<Vec<_>>()),
        })),
        "media_attachments": current["media_attachments"], "emojis": [],
    });
    let Some(id) = current["id"].as_str().and_then(|s| Uuid::parse_str(s).ok()) else {
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
    let mut out: Vec<Value> = older
        .into_iter()
        .map(|v| {
            let poll = v.poll_options.and_then(|o| {
                o.as_array().map(|opts| {
                    json!({ "options": opts.iter().map(|t| json!({"title": t})).collect::<Vec<_>>() })
                })
            });
            json!({
                "content": content::render(&v.content, &uri, &mentioned).html,
                "spoiler_text": v.spoiler_text, "sensitive": v.sensitive,
                "created_at": v.created_at, "account": current["account"], "poll": poll,
                "media_attachments": [], "emojis": [],
            })
        })
        .collect();
    out.push(now);
    Ok(out)
}
