//! The upgrade state machine (R-OP-MIG, R-OP-UPG): (spec, observed world) → next phase + actions.
//!
//! Pure: the reconciler observes, calls [`decide`], and carries the [`Plan`] out. The seed rule is
//! "stop every old pod, migrate, then start all nodes on the same version", so by default:
//!
//! ```text
//!            version changed, old pods exist
//! Running ─────────────────────────────────→ ScalingDown ──(no old pod left)──→ Migrating
//!    ↑                                                                        │      │
//!    └── RollingOut ←──────────────(Job succeeded: currentVersion = target)───┘      │ Job failed
//!                                                                                    ↓
//!                          Migrating ←──(back-off elapsed: next attempt)── MigrationFailed
//! ```
//!
//! A first install has no old pods and goes straight to `Migrating`. With
//! `upgradeStrategy: RollingWhenCompatible` the old pods keep serving while a short Job reads
//! `hollo version --json` of both images (`CheckingCompatibility`); when the task-definition and
//! schema versions match, the (no-op) migration runs with the old version up and the new one then
//! rolls in; otherwise the default path is taken.
//!
//! R-OP-ZD, the zero-downtime path: when the probes show that the old binary runs on
//! the target's pre-migrated schema and the target runs before its post-deploy migrations
//! ([`upgrade_path`] → [`Compat::ExpandContract`]), no pod stops:
//!
//! ```text
//! CheckingCompatibility → PreMigrating (hollo migrate --pre, old pods serve)
//!   → RollingOut (no old pod left) → PostMigrating (hollo migrate --post) → Running
//! ```
//!
//! With different task-definition versions the old workers stop first (web keeps serving,
//! the durable queue holds the work), the web rolls, and the new workers start only once no
//! old pod is left: never two task-definition versions consuming at once ([`contract`]).
//! With `mode: all` every pod consumes, so different task definitions take the
//! stop-migrate-start path.
//!
//! R-OP-OPS and R-OP-ZD: `spec.stopped` wins over everything (`Stopped`, every role at 0); a
//! target older than the running version is probed first and refused (`Running` at the old
//! version, no migration) when its schema is below the database's; `upgrade.backup` holds the
//! old version up in `BackingUp` until the CloudNativePG Backup completes (`BackupFailed` stops
//! there); a stop-migrate-start starts the maintenance page before `ScalingDown` stops the old
//! pods and keeps it until a new web pod is ready.
//!
//! `upgrade.maintenanceWindows` (issue 63 item 6): outside every window a version change waits
//! in `WaitingForWindow` before its first step (the backup, the stop, a migration Job), the old
//! version serving and the reconcile requeued at the next window's start; the approval
//! annotation lets it start at once. Once under way ([`under_way`]) it runs to its end.

use std::time::Duration;

use crate::crd::{ExpandContract, HolloSpec, Mode, Phase, UpgradeStrategy};
use crate::downgrade::SchemaCheck;
use crate::resources::migration::{MigrationKind, VersionInfo};
use crate::window::Gate;

/// State of a Job the machine waits on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobState {
    Absent,
    Running,
    Succeeded,
    Failed { reason: String },
}

/// Whether the old and the new version may run side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compat {
    /// Not asked yet.
    Unknown,
    /// The version probe Jobs are running.
    Probing,
    /// Same task-definition version and same schema version.
    Compatible,
    /// R-OP-ZD: the old binary runs on the target's pre-migrated schema and the
    /// target runs before its post-deploy migrations, so the upgrade needs no downtime;
    /// `same_tasks`: the same task-definition version (old and new workers may overlap).
    ExpandContract { same_tasks: bool },
    /// Different, or the probe failed (the safe answer).
    Incompatible,
}

