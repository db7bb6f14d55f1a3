//! Resolving the mentions of a status being written (R-AP-1), before its transaction: a
//! local account by name, a remote one from our store of actors (by handle, or by preferred
//! username and host, as `directory::by_acct`) or else through WebFinger and a signed actor
//! fetch. What does not resolve (unknown, unreachable, refused)
//! is logged and stays text; it never fails the post.
//!
//! What a post can make us fetch is bounded (R-API): at most [`MAX_REMOTE_LOOKUPS`]
//! handles per status go to WebFinger (cached and local ones are free), and a handle that
//! failed — or any handle on a host that could not be reached — is not tried again for
//! [`FAILURE_TTL`] on this process.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::join_all;
use sqlx::PgPool;

use crate::accounts::{self, Account};
use crate::content::{Mention, Typed, mentions_in};
use crate::federation::Federation;
use crate::federation::actors::directory::{self, Found};
use crate::federation::outbound::follows::resolve_account;
use crate::federation::transport::ttl::TtlMap;

/// At most this many mentions of one status are resolved (each may cost remote fetches).
pub const MAX_MENTIONS: usize = 10;
/// At most this many of them may need WebFinger and an actor fetch (not in our cache).
pub const MAX_REMOTE_LOOKUPS: usize = 3;
/// How long a failed lookup is remembered.
pub const FAILURE_TTL: Duration = Duration::from_secs(600);

/// Recent lookup failures: `acct:<handle>` for a handle that did not resolve, `host:<host>`
/// for a host that could not be asked. Bounded like the other per-process caches.
pub struct FailedLookups(TtlMap<()>);

impl Default for FailedLookups {
    fn default() -> Self {
        FailedLookups(TtlMap::new(FAILURE_TTL, 10_000))
    }
}

impl FailedLookups {
    fn failed(&self, handle: &str, host: &str) -> bool {
        self.0.get(&format!("acct:{handle}")).is_some()
            || self.0.get(&format!("host:{host}")).is_some()
    }

    fn record(&self, handle: &str, host: &str, host_down: bool) {
        self.0.insert(&format!("acct:{handle}"), ());
        if host_down {
            self.0.insert(&format!("host:{host}"), ());
        }
    }
}

/// The mentions `text` makes that resolve to an actor, as `statuses.mentions` stores them.
pub async fn resolve(
    pool: &PgPool,
    fed: &Federation,
    author: &Account,
    text: &str,
) -> Vec<Mention> {
    let typed = mentions_in(text);
    let lookups = AtomicUsize::new(MAX_REMOTE_LOOKUPS);
    let found = join_all(
        typed
            .iter()
            .take(MAX_MENTIONS)
            .map(|t| resolve_one(pool, fed, author, t, &lookups)),
    )
    .await;
    found.into_iter().flatten().collect()
}

async fn resolve_one(
    pool: &PgPool,
    fed: &Federation,
    author: &Account,
    t: &Typed<'_>,
    lookups: &AtomicUsize,
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
    // A stored actor, found as lookup and search find it: by its WebFinger handle, or — for
    // one learned from a follow, a post, a like or a thread, which has none — by preferred
    // username on its IRI's host (R-MAPI-6: such mentions were left as text).
    let cached = match directory::by_acct(pool, fed, handle).await.ok()? {
        Some(Found::Remote(r)) if !gone(pool, &r.iri).await => Some(r.iri),
        _ => None,
    };
    let href = match cached {
        Some(iri) => iri,
        None => {
            let host = t.host.unwrap_or_default().to_lowercase();
            if fed.failed_lookups.failed(handle, &host) {
                tracing::debug!(mention = handle, "mention left as text (failed lately)");
                return None;
            }
            let budget_left = lookups
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if !budget_left {
                tracing::info!(
                    mention = handle,
                    "mention left as text: the status already used its {MAX_REMOTE_LOOKUPS} remote lookups"
                );
                return None;
            }
            match resolve_account(pool, fed, author, handle).await {
                Ok(actor) => actor.iri,
                Err(e) => {
                    fed.failed_lookups.record(handle, &host, e.host_down);
                    tracing::info!(mention = handle, error = %e.message, "mention left as text");
                    return None;
                }
            }
        }
    };
    Some(Mention {
        key: t.key.clone(),
        name: format!("@{handle}"),
        href,
    })
}

/// Whether the stored actor `iri` is gone (deleted at its server): not mentioned.
async fn gone(pool: &PgPool, iri: &str) -> bool {
    sqlx::query_scalar("SELECT gone_at IS NOT NULL FROM remote_actors WHERE iri = $1")
        .bind(iri)
        .fetch_optional(pool)
        .await
        .ok()
        .flatten()
        .unwrap_or(true)
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
