//! What the people this server hears from are talking about now: Mastodon's trends
//! (R-MAPI-6) — hashtags, posts and links, read from what reached us in the last two days.
//!
//! Only public posts count, ours and remote ones alike. Trending means *rising*, as on
//! Mastodon: a tag or link scores `(observed − expected)² / expected`, where `observed` is the
//! number of accounts that used it in the last 24 hours and `expected` the number in the 24
//! hours before (at least one), so a tag in steady use does not trend and a new one used by a
//! few accounts at once does; at least [`MIN_ACCOUNTS`] accounts must have used it. A post
//! scores the same way with its favourites and boosts as `observed` against one expected,
//! halved for every [`POST_HALF_LIFE_HOURS`] of its age; replies do not trend. There is no
//! review queue (Mastodon's admins approve trends): a Hollo server's readers are its own
//! accounts, and the visibility check, mutes and blocks still apply to every reader.
//!
//! Computing this reads the public posts of two days that carry a tag or a card, and the
//! favourites and boosts of the window's posts, so a web node computes it at most once per
//! [`PERIOD`] and shares it (`web::recent::Recent`).

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::tags::{self, Day, id_floor};

/// How often a web node recomputes the trends (Mastodon refreshes its own every 5 minutes).
pub const PERIOD: Duration = Duration::from_secs(300);
/// How many of each kind are kept: more than a client's largest page (40 posts).
pub const KEPT: usize = 40;
/// The fewest accounts that make a tag or a link trend.
pub const MIN_ACCOUNTS: i64 = 2;
/// The fewest favourites and boosts that make a post trend.
pub const MIN_INTERACTIONS: i64 = 2;
/// A post's score halves for every this many hours of its age.
pub const POST_HALF_LIFE_HOURS: f64 = 6.0;

/// The trends at one moment, best first.
#[derive(Clone, Debug, Default)]
pub struct Trends {
    /// Tag names, each with its week of use.
    pub tags: Vec<(String, Vec<Day>)>,
    /// Post ids.
    pub statuses: Vec<Uuid>,
    /// Preview card ids, each with its week of use.
    pub links: Vec<(Uuid, Vec<Day>)>,
}

/// Mastodon's rising score: `observed` against `expected` (at least 1); 0 when not rising.
pub fn rising(observed: i64, before: i64) -> f64 {
    let expected = before.max(1) as f64;
    let observed = observed as f64;
    if observed > expected {
        (observed - expected).powi(2) / expected
    } else {
        0.0
    }
}

/// The trends as of `now`.
pub async fn compute(conn: &mut PgConnection, now: DateTime<Utc>) -> Result<Trends, sqlx::Error> {
    let two_days_ago = now - chrono::Duration::days(2);
    // Tags, from `post_tags` by post id (time-ordered: one range of `post_tags_post`).
    let tag_rows: Vec<(String, i64, i64)> = accounts_by_day(
        &mut *conn,
        now,
        "t.tag",
        "post_tags t JOIN posts p ON p.id = t.post_id AND t.post_id >= $1",
    )
    .await?;
    let mut tags = Vec::new();
    for name in best(tag_rows) {
        let week = tags::history(&mut *conn, &name).await?;
        tags.push((name, week));
    }

    // Links: the preview cards of public posts, once fetched.
    let link_rows: Vec<(Uuid, i64, i64)> = accounts_by_day(
        &mut *conn,
        now,
        "l.card_id",
        "posts p JOIN post_preview_cards l ON l.post_id = p.id
          JOIN preview_cards c ON c.id = l.card_id AND c.fetched_at IS NOT NULL",
    )
    .await?;
    let mut links = Vec::new();
    for card in best(link_rows) {
        let week = link_history(&mut *conn, card).await?;
        links.push((card, week));
    }

    // Public posts of two days that are not replies, with their favourites (ours and remote
    // `Like`s of ours) and boosts (ours and remote `Announce`s) as far as they reached us.
    // Driven by the interactions, not the posts: post ids are time-ordered, so the
    // favourites and boosts of the window's posts are one range of `favourites_post` and
    // `reblogs_post`, and only posts with enough of them are looked up (by id, `LIMIT 1`
    // keeping the view a per-row lookup). Reading every post of two days instead cost
    // 0.4-0.56 s on bench/timelines' 79 000.
    let post_rows: Vec<(Uuid, DateTime<Utc>, i64)> = sqlx::query_as(
        "SELECT e.post_id, p.created_at, e.n
           FROM (SELECT post_id, sum(n)::bigint AS n
                   FROM (SELECT post_id, count(*) AS n FROM favourites
                          WHERE post_id >= $1 GROUP BY post_id
                         UNION ALL
                         SELECT post_id, count(*) FROM reblogs
                          WHERE post_id >= $1 GROUP BY post_id
                         UNION ALL
                         SELECT s.id, count(*) FROM statuses s
                           JOIN remote_interactions i ON i.object = s.uri AND i.kind = 'like'
                                AND i.undone_at IS NULL
                          WHERE s.id >= $1 AND s.visibility = 'public' GROUP BY s.id) c
                  GROUP BY post_id
                 HAVING sum(n) >= $3) e
           CROSS JOIN LATERAL (
                SELECT p.created_at FROM posts p
                 WHERE p.id = e.post_id AND p.created_at >= $2 AND p.visibility = 'public'
                   AND p.in_reply_to_uri IS NULL
                 LIMIT 1) p",
    )
    .bind(id_floor(two_days_ago))
    .bind(two_days_ago)
    .bind(MIN_INTERACTIONS)
    .fetch_all(&mut *conn)
    .await?;
    let mut scored: Vec<(f64, DateTime<Utc>, Uuid)> = post_rows
        .into_iter()
        .map(|(id, at, n)| {
            let age_hours = (now - at).num_seconds().max(0) as f64 / 3600.0;
            let decay = 0.5f64.powf(age_hours / POST_HALF_LIFE_HOURS);
            (rising(n, 1) * decay, at, id)
        })
        .filter(|(score, _, _)| *score > 0.0)
        .collect();
    // Best first; a tie goes to the newer post.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
    let statuses = scored.into_iter().take(KEPT).map(|(_, _, id)| id).collect();

    Ok(Trends {
        tags,
        statuses,
        links,
    })
}

