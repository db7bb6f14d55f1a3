//! `POST /api/v1/statuses/{id}/favourite`, `/unfavourite`, `/reblog`, `/unreblog`,
//! `/bookmark`, `/unbookmark`, `/mute`, `/unmute` (the conversation, R-MAPI-6), `/pin`,
//! `/unpin` (R-MAPI-6). Each answers the Status entity after the change (`/reblog` the
//! boost, whose `reblog` is the boosted status), works on any status the caller can see, and
//! is idempotent. Each is begin → act (`statuses::interact`: the row, its local side effects and
//! the activity it sends) → commit → render. A favourite or boost of a remote post first asks
//! its policy (`approvals::ask`): refused is GoToSocial's 403, nothing stored or sent.

use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Extension, Json, Router};

use super::{Touch, on_status};
use crate::approvals::{self, AskError, Kind};
use crate::mastodon::Status;
use crate::statuses::interact::{self, BoostError};
use crate::statuses::preferences;
use crate::statuses::{Visibility, conversation_mutes, pins};
use crate::web::activitypub::federation;
use crate::web::auth::{Need, Needs, need};
use crate::web::body::{JSON_MAX_BYTES, is_content_type, parse_json, read_limited};
use crate::web::mastodon::pagination::{param, params};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/statuses/{id}/favourite",
            post(act::<need::WriteFavourites>).layer(Extension(Act::Favourite)),
        )
        .route(
            "/api/v1/statuses/{id}/unfavourite",
            post(act::<need::WriteFavourites>).layer(Extension(Act::Unfavourite)),
        )
        .route("/api/v1/statuses/{id}/reblog", post(reblog))
        .route(
            "/api/v1/statuses/{id}/unreblog",
            post(act::<need::WriteStatuses>).layer(Extension(Act::Unreblog)),
        )
        .route(
            "/api/v1/statuses/{id}/bookmark",
            post(act::<need::WriteBookmarks>).layer(Extension(Act::Bookmark)),
        )
        .route(
            "/api/v1/statuses/{id}/unbookmark",
            post(act::<need::WriteBookmarks>).layer(Extension(Act::Unbookmark)),
        )
        .route(
            "/api/v1/statuses/{id}/mute",
            post(act::<need::WriteMutes>).layer(Extension(Act::Mute)),
        )
        .route(
            "/api/v1/statuses/{id}/unmute",
            post(act::<need::WriteMutes>).layer(Extension(Act::Unmute)),
        )
        .route(
            "/api/v1/statuses/{id}/pin",
            post(act::<need::WriteAccounts>).layer(Extension(Act::Pin)),
        )
        .route(
            "/api/v1/statuses/{id}/unpin",
            post(act::<need::WriteAccounts>).layer(Extension(Act::Unpin)),
        )
}

impl From<AskError> for ApiError {
    fn from(e: AskError) -> Self {
        match e {
            AskError::Refused(_) => ApiError::forbidden(e.to_string()),
            AskError::Db(e) => e.into(),
        }
    }
}

impl From<BoostError> for ApiError {
    fn from(e: BoostError) -> Self {
        match e {
            BoostError::NotAllowed => ApiError::forbidden(e.to_string()),
            BoostError::Db(e) => e.into(),
        }
    }
}

/// The actions with nothing to read but the status.
#[derive(Clone, Copy, Debug)]
enum Act {
    Favourite,
    Unfavourite,
    Unreblog,
    Bookmark,
    Unbookmark,
    /// The status's conversation: it notifies the caller of nothing more.
    Mute,
    Unmute,
    /// One of the caller's own statuses, on its profile (R-MAPI-6).
    Pin,
    Unpin,
}

impl Act {
    /// A favourite engages the post's author; the others keep or undo.
    fn touch(self) -> Touch {
        match self {
            Act::Favourite => Touch::Engages,
            _ => Touch::Keeps,
        }
    }
}

