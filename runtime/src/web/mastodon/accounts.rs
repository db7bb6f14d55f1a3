//! Accounts by id or address, and their lists: `GET /api/v1/accounts/{id}`, `/lookup?acct=`,
//! `/{id}/statuses`, `/{id}/followers`, `/{id}/following`. Local accounts and stored remote
//! actors alike; a remote account's statuses are the posts of it we stored, its follower lists
//! are empty (we do not fetch its collections).

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::get;
use axum::{Json, Router};
use uuid::Uuid;

use super::found;
use super::pagination::{MAX_LIMIT, Page, Paged, Paging, ids_param, param, params};
use super::statuses::render;
use crate::federation::Federation;
use crate::federation::actors::directory::{self, Found};
use crate::filters::Context;
use crate::filters::active::Active;
use crate::mastodon::{Account, Status};
use crate::statuses::access::{local_visible_sql, readable_page_sql};
use crate::statuses::pins;
use crate::web::activitypub::federation;
use crate::web::auth::{Needs, need};
use crate::web::mastodon::pagination::BindPage;
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/accounts", get(many))
        .route("/api/v1/accounts/lookup", get(lookup))
        .route("/api/v1/accounts/{id}", get(show))
        .route("/api/v1/accounts/{id}/statuses", get(statuses))
        .route("/api/v1/accounts/{id}/followers", get(followers))
        .route("/api/v1/accounts/{id}/following", get(following))
        .route("/api/v1/accounts/{id}/endorsements", get(endorsed_by))
        .route("/api/v1/endorsements", get(endorsements))
        .route("/api/v1/blocks", get(blocks))
        .route("/api/v1/mutes", get(mutes))
}

async fn show(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
) -> Result<Json<Account>, ApiError> {
    federation(&s)?;
    let found = found(&s, &id).await?;
    profile_viewed(&s, &found).await?;
    Ok(Json(
        crate::mastodon::account::of_found(&s.pool, s.site().urls, &found).await?,
    ))
}

/// Several accounts at once (`GET /api/v1/accounts?id[]=…`, Mastodon 4.3), ours and stored
/// remote actors alike, in the order asked, each once; unknown ids are left out.
async fn many(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Vec<Account>>, ApiError> {
    let ids = ids_param(&uri, MAX_LIMIT as usize)?;
    let mut found = directory::by_ids(&s.pool, &ids).await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(f) = found.remove(&id) {
            out.push(crate::mastodon::account::of_found(&s.pool, s.site().urls, &f).await?);
        }
    }
    Ok(Json(out))
}

/// A remote profile looked at: its counts are asked of its server when ours are stale
/// (R-MAPI-6), for this view's next reload and everyone's after.
async fn profile_viewed(s: &AppState, found: &Found) -> Result<(), ApiError> {
    if let Found::Remote(r) = found {
        crate::tasks::actor_counts::request(&mut *s.pool.acquire().await?, &r.iri).await?;
    }
    Ok(())
}

