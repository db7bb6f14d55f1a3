//! Applying a stored activity: `prepare` does the network work (never inside a transaction),
//! `apply` the effects inside the processing transaction, dispatching each `Activity` to its
//! family (`follows`, `notes`, `interactions`, `actors`, the polls' votes).

use sqlx::{PgConnection, PgPool};

use super::activity::{Activity, Object};
use super::incoming::Incoming;
use super::outcome::Outcome;
use super::resolve;
use super::{actors, follows, interactions, notes};
use crate::accounts::Account;
use crate::federation::actors::actor::{self, RemoteActor};
use crate::federation::transport::signature::SigningKey;
use crate::federation::{Federation, iri};
use crate::quotes;

/// Network work done before the transaction.
pub enum Prepared {
    Nothing,
    /// A note quoting a remote post with a claimed authorization: whether the claim held.
    Quote {
        claim_holds: bool,
    },
    /// A `QuoteRequest` for one of our posts: whether its note, fetched from its own id, is
    /// attributed to the requester (only then is it answered).
    QuoteRequest {
        note_by_actor: bool,
    },
    /// A `Follow` of a local account: the follower (for its inbox) and the followed account.
    Follow {
        follower: Box<RemoteActor>,
        account: Box<Account>,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// Worth retrying (remote unreachable, database blip).
    #[error("{0}")]
    Transient(String),
}

impl From<sqlx::Error> for ProcessError {
    fn from(e: sqlx::Error) -> Self {
        ProcessError::Transient(format!("database: {e}"))
    }
}

fn transient(e: impl std::fmt::Display) -> ProcessError {
    ProcessError::Transient(e.to_string())
}

/// `actor_known`: the actor is stored already (read with the activity), so an activity shown
/// as by its actor needs no lookup of it here.
pub async fn prepare(
    pool: &PgPool,
    fed: &Federation,
    inc: &Incoming,
    activity: &Activity,
    actor_known: bool,
) -> Result<Prepared, ProcessError> {
    if let Activity::QuoteRequest { object, instrument } = activity {
        return quote_request_note(pool, fed, inc, object, instrument).await;
    }
    if activity.shows_actor() {
        // Posts, boosts and likes are shown and notified as by the actor's Account entity:
        // the actor must be stored (the signature check only cached its key). Fetched as the
        // instance actor: servers in authorized-fetch mode answer it.
        let signer = fed
            .instance_key(pool)
            .await
            .map_err(|e| transient(format_args!("{e:#}")))?;
        if !actor_known {
            actor::known_actor(pool, fed, &inc.actor, Some(&signer.signing))
                .await
                .map_err(|e| transient(format_args!("fetching actor {}: {e}", inc.actor)))?;
        }
        if let Activity::Announce(post) = activity {
            boosted_post(pool, fed, &signer.signing, inc, post).await?;
        }
        if let Activity::Note { note, .. } = activity {
            return quoted_post(pool, fed, &signer.signing, inc, note).await;
        }
        return Ok(Prepared::Nothing);
    }
    let Activity::Follow(target) = activity else {
        return Ok(Prepared::Nothing);
    };
    let Some(account) = follows::local_target(pool, fed, target).await? else {
        return Ok(Prepared::Nothing);
    };
    let signer = fed
        .signing_key(&account)
        .map_err(|e| transient(format_args!("{e:#}")))?;
    let follower = actor::known_actor(pool, fed, &inc.actor, Some(&signer))
        .await
        .map_err(|e| transient(format_args!("fetching follower {}: {e}", inc.actor)))?;
    Ok(Prepared::Follow {
        follower: Box::new(follower),
        account: Box::new(account),
    })
}

/// The post an `Announce` boosts, fetched and stored when we do not have it (a followed
/// account boosting someone we never heard of is the common case): from its own server,
/// signed as the instance actor, never from the copy the booster embedded. A post that cannot
/// be fetched leaves the boost to be ignored (logged), as an unknown post's boost is.
async fn boosted_post(
    pool: &PgPool,
    fed: &Federation,
    signer: &SigningKey,
    inc: &Incoming,
    post: &Object,
) -> Result<(), ProcessError> {
    if !post.has_id() || iri::same_origin(&post.id, &fed.origin) {
        return Ok(()); // ours: `apply` finds it or ignores it
    }
    let known: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM remote_posts WHERE iri = $1)")
            .bind(&post.id)
            .fetch_one(pool)
            .await?;
    if !known && let Err(e) = resolve::resolve_url(pool, fed, signer, &post.id).await {
        tracing::info!(activity = %inc.id, post = %post.id, error = %e,
            "the boosted post could not be fetched; the boost is ignored");
    }
    Ok(())
}

