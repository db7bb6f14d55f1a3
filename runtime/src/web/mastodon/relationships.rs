//! Relationships: `GET /api/v1/accounts/relationships?id[]=…`, and `POST
//! /api/v1/accounts/{id}/follow`, `/unfollow`, `/block`, `/unblock`, `/mute`, `/unmute`,
//! `/remove_from_followers`, `/note`, `/pin`, `/unpin` (endorsements), each
//! answering the Relationship entity after the change. The change and the activity it sends
//! (`Follow`, `Undo`, `Block`) commit together (`federation::relationships`); a mute sends
//! nothing (`mutes`).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::Value;
use sqlx::PgConnection;

use super::found;
use super::pagination::ids_param;
use super::statuses::body::{StatusBody, flag};
use crate::accounts::Account;
use crate::federation::Federation;
use crate::federation::actors::directory::{self, Found};
use crate::federation::outbound::relationships::{self, RelationshipError};
use crate::mastodon::Relationship;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/accounts/relationships", get(list))
        .route("/api/v1/accounts/{id}/follow", post(follow))
        .route("/api/v1/accounts/{id}/unfollow", post(unfollow))
        .route("/api/v1/accounts/{id}/block", post(block))
        .route("/api/v1/accounts/{id}/unblock", post(unblock))
        .route("/api/v1/accounts/{id}/mute", post(mute))
        .route("/api/v1/accounts/{id}/unmute", post(unmute))
        .route(
            "/api/v1/accounts/{id}/remove_from_followers",
            post(remove_from_followers),
        )
        .route("/api/v1/accounts/{id}/note", post(note))
        .route("/api/v1/accounts/{id}/pin", post(endorse))
        .route("/api/v1/accounts/{id}/unpin", post(unendorse))
}

/// The Relationship entity of `account` with `found`.
pub(crate) async fn relationship_of(
    s: &AppState,
    account: &Account,
    found: &Found,
) -> Result<Relationship, ApiError> {
    let fed = federation(s)?;
    let standing = relationships::standing(&s.pool, fed, account, &found.iri(fed)).await?;
    let id = match found {
        Found::Local(a) => a.id,
        Found::Remote(r) => r.id,
    };
    Ok(Relationship::new(id.to_string(), &standing))
}

/// At most this many accounts in one relationships request: a client checks a page of
/// accounts (at most 80) at once; each costs a few queries.
const RELATIONSHIPS_AT_ONCE: usize = 200;

/// `id[]=…` (or `id=…`), several allowed; ids that name no account are left out, as on
/// Mastodon.
async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFollows>,
    uri: Uri,
) -> Result<Json<Vec<Relationship>>, ApiError> {
    let mut out = Vec::new();
    for id in ids_param(&uri, RELATIONSHIPS_AT_ONCE)? {
        if let Some(found) = directory::by_id(&s.pool, id).await? {
            out.push(relationship_of(&s, &account, &found).await?);
        }
    }
    Ok(Json(out))
}

fn refused(e: RelationshipError) -> ApiError {
    match e {
        RelationshipError::Refused(m) => ApiError::unprocessable(m),
        RelationshipError::Db(e) => e.into(),
    }
}

/// A note too long is the caller's mistake (422); a database failure is ours.
impl From<crate::account_notes::NoteError> for ApiError {
    fn from(e: crate::account_notes::NoteError) -> Self {
        match e {
            crate::account_notes::NoteError::Db(e) => e.into(),
            e => ApiError::unprocessable(e.to_string()),
        }
    }
}

/// Endorsing an account one does not follow is the caller's mistake (422).
impl From<crate::endorsements::EndorseError> for ApiError {
    fn from(e: crate::endorsements::EndorseError) -> Self {
        match e {
            crate::endorsements::EndorseError::Db(e) => e.into(),
            e => ApiError::unprocessable(e.to_string()),
        }
    }
}

/// `reblogs` (their boosts at home), `notify` (a `status` notification for each new post) and
/// `languages[]`, as JSON or a form; absent keeps what the follow had (a new one: boosts on,
/// notifications off, every language).
#[derive(Debug, Default, serde::Deserialize)]
struct FollowOptions {
    #[serde(default)]
    reblogs: Option<Value>,
    #[serde(default)]
    notify: Option<Value>,
    #[serde(default)]
    languages: Option<Vec<String>>,
}

/// federation → the account `id` names → begin → `act` → commit → the Relationship after it.
async fn on_account(
    s: &AppState,
    account: &Account,
    id: &str,
    act: impl AsyncFnOnce(&mut PgConnection, &Federation, &Found) -> Result<(), ApiError>,
) -> Result<Json<Relationship>, ApiError> {
    let fed = federation(s)?;
    let found = found(s, id).await?;
    let mut tx = s.pool.begin().await?;
    act(&mut tx, fed, &found).await?;
    tx.commit().await?;
    Ok(Json(relationship_of(s, account, &found).await?))
}

