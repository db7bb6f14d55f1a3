//! The Mastodon client API (SPEC §11, R-MAPI-2): instance and NodeInfo, accounts and their
//! profiles, relationships, follow requests and search, in Mastodon's paths, JSON shapes,
//! pagination (`Link` headers) and error bodies. One module per concept; the storage they use
//! lives in `federation` (`directory`, `profiles`, `relationships`, `follows`).

use axum::Router;

use super::{ApiError, AppState};
use crate::federation::actors::directory::{self, Found};

pub mod accounts;
pub mod conversations;
pub mod credentials;
pub mod domain_blocks;
pub mod emojis;
pub mod familiar_followers;
pub mod filters;
pub mod follow_requests;
pub mod grouped_notifications;
pub mod instance;
pub mod interactions;
pub mod lists;
pub mod markers;
pub mod media;
pub mod notifications;
pub mod pagination;
pub mod relationships;
pub mod reports;
pub mod scheduled_statuses;
pub mod search;
pub mod statuses;
pub mod streaming;
pub mod suggestions;
pub mod tags;
pub mod timelines;
pub mod trends;

pub fn routes(state: &AppState) -> Router<AppState> {
    Router::new()
        .merge(media::routes(state))
        .merge(instance::routes())
        .merge(credentials::routes(state))
        .merge(accounts::routes())
        .merge(relationships::routes())
        .merge(familiar_followers::routes())
        .merge(lists::routes())
        .merge(filters::routes())
        .merge(tags::routes())
        .merge(emojis::routes())
        .merge(domain_blocks::routes())
        .merge(follow_requests::routes())
        .merge(search::routes())
        .merge(statuses::routes())
        .merge(scheduled_statuses::routes())
        .merge(reports::routes())
        .merge(interactions::routes())
        .merge(timelines::routes())
        .merge(trends::routes())
        .merge(suggestions::routes())
        .merge(markers::routes())
        .merge(notifications::routes())
        .merge(grouped_notifications::routes())
        .merge(conversations::routes())
        .merge(streaming::routes())
}

/// A record's id from a request (its path, a form field): a malformed one is the same 404 as
/// an unknown one, Mastodon's "Record not found".
pub(crate) fn record_id(raw: &str) -> Result<uuid::Uuid, ApiError> {
    uuid::Uuid::parse_str(raw).map_err(|_| ApiError::record_not_found())
}

/// The record id of a route with one path parameter, `/api/v1/statuses/{id}` say, as
/// [`record_id`] reads it.
pub struct RecordId(pub uuid::Uuid);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for RecordId {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| ApiError::record_not_found())?;
        record_id(&raw).map(RecordId)
    }
}

/// The account a path id names, local or remote; a malformed id is the same 404 as an unknown
/// one.
pub(crate) async fn found(s: &AppState, raw: &str) -> Result<Found, ApiError> {
    let id = super::parse_id(raw, "account")?;
    directory::by_id(&s.pool, id)
        .await?
        .ok_or_else(ApiError::record_not_found)
}

/// Deletes the row `id` of `table` (a conversation, a notification) if it is `account`'s:
/// `{}` when it went, the 404 of a missing record when there was none of theirs.
pub(crate) async fn delete_own(
    s: &AppState,
    table: &'static str,
    id: i64,
    account: uuid::Uuid,
) -> Result<axum::Json<crate::mastodon::Empty>, ApiError> {
    let gone = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {table} WHERE id = $1 AND account_id = $2"
    )))
    .bind(id)
    .bind(account)
    .execute(&s.pool)
    .await?
    .rows_affected();
    if gone == 0 {
        return Err(ApiError::record_not_found());
    }
    Ok(axum::Json(crate::mastodon::Empty {}))
}
