//! The instance's custom emojis (R-MAPI-6): the admin adds one from an image (checked as
//! every upload is, by its bytes, at most [`MAX_BYTES`], stored on the media drive as is so an
//! animated GIF stays animated), apps list them (`/api/v1/custom_emojis`), and a post of ours
//! whose text uses `:shortcode:` carries it — in `emojis` of its Status entity and as an
//! `Emoji` tag of its `Note`, as Mastodon's do.

use std::collections::HashSet;

use sqlx::PgConnection;
use uuid::Uuid;

use crate::config::MediaConfig;
use crate::mastodon::CustomEmoji;
use crate::media::processing;
use crate::media::storage::{Drive, DriveError};

/// Mastodon's limit for a custom emoji's image.
pub const MAX_BYTES: usize = 256 * 1024;

#[derive(Clone, Debug, PartialEq, Eq, sqlx::FromRow)]
pub struct Emoji {
    pub id: Uuid,
    pub shortcode: String,
    pub file_key: String,
    pub url: String,
    pub media_type: String,
    pub category: Option<String>,
    pub visible_in_picker: bool,
}

impl Emoji {
    /// Mastodon's entity.
    pub fn entity(&self) -> CustomEmoji {
        CustomEmoji {
            shortcode: self.shortcode.clone(),
            url: self.url.clone(),
            static_url: self.url.clone(),
            visible_in_picker: self.visible_in_picker,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EmojiError {
    /// A shortcode or image the rules refuse: 422.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Drive(#[from] DriveError),
    #[error(transparent)]
    Db(#[from] sqlx::Error),
}

/// Whether `code` is a shortcode Mastodon would make.
pub fn valid_shortcode(code: &str) -> bool {
    (2..=64).contains(&code.len()) && code.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The `:shortcode:`s a text uses, each once.
pub fn shortcodes_in(text: &str) -> Vec<String> {
    let pieces: Vec<&str> = text.split(':').collect();
    let mut out: Vec<String> = Vec::new();
    // The pieces with a colon on each side (not the first nor the last) are the candidates.
    for piece in pieces.iter().skip(1).take(pieces.len().saturating_sub(2)) {
        if valid_shortcode(piece) && !out.iter().any(|c| c == piece) {
            out.push(piece.to_string());
        }
    }
    out
}

const COLUMNS: &str = "id, shortcode, file_key, url, media_type, category, visible_in_picker";

/// Every custom emoji, by shortcode.
pub async fn all(conn: &mut PgConnection) -> Result<Vec<Emoji>, sqlx::Error> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM custom_emojis ORDER BY lower(shortcode)"
    )))
    .fetch_all(conn)
    .await
}

/// The custom emojis `texts` use (`:shortcode:`, case as stored).
pub async fn used_in(conn: &mut PgConnection, texts: &[&str]) -> Result<Vec<Emoji>, sqlx::Error> {
    let mut codes: Vec<String> = Vec::new();
    for t in texts {
        codes.extend(shortcodes_in(t));
    }
    if codes.is_empty() {
        return Ok(Vec::new());
    }
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM custom_emojis WHERE shortcode = ANY($1) ORDER BY shortcode"
    )))
    .bind(&codes)
    .fetch_all(conn)
    .await
}

/// The emojis of many texts at once: for each text, the entities of the emojis it uses (one
/// query for the page).
pub async fn entities_for(
    conn: &mut PgConnection,
    texts: &[&str],
) -> Result<Vec<Vec<CustomEmoji>>, sqlx::Error> {
    let known = used_in(conn, texts).await?;
    Ok(texts
        .iter()
        .map(|t| {
            let used: HashSet<String> = shortcodes_in(t).into_iter().collect();
            known
                .iter()
                .filter(|e| used.contains(&e.shortcode))
                .map(Emoji::entity)
                .collect()
        })
        .collect())
}

