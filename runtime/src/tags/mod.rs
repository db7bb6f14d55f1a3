//! Hashtags as people follow and feature them (R-MAPI-6): a tag's recent use
//! (`history`), followed tags — whose public posts reach the follower's home, written by
//! [`fan_out`] beside the followers' entries as each post arrives — and featured tags
//! ([`featured`]). Names are kept as `statuses.tags` and `post_tags` keep them: lowercase,
//! without `#`, checked with Mastodon's rule (`content::valid_tag_name`).

pub mod featured;

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::statuses::feed;

/// A tag name from a path or a body: `#` optional, case-insensitive; `None` when it is not
/// one Mastodon would make.
pub fn normalize(raw: &str) -> Option<String> {
    let name = raw.trim().trim_start_matches('#');
    crate::content::valid_tag_name(name).then(|| name.to_lowercase())
}

/// The home-feed `source` of an entry a followed tag brought.
pub fn source(tag: &str) -> String {
    format!("tag:{tag}")
}

/// The smallest v7 UUID of the millisecond `at`: post ids are time-ordered, so `id >=` this
/// bound is "posted at or after `at`" on the ids' own indexes.
pub(crate) fn id_floor(at: DateTime<Utc>) -> Uuid {
    let ms = at.timestamp_millis().max(0) as u64;
    let mut b = [0u8; 16];
    b[..6].copy_from_slice(&ms.to_be_bytes()[2..]);
    b[6] = 0x70;
    b[8] = 0x80;
    Uuid::from_bytes(b)
}

/// One day of a tag's use: Mastodon's `history` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Day {
    /// Midnight UTC of the day.
    pub day: DateTime<Utc>,
    pub uses: i64,
    pub accounts: i64,
}

/// The last 7 days of `tag`'s use (today first, days without use included), from the tag's
/// rows of `post_tags` posted since then — one range of the `(tag, post_id)` key.
pub async fn history(conn: &mut PgConnection, tag: &str) -> Result<Vec<Day>, sqlx::Error> {
    let today = today();
    let since = today - Duration::days(6);
    let rows: Vec<(DateTime<Utc>, i64, i64)> = sqlx::query_as(
        "SELECT date_trunc('day', p.created_at, 'UTC'), count(*), count(DISTINCT p.author_id)
           FROM post_tags t JOIN posts p ON p.id = t.post_id
          WHERE t.tag = $1 AND t.post_id >= $2 AND p.created_at >= $3
          GROUP BY 1",
    )
    .bind(tag)
    .bind(id_floor(since))
    .bind(since)
    .fetch_all(conn)
    .await?;
    Ok(week(today, &rows))
}

/// Midnight UTC of today: the first day of a `history`.
pub fn today() -> DateTime<Utc> {
    Utc::now()
        .date_naive()
        .and_hms_opt(0, 0, 0)
        .map(|d| d.and_utc())
        .unwrap_or_else(Utc::now)
}

/// Seven days from `today` back, each with the uses and accounts `rows` (day, uses, accounts)
/// give it, zeros for a day without a row: Mastodon's `history` of a tag or a link.
pub fn week(today: DateTime<Utc>, rows: &[(DateTime<Utc>, i64, i64)]) -> Vec<Day> {
    (0..7)
        .map(|n| {
            let day = today - Duration::days(n);
            let (uses, accounts) = rows
                .iter()
                .find(|(d, _, _)| *d == day)
                .map_or((0, 0), |(_, u, a)| (*u, *a));
            Day {
                day,
                uses,
                accounts,
            }
        })
        .collect()
}

/// Which of `tags` `account` follows.
pub async fn followed_among(
    conn: &mut PgConnection,
    account: Uuid,
    tags: &[String],
) -> Result<HashSet<String>, sqlx::Error> {
    let rows: Vec<String> =
        sqlx::query_scalar("SELECT tag FROM tag_follows WHERE account_id = $1 AND tag = ANY($2)")
            .bind(account)
            .bind(tags)
            .fetch_all(conn)
            .await?;
    Ok(rows.into_iter().collect())
}

