//! Pure status computation: plan + observed replicas + budget → `HolloStatus` (R-OP-STATUS).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

use crate::budget::Budget;
use crate::crd::{HolloSpec, HolloStatus, Mode, Phase, RoleStatus};
use crate::phase::{Plan, Workloads};
use crate::resources::migration::MigrationKind;

pub const READY: &str = "Ready";
pub const PROGRESSING: &str = "Progressing";
pub const MIGRATED: &str = "Migrated";
pub const DEGRADED: &str = "Degraded";
pub const CONNECTION_BUDGET: &str = "ConnectionBudget";
pub const WORKERS_AVAILABLE: &str = "WorkersAvailable";
/// `spec.stopped` carried out (R-OP-OPS).
pub const STOPPED: &str = "Stopped";
/// `spec.reconciliationPaused` (R-OP-OPS).
pub const RECONCILIATION_PAUSED: &str = "ReconciliationPaused";
// The types of the `Check` conditions, which only some specs have.
pub const DATABASE: &str = "Database";
pub const SECRET_KEY: &str = "SecretKey";
pub const UPGRADE_STRATEGY: &str = "UpgradeStrategy";
/// A target version older than the running one, refused or accepted against the database's
/// schema (R-OP-ZD).
pub const VERSION_ACCEPTED: &str = "VersionAccepted";
/// `upgrade.backup`: the pre-migration CloudNativePG Backup (R-OP-OPS).
pub const BACKED_UP: &str = "BackedUp";
/// `web.httpRoute` (R-OP-OPS): applied, or the Gateway API is not installed.
pub const HTTP_ROUTE: &str = "HTTPRoute";
/// `spec.admin`: the declared first account (issue 63 item 7).
pub const ADMIN_ACCOUNT: &str = "AdminAccount";

/// Everything the status needs besides the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs<'a> {
    pub generation: Option<i64>,
    pub previous: Option<&'a HolloStatus>,
    /// The HTTP role (web, or all in all mode).
    pub web: RoleStatus,
    /// Workers (all nodes in all mode consume the queues themselves).
    pub worker: RoleStatus,
    pub budget: &'a Budget,
    pub now: Timestamp,
    /// Every desired pod of the roles is ready.
    pub pods_ready: bool,
    /// The autoscaler the spec asks for could not be made (KEDA's API is not installed).
    pub autoscaler_missing: Option<String>,
    /// Conditions only some specs have (database source, secret key, upgrade strategy), in
    /// order; a failing one marks the resource `Degraded`.
    pub checks: Vec<Check>,
}

/// One extra condition: a fact about the spec's inputs the operator checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub type_: &'static str,
    pub ok: bool,
    pub reason: &'static str,
    pub message: String,
}

impl Check {
    /// A `False` that is information, not a problem: it does not mark the `Hollo` `Degraded`.
    pub fn is_note(&self) -> bool {
        self.type_ == UPGRADE_STRATEGY
            || (self.type_ == ADMIN_ACCOUNT
                && crate::resources::admin::PENDING.contains(&self.reason))
    }
}

/// The `HTTPRoute` condition when `web.httpRoute` is enabled: `missing` is why it could not be
/// applied (the Gateway API's CRDs are absent), which degrades the resource like a missing KEDA.
pub fn http_route_check(missing: Option<&str>) -> Check {
    match missing {
        Some(why) => Check {
            type_: HTTP_ROUTE,
            ok: false,
            reason: "GatewayAPINotInstalled",
            message: why.to_string(),
        },
        None => Check {
            type_: HTTP_ROUTE,
            ok: true,
            reason: "Applied",
            message: String::new(),
        },
    }
}

fn condition(
    inputs: &Inputs<'_>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: String,
) -> Condition {
    let status = if ok { "True" } else { "False" };
    // Keep the transition time while the status is unchanged, so it tells when it last flipped.
    let since = inputs
        .previous
        .and_then(|p| p.conditions.iter().find(|c| c.type_ == type_))
        .filter(|c| c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or(Time(inputs.now));
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message,
        observed_generation: inputs.generation,
        last_transition_time: since,
    }
}

