//! What pinning sends (R-MAPI-6): an `Add` (pin) or `Remove` (unpin) of the status to
//! the actor's `featured` collection, to its followers, as Mastodon sends them; queued in the
//! transaction that stores the change (`statuses::pins`).

use serde_json::json;
use sqlx::PgConnection;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::delivery::queue_activity;
use crate::federation::outbound::statuses::inboxes;

/// Queues the `Add` (`added`) or `Remove` of `status_uri` to the followers of `account`.
pub async fn send(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    status_uri: &str,
    added: bool,
) -> Result<usize, sqlx::Error> {
    let actor = fed.actor_iri(&account.username);
    let activity = json!({
        "@context": context::ld(),
        "id": fed.new_activity_id(),
        "type": if added { "Add" } else { "Remove" },
        "actor": actor,
        "object": status_uri,
        "target": fed.featured(&account.username),
        "to": [fed.followers(&account.username)],
    });
    let to = inboxes(&mut *tx, account.id, true, None, &[], &[]).await?;
    queue_activity(&mut *tx, fed, account.id, &activity, &to).await
}