/// The route's `Act` (its `Extension`), for a token with the scope `N`.
async fn act<N: Need>(
    State(s): State<AppState>,
    Needs(account, _): Needs<N>,
    Extension(what): Extension<Act>,
    Path(raw): Path<String>,
) -> Result<Json<Status>, ApiError> {
    // Those that send an activity need federation, asked before the status is looked up.
    let fed = match what {
        Act::Favourite | Act::Unfavourite | Act::Unreblog => Some(federation(&s)?.as_ref()),
        _ => s.fed.as_deref(),
    };
    on_status(&s, &account, &raw, what.touch(), async |tx, post| {
        let sends = || fed.ok_or_else(|| ApiError::unavailable("federation is not configured"));
        match what {
            Act::Favourite => {
                let fed = sends()?;
                let consent = approvals::ask(tx, fed, &account, &post.uri, Kind::Like).await?;
                interact::favourite(tx, fed, &account, post, consent).await?;
            }
            Act::Unfavourite => {
                interact::unfavourite(tx, sends()?, &account, post).await?;
            }
            Act::Unreblog => {
                interact::unreblog(tx, sends()?, &account, post).await?;
            }
            Act::Bookmark => {
                interact::bookmark(tx, &account, post).await?;
            }
            Act::Unbookmark => {
                interact::unbookmark(tx, &account, post).await?;
            }
            Act::Mute => {
                conversation_mutes::mute(tx, account.id, post.id).await?;
            }
            Act::Unmute => {
                conversation_mutes::unmute(tx, account.id, post.id).await?;
            }
            Act::Pin => {
                pins::pin(tx, fed, &account, post)
                    .await
                    .map_err(|e| match e {
                        pins::PinError::Refused(m) => ApiError::unprocessable(m),
                        pins::PinError::Db(e) => ApiError::from(e),
                    })?;
            }
            Act::Unpin => {
                pins::unpin(tx, fed, &account, post).await?;
            }
        }
        Ok(post.id)
    })
    .await
}

async fn reblog(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteStatuses>,
    Path(raw): Path<String>,
    req: Request,
) -> Result<Json<Status>, ApiError> {
    let fed = federation(&s)?;
    let asked = asked_visibility(&s, req).await?;
    on_status(&s, &account, &raw, Touch::Engages, async |tx, post| {
        let default = preferences::load(&mut *tx, account.id).await?.visibility;
        let visibility = interact::boost_visibility(&account, post, asked, default)?;
        let consent = approvals::ask(tx, fed, &account, &post.uri, Kind::Announce).await?;
        Ok(
            interact::reblog(tx, fed, &account, post, visibility, consent)
                .await?
                .id,
        )
    })
    .await
}

/// The boost's `visibility` parameter, from the query, a JSON body or a form (apps send any of
/// them); absent or empty is `None`. Mastodon accepts public, unlisted and private.
async fn asked_visibility(s: &AppState, req: Request) -> Result<Option<Visibility>, ApiError> {
    let (parts, body) = req.into_parts();
    let mut asked = param(&params(&parts.uri), "visibility").map(str::to_string);
    let bytes = read_limited(&parts.headers, body, JSON_MAX_BYTES, s.http.body_timeout).await?;
    if !bytes.is_empty() {
        let json = is_content_type(&parts.headers, "application/json");
        let from_body = if json {
            parse_json::<serde_json::Value>(&bytes, StatusCode::UNPROCESSABLE_ENTITY)?
                .get("visibility")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
        } else {
            url::form_urlencoded::parse(&bytes)
                .find(|(k, _)| k == "visibility")
                .map(|(_, v)| v.into_owned())
        };
        asked = from_body.or(asked);
    }
    match asked.as_deref() {
        None | Some("") => Ok(None),
        Some(v) => Visibility::parse(v)
            .filter(|v| *v != Visibility::Direct)
            .map(Some)
            .ok_or_else(|| {
                ApiError::unprocessable("Validation failed: Visibility is not included in the list")
            }),
    }
}
