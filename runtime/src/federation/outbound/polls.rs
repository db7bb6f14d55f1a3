//! What a local account's vote on a remote poll sends, as Mastodon sends it: for each chosen
//! option, a `Create` of a `Note` whose `name` is the option's title and `inReplyTo` the poll's
//! post, attributed to the voter and addressed to the poll's author alone (a vote is theirs to
//! count, no one else's to read). Mastodon, GoToSocial and the others count a vote by these
//! three and the signer. Queued in the transaction that stores the vote (`polls::voting`).
//!
//! The ids are fragments of the voter's actor IRI, as Mastodon's (`…#votes/<id>` and its
//! `/activity`): nothing dereferences a vote, and the ids stay on the voter's origin.

use serde_json::json;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::outbound::interactions::to_actor;
use crate::statuses::post::Post;

/// One chosen option: its title, under the id of the note that carries it.
pub struct Ballot {
    note_id: String,
    title: String,
}

impl Ballot {
    /// A new vote of the actor `actor` for the option `title`.
    pub fn new(actor: &str, title: &str) -> Ballot {
        Ballot {
            note_id: format!("{actor}#votes/{}", Uuid::now_v7()),
            title: title.to_string(),
        }
    }

    /// The id of the `Create` that carries it (what `poll_votes` records).
    pub fn activity_id(&self) -> String {
        format!("{}/activity", self.note_id)
    }
}

/// Queues one `Create` per ballot to the remote author of `post` (the poll's post). Returns
/// the inboxes queued.
pub async fn send_votes(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    ballots: &[Ballot],
) -> Result<usize, sqlx::Error> {
    let Some(author) = &post.actor_iri else {
        return Ok(0); // ours: counted where it was stored
    };
    let actor = fed.actor_iri(&account.username);
    let mut queued = 0;
    for b in ballots {
        let create = json!({
            "id": b.activity_id(), "type": "Create", "actor": actor,
            "published": chrono::Utc::now(),
            "object": {
                "id": b.note_id, "type": "Note", "name": b.title,
                "attributedTo": actor, "inReplyTo": post.uri, "to": [author],
            },
        });
        queued += to_actor(&mut *tx, fed, account.id, author, create).await?;
    }
    Ok(queued)
}
