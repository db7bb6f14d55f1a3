//! Retry policies: what to do after a *recorded* failure. A process exit is never recorded
//! (R-SHUT-2): the lease simply ends and the message runs again with the same attempt count.

use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum RetryPolicy {
    /// Never retry: the first recorded failure is final.
    None,
    /// Retry every `interval`; the message fails on its `max_failures`-th recorded failure
    /// (imports and cleanups: 5 s × 5, R-JOB-3).
    Fixed {
        interval: Duration,
        max_failures: u32,
    },
    /// `initial × factor^(n-1)` with ±`jitter` (a fraction), each delay capped at `cap`; at most
    /// `max_attempts` executions in total (outbox: 1 s ×2, 10 attempts, 12 h cap).
    Exponential {
        initial: Duration,
        factor: f64,
        max_attempts: u32,
        cap: Duration,
        jitter: f64,
    },
}

impl RetryPolicy {
    pub fn fixed(interval: Duration, max_failures: u32) -> Self {
        RetryPolicy::Fixed {
            interval,
            max_failures,
        }
    }

    pub fn exponential(initial: Duration, max_attempts: u32) -> Self {
        RetryPolicy::Exponential {
            initial,
            factor: 2.0,
            max_attempts,
            cap: Duration::from_secs(12 * 3600),
            jitter: 0.1,
        }
    }

    /// Delay before the next run after the `failures`-th recorded failure (1-based), or `None`
    /// when the policy gives up. `unit` in [0,1) drives the jitter so callers and tests choose
    /// the randomness.
    pub fn next_delay(&self, failures: u32, unit: f64) -> Option<Duration> {
        match *self {
            RetryPolicy::None => None,
            RetryPolicy::Fixed {
                interval,
                max_failures,
            } => (failures < max_failures).then_some(interval),
            RetryPolicy::Exponential {
                initial,
                factor,
                max_attempts,
                cap,
                jitter,
            } => {
                if failures >= max_attempts {
                    return None;
                }
                let exp = factor.powi(failures.saturating_sub(1).min(1000) as i32);
                let base = (initial.as_secs_f64() * exp).min(cap.as_secs_f64());
                let spread = 1.0 + jitter * (2.0 * unit.clamp(0.0, 1.0) - 1.0);
                Some(Duration::from_secs_f64(
                    (base * spread).clamp(0.0, cap.as_secs_f64()),
                ))
            }
        }
    }
}

/// The one back-off of every retry loop that waits on something outside the process (claims
/// that fail, LISTEN reconnects, a database that is down): doubling from `initial` to `max`,
/// each wait jittered by ±20 % so processes that lost the same database do not come back in
/// lockstep. `reset` after a success.
#[derive(Clone, Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    const JITTER: f64 = 0.2;

    pub fn new(initial: Duration, max: Duration) -> Self {
        Backoff {
            initial,
            max,
            next: initial,
        }
    }

    /// The wait before the next try (jittered), doubling the one after it up to `max`.
    pub fn next_wait(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        jittered(base, Self::JITTER, rand::random::<f64>())
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// `base` spread by ±`fraction`, `unit` in [0,1) choosing where.
fn jittered(base: Duration, fraction: f64, unit: f64) -> Duration {
    Duration::from_secs_f64(
        base.as_secs_f64() * (1.0 + fraction * (2.0 * unit.clamp(0.0, 1.0) - 1.0)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_max_within_its_jitter_and_resets() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(800));
        let waits: Vec<f64> = (0..6).map(|_| b.next_wait().as_secs_f64()).collect();
        for (w, base) in waits.iter().zip([0.1, 0.2, 0.4, 0.8, 0.8, 0.8]) {
            assert!(
                (base * 0.8 - 1e-9..=base * 1.2 + 1e-9).contains(w),
                "{w} vs {base}"
            );
        }
        b.reset();
        assert!(b.next_wait() <= Duration::from_millis(120));
        assert_eq!(
            jittered(Duration::from_secs(10), 0.2, 0.0),
            Duration::from_secs(8)
        );
    }

    #[test]
    fn fixed_retries_every_interval_and_fails_on_the_fifth_failure() {
        let p = RetryPolicy::fixed(Duration::from_secs(5), 5);
        for n in 1..5 {
            assert_eq!(
                p.next_delay(n, 0.3),
                Some(Duration::from_secs(5)),
                "failure {n}"
            );
        }
        assert_eq!(p.next_delay(5, 0.3), None);
    }

    #[test]
    fn exponential_doubles_caps_and_stops_after_max_attempts() {
        let p = RetryPolicy::Exponential {
            initial: Duration::from_secs(1),
            factor: 2.0,
            max_attempts: 10,
            cap: Duration::from_secs(12 * 3600),
            jitter: 0.0,
        };
        let delays: Vec<u64> = (1..10)
            .map(|n| p.next_delay(n, 0.5).map(|d| d.as_secs()).unwrap_or(0))
            .collect();
        assert_eq!(delays, vec![1, 2, 4, 8, 16, 32, 64, 128, 256]);
        assert_eq!(p.next_delay(10, 0.5), None);
        let capped = RetryPolicy::Exponential {
            initial: Duration::from_secs(3600),
            factor: 2.0,
            max_attempts: 100,
            cap: Duration::from_secs(12 * 3600),
            jitter: 0.0,
        };
        assert_eq!(
            capped.next_delay(50, 0.5),
            Some(Duration::from_secs(12 * 3600))
        );
    }

    #[test]
    fn jitter_stays_within_its_fraction_and_under_the_cap() {
        let p = RetryPolicy::exponential(Duration::from_secs(10), 5);
        let lo = p.next_delay(1, 0.0).map(|d| d.as_secs_f64());
        let hi = p.next_delay(1, 0.999).map(|d| d.as_secs_f64());
        assert_eq!(lo, Some(9.0));
        assert!(hi.is_some_and(|h| h > 10.9 && h <= 11.0), "{hi:?}");
    }

    #[test]
    fn none_never_retries() {
        assert_eq!(RetryPolicy::None.next_delay(1, 0.5), None);
    }
}
