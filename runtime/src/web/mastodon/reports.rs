//! Reports in the client API (R-MAPI-6): `POST /api/v1/reports` (`write:reports`) as Mastodon
//! takes it, and the admin's side behind `ADMIN_TOKEN`, in Mastodon's admin paths:
//! `GET /api/v1/admin/reports` (open ones unless `resolved=true`, newest first, paged by id),
//! `GET /api/v1/admin/reports/:id`, `POST …/:id/resolve` and `…/:id/reopen`. The rules are
//! `reports`'.

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use super::pagination::{Page, Paged, param, params};
use super::statuses::body::{StatusBody, flag, text};
use super::{RecordId, record_id};
use crate::federation::actors::directory;
use crate::mastodon::account;
use crate::mastodon::report::{self as entity, AdminReport, Report};
use crate::reports::{self, Category, NewReport, ReportError};
use crate::web::auth::{Admin, Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/reports", post(create))
        .route("/api/v1/admin/reports", get(admin_index))
        .route("/api/v1/admin/reports/{id}", get(admin_show))
        .route("/api/v1/admin/reports/{id}/resolve", post(resolve))
        .route("/api/v1/admin/reports/{id}/reopen", post(reopen))
}

impl From<ReportError> for ApiError {
    fn from(e: ReportError) -> Self {
        match e {
            ReportError::NotFound => ApiError::record_not_found(),
            ReportError::Invalid(m) => ApiError::unprocessable(m),
            ReportError::Db(e) => e.into(),
        }
    }
}

#[derive(Debug, Deserialize)]
pub struct CreateRequest {
    #[serde(default)]
    account_id: Option<String>,
    #[serde(default)]
    status_ids: Option<Vec<String>>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    forward: Option<Value>,
    #[serde(default)]
    category: Option<String>,
    #[serde(default)]
    rule_ids: Option<Vec<String>>,
    /// Mastodon forwards to these domains too (the servers of the threads the statuses are
    /// in); only the target's own server is sent a `Flag` here.
    #[serde(default)]
    #[allow(dead_code)]
    forward_to_domains: Option<Vec<String>>,
}

impl CreateRequest {
    fn into_new(self) -> Result<NewReport, ApiError> {
        let target = text(self.account_id)
            .ok_or_else(|| ApiError::unprocessable("Validation failed: account_id is missing"))?;
        // A malformed id names no account: the same 404 as an unknown one.
        let target = record_id(&target)?;
        let status_ids = self
            .status_ids
            .unwrap_or_default()
            .iter()
            .filter(|s| !s.trim().is_empty())
            .map(|s| record_id(s.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        // This server has no rules (the instance lists none), so none can be named.
        if self.rule_ids.iter().flatten().any(|r| !r.trim().is_empty()) {
            return Err(ApiError::unprocessable(
                "Validation failed: Rule ids name no rule of this server",
            ));
        }
        let category = match text(self.category) {
            None => Category::Other,
            Some(c) => Category::parse(&c).ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "Validation failed: category {c:?} is not one of spam, legal, violation, other"
                ))
            })?,
        };
        Ok(NewReport {
            target,
            status_ids,
            comment: self.comment.unwrap_or_default(),
            category,
            forward: flag("forward", self.forward.as_ref())?.unwrap_or(false),
        })
    }
}

async fn create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteReports>,
    StatusBody(req): StatusBody<CreateRequest>,
) -> Result<Json<Report>, ApiError> {
    let req = req.into_new()?;
    let target = req.target;
    let row = reports::create(&s.pool, s.fed.as_deref(), &account, req).await?;
    let found = directory::by_id(&s.pool, target)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    let target = account::of_found(&s.pool, s.site().urls, &found).await?;
    Ok(Json(entity::of(&row, target)))
}

async fn admin_index(
    State(s): State<AppState>,
    _: Admin,
    uri: Uri,
) -> Result<Paged<AdminReport>, ApiError> {
    let params = params(&uri);
    let page: Page<Uuid> = Page::from_params(&params)?;
    let resolved = match param(&params, "resolved") {
        None | Some("") | Some("false") | Some("0") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return Err(ApiError::unprocessable(format!(
                "resolved must be a boolean, not {other:?}"
            )));
        }
    };
    let select = format!(
        "SELECT {} FROM reports WHERE (action_taken_at IS NOT NULL) = $1 AND",
        reports::COLUMNS
    );
    let rows: Vec<reports::Report> = page.fetch_by_id(&s.pool, &select, resolved).await?;
    let keys: Vec<String> = rows.iter().map(|r| r.id.to_string()).collect();
    let items = entity::admin(&s.pool, s.site(), &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

async fn one(s: &AppState, row: Option<reports::Report>) -> Result<Json<AdminReport>, ApiError> {
    let row = row.ok_or_else(ApiError::record_not_found)?;
    entity::admin(&s.pool, s.site(), &[row])
        .await?
        .pop()
        .map(Json)
        .ok_or_else(ApiError::record_not_found)
}

async fn admin_show(
    State(s): State<AppState>,
    _: Admin,
    RecordId(id): RecordId,
) -> Result<Json<AdminReport>, ApiError> {
    let row = reports::find(&s.pool, id).await?;
    one(&s, row).await
}

async fn resolve(
    State(s): State<AppState>,
    _: Admin,
    RecordId(id): RecordId,
) -> Result<Json<AdminReport>, ApiError> {
    let row = reports::set_resolved(&s.pool, id, true).await?;
    one(&s, row).await
}

async fn reopen(
    State(s): State<AppState>,
    _: Admin,
    RecordId(id): RecordId,
) -> Result<Json<AdminReport>, ApiError> {
    let row = reports::set_resolved(&s.pool, id, false).await?;
    one(&s, row).await
}
