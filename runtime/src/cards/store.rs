//! Cards in the database: one row per URL (`preview_cards`), which post shows which
//! (`post_preview_cards`), and when a URL is asked again.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;
use uuid::Uuid;

/// A card kept this long is shown without asking the page again (Mastodon refreshes as
/// rarely); a page that gave no card is asked again after [`FAILURE_TTL`].
pub const CARD_TTL_DAYS: i32 = 14;
pub const FAILURE_TTL_HOURS: i32 = 24;

/// The preview image as stored by this server.
#[derive(Debug, Clone)]
pub struct StoredImage {
    pub key: String,
    pub width: i32,
    pub height: i32,
    pub blurhash: String,
}

/// A card as fetched, ready to store.
#[derive(Debug, Clone, Default)]
pub struct NewCard {
    pub url: String,
    pub kind: String,
    pub title: String,
    pub description: String,
    pub author_name: String,
    pub author_url: String,
    pub provider_name: String,
    pub provider_url: String,
    pub html: String,
    pub width: i32,
    pub height: i32,
    pub image: Option<StoredImage>,
    pub image_description: String,
    pub language: Option<String>,
    pub published_at: Option<DateTime<Utc>>,
}

/// What is known of a URL now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Known {
    /// A card younger than [`CARD_TTL_DAYS`].
    Fresh(Uuid),
    /// A failure younger than [`FAILURE_TTL_HOURS`].
    Failed,
    /// Nothing, or too old: fetch.
    Stale,
}

pub async fn known(conn: &mut PgConnection, url: &str) -> Result<Known, sqlx::Error> {
    let row: Option<(Uuid, bool, bool)> = sqlx::query_as(
        "SELECT id,
                coalesce(failed_at IS NULL AND fetched_at > now() - make_interval(days => $2), false),
                coalesce(failed_at > now() - make_interval(hours => $3), false)
           FROM preview_cards WHERE url = $1",
    )
    .bind(url)
    .bind(CARD_TTL_DAYS)
    .bind(FAILURE_TTL_HOURS)
    .fetch_optional(conn)
    .await?;
    Ok(match row {
        Some((id, true, _)) => Known::Fresh(id),
        Some((_, _, true)) => Known::Failed,
        _ => Known::Stale,
    })
}

/// Stores `card` (replacing what its URL had) and returns its id and the image key it
/// replaced, which the caller no longer needs. The new image is registered as a live file.
pub async fn save(
    tx: &mut PgConnection,
    card: &NewCard,
) -> Result<(Uuid, Option<String>), sqlx::Error> {
    let old: Option<Option<String>> =
        sqlx::query_scalar("SELECT image_key FROM preview_cards WHERE url = $1 FOR UPDATE")
            .bind(&card.url)
            .fetch_optional(&mut *tx)
            .await?;
    let image = card.image.as_ref();
    if let Some(i) = image {
        sqlx::query("INSERT INTO media_files (key) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(&i.key)
            .execute(&mut *tx)
            .await?;
    }
    let id: Uuid = sqlx::query_scalar(
        "INSERT INTO preview_cards AS c
                (id, url, kind, title, description, author_name, author_url, provider_name,
                 provider_url, html, width, height, image_key, image_width, image_height,
                 image_description, blurhash, language, published_at, fetched_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18,
                 $19, now())
         ON CONFLICT (url) DO UPDATE SET
                kind = EXCLUDED.kind, title = EXCLUDED.title, description = EXCLUDED.description,
                author_name = EXCLUDED.author_name, author_url = EXCLUDED.author_url,
                provider_name = EXCLUDED.provider_name, provider_url = EXCLUDED.provider_url,
                html = EXCLUDED.html, width = EXCLUDED.width, height = EXCLUDED.height,
                image_key = EXCLUDED.image_key, image_width = EXCLUDED.image_width,
                image_height = EXCLUDED.image_height,
                image_description = EXCLUDED.image_description, blurhash = EXCLUDED.blurhash,
                language = EXCLUDED.language, published_at = EXCLUDED.published_at,
                fetched_at = now(), failed_at = NULL, error = NULL
         RETURNING c.id",
    )
    .bind(Uuid::now_v7())
    .bind(&card.url)
    .bind(&card.kind)
    .bind(&card.title)
    .bind(&card.description)
    .bind(&card.author_name)
    .bind(&card.author_url)
    .bind(&card.provider_name)
    .bind(&card.provider_url)
    .bind(&card.html)
    .bind(card.width)
    .bind(card.height)
    .bind(image.map(|i| i.key.as_str()))
    .bind(image.map(|i| i.width))
    .bind(image.map(|i| i.height))
    .bind(&card.image_description)
    .bind(image.map(|i| i.blurhash.as_str()))
    .bind(card.language.as_deref())
    .bind(card.published_at)
    .fetch_one(&mut *tx)
    .await?;
    let replaced = old
        .flatten()
        .filter(|k| Some(k.as_str()) != image.map(|i| i.key.as_str()));
    if let Some(k) = &replaced {
        // Its file becomes an orphan; the media cleanup deletes it.
        sqlx::query("DELETE FROM media_files WHERE key = $1")
            .bind(k)
            .execute(&mut *tx)
            .await?;
    }
    Ok((id, replaced))
}

/// Records that `url` gave no card (posts already showing its earlier card keep it).
pub async fn failed(conn: &mut PgConnection, url: &str, error: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO preview_cards (id, url, failed_at, error) VALUES ($1, $2, now(), $3)
         ON CONFLICT (url) DO UPDATE SET failed_at = now(), error = EXCLUDED.error",
    )
    .bind(Uuid::now_v7())
    .bind(url)
    .bind(crate::cards::page::cap(error, 500))
    .execute(conn)
    .await?;
    Ok(())
}

/// Makes `post` show `card` (or no card); whether that changed what it showed.
pub async fn show(
    tx: &mut PgConnection,
    post: Uuid,
    card: Option<Uuid>,
) -> Result<bool, sqlx::Error> {
    let changed = match card {
        Some(card) => sqlx::query(
            "INSERT INTO post_preview_cards (post_id, card_id) VALUES ($1, $2)
             ON CONFLICT (post_id) DO UPDATE SET card_id = EXCLUDED.card_id
             WHERE post_preview_cards.card_id <> EXCLUDED.card_id",
        )
        .bind(post)
        .bind(card)
        .execute(&mut *tx)
        .await?
        .rows_affected(),
        None => sqlx::query("DELETE FROM post_preview_cards WHERE post_id = $1")
            .bind(post)
            .execute(&mut *tx)
            .await?
            .rows_affected(),
    };
    Ok(changed > 0)
}
