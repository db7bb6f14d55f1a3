//! What the media proxy remembers per node: the images it relayed ([`ProxyCache`], bounded in
//! bytes, an hour each, only images of at most [`CACHED_MAX_BYTES`]) and the URLs whose fetch
//! failed ([`Failures`], bounded, [`FAILURE_TTL`] each), so neither a popular image nor a
//! broken one costs its server a request per reader.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use quick_cache::Weighter;
use quick_cache::sync::{Cache, DefaultLifecycle, PlaceholderGuard};

use crate::media::processing::Format;

/// How long a relayed image is served from memory before it is fetched again.
pub const CACHE_TTL: Duration = Duration::from_secs(3600);

/// The largest image kept in memory. A larger one streams from the remote to the reader and
/// is not kept: holding it whole is what let a burst of readers take a node's memory (each
/// fetch buffers at most this much, and the fetches at once are bounded, `slots`). Avatars,
/// emojis and most photos of posts are below it.
pub const CACHED_MAX_BYTES: usize = 1024 * 1024;

/// How long a failed fetch is remembered: within it, readers of that URL get the 502 at once
/// and the remote is not asked again (a broken image in a busy thread is one request per node
/// per this period, not one per reader).
pub const FAILURE_TTL: Duration = Duration::from_secs(300);

/// Failed URLs remembered at most (their bytes; the least recently used go first).
const FAILURES_MAX_BYTES: u64 = 2 * 1024 * 1024;

/// A relayed image: its bytes and the format they were sniffed as.
#[derive(Clone, Debug)]
pub struct Relayed {
    pub bytes: Bytes,
    pub format: Format,
    fetched: Instant,
}

impl Relayed {
    pub fn new(bytes: Bytes, format: Format) -> Relayed {
        Relayed {
            bytes,
            format,
            fetched: Instant::now(),
        }
    }
}

/// Weighs an entry by what it holds, so the cache is bounded in bytes, not entries.
#[derive(Clone)]
pub struct ByBytes;

impl Weighter<String, Relayed> for ByBytes {
    fn weight(&self, url: &String, r: &Relayed) -> u64 {
        (url.len() + r.bytes.len()) as u64
    }
}

impl Weighter<String, Instant> for ByBytes {
    fn weight(&self, url: &String, _: &Instant) -> u64 {
        url.len() as u64 + 16
    }
}

/// Whether a relayed image came from memory or from the remote (for the metric and logs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Cache,
    Remote,
}

type Images = Cache<String, Relayed, ByBytes>;
type ImageGuard<'a> = PlaceholderGuard<
    'a,
    String,
    Relayed,
    ByBytes,
    quick_cache::DefaultHashBuilder,
    DefaultLifecycle<String, Relayed>,
>;

/// The proxy's memory: at most its capacity in bytes (least recently used images go first),
/// each image for [`CACHE_TTL`]; none at capacity 0.
pub struct ProxyCache {
    cache: Option<Images>,
}

/// What the cache has for a URL.
pub enum Lookup<'a> {
    /// A fresh image.
    Hit(Relayed),
    /// Nothing: this reader fetches, and readers of the same URL meanwhile wait for what it
    /// keeps ([`Fetching::keep`]) or for it to give up (dropping it), then ask again. `None`
    /// when the cache keeps nothing.
    Miss(Option<Fetching<'a>>),
}

/// The one fetch of a URL the other readers wait on.
pub struct Fetching<'a>(ImageGuard<'a>);

impl Fetching<'_> {
    /// Keeps `image` for the readers waiting and those to come. An image larger than a shard
    /// of the cache can hold is not kept.
    pub fn keep(self, image: Relayed) {
        let _ = self.0.insert(image);
    }
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

    /// The fresh image at `url`, else the right (and duty) to fetch it.
    pub async fn lookup(&self, url: &str) -> Lookup<'_> {
        let Some(cache) = &self.cache else {
            return Lookup::Miss(None);
        };
        loop {
            match cache.get_value_or_guard_async(url).await {
                Ok(r) if r.fetched.elapsed() < CACHE_TTL => return Lookup::Hit(r),
                // Stale: dropped, and the next round makes this reader the one who fetches.
                Ok(_) => {
                    cache.remove(url);
                }
                Err(guard) => return Lookup::Miss(Some(Fetching(guard))),
            }
        }
    }

    /// The bytes kept (for tests and the bound's check).
    pub fn weight(&self) -> u64 {
        self.cache.as_ref().map_or(0, Images::weight)
    }
}

