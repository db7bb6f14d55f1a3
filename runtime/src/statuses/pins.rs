//! Pinned statuses (R-MAPI-6): an account pins up to [`MAX_PINNED`] of its own
//! statuses (not direct ones) to its profile, as Mastodon does. Each pin or unpin is stored
//! with the `Add` / `Remove` it sends to the account's followers (target: the actor's
//! `featured` collection) in the caller's transaction. Remote actors' pins arrive as their
//! `Add` / `Remove` and are kept by IRI ([`remote_add`]).

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::statuses::post::Post;

/// Mastodon's limit (`configuration.accounts.max_pinned_statuses`).
pub const MAX_PINNED: i64 = 5;

#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// Not the account's own, a direct status, or past the limit: 422.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// `account` pins `post` (again: nothing changes), and tells its followers.
pub async fn pin(
    tx: &mut PgConnection,
    fed: Option<&Federation>,
    account: &Account,
    post: &Post,
) -> Result<(), PinError> {
    if post.account_id != Some(account.id) {
        return Err(PinError::Refused(
            "Validation failed: you can only pin your own statuses".into(),
        ));
    }
    if post.visibility == "direct" {
        return Err(PinError::Refused(
            "Validation failed: a direct message cannot be pinned".into(),
        ));
    }
    // Serializes an account's pins, so the limit holds under concurrent requests.
    crate::accounts::lock(&mut *tx, account.id).await?;
    let (pinned, count): (bool, i64) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM status_pins WHERE account_id = $1 AND status_id = $2),
                (SELECT count(*) FROM status_pins WHERE account_id = $1)",
    )
    .bind(account.id)
    .bind(post.id)
    .fetch_one(&mut *tx)
    .await?;
    if pinned {
        return Ok(());
    }
    if count >= MAX_PINNED {
        return Err(PinError::Refused(format!(
            "Validation failed: you may pin at most {MAX_PINNED} statuses"
        )));
    }
    sqlx::query("INSERT INTO status_pins (account_id, status_id) VALUES ($1, $2)")
        .bind(account.id)
        .bind(post.id)
        .execute(&mut *tx)
        .await?;
    if let Some(fed) = fed {
        crate::federation::outbound::featured::send(tx, fed, account, &post.uri, true).await?;
    }
    Ok(())
}

/// `account` unpins `post` (not pinned: nothing changes), and tells its followers.
pub async fn unpin(
    tx: &mut PgConnection,
    fed: Option<&Federation>,
    account: &Account,
    post: &Post,
) -> Result<(), sqlx::Error> {
    let gone = sqlx::query("DELETE FROM status_pins WHERE account_id = $1 AND status_id = $2")
        .bind(account.id)
        .bind(post.id)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        > 0;
    if let (true, Some(fed)) = (gone, fed) {
        crate::federation::outbound::featured::send(tx, fed, account, &post.uri, false).await?;
    }
    Ok(())
}

/// Which of `ids` the viewer pinned (Mastodon shows `pinned` on one's own statuses only).
pub async fn pinned_among(
    conn: &mut PgConnection,
    viewer: Uuid,
    ids: &[Uuid],
) -> Result<HashSet<Uuid>, sqlx::Error> {
    let rows: Vec<Uuid> = sqlx::query_scalar(
        "SELECT status_id FROM status_pins WHERE account_id = $1 AND status_id = ANY($2)",
    )
    .bind(viewer)
    .bind(ids)
    .fetch_all(conn)
    .await?;
    Ok(rows.into_iter().collect())
}

/// A local account's pinned statuses, the latest pin first.
pub async fn of_local(conn: &mut PgConnection, account: Uuid) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT status_id FROM status_pins WHERE account_id = $1 ORDER BY created_at DESC",
    )
    .bind(account)
    .fetch_all(conn)
    .await
}

/// A remote actor's pinned posts that reached us, the latest pin first.
pub async fn of_remote(conn: &mut PgConnection, actor: &str) -> Result<Vec<Uuid>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT p.id FROM remote_pins r JOIN remote_posts p ON p.iri = r.post_iri
          WHERE r.actor_iri = $1 AND p.actor = $1 AND p.deleted_at IS NULL
          ORDER BY r.created_at DESC LIMIT 50",
    )
    .bind(actor)
    .fetch_all(conn)
    .await
}

/// A remote actor pinned (`added`) or unpinned one of its posts. Only its own featured
/// collection counts: `target` must be the collection its actor document names, or, when we
/// do not know it, one under the actor's IRI (Mastodon's `…/collections/featured`).
pub async fn remote_change(
    tx: &mut PgConnection,
    actor: &str,
    post: &str,
    added: bool,
) -> Result<(), sqlx::Error> {
    if added {
        sqlx::query(
            "INSERT INTO remote_pins (actor_iri, post_iri) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(actor)
        .bind(post)
        .execute(tx)
        .await?;
    } else {
        sqlx::query("DELETE FROM remote_pins WHERE actor_iri = $1 AND post_iri = $2")
            .bind(actor)
            .bind(post)
            .execute(tx)
            .await?;
    }
    Ok(())
}