/// (key, accounts in the last 24 hours, accounts in the 24 hours before) of the keys
/// (`key`, an expression over `from`) of public posts of the last two days, for keys used
/// by at least [`MIN_ACCOUNTS`] accounts in the last 24 hours. `from` joins the posts as `p`
/// and may use `$1`, the first post id of the window. The posts are bounded by that id range
/// too: PostgreSQL does not carry a range across a join's equality by itself, and without
/// it would read every post to join them.
async fn accounts_by_day<K>(
    conn: &mut PgConnection,
    now: DateTime<Utc>,
    key: &str,
    from: &str,
) -> Result<Vec<(K, i64, i64)>, sqlx::Error>
where
    K: Send + Unpin + for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    let day_ago = now - chrono::Duration::days(1);
    let two_days_ago = now - chrono::Duration::days(2);
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {key},
                count(DISTINCT p.author_id) FILTER (WHERE p.created_at >= $2),
                count(DISTINCT p.author_id) FILTER (WHERE p.created_at < $2)
           FROM {from}
          WHERE p.id >= $1 AND p.created_at >= $3 AND p.visibility = 'public'
          GROUP BY {key}
         HAVING count(DISTINCT p.author_id) FILTER (WHERE p.created_at >= $2) >= $4"
    )))
    .bind(id_floor(two_days_ago))
    .bind(day_ago)
    .bind(two_days_ago)
    .bind(MIN_ACCOUNTS)
    .fetch_all(conn)
    .await
}

/// The keys of (key, last day's accounts, the day before's) rows that are rising, best first
/// (a tie goes to more accounts, then to the key), at most [`KEPT`].
fn best<K: Ord + Clone>(rows: Vec<(K, i64, i64)>) -> Vec<K> {
    let mut scored: Vec<(f64, i64, K)> = rows
        .into_iter()
        .map(|(k, observed, before)| (rising(observed, before), observed, k))
        .filter(|(score, _, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(&b.2)));
    scored.into_iter().take(KEPT).map(|(_, _, k)| k).collect()
}

/// A link's last 7 days: the public posts that carry its card, and their accounts, per day.
async fn link_history(conn: &mut PgConnection, card: Uuid) -> Result<Vec<Day>, sqlx::Error> {
    let today = tags::today();
    let since = today - chrono::Duration::days(6);
    let rows: Vec<(DateTime<Utc>, i64, i64)> = sqlx::query_as(
        "SELECT date_trunc('day', p.created_at, 'UTC'), count(*), count(DISTINCT p.author_id)
           FROM post_preview_cards l JOIN posts p ON p.id = l.post_id
          WHERE l.card_id = $1 AND p.created_at >= $2 AND p.visibility = 'public'
          GROUP BY 1",
    )
    .bind(card)
    .bind(since)
    .fetch_all(conn)
    .await?;
    Ok(tags::week(today, &rows))
}

/// The first `limit` after `offset` of `items`, and whether more follow.
pub fn window<T: Clone>(items: &[T], offset: usize, limit: usize) -> (Vec<T>, bool) {
    let page: Vec<T> = items.iter().skip(offset).take(limit).cloned().collect();
    let more = items.len() > offset.saturating_add(limit);
    (page, more)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rising_means_more_accounts_than_the_day_before() {
        assert_eq!(rising(1, 0), 0.0, "one account is what is expected");
        assert_eq!(rising(2, 0), 1.0);
        assert_eq!(rising(5, 5), 0.0, "steady use does not trend");
        assert_eq!(rising(3, 6), 0.0, "falling use does not trend");
        assert!(rising(10, 2) > rising(4, 0), "(10-2)²/2 = 32 > (4-1)² = 9");
    }

    #[test]
    fn best_keeps_the_rising_in_score_order() {
        let rows = vec![
            ("steady".to_string(), 4, 4),
            ("b".to_string(), 3, 0),
            ("a".to_string(), 3, 0),
            ("big".to_string(), 9, 1),
        ];
        assert_eq!(best(rows), ["big", "a", "b"]);
    }

    #[test]
    fn a_window_says_whether_more_follow() {
        let items = [1, 2, 3, 4, 5];
        assert_eq!(window(&items, 0, 2), (vec![1, 2], true));
        assert_eq!(window(&items, 3, 2), (vec![4, 5], false));
        assert_eq!(window(&items, 9, 2), (vec![], false));
    }
}
