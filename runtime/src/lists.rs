//! Lists (R-MAPI-6): an account's named sets of followed accounts, each with a timeline
//! of its own. Members are named by actor IRI (as the CSV import stores them) and must be
//! followed, as on Mastodon; their posts and boosts reach the list when they reach the owner's
//! home (`statuses::feed::push` writes `list_feed`), and a member added now brings along what
//! the owner's home already holds of theirs. Titles are unique per account: the CSV import
//! merges a list by its title, so two lists of one title could not be told apart there.

use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

/// Most lists an account may have (Mastodon's `List::PER_ACCOUNT_LIMIT`).
pub const MAX_LISTS: i64 = 50;
/// Longest title, in characters.
pub const MAX_TITLE: usize = 256;

/// Which replies reach a list (Mastodon's `replies_policy`): replies to any followed account,
/// to members of the list, or none. A reply to the list's owner always does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RepliesPolicy {
    Followed,
    #[default]
    List,
    None,
}

impl RepliesPolicy {
    pub fn parse(s: &str) -> Option<RepliesPolicy> {
        Some(match s {
            "followed" => RepliesPolicy::Followed,
            "list" => RepliesPolicy::List,
            "none" => RepliesPolicy::None,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            RepliesPolicy::Followed => "followed",
            RepliesPolicy::List => "list",
            RepliesPolicy::None => "none",
        }
    }
}

/// A stored list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct List {
    pub id: Uuid,
    pub title: String,
    pub replies_policy: RepliesPolicy,
    pub exclusive: bool,
}

type Row = (Uuid, String, String, bool);

fn of_row((id, title, policy, exclusive): Row) -> List {
    List {
        id,
        title,
        replies_policy: RepliesPolicy::parse(&policy).unwrap_or_default(),
        exclusive,
    }
}

const COLUMNS: &str = "l.id, l.title, l.replies_policy, l.exclusive";

/// What a create or an update sets; `None` keeps the stored value (a new list: Mastodon's
/// defaults, `list` and not exclusive).
#[derive(Clone, Debug, Default)]
pub struct Changes {
    pub title: Option<String>,
    pub replies_policy: Option<RepliesPolicy>,
    pub exclusive: Option<bool>,
}

#[derive(Debug, thiserror::Error)]
pub enum ListError {
    /// The request is well-formed but the rules refuse it (Mastodon's 422), with its message.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

fn invalid(m: &str) -> ListError {
    ListError::Invalid(format!("Validation failed: {m}"))
}

/// A title as stored: trimmed, not blank, at most [`MAX_TITLE`] characters.
fn title(raw: &str) -> Result<String, ListError> {
    let t = raw.trim();
    if t.is_empty() {
        return Err(invalid("Title can't be blank"));
    }
    if t.chars().count() > MAX_TITLE {
        return Err(invalid(&format!(
            "Title is too long (maximum is {MAX_TITLE} characters)"
        )));
    }
    Ok(t.to_string())
}

/// A unique-title conflict as the client's 422.
fn taken(e: sqlx::Error) -> ListError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => {
            invalid("Title has already been taken")
        }
        _ => ListError::Db(e),
    }
}

/// Whether `list` exists and is `account`'s.
pub async fn owned_by(pool: &PgPool, list: Uuid, account: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM lists WHERE id = $1 AND account_id = $2)")
        .bind(list)
        .bind(account)
        .fetch_one(pool)
        .await
}

/// `account`'s lists, oldest first (Mastodon lists them in creation order).
pub async fn all(conn: &mut PgConnection, account: Uuid) -> Result<Vec<List>, sqlx::Error> {
    let sql = format!("SELECT {COLUMNS} FROM lists l WHERE l.account_id = $1 ORDER BY l.id");
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(of_row).collect())
}

/// One of `account`'s lists; `None` for another account's or none.
pub async fn get(
    conn: &mut PgConnection,
    account: Uuid,
    id: Uuid,
) -> Result<Option<List>, sqlx::Error> {
    let sql = format!("SELECT {COLUMNS} FROM lists l WHERE l.id = $1 AND l.account_id = $2");
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(account)
        .fetch_optional(conn)
        .await?;
    Ok(row.map(of_row))
}

/// `account`'s lists that hold the actor `iri`.
pub async fn containing(
    conn: &mut PgConnection,
    account: Uuid,
    iri: &str,
) -> Result<Vec<List>, sqlx::Error> {
    let sql = format!(
        "SELECT {COLUMNS} FROM lists l JOIN list_members m ON m.list_id = l.id
          WHERE l.account_id = $1 AND m.target_iri = $2 ORDER BY l.id"
    );
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(account)
        .bind(iri)
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(of_row).collect())
}

