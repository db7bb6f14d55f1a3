//! Filters (R-MAPI-6), Mastodon's v2 model: an account's titled filters, each with the
//! contexts it applies in, its action and an optional end, and its rules — keywords and
//! statuses. This module keeps them (every change in the caller's transaction, telling the
//! account's streams and scheduling the end); [`active`] applies them to what a reader is
//! shown; the v1 API is a view of the same rows (`web::mastodon::filters`).
//!
//! An ended filter is kept, as on Mastodon (apps show it as expired and may renew it), and
//! stops applying at its `expires_at` in every reader; `tasks::filter_expiry` then tells the
//! owner's open streams, once per end.

pub mod active;
pub mod keywords;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::queue::{NewMessage, QueueName, enqueue};

/// Where a filter applies: Mastodon's five contexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Context {
    /// Home and list timelines.
    Home,
    Notifications,
    /// Public and hashtag timelines.
    Public,
    /// A status's thread (`/context`).
    Thread,
    /// An account's statuses.
    Account,
}

impl Context {
    pub const ALL: [Context; 5] = [
        Context::Home,
        Context::Notifications,
        Context::Public,
        Context::Thread,
        Context::Account,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Context::Home => "home",
            Context::Notifications => "notifications",
            Context::Public => "public",
            Context::Thread => "thread",
            Context::Account => "account",
        }
    }

    pub fn parse(s: &str) -> Option<Context> {
        Context::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// What a matching filter does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// The status is shown with `filtered` set, for the client to fold behind a warning.
    Warn,
    /// The status is left out (GoToSocial's reading of `hide`: the server drops it, so no
    /// client, however old, shows it).
    Hide,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Warn => "warn",
            Action::Hide => "hide",
        }
    }

    /// Mastodon treats an unknown action as `warn`; a client sending one gets it.
    pub fn parse(s: &str) -> Action {
        if s == "hide" {
            Action::Hide
        } else {
            Action::Warn
        }
    }
}

/// Bounds that keep one reader's filters cheap to load and match on every page.
pub const MAX_FILTERS: i64 = 100;
pub const MAX_KEYWORDS: i64 = 100;
pub const MAX_STATUSES: i64 = 1000;
/// The most keyword text one account may have, in UTF-8 bytes over all its filters (issue 61,
/// F4). Every keyword is matched against every status a reader is shown, so their total is
/// what a page costs: 100 filters of 100 keywords of 512 characters was 5 MB of patterns and
/// 17-23 s per page. 16 KiB is some 1 500 keywords of ten letters — more than anyone types
/// into an app — and keeps a scan's worst case to tens of steps per byte of text
/// (`keywords`' tests).
pub const MAX_KEYWORD_BYTES: usize = 16 * 1024;
/// Longest `expires_in` (as mutes: a century is forever to any client).
pub const MAX_DURATION: Duration = crate::mutes::MAX_DURATION;

/// The expiry task's kind (`tasks::filter_expiry`).
pub const EXPIRY_KIND: &str = "hollo.filter-expiry.v1";

/// One expiry message per filter: a renewed end moves it, never doubles it.
pub fn expiry_key(filter: Uuid) -> String {
    format!("hollo.filter-expiry:{filter}")
}

