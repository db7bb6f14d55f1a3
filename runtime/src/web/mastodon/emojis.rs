//! Custom emojis in the client API (R-MAPI-6): `GET /api/v1/custom_emojis` (anyone),
//! and their administration behind `ADMIN_TOKEN`, as GoToSocial's admin API shapes it:
//! `GET`, `POST /api/v1/admin/custom_emojis` (multipart `shortcode` with `image`, or with
//! `copy_from` — the id of a remote status one of whose `Emoji` tags has that shortcode, whose
//! image is fetched through the fetch guard —, and `category`) and
//! `DELETE /api/v1/admin/custom_emojis/{id}`. The rules are `emojis`'.

use axum::extract::{DefaultBodyLimit, Multipart, State};
use axum::routing::{delete, get};
use axum::{Json, Router};
use serde::Serialize;

use super::RecordId;
use crate::emojis::{self, Emoji, EmojiError};
use crate::mastodon::CustomEmoji;
use crate::web::auth::Admin;
use crate::web::{ApiError, AppState};

/// Room for the multipart framing and the text fields around the image.
const FRAMING: usize = 16 * 1024;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/custom_emojis", get(index))
        .route(
            "/api/v1/admin/custom_emojis",
            get(admin_index)
                .post(add)
                .layer(DefaultBodyLimit::max(emojis::MAX_BYTES + FRAMING)),
        )
        .route("/api/v1/admin/custom_emojis/{id}", delete(remove))
}

/// What apps list: the emojis shown in pickers, with their category.
#[derive(Serialize)]
struct Listed {
    #[serde(flatten)]
    emoji: CustomEmoji,
    category: Option<String>,
}

/// The admin's view: the emoji with its id.
#[derive(Serialize)]
struct AdminEmoji {
    id: String,
    #[serde(flatten)]
    emoji: CustomEmoji,
    category: Option<String>,
}

impl From<&Emoji> for AdminEmoji {
    fn from(e: &Emoji) -> Self {
        AdminEmoji {
            id: e.id.to_string(),
            emoji: e.entity(),
            category: e.category.clone(),
        }
    }
}

async fn index(State(s): State<AppState>) -> Result<Json<Vec<Listed>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    Ok(Json(
        emojis::all(&mut conn)
            .await?
            .iter()
            .filter(|e| e.visible_in_picker)
            .map(|e| Listed {
                emoji: e.entity(),
                category: e.category.clone(),
            })
            .collect(),
    ))
}

async fn admin_index(
    State(s): State<AppState>,
    _: Admin,
) -> Result<Json<Vec<AdminEmoji>>, ApiError> {
    let mut conn = s.pool.acquire().await?;
    Ok(Json(
        emojis::all(&mut conn)
            .await?
            .iter()
            .map(AdminEmoji::from)
            .collect(),
    ))
}

fn refused(e: EmojiError) -> ApiError {
    match e {
        EmojiError::Invalid(m) => ApiError::unprocessable(m),
        EmojiError::Drive(d) => ApiError::unavailable(d.to_string()),
        EmojiError::Db(e) => e.into(),
    }
}

async fn add(
    State(s): State<AppState>,
    _: Admin,
    mut form: Multipart,
) -> Result<Json<AdminEmoji>, ApiError> {
    // A body past the limit is the multipart reader's 413; a malformed one its 400.
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError(e.status(), format!("bad multipart body: {}", e.body_text()))
    };
    let (mut shortcode, mut category, mut image, mut copy_from) = (None, None, None, None);
    while let Some(field) = form.next_field().await.map_err(bad)? {
        match field.name().unwrap_or_default() {
            "shortcode" => shortcode = Some(field.text().await.map_err(bad)?),
            "category" => category = Some(field.text().await.map_err(bad)?),
            "image" => image = Some(field.bytes().await.map_err(bad)?.to_vec()),
            "copy_from" => copy_from = Some(field.text().await.map_err(bad)?),
            other => {
                return Err(ApiError::unprocessable(format!(
                    "unknown field {other:?} (shortcode, image, copy_from, category)"
                )));
            }
        }
    }
    let shortcode = shortcode.unwrap_or_default();
    let image = match (image, copy_from) {
        (Some(bytes), None) => bytes,
        (None, Some(status)) => copied(&s, status.trim(), shortcode.trim()).await?,
        _ => return Err(ApiError::unprocessable("give either image or copy_from")),
    };
    let mut tx = s.pool.begin().await?;
    let e = emojis::add(
        &mut tx,
        &s.drive,
        &s.media,
        shortcode.trim(),
        image,
        category.as_deref(),
    )
    .await
    .map_err(refused)?;
    tx.commit().await?;
    Ok(Json(AdminEmoji::from(&e)))
}

/// The image of the emoji `shortcode` of the remote status `status` (our id of it), fetched
/// through the fetch guard as the media proxy fetches it.
async fn copied(s: &AppState, status: &str, shortcode: &str) -> Result<Vec<u8>, ApiError> {
    let unknown =
        || ApiError::unprocessable(format!("no remote status {status:?} with :{shortcode}:"));
    let id = uuid::Uuid::parse_str(status).map_err(|_| unknown())?;
    let tags: Option<Option<serde_json::Value>> = sqlx::query_scalar(
        "SELECT body->'tag' FROM remote_posts WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind(id)
    .fetch_optional(&s.pool)
    .await?;
    // The remote URL itself, not the proxied one: rendered without a proxy.
    let urls = crate::mastodon::Urls::new(&s.public_origin);
    let emoji = CustomEmoji::from_tags(urls, tags.flatten().as_ref())
        .into_iter()
        .find(|e| e.shortcode == shortcode)
        .ok_or_else(unknown)?;
    let fed = s.fed.as_deref().ok_or_else(|| {
        ApiError::unavailable("federation is disabled on this node: set SECRET_KEY")
    })?;
    let (bytes, _) = fed
        .fetch
        .get_image(&emoji.url, emojis::MAX_BYTES)
        .await
        .map_err(|e| {
            // The remote's status at most: the guard's and resolver's words are for the log.
            tracing::info!(url = emoji.url, error = %e, "a remote emoji's image could not be fetched");
            ApiError::unprocessable(format!(
                "the image of :{shortcode}: could not be fetched: {}",
                e.public_reason()
            ))
        })?;
    Ok(bytes)
}

async fn remove(
    State(s): State<AppState>,
    _: Admin,
    RecordId(id): RecordId,
) -> Result<Json<crate::mastodon::Empty>, ApiError> {
    let mut tx = s.pool.begin().await?;
    let key = emojis::delete(&mut tx, id)
        .await?
        .ok_or_else(ApiError::record_not_found)?;
    tx.commit().await?;
    crate::media::upload::forget(&s.drive, &[key]).await;
    Ok(Json(crate::mastodon::Empty {}))
}
