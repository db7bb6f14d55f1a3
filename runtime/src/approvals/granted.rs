//! The approvals we grant: a remote like of, or reply to, one of our followers-only statuses.
//!
//! Our policy (`federation::outbound::policy`) lets the author's followers like and reply to a
//! followers-only status. A remote server cannot check who is in our followers collection, so
//! GoToSocial (0.17 on; `docs/federation/interaction_policy.md` and
//! `internal/processing/status/fave.go`, `create.go` in 0.18.3) stores its user's like or reply
//! whose permission rests on that collection as pending, sends it to the author alone, and
//! waits for the author's server to `Accept` it; until then the reply is shown to no one else
//! there and counted nowhere. So when such an interaction reaches us and our rule allows it —
//! the actor follows the author now or the status mentions it, and no block stands between
//! them — we grant an approval and send its `Accept`:
//!
//! - `object` the interaction, type-hinted (`{"type": "Like", "id": …}`, or the reply's type):
//!   GoToSocial finds a like by its id, a reply by its IRI;
//! - `target` our status, `result` the approval's IRI `<actor>/approvals/<id>` — on our host,
//!   as the `Accept`'s id is, so GoToSocial 0.18 records the `result` (not the `Accept`) as the
//!   interaction's `approvedBy`, which every server its interaction then reaches fetches.
//!
//! The approval is served there as a `LikeApproval` or `ReplyApproval` (`attributedTo` our
//! author, `object` the interaction, `target` our status: what GoToSocial 0.18 checks of one),
//! and the `Accept` at `<approval>/accept`, for servers that take the `Accept` itself as the
//! approval (GoToSocial 0.17). Both answer 404 for anything we did not approve, and once the
//! like is undone, the reply deleted or the status gone.
//!
//! Public and unlisted statuses let everyone interact (`as:Public`, which needs no proof), and
//! a direct one only the actors it names: neither needs an approval, so none is sent.

use serde_json::{Value, json};
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::Kind;
use crate::federation::Federation;
use crate::federation::context;
use crate::federation::outbound::interactions::to_actor;
use crate::federation::outbound::relationships;

/// A remote interaction with a status of ours.
pub struct Interaction<'a> {
    pub kind: Kind,
    /// The `Like`'s id, or the reply's IRI.
    pub id: &'a str,
    /// What it is: `Like`, or the reply's type (`Note`, `Article`, `Question`, …).
    pub ty: &'a str,
    /// Who made it.
    pub actor: &'a str,
}

/// A followers-only status of ours, as a grant reads it.
#[derive(sqlx::FromRow)]
struct Ours {
    id: Uuid,
    uri: String,
    account_id: Uuid,
    username: String,
    /// Whether it mentions the interacting actor.
    mentions_actor: bool,
    /// Whether the interacting actor follows its author now.
    followed_by_actor: bool,
}

/// Grants `what` with the status at `status_uri` its approval, and queues the `Accept`, when
/// the status is a followers-only one of ours that the actor may like and reply to. Once per
/// interaction: a redelivered like or reply (GoToSocial sends the reply again once approved)
/// sends nothing more. Whether an approval stands for it.
pub async fn grant(
    tx: &mut PgConnection,
    fed: &Federation,
    status_uri: &str,
    what: &Interaction<'_>,
) -> Result<bool, sqlx::Error> {
    let ours: Option<Ours> = sqlx::query_as(
        "SELECT s.id, s.uri, s.account_id, a.username,
                EXISTS (SELECT 1 FROM jsonb_array_elements(s.mentions) m WHERE m->>'href' = $2)
                    AS mentions_actor,
                EXISTS (SELECT 1 FROM followers f WHERE f.account_id = s.account_id
                                                    AND f.actor_iri = $2) AS followed_by_actor
           FROM statuses s JOIN accounts a ON a.id = s.account_id
          WHERE s.uri = $1 AND s.visibility = 'private'",
    )
    .bind(status_uri)
    .bind(what.actor)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(ours) = ours else {
        return Ok(false);
    };
    if !(ours.mentions_actor || ours.followed_by_actor) {
        return Ok(false);
    }
    let author = fed.actor_iri(&ours.username);
    if relationships::blocked_either_way(&mut *tx, fed, ours.account_id, &author, what.actor)
        .await?
    {
        return Ok(false);
    }
    let granted: Option<Uuid> = sqlx::query_scalar(
        "INSERT INTO interaction_grants (id, status_id, kind, interaction, interaction_type, actor)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (interaction, status_id) DO NOTHING RETURNING id",
    )
    .bind(Uuid::now_v7())
    .bind(ours.id)
    .bind(kind_name(what.kind))
    .bind(what.id)
    .bind(what.ty)
    .bind(what.actor)
    .fetch_optional(&mut *tx)
    .await?;
    let Some(id) = granted else {
        return Ok(true);
    };
    let grant = Grant {
        id,
        username: &ours.username,
        kind: what.kind,
        interaction: what.id,
        interaction_type: what.ty,
        actor: what.actor,
        target: &ours.uri,
    };
    to_actor(tx, fed, ours.account_id, what.actor, grant.accept(fed)).await?;
    Ok(true)
}