#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExpiryPayload {
    pub filter_id: Uuid,
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Keyword {
    pub id: Uuid,
    pub filter_id: Uuid,
    pub keyword: String,
    pub whole_word: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct StatusRule {
    pub id: Uuid,
    pub filter_id: Uuid,
    pub status_id: Uuid,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Filter {
    pub id: Uuid,
    pub account_id: Uuid,
    pub title: String,
    pub context: Vec<Context>,
    pub action: Action,
    pub expires_at: Option<DateTime<Utc>>,
    pub keywords: Vec<Keyword>,
    pub statuses: Vec<StatusRule>,
}

#[derive(sqlx::FromRow)]
struct FilterRow {
    id: Uuid,
    account_id: Uuid,
    title: String,
    context: Vec<String>,
    action: String,
    expires_at: Option<DateTime<Utc>>,
}

#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// A rule of the API broken (an empty title, an unknown context, too many): 422.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn invalid(m: impl Into<String>) -> FilterError {
    FilterError::Invalid(m.into())
}

/// Refuses one more filter, keyword or status past its limit: `count` (`$1` bound to `of`)
/// finds `max` already, and the refusal says "`holder` may have at most `max` `things`".
async fn below_limit(
    tx: &mut PgConnection,
    count: &'static str,
    of: Uuid,
    max: i64,
    (holder, things): (&str, &str),
) -> Result<(), FilterError> {
    let n: i64 = sqlx::query_scalar(count)
        .bind(of)
        .fetch_one(&mut *tx)
        .await?;
    if n >= max {
        return Err(invalid(format!("{holder} may have at most {max} {things}")));
    }
    Ok(())
}

/// Refuses a change that leaves `account`'s keywords over [`MAX_KEYWORD_BYTES`] in all; run
/// after the change is written, in its transaction. The account is locked first, so two
/// changes of its filters cannot each see the other's keywords missing and pass together.
async fn within_keyword_bytes(tx: &mut PgConnection, account: Uuid) -> Result<(), FilterError> {
    crate::accounts::lock(&mut *tx, account).await?;
    let total: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(octet_length(k.keyword)), 0)::bigint
           FROM filter_keywords k JOIN filters f ON f.id = k.filter_id
          WHERE f.account_id = $1",
    )
    .bind(account)
    .fetch_one(&mut *tx)
    .await?;
    if total > MAX_KEYWORD_BYTES as i64 {
        return Err(invalid(format!(
            "an account's filter keywords may total at most {MAX_KEYWORD_BYTES} bytes"
        )));
    }
    Ok(())
}

/// A keyword change of a create or update (Mastodon's `keywords_attributes`): a new keyword
/// (no id), a change of one (id), or its removal (id and `destroy`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeywordChange {
    pub id: Option<Uuid>,
    pub keyword: Option<String>,
    pub whole_word: Option<bool>,
    pub destroy: bool,
}

/// What a create or an update sets; `None` keeps what is stored (a create requires a title
/// and contexts).
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub title: Option<String>,
    pub context: Option<Vec<Context>>,
    pub action: Option<Action>,
    /// `Some(None)`: no end any more; `Some(Some(d))`: ends `d` from now.
    pub expires_in: Option<Option<Duration>>,
    pub keywords: Vec<KeywordChange>,
}

fn check_title(t: &str) -> Result<String, FilterError> {
    trimmed("title", t, 256)
}

fn check_keyword(k: &str) -> Result<String, FilterError> {
    trimmed("keyword", k, 512)
}

/// `value` trimmed, neither blank nor over `max` characters (Mastodon's messages).
fn trimmed(what: &str, value: &str, max: usize) -> Result<String, FilterError> {
    let v = value.trim();
    if v.is_empty() {
        return Err(invalid(format!("{what} can't be blank")));
    }
    if v.chars().count() > max {
        return Err(invalid(format!(
            "{what} is too long (at most {max} characters)"
        )));
    }
    Ok(v.to_string())
}

fn context_strings(c: &[Context]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for c in c {
        if !v.iter().any(|s| s == c.as_str()) {
            v.push(c.as_str().to_string());
        }
    }
    v
}

const FILTER_COLUMNS: &str = "id, account_id, title, context, action, expires_at";

/// Filters of `rows` with their rules, in the rows' order.
async fn with_rules(
    conn: &mut PgConnection,
    rows: Vec<FilterRow>,
) -> Result<Vec<Filter>, sqlx::Error> {
    // Most readers have no filter: every signed-in page loads them, so no rule queries then.
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let keywords: Vec<Keyword> = sqlx::query_as(
        "SELECT id, filter_id, keyword, whole_word FROM filter_keywords
          WHERE filter_id = ANY($1) ORDER BY filter_id, id",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    let statuses: Vec<StatusRule> = sqlx::query_as(
        "SELECT id, filter_id, status_id FROM filter_statuses
          WHERE filter_id = ANY($1) ORDER BY filter_id, id",
    )
    .bind(&ids)
    .fetch_all(&mut *conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Filter {
            keywords: keywords
                .iter()
                .filter(|k| k.filter_id == r.id)
                .cloned()
                .collect(),
            statuses: statuses
                .iter()
                .filter(|s| s.filter_id == r.id)
                .cloned()
                .collect(),
            id: r.id,
            account_id: r.account_id,
            title: r.title,
            context: r.context.iter().filter_map(|c| Context::parse(c)).collect(),
            action: Action::parse(&r.action),
            expires_at: r.expires_at,
        })
        .collect())
}

