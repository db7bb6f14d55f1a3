//! Following a remote account: resolve it (WebFinger + actor document through the guard),
//! store the relationship and queue the `Follow` with a stored, stable activity id. Shared by
//! `POST /api/v1/follows` (within the request) and the following import (one item at a time).

use serde_json::json;
use sqlx::{PgConnection, PgPool};

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::actors::actor::{self, RemoteActor};
use crate::federation::actors::webfinger::{self, ResolveError};
use crate::federation::context;
use crate::federation::outbound::delivery::{Recipient, queue_activity};
use crate::federation::transport::fetch::FetchError;

/// Why an account could not be resolved. `retryable` tells a transient network trouble from a
/// definitive answer (unknown account, refused address, bad document).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ResolveFailure {
    pub message: String,
    pub retryable: bool,
    /// The handle's host could not be asked at all (unreachable, refused by our guard, or
    /// answering 429/5xx to WebFinger): another name on it would fail the same way.
    pub host_down: bool,
}

fn retryable_fetch(e: &FetchError) -> bool {
    match e {
        FetchError::Network(_) | FetchError::TooManyRequests(_) => true,
        FetchError::Status(s) => *s == 408 || *s == 429 || *s >= 500,
        FetchError::Refused(_) | FetchError::TooLarge | FetchError::Invalid(_) => false,
    }
}

/// `name@host` → the remote actor, fetched (signed with `account`'s key) and cached.
pub async fn resolve_account(
    pool: &PgPool,
    fed: &Federation,
    account: &Account,
    handle: &str,
) -> Result<RemoteActor, ResolveFailure> {
    let handle = handle.trim().trim_start_matches('@');
    let iri = webfinger::resolve(fed, handle).await.map_err(|e| {
        tracing::info!(handle, error = %e, "cannot resolve an account");
        let why = match &e {
            ResolveError::Fetch(f) => f.public_reason(),
            other => other.to_string(),
        };
        ResolveFailure {
            retryable: matches!(&e, ResolveError::Fetch(f) if retryable_fetch(f)),
            host_down: match &e {
                ResolveError::Fetch(
                    FetchError::Refused(_)
                    | FetchError::Network(_)
                    | FetchError::TooManyRequests(_),
                ) => true,
                ResolveError::Fetch(FetchError::Status(code)) => *code >= 500,
                _ => false,
            },
            message: format!("cannot resolve {handle}: {why}"),
        }
    })?;
    if fed.local_username(&iri).is_some() {
        return Err(ResolveFailure {
            message: format!("{handle} is an account of this server"),
            retryable: false,
            host_down: false,
        });
    }
    let signer = fed.signing_key(account).map_err(|e| ResolveFailure {
        message: format!("{e:#}"),
        retryable: false,
        host_down: false,
    })?;
    actor::fetch_actor(pool, fed, &iri, Some(&signer), Some(handle))
        .await
        .map_err(|e| {
            tracing::info!(handle, actor = iri, error = %e, "cannot fetch an actor");
            let why = match &e {
                actor::ActorError::Fetch(f) => f.public_reason(),
                actor::ActorError::Invalid(_) => "actor document not accepted".into(),
                actor::ActorError::Db(_) => "database unavailable".into(),
            };
            ResolveFailure {
                retryable: match &e {
                    actor::ActorError::Fetch(f) => retryable_fetch(f),
                    actor::ActorError::Db(_) => true,
                    actor::ActorError::Invalid(_) => false,
                },
                host_down: false,
                message: format!("cannot fetch actor {iri}: {why}"),
            }
        })
}

/// Stores a pending follow of `target` and queues its `Follow`, inside the caller's
/// transaction. Idempotent while pending or accepted (a retried request or import row must not
/// send a second Follow); after a Reject it sends a fresh one. Returns (activity id, state).
pub async fn follow_in(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    target: &RemoteActor,
) -> Result<(String, String), sqlx::Error> {
    let existing: Option<(String, String)> = sqlx::query_as(
        "SELECT follow_activity_id, state FROM follows WHERE account_id = $1 AND target_iri = $2 FOR UPDATE",
    )
    .bind(account.id)
    .bind(&target.iri)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(found) = existing.filter(|(_, st)| st != "rejected") {
        return Ok(found);
    }
    let follow_id = fed.new_activity_id();
    let follow = json!({
        "@context": context::ld(),
        "id": follow_id,
        "type": "Follow",
        "actor": fed.actor_iri(&account.username),
        "object": target.iri,
        "to": [target.iri],
    });
    sqlx::query(
        "INSERT INTO follows (account_id, target_iri, follow_activity_id, state) VALUES ($1, $2, $3, 'pending')
         ON CONFLICT (account_id, target_iri) DO UPDATE
            SET follow_activity_id = EXCLUDED.follow_activity_id, state = 'pending', updated_at = now()",
    )
    .bind(account.id)
    .bind(&target.iri)
    .bind(&follow_id)
    .execute(&mut *tx)
    .await?;
    queue_activity(
        &mut *tx,
        fed,
        account.id,
        &follow,
        &[Recipient::from(target)],
    )
    .await?;
    Ok((follow_id, "pending".into()))
}

/// Queues `account`'s `Accept` or `Reject` (`answer`) of the `Follow` `follow_id` by `follower`,
/// which it embeds as Mastodon expects: the one way an answer to a remote follow is written
/// (an inbound follow, a follow request answered, a follower dropped by a domain block).
pub async fn answer_follow(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    follower: &RemoteActor,
    follow_id: &str,
    answer: &str,
) -> Result<usize, sqlx::Error> {
    let me = fed.actor_iri(&account.username);
    let activity = json!({
        "@context": context::ld(),
        "id": fed.new_activity_id(),
        "type": answer,
        "actor": me,
        "object": { "id": follow_id, "type": "Follow", "actor": follower.iri, "object": me },
        "to": [follower.iri],
    });
    queue_activity(
        &mut *tx,
        fed,
        account.id,
        &activity,
        &[Recipient::from(follower)],
    )
    .await
}
