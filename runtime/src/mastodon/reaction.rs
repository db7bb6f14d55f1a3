//! Emoji reactions as clients read them (`reactions`): on the Status entity as
//! `emoji_reactions` (Hollo's and Fedibird's field), and with the reacting accounts for
//! Pleroma's `GET /api/v1/pleroma/statuses/:id/reactions`. A remote custom emoji's image is
//! shown through the media proxy, as every remote image.

use std::collections::HashMap;

use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use super::Urls;

/// Most account ids listed per emoji in a Status entity (the count is exact).
pub const ACCOUNT_IDS_SHOWN: i32 = 40;

/// One emoji's reactions to a status.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EmojiReaction {
    /// The emoji, or a custom one's shortcode (without colons, as Hollo and Pleroma name it).
    pub name: String,
    pub count: i64,
    /// Whether the viewer reacted with it.
    pub me: bool,
    /// A custom emoji's image.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub static_url: Option<String>,
    /// The Account entity ids of (the first of) those who reacted, oldest first.
    pub account_ids: Vec<String>,
}

#[derive(sqlx::FromRow)]
struct Row {
    post_id: Uuid,
    emoji: String,
    count: i64,
    me: bool,
    local_url: Option<String>,
    remote_url: Option<String>,
    accounts: Vec<Uuid>,
}

/// The reactions of `posts`, each post's in the order its emojis were first used.
pub async fn of_posts(
    conn: &mut PgConnection,
    urls: Urls<'_>,
    viewer: Option<Uuid>,
    posts: &[Uuid],
) -> Result<HashMap<Uuid, Vec<EmojiReaction>>, sqlx::Error> {
    let mut out: HashMap<Uuid, Vec<EmojiReaction>> = HashMap::new();
    if posts.is_empty() {
        return Ok(out);
    }
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT r.post_id, r.emoji, count(*) AS count,
                coalesce(bool_or(r.account_id = $2), false) AS me,
                min(e.url) AS local_url, min(r.emoji_url) AS remote_url,
                coalesce((array_agg(coalesce(r.account_id, a.id) ORDER BY r.created_at)
                            FILTER (WHERE coalesce(r.account_id, a.id) IS NOT NULL))[1:$3],
                         '{}') AS accounts
           FROM emoji_reactions r
           LEFT JOIN remote_actors a ON a.iri = r.actor_iri
           LEFT JOIN custom_emojis e ON r.account_id IS NOT NULL
                                    AND r.emoji = ':' || e.shortcode || ':'
          WHERE r.post_id = ANY($1)
          GROUP BY r.post_id, r.emoji
          ORDER BY min(r.created_at)",
    )
    .bind(posts)
    .bind(viewer)
    .bind(ACCOUNT_IDS_SHOWN)
    .fetch_all(conn)
    .await?;
    for r in rows {
        let url = r
            .local_url
            .or_else(|| r.remote_url.map(|u| urls.remote_image(&u)));
        out.entry(r.post_id).or_default().push(EmojiReaction {
            name: r.emoji.trim_matches(':').to_string(),
            count: r.count,
            me: r.me,
            static_url: url.clone(),
            url,
            account_ids: r.accounts.iter().map(Uuid::to_string).collect(),
        });
    }
    Ok(out)
}
