//! Mutes (R-MAPI-6): an account stops seeing another's posts and boosts (and, unless
//! it says otherwise, their notifications) without them knowing: nothing is federated, the
//! follow stays. A mute may end by itself (`duration`): readers stop honouring it at
//! `expires_at` (`statuses::hidden`), and a queued task (`tasks::mute_expiry`) removes the row
//! after that moment, so the relationship reads unmuted again. Each change tells the account's
//! open streams to reload what they hide.

use std::time::Duration;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName, enqueue};

/// The expiry task's kind (`tasks::mute_expiry`).
pub const EXPIRY_KIND: &str = "hollo.mute-expiry.v1";

/// Longest mute duration a client may ask for (Mastodon caps nothing; a year-long timer is
/// still a timer, and 100 years is forever for any client that shows it).
pub const MAX_DURATION: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// One expiry message per mute: a second mute of the same account moves it, never doubles it.
pub fn expiry_key(account: Uuid, target_iri: &str) -> String {
    format!("hollo.mute-expiry:{account}:{target_iri}")
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryPayload {
    pub account_id: Uuid,
    pub target_iri: String,
}

#[derive(Debug, thiserror::Error)]
pub enum MuteError {
    /// Not allowed (muting oneself): 422 for the client.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// `account` (whose actor IRI is `own_iri`) mutes `target_iri`: hiding their notifications
/// too when `notifications`, until `duration` from now when given (a new mute of a muted
/// account replaces its settings, as on Mastodon).
pub async fn mute(
    tx: &mut PgConnection,
    account: Uuid,
    own_iri: &str,
    target_iri: &str,
    notifications: bool,
    duration: Option<Duration>,
) -> Result<(), MuteError> {
    if target_iri == own_iri {
        return Err(MuteError::Refused("you cannot mute yourself".into()));
    }
    sqlx::query(
        "INSERT INTO account_mutes (account_id, target_iri, notifications, expires_at)
         VALUES ($1, $2, $3, now() + make_interval(secs => $4))
         ON CONFLICT (account_id, target_iri) DO UPDATE
            SET notifications = EXCLUDED.notifications, expires_at = EXCLUDED.expires_at",
    )
    .bind(account)
    .bind(target_iri)
    .bind(notifications)
    .bind(duration.map(|d| d.as_secs_f64()))
    .execute(&mut *tx)
    .await?;
    if let Some(d) = duration {
        // In the same transaction: the mute and its end are stored together or not at all.
        let payload = ExpiryPayload {
            account_id: account,
            target_iri: target_iri.to_string(),
        };
        let data = serde_json::to_value(&payload).unwrap_or_default();
        enqueue(
            &mut *tx,
            QueueName::Task,
            &NewMessage::new(EXPIRY_KIND, data)
                .delay(d.min(crate::queue::LONGEST_WAIT))
                .coalesce(expiry_key(account, target_iri)),
        )
        .await?;
    }
    crate::streaming::emit::relationship(tx, account).await?;
    Ok(())
}

/// Lifts `account`'s mute of `target_iri`; `false` when there was none.
pub async fn unmute(
    tx: &mut PgConnection,
    account: Uuid,
    target_iri: &str,
) -> Result<bool, sqlx::Error> {
    let gone = sqlx::query("DELETE FROM account_mutes WHERE account_id = $1 AND target_iri = $2")
        .bind(account)
        .bind(target_iri)
        .execute(&mut *tx)
        .await?
        .rows_affected()
        > 0;
    if gone {
        crate::streaming::emit::relationship(tx, account).await?;
    }
    Ok(gone)
}

/// The mutes of `$1` in force: `(id, actor IRI, end)` rows, paged by the mute's id (the
/// caller's cursor conditions complete it).
pub const LIST_SELECT: &str = "SELECT id, target_iri, expires_at FROM account_mutes
     WHERE account_id = $1 AND (expires_at IS NULL OR expires_at > now()) AND";