/// Takes back the approvals of `actor`'s interaction `interaction` (an undone like, a deleted
/// reply): no longer served.
pub async fn withdraw(
    tx: &mut PgConnection,
    interaction: &str,
    actor: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM interaction_grants WHERE interaction = $1 AND actor = $2")
        .bind(interaction)
        .bind(actor)
        .execute(tx)
        .await?;
    Ok(())
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Like => "like",
        Kind::Reply => "reply",
        Kind::Announce => "announce",
    }
}

/// Where the approvals of `username`'s statuses live.
fn prefix(fed: &Federation, username: &str) -> String {
    format!("{}/approvals/", fed.actor_iri(username))
}

/// One approval, as served and as its `Accept` names it.
struct Grant<'a> {
    id: Uuid,
    username: &'a str,
    kind: Kind,
    interaction: &'a str,
    interaction_type: &'a str,
    actor: &'a str,
    target: &'a str,
}

impl Grant<'_> {
    fn iri(&self, fed: &Federation) -> String {
        format!("{}{}", prefix(fed, self.username), self.id)
    }

    /// The approval object (GoToSocial's `LikeApproval`, `ReplyApproval`).
    fn approval(&self, fed: &Federation) -> Value {
        let ty = match self.kind {
            Kind::Like => "LikeApproval",
            Kind::Reply => "ReplyApproval",
            Kind::Announce => "AnnounceApproval",
        };
        json!({
            "@context": context::ld(),
            "id": self.iri(fed),
            "type": ty,
            "attributedTo": fed.actor_iri(self.username),
            "object": self.interaction,
            "target": self.target,
        })
    }

    /// The `Accept` that gives it: at `<approval>/accept`, to the interacting actor.
    fn accept(&self, fed: &Federation) -> Value {
        let approval = self.iri(fed);
        json!({
            "@context": context::ld(),
            "id": format!("{approval}/accept"),
            "type": "Accept",
            "actor": fed.actor_iri(self.username),
            "to": [self.actor],
            "object": { "type": self.interaction_type, "id": self.interaction },
            "target": self.target,
            "result": approval,
        })
    }
}

/// What `<actor of username>/approvals/<id>` serves — the approval (`accept` false) or its
/// `Accept` — with the account of the status it is with (whose blocks the handler applies);
/// `None` for one we never granted, granted for another account's status, or no longer
/// standing.
pub async fn document(
    pool: &PgPool,
    fed: &Federation,
    username: &str,
    id: Uuid,
    accept: bool,
) -> Result<Option<(Uuid, Value)>, sqlx::Error> {
    type Row = (Uuid, String, String, String, String, String, String);
    let row: Option<Row> = sqlx::query_as(
        "SELECT s.account_id, a.username, g.kind, g.interaction, g.interaction_type, g.actor,
                s.uri
           FROM interaction_grants g
           JOIN statuses s ON s.id = g.status_id JOIN accounts a ON a.id = s.account_id
          WHERE g.id = $1 AND lower(a.username) = lower($2)",
    )
    .bind(id)
    .bind(username)
    .fetch_optional(pool)
    .await?;
    Ok(
        row.map(|(author, username, kind, interaction, ty, actor, target)| {
            let grant = Grant {
                id,
                username: &username,
                kind: if kind == "like" {
                    Kind::Like
                } else {
                    Kind::Reply
                },
                interaction: &interaction,
                interaction_type: &ty,
                actor: &actor,
                target: &target,
            };
            let doc = if accept {
                grant.accept(fed)
            } else {
                grant.approval(fed)
            };
            (author, doc)
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed() -> Federation {
        Federation::new(
            "https://hollo.test",
            "secret-0123456789abcdef0123456789",
            false,
            4,
        )
        .expect("federation")
    }

    /// What GoToSocial 0.18 checks: the `result` on the `Accept`'s host, the approval's type
    /// for the interaction, its `attributedTo` the author and its `object` the interaction.
    #[test]
    fn the_accept_names_the_interaction_and_an_approval_on_our_host() {
        let fed = fed();
        let grant = Grant {
            id: Uuid::nil(),
            username: "alice",
            kind: Kind::Like,
            interaction: "https://gts.test/users/bob/liked/01J",
            interaction_type: "Like",
            actor: "https://gts.test/users/bob",
            target: "https://hollo.test/users/alice/statuses/1",
        };
        let accept = grant.accept(&fed);
        let approval = grant.approval(&fed);
        assert_eq!(accept["result"], approval["id"]);
        assert_eq!(
            accept["id"],
            json!(format!("{}/accept", approval["id"].as_str().unwrap()))
        );
        assert_eq!(accept["actor"], "https://hollo.test/users/alice");
        assert_eq!(
            accept["object"],
            json!({ "type": "Like", "id": "https://gts.test/users/bob/liked/01J" })
        );
        assert_eq!(accept["to"], json!(["https://gts.test/users/bob"]));
        assert_eq!(approval["type"], "LikeApproval");
        assert_eq!(approval["attributedTo"], accept["actor"]);
        assert_eq!(approval["object"], accept["object"]["id"]);
        assert_eq!(approval["target"], accept["target"]);
        let reply = Grant {
            kind: Kind::Reply,
            ..grant
        };
        assert_eq!(reply.approval(&fed)["type"], "ReplyApproval");
    }
}
