//! Direct conversations (R-MAPI-4): `GET /api/v1/conversations` (newest
//! last status first, paginated by it as Mastodon does), `POST /:id/read`, `DELETE /:id`.
//! `statuses::conversations` keeps them as direct posts are written or arrive.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use uuid::Uuid;

use crate::statuses::hidden::Hidden;

use super::pagination::{Paged, Paging};
use super::statuses::render;
use crate::federation::actors::directory;
use crate::mastodon::Empty;
use crate::mastodon::Status;
use crate::mastodon::account::{self, Account};
use crate::statuses::conversations::{self, Conversation};
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::mastodon::pagination::BindPage;
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/conversations", get(list))
        .route("/api/v1/conversations/{id}/read", post(read))
        .route("/api/v1/conversations/{id}", delete(remove))
}

async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    Paging { page, uri }: Paging<Uuid>,
) -> Result<Paged<ConversationEntity>, ApiError> {
    let sql = conversations::page_sql(&page.clause("c.last_status_id", 2));
    let rows: Vec<Conversation> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account.id)
        .bind_page(&page)
        .fetch_all(&s.pool)
        .await?;
    let rows = page.finish(rows);
    let keys: Vec<String> = rows.iter().map(|c| c.last_status_id.to_string()).collect();
    let hidden = Hidden::of(&s.pool, s.site().urls, Some(account.id)).await?;
    let mut items = entities_of(&s, account.id, &rows).await?;
    // A conversation whose latest status is by an account the reader mutes or blocks stays
    // out of the list (R-MAPI-6), as its status stays out of every timeline.
    items.retain(|c| {
        !c.last_status.as_ref().is_some_and(|st| {
            uuid::Uuid::parse_str(&st.account.id).is_ok_and(|a| hidden.hides(a, None))
        })
    });
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

/// Mastodon's `Conversation` entity.
#[derive(serde::Serialize)]
pub struct ConversationEntity {
    id: String,
    unread: bool,
    accounts: Vec<Arc<Account>>,
    last_status: Option<Status>,
}

/// Conversation entities: the other participants as Accounts (actors we cannot show are left
/// out) and the last status as the account sees it.
async fn entities_of(
    s: &AppState,
    viewer: Uuid,
    rows: &[Conversation],
) -> Result<Vec<ConversationEntity>, ApiError> {
    let fed = federation(s)?;
    let ids: Vec<Uuid> = rows.iter().map(|c| c.last_status_id).collect();
    let mut conn = s.pool.acquire().await?;
    let mut statuses: HashMap<Uuid, Status> = render(s, &mut conn, Some(viewer), &ids)
        .await?
        .into_iter()
        .filter_map(|v| Some((v.uuid()?, v)))
        .collect();
    drop(conn);
    let mut accounts: HashMap<String, Option<Arc<Account>>> = HashMap::new();
    let mut out = Vec::with_capacity(rows.len());
    for c in rows {
        let mut shown = Vec::new();
        for iri in &c.participants {
            if !accounts.contains_key(iri) {
                let a = match directory::by_iri(&s.pool, fed, iri).await? {
                    Some(found) => Some(Arc::new(
                        account::of_found(&s.pool, s.site().urls, &found).await?,
                    )),
                    None => None,
                };
                accounts.insert(iri.clone(), a);
            }
            if let Some(Some(a)) = accounts.get(iri) {
                shown.push(a.clone());
            }
        }
        out.push(ConversationEntity {
            id: c.id.to_string(),
            unread: c.unread,
            accounts: shown,
            // Each conversation has its own last status.
            last_status: statuses.remove(&c.last_status_id),
        });
    }
    Ok(out)
}

fn conversation_id(raw: &str) -> Result<i64, ApiError> {
    raw.parse().map_err(|_| ApiError::record_not_found())
}

async fn read(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteConversations>,
    Path(raw): Path<String>,
) -> Result<Json<ConversationEntity>, ApiError> {
    let id = conversation_id(&raw)?;
    let row: Option<Conversation> = sqlx::query_as(
        "UPDATE conversations SET unread = false WHERE id = $1 AND account_id = $2
         RETURNING id, last_status_id, participants, unread",
    )
    .bind(id)
    .bind(account.id)
    .fetch_optional(&s.pool)
    .await?;
    let row = row.ok_or_else(ApiError::record_not_found)?;
    entities_of(&s, account.id, &[row])
        .await?
        .pop()
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}

/// Removes the conversation from the account's list (the statuses stay; a new direct post in
/// the thread starts it again).
async fn remove(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteConversations>,
    Path(raw): Path<String>,
) -> Result<Json<Empty>, ApiError> {
    super::delete_own(&s, "conversations", conversation_id(&raw)?, account.id).await
}