/// What the reconciler saw this time.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// `status.currentVersion`: the last version migrated and started.
    pub current_version: Option<String>,
    /// Failed migration attempts of the target version so far.
    pub migration_attempts: i32,
    /// Time since the last recorded migration failure.
    pub since_last_failure: Option<Duration>,
    /// Pods of the web/worker/all roles not labelled with the target version (terminating
    /// ones included: they may still hold work).
    pub old_pods: i32,
    /// The migration Job of the target version, attempt `migration_attempts`.
    pub job: JobState,
    /// Another migration Job (of a different version) is still active.
    pub other_migration_active: bool,
    pub compat: Compat,
    /// Every pod of the target version's Deployments runs the target version (updated).
    pub rolled_out: bool,
    /// Every desired pod is ready.
    pub pods_ready: bool,
    /// `status.phase` before this step.
    pub previous_phase: Phase,
    /// A target older than the running version against the database's schema (R-OP-ZD).
    pub schema: SchemaCheck,
    /// The maintenance page Deployment (R-OP-ZD).
    pub page: Page,
    /// A pod of the HTTP role (web, or all) is ready at the target version.
    pub http_ready: bool,
    /// The CloudNativePG Backup before migrating (R-OP-OPS, `upgrade.backup`).
    pub backup: Backup,
    /// R-OP-ZD: the pre-deploy migration Job of the target (attempt
    /// `migration_attempts`).
    pub pre_job: JobState,
    /// The post-deploy migration Job of the target (attempt `migration_attempts`).
    pub post_job: JobState,
    /// Of `old_pods`, those of the worker role.
    pub old_workers: i32,
    /// `status.expandContract`: a zero-downtime upgrade past its pre-deploy migrations.
    pub expand: Option<ExpandContract>,
    /// Whether a version change may start now (`upgrade.maintenanceWindows`, the approval
    /// annotation): `window::gate` at the time of this reconcile.
    pub window: Gate,
}

/// The pre-migration Backup of the target version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backup {
    /// Not asked for (or no upgrade in progress).
    #[default]
    NotWanted,
    Absent,
    Running,
    Completed,
    /// Failed or timed out, and why.
    Failed(String),
    /// None can be asked for (the Cluster has no backup configured, or its method cannot be
    /// told), and why.
    Unavailable(String),
}

/// What the reconciler saw of the maintenance page (R-OP-ZD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Page {
    pub exists: bool,
    /// It has a ready pod: the web Service may select it.
    pub ready: bool,
    /// It exists but has not become ready within [`PAGE_WAIT`] (say, an image without the
    /// command): the upgrade goes on without it.
    pub overdue: bool,
}

/// How long an upgrade waits for the maintenance page before stopping the web pods anyway.
pub const PAGE_WAIT: Duration = Duration::from_secs(30);

/// What to do with the role Deployments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Workloads {
    /// Scale existing Deployments to 0 and create none; autoscalers removed (they would scale
    /// the old version back up).
    Stopped,
    /// Apply the Deployments (and autoscalers) at this version.
    Run(String),
    /// R-OP-ZD: the HTTP role (web) at this version, the workers at 0 and their
    /// autoscaler removed: web keeps serving while no worker of either task-definition
    /// version consumes. Only in `mode: split`.
    WebOnly(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub phase: Phase,
    pub workloads: Workloads,
    /// Ensure the migration Job of this attempt exists.
    pub migration_job: Option<i32>,
    /// Which migrations that Job (and a recorded failure) is about.
    pub migration_kind: MigrationKind,
    /// `status.expandContract` after this step.
    pub expand: Option<ExpandContract>,
    /// Ensure the version probe Jobs (old and new image) exist.
    pub probe_versions: bool,
    /// A migration failure to record (attempts + 1, timestamp now), with the Job's reason.
    pub record_failure: Option<String>,
    /// `status.currentVersion` after this step.
    pub current_version: Option<String>,
    /// The target version's schema is migrated.
    pub migrated: bool,
    /// The target is refused (a downgrade below the database's schema), and why; the running
    /// version keeps running (R-OP-ZD).
    pub refused: Option<String>,
    /// Run the maintenance page; the web Service selects it once it is ready (R-OP-ZD).
    pub maintenance_page: bool,
    /// Ensure the pre-migration Backup exists (R-OP-OPS).
    pub backup: bool,
    /// `WaitingForWindow`: what the upgrade waits for (the next window's start).
    pub window: Option<String>,
    pub requeue: Duration,
}