/// Whether the note a `QuoteRequest` for our post names is the requester's: fetched from its
/// own id (as the instance actor), since whoever asks could name a note of someone else on
/// their server and get it approved. An unreachable server is retried; a note that cannot be
/// had (gone, refused, malformed) is not theirs.
async fn quote_request_note(
    pool: &PgPool,
    fed: &Federation,
    inc: &Incoming,
    object: &Object,
    note: &Object,
) -> Result<Prepared, ProcessError> {
    if !iri::same_origin(&object.id, &fed.origin) {
        return Ok(Prepared::Nothing);
    }
    if !note.has_id() || !iri::same_origin(&note.id, &inc.actor) {
        return Ok(Prepared::QuoteRequest {
            note_by_actor: false,
        });
    }
    let signer = fed
        .instance_key(pool)
        .await
        .map_err(|e| transient(format_args!("{e:#}")))?;
    use crate::federation::transport::fetch::FetchError;
    let note_by_actor = match fed
        .fetch
        .get_canonical(&note.id, Some(&signer.signing))
        .await
    {
        Ok(doc) => doc
            .get("attributedTo")
            .and_then(actor::id_of)
            .is_some_and(|a| a == inc.actor),
        Err(e @ (FetchError::Network(_) | FetchError::TooManyRequests(_))) => {
            return Err(transient(format_args!("fetching {}: {e}", note.id)));
        }
        Err(FetchError::Status(code)) if code >= 500 => {
            return Err(transient(format_args!("fetching {}: HTTP {code}", note.id)));
        }
        Err(_) => false,
    };
    Ok(Prepared::QuoteRequest { note_by_actor })
}

/// The post a note quotes, fetched when we do not have it (as a boosted post is), and the
/// authorization it claims, checked against that post's author.
async fn quoted_post(
    pool: &PgPool,
    fed: &Federation,
    signer: &SigningKey,
    inc: &Incoming,
    note: &Object,
) -> Result<Prepared, ProcessError> {
    let Some(quoted) = crate::quotes::quoted_iri(&note.doc) else {
        return Ok(Prepared::Nothing);
    };
    if iri::same_origin(quoted, &fed.origin) {
        return Ok(Prepared::Nothing);
    }
    let quoted = Object {
        id: quoted.to_string(),
        doc: serde_json::Value::Null,
    };
    boosted_post(pool, fed, signer, inc, &quoted).await?;
    let Some(claimed) = crate::quotes::claimed_authorization(&note.doc) else {
        return Ok(Prepared::Nothing);
    };
    let author: Option<String> =
        sqlx::query_scalar("SELECT actor FROM remote_posts WHERE iri = $1")
            .bind(&quoted.id)
            .fetch_optional(pool)
            .await?;
    let claim_holds = match author {
        Some(a) => {
            let check = (claimed, note.id.as_str(), quoted.id.as_str(), a.as_str());
            crate::quotes::authorization::verify_remote(pool, fed, check).await
        }
        None => false,
    };
    Ok(Prepared::Quote { claim_holds })
}

/// A remote actor's pin or unpin (R-MAPI-6): an `Add`/`Remove` whose target is its
/// own `featured` collection — the one its actor document names, or, not named, one under
/// its IRI as Mastodon's are — of a post (not another actor's, when we know the post).
async fn pinned(
    tx: &mut PgConnection,
    inc: &Incoming,
    added: bool,
    object: &super::activity::Object,
    target: &super::activity::Object,
) -> Result<Outcome, sqlx::Error> {
    if !object.has_id() || !target.has_id() {
        return Ok(Outcome::ignored("Add/Remove without object or target"));
    }
    let named: Option<Option<String>> =
        sqlx::query_scalar("SELECT document->>'featured' FROM remote_actors WHERE iri = $1")
            .bind(&inc.actor)
            .fetch_optional(&mut *tx)
            .await?;
    let theirs = match named.flatten() {
        Some(featured) => featured == target.id,
        None => target
            .id
            .strip_prefix(inc.actor.as_str())
            .is_some_and(|rest| rest.starts_with('/')),
    };
    if !theirs {
        return Ok(Outcome::ignored(
            "Add/Remove to a collection that is not the actor's featured",
        ));
    }
    let author: Option<String> =
        sqlx::query_scalar("SELECT actor FROM remote_posts WHERE iri = $1")
            .bind(&object.id)
            .fetch_optional(&mut *tx)
            .await?;
    if author.is_some_and(|a| a != inc.actor) {
        return Ok(Outcome::ignored("a pin of another actor's post"));
    }
    crate::statuses::pins::remote_change(tx, &inc.actor, &object.id, added).await?;
    Ok(Outcome::applied(if added { "pinned" } else { "unpinned" }))
}

