//! Remote images shown through this server (R-MAPI-6): a remote custom emoji's image is
//! served from `/media/proxy/<mac>?url=<remote URL>`, so an app showing it asks only its own
//! server — the remote server never sees who reads a post, nor their IP address. The URL is
//! authenticated (HMAC-SHA256 under a key derived from `SECRET_KEY`), so the proxy serves only
//! what this server itself put in an entity: it is not an open relay. The image is fetched
//! through the guarded fetcher (the SSRF rules, redirects checked hop by hop), must say it is
//! an image, and is capped at [`MAX_BYTES`]. Avatars, headers, custom emojis and the images
//! of remote posts all go this way.
//!
//! What was relayed is kept in memory per node ([`ProxyCache`], bounded in bytes, an hour
//! each), and readers asking for one image at once share one fetch: a post that many read
//! costs its server one request per node, not one per reader.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::Cache;
use ring::hmac;

/// The largest remote image relayed (a remote post's photo included).
pub const MAX_BYTES: usize = 8 * 1024 * 1024;

/// How long a relayed image is served from memory before it is fetched again.
pub const CACHE_TTL: Duration = Duration::from_secs(3600);

/// A relayed image: its bytes and content type.
#[derive(Clone, Debug)]
pub struct Relayed {
    pub bytes: Bytes,
    pub media_type: Arc<str>,
    fetched: Instant,
}

/// Weighs an entry by what it holds, so the cache is bounded in bytes, not entries.
#[derive(Clone)]
struct ByBytes;

impl Weighter<String, Relayed> for ByBytes {
    fn weight(&self, url: &String, r: &Relayed) -> u64 {
        (url.len() + r.bytes.len() + r.media_type.len()) as u64
    }
}

/// Whether a relayed image came from memory or from the remote (for the metric and logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Cache,
    Remote,
}

/// The proxy's memory: at most its capacity in bytes (least recently used images go first),
/// each image for [`CACHE_TTL`]; none at capacity 0.
pub struct ProxyCache {
    cache: Option<Cache<String, Relayed, ByBytes>>,
}

impl ProxyCache {
    pub fn new(capacity_bytes: usize) -> ProxyCache {
        ProxyCache {
            cache: (capacity_bytes > 0).then(|| {
                // Sized for images of ~64 KB on average; the weigher bounds the bytes.
                Cache::with_weighter(
                    (capacity_bytes / 65_536).max(16),
                    capacity_bytes as u64,
                    ByBytes,
                )
            }),
        }
    }

    /// The image at `url`: from memory while fresh, else from `fetch` — called once for all
    /// the readers waiting on the same URL. A failed fetch is not remembered: the next reader
    /// tries again.
    pub async fn get_or_fetch<E, F, Fut>(&self, url: &str, fetch: F) -> Result<(Relayed, Source), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(Vec<u8>, String), E>>,
    {
        let fresh = |bytes: Vec<u8>, media_type: String| Relayed {
            bytes: Bytes::from(bytes),
            media_type: media_type.into(),
            fetched: Instant::now(),
        };
        let Some(cache) = &self.cache else {
            let (bytes, media_type) = fetch().await?;
            return Ok((fresh(bytes, media_type), Source::Remote));
        };
        let guard = loop {
            match cache.get_value_or_guard_async(url).await {
                Ok(r) if r.fetched.elapsed() < CACHE_TTL => return Ok((r, Source::Cache)),
                // Stale: dropped, and the next round makes this reader the one who fetches.
                Ok(_) => {
                    cache.remove(url);
                }
                Err(guard) => break guard,
            }
        };
        let (bytes, media_type) = fetch().await?;
        let r = fresh(bytes, media_type);
        // An image larger than a shard can hold is served and not kept.
        let _ = guard.insert(r.clone());
        Ok((r, Source::Remote))
    }
}

/// The path the proxy answers under.
pub const PATH: &str = "/media/proxy";

/// The key of the proxy's URLs.
pub struct MediaProxy {
    key: hmac::Key,
}

impl std::fmt::Debug for MediaProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MediaProxy")
    }
}

