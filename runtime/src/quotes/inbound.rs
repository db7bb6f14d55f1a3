//! Quotes arriving from other servers (FEP-044f, and the forms before it).
//!
//! - A remote note that quotes ([`note`]) is recorded with its standing: a quote of one of our
//!   statuses is accepted when it carries our live authorization or our policy lets its author
//!   quote (we grant one then); a quote of a remote post is accepted when its author quotes
//!   themself, when the authorization it claims was fetched and holds (checked before the
//!   transaction, `process::prepare`), or when the quoted post advertises no policy. Anything
//!   else stays `pending` and is shown without the quoted post.
//! - A `QuoteRequest` for one of our statuses ([`request`]) is answered by its policy: an
//!   `Accept` whose `result` is the authorization we serve, or a `Reject`.
//! - The answer to our own `QuoteRequest` ([`answered`]), and the `Delete` of an authorization
//!   ([`revoked`]), from the quoted post's author only.

use serde_json::{Value, json};
use sqlx::PgConnection;
use uuid::Uuid;

use super::{Quoter, State, authorization};
use crate::federation::Federation;
use crate::federation::inbound::activity::Object;
use crate::federation::inbound::incoming::Incoming;
use crate::federation::inbound::outcome::Outcome;
use crate::federation::iri::same_origin;
use crate::federation::outbound::quotes as ap;
use crate::html;
use crate::statuses::notify::{self, Kind, Notification};

/// Records how the stored remote note `post` (at `iri`, by `actor`) quotes, if it does;
/// `claim_holds` is the check of a remote authorization it claims (`None`: none checked).
pub async fn note(
    tx: &mut PgConnection,
    fed: &Federation,
    post: Uuid,
    iri: &str,
    actor: &str,
    doc: &Value,
    claim_holds: Option<bool>,
) -> Result<(), sqlx::Error> {
    let Some(quoted) = super::quoted_iri(doc) else {
        return super::forget(tx, post).await;
    };
    let claimed = super::claimed_authorization(doc);
    if let Some(ours) = super::our_status(&mut *tx, quoted).await? {
        let live = match claimed {
            Some(c) => authorization::is_ours_for(&mut *tx, fed, c, iri, &ours).await?,
            None => false,
        };
        let (state, granted) = if live {
            (State::Accepted, claimed.map(str::to_string))
        } else if super::allowed(
            &mut *tx,
            &fed.actor_iri(&ours.username),
            &ours,
            Quoter::Remote(actor),
        )
        .await?
        {
            match authorization::grant(&mut *tx, fed, &ours, iri).await? {
                Some(a) => (State::Accepted, Some(a)),
                None => (State::Revoked, None),
            }
        } else {
            (State::Pending, None)
        };
        let fresh = super::record(&mut *tx, post, quoted, state, granted.as_deref(), None).await?;
        if fresh {
            notify_quoted(tx, ours.account_id, actor, post, iri).await?;
        }
        return Ok(());
    }
    let known: Option<(String, Value)> = sqlx::query_as(
        "SELECT actor, body FROM remote_posts WHERE iri = $1 AND deleted_at IS NULL",
    )
    .bind(quoted)
    .fetch_optional(&mut *tx)
    .await?;
    let state = match (&known, claimed, claim_holds) {
        (Some((author, _)), _, _) if author == actor => State::Accepted,
        (_, Some(_), Some(true)) => State::Accepted,
        // A claim that did not hold is no approval.
        (_, Some(_), _) => State::Pending,
        (Some((_, body)), None, _) if super::remote_policy(body).is_none() => State::Accepted,
        _ => State::Pending,
    };
    let granted = claimed.filter(|_| state == State::Accepted && claim_holds == Some(true));
    super::record(tx, post, quoted, state, granted, None).await?;
    Ok(())
}

/// A `quote` notification to our account `account`, from the remote `actor`.
async fn notify_quoted(
    tx: &mut PgConnection,
    account: Uuid,
    actor: &str,
    post: Uuid,
    iri: &str,
) -> Result<(), sqlx::Error> {
    let Some(from) = crate::federation::actors::directory::remote_id(&mut *tx, actor).await? else {
        return Ok(());
    };
    let n = Notification {
        account,
        kind: Kind::Quote,
        from_account: from,
        post: Some(post),
        cause: &format!("{iri}#quote"),
    };
    notify::notify(tx, &n).await?;
    Ok(())
}