/// Adds `shortcode` with the image `bytes`: checked by its bytes (a JPEG, PNG, GIF or WebP of
/// at most [`MAX_BYTES`] and `MEDIA_MAX_PIXELS`), stored on the drive unchanged, registered so
/// the media cleanup keeps it. A shortcode taken (in any case) is refused.
pub async fn add(
    tx: &mut PgConnection,
    drive: &Drive,
    cfg: &MediaConfig,
    shortcode: &str,
    bytes: Vec<u8>,
    category: Option<&str>,
) -> Result<Emoji, EmojiError> {
    if !valid_shortcode(shortcode) {
        return Err(EmojiError::Invalid(format!(
            "shortcode must be 2 to 64 letters, digits or underscores (got {shortcode:?})"
        )));
    }
    let probe = processing::probe(&bytes, MAX_BYTES.min(cfg.max_bytes), cfg.max_pixels)
        .map_err(|e| EmojiError::Invalid(e.to_string()))?;
    let taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM custom_emojis WHERE lower(shortcode) = lower($1))",
    )
    .bind(shortcode)
    .fetch_one(&mut *tx)
    .await?;
    if taken {
        return Err(EmojiError::Invalid(format!(
            "the shortcode {shortcode} is taken"
        )));
    }
    if !drive.is_enabled() {
        return Err(DriveError::Disabled.into());
    }
    let id = Uuid::now_v7();
    // The drive's key shape (`media/<uuid>/<name>.<ext>`), which the media cleanup knows.
    let key = format!("media/{id}/emoji.{}", probe.format.ext());
    let mime = probe.format.mime();
    drive.put(&key, bytes, mime).await?;
    let category = category.map(str::trim).filter(|c| !c.is_empty());
    let inserted = async {
        sqlx::query("INSERT INTO media_files (key) VALUES ($1) ON CONFLICT DO NOTHING")
            .bind(&key)
            .execute(&mut *tx)
            .await?;
        sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO custom_emojis (id, shortcode, file_key, url, media_type, category)
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING {COLUMNS}"
        )))
        .bind(id)
        .bind(shortcode)
        .bind(&key)
        .bind(drive.url(&key))
        .bind(mime)
        .bind(category)
        .fetch_one(&mut *tx)
        .await
    }
    .await;
    match inserted {
        Ok(e) => Ok(e),
        Err(e) => {
            // The row did not get written: the file is nobody's.
            crate::media::upload::forget(drive, &[key]).await;
            Err(e.into())
        }
    }
}

/// Removes emoji `id`; its file key, for the caller to delete once committed.
pub async fn delete(tx: &mut PgConnection, id: Uuid) -> Result<Option<String>, sqlx::Error> {
    let key: Option<String> =
        sqlx::query_scalar("DELETE FROM custom_emojis WHERE id = $1 RETURNING file_key")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
    if let Some(k) = &key {
        sqlx::query("DELETE FROM media_files WHERE key = $1")
            .bind(k)
            .execute(&mut *tx)
            .await?;
    }
    Ok(key)
}

/// A reaction's emoji as checked: Unicode, or one of this server's custom emojis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reaction {
    Unicode(String),
    Custom(Emoji),
}

impl Reaction {
    /// The name stored and shown: the emoji itself, or `:shortcode:`.
    pub fn name(&self) -> String {
        match self {
            Reaction::Unicode(e) => e.clone(),
            Reaction::Custom(e) => format!(":{}:", e.shortcode),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortcodes_are_found_between_colons() {
        assert_eq!(
            shortcodes_in("hi :blobcat: and :blobcat: :x: :ok_2:"),
            ["blobcat", "ok_2"]
        );
        // Only candidates: a code is an emoji when the instance has it (`used_in`).
        assert_eq!(shortcodes_in("at 10:30:00"), ["30"]);
        assert!(shortcodes_in("no colons").is_empty());
        assert!(shortcodes_in(":has space:").is_empty());
    }
}