impl Plan {
    /// `phase` with `workloads` and `current_version`, and nothing else to do: no Job, probe,
    /// page, backup or refusal, not migrated (the full migration's kind), polled again after
    /// [`POLL`].
    pub fn new(phase: Phase, workloads: Workloads, current_version: Option<String>) -> Self {
        Plan {
            phase,
            workloads,
            migration_job: None,
            migration_kind: MigrationKind::Full,
            expand: None,
            probe_versions: false,
            record_failure: None,
            current_version,
            migrated: false,
            refused: None,
            maintenance_page: false,
            backup: false,
            window: None,
            requeue: POLL,
        }
    }
}

/// Steady state: re-check drift every few minutes even without events.
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);
/// While something is in motion.
pub const POLL: Duration = Duration::from_secs(5);
pub const BACKOFF_BASE: Duration = Duration::from_secs(30);
pub const BACKOFF_MAX: Duration = Duration::from_secs(600);

/// Back-off before attempt `attempts` (1-based count of failures so far): 30 s, 60 s, 120 s, …
/// capped at 10 minutes.
pub fn backoff(failures: i32) -> Duration {
    if failures <= 0 {
        return Duration::ZERO;
    }
    let exp = u32::try_from(failures - 1).unwrap_or(0).min(16);
    BACKOFF_BASE.saturating_mul(1u32 << exp).min(BACKOFF_MAX)
}

