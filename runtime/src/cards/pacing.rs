//! How card fetches share the linked sites (issue 61, F5). A page that never finishes holds
//! its fetch for the whole card time limit; cards run in slots of their own
//! (`tasks::CARD_POOL`), so that costs only other cards, and this bounds what one site can
//! take of those:
//!
//! - at most [`PER_HOST`] fetches to one host at a time in this process (a card whose host is
//!   busy is put back for a few seconds rather than waiting in its slot);
//! - a page that timed out or could not be reached is remembered for [`SLOW_FOR`] by its URL
//!   without query and fragment, so `?v=1`, `?v=2`, … of the same page are not fetched one
//!   after another (the stored failure of a URL is exact: a query often names another page,
//!   and a cheap failure of one video must not hide every other video's card for a day).
//!
//! Both are per process, like the deliveries' host limit: each worker learns on its own.

use std::time::{Duration, Instant};

use quick_cache::sync::Cache;
use tokio::sync::OwnedSemaphorePermit;
use url::Url;

use crate::federation::outbound::delivery::HostLimiter;

/// Card fetches to one host running at once per process.
pub const PER_HOST: usize = 2;
/// How long a page that timed out or was unreachable is not asked again (by any query).
pub const SLOW_FOR: Duration = Duration::from_secs(3600);
/// How long a card waits for its host before it is put back.
const HOST_WAIT: Duration = Duration::from_millis(500);
/// Pages remembered as slow at most (the oldest are forgotten first).
const SLOW_PAGES: usize = 10_000;

pub struct Pacing {
    hosts: HostLimiter,
    slow: Cache<String, Instant>,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing::new()
    }
}

impl Pacing {
    pub fn new() -> Pacing {
        Pacing {
            hosts: HostLimiter::new(PER_HOST),
            slow: Cache::new(SLOW_PAGES),
        }
    }

    /// A place among `url`'s host's fetches, held until dropped; `None` when the host is busy.
    pub async fn admit(&self, url: &Url) -> Option<OwnedSemaphorePermit> {
        self.hosts.acquire(url.host_str()?, HOST_WAIT).await
    }

    /// Remembers that `url`'s page timed out or could not be reached.
    pub fn slow(&self, url: &Url) {
        self.slow.insert(page(url), Instant::now());
    }

    /// Whether `url`'s page (any query) timed out or was unreachable within [`SLOW_FOR`].
    pub fn is_slow(&self, url: &Url) -> bool {
        self.slow
            .get(&page(url))
            .is_some_and(|at| at.elapsed() < SLOW_FOR)
    }
}

/// `url` without its query and fragment: the page whatever it is asked for.
fn page(url: &Url) -> String {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[tokio::test]
    async fn a_host_gets_two_fetches_at_a_time_and_a_slow_page_is_one_page() {
        let p = Pacing::new();
        let a = url("https://a.example/watch?v=1");
        let first = p.admit(&a).await;
        let second = p.admit(&url("https://A.example/other")).await;
        assert!(first.is_some() && second.is_some());
        assert!(p.admit(&a).await.is_none(), "a third waits its turn");
        assert!(p.admit(&url("https://b.example/")).await.is_some());
        drop(first);
        assert!(p.admit(&a).await.is_some());

        p.slow(&a);
        assert!(p.is_slow(&url("https://a.example/watch?v=2#t=1")));
        assert!(!p.is_slow(&url("https://a.example/other?v=1")));
    }
}