/// `account` follows `tag` (again: nothing changes). Posts from now on reach its home.
pub async fn follow(tx: &mut PgConnection, account: Uuid, tag: &str) -> Result<(), sqlx::Error> {
    sqlx::query("INSERT INTO tag_follows (account_id, tag) VALUES ($1, $2) ON CONFLICT DO NOTHING")
        .bind(account)
        .bind(tag)
        .execute(tx)
        .await?;
    Ok(())
}

/// `account` unfollows `tag`: what only this tag brought leaves its home (an entry another
/// followed tag of the post also brings stays), as Mastodon's unmerge does.
pub async fn unfollow(tx: &mut PgConnection, account: Uuid, tag: &str) -> Result<(), sqlx::Error> {
    let gone = sqlx::query("DELETE FROM tag_follows WHERE account_id = $1 AND tag = $2")
        .bind(account)
        .bind(tag)
        .execute(&mut *tx)
        .await?
        .rows_affected();
    if gone == 0 {
        return Ok(());
    }
    sqlx::query(
        "DELETE FROM home_feed h
          WHERE h.account_id = $1 AND h.source = $2
            AND NOT EXISTS (SELECT 1 FROM post_tags t
                              JOIN tag_follows f ON f.account_id = $1 AND f.tag = t.tag
                             WHERE t.post_id = h.post_id)",
    )
    .bind(account)
    .bind(source(tag))
    .execute(tx)
    .await?;
    Ok(())
}

/// Puts the public post `post` into the home of every local account following one of its
/// tags (Mastodon's `deliver_to_hashtag_followers`). An account that has it already (it
/// follows the author, or wrote it) keeps its entry; the others get one whose source is the
/// tag, and their streams hear of it. What they mute or block is left out when read.
pub async fn fan_out(tx: &mut PgConnection, post: Uuid) -> Result<(), sqlx::Error> {
    let rows: Vec<(String, Vec<Uuid>)> = sqlx::query_as(
        "SELECT min(f.tag), array_agg(DISTINCT f.account_id)
           FROM posts p JOIN post_tags t ON t.post_id = p.id
           JOIN tag_follows f ON f.tag = t.tag
          WHERE p.id = $1 AND p.visibility = 'public'
          GROUP BY f.account_id",
    )
    .bind(post)
    .fetch_all(&mut *tx)
    .await?;
    for (tag, accounts) in rows {
        let source = source(&tag);
        let entry = feed::Entry {
            entry: post,
            post,
            source: &source,
            reply_to: None,
        };
        feed::push(tx, &entry, &accounts).await?;
    }
    Ok(())
}

/// Tags in use whose names start with `prefix` (normalized as a name), in name order, at most
/// `limit`: a skip scan of `post_tags`' `(tag, post_id)` key, one index probe per distinct
/// tag, however many posts each has.
pub async fn search(
    conn: &mut PgConnection,
    prefix: &str,
    limit: i64,
) -> Result<Vec<String>, sqlx::Error> {
    let Some(prefix) = normalize(prefix) else {
        return Ok(Vec::new());
    };
    sqlx::query_scalar(
        "WITH RECURSIVE t(tag) AS (
             (SELECT tag FROM post_tags WHERE tag >= $1 ORDER BY tag LIMIT 1)
           UNION ALL
             SELECT (SELECT p.tag FROM post_tags p WHERE p.tag > t.tag ORDER BY p.tag LIMIT 1)
               FROM t WHERE t.tag IS NOT NULL AND starts_with(t.tag, $1)
         )
         SELECT tag FROM t WHERE tag IS NOT NULL AND starts_with(tag, $1) LIMIT $2",
    )
    .bind(prefix)
    .bind(limit)
    .fetch_all(conn)
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_mastodons() {
        assert_eq!(normalize("#Rust").as_deref(), Some("rust"));
        assert_eq!(normalize("über_alles").as_deref(), Some("über_alles"));
        assert_eq!(normalize("123"), None, "all digits");
        assert_eq!(normalize("a/b"), None);
        assert_eq!(normalize(""), None);
    }

    #[test]
    fn the_id_floor_orders_with_v7_ids() {
        let at = Utc::now();
        let before = Uuid::now_v7();
        let floor = id_floor(at + Duration::seconds(1));
        assert!(floor > before, "{floor} > {before}");
        assert!(id_floor(at - Duration::seconds(1)) < before);
    }
}
