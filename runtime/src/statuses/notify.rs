//! Writing notifications (R-MAPI-4): every producer — local actions on web nodes, incoming
//! activities on workers — goes through `notify`, so each is stored once per cause (the
//! activity id) and every new one reaches the account's streams from one place.

use sqlx::PgConnection;
use uuid::Uuid;

/// Mastodon's notification types this server produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Mention,
    Status,
    Reblog,
    Follow,
    FollowRequest,
    Favourite,
    Poll,
    Update,
    /// An emoji reaction to one's post (Hollo's and Fedibird's type).
    EmojiReaction,
    /// Someone quoted one's post (Mastodon 4.5).
    Quote,
    /// A post one quoted was edited (Mastodon 4.5).
    QuotedUpdate,
}

impl Kind {
    pub const ALL: [Kind; 11] = [
        Kind::Mention,
        Kind::Status,
        Kind::Reblog,
        Kind::Follow,
        Kind::FollowRequest,
        Kind::Favourite,
        Kind::Poll,
        Kind::Update,
        Kind::EmojiReaction,
        Kind::Quote,
        Kind::QuotedUpdate,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Mention => "mention",
            Kind::Status => "status",
            Kind::Reblog => "reblog",
            Kind::Follow => "follow",
            Kind::FollowRequest => "follow_request",
            Kind::Favourite => "favourite",
            Kind::Poll => "poll",
            Kind::Update => "update",
            Kind::EmojiReaction => "emoji_reaction",
            Kind::Quote => "quote",
            Kind::QuotedUpdate => "quoted_update",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// The types Mastodon groups: many favourites or boosts of one post, many new followers.
pub const GROUPABLE: [Kind; 3] = [Kind::Favourite, Kind::Reblog, Kind::Follow];

/// How long one group may span (Mastodon's `MAXIMUM_GROUP_SPAN_HOURS`).
pub const GROUP_SPAN_HOURS: i32 = 12;

/// What the group of a notification of `kind` about `post` is keyed by (its key is this and
/// the hour the group started); `None` for a type that is not grouped.
pub fn group_prefix(kind: Kind, post: Option<Uuid>) -> Option<String> {
    match (kind, post) {
        (Kind::Favourite | Kind::Reblog, Some(post)) => Some(format!("{}-{post}", kind.as_str())),
        (Kind::Follow, _) => Some("follow".to_string()),
        _ => None,
    }
}

/// One notification to write.
pub struct Notification<'a> {
    /// The local account notified.
    pub account: Uuid,
    pub kind: Kind,
    /// Who caused it: the Account entity id (a local account, or a remote actor's stable id).
    pub from_account: Uuid,
    /// The post it is about (ours or theirs), if any.
    pub post: Option<Uuid>,
    /// What caused it (an activity id, ours or theirs): the same cause never notifies twice.
    pub cause: &'a str,
}

/// Stores the notification in the caller's transaction unless the same cause already did, and
/// never for an account's own actions, and tells the account's streams. Returns the new
/// notification's id.
pub async fn notify(
    tx: &mut PgConnection,
    n: &Notification<'_>,
) -> Result<Option<i64>, sqlx::Error> {
    if n.from_account == n.account {
        return Ok(None);
    }
    // A thread the account muted notifies it of nothing (Mastodon's NotifyService).
    if let Some(post) = n.post
        && !super::conversation_mutes::muted_among(tx, n.account, &[post])
            .await?
            .is_empty()
    {
        return Ok(None);
    }
    // The group it joins (Mastodon's `group_key`): the latest group of its prefix while that
    // started less than GROUP_SPAN_HOURS ago, else a new one from this hour. Two writers
    // racing compute the same hour, so they join one group either way.
    let id: Option<i64> = sqlx::query_scalar(
        "INSERT INTO notifications (account_id, type, from_account_id, post_id, activity_id,
                                    group_prefix, group_bucket)
         SELECT $1, $2, $3, $4, $5, $6::text,
                CASE WHEN $6::text IS NOT NULL THEN
                  (SELECT CASE WHEN prev IS NOT NULL AND hour < prev + $7 THEN prev ELSE hour END
                     FROM (SELECT floor(extract(epoch FROM now()) / 3600)::integer AS hour,
                                  (SELECT max(group_bucket) FROM notifications
                                    WHERE account_id = $1 AND group_prefix = $6::text) AS prev) b)
                END
         ON CONFLICT (account_id, type, activity_id) WHERE activity_id IS NOT NULL DO NOTHING
         RETURNING id",
    )
    .bind(n.account)
    .bind(n.kind.as_str())
    .bind(n.from_account)
    .bind(n.post)
    .bind(n.cause)
    .bind(group_prefix(n.kind, n.post))
    .bind(GROUP_SPAN_HOURS)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(id) = id {
        crate::streaming::emit::notified(tx, &[(n.account, id)]).await?;
    }
    Ok(id)
}

/// Takes back the notifications an activity caused (its `Undo` arrived, or the local action
/// was undone): every account's notification of `kind` whose cause is `cause`. Returns the
/// removed notifications' `(account, id)`, so their streams can be told.
pub async fn withdraw(
    tx: &mut PgConnection,
    kind: Kind,
    cause: &str,
) -> Result<Vec<(Uuid, i64)>, sqlx::Error> {
    sqlx::query_as(
        "DELETE FROM notifications WHERE type = $1 AND activity_id = $2
         RETURNING account_id, id",
    )
    .bind(kind.as_str())
    .bind(cause)
    .fetch_all(tx)
    .await
}

/// Removes every notification about `post` (it was deleted).
pub async fn remove_post(tx: &mut PgConnection, post: Uuid) -> Result<u64, sqlx::Error> {
    Ok(sqlx::query("DELETE FROM notifications WHERE post_id = $1")
        .bind(post)
        .execute(tx)
        .await?
        .rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn favourites_and_boosts_group_by_post_follows_together_the_rest_alone() {
        let post = Uuid::from_u128(7);
        assert_eq!(
            group_prefix(Kind::Favourite, Some(post)).as_deref(),
            Some("favourite-00000000-0000-0000-0000-000000000007")
        );
        assert_eq!(
            group_prefix(Kind::Reblog, Some(post)).as_deref(),
            Some("reblog-00000000-0000-0000-0000-000000000007")
        );
        assert_eq!(group_prefix(Kind::Follow, None).as_deref(), Some("follow"));
        for k in [
            Kind::Mention,
            Kind::Status,
            Kind::FollowRequest,
            Kind::Poll,
            Kind::Update,
        ] {
            assert_eq!(group_prefix(k, Some(post)), None, "{k:?}");
        }
        assert_eq!(group_prefix(Kind::Favourite, None), None);
    }
}