impl MediaProxy {
    /// The proxy of a node whose `SECRET_KEY` is `secret` (a key of its own, derived under a
    /// label, so no other use of the secret can mint or check a proxy URL).
    pub fn new(secret: &str) -> MediaProxy {
        let root = hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes());
        let derived = hmac::sign(&root, b"hollo media proxy v1");
        MediaProxy {
            key: hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref()),
        }
    }

    fn mac(&self, url: &str) -> String {
        hex(hmac::sign(&self.key, url.as_bytes()).as_ref())
    }

    /// The proxied URL of `remote` on `origin`.
    pub fn url(&self, origin: &str, remote: &str) -> String {
        let q: String = url::form_urlencoded::byte_serialize(remote.as_bytes()).collect();
        format!("{origin}{PATH}/{}?url={q}", self.mac(remote))
    }

    /// Whether `mac` is the one this proxy gave `remote` (in constant time).
    pub fn verify(&self, mac: &str, remote: &str) -> bool {
        let Some(given) = unhex(mac) else {
            return false;
        };
        hmac::verify(&self.key, remote.as_bytes(), &given).is_ok()
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn readers_of_one_image_share_one_fetch_and_failures_are_not_kept() {
        let cache = Arc::new(ProxyCache::new(1 << 20));
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for _ in 0..16 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            readers.push(tokio::spawn(async move {
                cache
                    .get_or_fetch("https://r.example/a.png", || async move {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        Ok::<_, String>((vec![1, 2, 3], "image/png".to_string()))
                    })
                    .await
            }));
        }
        for r in readers {
            let (img, _) = r.await.unwrap().unwrap();
            assert_eq!(&img.bytes[..], &[1, 2, 3]);
            assert_eq!(&*img.media_type, "image/png");
        }
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "one fetch for sixteen readers"
        );
        let failed = cache
            .get_or_fetch("https://r.example/b.png", || async {
                Err::<(Vec<u8>, String), _>("502")
            })
            .await;
        assert_eq!(failed.err(), Some("502"));
        let (_, source) = cache
            .get_or_fetch("https://r.example/b.png", || async {
                Ok::<_, &str>((vec![9], "image/gif".to_string()))
            })
            .await
            .unwrap();
        assert_eq!(source, Source::Remote, "a failure was not remembered");
        let (_, source) = cache
            .get_or_fetch("https://r.example/b.png", || async {
                Err::<(Vec<u8>, String), _>("not called")
            })
            .await
            .unwrap();
        assert_eq!(source, Source::Cache);
    }

    #[tokio::test]
    async fn the_cache_is_bounded_in_bytes_and_zero_keeps_nothing() {
        let cache = ProxyCache::new(256 * 1024);
        for i in 0..64 {
            let url = format!("https://r.example/{i}.png");
            cache
                .get_or_fetch(&url, || async {
                    Ok::<_, ()>((vec![0; 64 * 1024], "image/png".into()))
                })
                .await
                .unwrap();
        }
        let kept = cache.cache.as_ref().unwrap().weight();
        assert!(kept <= 256 * 1024, "{kept} bytes kept");
        let none = ProxyCache::new(0);
        for _ in 0..2 {
            let (_, source) = none
                .get_or_fetch("https://r.example/a.png", || async {
                    Ok::<_, ()>((vec![1], "image/png".into()))
                })
                .await
                .unwrap();
            assert_eq!(source, Source::Remote);
        }
    }

    #[test]
    fn only_the_urls_it_minted_verify() {
        let p = MediaProxy::new("a-secret-key-of-at-least-32-characters");
        let u = p.url("https://h.example", "https://r.example/e/a.png?x=1&y=2");
        assert!(u.starts_with("https://h.example/media/proxy/"));
        assert!(
            u.ends_with("?url=https%3A%2F%2Fr.example%2Fe%2Fa.png%3Fx%3D1%26y%3D2"),
            "{u}"
        );
        let mac = u
            .split('/')
            .nth(5)
            .and_then(|m| m.split('?').next())
            .unwrap();
        assert!(p.verify(mac, "https://r.example/e/a.png?x=1&y=2"));
        assert!(!p.verify(mac, "https://r.example/e/b.png"), "another URL");
        assert!(
            !p.verify("zz", "https://r.example/e/a.png?x=1&y=2"),
            "not hex"
        );
        let other = MediaProxy::new("another-secret-key-of-32-characters!!");
        assert!(
            !other.verify(mac, "https://r.example/e/a.png?x=1&y=2"),
            "another key"
        );
    }
}
