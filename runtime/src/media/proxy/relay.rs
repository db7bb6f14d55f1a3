//! Relaying one remote image (`GET /media/proxy/…`): from memory when it is there, else
//! fetched through the guarded fetcher in a place of the node's bounded fetches, its first
//! bytes sniffed as uploads are (only JPEG, PNG, GIF and WebP pass, whatever the remote calls
//! them), then either kept whole (at most `cache::CACHED_MAX_BYTES`) or streamed through to
//! the reader, capped at `MAX_BYTES` while it streams. A failure is remembered for a while.

use std::sync::Arc;

use axum::body::{Body, Bytes};

use super::MAX_BYTES;
use super::cache::{CACHED_MAX_BYTES, Failures, Lookup, ProxyCache, Relayed, Source};
use super::slots::{FetchSlots, PER_HOST, QUEUE_WAIT, Slot};
use crate::federation::transport::fetch::{CappedBody, FetchClient, FetchError};
use crate::media::processing::Format;

/// Bytes read before the format is decided (WebP's `RIFF….WEBP` is the longest signature).
const SNIFF_BYTES: usize = 16;

/// What the reader is sent.
pub enum Served {
    /// The whole image: from memory, or small enough to be read whole (and kept).
    Whole { image: Relayed, source: Source },
    /// The image as the remote sends it: the bytes sniffed first, then the rest, capped.
    Streamed {
        format: Format,
        length: Option<u64>,
        body: Body,
    },
}

/// Why no image is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No fetch place came free in time: try again shortly (503).
    Busy,
    /// The remote failed, now or within the failure TTL (502).
    Failed,
}

/// Why a fetch gave no image (logged, never shown).
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("the bytes are not a JPEG, PNG, GIF or WebP image")]
    NotAnImage,
}

/// A fetch opened and its type decided.
enum Opened {
    Whole(Relayed),
    Partial {
        format: Format,
        head: Bytes,
        body: CappedBody,
    },
}

/// A node's media proxy: its memory of images and failures and its fetch places.
pub struct Relay {
    cache: ProxyCache,
    failures: Arc<Failures>,
    slots: FetchSlots,
}

impl Relay {
    /// Keeping up to `cache_bytes` of images, fetching at most `concurrency` at once.
    pub fn new(cache_bytes: usize, concurrency: usize) -> Relay {
        Relay {
            cache: ProxyCache::new(cache_bytes),
            failures: Failures::new(),
            slots: FetchSlots::new(concurrency, PER_HOST),
        }
    }

    /// The image at `url` (a URL this node signed), or why not.
    pub async fn serve(&self, fetch: &FetchClient, url: &str) -> Result<Served, Refusal> {
        if self.failures.recent(url) {
            return Err(Refusal::Failed);
        }
        let fetching = match self.cache.lookup(url).await {
            Lookup::Hit(image) => {
                return Ok(Served::Whole {
                    image,
                    source: Source::Cache,
                });
            }
            Lookup::Miss(fetching) => fetching,
        };
        let slot = self
            .slots
            .acquire(&host_of(url), QUEUE_WAIT)
            .await
            .ok_or(Refusal::Busy)?;
        match open(fetch, url, fetching.is_some()).await {
            Err(e) => {
                tracing::info!(url, error = %e, "a proxied image could not be fetched");
                self.failures.remember(url);
                Err(Refusal::Failed)
            }
            Ok(Opened::Whole(image)) => {
                if let Some(f) = fetching {
                    f.keep(image.clone());
                }
                Ok(Served::Whole {
                    image,
                    source: Source::Remote,
                })
            }
            // Not kept: the readers waiting on this fetch go and fetch for themselves.
            Ok(Opened::Partial { format, head, body }) => Ok(Served::Streamed {
                format,
                length: body.content_length(),
                body: stream(head, body, slot, self.failures.clone(), url.to_string()),
            }),
        }
    }
}

/// The URL's host and port: what the per-host bound counts.
fn host_of(url: &str) -> String {
    url::Url::parse(url)
        .ok()
        .and_then(|u| Some(format!("{}:{}", u.host_str()?, u.port_or_known_default()?)))
        .unwrap_or_default()
}

/// Opens `url` and reads its first bytes: enough to sniff the format, or the whole image when
/// it may be kept (`keep`) and is at most [`CACHED_MAX_BYTES`].
async fn open(fetch: &FetchClient, url: &str, keep: bool) -> Result<Opened, Failure> {
    let (_, _, mut body) = fetch.open_image(url, MAX_BYTES).await?;
    let small = body
        .content_length()
        .is_none_or(|n| n <= CACHED_MAX_BYTES as u64);
    let wanted = if keep && small {
        CACHED_MAX_BYTES
    } else {
        SNIFF_BYTES
    };
    let mut head = Vec::new();
    let mut format = None;
    let ended = loop {
        if head.len() >= SNIFF_BYTES && format.is_none() {
            format = Some(Format::sniff(&head).ok_or(Failure::NotAnImage)?);
        }
        if head.len() >= wanted {
            break false;
        }
        match body.chunk().await? {
            Some(chunk) => head.extend_from_slice(&chunk),
            None => break true,
        }
    };
    let format = match format {
        Some(f) => f,
        None => Format::sniff(&head).ok_or(Failure::NotAnImage)?,
    };
    let head = Bytes::from(head);
    Ok(if ended {
        Opened::Whole(Relayed::new(head, format))
    } else {
        Opened::Partial { format, head, body }
    })
}

/// The reader's body: `head`, then the rest of `body` as it arrives. The fetch's `slot` is
/// held until the last byte (or until the reader goes away and the body is dropped); a
/// remote that fails midway (too large, reset) ends the body with an error, which aborts
/// the response, and is remembered as a failure.
fn stream(head: Bytes, body: CappedBody, slot: Slot, failures: Arc<Failures>, url: String) -> Body {
    struct State {
        head: Option<Bytes>,
        body: CappedBody,
        _slot: Slot,
        failures: Arc<Failures>,
        url: String,
    }
    let state = State {
        head: Some(head),
        body,
        _slot: slot,
        failures,
        url,
    };
    let chunks = futures::stream::unfold(Some(state), |state| async move {
        let mut s = state?;
        if let Some(head) = s.head.take() {
            return Some((Ok(head), Some(s)));
        }
        match s.body.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(s))),
            Ok(None) => None,
            Err(e) => {
                tracing::info!(url = s.url, error = %e, "a proxied image failed while streaming");
                s.failures.remember(&s.url);
                Some((Err(e), None))
            }
        }
    });
    Body::from_stream(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_counted_by_host_and_port() {
        assert_eq!(host_of("https://R.example/a.png"), "r.example:443");
        assert_eq!(host_of("http://127.0.0.1:8080/a"), "127.0.0.1:8080");
        assert_eq!(host_of("not a url"), "");
    }
}