/// Every filter of `account`, ended ones too, oldest first.
pub async fn all(conn: &mut PgConnection, account: Uuid) -> Result<Vec<Filter>, sqlx::Error> {
    let rows: Vec<FilterRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {FILTER_COLUMNS} FROM filters WHERE account_id = $1 ORDER BY id"
    )))
    .bind(account)
    .fetch_all(&mut *conn)
    .await?;
    with_rules(conn, rows).await
}

/// `account`'s filter `id`; `None` when it is none of theirs.
pub async fn get(
    conn: &mut PgConnection,
    account: Uuid,
    id: Uuid,
) -> Result<Option<Filter>, sqlx::Error> {
    let rows: Vec<FilterRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {FILTER_COLUMNS} FROM filters WHERE account_id = $1 AND id = $2"
    )))
    .bind(account)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    Ok(with_rules(conn, rows).await?.pop())
}

/// A new filter of `account`.
pub async fn create(
    tx: &mut PgConnection,
    account: Uuid,
    changes: &Changes,
) -> Result<Filter, FilterError> {
    let title = check_title(changes.title.as_deref().unwrap_or_default())?;
    let context = changes.context.clone().unwrap_or_default();
    if context.is_empty() {
        return Err(invalid("context can't be blank"));
    }
    // Serializes an account's creates, so the limit holds under concurrent requests.
    crate::accounts::lock(&mut *tx, account).await?;
    below_limit(
        tx,
        "SELECT count(*) FROM filters WHERE account_id = $1",
        account,
        MAX_FILTERS,
        ("an account", "filters"),
    )
    .await?;
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO filters (id, account_id, title, context, action) VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(account)
    .bind(&title)
    .bind(context_strings(&context))
    .bind(changes.action.unwrap_or(Action::Warn).as_str())
    .execute(&mut *tx)
    .await?;
    finish_change(tx, account, id, changes).await
}

/// Changes `account`'s filter `id`; `None` when it is none of theirs.
pub async fn update(
    tx: &mut PgConnection,
    account: Uuid,
    id: Uuid,
    changes: &Changes,
) -> Result<Option<Filter>, FilterError> {
    let found: Option<Uuid> =
        sqlx::query_scalar("SELECT id FROM filters WHERE account_id = $1 AND id = $2 FOR UPDATE")
            .bind(account)
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    if found.is_none() {
        return Ok(None);
    }
    let title = changes.title.as_deref().map(check_title).transpose()?;
    if changes.context.as_ref().is_some_and(Vec::is_empty) {
        return Err(invalid("context can't be blank"));
    }
    sqlx::query(
        "UPDATE filters SET title = coalesce($3, title), context = coalesce($4, context),
                action = coalesce($5, action)
          WHERE account_id = $1 AND id = $2",
    )
    .bind(account)
    .bind(id)
    .bind(title)
    .bind(changes.context.as_deref().map(context_strings))
    .bind(changes.action.map(Action::as_str))
    .execute(&mut *tx)
    .await?;
    finish_change(tx, account, id, changes).await.map(Some)
}

/// The end and keyword changes common to create and update, then the stored filter.
async fn finish_change(
    tx: &mut PgConnection,
    account: Uuid,
    id: Uuid,
    changes: &Changes,
) -> Result<Filter, FilterError> {
    if let Some(expires_in) = changes.expires_in {
        set_end(tx, id, expires_in).await?;
    }
    for k in &changes.keywords {
        match (k.id, k.destroy) {
            (Some(kid), true) => {
                sqlx::query("DELETE FROM filter_keywords WHERE filter_id = $1 AND id = $2")
                    .bind(id)
                    .bind(kid)
                    .execute(&mut *tx)
                    .await?;
            }
            (Some(kid), false) => {
                let keyword = k.keyword.as_deref().map(check_keyword).transpose()?;
                let changed = sqlx::query(
                    "UPDATE filter_keywords SET keyword = coalesce($3, keyword),
                            whole_word = coalesce($4, whole_word)
                      WHERE filter_id = $1 AND id = $2",
                )
                .bind(id)
                .bind(kid)
                .bind(keyword)
                .bind(k.whole_word)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if changed == 0 {
                    return Err(invalid(format!(
                        "keyword {kid} is not one of this filter's"
                    )));
                }
            }
            (None, true) => {}
            (None, false) => {
                let keyword = check_keyword(k.keyword.as_deref().unwrap_or_default())?;
                insert_keyword(tx, id, &keyword, k.whole_word.unwrap_or(true)).await?;
            }
        }
    }
    if changes.keywords.iter().any(|k| !k.destroy) {
        within_keyword_bytes(tx, account).await?;
    }
    crate::streaming::emit::filters(tx, account).await?;
    get(tx, account, id)
        .await?
        .ok_or_else(|| FilterError::Db(sqlx::Error::RowNotFound))
}