async fn lookup(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Json<Account>, ApiError> {
    let fed = federation(&s)?;
    let params = params(&uri);
    let acct = param(&params, "acct")
        .filter(|a| !a.trim().is_empty())
        .ok_or_else(|| ApiError::unprocessable("acct is required"))?;
    let found = directory::by_acct(&s.pool, fed, acct)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    profile_viewed(&s, &found).await?;
    Ok(Json(
        crate::mastodon::account::of_found(&s.pool, s.site().urls, &found).await?,
    ))
}

/// An account's statuses that the viewer may read (R-MAPI-VIS), newest first: ours by id
/// (time-ordered UUIDs); a remote account's, the posts of it that reached us (its outbox is
/// not fetched), by when they were published (else received), not deleted ones. The rule is
/// applied in the query, so pages are full, and again by the renderer.
async fn statuses(
    State(s): State<AppState>,
    Needs(viewer, _): Needs<need::ReadStatuses>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged<Status>, ApiError> {
    let found = found(&s, &id).await?;
    let params = params(&uri);
    let page: Page<Uuid> = Page::from_params(&params)?;
    let filters = ProfileFilters::of(&params);
    if filters.pinned {
        // The pinned statuses, latest pin first, on one page (at most 5 of ours; a remote
        // actor's as its `Add`s said, those that reached us), each readable by the viewer.
        let mut conn = s.pool.acquire().await?;
        let ids = match &found {
            Found::Local(account) => pins::of_local(&mut conn, account.id).await?,
            Found::Remote(remote) => pins::of_remote(&mut conn, &remote.iri).await?,
        };
        let items = render(&s, &mut conn, Some(viewer.id), &ids).await?;
        return Ok(Paged::new(items, &[], &s.public_origin, &uri));
    }
    let ids: Vec<Uuid> = match &found {
        // Our statuses have the columns the rule reads, under the same names; the page is
        // one range scan of `statuses_account_id`.
        Found::Local(account) => {
            let sql = format!(
                "SELECT s.id FROM statuses s WHERE s.account_id = $1 AND {}{} AND {}",
                local_visible_sql("s", 5),
                filters.local_sql(6),
                page.keyset("s.id", 2),
            );
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(account.id)
                .bind_cursors(&page)
                .bind(viewer.id)
                // `$6`, in the text only with a tag (an unused parameter is allowed).
                .bind(&filters.tagged)
                .fetch_all(&s.pool)
                .await?
        }
        // Theirs in (published, id) order from `remote_posts_actor_published`, each checked
        // in `posts`. A cursor is compared as (its time, its id), the time looked up once:
        // a row of plain values an index can start from, where a cursor naming no post
        // selects nothing.
        Found::Remote(remote) => {
            let at = |p: usize| format!("(SELECT created_at FROM posts WHERE id = ${p})");
            let mut conds = vec!["true".to_string()];
            if page.max.is_some() {
                conds.push(format!("(c.at, c.id) < ({}, $2)", at(2)));
            }
            if page.since.is_some() {
                conds.push(format!("(c.at, c.id) > ({}, $3)", at(3)));
            }
            if page.min.is_some() {
                conds.push(format!("(c.at, c.id) > ({}, $4)", at(4)));
            }
            let order = if page.min.is_some() { "ASC" } else { "DESC" };
            let half = format!(
                "SELECT r.id, coalesce(r.published, r.created_at) AS at FROM remote_posts r
                  WHERE r.actor = $1 AND r.deleted_at IS NULL{}",
                filters.remote_sql(6)
            );
            let sql = readable_page_sql(
                &[half.as_str()],
                "AND NOT p.local",
                5,
                &format!(
                    "{} ORDER BY c.at {order}, c.id {order} LIMIT {}",
                    conds.join(" AND "),
                    page.limit
                ),
                "",
            );
            sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
                .bind(&remote.iri)
                .bind_cursors(&page)
                .bind(viewer.id)
                // `$6`, in the text only with a tag (an unused parameter is allowed).
                .bind(&filters.tagged)
                .fetch_all(&s.pool)
                .await?
        }
    };
    let ids = page.finish(ids);
    let active = Active::of(&s.pool, Some(viewer.id)).await?;
    let mut conn = s.pool.acquire().await?;
    let items = render(&s, &mut conn, Some(viewer.id), &ids).await?;
    let items = active.apply(Context::Account, items).await?;
    let keys: Vec<String> = ids.iter().map(Uuid::to_string).collect();
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

/// The filters of an account's statuses (R-MAPI-6), as Mastodon's
/// `AccountStatusesFilter`: `exclude_replies` keeps replies to the account's own posts (its
/// threads), `only_media` posts with attachments, `tagged` posts with that hashtag, `pinned`
/// the pinned ones. `exclude_reblogs` needs nothing: boosts are not listed here. Each flag
/// selects a fixed fragment; the tag is a bound parameter.
#[derive(Debug, Default, PartialEq, Eq)]
struct ProfileFilters {
    exclude_replies: bool,
    only_media: bool,
    /// The hashtag, lower-cased without `#` (as `post_tags` and the `tags` columns hold it).
    tagged: Option<String>,
    pinned: bool,
}

impl ProfileFilters {
    fn of(params: &[(String, String)]) -> ProfileFilters {
        let on = |k: &str| param(params, k).is_some_and(|v| matches!(v, "true" | "1" | "on"));
        ProfileFilters {
            exclude_replies: on("exclude_replies"),
            only_media: on("only_media"),
            tagged: param(params, "tagged")
                .map(|t| t.trim().trim_start_matches('#').to_lowercase())
                .filter(|t| !t.is_empty()),
            pinned: on("pinned"),
        }
    }

    /// Conditions on our `statuses s`; `$tag` is the parameter the tag is bound to.
    fn local_sql(&self, tag: usize) -> String {
        let mut sql = String::new();
        if self.exclude_replies {
            sql.push_str(
                " AND (s.in_reply_to_uri IS NULL OR EXISTS (SELECT 1 FROM statuses parent
                        WHERE parent.uri = s.in_reply_to_uri AND parent.account_id = s.account_id))",
            );
        }
        if self.only_media {
            sql.push_str(
                " AND EXISTS (SELECT 1 FROM media_attachments m WHERE m.status_id = s.id)",
            );
        }
        if self.tagged.is_some() {
            sql.push_str(&format!(" AND ${tag} = ANY (s.tags)"));
        }
        sql
    }

    /// Conditions on a remote account's `remote_posts r`.
    fn remote_sql(&self, tag: usize) -> String {
        let mut sql = String::new();
        if self.exclude_replies {
            sql.push_str(
                " AND (r.in_reply_to IS NULL OR EXISTS (SELECT 1 FROM remote_posts parent
                        WHERE parent.iri = r.in_reply_to AND parent.actor = r.actor))",
            );
        }
        if self.only_media {
            sql.push_str(" AND jsonb_array_length(r.attachments) > 0");
        }
        if self.tagged.is_some() {
            sql.push_str(&format!(" AND ${tag} = ANY (r.tags)"));
        }
        sql
    }
}

