//! A post someone acts on (favourite, boost, bookmark), found through the access check, whether
//! a block refuses engaging with it, and one of our boosts as stored: what the local action
//! (`interact`) and the activity it sends (`federation::outbound::interactions`) both read.

use sqlx::PgConnection;
use uuid::Uuid;

use super::Visibility;
use super::access;
use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::outbound::relationships;

/// A post someone acts on, as the `posts` view has it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Post {
    pub id: Uuid,
    pub uri: String,
    /// The local author, for one of our posts.
    pub account_id: Option<Uuid>,
    /// The remote author's actor IRI, for one of theirs.
    pub actor_iri: Option<String>,
    /// The author's Account entity id (local account id, or remote actor id).
    pub author_id: Uuid,
    /// The author's actor IRI, ours or theirs.
    pub author_iri: String,
    pub visibility: String,
}

impl Post {
    pub fn visibility(&self) -> Visibility {
        Visibility::parse(&self.visibility).unwrap_or(Visibility::Direct)
    }
}

/// The post `id` names for `viewer`: a post, or the post a boost boosts (acting on a boost
/// acts on what it shows, as Mastodon does). `None` when it names nothing the viewer may see.
pub async fn find(
    conn: &mut PgConnection,
    viewer: Option<Uuid>,
    id: Uuid,
) -> Result<Option<Post>, sqlx::Error> {
    if !access::can_see(&mut *conn, viewer, id).await? {
        return Ok(None);
    }
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT p.id, p.uri, p.account_id, p.actor_iri, p.author_id, {} AS author_iri,
                p.visibility
           FROM posts p
          WHERE p.id = coalesce((SELECT post_id FROM reblogs WHERE id = $1), $1)",
        access::author_iri_sql("p")
    )))
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Whether a block stands between `account` and the author of `post`, either way
/// (`relationships::blocked_either_way`): `account` may then read a post it could read
/// before, but not favourite, boost, reply to, quote or react to it — the one check each of
/// those makes (Mastodon refuses them across a block either way).
pub async fn blocked(
    conn: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
) -> Result<bool, sqlx::Error> {
    let me = fed.actor_iri(&account.username);
    if post.author_iri == me {
        return Ok(false);
    }
    relationships::blocked_either_way(conn, fed, account.id, &me, &post.author_iri).await
}

/// The columns of `reblogs` a [`Boost`] is read from.
pub const BOOST: &str = "id, activity_id, visibility, pending_approval, approved_by";

/// One of our boosts as stored.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct Boost {
    /// The boost's own status id.
    pub id: Uuid,
    /// Our `Announce` id.
    pub activity_id: String,
    pub visibility: String,
    /// Waiting for the remote author's approval (`approvals`): only the booster sees it, and
    /// only that author was sent it.
    pub pending_approval: bool,
    /// The approval the boosted post's author gave it, served as `approvedBy`.
    pub approved_by: Option<String>,
}
