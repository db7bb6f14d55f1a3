//! Remote polls: what a remote `Question` (Mastodon's, GoToSocial's, …) says of its poll, and
//! the `polls` row that keeps it beside its post (`remote_posts`), as Mastodon keeps one.
//!
//! Read as Mastodon's `PollParser` reads it: the options are `anyOf` (several choices) or else
//! `oneOf` (one), each by its `name`, counted by its `replies.totalItems`; the voters are
//! `votersCount`; the end is `closed` when the poll says it closed (a time, or `true`: now), else
//! `endTime` (none: a poll without end). Everything is bounded here whatever document comes in
//! (`normalize` has already cut it at the door): at most `MAX_POLL_OPTIONS` options of at
//! most `MAX_POLL_OPTION_BYTES`, counts from 0 to `MAX_POLL_COUNT` (anything else — a string,
//! a negative or fractional number, a missing count — is 0, or no voters count).
//!
//! Stored when its post is (`inbound::notes::store_fields`), on every path a post arrives by;
//! an `Update` of the post refreshes it — and only an `Update` the post itself takes, which is
//! its author's (the inbox checks the signer, the store the stored author). New options are a
//! new poll: the votes of our users are dropped, as Mastodon drops them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::bounds::{self, MAX_POLL_COUNT, MAX_POLL_OPTION_BYTES, MAX_POLL_OPTIONS};

/// A remote poll as its `Question` says, bounded.
#[derive(Clone, Debug, PartialEq)]
pub struct RemotePoll {
    pub options: Vec<String>,
    /// Votes per option, in option order.
    pub counts: Vec<i64>,
    pub multiple: bool,
    /// When it ends or ended; `None`: it has no end.
    pub expires_at: Option<DateTime<Utc>>,
    /// `votersCount`, when given.
    pub voters: Option<i64>,
}

/// A count as a remote server may send it: an integer from 0 up, at most `MAX_POLL_COUNT`.
fn count(v: Option<&Value>) -> Option<i64> {
    let n = v?;
    match (n.as_i64(), n.as_u64()) {
        (Some(i), _) if i >= 0 => Some(i.min(MAX_POLL_COUNT)),
        (None, Some(_)) => Some(MAX_POLL_COUNT), // beyond i64
        _ => None,
    }
}

fn time(v: Option<&Value>) -> Option<DateTime<Utc>> {
    let t = v?.as_str()?;
    DateTime::parse_from_rfc3339(t)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

impl RemotePoll {
    /// The poll `object` carries, if it carries one: at least one named option.
    pub fn of(object: &Value) -> Option<RemotePoll> {
        let listed = |k: &str| object.get(k).and_then(Value::as_array);
        let (items, multiple) = match (listed("anyOf"), listed("oneOf")) {
            (Some(any), _) if !any.is_empty() => (any, true),
            (_, Some(one)) => (one, false),
            _ => return None,
        };
        let mut options = Vec::new();
        let mut counts = Vec::new();
        for item in items.iter().take(MAX_POLL_OPTIONS) {
            let Some(name) = item.get("name").and_then(Value::as_str) else {
                continue;
            };
            if name.is_empty() {
                continue;
            }
            options.push(bounds::cut_str(name, MAX_POLL_OPTION_BYTES).to_string());
            let total = item.get("replies").and_then(|r| r.get("totalItems"));
            counts.push(count(total).unwrap_or(0));
        }
        if options.is_empty() {
            return None;
        }
        let expires_at = match object.get("closed") {
            Some(Value::Bool(true)) => Some(Utc::now()),
            Some(closed @ Value::String(_)) => time(Some(closed)),
            _ => None,
        }
        .or_else(|| time(object.get("endTime")));
        // `toot:votersCount` where a server writes the prefix (`normalize` keeps it).
        let voters = [
            "votersCount",
            "toot:votersCount",
            "http://joinmastodon.org/ns#votersCount",
        ]
        .iter()
        .find_map(|k| count(object.get(*k)));
        Some(RemotePoll {
            options,
            counts,
            multiple,
            expires_at,
            voters,
        })
    }
}

/// What storing a post's poll changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stored {
    /// Options added, changed or removed: an edit of the post, not a new count.
    pub options_changed: bool,
}