/// A probe's version field as a number (the runtime prints integers; a numeric string is
/// read too); `None` when absent (an image without expand/contract migrations) or not a number.
fn number(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// R-OP-ZD: what the two images' `hollo version --json` allow, from the running
/// (`old`) to the target (`new`) version.
///
/// - Same task definitions and the same schema (pre and post): [`Compat::Compatible`], the
///   old rolling path (nothing to migrate).
/// - [`Compat::ExpandContract`] when every version is reported (the image knows pre and post
///   migrations), it is not a downgrade, the old binary runs on the target's pre-migrated
///   schema (its minimum is at most the target's pre-deploy version — pre-deploy migrations
///   only add, and `hollo migrate --pre` applies no post-deploy one, which the old binary
///   would refuse), and the target's own minimum is met by that schema (it runs before its
///   post-deploy migrations).
/// - Otherwise [`Compat::Incompatible`]: stop, migrate, start.
pub fn upgrade_path(old: &VersionInfo, new: &VersionInfo) -> Compat {
    let same_tasks = old.task_definition_version == new.task_definition_version;
    // An image without expand/contract migrations reports no post-deploy version: it has none.
    let post = |v: &serde_json::Value| number(v).unwrap_or(0);
    if same_tasks
        && old.schema_version == new.schema_version
        && post(&old.post_schema_version) == post(&new.post_schema_version)
    {
        return Compat::Compatible;
    }
    let versions = (
        number(&old.schema_version),
        number(&old.post_schema_version),
        number(&old.min_schema_version),
        number(&new.schema_version),
        number(&new.post_schema_version),
        number(&new.min_schema_version),
    );
    let (
        Some(old_pre),
        Some(old_post),
        Some(old_min),
        Some(new_pre),
        Some(new_post),
        Some(new_min),
    ) = versions
    else {
        return Compat::Incompatible;
    };
    let upgrade = new_pre >= old_pre && new_post >= old_post;
    let old_runs_on_new_pre = old_min <= new_pre;
    let new_runs_before_post = new_min <= new_pre;
    if upgrade && old_runs_on_new_pre && new_runs_before_post {
        Compat::ExpandContract { same_tasks }
    } else {
        Compat::Incompatible
    }
}

/// Whether the version change's work has begun — its backup, the stop, a migration attempt —
/// so that it runs to its end whatever the maintenance windows say (an upgrade is never left
/// half done because a window closed).
fn under_way(obs: &Observed, job: &JobState) -> bool {
    obs.migration_attempts > 0
        || *job != JobState::Absent
        || matches!(
            obs.previous_phase,
            Phase::BackingUp
                | Phase::ScalingDown
                | Phase::Migrating
                | Phase::PreMigrating
                | Phase::MigrationFailed
        )
}

/// `WaitingForWindow` with `old` serving, looked at again when the next window opens (and at
/// least every [`STEADY_REQUEUE`]); `None` when the gate lets the upgrade start.
fn wait_for_window(obs: &Observed, target: &str, old: &str, base: &Plan) -> Option<Plan> {
    let note = obs.window.waiting_message(target)?;
    // A second past the start, so that the reconcile then finds the window open.
    let requeue = match &obs.window {
        Gate::Closed { wait, .. } => (*wait + Duration::from_secs(1)).min(STEADY_REQUEUE),
        _ => STEADY_REQUEUE,
    };
    Some(Plan {
        phase: Phase::WaitingForWindow,
        workloads: Workloads::Run(old.to_string()),
        migration_job: None,
        window: Some(note),
        requeue,
        ..base.clone()
    })
}

/// R-OP-ZD: the zero-downtime upgrade once its pre-deploy migrations are applied
/// (`currentVersion` is the target): roll out, keeping the task-definition rule, then run the
/// post-deploy migrations once no old pod is left. `None` once they have run: the usual
/// rollout logic takes over.
fn contract(spec: &HolloSpec, obs: &Observed, ec: &ExpandContract) -> Option<Plan> {
    let target = spec.version.clone();
    let rolling = Plan {
        migration_kind: MigrationKind::Post,
        expand: Some(ec.clone()),
        migrated: true,
        ..Plan::new(
            Phase::RollingOut,
            Workloads::Run(target.clone()),
            Some(target.clone()),
        )
    };
    // Never two task-definition versions consuming at once: the old workers stop first (the
    // old web keeps serving and enqueueing: the durable queue holds its work), then the web
    // rolls — no new pod enqueues while an old worker could claim it — and the new workers
    // start once no old pod is left. `mode: all` never gets here (every pod consumes).
    if !ec.same_task_definitions && spec.mode == Mode::Split {
        if obs.old_workers > 0 {
            return Some(Plan {
                workloads: Workloads::WebOnly(ec.from.clone()),
                ..rolling
            });
        }
        if obs.old_pods > 0 {
            return Some(Plan {
                workloads: Workloads::WebOnly(target),
                ..rolling
            });
        }
    }
    if obs.old_pods > 0 || !obs.rolled_out {
        return Some(rolling);
    }
    let post = Plan {
        phase: Phase::PostMigrating,
        ..rolling
    };
    // A failure: the new version keeps serving (it does not need its post-deploy migrations);
    // retried with the usual back-off.
    attempt(&obs.post_job, obs, &post)
}

/// The migration Job `job` of attempt `obs.migration_attempts` from `waiting`: ensure it while
/// it runs, record its failure, or, with no Job, start the next attempt once the back-off since
/// the last failure has passed. `None` once it succeeded.
fn attempt(job: &JobState, obs: &Observed, waiting: &Plan) -> Option<Plan> {
    let attempts = obs.migration_attempts;
    let ensure = || Plan {
        migration_job: Some(attempts),
        ..waiting.clone()
    };
    match job {
        JobState::Succeeded => None,
        JobState::Running => Some(ensure()),
        JobState::Failed { reason } => Some(Plan {
            phase: Phase::MigrationFailed,
            record_failure: Some(reason.clone()),
            requeue: backoff(attempts + 1),
            ..waiting.clone()
        }),
        JobState::Absent => {
            let wait = backoff(attempts);
            let waited = obs.since_last_failure.unwrap_or(Duration::MAX);
            Some(if attempts > 0 && waited < wait {
                Plan {
                    phase: Phase::MigrationFailed,
                    requeue: wait - waited,
                    ..waiting.clone()
                }
            } else {
                ensure()
            })
        }
    }
}

pub fn decide(spec: &HolloSpec, obs: &Observed) -> Plan {
    let target = spec.version.clone();
    let current = obs.current_version.clone();

    // `spec.stopped` (R-OP-OPS) wins over everything: every role at 0, no autoscaler,
    // no new Job. An upgrade in progress resumes where it was once the instance starts again.
    if spec.stopped {
        let migrated = current.as_deref() == Some(target.as_str());
        return Plan {
            // A zero-downtime upgrade's pending post-deploy migrations wait for the start.
            expand: obs.expand.clone(),
            migrated,
            // The pods' end is watched (Deployment status); nothing else moves while stopped.
            requeue: STEADY_REQUEUE,
            ..Plan::new(Phase::Stopped, Workloads::Stopped, current)
        };
    }

    // Migrated already: run the target version. A rollout ends when the updated pods are ready
    // the first time; a later loss of readiness is reported as Degraded, not a new rollout.
    if current.as_deref() == Some(target.as_str()) {
        if let Some(ec) = obs.expand.as_ref().filter(|e| e.version == target)
            && let Some(plan) = contract(spec, obs, ec)
        {
            return plan;
        }
        // Coming back from `spec.stopped`, the observed Deployments are still the stop's: at 0
        // replicas they look rolled out and ready. This reconcile scales them up; the rollout
        // is judged on what the next one sees, never reported Running before a pod is up.
        let done = obs.previous_phase != Phase::Stopped
            && obs.rolled_out
            && (obs.pods_ready || obs.previous_phase == Phase::Running);
        let phase = if done {
            Phase::Running
        } else {
            Phase::RollingOut
        };
        return Plan {
            migrated: true,
            // Started by an upgrade's downtime, kept until a new web pod can answer.
            maintenance_page: spec.maintenance_page_enabled() && obs.page.exists && !obs.http_ready,
            // Everything this waits for is a Deployment's watched status (or the Hollo's own
            // status): each change wakes the Hollo, so no 5 s poll (at 1 000 `Hollo`s rolling
            // out, 200 reconciles a second that read caches and found nothing new).
            requeue: STEADY_REQUEUE,
            ..Plan::new(phase, Workloads::Run(target.clone()), Some(target))
        };
    }

    // The target is not migrated. May the old version keep running meanwhile?
    let wants_rolling = spec.upgrade_strategy_in_effect() == UpgradeStrategy::RollingWhenCompatible;
    let base = Plan::new(Phase::Migrating, Workloads::Stopped, current.clone());
    // No outage by mistake (R-OP-ZD): an older target is checked against the
    // database's schema before anything stops; the old version keeps serving meanwhile.
    if let Some(old) = &current {
        match &obs.schema {
            SchemaCheck::NotNeeded | SchemaCheck::Safe => {}
            SchemaCheck::Probing => {
                return Plan {
                    phase: Phase::CheckingCompatibility,
                    workloads: Workloads::Run(old.clone()),
                    probe_versions: true,
                    ..base
                };
            }
            SchemaCheck::Refused(why) => {
                return Plan {
                    phase: Phase::Running,
                    workloads: Workloads::Run(old.clone()),
                    // Keep the probes' answers: they are the reason.
                    probe_versions: true,
                    refused: Some(why.clone()),
                    requeue: STEADY_REQUEUE,
                    ..base
                };
            }
        }
    }
    let keep_old = match (&current, wants_rolling, obs.compat) {
        (Some(old), true, Compat::Unknown | Compat::Probing) => {
            return Plan {
                phase: Phase::CheckingCompatibility,
                workloads: Workloads::Run(old.clone()),
                probe_versions: true,
                ..base
            };
        }
        (Some(old), true, Compat::Compatible) => Some(old.clone()),
        // R-OP-ZD. With `mode: all` every pod consumes: different task definitions
        // cannot keep anything up, so they stop, migrate, start.
        (Some(old), true, Compat::ExpandContract { same_tasks })
            if same_tasks || spec.mode == Mode::Split =>
        {
            Some(old.clone())
        }
        _ => None,
    };
    // The zero-downtime path: the pre-deploy Job, with the old version serving.
    let expand = match (&current, &keep_old, obs.compat) {
        (Some(old), Some(_), Compat::ExpandContract { same_tasks }) => Some(ExpandContract {
            version: target.clone(),
            from: old.clone(),
            same_task_definitions: same_tasks,
        }),
        _ => None,
    };
    let (base, job) = match &expand {
        Some(_) => (
            Plan {
                phase: Phase::PreMigrating,
                migration_kind: MigrationKind::Pre,
                ..base
            },
            &obs.pre_job,
        ),
        None => (base, &obs.job),
    };

    // Issue 63 item 6: outside the maintenance windows nothing of the upgrade starts — not
    // even its backup, which is taken in the window, just before the migration it guards.
    if let Some(old) = &current
        && !under_way(obs, job)
        && let Some(plan) = wait_for_window(obs, &target, old, &base)
    {
        return plan;
    }
    // R-OP-OPS: the pre-migration Backup, with the old version serving, before any
    // migration attempt of the target (a retry after a failed migration does not re-back up).
    if let Some(old) = &current
        && obs.migration_attempts == 0
        && *job == JobState::Absent
    {
        let hold = |phase| Plan {
            phase,
            workloads: Workloads::Run(old.clone()),
            backup: true,
            ..base.clone()
        };
        match &obs.backup {
            Backup::NotWanted | Backup::Completed => {}
            Backup::Absent | Backup::Running => return hold(Phase::BackingUp),
            Backup::Failed(_) => {
                return Plan {
                    requeue: STEADY_REQUEUE,
                    ..hold(Phase::BackupFailed)
                };
            }
            // Nothing to create: a Backup without a method would take CloudNativePG's
            // deprecated default and fail the same way.
            Backup::Unavailable(_) => {
                return Plan {
                    requeue: STEADY_REQUEUE,
                    backup: false,
                    ..hold(Phase::BackupFailed)
                };
            }
        }
    }
    // R-OP-ZD: an upgrade that stops the old version answers 503 meanwhile.
    let page = keep_old.is_none() && current.is_some() && spec.maintenance_page_enabled();
    if keep_old.is_none() && obs.old_pods > 0 {
        if let Some(old) = current.as_ref().filter(|_| page)
            && !obs.page.ready
            && !obs.page.overdue
        {
            // The page first: the old pods serve until it can answer in their place.
            return Plan {
                phase: Phase::ScalingDown,
                workloads: Workloads::Run(old.clone()),
                maintenance_page: true,
                ..base
            };
        }
        return Plan {
            phase: Phase::ScalingDown,
            maintenance_page: page,
            ..base
        };
    }
    let keep = keep_old.map_or(Workloads::Stopped, Workloads::Run);
    let waiting = Plan {
        workloads: keep,
        maintenance_page: page,
        ..base
    };
    if obs.other_migration_active {
        // Never two schema migrations at once (e.g. the version changed mid-migration).
        return waiting;
    }

    if let Some(plan) = attempt(job, obs, &waiting) {
        // A first install waits for its migration Job alone (no old pods, no backup), and Jobs
        // are watched: its end wakes the Hollo, no 5 s poll meanwhile.
        if current.is_none() && *job == JobState::Running {
            return Plan {
                requeue: STEADY_REQUEUE,
                ..plan
            };
        }
        return plan;
    }
    // The Job succeeded: roll out the target.
    let rolling = Plan {
        phase: Phase::RollingOut,
        workloads: Workloads::Run(target.clone()),
        current_version: Some(target),
        migrated: true,
        ..waiting
    };
    match expand {
        // Pre-migrated: the target is the current version from now on; `contract` rolls it
        // out (old pods are still there, so it always has a plan).
        Some(ec) => contract(spec, obs, &ec).unwrap_or(Plan {
            expand: Some(ec),
            ..rolling
        }),
        None => rolling,
    }
}

#[cfg(test)]
mod tests;
