//! `hollo.preview-card.v1 {postId}`: the card of a post's first link (`cards` has the rules).
//!
//! The page is fetched through the guarded fetcher — the SSRF rules on every hop, at most
//! [`MAX_PAGE_BYTES`] of `text/html`, the whole card within `PREVIEW_CARD_TIMEOUT_SECONDS` —
//! then its oEmbed document (if it names one) and its image, which is decoded and re-encoded
//! by our own media path (a thumbnail and a BlurHash) and stored on the drive: readers load
//! the card image from us, never from the linked site. A page that fails any of this gives no
//! card, is remembered as failed for a day, and the message completes: a hostile page costs
//! one bounded fetch a day, not a retry storm. Database errors retry.
//!
//! Cards run in slots of their own ([`super::CARD_POOL`]), so a page that never finishes
//! delays no other task; within them `cards::pacing` keeps one site to two fetches at a time
//! (a card whose site is busy is put back for a few seconds) and skips a page, whatever its
//! query, that timed out or was unreachable within the hour (issue 61, F5).

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;
use url::Url;
use uuid::Uuid;

use crate::cards::oembed::{self, OEmbed};
use crate::cards::pacing::Pacing;
use crate::cards::page::{self, PageMeta};
use crate::cards::store::{self, Known, NewCard, StoredImage};
use crate::cards::{KIND, Payload, coalesce_key, first_link};
use crate::config::MediaConfig;
use crate::federation::Federation;
use crate::federation::transport::fetch::FetchError;
use crate::media::Drive;
use crate::media::processing;
use crate::queue::{
    JobContext, KindSpec, NewMessage, QueueName, Registry, RetryPolicy, TaskError, enqueue,
};

/// Largest page read (the `<head>` of any real page is far smaller).
pub const MAX_PAGE_BYTES: usize = 1024 * 1024;
/// Largest oEmbed document read.
const MAX_OEMBED_BYTES: usize = 64 * 1024;
/// Largest preview image fetched.
pub const MAX_IMAGE_BYTES: usize = 4 * 1024 * 1024;
/// How often a card may be put back for a busy site (some eight minutes of waiting) before it
/// is given up without a card.
const MAX_DEFERRALS: u32 = 100;

pub fn spec(timeout: Duration) -> KindSpec {
    KindSpec::new(KIND, QueueName::Task)
        .retry(RetryPolicy::exponential(Duration::from_secs(5), 5))
        // The fetch is bounded by `timeout`; decoding and storing the image get the rest.
        .timeout(timeout + Duration::from_secs(30))
        .slot_pool(super::CARD_POOL)
}

#[derive(Clone)]
pub struct Deps {
    pub fed: Arc<Federation>,
    /// Where card images go; a disabled drive makes cards without an image.
    pub drive: Arc<Drive>,
    pub media: Arc<MediaConfig>,
    /// `PREVIEW_CARDS`.
    pub enabled: bool,
    /// `PREVIEW_CARD_TIMEOUT_SECONDS`.
    pub timeout: Duration,
    /// This process's share-out of the linked sites.
    pub pacing: Arc<Pacing>,
}

pub fn register(reg: &mut Registry, deps: Deps) {
    reg.register(spec(deps.timeout), move |ctx: JobContext, p: Payload| {
        let deps = deps.clone();
        async move { handle(ctx, &deps, p).await }
    });
}

