//! Featured hashtags (R-MAPI-6): up to [`MAX_FEATURED`] tags an account shows on its
//! profile, each with how often the account used it publicly; served to apps
//! (`/api/v1/featured_tags`) and to peers (the actor's `featuredTags` collection).

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// Mastodon's limit (`configuration.accounts.max_featured_tags`).
pub const MAX_FEATURED: i64 = 10;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Featured {
    pub id: Uuid,
    pub name: String,
    /// The account's public and unlisted statuses with the tag.
    pub statuses_count: i64,
    pub last_status_at: Option<DateTime<Utc>>,
}

#[derive(Debug, thiserror::Error)]
pub enum FeaturedError {
    /// Not a tag name, featured already, or past the limit: 422.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

const SELECT: &str = "SELECT f.id, f.name,
        (SELECT count(*) FROM statuses s WHERE s.account_id = f.account_id
            AND f.name = ANY(s.tags) AND s.visibility IN ('public', 'unlisted')) AS statuses_count,
        (SELECT max(s.created_at) FROM statuses s WHERE s.account_id = f.account_id
            AND f.name = ANY(s.tags) AND s.visibility IN ('public', 'unlisted')) AS last_status_at
   FROM featured_tags f";

/// `account`'s featured tags, in the order featured.
pub async fn of(conn: &mut PgConnection, account: Uuid) -> Result<Vec<Featured>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "{SELECT} WHERE f.account_id = $1 ORDER BY f.created_at, f.id"
    )))
    .bind(account)
    .fetch_all(conn)
    .await
}

/// `account` features the tag `raw` (`#` optional).
pub async fn add(
    tx: &mut PgConnection,
    account: Uuid,
    raw: &str,
) -> Result<Featured, FeaturedError> {
    let name = super::normalize(raw).ok_or_else(|| {
        FeaturedError::Refused(format!("Validation failed: {raw:?} is not a hashtag"))
    })?;
    crate::accounts::lock(&mut *tx, account).await?;
    let (exists, count): (bool, i64) = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM featured_tags WHERE account_id = $1 AND name = $2),
                (SELECT count(*) FROM featured_tags WHERE account_id = $1)",
    )
    .bind(account)
    .bind(&name)
    .fetch_one(&mut *tx)
    .await?;
    if exists {
        return Err(FeaturedError::Refused(
            "Validation failed: the tag is featured already".into(),
        ));
    }
    if count >= MAX_FEATURED {
        return Err(FeaturedError::Refused(format!(
            "Validation failed: you may feature at most {MAX_FEATURED} hashtags"
        )));
    }
    let id = Uuid::now_v7();
    sqlx::query("INSERT INTO featured_tags (id, account_id, name) VALUES ($1, $2, $3)")
        .bind(id)
        .bind(account)
        .bind(&name)
        .execute(&mut *tx)
        .await?;
    let f: Featured = sqlx::query_as(sqlx::AssertSqlSafe(format!("{SELECT} WHERE f.id = $1")))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
    Ok(f)
}

/// `account` stops featuring `id`; `false` when it is none of theirs.
pub async fn remove(tx: &mut PgConnection, account: Uuid, id: Uuid) -> Result<bool, sqlx::Error> {
    Ok(
        sqlx::query("DELETE FROM featured_tags WHERE account_id = $1 AND id = $2")
            .bind(account)
            .bind(id)
            .execute(tx)
            .await?
            .rows_affected()
            > 0,
    )
}

/// The tags `account` used most in its latest 200 statuses and does not feature yet.
pub async fn suggestions(
    conn: &mut PgConnection,
    account: Uuid,
) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT t FROM (SELECT s.tags FROM statuses s WHERE s.account_id = $1
                         ORDER BY s.id DESC LIMIT 200) recent, unnest(recent.tags) t
          WHERE NOT EXISTS (SELECT 1 FROM featured_tags f WHERE f.account_id = $1 AND f.name = t)
          GROUP BY t ORDER BY count(*) DESC, t LIMIT 10",
    )
    .bind(account)
    .fetch_all(conn)
    .await
}
