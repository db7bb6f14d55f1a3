//! Our statuses quoting others (`quoted_status_id` on create), and our side of revoking.
//!
//! A quote of one of our own statuses is decided on the spot by its policy and stored with
//! the authorization we grant. A quote of a remote post that advertises a quote policy is
//! `pending` until its author answers our `QuoteRequest` (`inbound::answered`), and the note
//! goes out again as an `Update` carrying the authorization; a remote post without a policy
//! (software before FEP-044f) is quoted at once. The checks run before the status's
//! transaction; the rows and the activities are written inside it.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{QuotedStatus, Quoter, State, authorization};
use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::outbound::{quotes as ap, statuses as ap_status};
use crate::statuses::notify::{self, Kind, Notification};
use crate::statuses::post::{self, Post};

/// A post a new status may quote, as checked before the status's transaction.
pub struct Target {
    post: Post,
    /// Ours: the policy decided, the authorization is granted in the transaction.
    ours: Option<QuotedStatus>,
    /// A remote post that advertises a quote policy: its author must answer a request.
    asks: bool,
}

/// Why a status may not quote a post (`statuses::write` answers 404 and 422 from it).
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// Unknown, or not the author's to read (404, as for a reply).
    #[error("Record not found")]
    NotFound,
    /// Its policy refuses them, or it is not public (422).
    #[error("Validation failed: Quoted status is not quotable by you")]
    NotQuotable,
    /// A block stands between them and its author (403, `statuses::post::blocked`).
    #[error("This action is not allowed")]
    Blocked,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// Checks that `author` may quote `quoted`: it must read it (404 otherwise, as for a reply),
/// and its policy must let them (422).
pub async fn target(
    pool: &PgPool,
    fed: Option<&Federation>,
    author: &Account,
    quoted: Uuid,
) -> Result<Target, TargetError> {
    let mut conn = pool.acquire().await?;
    let post = post::find(&mut conn, Some(author.id), quoted)
        .await?
        .ok_or(TargetError::NotFound)?;
    let fed = fed.ok_or(TargetError::NotQuotable)?;
    if post::blocked(&mut conn, fed, author, &post).await? {
        return Err(TargetError::Blocked);
    }
    if post.account_id.is_some() {
        let ours = super::our_status(&mut conn, &post.uri)
            .await?
            .ok_or(TargetError::NotFound)?;
        let actor = fed.actor_iri(&ours.username);
        if !super::allowed(&mut conn, &actor, &ours, Quoter::Local(author.id)).await? {
            return Err(TargetError::NotQuotable);
        }
        return Ok(Target {
            post,
            ours: Some(ours),
            asks: false,
        });
    }
    if !matches!(post.visibility.as_str(), "public" | "unlisted") {
        return Err(TargetError::NotQuotable);
    }
    let body: Option<serde_json::Value> =
        sqlx::query_scalar("SELECT body FROM remote_posts WHERE id = $1")
            .bind(post.id)
            .fetch_optional(&mut *conn)
            .await?;
    let policy = body.as_ref().and_then(super::remote_policy);
    if let Some(p) = &policy {
        // Asking is pointless when nobody but the author may quote it.
        let followers: Option<String> =
            sqlx::query_scalar("SELECT document->>'followers' FROM remote_actors WHERE iri = $1")
                .bind(&post.actor_iri)
                .fetch_optional(&mut *conn)
                .await?
                .flatten();
        let me = fed.actor_iri(&author.username);
        let open = p.automatic.iter().chain(&p.manual).any(|a| {
            super::vocab_public(a) || *a == me || followers.as_deref() == Some(a.as_str())
        });
        if !open {
            return Err(TargetError::NotQuotable);
        }
    }
    Ok(Target {
        post,
        ours: None,
        asks: policy.is_some(),
    })
}

/// A quote whose request goes out after the status's `Create`.
pub struct Request {
    id: String,
    quoted: String,
    author: String,
}

