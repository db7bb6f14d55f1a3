//! One value a web node computes at most once per period and shares between requests: the
//! instance's counts (R-API), the trends. Both are costly to compute and asked for by anyone,
//! anonymous clients included, so a burst of requests must not become a burst of scans.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The last computed value and when it was computed. Callers arriving while it is being
/// computed wait for that computation rather than start their own.
pub struct Recent<T> {
    ttl: Duration,
    last: tokio::sync::Mutex<Option<(T, Instant)>>,
}

impl<T: Clone> Recent<T> {
    pub fn new(ttl: Duration) -> Arc<Recent<T>> {
        Arc::new(Recent {
            ttl,
            last: tokio::sync::Mutex::new(None),
        })
    }

    /// The value, computed by `compute` only when the last one is older than the period. A
    /// failed computation keeps nothing: the next caller tries again.
    pub async fn get<E, F>(&self, compute: impl FnOnce() -> F) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
    {
        // Held across the computation on purpose: one at a time per process.
        let mut last = self.last.lock().await;
        if let Some((v, at)) = &*last
            && at.elapsed() < self.ttl
        {
            return Ok(v.clone());
        }
        let v = compute().await?;
        *last = Some((v.clone(), Instant::now()));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn computes_once_per_period_and_again_after_a_failure() {
        let cell: Arc<Recent<u32>> = Recent::new(Duration::from_secs(3600));
        let failed: Result<u32, &str> = cell.get(|| async { Err("down") }).await;
        assert_eq!(failed, Err("down"));
        let first: Result<u32, &str> = cell.get(|| async { Ok(1) }).await;
        assert_eq!(first, Ok(1));
        let kept: Result<u32, &str> = cell.get(|| async { Ok(2) }).await;
        assert_eq!(kept, Ok(1), "within the period the first value is kept");
        let expired: Arc<Recent<u32>> = Recent::new(Duration::ZERO);
        let _: Result<u32, &str> = expired.get(|| async { Ok(1) }).await;
        let again: Result<u32, &str> = expired.get(|| async { Ok(2) }).await;
        assert_eq!(again, Ok(2), "past the period it is computed again");
    }
}
