//! Filters in the client API (R-MAPI-6): Mastodon's v2 (`/api/v2/filters`, their
//! keywords and statuses) and, for old clients, v1 (`/api/v1/filters`: one v1 filter per
//! keyword, as Mastodon answers since v2 came). Another account's filter, keyword or status
//! rule is the same 404 as none. The rules (blank titles, unknown contexts, limits) are
//! `filters`', answered as 422; what the filters do to what a reader is shown is
//! `filters::active`'s.

use std::time::Duration;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use serde_json::{Map, Value};
use sqlx::PgConnection;
use uuid::Uuid;

use super::RecordId;
use super::statuses::body::{StatusBody, flag};
use crate::filters::{self, Action, Changes, Context, FilterError, KeywordChange, Rule};
use crate::mastodon::Empty;
use crate::mastodon::filter::{Filter, FilterKeyword, FilterStatus, V1Filter};
use crate::statuses::access;
use crate::web::auth::{Needs, need};
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v2/filters", get(index).post(create))
        .route("/api/v2/filters/{id}", get(show).put(update).delete(remove))
        .route(
            "/api/v2/filters/{id}/keywords",
            get(rules::<filters::Keyword>).post(add_keyword),
        )
        .route(
            "/api/v2/filters/keywords/{id}",
            get(show_rule::<filters::Keyword>)
                .put(update_keyword)
                .delete(remove_rule::<filters::Keyword>),
        )
        .route(
            "/api/v2/filters/{id}/statuses",
            get(rules::<filters::StatusRule>).post(add_status),
        )
        .route(
            "/api/v2/filters/statuses/{id}",
            get(show_rule::<filters::StatusRule>).delete(remove_rule::<filters::StatusRule>),
        )
        .route("/api/v1/filters", get(v1_index).post(v1_create))
        .route(
            "/api/v1/filters/{id}",
            get(v1_show).put(v1_update).delete(v1_remove),
        )
}

impl From<FilterError> for ApiError {
    fn from(e: FilterError) -> Self {
        match e {
            FilterError::Invalid(m) => ApiError::unprocessable(m),
            FilterError::Db(e) => e.into(),
        }
    }
}

impl From<crate::filters::active::Unfinished> for ApiError {
    fn from(e: crate::filters::active::Unfinished) -> Self {
        ApiError::unavailable(e.to_string())
    }
}

/// One change of the account's filters in its own transaction: `None` (nothing of the
/// account's by that id) is the same 404 as an unknown id, a refused change a 422.
async fn one<T>(
    s: &AppState,
    run: impl AsyncFnOnce(&mut PgConnection) -> Result<Option<T>, FilterError>,
) -> Result<T, ApiError> {
    let mut tx = s.pool.begin().await?;
    let done = run(&mut tx).await?.ok_or_else(ApiError::record_not_found)?;
    tx.commit().await?;
    Ok(done)
}

/// One read of the account's filters on a pooled connection (no transaction: a read has
/// nothing to commit); `None` is the same 404 as in [`one`].
async fn read<T>(
    s: &AppState,
    run: impl AsyncFnOnce(&mut PgConnection) -> Result<Option<T>, FilterError>,
) -> Result<T, ApiError> {
    let mut conn = s.pool.acquire().await?;
    run(&mut conn).await?.ok_or_else(ApiError::record_not_found)
}

/// A string field, if present and a string (forms send every value as one).
fn string(body: &Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match body.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(ApiError::unprocessable(format!("{key} must be a string"))),
    }
}