/// Sets (or adds) a condition, keeping its transition time while its status is unchanged.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: Timestamp,
) {
    let status = if ok { "True" } else { "False" };
    let fresh = Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: Time(now),
    };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == status => {
            let since = c.last_transition_time.clone();
            *c = Condition {
                last_transition_time: since,
                ..fresh
            };
        }
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

/// The status after a reconcile that carried out `plan`.
pub fn compute(
    spec: &HolloSpec,
    plan: &Plan,
    inputs: &Inputs<'_>,
    migration_attempts: i32,
    last_failure: Option<String>,
) -> HolloStatus {
    let phase = plan.phase;
    let failed_reason = || {
        let meanwhile = match plan.migration_kind {
            MigrationKind::Full => "nothing of the new version runs",
            MigrationKind::Pre => "the old version keeps serving",
            MigrationKind::Post => "the new version serves, its post-deploy migrations pending",
        };
        format!(
            "migration of {} failed {} time(s); retrying with back-off, {meanwhile}",
            spec.version, migration_attempts
        )
    };
    let in_motion = matches!(
        phase,
        Phase::CheckingCompatibility
            | Phase::BackingUp
            | Phase::ScalingDown
            | Phase::Migrating
            | Phase::PreMigrating
            | Phase::PostMigrating
            | Phase::RollingOut
    );
    let workers_ready = inputs.worker.ready_replicas;
    let (workers_ok, workers_reason, workers_msg) = match spec.mode {
        Mode::All => (
            inputs.web.ready_replicas > 0,
            if inputs.web.ready_replicas > 0 {
                "AllNodesConsume"
            } else {
                "NoReadyNodes"
            },
            format!(
                "{} ready all node(s) consume the queues",
                inputs.web.ready_replicas
            ),
        ),
        Mode::Split if workers_ready > 0 => (
            true,
            "WorkersReady",
            format!("{workers_ready} worker(s) ready"),
        ),
        // The seed's trap: web serves and enqueues while nothing consumes the queues.
        Mode::Split if inputs.web.ready_replicas > 0 => (
            false,
            "NoReadyWorkers",
            "no worker is ready: web pods accept and enqueue work but nothing processes it"
                .to_string(),
        ),
        Mode::Split => (false, "NoReadyWorkers", "no worker is ready".to_string()),
    };
    // A migration that failed before and is being retried is still a degraded state.
    let retrying = !plan.migrated && migration_attempts > 0;
    // Waiting for a maintenance window, the old version serves as it does when Running.
    let serving = matches!(phase, Phase::Running | Phase::WaitingForWindow);
    let unready = serving && !inputs.pods_ready;
    // A failing check that is more than a note (the upgrade strategy falling back is one, and
    // so is the first account still on its way).
    let failing = inputs.checks.iter().find(|c| !c.ok && !c.is_note());
    let mut conditions = vec![
        condition(
            inputs,
            READY,
            serving && inputs.pods_ready,
            if unready {
                "PodsNotReady"
            } else {
                phase.as_str()
            },
            format!(
                "phase {}; web {}/{} ready, workers {}/{} ready",
                phase.as_str(),
                inputs.web.ready_replicas,
                inputs.web.replicas,
                inputs.worker.ready_replicas,
                inputs.worker.replicas
            ),
        ),
        condition(
            inputs,
            PROGRESSING,
            in_motion,
            if in_motion || phase == Phase::WaitingForWindow {
                phase.as_str()
            } else {
                "Stable"
            },
            match phase {
                Phase::ScalingDown => {
                    "stopping every pod of the old version before migrating".into()
                }
                Phase::Migrating => format!("migration Job of {} running", spec.version),
                Phase::PreMigrating => format!(
                    "pre-deploy migration Job of {} running; the old version serves",
                    spec.version
                ),
                Phase::PostMigrating => format!(
                    "no old pod left; post-deploy migration Job of {} running",
                    spec.version
                ),
                Phase::RollingOut => match &plan.workloads {
                    Workloads::WebOnly(v) if *v == spec.version => format!(
                        "rolling out {} web pods; workers wait for the last old pod (different task definitions)",
                        spec.version
                    ),
                    Workloads::WebOnly(_) => format!(
                        "stopping the old workers before {} starts (different task definitions); web serves",
                        spec.version
                    ),
                    _ => format!("rolling out {}", spec.version),
                },
                Phase::BackingUp => {
                    "CloudNativePG Backup before migrating; the old version serves".into()
                }
                Phase::CheckingCompatibility => {
                    "reading task-definition and schema versions of old and new image".into()
                }
                Phase::WaitingForWindow => plan.window.clone().unwrap_or_default(),
                _ => String::new(),
            },
        ),
        condition(
            inputs,
            MIGRATED,
            plan.migrated,
            if plan.migrated {
                "MigrationSucceeded"
            } else if phase == Phase::MigrationFailed {
                "MigrationFailed"
            } else {
                "MigrationPending"
            },
            if plan.migrated && plan.expand.is_some() {
                format!(
                    "pre-deploy migrations applied for {}; post-deploy ones run once no old pod is left",
                    spec.version
                )
            } else if plan.migrated {
                format!("schema migrated for {}", spec.version)
            } else {
                format!("schema not yet migrated for {}", spec.version)
            },
        ),
        condition(
            inputs,
            DEGRADED,
            phase == Phase::MigrationFailed
                || retrying
                || unready
                || inputs.autoscaler_missing.is_some()
                || failing.is_some(),
            if phase == Phase::MigrationFailed {
                "MigrationFailed"
            } else if retrying {
                "MigrationRetrying"
            } else if let Some(c) = failing {
                c.reason
            } else if unready {
                "PodsNotReady"
            } else if inputs.autoscaler_missing.is_some() {
                "KedaNotInstalled"
            } else {
                "AsExpected"
            },
            if phase == Phase::MigrationFailed || retrying {
                match &last_failure {
                    Some(at) => format!("{} (last failure {at})", failed_reason()),
                    None => failed_reason(),
                }
            } else if let Some(c) = failing {
                c.message.clone()
            } else if unready {
                "some pods of the running version are not ready".to_string()
            } else if let Some(m) = &inputs.autoscaler_missing {
                m.clone()
            } else {
                String::new()
            },
        ),
        condition(
            inputs,
            CONNECTION_BUDGET,
            inputs.budget.fits(),
            if inputs.budget.fits() {
                "WithinBudget"
            } else {
                "OverBudget"
            },
            inputs.budget.explain(),
        ),
        condition(
            inputs,
            WORKERS_AVAILABLE,
            workers_ok,
            workers_reason,
            workers_msg,
        ),
        condition(
            inputs,
            STOPPED,
            phase == Phase::Stopped,
            if phase == Phase::Stopped {
                "StoppedBySpec"
            } else {
                "NotStopped"
            },
            if phase == Phase::Stopped {
                "spec.stopped: every role scaled to 0, autoscalers removed".into()
            } else {
                String::new()
            },
        ),
        // This status is computed only by a reconcile that runs: never paused here.
        condition(
            inputs,
            RECONCILIATION_PAUSED,
            false,
            "Reconciling",
            String::new(),
        ),
    ];
    for c in &inputs.checks {
        conditions.push(condition(
            inputs,
            c.type_,
            c.ok,
            c.reason,
            c.message.clone(),
        ));
    }
    HolloStatus {
        phase,
        observed_generation: inputs.generation,
        current_version: plan.current_version.clone(),
        target_version: Some(spec.version.clone()),
        web: inputs.web.clone(),
        worker: inputs.worker.clone(),
        migration_attempts,
        last_migration_failure: last_failure,
        // Set by the reconciler, which knows when a failure was recorded.
        migration_failure_generation: None,
        conditions,
        // Set by the reconciler from the cleanup CronJobs (R-OP-OPS).
        last_cleanup: None,
        expand_contract: plan.expand.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::{POLL, STEADY_REQUEUE, Workloads};
    use crate::testutil;

    fn plan(phase: Phase, migrated: bool) -> Plan {
        Plan {
            migrated,
            requeue: if phase == Phase::Running {
                STEADY_REQUEUE
            } else {
                POLL
            },
            ..Plan::new(
                phase,
                Workloads::Run("0.1.0".into()),
                migrated.then(|| "0.1.0".to_string()),
            )
        }
    }

    /// `(status, reason)` of the condition `t`.
    fn status_reason<'a>(s: &'a HolloStatus, t: &str) -> (&'a str, &'a str) {
        let c = cond(s, t);
        (c.status.as_str(), c.reason.as_str())
    }

    fn cond<'a>(s: &'a HolloStatus, t: &str) -> &'a Condition {
        s.conditions
            .iter()
            .find(|c| c.type_ == t)
            .expect("condition present")
    }

    fn now() -> Timestamp {
        Timestamp::from_second(1_800_000_000).expect("valid")
    }

    /// Inputs at generation 1, nothing before, every pod ready, no check: `(replicas, ready)`
    /// of the HTTP role and of the workers.
    fn inputs(budget: &Budget, web: (i32, i32), worker: (i32, i32)) -> Inputs<'_> {
        let role = |(replicas, ready_replicas)| RoleStatus {
            replicas,
            ready_replicas,
        };
        Inputs {
            generation: Some(1),
            previous: None,
            web: role(web),
            worker: role(worker),
            budget,
            now: now(),
            pods_ready: true,
            autoscaler_missing: None,
            checks: vec![],
        }
    }

    #[test]
    fn checks_become_conditions_and_only_real_problems_degrade() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let check = |type_, ok, reason: &'static str| Check {
            type_,
            ok,
            reason,
            message: format!("{reason} said"),
        };
        let mut inputs = Inputs {
            generation: Some(3),
            checks: vec![check(UPGRADE_STRATEGY, false, "RecreateUsed")],
            ..inputs(&budget, (2, 2), (2, 2))
        };
        let s = compute(&spec, &plan(Phase::Running, true), &inputs, 0, None);
        assert_eq!(
            status_reason(&s, UPGRADE_STRATEGY),
            ("False", "RecreateUsed")
        );
        assert_eq!(cond(&s, DEGRADED).status, "False", "a fallback is a note");
        inputs
            .checks
            .push(check(SECRET_KEY, false, "SecretKeyTooShort"));
        let s = compute(&spec, &plan(Phase::Running, true), &inputs, 0, None);
        let d = cond(&s, DEGRADED);
        assert_eq!(status_reason(&s, DEGRADED), ("True", "SecretKeyTooShort"));
        assert_eq!(d.message, "SecretKeyTooShort said");
    }

    /// Issue 63 item 6: waiting for a window, the old version serves (`Ready`), nothing moves
    /// (`Progressing=False`) and the message tells when the next window opens; not degraded.
    #[test]
    fn waiting_for_a_window_is_ready_and_says_until_when() {
        let mut spec = testutil::spec();
        spec.version = "0.2.0".into();
        let budget = Budget::for_spec(&spec);
        let note = "version 0.2.0 waits for the next maintenance window, opening at …";
        let waiting = Plan {
            window: Some(note.into()),
            requeue: STEADY_REQUEUE,
            ..plan(Phase::WaitingForWindow, false)
        };
        let s = compute(&spec, &waiting, &inputs(&budget, (2, 2), (2, 2)), 0, None);
        assert_eq!(s.phase, Phase::WaitingForWindow);
        assert_eq!(status_reason(&s, READY), ("True", "WaitingForWindow"));
        assert_eq!(
            status_reason(&s, PROGRESSING),
            ("False", "WaitingForWindow")
        );
        assert_eq!(cond(&s, PROGRESSING).message, note);
        assert_eq!(cond(&s, DEGRADED).status, "False");
        assert_eq!(status_reason(&s, MIGRATED), ("False", "MigrationPending"));
        let unready = Inputs {
            pods_ready: false,
            ..inputs(&budget, (2, 1), (2, 2))
        };
        let s = compute(&spec, &waiting, &unready, 0, None);
        assert_eq!(status_reason(&s, READY), ("False", "PodsNotReady"));
        assert_eq!(status_reason(&s, DEGRADED), ("True", "PodsNotReady"));
    }

    #[test]
    fn set_condition_keeps_the_transition_time_while_unchanged() {
        let mut conds = vec![];
        let t0 = now();
        let t1 = Timestamp::from_second(1_800_000_100).expect("valid");
        set_condition(
            &mut conds,
            DATABASE,
            false,
            "SecretMissing",
            "a",
            Some(1),
            t0,
        );
        set_condition(
            &mut conds,
            DATABASE,
            false,
            "SecretMissing",
            "b",
            Some(2),
            t1,
        );
        assert_eq!(conds.len(), 1);
        assert_eq!(conds[0].last_transition_time, Time(t0));
        assert_eq!(conds[0].message, "b");
        set_condition(
            &mut conds,
            DATABASE,
            true,
            "CnpgSecretFound",
            "c",
            Some(2),
            t1,
        );
        assert_eq!(conds[0].last_transition_time, Time(t1));
    }

    #[test]
    fn running_status_is_ready_and_stable() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let inputs = Inputs {
            generation: Some(3),
            ..inputs(&budget, (2, 2), (2, 2))
        };
        let s = compute(&spec, &plan(Phase::Running, true), &inputs, 0, None);
        assert_eq!(s.phase, Phase::Running);
        assert_eq!(s.observed_generation, Some(3));
        assert_eq!(s.current_version.as_deref(), Some("0.1.0"));
        assert_eq!(s.target_version.as_deref(), Some("0.1.0"));
        let types: Vec<&str> = s.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            [
                "Ready",
                "Progressing",
                "Migrated",
                "Degraded",
                "ConnectionBudget",
                "WorkersAvailable",
                "Stopped",
                "ReconciliationPaused"
            ]
        );
        assert_eq!(cond(&s, READY).status, "True");
        assert_eq!(cond(&s, PROGRESSING).status, "False");
        assert_eq!(cond(&s, MIGRATED).reason, "MigrationSucceeded");
        assert_eq!(cond(&s, DEGRADED).status, "False");
        assert_eq!(cond(&s, CONNECTION_BUDGET).status, "True");
        assert_eq!(cond(&s, WORKERS_AVAILABLE).reason, "WorkersReady");
        assert_eq!(cond(&s, STOPPED).status, "False");
        assert_eq!(cond(&s, RECONCILIATION_PAUSED).status, "False");

        // R-OP-OPS: a stopped instance says so, is not Ready and not Progressing.
        let stopped = compute(&spec, &plan(Phase::Stopped, true), &inputs, 0, None);
        assert_eq!(cond(&stopped, STOPPED).status, "True");
        assert_eq!(cond(&stopped, STOPPED).reason, "StoppedBySpec");
        assert_eq!(cond(&stopped, READY).status, "False");
        assert_eq!(cond(&stopped, READY).reason, "Stopped");
        assert_eq!(cond(&stopped, PROGRESSING).status, "False");
        assert_eq!(cond(&stopped, DEGRADED).status, "False");
    }

    #[test]
    fn a_missing_autoscaler_api_is_a_degraded_condition_with_its_reason() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let inputs = Inputs {
            generation: Some(4),
            autoscaler_missing: Some("KEDA's ScaledObject API is not installed".into()),
            ..inputs(&budget, (2, 2), (2, 2))
        };
        let s = compute(&spec, &plan(Phase::Running, true), &inputs, 0, None);
        let d = cond(&s, DEGRADED);
        assert_eq!(status_reason(&s, DEGRADED), ("True", "KedaNotInstalled"));
        assert!(d.message.contains("KEDA"), "{}", d.message);
        // The instance itself runs: Ready tells about pods, Degraded about what is missing.
        assert_eq!(cond(&s, READY).status, "True");
        assert_eq!(s.observed_generation, Some(4));
    }

    #[test]
    fn over_budget_and_no_workers_are_reported() {
        let mut spec = testutil::spec();
        spec.database.max_connections = 50;
        let budget = Budget::for_spec(&spec);
        let inputs = inputs(&budget, (2, 2), (2, 0));
        let s = compute(&spec, &plan(Phase::RollingOut, true), &inputs, 0, None);
        let b = cond(&s, CONNECTION_BUDGET);
        assert_eq!(
            status_reason(&s, CONNECTION_BUDGET),
            ("False", "OverBudget")
        );
        assert!(
            b.message.contains("= 94 > maxConnections 50"),
            "{}",
            b.message
        );
        assert_eq!(
            status_reason(&s, WORKERS_AVAILABLE),
            ("False", "NoReadyWorkers")
        );
        assert_eq!(cond(&s, PROGRESSING).reason, "RollingOut");
        assert_eq!(cond(&s, READY).status, "False");
    }

    #[test]
    fn unready_pods_while_running_degrade() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let inputs = Inputs {
            pods_ready: false,
            ..inputs(&budget, (2, 1), (2, 2))
        };
        let s = compute(&spec, &plan(Phase::Running, true), &inputs, 0, None);
        let r = cond(&s, READY);
        assert_eq!(status_reason(&s, READY), ("False", "PodsNotReady"));
        assert!(r.message.contains("web 1/2 ready"), "{}", r.message);
        assert_eq!(status_reason(&s, DEGRADED), ("True", "PodsNotReady"));
    }

    #[test]
    fn failed_migration_degrades() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let inputs = inputs(&budget, (0, 0), (0, 0));
        let mut p = plan(Phase::MigrationFailed, false);
        p.current_version = Some("0.0.9".into());
        let s = compute(&spec, &p, &inputs, 2, Some("2027-01-15T08:00:00Z".into()));
        assert_eq!(s.migration_attempts, 2);
        assert_eq!(s.current_version.as_deref(), Some("0.0.9"));
        let d = cond(&s, DEGRADED);
        assert_eq!(status_reason(&s, DEGRADED), ("True", "MigrationFailed"));
        assert!(d.message.contains("failed 2 time(s)"));
        assert_eq!(cond(&s, MIGRATED).reason, "MigrationFailed");
        // The retry runs: still degraded until it succeeds.
        let mut retry = plan(Phase::Migrating, false);
        retry.current_version = Some("0.0.9".into());
        let s = compute(&spec, &retry, &inputs, 2, None);
        assert_eq!(status_reason(&s, DEGRADED), ("True", "MigrationRetrying"));
        let w = cond(&s, WORKERS_AVAILABLE);
        assert_eq!(
            (w.status.as_str(), w.message.as_str()),
            ("False", "no worker is ready")
        );
    }

    #[test]
    fn transition_time_is_kept_while_unchanged() {
        let spec = testutil::spec();
        let budget = Budget::for_spec(&spec);
        let first = inputs(&budget, (0, 0), (1, 1));
        let s1 = compute(&spec, &plan(Phase::Running, true), &first, 0, None);
        let later = Timestamp::from_second(1_800_000_600).expect("valid");
        let second = Inputs {
            previous: Some(&s1),
            now: later,
            ..first.clone()
        };
        let s2 = compute(&spec, &plan(Phase::Running, true), &second, 0, None);
        assert_eq!(cond(&s2, READY).last_transition_time, Time(now()));
        let s3 = compute(&spec, &plan(Phase::RollingOut, true), &second, 0, None);
        assert_eq!(cond(&s3, READY).last_transition_time, Time(later));
    }
}
