//! Every account a client can name: local accounts and the remote actors we have stored, by
//! local id (a local account's id, or the stable id a remote actor got when first stored), by
//! `acct` (`name` or `name@host`) or by actor IRI.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::accounts::{self, Account};
use crate::federation::Federation;
use crate::federation::actors::actor::RemoteActor;
use crate::federation::bounds;
use crate::federation::outbound::relationships::Target;

/// A stored remote actor as the client API shows it.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct RemoteAccount {
    pub id: Uuid,
    pub iri: String,
    pub handle: Option<String>,
    pub inbox: String,
    pub shared_inbox: Option<String>,
    pub key_id: Option<String>,
    pub public_key_pem: Option<String>,
    pub document: Value,
    pub fetched_at: DateTime<Utc>,
    /// Their counts as their server published them (`tasks::actor_counts`); `None` until read.
    #[sqlx(default)]
    pub followers_count: Option<i64>,
    #[sqlx(default)]
    pub following_count: Option<i64>,
    #[sqlx(default)]
    pub statuses_count: Option<i64>,
}

impl RemoteAccount {
    pub fn actor(&self) -> RemoteActor {
        RemoteActor {
            iri: self.iri.clone(),
            inbox: self.inbox.clone(),
            shared_inbox: self.shared_inbox.clone(),
            key_id: self.key_id.clone(),
            public_key_pem: self.public_key_pem.clone(),
        }
    }

    /// `name@host`: the WebFinger handle when we know it, else the actor's preferred username
    /// at its IRI's host.
    pub fn acct(&self) -> String {
        if let Some(h) = &self.handle {
            return h.trim_start_matches('@').to_string();
        }
        let name = self
            .document
            .get("preferredUsername")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        let host = url::Url::parse(&self.iri)
            .ok()
            .map(|u| crate::federation::transport::signature::host_header(&u))
            .unwrap_or_default();
        format!("{name}@{host}")
    }
}

/// The columns of a [`RemoteAccount`] (of `remote_actors`, unaliased). Its `document` is what
/// the Account entity and `acct` read of the stored actor — its lists sliced and its texts
/// cut to `bounds`, since an actor stored before the bounds may hold any amount, and only
/// these properties: an account is shown beside each of its posts, so a page costs what these
/// cost, never what else a remote server put in its document.
pub fn remote_columns() -> &'static str {
    static COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        // A text property, cut to `max` characters (stored ones were cut to bytes already);
        // null when it is not a string, which no reader takes for text anyway.
        let text = |key: &str, max: usize| {
            format!(
                "'{key}', CASE WHEN jsonb_typeof(document->'{key}') = 'string'
                               THEN to_jsonb(left(document->>'{key}', {max})) END"
            )
        };
        let boolean = |key: &str| {
            format!(
                "'{key}', CASE WHEN jsonb_typeof(document->'{key}') = 'boolean'
                               THEN document->'{key}' END"
            )
        };
        let fields = [
            text("type", bounds::MAX_STRING_BYTES),
            text("preferredUsername", bounds::MAX_STRING_BYTES),
            text("name", bounds::MAX_NAME_BYTES),
            text("summary", bounds::MAX_SUMMARY_BYTES),
            text("published", bounds::MAX_STRING_BYTES),
            boolean("manuallyApprovesFollowers"),
            boolean("discoverable"),
            // A `Link` (documents stored before `normalize` made it a string) by its id.
            format!(
                "'url', CASE jsonb_typeof(document->'url')
                          WHEN 'string' THEN to_jsonb(left(document->>'url', {}))
                          WHEN 'object' THEN jsonb_build_object('id', document->'url'->'id') END",
                bounds::MAX_STRING_BYTES
            ),
            // The first image: what `account::remote` shows of a list of them.
            "'icon', jsonb_path_query_first(document, '$.icon[0]')".to_string(),
            "'image', jsonb_path_query_first(document, '$.image[0]')".to_string(),
            format!(
                "'attachment', jsonb_path_query_array(document, '$.attachment[0 to {}]')",
                bounds::MAX_FIELDS - 1
            ),
            format!(
                "'tag', jsonb_path_query_array(document, '$.tag[0 to {}]')",
                4 * bounds::MAX_TAGS_PER_KIND - 1
            ),
        ];
        format!(
            "id, iri, handle, inbox, shared_inbox, key_id, public_key_pem,
             jsonb_build_object({}) AS document,
             fetched_at, followers_count, following_count, statuses_count",
            fields.join(", ")
        )
    });
    &COLUMNS
}

/// An account found by one of its names.
#[derive(Clone, Debug)]
pub enum Found {
    Local(Account),
    Remote(RemoteAccount),
}

impl Found {
    pub fn target(&self) -> Target {
        match self {
            Found::Local(a) => Target::Local(a.clone()),
            Found::Remote(r) => Target::Remote(r.actor()),
        }
    }
    pub fn iri(&self, fed: &Federation) -> String {
        match self {
            Found::Local(a) => fed.actor_iri(&a.username),
            Found::Remote(r) => r.iri.clone(),
        }
    }
}

