//! Mastodon's `PreviewCard` entity: a post's link preview (`cards`), its image served from
//! this server's drive. Every text field is plain text as the page stated it (clients escape
//! it); `html` is empty or one https iframe.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::media::Drive;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PreviewCard {
    pub url: String,
    pub title: String,
    pub description: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub author_name: String,
    pub author_url: String,
    /// Mastodon 4.3's list of authors (the one the page names; no account is linked).
    pub authors: Vec<CardAuthor>,
    pub provider_name: String,
    pub provider_url: String,
    pub html: String,
    pub width: i32,
    pub height: i32,
    pub image: Option<String>,
    pub image_description: String,
    pub embed_url: String,
    pub blurhash: Option<String>,
    pub language: Option<String>,
    pub published_at: Option<DateTime<Utc>>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CardAuthor {
    pub name: String,
    pub url: String,
    pub account: Option<serde_json::Value>,
}

#[derive(sqlx::FromRow)]
struct Row {
    /// The post the card is of, or the card's own id: what the caller keys the cards by.
    key: Uuid,
    url: String,
    kind: String,
    title: String,
    description: String,
    author_name: String,
    author_url: String,
    provider_name: String,
    provider_url: String,
    html: String,
    width: i32,
    height: i32,
    image_key: Option<String>,
    image_width: Option<i32>,
    image_height: Option<i32>,
    image_description: String,
    blurhash: Option<String>,
    language: Option<String>,
    published_at: Option<DateTime<Utc>>,
}

/// A card's columns as the entity shows them (after the key `Row` is read by).
const COLUMNS: &str = "c.url, c.kind, c.title, c.description, c.author_name, c.author_url,
    c.provider_name, c.provider_url, c.html, c.width, c.height, c.image_key, c.image_width,
    c.image_height, c.image_description, c.blurhash, c.language, c.published_at";

/// The cards of `posts` (those that have one), in one query.
pub async fn of_posts(
    conn: &mut PgConnection,
    drive: &Drive,
    posts: &[Uuid],
) -> Result<HashMap<Uuid, PreviewCard>, sqlx::Error> {
    let from = "post_preview_cards l JOIN preview_cards c ON c.id = l.card_id";
    load(conn, drive, "l.post_id", from, posts).await
}

/// Cards by their own ids (those fetched), in one query.
pub async fn by_ids(
    conn: &mut PgConnection,
    drive: &Drive,
    cards: &[Uuid],
) -> Result<HashMap<Uuid, PreviewCard>, sqlx::Error> {
    load(conn, drive, "c.id", "preview_cards c", cards).await
}

/// The fetched cards (`c` in `from`) whose `key` is one of `keys`, keyed by it.
async fn load(
    conn: &mut PgConnection,
    drive: &Drive,
    key: &str,
    from: &str,
    keys: &[Uuid],
) -> Result<HashMap<Uuid, PreviewCard>, sqlx::Error> {
    if keys.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {key} AS key, {COLUMNS} FROM {from}
          WHERE {key} = ANY($1) AND c.fetched_at IS NOT NULL"
    )))
    .bind(keys)
    .fetch_all(conn)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.key, entity(drive, r)))
        .collect())
}

fn entity(drive: &Drive, r: Row) -> PreviewCard {
    let image = r.image_key.as_deref().map(|k| drive.url(k));
    // Without a player, the size is the image's (what clients lay the card out by).
    let (width, height) = if r.html.is_empty() {
        (r.image_width.unwrap_or(0), r.image_height.unwrap_or(0))
    } else {
        (r.width, r.height)
    };
    let authors = if r.author_name.is_empty() {
        vec![]
    } else {
        vec![CardAuthor {
            name: r.author_name.clone(),
            url: r.author_url.clone(),
            account: None,
        }]
    };
    PreviewCard {
        url: r.url,
        title: r.title,
        description: r.description,
        kind: r.kind,
        author_name: r.author_name,
        author_url: r.author_url,
        authors,
        provider_name: r.provider_name,
        provider_url: r.provider_url,
        html: r.html,
        width,
        height,
        image,
        image_description: r.image_description,
        embed_url: String::new(),
        blurhash: r.blurhash,
        language: r.language,
        published_at: r.published_at,
    }
}

/// Mastodon's `Trends::Link`: a card people are sharing, with its week of use (`history`,
/// as a Tag's).
#[derive(Clone, Debug, Serialize)]
pub struct TrendsLink {
    #[serde(flatten)]
    pub card: PreviewCard,
    pub history: Vec<super::tag::History>,
}