/// Stores the poll of the remote post `post` as `poll` says (`None`: the post has none), in
/// the caller's transaction. `create`: the post was just stored by a `Create` (a poll that
/// exists already is left as it is: a replayed `Create` is not news).
pub async fn store(
    conn: &mut PgConnection,
    post: Uuid,
    poll: Option<&RemotePoll>,
    create: bool,
) -> Result<Stored, sqlx::Error> {
    let existing: Option<(Uuid, Value, bool)> = sqlx::query_as(
        "SELECT id, options, multiple FROM polls WHERE remote_post_id = $1 FOR UPDATE",
    )
    .bind(post)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(poll) = poll else {
        if create || existing.is_none() {
            return Ok(Stored::default());
        }
        // The post no longer carries a poll: an edit took it away.
        sqlx::query("DELETE FROM polls WHERE remote_post_id = $1")
            .bind(post)
            .execute(&mut *conn)
            .await?;
        return Ok(Stored {
            options_changed: true,
        });
    };
    let Some((id, options, multiple)) = existing else {
        // Stored as notified: nobody here voted yet (see the migration `remote_polls`).
        sqlx::query(
            "INSERT INTO polls (id, remote_post_id, options, multiple, expires_at, remote_counts,
                                remote_voters, notified_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, now())
             ON CONFLICT (remote_post_id) DO NOTHING",
        )
        .bind(Uuid::now_v7())
        .bind(post)
        .bind(json!(poll.options))
        .bind(poll.multiple)
        .bind(poll.expires_at)
        .bind(&poll.counts)
        .bind(poll.voters)
        .execute(&mut *conn)
        .await?;
        return Ok(Stored {
            options_changed: !create,
        });
    };
    if create {
        return Ok(Stored::default());
    }
    let same = options == json!(poll.options) && multiple == poll.multiple;
    if !same {
        // Another poll now: our users' votes were for the old one.
        sqlx::query("DELETE FROM poll_votes WHERE poll_id = $1")
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    sqlx::query(
        "UPDATE polls SET options = $2, multiple = $3, expires_at = $4, remote_counts = $5,
                remote_voters = $6,
                notified_at = CASE WHEN $7 THEN coalesce(notified_at, now()) ELSE notified_at END
          WHERE id = $1",
    )
    .bind(id)
    .bind(json!(poll.options))
    .bind(poll.multiple)
    .bind(poll.expires_at)
    .bind(&poll.counts)
    .bind(poll.voters)
    .bind(!same)
    .execute(&mut *conn)
    .await?;
    Ok(Stored {
        options_changed: !same,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn option(name: &str, total: Value) -> Value {
        json!({"type": "Note", "name": name, "replies": {"type": "Collection", "totalItems": total}})
    }

    #[test]
    fn mastodon_and_gotosocial_questions() {
        let q = json!({
            "type": "Question",
            "oneOf": [option("tea", json!(3)), option("coffee", json!(5))],
            "endTime": "2026-12-20T10:00:00Z", "votersCount": 8,
        });
        let p = RemotePoll::of(&q).unwrap();
        assert_eq!(p.options, ["tea", "coffee"]);
        assert_eq!(p.counts, [3, 5]);
        assert!(!p.multiple);
        assert_eq!(p.voters, Some(8));
        assert_eq!(
            p.expires_at.unwrap().to_rfc3339(),
            "2026-12-20T10:00:00+00:00"
        );
        // Several choices; closed before its end time.
        let q = json!({
            "type": "Question",
            "anyOf": [option("a", json!(1)), option("b", json!(0))],
            "endTime": "2026-12-20T10:00:00Z", "closed": "2026-12-19T10:00:00Z",
            "toot:votersCount": 1,
        });
        let p = RemotePoll::of(&q).unwrap();
        assert!(p.multiple);
        assert_eq!(p.voters, Some(1));
        assert_eq!(
            p.expires_at.unwrap().to_rfc3339(),
            "2026-12-19T10:00:00+00:00"
        );
        let closed = RemotePoll::of(&json!({"oneOf": [option("a", json!(0))], "closed": true}));
        assert!(closed.unwrap().expires_at.unwrap() <= Utc::now());
        let endless = RemotePoll::of(&json!({"oneOf": [option("a", json!(0))]})).unwrap();
        assert_eq!((endless.expires_at, endless.voters), (None, None));
    }

    #[test]
    fn garbage_counts_names_and_times_are_bounded() {
        let q = json!({
            "type": "Question",
            "oneOf": [
                option("string", json!("five")), option("negative", json!(-3)),
                option("fraction", json!(2.5)), option("huge", json!(1e30)),
                option("beyond i64", json!(u64::MAX)), option("large", json!(i64::MAX)),
                option("null", Value::Null), {"type": "Note", "name": "no replies"},
                {"type": "Note", "name": ""}, {"type": "Note", "content": "no name"},
                {"type": "Note", "name": 7}, option(&"é".repeat(2000), json!(1)),
            ],
            "votersCount": "many", "endTime": "next tuesday",
        });
        let p = RemotePoll::of(&q).unwrap();
        assert_eq!(p.options.len(), 9, "the unnamed ones are left out");
        assert_eq!(
            p.counts,
            [0, 0, 0, 0, MAX_POLL_COUNT, MAX_POLL_COUNT, 0, 0, 1]
        );
        assert_eq!(p.options[8].len(), MAX_POLL_OPTION_BYTES);
        assert_eq!((p.voters, p.expires_at), (None, None));
        // Sums stay far from overflowing.
        assert!(
            MAX_POLL_COUNT
                .checked_mul(MAX_POLL_OPTIONS as i64)
                .is_some()
        );

        let many: Vec<Value> = (0..10_000)
            .map(|i| option(&format!("o{i}"), json!(i)))
            .collect();
        let p = RemotePoll::of(&json!({"anyOf": many})).unwrap();
        assert_eq!(p.options.len(), MAX_POLL_OPTIONS);
        assert_eq!(p.counts.len(), MAX_POLL_OPTIONS);
    }

    #[test]
    fn no_named_option_is_no_poll() {
        for q in [
            json!({"type": "Note"}),
            json!({"type": "Question", "oneOf": []}),
            json!({"type": "Question", "oneOf": "tea"}),
            json!({"type": "Question", "anyOf": [{"type": "Note"}]}),
        ] {
            assert_eq!(RemotePoll::of(&q), None, "{q}");
        }
        // An empty `anyOf` beside a `oneOf` is the `oneOf`.
        let p = RemotePoll::of(&json!({"anyOf": [], "oneOf": [option("a", json!(0))]}));
        assert!(!p.unwrap().multiple);
    }
}
