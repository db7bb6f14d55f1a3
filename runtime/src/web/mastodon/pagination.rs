//! Mastodon's list pagination, shared by every list endpoint: `max_id` (older than), `since_id`
//! (newer than, newest first), `min_id` (just newer than, oldest first — then shown newest
//! first like every page), `limit` (default 40, at most 80), and a `Link` header with the
//! `next` (older) and `prev` (newer) pages. A list picks its key type (a relationship's
//! `bigint` id, a status's time-ordered UUID) and its column; cursors that do not parse as
//! that type are a 422.

use std::str::FromStr;

use axum::Json;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderValue, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use sqlx::Postgres;
use sqlx::postgres::PgArguments;
use sqlx::query::{QueryAs, QueryScalar};

use crate::web::ApiError;

pub const DEFAULT_LIMIT: i64 = 40;
pub const MAX_LIMIT: i64 = 80;

/// The query parameters of a request, repeated keys kept (`id[]=1&id[]=2`).
pub fn params(uri: &Uri) -> Vec<(String, String)> {
    url::form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
        .into_owned()
        .collect()
}

/// The records a request names by `id[]=…` (or `id=…`, several allowed), each once, in the
/// order given. A value that is not a UUID names no record and is left out, as an unknown
/// id is on Mastodon; more than `most` distinct ids is a 422 (a request costs what it names).
pub fn ids_param(uri: &Uri, most: usize) -> Result<Vec<uuid::Uuid>, ApiError> {
    let mut ids: Vec<uuid::Uuid> = Vec::new();
    for (key, raw) in params(uri) {
        if key != "id[]" && key != "id" {
            continue;
        }
        if let Ok(id) = uuid::Uuid::parse_str(&raw)
            && !ids.contains(&id)
        {
            ids.push(id);
            if ids.len() > most {
                return Err(ApiError::unprocessable(format!(
                    "at most {most} ids may be asked for at once"
                )));
            }
        }
    }
    Ok(ids)
}

/// The first value of `key`.
pub fn param<'a>(params: &'a [(String, String)], key: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A list request's page (`max_id`, `since_id`, `min_id`, `limit`) and its URI, which the
/// answer's `Link` header repeats: a handler takes `Paging { page, uri }: Paging<Uuid>`.
/// Cursors that are not of the list's key type are the 422 of [`Page::from_params`].
pub struct Paging<K> {
    pub page: Page<K>,
    pub uri: Uri,
}

impl<K: FromStr + Send, S: Send + Sync> FromRequestParts<S> for Paging<K> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        let uri = parts.uri.clone();
        let page = Page::from_params(&params(&uri))?;
        Ok(Paging { page, uri })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<K> {
    pub max: Option<K>,
    pub since: Option<K>,
    pub min: Option<K>,
    pub limit: i64,
}

impl<K: FromStr> Page<K> {
    pub fn from_params(params: &[(String, String)]) -> Result<Self, ApiError> {
        let cursor = |key: &str| -> Result<Option<K>, ApiError> {
            match param(params, key).filter(|v| !v.is_empty()) {
                None => Ok(None),
                Some(v) => v.parse().map(Some).map_err(|_| {
                    ApiError::unprocessable(format!("{key} is not an id of this list"))
                }),
            }
        };
        let limit = match param(params, "limit").filter(|v| !v.is_empty()) {
            None => DEFAULT_LIMIT,
            Some(v) => v
                .parse::<i64>()
                .map_err(|_| ApiError::unprocessable("limit must be a number"))?,
        };
        Ok(Page {
            max: cursor("max_id")?,
            since: cursor("since_id")?,
            min: cursor("min_id")?,
            // Mastodon clamps rather than refuses.
            limit: limit.clamp(1, MAX_LIMIT),
        })
    }
}

/// Binding a page's window to a query, in the order `keyset` and `clause` number it: one
/// place instead of four `.bind`s at every list endpoint.
pub trait BindPage<K>: Sized {
    /// `max`, `since`, `min` (the three parameters of `keyset`).
    fn bind_cursors(self, page: &Page<K>) -> Self;

    /// The cursors, then `limit` (the four parameters of `clause`).
    fn bind_page(self, page: &Page<K>) -> Self;
}

macro_rules! bind_page_for {
    ($query:ty) => {
        impl<'q, K, O> BindPage<K> for $query
        where
            K: 'q + Clone + sqlx::Encode<'q, Postgres> + sqlx::Type<Postgres>,
        {
            fn bind_cursors(self, page: &Page<K>) -> Self {
                self.bind(page.max.clone())
                    .bind(page.since.clone())
                    .bind(page.min.clone())
            }

            fn bind_page(self, page: &Page<K>) -> Self {
                self.bind_cursors(page).bind(page.limit)
            }
        }
    };
}

