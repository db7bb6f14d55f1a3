//! Remote votes on our polls: Mastodon sends a vote as `Create` of a `Note` with `name` (the
//! option's title) and `inReplyTo` the poll's status, attributed to the voter. Applied inside
//! the inbox transaction, with the poll row locked like a local vote, so a vote after the end
//! never counts and a redelivered activity never counts twice; nor does one across a block,
//! either way (as a local vote, `polls::voting`). Remote polls are `question`.

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::federation::Federation;
use crate::federation::outbound::relationships;

/// A remote vote as the inbox reads it: the option's title, the poll's status IRI and who the
/// vote's note is attributed to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ballot {
    pub option: String,
    pub poll: String,
    pub attributed_to: Option<String>,
}

/// What a vote on one of our polls did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VoteOutcome {
    Stored,
    /// The same activity again (a redelivery).
    AlreadyStored,
    NotAttributedToSigner,
    AfterEnd,
    NoSuchOption,
    /// A second vote on a single-choice poll.
    AlreadyVoted,
    /// The poll's author blocks the voter, or the voter the author.
    AcrossBlock,
}

/// Counts `voter`'s ballot (activity `activity_id`). `None` when the ballot names no poll of
/// ours (the caller stores it as the note it is).
pub async fn apply_vote(
    tx: &mut PgConnection,
    fed: &Federation,
    activity_id: &str,
    voter: &str,
    ballot: &Ballot,
) -> Result<Option<VoteOutcome>, sqlx::Error> {
    let poll: Option<(Uuid, Value, bool, bool, Uuid)> = sqlx::query_as(
        "SELECT p.id, p.options, p.multiple, p.expires_at <= now(), s.account_id
           FROM polls p JOIN statuses s ON s.id = p.status_id
          WHERE s.uri = $1 FOR UPDATE OF p",
    )
    .bind(&ballot.poll)
    .fetch_optional(&mut *tx)
    .await?;
    let Some((poll_id, options, multiple, expired, author)) = poll else {
        return Ok(None);
    };
    if ballot.attributed_to.as_deref() != Some(voter) {
        return Ok(Some(VoteOutcome::NotAttributedToSigner));
    }
    // Our status's IRI is `<author's actor IRI>/statuses/<id>` (`storage::insert_status`).
    if let Some((author_iri, _)) = ballot.poll.rsplit_once("/statuses/")
        && relationships::blocked_either_way(tx, fed, author, author_iri, voter).await?
    {
        return Ok(Some(VoteOutcome::AcrossBlock));
    }
    if expired {
        return Ok(Some(VoteOutcome::AfterEnd));
    }
    let titles: Vec<String> = serde_json::from_value(options).unwrap_or_default();
    let Some(choice) = titles.iter().position(|t| t == ballot.option.trim()) else {
        return Ok(Some(VoteOutcome::NoSuchOption));
    };
    if !multiple {
        let voted: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM poll_votes WHERE poll_id = $1 AND actor_iri = $2)",
        )
        .bind(poll_id)
        .bind(voter)
        .fetch_one(&mut *tx)
        .await?;
        if voted {
            return Ok(Some(VoteOutcome::AlreadyVoted));
        }
    }
    let n = sqlx::query(
        "INSERT INTO poll_votes (poll_id, actor_iri, choice, activity_id) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING",
    )
    .bind(poll_id)
    .bind(voter)
    .bind(choice as i32)
    .bind(activity_id)
    .execute(&mut *tx)
    .await?
    .rows_affected();
    Ok(Some(if n == 1 {
        VoteOutcome::Stored
    } else {
        VoteOutcome::AlreadyStored
    }))
}
