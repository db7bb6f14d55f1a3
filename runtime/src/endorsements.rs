//! Endorsements (Mastodon's featured accounts, `AccountPin`, R-MAPI-6): the accounts a local
//! account features on its profile. Only an account one follows can be endorsed, and an
//! endorsement ends with the follow (unfollowing, blocking, a domain block), as on Mastodon.
//! Kept by actor IRI, like follows.

use sqlx::PgConnection;
use uuid::Uuid;

#[derive(Debug, thiserror::Error)]
pub enum EndorseError {
    #[error("You must be following this account to endorse it")]
    NotFollowing,
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// `account` endorses the actor `target`, which it must follow (accepted). Idempotent.
pub async fn endorse(
    tx: &mut PgConnection,
    account: Uuid,
    target: &str,
) -> Result<(), EndorseError> {
    let following: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM follows
                         WHERE account_id = $1 AND target_iri = $2 AND state = 'accepted')",
    )
    .bind(account)
    .bind(target)
    .fetch_one(&mut *tx)
    .await?;
    if !following {
        return Err(EndorseError::NotFollowing);
    }
    sqlx::query(
        "INSERT INTO account_endorsements (account_id, target_iri) VALUES ($1, $2)
         ON CONFLICT DO NOTHING",
    )
    .bind(account)
    .bind(target)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// `account` no longer endorses `target` (nothing endorsed: nothing changes). Also how a
/// follow's end takes its endorsement along.
pub async fn forget(tx: &mut PgConnection, account: Uuid, target: &str) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM account_endorsements WHERE account_id = $1 AND target_iri = $2")
        .bind(account)
        .bind(target)
        .execute(tx)
        .await?;
    Ok(())
}

/// The endorsements of `$1`, paged by the endorsement's id (the caller's cursor conditions
/// complete it), as `(id, actor IRI)` rows.
pub const LIST_SELECT: &str =
    "SELECT id, target_iri FROM account_endorsements WHERE account_id = $1 AND";