pub async fn by_id(pool: &PgPool, id: Uuid) -> Result<Option<Found>, sqlx::Error> {
    if let Some(a) = accounts::by_id(pool, id).await? {
        return Ok(Some(Found::Local(a)));
    }
    let remote: Option<RemoteAccount> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors WHERE id = $1",
        remote_columns()
    )))
    .bind(id)
    .fetch_optional(pool)
    .await?;
    Ok(remote.map(Found::Remote))
}

/// Many accounts by Account entity id, ours and remote actors alike, in two queries (a
/// page of notifications names one per entry); unknown ids are left out.
pub async fn by_ids(
    pool: &PgPool,
    ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, Found>, sqlx::Error> {
    let mut out = std::collections::HashMap::new();
    if ids.is_empty() {
        return Ok(out);
    }
    for a in accounts::by_ids(pool, ids).await? {
        out.insert(a.id, Found::Local(a));
    }
    let remote: Vec<RemoteAccount> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors WHERE id = ANY($1)",
        remote_columns()
    )))
    .bind(ids)
    .fetch_all(pool)
    .await?;
    for r in remote {
        out.entry(r.id).or_insert(Found::Remote(r));
    }
    Ok(out)
}

/// The Account entity id of a stored remote actor, inside the caller's transaction.
pub async fn remote_id(conn: &mut PgConnection, iri: &str) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM remote_actors WHERE iri = $1")
        .bind(iri)
        .fetch_optional(conn)
        .await
}

pub async fn remote_by_iri(pool: &PgPool, iri: &str) -> Result<Option<RemoteAccount>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors WHERE iri = $1",
        remote_columns()
    )))
    .bind(iri)
    .fetch_optional(pool)
    .await
}

/// Many remote actors by IRI, in no particular order.
pub async fn remotes_by_iri(
    pool: &PgPool,
    iris: &[String],
) -> Result<Vec<RemoteAccount>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors WHERE iri = ANY($1)",
        remote_columns()
    )))
    .bind(iris)
    .fetch_all(pool)
    .await
}

/// A local or stored remote account by its IRI.
pub async fn by_iri(
    pool: &PgPool,
    fed: &Federation,
    iri: &str,
) -> Result<Option<Found>, sqlx::Error> {
    if let Some(name) = fed.local_username(iri) {
        return Ok(accounts::by_username(pool, name).await?.map(Found::Local));
    }
    Ok(remote_by_iri(pool, iri).await?.map(Found::Remote))
}

/// `name`, `@name`, `name@our-domain` (local) or `name@host` (a stored remote actor: by its
/// WebFinger handle, or — for actors stored without one, e.g. a post's author — by preferred
/// username on the host of its IRI). Nothing is fetched here; search with `resolve` does that.
pub async fn by_acct(
    pool: &PgPool,
    fed: &Federation,
    acct: &str,
) -> Result<Option<Found>, sqlx::Error> {
    let acct = acct.trim().trim_start_matches('@');
    let (name, host) = match acct.split_once('@') {
        Some((n, h)) => (n, Some(h)),
        None => (acct, None),
    };
    if host.is_none_or(|h| h.eq_ignore_ascii_case(&fed.domain)) {
        return Ok(accounts::by_username(pool, name).await?.map(Found::Local));
    }
    let remote: Option<RemoteAccount> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors
          WHERE lower(handle) = lower($1)
             OR (handle IS NULL AND lower(document->>'preferredUsername') = lower($2)
                 AND substring(iri from '^[a-z]+://([^/]+)') = lower($3))
          ORDER BY handle IS NULL, fetched_at DESC LIMIT 1",
        remote_columns()
    )))
    .bind(acct)
    .bind(name)
    .bind(host.unwrap_or_default())
    .fetch_optional(pool)
    .await?;
    Ok(remote.map(Found::Remote))
}

/// Stored accounts whose name starts with `prefix` (local usernames and display names, remote
/// handles and preferred usernames), at most `limit`, local first.
pub async fn search(pool: &PgPool, prefix: &str, limit: i64) -> Result<Vec<Found>, sqlx::Error> {
    let pattern = format!(
        "{}%",
        prefix
            .replace('\\', "\\\\")
            .replace('%', "\\%")
            .replace('_', "\\_")
    );
    let locals: Vec<Uuid> = sqlx::query_scalar(
        "SELECT id FROM accounts WHERE username ILIKE $1 OR display_name ILIKE $1
          ORDER BY username LIMIT $2",
    )
    .bind(&pattern)
    .bind(limit)
    .fetch_all(pool)
    .await?;
    let mut out = Vec::new();
    for id in locals {
        if let Some(a) = accounts::by_id(pool, id).await? {
            out.push(Found::Local(a));
        }
    }
    let remotes: Vec<RemoteAccount> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM remote_actors
          WHERE gone_at IS NULL AND (handle ILIKE $1 OR document->>'preferredUsername' ILIKE $1)
          ORDER BY handle LIMIT $2",
        remote_columns()
    )))
    .bind(&pattern)
    .bind(limit - out.len() as i64)
    .fetch_all(pool)
    .await?;
    out.extend(remotes.into_iter().map(Found::Remote));
    Ok(out)
}