/// `context` (an array, or one string): every entry one of Mastodon's five.
fn contexts(body: &Map<String, Value>) -> Result<Option<Vec<Context>>, ApiError> {
    let raw: Vec<&str> = match body.get("context") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| {
                v.as_str()
                    .ok_or_else(|| ApiError::unprocessable("context must be a list of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(ApiError::unprocessable("context must be a list of strings")),
    };
    raw.into_iter()
        .filter(|c| !c.is_empty())
        .map(|c| {
            Context::parse(c).ok_or_else(|| {
                ApiError::unprocessable(format!(
                    "context {c:?} is not one of home, notifications, public, thread, account"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

/// `expires_in`: absent keeps the end; null or empty removes it; seconds from now sets it.
fn expires_in(body: &Map<String, Value>) -> Result<Option<Option<Duration>>, ApiError> {
    let bad = || ApiError::unprocessable("expires_in must be a positive number of seconds");
    let secs = match body.get("expires_in") {
        None => return Ok(None),
        Some(Value::Null) => return Ok(Some(None)),
        Some(Value::String(s)) if s.trim().is_empty() => return Ok(Some(None)),
        Some(Value::String(s)) => s.trim().parse::<f64>().map_err(|_| bad())?,
        Some(Value::Number(n)) => n.as_f64().ok_or_else(bad)?,
        Some(_) => return Err(bad()),
    };
    if !secs.is_finite() || secs < 1.0 {
        return Err(bad());
    }
    Ok(Some(Some(Duration::from_secs_f64(
        secs.min(filters::MAX_DURATION.as_secs_f64()),
    ))))
}

/// `keywords_attributes`: an array of `{keyword, whole_word, id, _destroy}`, or Rails' hash
/// of them by index (`keywords_attributes[0][keyword]=…`).
fn keyword_changes(body: &Map<String, Value>) -> Result<Vec<KeywordChange>, ApiError> {
    let items: Vec<&Value> = match body.get("keywords_attributes") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().collect(),
        Some(Value::Object(m)) => m.values().collect(),
        Some(_) => {
            return Err(ApiError::unprocessable(
                "keywords_attributes must be a list of keywords",
            ));
        }
    };
    if items.len() as i64 > filters::MAX_KEYWORDS {
        return Err(ApiError::unprocessable(format!(
            "a filter may have at most {} keywords",
            filters::MAX_KEYWORDS
        )));
    }
    items
        .into_iter()
        .map(|item| {
            let Value::Object(k) = item else {
                return Err(ApiError::unprocessable(
                    "each of keywords_attributes must be an object",
                ));
            };
            let id = match string(k, "id")?.filter(|s| !s.is_empty()) {
                None => None,
                Some(raw) => Some(Uuid::parse_str(&raw).map_err(|_| {
                    ApiError::unprocessable(format!("keyword {raw} is not one of this filter's"))
                })?),
            };
            Ok(KeywordChange {
                id,
                keyword: string(k, "keyword")?,
                whole_word: flag("whole_word", k.get("whole_word"))?,
                destroy: flag("_destroy", k.get("_destroy"))?.unwrap_or(false),
            })
        })
        .collect()
}

/// A v2 create or update body.
fn changes(body: &Map<String, Value>) -> Result<Changes, ApiError> {
    Ok(Changes {
        title: string(body, "title")?,
        context: contexts(body)?,
        action: string(body, "filter_action")?
            .filter(|a| !a.is_empty())
            .map(|a| Action::parse(&a)),
        expires_in: expires_in(body)?,
        keywords: keyword_changes(body)?,
    })
}

async fn index(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
) -> Result<Json<Vec<Filter>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let all = filters::all(&mut conn, account.id).await?;
    Ok(Json(all.iter().map(Filter::full).collect()))
}

async fn own(s: &AppState, account: Uuid, id: Uuid) -> Result<filters::Filter, ApiError> {
    read(s, async |c| Ok(filters::get(c, account, id).await?)).await
}

async fn show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
    RecordId(id): RecordId,
) -> Result<Json<Filter>, ApiError> {
    Ok(Json(Filter::full(&own(&s, account.id, id).await?)))
}

async fn create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<Filter>, ApiError> {
    let changes = changes(&body)?;
    let f = one(&s, async |tx| {
        filters::create(tx, account.id, &changes).await.map(Some)
    })
    .await?;
    Ok(Json(Filter::full(&f)))
}

async fn update(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<Filter>, ApiError> {
    let changes = changes(&body)?;
    let f = one(&s, async |tx| {
        filters::update(tx, account.id, id, &changes).await
    })
    .await?;
    Ok(Json(Filter::full(&f)))
}

async fn remove(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
) -> Result<Json<Empty>, ApiError> {
    one(&s, async |tx| {
        Ok(filters::delete(tx, account.id, id)
            .await?
            .then_some(Json(Empty {})))
    })
    .await
}

async fn add_keyword(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<FilterKeyword>, ApiError> {
    let keyword = string(&body, "keyword")?.unwrap_or_default();
    let whole_word = flag("whole_word", body.get("whole_word"))?.unwrap_or(true);
    let k = one(&s, async |tx| {
        filters::add_keyword(tx, account.id, id, &keyword, whole_word).await
    })
    .await?;
    Ok(Json(FilterKeyword::from(&k)))
}

async fn update_keyword(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<FilterKeyword>, ApiError> {
    let keyword = string(&body, "keyword")?;
    let whole_word = flag("whole_word", body.get("whole_word"))?;
    let k = one(&s, async |tx| {
        filters::update_keyword(tx, account.id, id, keyword.as_deref(), whole_word).await
    })
    .await?;
    Ok(Json(FilterKeyword::from(&k)))
}

/// Adds a status the account may read (one it may not is the same 404 as an unknown one).
async fn add_status(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<FilterStatus>, ApiError> {
    let status = string(&body, "status_id")?
        .and_then(|raw| Uuid::parse_str(&raw).ok())
        .ok_or_else(ApiError::record_not_found)?;
    let r = one(&s, async |tx| {
        if !access::can_see(&mut *tx, Some(account.id), status).await? {
            return Ok(None);
        }
        filters::add_status(tx, account.id, id, status).await
    })
    .await?;
    Ok(Json(FilterStatus::from(&r)))
}

/// A filter's rules of one kind, its keywords or its statuses, which are listed
/// (`/api/v2/filters/{id}/keywords`), shown and removed (`/api/v2/filters/keywords/{id}`)
/// alike; only adding one differs.
trait RuleKind: filters::RuleRow {
    /// The rule as the API answers it.
    type Entity: Serialize + for<'a> From<&'a Self>;
    /// The filter's rules of this kind.
    fn of(f: &filters::Filter) -> &[Self];
}

impl RuleKind for filters::Keyword {
    type Entity = FilterKeyword;
    fn of(f: &filters::Filter) -> &[Self] {
        &f.keywords
    }
}

impl RuleKind for filters::StatusRule {
    type Entity = FilterStatus;
    fn of(f: &filters::Filter) -> &[Self] {
        &f.statuses
    }
}

/// The rules of that kind of the filter the path names.
async fn rules<R: RuleKind>(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
    RecordId(id): RecordId,
) -> Result<Json<Vec<R::Entity>>, ApiError> {
    let f = own(&s, account.id, id).await?;
    Ok(Json(R::of(&f).iter().map(R::Entity::from).collect()))
}

async fn show_rule<R: RuleKind>(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
    RecordId(id): RecordId,
) -> Result<Json<R::Entity>, ApiError> {
    let r: R = read(&s, async |c| Ok(filters::rule(c, account.id, id).await?)).await?;
    Ok(Json(R::Entity::from(&r)))
}

async fn remove_rule<R: RuleKind>(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
) -> Result<Json<Empty>, ApiError> {
    one(&s, async |tx| {
        Ok(filters::delete_rule(tx, account.id, R::RULE, id)
            .await?
            .then_some(Json(Empty {})))
    })
    .await
}

// v1: each keyword of a filter is a v1 filter (its id the keyword's); `irreversible` is the
// `hide` action. As on Mastodon, a v1 change of the filter's own settings is refused when
// the filter has other keywords a v1 client cannot see.

async fn v1_index(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
) -> Result<Json<Vec<V1Filter>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    let all = filters::all(&mut conn, account.id).await?;
    Ok(Json(
        all.iter()
            .flat_map(|f| f.keywords.iter().map(move |k| V1Filter::of(f, k)))
            .collect(),
    ))
}

/// The filter holding `account`'s keyword `id`, and the keyword.
async fn v1_own(
    s: &AppState,
    account: Uuid,
    id: Uuid,
) -> Result<(filters::Filter, filters::Keyword), ApiError> {
    read(s, async |c| {
        let Some(k) = filters::rule::<filters::Keyword>(&mut *c, account, id).await? else {
            return Ok(None);
        };
        Ok(filters::get(c, account, k.filter_id).await?.map(|f| (f, k)))
    })
    .await
}

async fn v1_show(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadFilters>,
    RecordId(id): RecordId,
) -> Result<Json<V1Filter>, ApiError> {
    let (f, k) = v1_own(&s, account.id, id).await?;
    Ok(Json(V1Filter::of(&f, &k)))
}

/// A v1 body's filter settings: `context`, `irreversible`, `expires_in`.
fn v1_changes(body: &Map<String, Value>) -> Result<Changes, ApiError> {
    Ok(Changes {
        title: None,
        context: contexts(body)?,
        action: flag("irreversible", body.get("irreversible"))?
            .map(|hide| if hide { Action::Hide } else { Action::Warn }),
        expires_in: expires_in(body)?,
        keywords: Vec::new(),
    })
}

async fn v1_create(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<V1Filter>, ApiError> {
    let phrase = string(&body, "phrase")?.unwrap_or_default();
    let mut changes = v1_changes(&body)?;
    // A title is at most 256 characters; a keyword may be longer.
    changes.title = Some(phrase.chars().take(256).collect());
    changes.keywords = vec![KeywordChange {
        keyword: Some(phrase),
        whole_word: Some(flag("whole_word", body.get("whole_word"))?.unwrap_or(true)),
        ..KeywordChange::default()
    }];
    let f = one(&s, async |tx| {
        filters::create(tx, account.id, &changes).await.map(Some)
    })
    .await?;
    let k = f
        .keywords
        .first()
        .ok_or_else(|| ApiError::unprocessable("phrase can't be blank"))?;
    Ok(Json(V1Filter::of(&f, k)))
}

async fn v1_update(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
    StatusBody(body): StatusBody<Map<String, Value>>,
) -> Result<Json<V1Filter>, ApiError> {
    let (f, k) = v1_own(&s, account.id, id).await?;
    let mut changes = v1_changes(&body)?;
    let touches_filter =
        changes.context.is_some() || changes.action.is_some() || changes.expires_in.is_some();
    if touches_filter && f.keywords.len() > 1 {
        return Err(ApiError::unprocessable(
            "this filter has several keywords: change it with the v2 filters API",
        ));
    }
    changes.keywords = vec![KeywordChange {
        id: Some(k.id),
        keyword: string(&body, "phrase")?,
        whole_word: flag("whole_word", body.get("whole_word"))?,
        destroy: false,
    }];
    let f = one(&s, async |tx| {
        filters::update(tx, account.id, f.id, &changes).await
    })
    .await?;
    let k = f
        .keywords
        .iter()
        .find(|x| x.id == k.id)
        .ok_or_else(ApiError::record_not_found)?;
    Ok(Json(V1Filter::of(&f, k)))
}

/// Removes the keyword, and its filter when nothing else is left in it (a filter a v1 client
/// made holds that one keyword).
async fn v1_remove(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::WriteFilters>,
    RecordId(id): RecordId,
) -> Result<Json<Empty>, ApiError> {
    let (f, k) = v1_own(&s, account.id, id).await?;
    one(&s, async |tx| {
        if f.keywords.len() == 1 && f.statuses.is_empty() {
            filters::delete(tx, account.id, f.id).await?;
        } else {
            filters::delete_rule(tx, account.id, Rule::Keyword, k.id).await?;
        }
        Ok(Some(Json(Empty {})))
    })
    .await
}
