//! Leader election on a `coordination.k8s.io/v1` Lease, so two operator replicas never both
//! reconcile (R-OP-HA). Optimistic concurrency (`resourceVersion` on replace) makes the
//! take-over atomic: of two candidates racing for an expired lease, one gets a 409 Conflict.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone)]
pub struct LeaseConfig {
    pub name: String,
    pub identity: String,
    /// A holder that has not renewed for this long has lost the lease.
    pub duration: Duration,
    /// How often the holder renews (well within `duration`).
    pub renew_every: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// No Lease object yet: create it holding it.
    Create,
    /// We hold it: renew.
    Renew,
    /// Free or expired: take it over.
    Acquire,
    /// Someone else holds a live lease.
    Wait,
}

/// Pure: what to do given the current lease.
pub fn decide(lease: Option<&LeaseSpec>, me: &str, now: Timestamp) -> Decision {
    let Some(spec) = lease else {
        return Decision::Create;
    };
    match spec.holder_identity.as_deref() {
        None | Some("") => Decision::Acquire,
        Some(holder) if holder == me => Decision::Renew,
        Some(_) => {
            let duration =
                SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(15)));
            let expired = spec
                .renew_time
                .as_ref()
                .is_none_or(|t| t.0.saturating_add(duration).is_ok_and(|end| end < now));
            if expired {
                Decision::Acquire
            } else {
                Decision::Wait
            }
        }
    }
}

fn held_spec(cfg: &LeaseConfig, previous: Option<&LeaseSpec>, now: Timestamp) -> LeaseSpec {
    let taking_over = previous
        .and_then(|p| p.holder_identity.as_deref())
        .is_none_or(|h| h != cfg.identity);
    let transitions = previous.and_then(|p| p.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(cfg.identity.clone()),
        lease_duration_seconds: Some(i32::try_from(cfg.duration.as_secs()).unwrap_or(15)),
        acquire_time: if taking_over {
            Some(MicroTime(now))
        } else {
            previous.and_then(|p| p.acquire_time.clone())
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if taking_over && previous.is_some() {
            transitions + 1
        } else {
            transitions
        }),
        ..LeaseSpec::default()
    }
}

/// One attempt: returns whether we hold the lease afterwards.
pub async fn try_hold(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let existing = api.get_opt(&cfg.name).await?;
    let spec = existing.as_ref().and_then(|l| l.spec.as_ref());
    match decide(spec, &cfg.identity, now) {
        Decision::Wait => Ok(false),
        Decision::Create => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(cfg.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(held_spec(cfg, None, now)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                // Another candidate created it first.
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        Decision::Renew | Decision::Acquire => {
            let Some(mut lease) = existing else {
                return Ok(false);
            };
            lease.spec = Some(held_spec(cfg, lease.spec.as_ref(), now));
            // `lease.metadata.resource_version` is kept: a concurrent writer makes this a 409.
            match api.replace(&cfg.name, &PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Blocks until this replica holds the lease, or `shutdown` fires (then `false`).
pub async fn acquire(api: &Api<Lease>, cfg: &LeaseConfig, shutdown: &CancellationToken) -> bool {
    loop {
        match try_hold(api, cfg).await {
            Ok(true) => {
                tracing::info!(lease = %cfg.name, identity = %cfg.identity, "acquired leadership");
                return true;
            }
            Ok(false) => tracing::debug!(lease = %cfg.name, "another replica leads; standing by"),
            Err(e) => tracing::warn!(error = %e, "lease check failed"),
        }
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = tokio::time::sleep(cfg.renew_every) => {}
        }
    }
}

/// Renews until `shutdown` fires, then releases. Losing the lease cancels `shutdown` so the
/// controller stops at once: reconciling without the lease would race the new leader.
pub async fn hold(api: Api<Lease>, cfg: LeaseConfig, shutdown: CancellationToken) {
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
            () = tokio::time::sleep(cfg.renew_every) => {}
        }
        match try_hold(&api, &cfg).await {
            Ok(true) => last_renewed = tokio::time::Instant::now(),
            Ok(false) => {
                tracing::error!(lease = %cfg.name, "leadership lost; stopping");
                shutdown.cancel();
                return;
            }
            Err(e) if last_renewed.elapsed() < cfg.duration => {
                tracing::warn!(error = %e, "lease renewal failed; retrying");
            }
            Err(e) => {
                tracing::error!(error = %e, "could not renew the lease in time; stopping");
                shutdown.cancel();
                return;
            }
        }
    }
    release(&api, &cfg).await;
}

/// Gives the lease up so a standby takes over without waiting for expiry.
pub async fn release(api: &Api<Lease>, cfg: &LeaseConfig) {
    let Ok(Some(mut lease)) = api.get_opt(&cfg.name).await else {
        return;
    };
    let ours = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .is_some_and(|h| h == cfg.identity);
    if !ours {
        return;
    }
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
    }
    match api.replace(&cfg.name, &PostParams::default(), &lease).await {
        Ok(_) => tracing::info!(lease = %cfg.name, "released leadership"),
        Err(e) => tracing::warn!(error = %e, "could not release the lease"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("valid")
    }

    fn held_by(who: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(who.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn missing_lease_is_created() {
        assert_eq!(decide(None, "a", at(0)), Decision::Create);
    }

    #[test]
    fn own_lease_is_renewed() {
        assert_eq!(
            decide(Some(&held_by("a", 0)), "a", at(100)),
            Decision::Renew
        );
    }

    #[test]
    fn live_foreign_lease_waits_and_expired_one_is_taken() {
        let l = held_by("b", 0);
        assert_eq!(decide(Some(&l), "a", at(10)), Decision::Wait);
        assert_eq!(decide(Some(&l), "a", at(15)), Decision::Wait);
        assert_eq!(decide(Some(&l), "a", at(16)), Decision::Acquire);
    }

    #[test]
    fn released_lease_is_acquired() {
        let mut l = held_by("b", 0);
        l.holder_identity = None;
        assert_eq!(decide(Some(&l), "a", at(1)), Decision::Acquire);
    }

    #[test]
    fn take_over_counts_a_transition() {
        let cfg = LeaseConfig {
            name: "hollo-operator".into(),
            identity: "a".into(),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        };
        let taken = held_spec(&cfg, Some(&held_by("b", 0)), at(20));
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(1));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(20))));
        let renewed = held_spec(&cfg, Some(&taken), at(25));
        assert_eq!(renewed.lease_transitions, Some(1));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(20))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(25))));
    }
}
