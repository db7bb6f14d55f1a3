//! How many remote images a node fetches at once: at most `MEDIA_PROXY_CONCURRENCY` in all
//! and [`PER_HOST`] from one remote host. A fetch holds its [`Slot`] until its image has been
//! relayed (streamed to the reader, or kept), so the slots bound the proxy's memory (each
//! holds at most `cache::CACHED_MAX_BYTES` plus a connection's buffers) and its sockets.
//!
//! A reader that finds no free slot waits for one, up to [`QUEUE_WAIT`], then gets a 503 with
//! `Retry-After` (`web::media_proxy`). Waiting rather than refusing at once: a browser opening
//! a timeline asks for dozens of images at the same moment, many from one remote host, and
//! does not retry an image that failed, so a refusal is a broken image where a short wait is
//! not; a waiting reader costs a task and the connection it already holds (connections are
//! bounded by `HTTP_MAX_CONNECTIONS`). The per-host bound keeps one slow host (or many URLs of
//! one attacker's host) from taking all of a node's slots; an attacker with many hosts can
//! still fill them, which costs the proxy's availability for up to the fetch timeout, never
//! the node's memory.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Fetches at once from one remote host (by the URL's host and port, before redirects).
pub const PER_HOST: usize = 8;

/// How long a reader waits for a slot before its answer is 503.
pub const QUEUE_WAIT: Duration = Duration::from_secs(5);

type Hosts = Arc<Mutex<HashMap<String, Arc<Semaphore>>>>;

/// The node's fetch places.
pub struct FetchSlots {
    node: Arc<Semaphore>,
    per_host: usize,
    /// A semaphore per host while any fetch or waiter of that host exists (then removed, so
    /// the map holds only hosts in use).
    hosts: Hosts,
}

/// A fetch's place: one of the node's and one of its host's, released when dropped.
pub struct Slot {
    _node: OwnedSemaphorePermit,
    _host: HostPlace,
}

/// A host's place, taken or waited for; dropping it forgets the host once nobody uses it.
struct HostPlace {
    permit: Option<OwnedSemaphorePermit>,
    semaphore: Option<Arc<Semaphore>>,
    host: String,
    hosts: Hosts,
}

impl Drop for HostPlace {
    fn drop(&mut self) {
        self.permit = None;
        self.semaphore = None;
        if let Ok(mut hosts) = self.hosts.lock() {
            // Clones are made under this lock, so a count of one (the map's) means no
            // fetch holds a place of this host and none waits for one.
            if hosts
                .get(&self.host)
                .is_some_and(|s| Arc::strong_count(s) == 1)
            {
                hosts.remove(&self.host);
            }
        }
    }
}

impl FetchSlots {
    /// At most `node` fetches at once (at least one), `per_host` of them from one host.
    pub fn new(node: usize, per_host: usize) -> FetchSlots {
        FetchSlots {
            node: Arc::new(Semaphore::new(node.max(1))),
            per_host: per_host.max(1),
            hosts: Arc::default(),
        }
    }

    /// A place for a fetch from `host`, waiting at most `wait`; `None` when none came free.
    /// The host's place is taken first, so a reader waiting on a busy host holds none of the
    /// node's.
    pub async fn acquire(&self, host: &str, wait: Duration) -> Option<Slot> {
        let semaphore = {
            let mut hosts = self.hosts.lock().ok()?;
            hosts
                .entry(host.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_host)))
                .clone()
        };
        // Made before any wait, so a reader that gives up still forgets an unused host.
        let mut place = HostPlace {
            permit: None,
            semaphore: Some(semaphore.clone()),
            host: host.to_string(),
            hosts: self.hosts.clone(),
        };
        let taken = tokio::time::timeout(wait, async {
            place.permit = Some(semaphore.acquire_owned().await.ok()?);
            self.node.clone().acquire_owned().await.ok()
        })
        .await;
        match taken {
            Ok(Some(node)) => Some(Slot {
                _node: node,
                _host: place,
            }),
            _ => None,
        }
    }

    /// Hosts with a fetch running or waiting (for tests).
    #[cfg(test)]
    fn hosts_in_use(&self) -> usize {
        self.hosts.lock().map_or(0, |h| h.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NO_WAIT: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn fetches_are_bounded_per_host_and_per_node() {
        let slots = FetchSlots::new(3, 2);
        let a1 = slots.acquire("a.example", NO_WAIT).await.expect("a 1");
        let a2 = slots.acquire("a.example", NO_WAIT).await.expect("a 2");
        assert!(
            slots.acquire("a.example", NO_WAIT).await.is_none(),
            "a third from one host waits, then gives up"
        );
        let b1 = slots.acquire("b.example", NO_WAIT).await.expect("b 1");
        assert!(
            slots.acquire("c.example", NO_WAIT).await.is_none(),
            "the node's three are taken"
        );
        drop(a1);
        let c1 = slots
            .acquire("c.example", NO_WAIT)
            .await
            .expect("c, once a place is free");
        drop((a2, b1, c1));
        assert_eq!(slots.hosts_in_use(), 0, "no host is kept once unused");
    }

    #[tokio::test]
    async fn a_waiting_reader_gets_the_place_released() {
        let slots = Arc::new(FetchSlots::new(1, 1));
        let first = slots.acquire("a.example", NO_WAIT).await.expect("first");
        let waiting = {
            let slots = slots.clone();
            tokio::spawn(async move { slots.acquire("a.example", QUEUE_WAIT).await.is_some() })
        };
        tokio::task::yield_now().await;
        drop(first);
        assert!(waiting.await.expect("task"), "the waiter got the place");
        assert_eq!(slots.hosts_in_use(), 0);
    }
}
