//! A small map whose entries count only while fresh, bounded in size: what this process keeps
//! for a minute about remote hosts and keys (signature schemes, verified keys, hosts recently
//! posted to) so a fan-out or a busy inbox does not ask PostgreSQL the same thing each time.
//! A stale entry reads as absent; past `max` entries the stale ones go, then everything (a
//! miss only costs the read it saves).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub struct TtlMap<V> {
    ttl: Duration,
    max: usize,
    entries: Mutex<HashMap<String, (V, Instant)>>,
}

impl<V: Clone> TtlMap<V> {
    pub fn new(ttl: Duration, max: usize) -> Self {
        TtlMap {
            ttl,
            max: max.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    /// The value stored under `key`, if it is fresh.
    pub fn get(&self, key: &str) -> Option<V> {
        self.get_at(key, Instant::now())
    }

    /// Stores `value` under `key` as of now; returns the value it replaces, if that was fresh.
    pub fn insert(&self, key: &str, value: V) -> Option<V> {
        self.insert_at(key, value, Instant::now())
    }

    pub fn clear(&self) {
        if let Ok(mut m) = self.entries.lock() {
            m.clear();
        }
    }

    pub(crate) fn get_at(&self, key: &str, now: Instant) -> Option<V> {
        let m = self.entries.lock().ok()?;
        m.get(key)
            .filter(|(_, at)| self.fresh(*at, now))
            .map(|(v, _)| v.clone())
    }

    pub(crate) fn insert_at(&self, key: &str, value: V, now: Instant) -> Option<V> {
        let mut m = self.entries.lock().ok()?;
        if m.len() >= self.max && !m.contains_key(key) {
            m.retain(|_, (_, at)| now.saturating_duration_since(*at) < self.ttl);
            if m.len() >= self.max {
                m.clear();
            }
        }
        m.insert(key.to_string(), (value, now))
            .filter(|(_, at)| self.fresh(*at, now))
            .map(|(v, _)| v)
    }

    fn fresh(&self, at: Instant, now: Instant) -> bool {
        now.saturating_duration_since(at) < self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_count_only_while_fresh_and_the_map_stays_bounded() {
        let m = TtlMap::new(Duration::from_secs(60), 2);
        let t0 = Instant::now();
        let at = |s| t0 + Duration::from_secs(s);
        assert_eq!(m.insert_at("a", 1, t0), None);
        assert_eq!(m.get_at("a", at(59)), Some(1));
        assert_eq!(m.get_at("a", at(60)), None, "stale");
        assert_eq!(m.insert_at("b", 1, at(10)), None);
        assert_eq!(m.insert_at("b", 2, at(20)), Some(1));
        assert_eq!(
            m.insert_at("b", 3, at(90)),
            None,
            "a stale entry is not returned as replaced"
        );
        // Full ("a" from t0, "b" from 90 s): the stale entry goes, the fresh one stays.
        m.insert_at("c", 1, at(100));
        assert_eq!(m.get_at("b", at(100)), Some(3));
        assert_eq!(m.get_at("c", at(100)), Some(1));
        assert_eq!(m.entries.lock().map(|e| e.len()).unwrap_or(0), 2);
        // Full of fresh entries: everything goes.
        m.insert_at("d", 1, at(110));
        assert_eq!(m.get_at("b", at(110)), None);
        assert_eq!(m.get_at("d", at(110)), Some(1));
    }
}