/// Applies the activity's effects inside `tx`.
pub async fn apply(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    activity: &Activity,
    prepared: Prepared,
) -> Result<Outcome, sqlx::Error> {
    match (activity, prepared) {
        (Activity::Follow(_), Prepared::Follow { follower, account }) => {
            follows::follow(tx, fed, inc, &follower, &account).await
        }
        (Activity::Follow(_), _) => Ok(Outcome::ignored("Follow of no local account")),
        (
            Activity::Answer {
                accepted,
                follow,
                result,
            },
            _,
        ) => {
            let result = result.has_id().then_some(result.id.as_str());
            if let Some(outcome) =
                quotes::inbound::answered(tx, inc, *accepted, follow, result).await?
            {
                return Ok(outcome);
            }
            // The author's answer to our reply, favourite or boost (interaction policies).
            match crate::approvals::answers::answered(tx, fed, inc, *accepted, follow, result)
                .await?
            {
                Some(outcome) => Ok(outcome),
                None => follows::answer(tx, inc, *accepted, follow).await,
            }
        }
        (Activity::QuoteRequest { object, instrument }, prepared) => {
            let by_actor = matches!(
                prepared,
                Prepared::QuoteRequest {
                    note_by_actor: true
                }
            );
            if !by_actor {
                return Ok(Outcome::ignored(
                    "QuoteRequest for a note not by its actor, or for a post not ours",
                ));
            }
            quotes::inbound::request(tx, fed, inc, object, instrument).await
        }
        (Activity::Undo(undone), _) => follows::undo(tx, fed, inc, undone).await,
        (Activity::Block(target), _) => follows::block(tx, fed, inc, target).await,
        (Activity::ActorUpdate(document), _) => actors::update(tx, inc, document).await,
        (Activity::Vote { ballot, note }, _) => {
            match crate::polls::remote::apply_vote(tx, fed, &inc.id, &inc.actor, ballot).await? {
                Some(vote) => Ok(vote.into()),
                // Not one of our polls: a note like any other.
                None => notes::upsert(tx, fed, inc, true, note, None).await,
            }
        }
        (Activity::Note { create, note }, prepared) => {
            let claim = match prepared {
                Prepared::Quote { claim_holds } => Some(claim_holds),
                _ => None,
            };
            notes::upsert(tx, fed, inc, *create, note, claim).await
        }
        (Activity::Delete(object), _) if object.id == inc.actor => actors::delete(tx, inc).await,
        (Activity::Delete(object), _) => {
            match quotes::inbound::revoked(tx, inc, &object.id).await? {
                Some(outcome) => Ok(outcome),
                None => notes::delete(tx, inc, &object.id).await,
            }
        }
        (Activity::Like(o) | Activity::Announce(o), _) if !o.has_id() => {
            Ok(Outcome::ignored("no object"))
        }
        (Activity::Like(post), _) => interactions::like(tx, fed, inc, &post.id).await,
        (Activity::React { object, .. }, _) if !object.has_id() => {
            Ok(Outcome::ignored("no object"))
        }
        (
            Activity::React {
                object,
                emoji,
                tags,
            },
            _,
        ) => interactions::react(tx, fed, inc, &object.id, emoji, tags).await,
        (Activity::Announce(post), _) => interactions::announce(tx, fed, inc, &post.id).await,
        (
            Activity::Feature {
                added,
                object,
                target,
            },
            _,
        ) => pinned(tx, inc, *added, object, target).await,
        (Activity::Flag { objects, comment }, _) => {
            match crate::reports::received(tx, fed, &inc.id, &inc.actor, objects, comment).await? {
                0 => Ok(Outcome::ignored(
                    "a Flag of nothing of ours, or one stored before",
                )),
                n => Ok(Outcome::applied(format!("{n} report(s) stored"))),
            }
        }
        (Activity::Unsupported(ty), _) => Ok(Outcome::ignored(format!("unsupported type {ty}"))),
    }
}
