//! Which deliveries keep their connection open for the next one (R-AP-2).
//!
//! An idle keep-alive connection costs about 22 KB of worker memory (measured: a fan-out to
//! 10 000 hosts peaked at 246 MiB with keep-alive, 26 MiB without) and a descriptor on both
//! sides, and most hosts of a fan-out get one delivery per post: the connection would sit idle
//! until it times out. So the first POST to a host within [`WINDOW`] asks the server to close
//! (`Connection: close`), and only a host posted to again within the window — a busy peer,
//! where reuse saves a TLS handshake per delivery — gets its connection pooled. Remembering a
//! host costs a map entry, not a socket.

use std::time::{Duration, Instant};

use crate::federation::transport::ttl::TtlMap;

/// How recent a previous POST to the host must be for this one to keep its connection.
pub const WINDOW: Duration = Duration::from_secs(60);
/// Hosts remembered at most (a map entry each, not a socket).
const MAX_HOSTS: usize = 100_000;

pub struct RecentHosts(TtlMap<()>);

impl Default for RecentHosts {
    fn default() -> Self {
        RecentHosts(TtlMap::new(WINDOW, MAX_HOSTS))
    }
}

impl RecentHosts {
    /// Records a POST to `host` now; whether its connection should be kept for the next one
    /// (the host had one within the window).
    pub fn keep_alive(&self, host: &str) -> bool {
        self.keep_alive_at(host, Instant::now())
    }

    fn keep_alive_at(&self, host: &str, now: Instant) -> bool {
        self.0
            .insert_at(&host.to_ascii_lowercase(), (), now)
            .is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_host_posted_to_within_the_window_keeps_its_connection() {
        let r = RecentHosts::default();
        let t0 = Instant::now();
        assert!(!r.keep_alive_at("a.example", t0), "first post closes");
        assert!(r.keep_alive_at("A.example", t0 + Duration::from_secs(1)));
        assert!(!r.keep_alive_at("b.example", t0 + Duration::from_secs(1)));
        // A host quiet for longer than the window starts over.
        assert!(!r.keep_alive_at("a.example", t0 + WINDOW + Duration::from_secs(2)));
        assert!(r.keep_alive_at("a.example", t0 + WINDOW + Duration::from_secs(3)));
    }
}