/// A remote actor's `QuoteRequest` to quote our status `object` with the note `instrument`
/// (checked to be theirs before the transaction).
pub async fn request(
    tx: &mut PgConnection,
    fed: &Federation,
    inc: &Incoming,
    object: &Object,
    instrument: &Object,
) -> Result<Outcome, sqlx::Error> {
    let Some(ours) = super::our_status(&mut *tx, &object.id).await? else {
        return Ok(Outcome::ignored("QuoteRequest for a post that is not ours"));
    };
    // `process::prepare` fetched the note from its own id: it is the requester's.
    let note = instrument.id.as_str();
    let actor_iri = fed.actor_iri(&ours.username);
    // Across a block between them, either way, the request is refused whatever the policy.
    let blocked = crate::federation::outbound::relationships::blocked_either_way(
        &mut *tx,
        fed,
        ours.account_id,
        &actor_iri,
        &inc.actor,
    )
    .await?;
    let allowed =
        !blocked && super::allowed(&mut *tx, &actor_iri, &ours, Quoter::Remote(&inc.actor)).await?;
    let granted = match allowed {
        true => authorization::grant(&mut *tx, fed, &ours, note).await?,
        false => None,
    };
    let request = json!({
        "id": inc.id, "type": "QuoteRequest", "actor": inc.actor,
        "object": ours.uri, "instrument": note,
    });
    ap::answer(
        tx,
        fed,
        ours.account_id,
        &ours.username,
        &inc.actor,
        &request,
        granted.as_deref(),
    )
    .await?;
    // The note may already be here (its `Create` and the request race).
    let stored: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM remote_posts WHERE iri = $1 AND actor = $2")
            .bind(note)
            .bind(&inc.actor)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(post) = stored {
        let state = match granted {
            Some(_) => State::Accepted,
            None => State::Rejected,
        };
        if super::record(&mut *tx, post, &ours.uri, state, granted.as_deref(), None).await? {
            notify_quoted(tx, ours.account_id, &inc.actor, post, note).await?;
        }
        crate::streaming::emit::remote_edited(&mut *tx, note).await?;
    }
    Ok(Outcome::applied(match granted {
        Some(_) => "quote authorized",
        None => "quote rejected",
    }))
}

/// The quoted author's `Accept` (with `result`, the authorization) or `Reject` of one of our
/// `QuoteRequest`s; `None` when `request` is not one of ours (a follow's answer, then).
pub async fn answered(
    tx: &mut PgConnection,
    inc: &Incoming,
    accepted: bool,
    request: &Object,
    result: Option<&str>,
) -> Result<Option<Outcome>, sqlx::Error> {
    let row: Option<(Uuid, String)> =
        sqlx::query_as("SELECT post_id, quoted_uri FROM quotes WHERE request_id = $1")
            .bind(&request.id)
            .fetch_optional(&mut *tx)
            .await?;
    let Some((post, quoted)) = row else {
        return Ok(None);
    };
    let author: Option<String> =
        sqlx::query_scalar("SELECT actor FROM remote_posts WHERE iri = $1")
            .bind(&quoted)
            .fetch_optional(&mut *tx)
            .await?;
    if author.as_deref() != Some(inc.actor.as_str()) {
        return Ok(Some(Outcome::ignored(
            "an answer to a QuoteRequest from someone other than the quoted author",
        )));
    }
    let authorization = result
        .and_then(html::http_url)
        .filter(|a| same_origin(a, &inc.actor));
    let state = match (accepted, authorization) {
        (true, Some(_)) => State::Accepted,
        (true, None) => {
            return Ok(Some(Outcome::ignored(
                "an Accept of a QuoteRequest without an authorization of the author's",
            )));
        }
        (false, _) => State::Rejected,
    };
    super::record(&mut *tx, post, &quoted, state, authorization, None).await?;
    crate::streaming::emit::edited(&mut *tx, post).await?;
    if state == State::Accepted {
        crate::tasks::republish::enqueue_for(
            &mut *tx,
            crate::tasks::republish::Approved::Quote,
            post,
        )
        .await?;
    }
    Ok(Some(Outcome::applied(match state {
        State::Accepted => "our quote was authorized",
        _ => "our quote was rejected",
    })))
}

/// The `Delete` of an authorization `object` by its author: quotes relying on it are revoked.
/// `None` when no quote relies on it.
pub async fn revoked(
    tx: &mut PgConnection,
    inc: &Incoming,
    object: &str,
) -> Result<Option<Outcome>, sqlx::Error> {
    if !same_origin(object, &inc.actor) {
        return Ok(None);
    }
    // Only the quoted post's author takes back what they granted.
    let posts: Vec<Uuid> = sqlx::query_scalar(
        "UPDATE quotes SET state = 'revoked', updated_at = now()
          WHERE authorization_iri = $1 AND state = 'accepted'
            AND quoted_uri IN (SELECT iri FROM remote_posts WHERE actor = $2)
          RETURNING post_id",
    )
    .bind(object)
    .bind(&inc.actor)
    .fetch_all(&mut *tx)
    .await?;
    if posts.is_empty() {
        return Ok(None);
    }
    for p in &posts {
        crate::streaming::emit::edited(&mut *tx, *p).await?;
    }
    Ok(Some(Outcome::applied(format!(
        "{} quote(s) revoked",
        posts.len()
    ))))
}

/// `quoted_update` notifications: the local accounts whose accepted quotes name `quoted`
/// (just edited by `from`, the `cause` activity).
pub async fn quoted_edited(
    tx: &mut PgConnection,
    quoted: &str,
    from: Uuid,
    cause: &str,
) -> Result<(), sqlx::Error> {
    let quoters: Vec<(Uuid, Uuid)> = sqlx::query_as(
        "SELECT s.account_id, s.id FROM quotes q JOIN statuses s ON s.id = q.post_id
          WHERE q.quoted_uri = $1 AND q.state = 'accepted'",
    )
    .bind(quoted)
    .fetch_all(&mut *tx)
    .await?;
    for (account, status) in quoters {
        if account == from {
            continue;
        }
        let n = Notification {
            account,
            kind: Kind::QuotedUpdate,
            from_account: from,
            post: Some(status),
            cause,
        };
        notify::notify(&mut *tx, &n).await?;
    }
    Ok(())
}