/// Sets filter `id`'s end (`None`: none) and, for an end, queues the task that announces it;
/// in the caller's transaction, so the end and its task are stored together or not at all.
async fn set_end(
    tx: &mut PgConnection,
    id: Uuid,
    expires_in: Option<Duration>,
) -> Result<(), sqlx::Error> {
    let expires_in = expires_in.map(|d| d.min(MAX_DURATION));
    sqlx::query("UPDATE filters SET expires_at = now() + make_interval(secs => $2) WHERE id = $1")
        .bind(id)
        .bind(expires_in.map(|d| d.as_secs_f64()))
        .execute(&mut *tx)
        .await?;
    if let Some(d) = expires_in {
        let data = serde_json::to_value(ExpiryPayload { filter_id: id }).unwrap_or_default();
        enqueue(
            &mut *tx,
            QueueName::Task,
            &NewMessage::new(EXPIRY_KIND, data)
                .delay(d.min(crate::queue::LONGEST_WAIT))
                .coalesce(expiry_key(id)),
        )
        .await?;
    }
    Ok(())
}

async fn insert_keyword(
    tx: &mut PgConnection,
    filter: Uuid,
    keyword: &str,
    whole_word: bool,
) -> Result<Keyword, FilterError> {
    below_limit(
        tx,
        "SELECT count(*) FROM filter_keywords WHERE filter_id = $1",
        filter,
        MAX_KEYWORDS,
        ("a filter", "keywords"),
    )
    .await?;
    Ok(sqlx::query_as(
        "INSERT INTO filter_keywords (id, filter_id, keyword, whole_word) VALUES ($1, $2, $3, $4)
         RETURNING id, filter_id, keyword, whole_word",
    )
    .bind(Uuid::now_v7())
    .bind(filter)
    .bind(keyword)
    .bind(whole_word)
    .fetch_one(&mut *tx)
    .await?)
}

/// Whether a delete of `account`'s removed anything; if it did, the account's streams hear
/// that its filters changed.
async fn removed(
    tx: &mut PgConnection,
    account: Uuid,
    done: sqlx::postgres::PgQueryResult,
) -> Result<bool, sqlx::Error> {
    let gone = done.rows_affected() > 0;
    if gone {
        crate::streaming::emit::filters(tx, account).await?;
    }
    Ok(gone)
}

/// Removes `account`'s filter `id` with its rules; `false` when it is none of theirs.
pub async fn delete(tx: &mut PgConnection, account: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query("DELETE FROM filters WHERE account_id = $1 AND id = $2")
        .bind(account)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    removed(tx, account, done).await
}

/// Adds a keyword to `account`'s filter `filter`; `None` when the filter is none of theirs.
pub async fn add_keyword(
    tx: &mut PgConnection,
    account: Uuid,
    filter: Uuid,
    keyword: &str,
    whole_word: bool,
) -> Result<Option<Keyword>, FilterError> {
    if !owns_locked(tx, account, filter).await? {
        return Ok(None);
    }
    let k = insert_keyword(tx, filter, &check_keyword(keyword)?, whole_word).await?;
    within_keyword_bytes(tx, account).await?;
    crate::streaming::emit::filters(tx, account).await?;
    Ok(Some(k))
}

/// Whether `filter` is `account`'s, locking it so rule counts hold under concurrent changes.
async fn owns_locked(
    tx: &mut PgConnection,
    account: Uuid,
    filter: Uuid,
) -> Result<bool, sqlx::Error> {
    Ok(sqlx::query_scalar::<_, Uuid>(
        "SELECT id FROM filters WHERE account_id = $1 AND id = $2 FOR UPDATE",
    )
    .bind(account)
    .bind(filter)
    .fetch_optional(&mut *tx)
    .await?
    .is_some())
}

