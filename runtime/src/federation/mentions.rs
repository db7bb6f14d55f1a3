//! Resolving the mentions of a status being written (issue 17/2), before its transaction: a
//! local account by name, a remote one from our cache of actors by handle or else through
//! WebFinger and a signed actor fetch. What does not resolve (unknown, unreachable, refused)
//! is logged and stays text; it never fails the post.

use futures::future::join_all;
use sqlx::PgPool;

use super::Federation;
use super::accounts::{self, Account};
use super::follows::resolve_account;
use crate::content::{Mention, Typed, mentions_in};

/// At most this many mentions of one status are resolved (each may cost remote fetches).
pub const MAX_MENTIONS: usize = 10;

/// The mentions `text` makes that resolve to an actor, as `statuses.mentions` stores them.
pub async fn resolve(
    pool: &PgPool,
    fed: &Federation,
    author: &Account,
    text: &str,
) -> Vec<Mention> {
    let typed = mentions_in(text);
    let found = join_all(
        typed
            .iter()
            .take(MAX_MENTIONS)
            .map(|t| resolve_one(pool, fed, author, t)),
    )
    .await;
    found.into_iter().flatten().collect()
}

async fn resolve_one(
    pool: &PgPool,
    fed: &Federation,
    author: &Account,
    t: &Typed<'_>,
) -> Option<Mention> {
    let local = match t.host {
        None => true,
        Some(h) => h.eq_ignore_ascii_case(&fed.domain),
    };
    if local {
        let account = accounts::by_username(pool, t.user).await.ok()??;
        return Some(Mention {
            key: t.key.clone(),
            name: format!("@{}@{}", account.username, fed.domain),
            href: fed.actor_iri(&account.username),
        });
    }
    let handle = t.key.as_str();
    let cached: Option<String> = sqlx::query_scalar(
        "SELECT iri FROM remote_actors WHERE lower(handle) = $1 AND gone_at IS NULL",
    )
    .bind(handle)
    .fetch_optional(pool)
    .await
    .ok()?;
    let href = match cached {
        Some(iri) => iri,
        None => match resolve_account(pool, fed, author, handle).await {
            Ok(actor) => actor.iri,
            Err(e) => {
                tracing::info!(mention = handle, error = %e.message, "mention left as text");
                return None;
            }
        },
    };
    Some(Mention {
        key: t.key.clone(),
        name: format!("@{handle}"),
        href,
    })
}

/// Stores a status's resolved mentions in the caller's transaction (on create and on an edit
/// of its text: an edit resolves them again).
pub async fn store(
    conn: &mut sqlx::PgConnection,
    status: uuid::Uuid,
    mentions: &[Mention],
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE statuses SET mentions = $2 WHERE id = $1")
        .bind(status)
        .bind(serde_json::to_value(mentions).unwrap_or_default())
        .execute(conn)
        .await?;
    Ok(())
}

/// A status's stored mentions; a malformed value reads as none.
pub fn parse_stored(v: serde_json::Value) -> Vec<Mention> {
    serde_json::from_value(v).unwrap_or_default()
}
