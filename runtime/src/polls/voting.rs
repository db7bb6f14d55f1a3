//! A local account votes, on one of our polls or on a remote one (R-MAPI-3), with Mastodon's
//! rules (`VoteService`, `PollPolicy#vote?`): only on a poll whose status the voter may read
//! (else it does not exist for them: 404), not across a block either way (403), not after the
//! end, once per poll, and only for options the poll has (422).
//!
//! The poll row is locked, so the expiry check and the vote are one decision against the
//! notification handler (which takes the same lock). A vote on a remote poll is also counted at
//! once in the origin's counts we show (until its next `Update` says what it counted) and sent
//! there, in the same transaction (`federation::outbound::polls`): one `Create` per option.
//! It makes the voter someone to notify at the poll's end, so the poll is no longer "notified"
//! (see the migration `remote_polls`); the caller schedules its wakeup after the commit.

use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::storage::PollError;
use super::validation::{Invalid, check_choices};
use crate::accounts::{self, Account};
use crate::federation::Federation;
use crate::federation::outbound::polls::{self as outbound, Ballot};
use crate::statuses::access;
use crate::statuses::post::{self, Post};

/// The poll row as a vote reads it, locked.
#[derive(sqlx::FromRow)]
struct Locked {
    options: Value,
    multiple: bool,
    expired: bool,
    /// The status (ours) or remote post (theirs) it belongs to.
    post: Uuid,
    remote: bool,
}

/// `account_id` votes `choices` (option indices) on `poll_id`. `fed`: without federation a
/// block cannot be told (actors have no IRIs) and a remote poll cannot be voted on.
pub async fn vote(
    pool: &PgPool,
    fed: Option<&Federation>,
    poll_id: Uuid,
    account_id: Uuid,
    choices: &[i64],
) -> Result<(), PollError> {
    let mut tx = pool.begin().await?;
    let row: Option<Locked> = sqlx::query_as(
        "SELECT options, multiple, coalesce(expires_at <= now(), false) AS expired,
                coalesce(status_id, remote_post_id) AS post, remote_post_id IS NOT NULL AS remote
           FROM polls WHERE id = $1 FOR UPDATE",
    )
    .bind(poll_id)
    .fetch_optional(&mut *tx)
    .await?;
    let poll = row.ok_or(PollError::NotFound("poll"))?;
    // A poll is votable by whoever may read its status (R-MAPI-VIS); to anyone else it does
    // not exist.
    if !access::can_see(&mut tx, Some(account_id), poll.post).await? {
        return Err(PollError::NotFound("poll"));
    }
    // With federation, who the author and the voter are as actors (a status written without
    // it has no author IRI, and no block can name it).
    let voter = match fed {
        Some(fed) => {
            let post = post::find(&mut tx, Some(account_id), poll.post).await?;
            let account = accounts::by_id(&mut *tx, account_id).await?;
            let (Some(post), Some(account)) = (post, account) else {
                return Err(PollError::NotFound("poll"));
            };
            if post::blocked(&mut tx, fed, &account, &post).await? {
                return Err(PollError::AcrossBlock);
            }
            Some((fed, account, post))
        }
        None => None,
    };
    if poll.expired {
        return Err(Invalid::Ended.into());
    }
    let titles: Vec<String> = serde_json::from_value(poll.options).unwrap_or_default();
    check_choices(choices, titles.len(), poll.multiple)?;
    let voted: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM poll_votes WHERE poll_id = $1 AND account_id = $2)",
    )
    .bind(poll_id)
    .bind(account_id)
    .fetch_one(&mut *tx)
    .await?;
    if voted {
        return Err(Invalid::AlreadyVoted.into());
    }
    let choices32: Vec<i32> = choices.iter().map(|c| *c as i32).collect();
    if poll.remote {
        let (fed, account, post) = voter.ok_or(PollError::NotFound("poll"))?;
        let target = Remote {
            poll_id,
            titles: &titles,
            choices: &choices32,
        };
        vote_remote(&mut tx, fed, &account, &post, &target).await?;
    } else {
        sqlx::query(
            "INSERT INTO poll_votes (poll_id, account_id, choice)
             SELECT $1, $2, c FROM unnest($3::int[]) AS c",
        )
        .bind(poll_id)
        .bind(account_id)
        .bind(&choices32)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// A vote on a remote poll: what is voted.
struct Remote<'a> {
    poll_id: Uuid,
    titles: &'a [String],
    choices: &'a [i32],
}

/// Our vote on the remote poll of `post`: the votes (each with the id of the `Create` that
/// carries it), the counts we show, the poll's notification, and the `Create`s to its author.
async fn vote_remote(
    tx: &mut PgConnection,
    fed: &Federation,
    account: &Account,
    post: &Post,
    vote: &Remote<'_>,
) -> Result<(), sqlx::Error> {
    let actor = fed.actor_iri(&account.username);
    let mut ballots = Vec::with_capacity(vote.choices.len());
    for &choice in vote.choices {
        let Some(title) = vote.titles.get(choice as usize) else {
            continue; // `check_choices` let only options through
        };
        let ballot = Ballot::new(&actor, title);
        sqlx::query(
            "INSERT INTO poll_votes (poll_id, account_id, choice, activity_id)
             VALUES ($1, $2, $3, $4)",
        )
        .bind(vote.poll_id)
        .bind(account.id)
        .bind(choice)
        .bind(ballot.activity_id())
        .execute(&mut *tx)
        .await?;
        ballots.push(ballot);
    }
    // Counted at once, as Mastodon does, until the origin's next count; a poll with an end
    // now has someone to notify of it.
    sqlx::query(
        "UPDATE polls
            SET remote_counts = ARRAY(SELECT coalesce(remote_counts[i], 0)
                                             + CASE WHEN i - 1 = ANY($2) THEN 1 ELSE 0 END
                                        FROM generate_series(1, $3) AS i),
                remote_voters = remote_voters + 1,
                notified_at = CASE WHEN expires_at IS NULL THEN notified_at END
          WHERE id = $1",
    )
    .bind(vote.poll_id)
    .bind(vote.choices)
    .bind(vote.titles.len() as i32)
    .execute(&mut *tx)
    .await?;
    outbound::send_votes(tx, fed, account, post, &ballots).await?;
    Ok(())
}