/// Changes `account`'s keyword `id`; `None` when it is none of theirs.
pub async fn update_keyword(
    tx: &mut PgConnection,
    account: Uuid,
    id: Uuid,
    keyword: Option<&str>,
    whole_word: Option<bool>,
) -> Result<Option<Keyword>, FilterError> {
    let keyword = keyword.map(check_keyword).transpose()?;
    let k: Option<Keyword> = sqlx::query_as(
        "UPDATE filter_keywords k SET keyword = coalesce($3, k.keyword),
                whole_word = coalesce($4, k.whole_word)
           FROM filters f
          WHERE f.id = k.filter_id AND f.account_id = $1 AND k.id = $2
         RETURNING k.id, k.filter_id, k.keyword, k.whole_word",
    )
    .bind(account)
    .bind(id)
    .bind(keyword)
    .bind(whole_word)
    .fetch_optional(&mut *tx)
    .await?;
    if k.is_some() {
        within_keyword_bytes(tx, account).await?;
        crate::streaming::emit::filters(tx, account).await?;
    }
    Ok(k)
}

/// Adds status `status` to `account`'s filter `filter` (already there: the existing rule);
/// `None` when the filter is none of theirs. The caller checks the account may see the status.
pub async fn add_status(
    tx: &mut PgConnection,
    account: Uuid,
    filter: Uuid,
    status: Uuid,
) -> Result<Option<StatusRule>, FilterError> {
    if !owns_locked(tx, account, filter).await? {
        return Ok(None);
    }
    let existing: Option<StatusRule> = sqlx::query_as(
        "SELECT id, filter_id, status_id FROM filter_statuses
          WHERE filter_id = $1 AND status_id = $2",
    )
    .bind(filter)
    .bind(status)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = existing {
        return Ok(Some(r));
    }
    below_limit(
        tx,
        "SELECT count(*) FROM filter_statuses WHERE filter_id = $1",
        filter,
        MAX_STATUSES,
        ("a filter", "statuses"),
    )
    .await?;
    let r = sqlx::query_as(
        "INSERT INTO filter_statuses (id, filter_id, status_id) VALUES ($1, $2, $3)
         RETURNING id, filter_id, status_id",
    )
    .bind(Uuid::now_v7())
    .bind(filter)
    .bind(status)
    .fetch_one(&mut *tx)
    .await?;
    crate::streaming::emit::filters(tx, account).await?;
    Ok(Some(r))
}

/// A filter's rule: one of its keywords or one of its statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    Keyword,
    Status,
}

impl Rule {
    fn table(self) -> &'static str {
        match self {
            Rule::Keyword => "filter_keywords",
            Rule::Status => "filter_statuses",
        }
    }

    /// The columns of its row ([`RuleRow`]), of the table as `r`.
    fn columns(self) -> &'static str {
        match self {
            Rule::Keyword => "r.id, r.filter_id, r.keyword, r.whole_word",
            Rule::Status => "r.id, r.filter_id, r.status_id",
        }
    }
}

/// The row of a rule of one kind: a [`Keyword`] or a [`StatusRule`].
pub trait RuleRow: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin {
    const RULE: Rule;
}

impl RuleRow for Keyword {
    const RULE: Rule = Rule::Keyword;
}

impl RuleRow for StatusRule {
    const RULE: Rule = Rule::Status;
}

/// `account`'s rule `id` of that kind (of any of their filters).
pub async fn rule<R: RuleRow>(
    conn: &mut PgConnection,
    account: Uuid,
    id: Uuid,
) -> Result<Option<R>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM {} r JOIN filters f ON f.id = r.filter_id
          WHERE f.account_id = $1 AND r.id = $2",
        R::RULE.columns(),
        R::RULE.table()
    )))
    .bind(account)
    .bind(id)
    .fetch_optional(conn)
    .await
}

/// Removes `account`'s rule `id` of that kind; `false` when it is none of theirs.
pub async fn delete_rule(
    tx: &mut PgConnection,
    account: Uuid,
    rule: Rule,
    id: Uuid,
) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(sqlx::AssertSqlSafe(format!(
        "DELETE FROM {} r USING filters f
          WHERE f.id = r.filter_id AND f.account_id = $1 AND r.id = $2",
        rule.table()
    )))
    .bind(account)
    .bind(id)
    .execute(&mut *tx)
    .await?;
    removed(tx, account, done).await
}
