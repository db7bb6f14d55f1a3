//! Step 5 of the pipeline: the status (written only when it changed) and the events.

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::observe::World;
use super::{Error, MANAGER};
use crate::budget::Budget;
use crate::crd::{Hollo, HolloStatus, Mode, Phase, RoleStatus};
use crate::phase::{self, Plan};
use crate::resources::labels::Component;
use crate::resources::migration;
use crate::status;

/// Start to completion of the last succeeded migration Job among `jobs` (the per-Hollo
/// `hollo_operator_hollo_migration_duration_seconds`; R-OP-OPS).
pub fn migration_seconds(jobs: &[std::sync::Arc<k8s_openapi::api::batch::v1::Job>]) -> Option<f64> {
    jobs.iter()
        .filter(|j| {
            j.labels()
                .get(crate::resources::labels::COMPONENT)
                .map(String::as_str)
                == Some(Component::Migration.as_str())
        })
        .filter_map(|j| {
            let s = j.status.as_ref()?;
            let (start, end) = (s.start_time.as_ref()?, s.completion_time.as_ref()?);
            Some((end.0, end.0.duration_since(start.0).as_secs_f64()))
        })
        .max_by_key(|(end, _)| *end)
        .map(|(_, secs)| secs)
}

/// `status.lastCleanup` (R-OP-OPS): each cleanup CronJob's `lastSuccessfulTime`.
pub fn last_cleanup(
    hollo: &Hollo,
    cron_jobs: &[std::sync::Arc<k8s_openapi::api::batch::v1::CronJob>],
) -> Option<crate::crd::LastCleanup> {
    use crate::resources::maintenance::cron_job_name;
    let at = |which: &str| {
        let name = cron_job_name(hollo, which);
        cron_jobs
            .iter()
            .find(|c| c.name_any() == name)
            .and_then(|c| c.status.as_ref()?.last_successful_time.as_ref())
            .map(|t| t.0.to_string())
    };
    let last = crate::crd::LastCleanup {
        remote_posts: at("remote-posts"),
        media: at("media"),
    };
    (last != crate::crd::LastCleanup::default()).then_some(last)
}

fn role_status(world: &World, c: Component) -> RoleStatus {
    let s = world
        .deployments
        .get(c.as_str())
        .and_then(|d| d.status.as_ref());
    RoleStatus {
        replicas: s.and_then(|s| s.replicas).unwrap_or(0),
        ready_replicas: s.and_then(|s| s.ready_replicas).unwrap_or(0),
    }
}

/// The status after carrying out `plan`.
pub fn status(
    hollo: &Hollo,
    plan: &Plan,
    world: &World,
    autoscaler_missing: Option<String>,
    checks: Vec<status::Check>,
    now: Timestamp,
) -> HolloStatus {
    let spec = &hollo.spec;
    let h = &world.history;
    let (attempts, last_failure, failure_generation) = match &plan.record_failure {
        Some(_) => (
            h.attempts + 1,
            Some(now.to_string()),
            hollo.meta().generation,
        ),
        None => (h.attempts, h.last_failure.clone(), h.failure_generation),
    };
    let (web, worker) = match spec.mode {
        Mode::Split => (
            role_status(world, Component::Web),
            role_status(world, Component::Worker),
        ),
        Mode::All => (
            role_status(world, Component::All),
            role_status(world, Component::All),
        ),
    };
    let budget = Budget::for_spec(spec);
    let inputs = status::Inputs {
        pods_ready: world.observed.pods_ready,
        generation: hollo.meta().generation,
        previous: hollo.status.as_ref(),
        web,
        worker,
        budget: &budget,
        now,
        autoscaler_missing,
        checks,
    };
    let mut s = status::compute(spec, plan, &inputs, attempts, last_failure);
    s.migration_failure_generation = failure_generation;
    s
}

/// The status while the reconcile holds (a Secret the pods need is missing): the previous one,
/// with the failing check and `Degraded` saying why; the phase does not move.
pub fn held(hollo: &Hollo, check: &status::Check, now: Timestamp) -> HolloStatus {
    let mut s = hollo.status.clone().unwrap_or_default();
    let generation = hollo.meta().generation;
    s.observed_generation = generation;
    s.target_version = Some(hollo.spec.version.clone());
    if s.conditions
        .iter()
        .any(|c| c.type_ == status::RECONCILIATION_PAUSED)
    {
        status::set_condition(
            &mut s.conditions,
            status::RECONCILIATION_PAUSED,
            false,
            "Reconciling",
            "",
            generation,
            now,
        );
    }
    for (type_, ok) in [(check.type_, false), (status::DEGRADED, true)] {
        status::set_condition(
            &mut s.conditions,
            type_,
            ok,
            check.reason,
            &check.message,
            generation,
            now,
        );
    }
    s
}

