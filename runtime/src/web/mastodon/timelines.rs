//! Timelines (R-MAPI-4): `GET /api/v1/timelines/home` (the account's own
//! posts, followed accounts' posts and boosts, as written into `home_feed` when they were
//! made or arrived — so a page is one range scan of the account's entries), `/public`
//! (`local`, `remote`, `only_media`) and `/tag/:hashtag` (the `post_tags` rows the triggers
//! keep), `/list/:id` (the `list_feed` rows written beside home, R-MAPI-6), newest
//! first with Mastodon's `max_id`/`since_id`/`min_id`/`limit` and `Link` headers. Status ids
//! are time-ordered UUIDs, so they are the cursors. Each leaves out what its reader mutes or
//! blocks (`statuses::hidden`), as a filter on its own index scan.

use axum::Router;
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::routing::get;
use uuid::Uuid;

use super::pagination::{Page, Paged, Paging, param, params};
use super::statuses::render;
use crate::filters::Context;
use crate::filters::active::Active;
use crate::mastodon::Status;
use crate::statuses::access::readable_page_sql;
use crate::statuses::hidden::Hidden;
use crate::web::auth::{MaybeNeeds, Needs, need};
use crate::web::mastodon::pagination::BindPage;
use crate::web::{ApiError, AppState};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/timelines/home", get(home))
        .route("/api/v1/timelines/public", get(public))
        .route("/api/v1/timelines/tag/{hashtag}", get(tag))
        .route("/api/v1/timelines/list/{id}", get(list))
}

/// One page of a feed table (`home_feed`, `list_feed`) for the owner bound as `$1`
/// (`owner_column`), without what the reader hides.
async fn feed_page(
    s: &AppState,
    table: &str,
    owner_column: &str,
    owner: Uuid,
    hidden: &Hidden,
    page: &Page<Uuid>,
) -> Result<Vec<Uuid>, ApiError> {
    let sql = format!(
        "SELECT f.entry_id FROM {table} f WHERE f.{owner_column} = $1 {} AND {}",
        hidden.entry_sql("f", 5, 6, 7),
        page.keyset("f.entry_id", 2)
    );
    let ids: Vec<Uuid> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(owner)
        .bind_cursors(page)
        .bind(&hidden.iris)
        .bind(&hidden.ids)
        .bind(&hidden.domains)
        .fetch_all(&s.pool)
        .await?;
    Ok(ids)
}

/// A list's timeline (`read:lists`): its members' posts and boosts as they reached the
/// owner. Another account's list is the same 404 as none.
async fn list(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadLists>,
    Path(id): Path<String>,
    Paging { page, uri }: Paging<Uuid>,
) -> Result<Paged<Status>, ApiError> {
    let id = crate::web::parse_id(&id, "list")?;
    if !crate::lists::owned_by(&s.pool, id, account.id).await? {
        return Err(ApiError::record_not_found());
    }
    let hidden = Hidden::of(&s.pool, s.site().urls, Some(account.id)).await?;
    let ids = feed_page(&s, "list_feed", "list_id", id, &hidden, &page).await?;
    statuses_page(&s, Some(account.id), Context::Home, page.finish(ids), &uri).await
}

async fn home(
    State(s): State<AppState>,
    Needs(account, _): Needs<need::ReadStatuses>,
    Paging { page, uri }: Paging<Uuid>,
) -> Result<Paged<Status>, ApiError> {
    let hidden = Hidden::of(&s.pool, s.site().urls, Some(account.id)).await?;
    let ids = feed_page(&s, "home_feed", "account_id", account.id, &hidden, &page).await?;
    statuses_page(&s, Some(account.id), Context::Home, page.finish(ids), &uri).await
}

/// `local`/`remote`/`only_media` of the public and tag timelines (each flag selects a fixed
/// fragment: nothing from the request reaches the SQL text).
struct Filters {
    local: bool,
    remote: bool,
    only_media: bool,
}

impl Filters {
    fn of(params: &[(String, String)]) -> Filters {
        let on = |k: &str| param(params, k).is_some_and(|v| matches!(v, "true" | "1" | "on"));
        let local = on("local");
        Filters {
            local,
            remote: !local && on("remote"),
            only_media: on("only_media"),
        }
    }

