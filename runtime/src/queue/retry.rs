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

#[cfg(test)]
mod tests {
    use super::*;

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