bind_page_for!(QueryAs<'q, Postgres, O, PgArguments>);
bind_page_for!(QueryScalar<'q, Postgres, O, PgArguments>);

impl<K> Page<K> {
    /// The SQL condition on `column` with `max`, `since`, `min` bound at `$first`,
    /// `$first+1`, `$first+2` (bind them in that order), then `ORDER BY` and `LIMIT` (the limit
    /// bound at `$first+3`).
    pub fn clause(&self, column: &str, first: usize) -> String {
        self.clause_by(column, &[column], |p| p.to_string(), first)
    }

    /// Like `clause`, for lists ordered by something else than their id: `key` (e.g.
    /// `(p.created_at, p.id)`) is compared with `cursor(param)` (e.g. the same row value looked
    /// up by the id bound at `param`) and rows are ordered by `order_by`. A cursor naming no row
    /// selects nothing.
    pub fn clause_by(
        &self,
        key: &str,
        order_by: &[&str],
        cursor: impl Fn(&str) -> String,
        first: usize,
    ) -> String {
        let p = |n: usize| format!("${n}");
        let (max, since, min, limit) = (p(first), p(first + 1), p(first + 2), p(first + 3));
        let order = if self.min.is_some() { "ASC" } else { "DESC" };
        let order_by: Vec<String> = order_by.iter().map(|c| format!("{c} {order}")).collect();
        format!(
            "({max} IS NULL OR {key} < {c_max}) AND ({since} IS NULL OR {key} > {c_since})
             AND ({min} IS NULL OR {key} > {c_min}) ORDER BY {order_by} LIMIT {limit}",
            c_max = cursor(&max),
            c_since = cursor(&since),
            c_min = cursor(&min),
            order_by = order_by.join(", "),
        )
    }

    /// Like `clause` (the same parameters, bound the same way), for the lists whose page must
    /// be one index range scan whatever plan PostgreSQL caches (R-MAPI-4): only the cursors
    /// the request gives are written (`$first` etc. stay bound, unused), and the limit is a
    /// literal. A prepared statement's generic plan knows neither the values nor which are
    /// NULL: `($1 IS NULL OR id < $1)` cannot bound an index scan, a two-sided range of
    /// parameters is estimated at 0.5 % of the table and `LIMIT $4` at a tenth of it — each of
    /// which made the planner sort the whole table rather than walk an index and stop.
    pub fn keyset(&self, column: &str, first: usize) -> String {
        let mut conds = Vec::new();
        if self.max.is_some() {
            conds.push(format!("{column} < ${first}"));
        }
        if self.since.is_some() {
            conds.push(format!("{column} > ${}", first + 1));
        }
        if self.min.is_some() {
            conds.push(format!("{column} > ${}", first + 2));
        }
        format!(
            "{} {}",
            if conds.is_empty() {
                "true".to_string()
            } else {
                conds.join(" AND ")
            },
            self.order_limit(column)
        )
    }

    /// `ORDER BY column … LIMIT n` of `keyset`, without the cursors: what merges pages.
    pub fn order_limit(&self, column: &str) -> String {
        let order = if self.min.is_some() { "ASC" } else { "DESC" };
        // `limit` is an i64 clamped to 1..=MAX_LIMIT by `from_params`: a number, not text.
        format!("ORDER BY {column} {order} LIMIT {}", self.limit)
    }

    /// The page of a list keyed by its `id` column: `select` is the list's query up to where
    /// the page's conditions go (ending in `WHERE` or `AND`), with one parameter, `arg`, at
    /// `$1`; `clause("id", 2)` completes it. The rows come newest first (`finish`).
    pub async fn fetch_by_id<A, R>(
        &self,
        pool: &sqlx::PgPool,
        select: &str,
        arg: A,
    ) -> Result<Vec<R>, sqlx::Error>
    where
        K: Clone + Send + Sync + sqlx::Encode<'static, Postgres> + sqlx::Type<Postgres> + 'static,
        A: Send + sqlx::Encode<'static, Postgres> + sqlx::Type<Postgres> + 'static,
        R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        let rows = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "{select} {}",
            self.clause("id", 2)
        )))
        .bind(arg)
        .bind_page(self)
        .fetch_all(pool)
        .await?;
        Ok(self.finish(rows))
    }

    /// Rows as fetched by `clause`, newest first.
    pub fn finish<T>(&self, mut rows: Vec<T>) -> Vec<T> {
        if self.min.is_some() {
            rows.reverse();
        }
        rows
    }
}

