//! What quoting sends (FEP-044f): our `QuoteRequest` to a quoted post's remote author (the
//! quoting note embedded as `instrument`), our `Accept` (with the `QuoteAuthorization` as
//! `result`) or `Reject` of theirs, and the `Delete` of an authorization we revoke. Each is
//! queued in the transaction that changed the quote.

use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::outbound::interactions::to_actor;

/// Queues `account`'s `QuoteRequest` `id` for `quoted` (by `author`), carrying `note`.
#[allow(clippy::too_many_arguments)]
pub async fn request(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    username: &str,
    id: &str,
    quoted: &str,
    author: &str,
    note: Value,
) -> Result<usize, sqlx::Error> {
    let mut note = note;
    // Embedded: the activity's own `@context` covers it.
    if let Some(o) = note.as_object_mut() {
        o.remove("@context");
    }
    let activity = json!({
        "id": id, "type": "QuoteRequest", "actor": fed.actor_iri(username),
        "object": quoted, "instrument": note,
    });
    to_actor(tx, fed, account, author, activity).await
}

/// Queues the answer of `username` to `actor`'s `QuoteRequest` `request`: an `Accept` whose
/// `result` is `authorization`, or (`None`) a `Reject`.
pub async fn answer(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    username: &str,
    actor: &str,
    request: &Value,
    authorization: Option<&str>,
) -> Result<usize, sqlx::Error> {
    let mut activity = json!({
        "id": fed.new_activity_id(),
        "type": if authorization.is_some() { "Accept" } else { "Reject" },
        "actor": fed.actor_iri(username), "object": request,
    });
    if let Some(a) = authorization {
        activity["result"] = json!(a);
    }
    to_actor(tx, fed, account, actor, activity).await
}

/// Queues the `Delete` of our revoked `authorization` to the quoting post's remote author.
pub async fn revoke(
    tx: &mut PgConnection,
    fed: &Federation,
    account: Uuid,
    username: &str,
    authorization: &str,
    quoting_author: &str,
) -> Result<usize, sqlx::Error> {
    let activity = json!({
        "id": fed.new_activity_id(), "type": "Delete",
        "actor": fed.actor_iri(username), "object": authorization,
    });
    to_actor(tx, fed, account, quoting_author, activity).await
}