async fn handle(ctx: JobContext, deps: &Deps, p: Payload) -> Result<(), TaskError> {
    let post = p.post_id;
    let Some(html) = post_html(&ctx, post).await? else {
        return Ok(()); // deleted meanwhile
    };
    let Some(url) = first_link(&html).filter(|_| deps.enabled) else {
        return show(&ctx, post, None).await;
    };
    let key = url.to_string();
    let known = store::known(&mut *ctx.pool.acquire().await?, &key).await?;
    match known {
        Known::Fresh(card) => return show(&ctx, post, Some(card)).await,
        Known::Failed => return show(&ctx, post, None).await,
        Known::Stale => {}
    }
    let Some(_turn) = deps.pacing.admit(&url).await else {
        return put_back(&ctx, p).await;
    };
    // Asked once the turn is ours: the fetch that held it may just have timed out.
    if deps.pacing.is_slow(&url) {
        // Not recorded against this URL: the page may answer again within the hour.
        tracing::info!(%post, url = key, "no preview card: the page did not answer lately");
        return show(&ctx, post, None).await;
    }
    let fetched = tokio::time::timeout(deps.timeout, fetch_card(deps, &url)).await;
    let card = match fetched {
        Ok(Ok(card)) => card,
        Ok(Err(e)) => {
            if matches!(e, CardError::Fetch(FetchError::Network(_))) {
                deps.pacing.slow(&url);
            }
            return failed(&ctx, post, &key, &e.to_string()).await;
        }
        Err(_) => {
            deps.pacing.slow(&url);
            let why = format!("no card within {} s", deps.timeout.as_secs());
            return failed(&ctx, post, &key, &why).await;
        }
    };
    let mut tx = ctx.pool.begin().await?;
    let (id, replaced) = store::save(&mut tx, &card).await?;
    let changed = store::show(&mut tx, post, Some(id)).await?;
    if changed {
        crate::streaming::emit::edited(&mut tx, post).await?;
    }
    tx.commit().await?;
    if let Some(k) = replaced
        && let Err(e) = deps.drive.delete(&k).await
    {
        tracing::info!(key = k, error = %e, "a replaced card image stays for the media cleanup");
    }
    tracing::debug!(%post, url = key, "preview card stored");
    Ok(())
}