async fn follow(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(id): Path<String>,
    StatusBody(options): StatusBody<FollowOptions>,
) -> Result<Json<Relationship>, ApiError> {
    let options = relationships::FollowOptions {
        reblogs: flag("reblogs", options.reblogs.as_ref())?,
        notify: flag("notify", options.notify.as_ref())?,
        languages: options
            .languages
            .map(|l| l.into_iter().filter(|l| !l.is_empty()).collect()),
    };
    on_account(&s, &account, &id, async |tx, fed, found| {
        let target = found.target();
        relationships::follow(tx, fed, &account, &target)
            .await
            .map_err(refused)?;
        relationships::set_follow_options(tx, &account, &target.iri(fed), &options).await?;
        Ok(())
    })
    .await
}

async fn unfollow(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(relationships::unfollow(tx, fed, &account, &found.target()).await?)
    })
    .await
}

async fn block(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteBlocks>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        relationships::block(tx, fed, &account, &found.target())
            .await
            .map_err(refused)
    })
    .await
}

async fn unblock(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteBlocks>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(relationships::unblock(tx, fed, &account, &found.target()).await?)
    })
    .await
}

/// `notifications` (hide their notifications too; default true) and `duration` (seconds, 0 or
/// absent for indefinite), as JSON or a form.
#[derive(Debug, Default, serde::Deserialize)]
struct MuteOptions {
    #[serde(default)]
    notifications: Option<Value>,
    #[serde(default)]
    duration: Option<Value>,
}

/// A mute's `duration`: whole seconds, as a number or a form's string; 0 is indefinite.
fn duration(v: Option<&Value>) -> Result<Option<std::time::Duration>, ApiError> {
    let bad = || ApiError::unprocessable("duration must be a whole number of seconds");
    let secs = match v {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_u64().ok_or_else(bad)?,
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(None),
        Some(Value::String(s)) => s.trim().parse::<u64>().map_err(|_| bad())?,
        Some(_) => return Err(bad()),
    };
    let d = std::time::Duration::from_secs(secs);
    if d > crate::mutes::MAX_DURATION {
        return Err(ApiError::unprocessable("duration is too long"));
    }
    Ok((secs > 0).then_some(d))
}

async fn mute(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMutes>,
    Path(id): Path<String>,
    StatusBody(options): StatusBody<MuteOptions>,
) -> Result<Json<Relationship>, ApiError> {
    let notifications = flag("notifications", options.notifications.as_ref())?.unwrap_or(true);
    let duration = duration(options.duration.as_ref())?;
    on_account(&s, &account, &id, async |tx, fed, found| {
        let muter = fed.actor_iri(&account.username);
        crate::mutes::mute(
            tx,
            account.id,
            &muter,
            &found.iri(fed),
            notifications,
            duration,
        )
        .await
        .map_err(|e| match e {
            crate::mutes::MuteError::Refused(m) => ApiError::unprocessable(m),
            crate::mutes::MuteError::Db(e) => e.into(),
        })
    })
    .await
}

async fn unmute(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteMutes>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        crate::mutes::unmute(tx, account.id, &found.iri(fed)).await?;
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mute_durations_are_whole_seconds_and_zero_is_forever() {
        assert_eq!(duration(None).ok(), Some(None));
        assert_eq!(duration(Some(&json!(0))).ok(), Some(None));
        assert_eq!(duration(Some(&json!(""))).ok(), Some(None));
        assert_eq!(
            duration(Some(&json!(3600))).ok(),
            Some(Some(std::time::Duration::from_secs(3600)))
        );
        assert_eq!(
            duration(Some(&json!("60"))).ok(),
            Some(Some(std::time::Duration::from_secs(60)))
        );
        for bad in [
            json!(-5),
            json!(1.5),
            json!("soon"),
            json!([1]),
            json!(u64::MAX),
        ] {
            assert!(duration(Some(&bad)).is_err(), "{bad}");
        }
    }
}

/// `POST /api/v1/accounts/{id}/remove_from_followers` (`write:follows`): the account stops
/// following the caller; a remote one is sent a `Reject` of its `Follow`.
async fn remove_from_followers(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFollows>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(relationships::remove_from_followers(tx, fed, &account, &found.target()).await?)
    })
    .await
}

/// `comment`, the note's text (JSON or a form); empty or absent removes the note.
#[derive(Debug, Default, serde::Deserialize)]
struct NoteBody {
    #[serde(default)]
    comment: Option<String>,
}

/// `POST /api/v1/accounts/{id}/note` (`write:accounts`): the caller's private note on the
/// account (at most 2 000 characters, else 422), shown as its Relationship's `note`.
async fn note(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    Path(id): Path<String>,
    StatusBody(body): StatusBody<NoteBody>,
) -> Result<Json<Relationship>, ApiError> {
    let comment = body.comment.unwrap_or_default();
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(crate::account_notes::set(tx, account.id, &found.iri(fed), &comment).await?)
    })
    .await
}

/// `POST /api/v1/accounts/{id}/pin` (`write:accounts`): the caller features the account on
/// its profile; it must follow it (422 otherwise).
async fn endorse(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(crate::endorsements::endorse(tx, account.id, &found.iri(fed)).await?)
    })
    .await
}

/// `POST /api/v1/accounts/{id}/unpin` (`write:accounts`).
async fn unendorse(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Relationship>, ApiError> {
    on_account(&s, &account, &id, async |tx, fed, found| {
        Ok(crate::endorsements::forget(tx, account.id, &found.iri(fed)).await?)
    })
    .await
}