/// A new list; the account's lists are locked while counting, so two creations at once
/// cannot both pass the limit.
pub async fn create(tx: &mut PgConnection, account: Uuid, c: &Changes) -> Result<List, ListError> {
    let title = title(c.title.as_deref().unwrap_or_default())?;
    crate::accounts::lock(&mut *tx, account).await?;
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM lists WHERE account_id = $1")
        .bind(account)
        .fetch_one(&mut *tx)
        .await?;
    if count >= MAX_LISTS {
        return Err(invalid(&format!(
            "You cannot have more than {MAX_LISTS} lists"
        )));
    }
    let list = List {
        id: Uuid::now_v7(),
        title,
        replies_policy: c.replies_policy.unwrap_or_default(),
        exclusive: c.exclusive.unwrap_or(false),
    };
    sqlx::query(
        "INSERT INTO lists (id, account_id, title, replies_policy, exclusive)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(list.id)
    .bind(account)
    .bind(&list.title)
    .bind(list.replies_policy.as_str())
    .bind(list.exclusive)
    .execute(&mut *tx)
    .await
    .map_err(taken)?;
    Ok(list)
}

/// Changes one of `account`'s lists; `None` when it has no such list.
pub async fn update(
    conn: &mut PgConnection,
    account: Uuid,
    id: Uuid,
    c: &Changes,
) -> Result<Option<List>, ListError> {
    let title = c.title.as_deref().map(title).transpose()?;
    let sql = format!(
        "UPDATE lists l SET title = coalesce($3, l.title),
                replies_policy = coalesce($4, l.replies_policy),
                exclusive = coalesce($5, l.exclusive)
          WHERE l.id = $1 AND l.account_id = $2 RETURNING {COLUMNS}"
    );
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(account)
        .bind(title)
        .bind(c.replies_policy.map(RepliesPolicy::as_str))
        .bind(c.exclusive)
        .fetch_optional(conn)
        .await
        .map_err(taken)?;
    Ok(row.map(of_row))
}

/// Deletes one of `account`'s lists (its members and timeline go with it).
pub async fn delete(conn: &mut PgConnection, account: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query("DELETE FROM lists WHERE id = $1 AND account_id = $2")
            .bind(id)
            .bind(account)
            .execute(conn)
            .await?
            .rows_affected()
            == 1,
    )
}

/// Adds the actors `iris` to the list `list` of `account` (the caller checked it is theirs).
/// Each must be followed by the account and not a member yet (Mastodon's 422s); then what the
/// owner's home holds of theirs enters the list's timeline, so the list is not empty until
/// they next post.
pub async fn add_members(
    tx: &mut PgConnection,
    account: Uuid,
    list: Uuid,
    iris: &[String],
) -> Result<(), ListError> {
    for iri in iris {
        let (followed, member): (bool, bool) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM follows WHERE account_id = $1 AND target_iri = $3
                             AND state = 'accepted'),
                    EXISTS (SELECT 1 FROM list_members WHERE list_id = $2 AND target_iri = $3)",
        )
        .bind(account)
        .bind(list)
        .bind(iri)
        .fetch_one(&mut *tx)
        .await?;
        if member {
            return Err(invalid("Account has already been taken"));
        }
        if !followed {
            return Err(invalid(
                "You must follow an account before adding it to a list",
            ));
        }
        sqlx::query("INSERT INTO list_members (list_id, target_iri) VALUES ($1, $2)")
            .bind(list)
            .bind(iri)
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO list_feed (list_id, entry_id, post_id, source, created_at)
             SELECT $1, h.entry_id, h.post_id, h.source, h.created_at
               FROM home_feed h WHERE h.account_id = $2 AND h.source = $3
             ON CONFLICT DO NOTHING",
        )
        .bind(list)
        .bind(account)
        .bind(iri)
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// Removes the actors `iris` from the list `list`, and their entries from its timeline.
pub async fn remove_members(
    tx: &mut PgConnection,
    list: Uuid,
    iris: &[String],
) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM list_members WHERE list_id = $1 AND target_iri = ANY($2)")
        .bind(list)
        .bind(iris)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM list_feed WHERE list_id = $1 AND source = ANY($2)")
        .bind(list)
        .bind(iris)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

/// `account` no longer follows the actor `iri` (an unfollow, a block): it leaves every list
/// of the account, as on Mastodon.
pub async fn forget(tx: &mut PgConnection, account: Uuid, iri: &str) -> Result<(), sqlx::Error> {
    let lists: Vec<Uuid> = sqlx::query_scalar(
        "SELECT l.id FROM lists l JOIN list_members m ON m.list_id = l.id
          WHERE l.account_id = $1 AND m.target_iri = $2",
    )
    .bind(account)
    .bind(iri)
    .fetch_all(&mut *tx)
    .await?;
    let who = [iri.to_string()];
    for list in lists {
        remove_members(tx, list, &who).await?;
    }
    Ok(())
}

/// The members of `list` (newest first, paged by membership id): `(id, actor IRI)` rows.
pub const MEMBERS_SELECT: &str = "SELECT id, target_iri FROM list_members WHERE list_id = $1 AND";