    /// The condition on the `posts` row `p`.
    fn sql(&self) -> String {
        let mut sql = String::new();
        if self.local {
            sql.push_str(" AND p.local");
        } else if self.remote {
            sql.push_str(" AND NOT p.local");
        }
        if self.only_media {
            sql.push_str(
                " AND (EXISTS (SELECT 1 FROM media_attachments m WHERE m.status_id = p.id)
                       OR EXISTS (SELECT 1 FROM remote_posts r
                                   WHERE r.id = p.id AND jsonb_array_length(r.attachments) > 0))",
            );
        }
        sql
    }

    /// Public post ids of each table, from its partial index of public posts
    /// (`statuses_public`, `remote_posts_public`).
    fn public_halves(&self) -> Vec<&'static str> {
        let local = "SELECT s.id FROM statuses s WHERE s.visibility = 'public'";
        let remote = "SELECT r.id FROM remote_posts r
                       WHERE r.visibility = 'public' AND r.deleted_at IS NULL";
        if self.local {
            vec![local]
        } else if self.remote {
            vec![remote]
        } else {
            vec![local, remote]
        }
    }
}

/// Public posts, ours and theirs; anyone may read it (a token, when given, must be valid and
/// hold `read:statuses`).
async fn public(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    uri: Uri,
) -> Result<Paged<Status>, ApiError> {
    let params = params(&uri);
    let halves = Filters::of(&params).public_halves();
    public_page(&s, viewer.map(|a| a.id), &uri, &params, &halves, None).await
}

/// Public posts with the hashtag (case-insensitive, `#` optional), ours and theirs.
async fn tag(
    State(s): State<AppState>,
    MaybeNeeds(viewer, _): MaybeNeeds<need::ReadStatuses>,
    Path(hashtag): Path<String>,
    uri: Uri,
) -> Result<Paged<Status>, ApiError> {
    let params = params(&uri);
    let name = hashtag.trim_start_matches('#').to_lowercase();
    // Public posts only, as Mastodon's tag timeline; the visibility rule stays in the query
    // so a followers-only post can never be listed, whatever `post_tags` holds. The tag's
    // rows are walked backwards in (tag, post_id) order, each checked in `posts`.
    let halves = ["SELECT t.post_id AS id FROM post_tags t WHERE t.tag = $1"];
    public_page(
        &s,
        viewer.map(|a| a.id),
        &uri,
        &params,
        &halves,
        Some(&name),
    )
    .await
}

/// A page of public posts that `viewer` may read and has not hidden, under the request's
/// `params` (cursors, `local`/`remote`/`only_media`): `halves` select the candidate ids, with
/// `tag`, when given, bound at `$1` before everything else.
async fn public_page(
    s: &AppState,
    viewer: Option<Uuid>,
    uri: &Uri,
    params: &[(String, String)],
    halves: &[&str],
    tag: Option<&str>,
) -> Result<Paged<Status>, ApiError> {
    let page: Page<Uuid> = Page::from_params(params)?;
    let hidden = Hidden::of(&s.pool, s.site().urls, viewer).await?;
    let first = 1 + u32::from(tag.is_some());
    let sql = readable_page_sql(
        halves,
        &format!(
            "AND p.visibility = 'public'{}{}",
            Filters::of(params).sql(),
            hidden.post_sql("p", first + 4, first + 5)
        ),
        first + 3,
        &page.keyset("c.id", first as usize),
        &page.order_limit("c.id"),
    );
    let mut query = sqlx::query_scalar(sqlx::AssertSqlSafe(sql));
    if let Some(tag) = tag {
        query = query.bind(tag.to_string());
    }
    let ids: Vec<Uuid> = query
        .bind_cursors(&page)
        .bind(viewer)
        .bind(&hidden.ids)
        .bind(&hidden.domains)
        .fetch_all(&s.pool)
        .await?;
    statuses_page(s, viewer, Context::Public, page.finish(ids), uri).await
}

/// Status entities for `ids` (newest first) as shown in `context`, with their own ids as the
/// page's cursors; an entry deleted between the scan and the render is left out, and so is
/// one the viewer's `hide` filters take out — after the cursors are read from the page, so a
/// page emptied by filters still leads to the next.
async fn statuses_page(
    s: &AppState,
    viewer: Option<Uuid>,
    context: Context,
    ids: Vec<Uuid>,
    uri: &Uri,
) -> Result<Paged<Status>, ApiError> {
    let filters = Active::of(&s.pool, viewer).await?;
    let mut conn = s.pool.acquire().await?;
    let items = render(s, &mut conn, viewer, &ids).await?;
    let keys: Vec<String> = items.iter().map(|v| v.id.clone()).collect();
    let items = filters.apply(context, items).await?;
    Ok(Paged::new(items, &keys, &s.public_origin, uri))
}