/// Stores that our new status `status` (at `uri`, by `author`) quotes `target`: accepted with
/// our own authorization, accepted at once (a remote post without a policy), or pending with
/// a request to send. The quoted local author is notified.
pub async fn attach(
    tx: &mut PgConnection,
    fed: &Federation,
    author: &Account,
    status: Uuid,
    uri: &str,
    target: Target,
) -> Result<Option<Request>, sqlx::Error> {
    let quoted = target.post.uri.clone();
    if let Some(ours) = &target.ours {
        let granted = authorization::grant(&mut *tx, fed, ours, uri).await?;
        let state = match granted {
            Some(_) => State::Accepted,
            None => State::Rejected,
        };
        let fresh =
            super::record(&mut *tx, status, &quoted, state, granted.as_deref(), None).await?;
        if fresh && ours.account_id != author.id {
            let n = Notification {
                account: ours.account_id,
                kind: Kind::Quote,
                from_account: author.id,
                post: Some(status),
                cause: &format!("{uri}#quote"),
            };
            notify::notify(&mut *tx, &n).await?;
        }
        return Ok(None);
    }
    if !target.asks {
        super::record(&mut *tx, status, &quoted, State::Accepted, None, None).await?;
        return Ok(None);
    }
    let id = fed.new_activity_id();
    super::record(&mut *tx, status, &quoted, State::Pending, None, Some(&id)).await?;
    Ok(target
        .post
        .actor_iri
        .map(|author| Request { id, quoted, author }))
}

/// Sends the `QuoteRequest` of our status `status` (after its `Create` was queued).
pub async fn send_request(
    tx: &mut PgConnection,
    fed: &Federation,
    author: &Account,
    status: Uuid,
    request: Request,
) -> Result<(), sqlx::Error> {
    let Some(s) = ap_status::load(&mut *tx, None, status).await? else {
        return Ok(());
    };
    let note = ap_status::object(fed, &s);
    ap::request(
        tx,
        fed,
        author.id,
        &author.username,
        &request.id,
        &request.quoted,
        &request.author,
        note,
    )
    .await?;
    Ok(())
}

/// Why a revoke was refused.
#[derive(Debug, thiserror::Error)]
pub enum RevokeError {
    #[error("Record not found")]
    NotFound,
    #[error("database: {0}")]
    Db(#[from] sqlx::Error),
}

/// `owner` withdraws the quote `quoting` (a post) makes of their status `status`: the quote
/// becomes `revoked`, our authorization stops being served, and a remote quoting author is
/// sent the authorization's `Delete`. Idempotent.
pub async fn revoke(
    tx: &mut PgConnection,
    fed: &Federation,
    owner: &Account,
    status: Uuid,
    quoting: Uuid,
) -> Result<(), RevokeError> {
    let uri: Option<String> =
        sqlx::query_scalar("SELECT uri FROM statuses WHERE id = $1 AND account_id = $2")
            .bind(status)
            .bind(owner.id)
            .fetch_optional(&mut *tx)
            .await?;
    let ours = match uri {
        Some(u) => super::our_status(&mut *tx, &u).await?,
        None => None,
    }
    .ok_or(RevokeError::NotFound)?;
    let quoting_post: Option<(String, Option<String>)> = sqlx::query_as(
        "SELECT p.uri, p.actor_iri FROM quotes q JOIN posts p ON p.id = q.post_id
          WHERE q.post_id = $1 AND q.quoted_uri = $2",
    )
    .bind(quoting)
    .bind(&ours.uri)
    .fetch_optional(&mut *tx)
    .await?;
    let (quoting_uri, quoting_author) = quoting_post.ok_or(RevokeError::NotFound)?;
    sqlx::query("UPDATE quotes SET state = 'revoked', updated_at = now() WHERE post_id = $1")
        .bind(quoting)
        .execute(&mut *tx)
        .await?;
    let revoked = authorization::revoke(&mut *tx, fed, &ours, &quoting_uri).await?;
    if let Some(author) = quoting_author {
        for a in revoked {
            ap::revoke(tx, fed, owner.id, &owner.username, &a, &author).await?;
        }
    }
    crate::streaming::emit::edited(&mut *tx, quoting).await?;
    Ok(())
}

/// `owner` changes who may quote their status `status` (Mastodon's `interaction_policy`):
/// only a public or unlisted status takes anything but `nobody`. Quotes already made stand
/// (revoking is separate, as on Mastodon). `false`: not a status of theirs.
pub async fn set_policy(
    tx: &mut PgConnection,
    owner: Uuid,
    status: Uuid,
    policy: super::Policy,
) -> Result<bool, sqlx::Error> {
    let changed: Option<Uuid> = sqlx::query_scalar(
        "UPDATE statuses SET quote_policy = CASE WHEN visibility IN ('public', 'unlisted')
                THEN $3 ELSE 'nobody' END
          WHERE id = $1 AND account_id = $2 RETURNING id",
    )
    .bind(status)
    .bind(owner)
    .bind(policy.as_str())
    .fetch_optional(&mut *tx)
    .await?;
    if changed.is_some() {
        crate::streaming::emit::edited(&mut *tx, status).await?;
    }
    Ok(changed.is_some())
}