/// The status while reconciliation is paused (R-OP-OPS): the previous one untouched —
/// phase, versions and `observedGeneration` still describe what was last carried out — plus
/// `ReconciliationPaused=True` for the current generation, which tells a client the operator
/// saw the edit and left it alone.
pub fn paused(hollo: &Hollo, now: Timestamp) -> HolloStatus {
    let mut s = hollo.status.clone().unwrap_or_default();
    status::set_condition(
        &mut s.conditions,
        status::RECONCILIATION_PAUSED,
        true,
        "PausedBySpec",
        "spec.reconciliationPaused: the operator changes nothing until it is false again",
        hollo.meta().generation,
        now,
    );
    s
}

/// A Normal event when the paused status is first written (and again after each edit while
/// paused: the edit waits).
pub async fn paused_event(recorder: &Events, hollo: &Hollo) {
    let note = format!(
        "reconciliation paused at generation {}; changes wait until spec.reconciliationPaused is false",
        hollo.meta().generation.unwrap_or(0)
    );
    publish(
        recorder,
        hollo,
        EventType::Normal,
        "ReconciliationPaused",
        "Pause",
        note,
    )
    .await;
}

/// Writes `new` with a server-side apply of the status subresource, unless it is the stored one.
pub async fn write_status(
    client: &Client,
    hollo: &Hollo,
    new: &HolloStatus,
) -> Result<bool, Error> {
    if hollo.status.as_ref() == Some(new) {
        return Ok(false);
    }
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<Hollo> = Api::namespaced(client.clone(), &ns);
    let patch = json!({
        "apiVersion": "hollo.social/v1alpha1",
        "kind": "Hollo",
        "status": new,
    });
    api.patch_status(
        &hollo.name_any(),
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await?;
    Ok(true)
}

/// Where a reconcile's events go. kube's `Recorder` keeps every event it sent for six minutes
/// (a repeat with the same reason for the same `Hollo` becomes a count on the first) and scans
/// all it keeps, under one lock, on each new event. Warnings go through one shared `Recorder`,
/// so a warning repeated while nothing changes (say, KEDA missing, every 30 s) stays one event
/// with a count. A Normal event marks a change that was just written to the status (a phase
/// change, a pause, a resume) and is not repeated while nothing changes; it goes through a
/// recorder that keeps nothing (a phase reached again within six minutes is a new event, not
/// a count on the first): at 1 000 `Hollo`s an install's few phase changes each were
/// thousands of kept events, megabytes held for six minutes (R-OP-STATUS).
#[derive(Clone)]
pub struct Events {
    client: Client,
    reporter: Reporter,
    warnings: Recorder,
}

impl Events {
    pub fn new(client: Client, reporter: Reporter) -> Self {
        let warnings = Recorder::new(client.clone(), reporter.clone());
        Self {
            client,
            reporter,
            warnings,
        }
    }

    fn recorder(&self, type_: EventType) -> Recorder {
        match type_ {
            EventType::Warning => self.warnings.clone(),
            EventType::Normal => Recorder::new(self.client.clone(), self.reporter.clone()),
        }
    }
}

pub async fn publish(
    recorder: &Events,
    hollo: &Hollo,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let recorder = recorder.recorder(type_);
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    // Events are best effort: a failure to record one must not fail the reconcile.
    if let Err(e) = recorder.publish(&ev, &hollo.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not publish event");
    }
}

/// A Warning event when one of the checked inputs (database Secret, SECRET_KEY) turns bad, the
/// HTTPRoute cannot be applied, or the `spec.admin` account cannot be made.
pub async fn check_events(recorder: &Events, hollo: &Hollo, new: &HolloStatus) {
    let previous = hollo.status.clone().unwrap_or_default();
    for c in &new.conditions {
        let checked = [
            status::DATABASE,
            status::SECRET_KEY,
            status::HTTP_ROUTE,
            status::VERSION_ACCEPTED,
            status::BACKED_UP,
            status::ADMIN_ACCOUNT,
        ];
        if !checked.contains(&c.type_.as_str()) || c.status != "False" {
            continue;
        }
        // The first account on its way is no warning.
        if c.type_ == status::ADMIN_ACCOUNT
            && crate::resources::admin::PENDING.contains(&c.reason.as_str())
        {
            continue;
        }
        let was = previous.conditions.iter().find(|p| p.type_ == c.type_);
        if was.is_some_and(|p| p.status == "False" && p.reason == c.reason) {
            continue;
        }
        let reason = c.reason.clone();
        publish(
            recorder,
            hollo,
            EventType::Warning,
            &reason,
            "CheckInputs",
            c.message.clone(),
        )
        .await;
    }
}

/// The events of one reconcile: a failed migration, a phase change, an exceeded budget, a
/// missing KEDA.
pub async fn events(
    recorder: &Events,
    hollo: &Hollo,
    plan: &Plan,
    new: &HolloStatus,
    autoscaler_missing: Option<&str>,
) {
    let spec = &hollo.spec;
    let name = hollo.name_any();
    let previous = hollo.status.clone().unwrap_or_default();
    if let Some(why) = autoscaler_missing {
        let kind = EventType::Warning;
        publish(
            recorder,
            hollo,
            kind,
            "KedaNotInstalled",
            "Autoscale",
            why.into(),
        )
        .await;
    }
    if let Some(reason) = &plan.record_failure {
        let attempts = new.migration_attempts;
        let job = migration::kind_job_name(&name, plan.migration_kind, &spec.version, attempts - 1);
        let meanwhile = match plan.migration_kind {
            migration::MigrationKind::Full => "the new version does not start",
            migration::MigrationKind::Pre => "the old version keeps serving",
            migration::MigrationKind::Post => {
                "the new version keeps serving, its post-deploy migrations pending"
            }
        };
        let note = format!(
            "migration Job {job} failed ({reason}); retry {} in {}s; {meanwhile}",
            attempts,
            phase::backoff(attempts).as_secs()
        );
        publish(
            recorder,
            hollo,
            EventType::Warning,
            "MigrationFailed",
            "Migrate",
            note,
        )
        .await;
    }
    let was_paused = previous
        .conditions
        .iter()
        .any(|c| c.type_ == status::RECONCILIATION_PAUSED && c.status == "True");
    if was_paused {
        let note = "reconciliation resumed (spec.reconciliationPaused is false)".to_string();
        publish(
            recorder,
            hollo,
            EventType::Normal,
            "ReconciliationResumed",
            "Resume",
            note,
        )
        .await;
    }
    if plan.phase != previous.phase {
        tracing::info!(
            hollo = %name, namespace = hollo.namespace().unwrap_or_default(),
            from = previous.phase.as_str(), to = plan.phase.as_str(),
            target_version = %spec.version, "phase changed"
        );
        let type_ = if matches!(plan.phase, Phase::MigrationFailed | Phase::BackupFailed) {
            EventType::Warning
        } else {
            EventType::Normal
        };
        let note = format!(
            "phase {} → {} (target {})",
            previous.phase.as_str(),
            plan.phase.as_str(),
            spec.version
        );
        publish(
            recorder,
            hollo,
            type_,
            plan.phase.as_str(),
            "PhaseChange",
            note,
        )
        .await;
    }
    let budget = Budget::for_spec(spec);
    let was_over = previous
        .conditions
        .iter()
        .any(|c| c.type_ == status::CONNECTION_BUDGET && c.status == "False");
    let generation_changed = previous.observed_generation != hollo.meta().generation;
    if !budget.fits() && (!was_over || generation_changed) {
        let kind = EventType::Warning;
        let note = budget.explain();
        publish(
            recorder,
            hollo,
            kind,
            "ConnectionBudgetExceeded",
            "CheckBudget",
            note,
        )
        .await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use k8s_openapi::api::batch::v1::{Job, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn job(component: &str, start: i64, end: Option<i64>) -> Arc<Job> {
        let t = |s: i64| Time(Timestamp::from_second(s).expect("time"));
        Arc::new(Job {
            metadata: ObjectMeta {
                labels: Some(
                    [(
                        crate::resources::labels::COMPONENT.to_string(),
                        component.into(),
                    )]
                    .into(),
                ),
                ..ObjectMeta::default()
            },
            status: Some(JobStatus {
                start_time: Some(t(start)),
                completion_time: end.map(t),
                ..JobStatus::default()
            }),
            ..Job::default()
        })
    }

    #[test]
    fn migration_seconds_of_the_last_completed_migration_job() {
        assert_eq!(migration_seconds(&[]), None);
        let jobs = [
            job("migration", 100, Some(130)),
            job("migration", 200, Some(212)),
            job("migration", 300, None),
            job(migration::PROBE_COMPONENT, 400, Some(500)),
        ];
        assert_eq!(migration_seconds(&jobs), Some(12.0));
    }

    /// R-OP-OPS: pausing keeps everything the last reconcile reported and adds
    /// `ReconciliationPaused=True` for the current generation.
    #[test]
    fn paused_keeps_the_status_and_says_so_for_this_generation() {
        let mut h = crate::testutil::hollo(crate::testutil::spec());
        h.status = Some(HolloStatus {
            phase: Phase::Running,
            observed_generation: Some(2),
            current_version: Some("0.1.0".into()),
            ..HolloStatus::default()
        });
        let now: Timestamp = "2026-12-03T16:00:00Z".parse().expect("time");
        let s = paused(&h, now);
        assert_eq!(s.phase, Phase::Running);
        assert_eq!(
            s.observed_generation,
            Some(2),
            "the edit was not carried out"
        );
        assert_eq!(s.current_version.as_deref(), Some("0.1.0"));
        let c = s
            .conditions
            .iter()
            .find(|c| c.type_ == status::RECONCILIATION_PAUSED)
            .expect("condition");
        assert_eq!(c.status, "True");
        assert_eq!(c.observed_generation, Some(3));
        h.status = Some(s.clone());
        assert_eq!(paused(&h, now), s, "steady while paused: no new write");
    }
}