/// URLs whose fetch failed, each remembered for [`FAILURE_TTL`].
pub struct Failures {
    failed: Cache<String, Instant, ByBytes>,
}

impl Failures {
    pub fn new() -> Arc<Failures> {
        Arc::new(Failures {
            failed: Cache::with_weighter(4096, FAILURES_MAX_BYTES, ByBytes),
        })
    }

    pub fn remember(&self, url: &str) {
        self.failed.insert(url.to_string(), Instant::now());
    }

    /// Whether `url` failed within [`FAILURE_TTL`].
    pub fn recent(&self, url: &str) -> bool {
        self.recent_at(url, Instant::now())
    }

    fn recent_at(&self, url: &str, now: Instant) -> bool {
        match self.failed.get(url) {
            Some(at) if now.saturating_duration_since(at) < FAILURE_TTL => true,
            Some(_) => {
                self.failed.remove(url);
                false
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn image(bytes: &[u8]) -> Relayed {
        Relayed::new(Bytes::copy_from_slice(bytes), Format::Png)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn readers_of_one_image_share_one_fetch() {
        let cache = Arc::new(ProxyCache::new(1 << 20));
        let fetches = Arc::new(AtomicUsize::new(0));
        let mut readers = Vec::new();
        for _ in 0..16 {
            let (cache, fetches) = (cache.clone(), fetches.clone());
            readers.push(tokio::spawn(async move {
                match cache.lookup("https://r.example/a.png").await {
                    Lookup::Hit(r) => r,
                    Lookup::Miss(fetching) => {
                        fetches.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        let r = image(&[1, 2, 3]);
                        if let Some(f) = fetching {
                            f.keep(r.clone());
                        }
                        r
                    }
                }
            }));
        }
        for r in readers {
            assert_eq!(&r.await.unwrap().bytes[..], &[1, 2, 3]);
        }
        assert_eq!(
            fetches.load(Ordering::SeqCst),
            1,
            "one fetch, sixteen readers"
        );
        // A reader that gives up (drops its right to fetch) lets the next one fetch.
        match cache.lookup("https://r.example/b.png").await {
            Lookup::Miss(Some(f)) => drop(f),
            _ => panic!("a miss"),
        }
        assert!(matches!(
            cache.lookup("https://r.example/b.png").await,
            Lookup::Miss(Some(_))
        ));
    }

    #[tokio::test]
    async fn the_cache_is_bounded_in_bytes_and_zero_keeps_nothing() {
        let cache = ProxyCache::new(256 * 1024);
        for i in 0..64 {
            if let Lookup::Miss(Some(f)) = cache.lookup(&format!("https://r.example/{i}")).await {
                f.keep(image(&[0; 64 * 1024]));
            }
        }
        assert!(
            cache.weight() <= 256 * 1024,
            "{} bytes kept",
            cache.weight()
        );
        let none = ProxyCache::new(0);
        assert!(matches!(
            none.lookup("https://r.example/a.png").await,
            Lookup::Miss(None)
        ));
    }

    #[test]
    fn failures_are_remembered_for_their_ttl_only() {
        let failures = Failures::new();
        let a = "https://r.example/a.png";
        assert!(!failures.recent(a));
        failures.remember(a);
        assert!(failures.recent(a));
        assert!(!failures.recent("https://r.example/b.png"));
        let later = Instant::now() + FAILURE_TTL;
        assert!(!failures.recent_at(a, later), "expired");
        assert!(!failures.recent(a), "and forgotten");
        // Bounded: a flood of failing URLs keeps at most the cap in bytes.
        for i in 0..100_000 {
            failures.remember(&format!("https://r.example/{i:064}"));
        }
        assert!(failures.failed.weight() <= FAILURES_MAX_BYTES);
    }
}
