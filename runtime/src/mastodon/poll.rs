//! Mastodon's `Poll` entity: the tally of a poll, ours or a remote post's, and the viewer's
//! votes.

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::CustomEmoji;
use crate::polls::storage::tally;

#[derive(Clone, Debug, Serialize)]
pub struct Poll {
    pub id: String,
    /// `null` for a remote poll without end, as on Mastodon.
    pub expires_at: Option<DateTime<Utc>>,
    pub expired: bool,
    pub multiple: bool,
    pub votes_count: i64,
    /// `null` for a remote poll of several choices whose origin does not say, as on Mastodon.
    pub voters_count: Option<i64>,
    pub options: Vec<PollOption>,
    pub emojis: Vec<CustomEmoji>,
    /// Only when a viewer is known, as Mastodon leaves them out for anonymous readers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub own_votes: Option<Vec<i32>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct PollOption {
    pub title: String,
    pub votes_count: i64,
}

/// The Poll entity, if the poll exists and `viewer` may read its status (R-MAPI-VIS: a poll of
/// a direct status is no one else's to read).
pub async fn of_poll(
    conn: &mut PgConnection,
    poll_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Poll>, sqlx::Error> {
    let status: Option<Uuid> =
        sqlx::query_scalar("SELECT coalesce(status_id, remote_post_id) FROM polls WHERE id = $1")
            .bind(poll_id)
            .fetch_optional(&mut *conn)
            .await?;
    match status {
        Some(status) if crate::statuses::access::can_see(conn, viewer, status).await? => {
            of_readable_status(conn, poll_id, viewer).await
        }
        _ => Ok(None),
    }
}

/// The Poll entity of a status already known to be readable by `viewer` (the status renderer,
/// whose statuses went through `statuses::access`).
pub(crate) async fn of_readable_status(
    conn: &mut PgConnection,
    poll_id: Uuid,
    viewer: Option<Uuid>,
) -> Result<Option<Poll>, sqlx::Error> {
    let Some(p) = tally(&mut *conn, poll_id).await? else {
        return Ok(None);
    };
    let (voted, own_votes) = match viewer {
        Some(viewer) => {
            let own: Vec<i32> = sqlx::query_scalar(
                "SELECT choice FROM poll_votes WHERE poll_id = $1 AND account_id = $2
                  ORDER BY choice",
            )
            .bind(poll_id)
            .bind(viewer)
            .fetch_all(&mut *conn)
            .await?;
            (Some(!own.is_empty()), Some(own))
        }
        None => (None, None),
    };
    Ok(Some(Poll {
        id: p.id.to_string(),
        expires_at: p.expires_at,
        expired: p.expired,
        multiple: p.multiple,
        votes_count: p.counts.iter().sum(),
        voters_count: p.voters,
        options: p
            .options
            .into_iter()
            .zip(p.counts)
            .map(|(title, votes_count)| PollOption { title, votes_count })
            .collect(),
        emojis: Vec::new(),
        voted,
        own_votes,
    }))
}