/// A page of entities with its `Link` header (none for an empty page).
pub struct Paged<T = Value> {
    pub items: Vec<T>,
    pub link: Option<HeaderValue>,
}

impl<T> Paged<T> {
    /// `keys` are the page's cursors, newest first, one per item. `origin` and `uri` make the
    /// links: the same path and parameters with `max_id` (next, older) or `min_id` (prev).
    pub fn new(items: Vec<T>, keys: &[String], origin: &str, uri: &Uri) -> Paged<T> {
        Paged {
            items,
            link: Self::link(keys, origin, uri),
        }
    }

    /// The `Link` header of a page whose cursors are `keys` (newest first): next with the
    /// oldest as `max_id`, prev with the newest as `min_id`; none for an empty page.
    pub fn link(keys: &[String], origin: &str, uri: &Uri) -> Option<HeaderValue> {
        match (keys.first(), keys.last()) {
            (Some(newest), Some(oldest)) => {
                let kept: Vec<(String, String)> = params(uri)
                    .into_iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "max_id" | "since_id" | "min_id"))
                    .collect();
                let url = |key: &str, value: &str| {
                    let mut q = url::form_urlencoded::Serializer::new(String::new());
                    for (k, v) in &kept {
                        q.append_pair(k, v);
                    }
                    q.append_pair(key, value);
                    format!("{origin}{}?{}", uri.path(), q.finish())
                };
                HeaderValue::from_str(&format!(
                    "<{}>; rel=\"next\", <{}>; rel=\"prev\"",
                    url("max_id", oldest),
                    url("min_id", newest)
                ))
                .ok()
            }
            _ => None,
        }
    }
}

impl<T: serde::Serialize> IntoResponse for Paged<T> {
    fn into_response(self) -> Response {
        let mut resp = Json(self.items).into_response();
        if let Some(link) = self.link {
            resp.headers_mut().insert(header::LINK, link);
        }
        resp
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(q: &str) -> Result<Page<i64>, ApiError> {
        let uri: Uri = format!("/x?{q}").parse().expect("uri");
        Page::from_params(&params(&uri))
    }

    #[test]
    fn cursors_and_limits_parse() {
        let p = page("max_id=10&since_id=2&limit=5")
            .map_err(|e| e.1)
            .expect("page");
        assert_eq!(
            (p.max, p.since, p.min, p.limit),
            (Some(10), Some(2), None, 5)
        );
        assert_eq!(
            page("limit=1000").map_err(|e| e.1).expect("p").limit,
            MAX_LIMIT
        );
        assert_eq!(page("").map_err(|e| e.1).expect("p").limit, DEFAULT_LIMIT);
        assert!(page("max_id=abc").is_err());
        assert!(page("limit=x").is_err());
        let p = page("min_id=3").map_err(|e| e.1).expect("page");
        assert!(p.clause("f.id", 2).contains("ORDER BY f.id ASC LIMIT $5"));
        assert_eq!(p.finish(vec![4, 5, 6]), vec![6, 5, 4]);
    }

    #[test]
    fn keyset_writes_only_the_given_cursors() {
        let p = page("max_id=10&limit=5").map_err(|e| e.1).expect("page");
        assert_eq!(p.keyset("c.id", 2), "c.id < $2 ORDER BY c.id DESC LIMIT 5");
        let p = page("").map_err(|e| e.1).expect("page");
        assert_eq!(p.keyset("c.id", 2), "true ORDER BY c.id DESC LIMIT 40");
        let p = page("since_id=1&min_id=3").map_err(|e| e.1).expect("page");
        assert_eq!(
            p.keyset("n.id", 1),
            "n.id > $2 AND n.id > $3 ORDER BY n.id ASC LIMIT 40"
        );
    }

    #[test]
    fn links_keep_other_parameters() {
        let uri: Uri = "/api/v1/accounts/a/followers?limit=2&max_id=9"
            .parse()
            .expect("uri");
        let paged = Paged::new(
            vec![Value::Null, Value::Null],
            &["8".into(), "7".into()],
            "https://h.example",
            &uri,
        );
        let link = paged.link.expect("link");
        assert_eq!(
            link.to_str().expect("ascii"),
            "<https://h.example/api/v1/accounts/a/followers?limit=2&max_id=7>; rel=\"next\", \
             <https://h.example/api/v1/accounts/a/followers?limit=2&min_id=8>; rel=\"prev\""
        );
    }
}
