//! Remote votes: Mastodon sends a vote as `Create` of a `Note` with `name` (the option's title)
//! and `inReplyTo` the poll's status, attributed to the voter. Applied inside the inbox
//! transaction, with the poll row locked like a local vote, so a vote after the end never
//! counts and a redelivered activity never counts twice.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::activity::Incoming;
use crate::federation::actor::id_of;

/// The option's name and the poll's status IRI when `inc` has the shape of a vote (a `Create`
/// of a `Note` with `name` and `inReplyTo`), whoever's poll it names.
pub fn vote_shape(inc: &Incoming) -> Option<(&str, &str)> {
    if inc.ty != "Create" {
        return None;
    }
    let object = inc.body.get("object")?;
    if object.get("type").and_then(Value::as_str) != Some("Note") {
        return None;
    }
    let name = object.get("name").and_then(Value::as_str)?;
    let in_reply_to = object.get("inReplyTo").and_then(id_of)?;
    Some((name, in_reply_to))
}

/// `None` when the activity is not a vote on one of our polls (the caller applies it as
/// usual); otherwise the outcome to record.
pub async fn apply_vote(
    tx: &mut PgConnection,
    inc: &Incoming,
) -> Result<Option<String>, sqlx::Error> {
    let Some((name, in_reply_to)) = vote_shape(inc) else {
        return Ok(None);
    };
    let object = inc.body.get("object").unwrap_or(&Value::Null);
    let poll: Option<(Uuid, Value, bool, bool)> = sqlx::query_as(
        "SELECT p.id, p.options, p.multiple, p.expires_at <= now()
           FROM polls p JOIN statuses s ON s.id = p.status_id
          WHERE s.uri = $1 FOR UPDATE OF p",
    )
    .bind(in_reply_to)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((poll_id, options, multiple, expired)) = poll else {
        return Ok(None);
    };
    let author = object.get("attributedTo").and_then(id_of);
    if author != Some(inc.actor.as_str()) {
        return Ok(Some("ignored: vote not attributed to the signer".into()));
    }
    if expired {
        return Ok(Some("ignored: vote after the poll ended".into()));
    }
    let titles: Vec<String> = serde_json::from_value(options).unwrap_or_default();
    let Some(choice) = titles.iter().position(|t| t == name.trim()) else {
        return Ok(Some("ignored: vote for no option of the poll".into()));
    };
    if !multiple {
        let voted: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM poll_votes WHERE poll_id = $1 AND actor_iri = $2)",
        )
        .bind(poll_id)
        .bind(&inc.actor)
        .fetch_one(&mut *tx)
        .await?;
        if voted {
            return Ok(Some(
                "ignored: already voted on a single-choice poll".into(),
            ));
        }
    }
    let n = sqlx::query(
        "INSERT INTO poll_votes (poll_id, actor_iri, choice, activity_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING",
    )
    .bind(poll_id)
    .bind(&inc.actor)
    .bind(choice as i32)
    .bind(&inc.id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(Some(if n == 1 {
        "poll vote stored".into()
    } else {
        "ignored: vote already stored".into()
    }))
}