/// Puts the card back for a few seconds (its site is busy): the message completes and a
/// delayed one takes its place in one transaction, so the card slot is free meanwhile. Past
/// [`MAX_DEFERRALS`] the post gets no card.
async fn put_back(ctx: &JobContext, p: Payload) -> Result<(), TaskError> {
    if p.deferrals >= MAX_DEFERRALS {
        tracing::info!(post = %p.post_id, "no preview card: its site stayed busy");
        return show(ctx, p.post_id, None).await;
    }
    let mut tx = ctx.pool.begin().await?;
    if !ctx.complete_in(&mut tx).await? {
        return Ok(()); // the lease was lost; whoever holds it now runs the card
    }
    let next = Payload {
        deferrals: p.deferrals + 1,
        ..p
    };
    let data = serde_json::to_value(next).map_err(|e| TaskError::Permanent(e.to_string()))?;
    let delay = Duration::from_millis(rand::thread_rng().gen_range(3_000..7_000));
    enqueue(
        &mut *tx,
        QueueName::Task,
        &NewMessage::new(KIND, data)
            .delay(delay)
            .coalesce(coalesce_key(p.post_id)),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// The post's HTML as readers get it: ours rendered from its text, a remote one as stored.
async fn post_html(ctx: &JobContext, post: Uuid) -> Result<Option<String>, sqlx::Error> {
    let local: Option<(String, String)> =
        sqlx::query_as("SELECT content, uri FROM statuses WHERE id = $1")
            .bind(post)
            .fetch_optional(&ctx.pool)
            .await?;
    if let Some((text, uri)) = local {
        return Ok(Some(crate::content::render(&text, &uri, &[]).html));
    }
    sqlx::query_scalar(
        "SELECT coalesce(content, '') FROM remote_posts WHERE id = $1 AND deleted_at IS NULL",
    )
    .bind(post)
    .fetch_optional(&ctx.pool)
    .await
}

/// Makes the post show `card` (or none) and tells open timelines when that changed.
async fn show(ctx: &JobContext, post: Uuid, card: Option<Uuid>) -> Result<(), TaskError> {
    let mut tx = ctx.pool.begin().await?;
    if store::show(&mut tx, post, card).await? {
        crate::streaming::emit::edited(&mut tx, post).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn failed(ctx: &JobContext, post: Uuid, url: &str, why: &str) -> Result<(), TaskError> {
    tracing::info!(%post, url, error = why, "no preview card");
    crate::metrics::PREVIEW_CARDS
        .get_or_create(&crate::metrics::OutcomeLabels {
            outcome: "failed".into(),
        })
        .inc();
    store::failed(&mut *ctx.pool.acquire().await?, url, why).await?;
    show(ctx, post, None).await
}

/// Why a page gave no card.
#[derive(Debug, thiserror::Error)]
enum CardError {
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("the page has neither a title nor an oEmbed document")]
    Empty,
}

/// Fetches the page, its oEmbed document and its image, and makes the card.
async fn fetch_card(deps: &Deps, url: &Url) -> Result<NewCard, CardError> {
    let fetch = &deps.fed.fetch;
    let (at, html) = fetch.get_page(url.as_str(), MAX_PAGE_BYTES).await?;
    let meta = page::parse(&html, &at);
    // A broken oEmbed endpoint does not cost the page's own card.
    let embed = match &meta.oembed {
        Some(o) => match fetch.get_json(o.as_str(), MAX_OEMBED_BYTES).await {
            Ok(doc) => Some(oembed::read(&doc, o)),
            Err(e) => {
                tracing::debug!(url = %o, error = %e, "oEmbed document unusable");
                None
            }
        },
        None => None,
    };
    let mut card = combine(url, &at, &meta, embed.as_ref());
    if card.title.is_empty() && embed.is_none() {
        return Err(CardError::Empty);
    }
    let image_url = embed
        .as_ref()
        .and_then(|e| e.image.clone())
        .or_else(|| meta.image.clone());
    if let Some(img) = image_url {
        // A missing or broken image leaves a card without one.
        match image(deps, &img).await {
            Ok(stored) => card.image = stored,
            Err(e) => tracing::debug!(url = %img, error = %e, "card image unusable"),
        }
    }
    crate::metrics::PREVIEW_CARDS
        .get_or_create(&crate::metrics::OutcomeLabels {
            outcome: "stored".into(),
        })
        .inc();
    Ok(card)
}

/// The card of the link `url` (served from `at`): the page's own statements, with what an
/// oEmbed document says on top (its type, author, provider and player).
fn combine(url: &Url, at: &Url, meta: &PageMeta, embed: Option<&OEmbed>) -> NewCard {
    let pick = |e: Option<&String>, m: &str| {
        e.filter(|v| !v.is_empty())
            .cloned()
            .unwrap_or_else(|| m.to_string())
    };
    let provider_url = at.origin().ascii_serialization();
    NewCard {
        url: url.to_string(),
        // A player type without a usable player is shown as a link.
        kind: match embed {
            Some(e) if e.kind == Some("photo") => "photo",
            Some(OEmbed {
                kind: Some(k),
                html,
                ..
            }) if !html.is_empty() => k,
            _ => "link",
        }
        .to_string(),
        title: pick(embed.map(|e| &e.title), &meta.title),
        description: meta.description.clone(),
        author_name: pick(embed.map(|e| &e.author_name), &meta.author),
        author_url: embed.map(|e| e.author_url.clone()).unwrap_or_default(),
        provider_name: pick(embed.map(|e| &e.provider_name), &meta.site_name),
        provider_url: pick(embed.map(|e| &e.provider_url), &provider_url),
        html: embed.map(|e| e.html.clone()).unwrap_or_default(),
        width: embed.map_or(0, |e| e.width),
        height: embed.map_or(0, |e| e.height),
        image: None,
        image_description: meta.image_alt.clone(),
        language: meta.language.clone(),
        published_at: meta.published,
    }
}

/// Fetches, checks, re-encodes and stores the card image; none when the drive is off.
async fn image(deps: &Deps, url: &Url) -> Result<Option<StoredImage>, String> {
    if !deps.drive.is_enabled() {
        return Ok(None);
    }
    let (bytes, _) = deps
        .fed
        .fetch
        .get_image(url.as_str(), MAX_IMAGE_BYTES)
        .await
        .map_err(|e| e.to_string())?;
    let max_pixels = deps.media.max_pixels;
    let probe =
        processing::probe(&bytes, MAX_IMAGE_BYTES, max_pixels).map_err(|e| e.to_string())?;
    let done = deps
        .drive
        .decode_slots()
        .run(move || processing::process(&bytes, probe, max_pixels, None))
        .await
        .map_err(|e| e.to_string())?;
    let key = format!(
        "media/{}/card.{}",
        Uuid::now_v7(),
        done.thumbnail_format.ext()
    );
    deps.drive
        .put(&key, done.thumbnail, done.thumbnail_format.mime())
        .await
        .map_err(|e| e.to_string())?;
    Ok(Some(StoredImage {
        key,
        width: done.thumbnail_width as i32,
        height: done.thumbnail_height as i32,
        blurhash: done.blurhash,
    }))
}
