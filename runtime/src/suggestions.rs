//! Whom to follow next (Mastodon's follow suggestions, R-MAPI-6): accounts that are popular
//! among the people one follows, and accounts many here follow. Upstream Hollo answers an
//! empty list; these come from what this server knows:
//!
//! - `friends_of_friends` ("popular among people you follow"): accounts followed by the local
//!   accounts one follows (their follows are ours to read), and accounts whose posts the
//!   accounts one follows boosted in the last 30 days (a remote account's follows are not
//!   fetched, its boosts reach us). Weighed by how many of one's follows do so.
//! - `most_followed` ("popular on this server"): the accounts most followed by local accounts
//!   (at least two).
//!
//! Never suggested: oneself, whom one follows or asked to follow, blocks (either way), mutes,
//! blocked servers, accounts gone (410), and those one dismissed
//! (`suggestion_dismissals`, [`dismiss`]).

use sqlx::PgConnection;
use uuid::Uuid;

use crate::tags::id_floor;

/// How far back the boosts by one's follows count.
pub const BOOSTS_DAYS: i64 = 30;

/// Why an account is suggested, in Mastodon 4.3's `sources` terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    FriendsOfFriends,
    MostFollowed,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::FriendsOfFriends => "friends_of_friends",
            Source::MostFollowed => "most_followed",
        }
    }
}

/// One suggested account (by actor IRI) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Suggestion {
    pub iri: String,
    pub sources: Vec<Source>,
}

/// At most `limit` suggestions for `viewer` (whose actor IRI is `me`; local actors are
/// `<prefix><username>`), the strongest first: the followed accounts that vouch for one
/// weigh more than the server's follows.
pub async fn for_account(
    conn: &mut PgConnection,
    viewer: Uuid,
    me: &str,
    prefix: &str,
    limit: i64,
) -> Result<Vec<Suggestion>, sqlx::Error> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "WITH mine AS (
             SELECT target_iri AS iri FROM follows WHERE account_id = $1 AND state = 'accepted'
         ), local_mine AS (
             SELECT a.id FROM mine m JOIN accounts a
               ON starts_with(m.iri, $3) AND lower(a.username) = lower(substr(m.iri, length($3) + 1))
         ), boosts AS MATERIALIZED (
             -- The boosts by one's follows in the window (a range of their time-ordered
             -- ids), before any post is looked up: materialized, so the planner cannot probe
             -- the post of every boost first.
             SELECT r.post_id, coalesce(r.actor_iri, $3 || ba.username) AS booster
               FROM reblogs r LEFT JOIN accounts ba ON ba.id = r.account_id
              WHERE r.id >= $4 AND coalesce(r.actor_iri, $3 || ba.username) IN (SELECT iri FROM mine)
         ), signals AS (
             -- Followed by the local accounts one follows.
             SELECT f.target_iri AS iri, count(*) AS fof, 0::bigint AS popular
               FROM local_mine l JOIN follows f ON f.account_id = l.id AND f.state = 'accepted'
              GROUP BY f.target_iri
           UNION ALL
             -- Boosted by the accounts one follows, lately: each boost's post probed by id
             -- for its author (`LIMIT 1` keeps the view a per-row lookup).
             SELECT x.author, count(DISTINCT x.booster), 0
               FROM (SELECT b.booster,
                            (SELECT coalesce(p.actor_iri, $3 || pa.username)
                               FROM posts p LEFT JOIN accounts pa ON pa.id = p.account_id
                              WHERE p.id = b.post_id LIMIT 1) AS author
                       FROM boosts b) x
              WHERE x.author IS NOT NULL
              GROUP BY x.author
           UNION ALL
             -- Followed by local accounts.
             SELECT target_iri, 0, count(*) FROM follows WHERE state = 'accepted'
              GROUP BY target_iri
         )
         SELECT s.iri, sum(s.fof)::bigint AS fof, sum(s.popular)::bigint AS popular
           FROM signals s
          WHERE s.iri <> $2
            AND NOT EXISTS (SELECT 1 FROM follows f WHERE f.account_id = $1 AND f.target_iri = s.iri)
            AND NOT EXISTS (SELECT 1 FROM account_blocks b WHERE b.account_id = $1 AND b.target_iri = s.iri)
            AND NOT EXISTS (SELECT 1 FROM account_mutes m WHERE m.account_id = $1 AND m.target_iri = s.iri)
            AND NOT EXISTS (SELECT 1 FROM suggestion_dismissals d
                             WHERE d.account_id = $1 AND d.target_iri = s.iri)
            AND NOT EXISTS (SELECT 1 FROM account_domain_blocks d
                             WHERE d.account_id = $1
                               AND hollo_host_in(hollo_iri_host(s.iri), ARRAY[d.domain]))
            -- Not one who blocks us: a remote actor's `Block`, or a local account's block.
            AND NOT EXISTS (SELECT 1 FROM remote_interactions i
                             WHERE i.kind = 'block' AND i.actor = s.iri AND i.object = $2
                               AND i.undone_at IS NULL)
            AND NOT EXISTS (SELECT 1 FROM account_blocks b JOIN accounts a ON a.id = b.account_id
                             WHERE $3 || a.username = s.iri AND b.target_iri = $2)
            AND NOT EXISTS (SELECT 1 FROM remote_actors ra WHERE ra.iri = s.iri AND ra.gone_at IS NOT NULL)
          GROUP BY s.iri
         -- Popular on this server takes more than one other local follower.
         HAVING sum(s.fof) > 0 OR sum(s.popular) >= 2
          ORDER BY sum(s.fof) DESC, sum(s.popular) DESC, s.iri
          LIMIT $5",
    )
    .bind(viewer)
    .bind(me)
    .bind(prefix)
    .bind(id_floor(chrono::Utc::now() - chrono::Duration::days(BOOSTS_DAYS)))
    .bind(limit)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(iri, fof, popular)| {
            let mut sources = Vec::new();
            if fof > 0 {
                sources.push(Source::FriendsOfFriends);
            }
            if popular > 0 {
                sources.push(Source::MostFollowed);
            }
            Suggestion { iri, sources }
        })
        .collect())
}

/// `viewer` asks not to be suggested `target` (an actor IRI) again. Idempotent.
pub async fn dismiss(
    conn: &mut PgConnection,
    viewer: Uuid,
    target: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO suggestion_dismissals (account_id, target_iri) VALUES ($1, $2)
         ON CONFLICT DO NOTHING",
    )
    .bind(viewer)
    .bind(target)
    .execute(conn)
    .await?;
    Ok(())
}