/// Which relationship list.
#[derive(Clone, Copy)]
enum List {
    Followers,
    Following,
    /// The accounts it features on its profile.
    Endorsements,
}

/// `GET /api/v1/blocks`: the accounts the token holder blocks, newest block first, paged by
/// the block (R-MAPI-6). Only the holder's own list: there is no account parameter.
async fn blocks(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadBlocks>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    iri_page(
        &s,
        account.id,
        "SELECT id, target_iri FROM account_blocks WHERE account_id = $1 AND",
        &uri,
    )
    .await
}

/// `GET /api/v1/mutes`: the accounts the token holder mutes (an expired mute no longer),
/// newest mute first, paged by the mute, each with its `mute_expires_at` (R-MAPI-6).
async fn mutes(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadMutes>,
    Paging { page, uri }: Paging<i64>,
) -> Result<Paged<crate::mastodon::MutedAccount>, ApiError> {
    let fed = federation(&s)?;
    let rows: Vec<(i64, String, Option<chrono::DateTime<chrono::Utc>>)> = page
        .fetch_by_id(&s.pool, crate::mutes::LIST_SELECT, account.id)
        .await?;
    let mut items = Vec::with_capacity(rows.len());
    let mut keys = Vec::with_capacity(rows.len());
    for (id, iri, ends) in rows {
        // An actor we no longer know is left out, as in the other account lists.
        if let Some(found) = directory::by_iri(&s.pool, fed, &iri).await? {
            let account =
                crate::mastodon::account::of_found(&s.pool, s.site().urls, &found).await?;
            items.push(crate::mastodon::MutedAccount {
                account,
                mute_expires_at: ends,
            });
            keys.push(id.to_string());
        }
    }
    Ok(Paged::new(items, &keys, &s.public_origin, &uri))
}

async fn followers(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    relationship_list(&s, &id, &uri, List::Followers).await
}

async fn following(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    relationship_list(&s, &id, &uri, List::Following).await
}

/// The caller's endorsed accounts, newest endorsement first, paged by it (`Link`).
async fn endorsements(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadAccounts>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    iri_page(&s, account.id, crate::endorsements::LIST_SELECT, &uri).await
}

/// The accounts a local account features on its profile (Mastodon 4.4); a remote account's
/// are not fetched: empty.
async fn endorsed_by(
    State(s): State<AppState>,
    _: Needs<need::ReadAccounts>,
    Path(id): Path<String>,
    uri: Uri,
) -> Result<Paged<Account>, ApiError> {
    relationship_list(&s, &id, &uri, List::Endorsements).await
}

/// A local account's followers, followed or endorsed accounts, paginated by the
/// relationship's id.
async fn relationship_list(
    s: &AppState,
    id: &str,
    uri: &Uri,
    list: List,
) -> Result<Paged<Account>, ApiError> {
    let Found::Local(account) = found(s, id).await? else {
        // A remote account's lists are not fetched: empty, though a bad cursor is still 422.
        Page::<i64>::from_params(&params(uri))?;
        return Ok(Paged::new(Vec::new(), &[], &s.public_origin, uri));
    };
    let select = match list {
        List::Followers => "SELECT id, actor_iri FROM followers WHERE account_id = $1 AND",
        List::Following => {
            "SELECT id, target_iri FROM follows WHERE account_id = $1 AND state = 'accepted' AND"
        }
        List::Endorsements => crate::endorsements::LIST_SELECT,
    };
    iri_page(s, account.id, select, uri).await
}

/// One page of an account's list of actors (followers, follows, blocks, follow requests):
/// `select` yields `(id, actor IRI)` rows of `$1`'s and ends in `AND`, so the page's cursor
/// conditions (on the row's ordered `id`) complete it. Rendered as Account entities with the
/// `Link` header.
pub(crate) async fn iri_page(
    s: &AppState,
    account: Uuid,
    select: &'static str,
    uri: &Uri,
) -> Result<Paged<Account>, ApiError> {
    let fed = federation(s)?;
    let page: Page<i64> = Page::from_params(&params(uri))?;
    let rows: Vec<(i64, String)> = page.fetch_by_id(&s.pool, select, account).await?;
    let (items, keys) = render_rows(s, fed, &rows).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, uri))
}

/// Account entities for (cursor, actor IRI) rows, in order; actors we no longer know are
/// left out.
pub(crate) async fn render_rows<K: std::fmt::Display>(
    s: &AppState,
    fed: &Federation,
    rows: &[(K, String)],
) -> Result<(Vec<Account>, Vec<String>), ApiError> {
    let mut items = Vec::with_capacity(rows.len());
    let mut keys = Vec::with_capacity(rows.len());
    for (key, iri) in rows {
        if let Some(found) = directory::by_iri(&s.pool, fed, iri).await? {
            items.push(crate::mastodon::account::of_found(&s.pool, s.site().urls, &found).await?);
            keys.push(key.to_string());
        }
    }
    Ok((items, keys))
}
