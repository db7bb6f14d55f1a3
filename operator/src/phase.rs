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
//! Issue 34 item 2, the zero-downtime path: when the probes show that the old binary runs on
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
//! Issue 34: `spec.stopped` wins over everything (`Stopped`, every role at 0); a target older
//! than the running version is probed first and refused (`Running` at the old version, no
//! migration) when its schema is below the database's; `upgrade.backup` holds the old version
//! up in `BackingUp` until the CloudNativePG Backup completes (`BackupFailed` stops there); a
//! stop-migrate-start starts the maintenance page before `ScalingDown` stops the old pods and
//! keeps it until a new web pod is ready.

use std::time::Duration;

use crate::crd::{ExpandContract, HolloSpec, Mode, Phase, UpgradeStrategy};
use crate::downgrade::SchemaCheck;
use crate::resources::migration::{MigrationKind, VersionInfo};

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
    /// Issue 34 item 2: the old binary runs on the target's pre-migrated schema and the
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
    /// A target older than the running version against the database's schema (issue 34
    /// item 4).
    pub schema: SchemaCheck,
    /// The maintenance page Deployment (issue 34 item 3).
    pub page: Page,
    /// A pod of the HTTP role (web, or all) is ready at the target version.
    pub http_ready: bool,
    /// The CloudNativePG Backup before migrating (issue 34 item 4, `upgrade.backup`).
    pub backup: Backup,
    /// Issue 34 item 2: the pre-deploy migration Job of the target (attempt
    /// `migration_attempts`).
    pub pre_job: JobState,
    /// The post-deploy migration Job of the target (attempt `migration_attempts`).
    pub post_job: JobState,
    /// Of `old_pods`, those of the worker role.
    pub old_workers: i32,
    /// `status.expandContract`: a zero-downtime upgrade past its pre-deploy migrations.
    pub expand: Option<ExpandContract>,
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
}

/// What the reconciler saw of the maintenance page (issue 34 item 3).
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
    /// Issue 34 item 2: the HTTP role (web) at this version, the workers at 0 and their
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
    /// version keeps running (issue 34 item 4).
    pub refused: Option<String>,
    /// Run the maintenance page; the web Service selects it once it is ready (issue 34 item 3).
    pub maintenance_page: bool,
    /// Ensure the pre-migration Backup exists (issue 34 item 4).
    pub backup: bool,
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
/// read too); `None` when absent (an image before issue 34) or not a number.
fn number(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Number(n) => n.as_i64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// Issue 34 item 2: what the two images' `hollo version --json` allow, from the running
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
    // An image before issue 34 reports no post-deploy version: it has none.
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

/// Issue 34 item 2: the zero-downtime upgrade once its pre-deploy migrations are applied
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

    // `spec.stopped` (issue 34 item 5) wins over everything: every role at 0, no autoscaler,
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
        let done = obs.rolled_out && (obs.pods_ready || obs.previous_phase == Phase::Running);
        let phase = if done {
            Phase::Running
        } else {
            Phase::RollingOut
        };
        return Plan {
            migrated: true,
            // Started by an upgrade's downtime, kept until a new web pod can answer.
            maintenance_page: spec.maintenance_page_enabled() && obs.page.exists && !obs.http_ready,
            requeue: if done && obs.pods_ready {
                STEADY_REQUEUE
            } else {
                POLL
            },
            ..Plan::new(phase, Workloads::Run(target.clone()), Some(target))
        };
    }

    // The target is not migrated. May the old version keep running meanwhile?
    let wants_rolling = spec.upgrade_strategy_in_effect() == UpgradeStrategy::RollingWhenCompatible;
    let base = Plan::new(Phase::Migrating, Workloads::Stopped, current.clone());
    // No outage by mistake (issue 34 item 4): an older target is checked against the
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
        // Issue 34 item 2. With `mode: all` every pod consumes: different task definitions
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

    // Issue 34 item 4: the pre-migration Backup, with the old version serving, before any
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
        }
    }
    // Issue 34 item 3: an upgrade that stops the old version answers 503 meanwhile.
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
mod tests {
    use super::*;
    use crate::testutil;

    fn obs() -> Observed {
        Observed {
            current_version: None,
            migration_attempts: 0,
            since_last_failure: None,
            old_pods: 0,
            job: JobState::Absent,
            other_migration_active: false,
            compat: Compat::Unknown,
            rolled_out: false,
            pods_ready: false,
            previous_phase: Phase::Pending,
            schema: SchemaCheck::NotNeeded,
            page: Page::default(),
            http_ready: false,
            backup: Backup::NotWanted,
            pre_job: JobState::Absent,
            post_job: JobState::Absent,
            old_workers: 0,
            expand: None,
        }
    }

    fn upgrading() -> Observed {
        Observed {
            current_version: Some("0.0.9".into()),
            ..obs()
        }
    }

    const READY_PAGE: Page = Page {
        exists: true,
        ready: true,
        overdue: false,
    };

    /// `decide` on `base` as changed by `edit`.
    fn decide_after(spec: &HolloSpec, base: &Observed, edit: impl FnOnce(&mut Observed)) -> Plan {
        let mut o = base.clone();
        edit(&mut o);
        decide(spec, &o)
    }

    fn rolling_spec() -> HolloSpec {
        let mut s = testutil::spec();
        s.upgrade_strategy = UpgradeStrategy::RollingWhenCompatible;
        s
    }

    #[test]
    fn first_install_migrates_before_any_deployment() {
        let p = decide(&testutil::spec(), &obs());
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.workloads, Workloads::Stopped);
        assert_eq!(p.migration_job, Some(0));
        assert_eq!(p.current_version, None);
        assert!(!p.migrated);
    }

    #[test]
    fn migration_running_keeps_waiting_and_ensures_the_job() {
        let p = decide_after(&testutil::spec(), &obs(), |o| o.job = JobState::Running);
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.migration_job, Some(0));
        assert_eq!(p.workloads, Workloads::Stopped);
        assert_eq!(p.requeue, POLL);
    }

    #[test]
    fn migration_success_rolls_out_the_target() {
        let p = decide_after(&testutil::spec(), &obs(), |o| o.job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        assert_eq!(p.current_version.as_deref(), Some("0.1.0"));
        assert!(p.migrated);
    }

    #[test]
    fn rolling_out_becomes_running_when_ready() {
        let o = Observed {
            current_version: Some("0.1.0".into()),
            ..obs()
        };
        let p = decide(&testutil::spec(), &o);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.requeue, POLL);
        let updated = Observed {
            rolled_out: true,
            ..o
        };
        let p = decide(&testutil::spec(), &updated);
        assert_eq!(p.phase, Phase::RollingOut, "updated but not ready yet");
        let p = decide_after(&testutil::spec(), &updated, |o| o.pods_ready = true);
        assert_eq!(p.phase, Phase::Running);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        assert_eq!(p.migration_job, None);
        assert_eq!(p.requeue, STEADY_REQUEUE);
    }

    #[test]
    fn losing_readiness_while_running_stays_running() {
        let o = Observed {
            current_version: Some("0.1.0".into()),
            rolled_out: true,
            pods_ready: false,
            previous_phase: Phase::Running,
            ..obs()
        };
        let p = decide(&testutil::spec(), &o);
        assert_eq!(p.phase, Phase::Running);
        assert_eq!(p.requeue, POLL, "watch closely until ready again");
        // A spec change that rolls the pods again is a rollout.
        let p = decide_after(&testutil::spec(), &o, |o| o.rolled_out = false);
        assert_eq!(p.phase, Phase::RollingOut);
    }

    #[test]
    fn version_change_scales_down_first() {
        let p = decide_after(&testutil::spec(), &upgrading(), |o| {
            o.old_pods = 3;
            o.rolled_out = true;
            // Its maintenance page answers already (issue 34 item 3).
            o.page = READY_PAGE;
        });
        assert_eq!(p.phase, Phase::ScalingDown);
        assert_eq!(p.workloads, Workloads::Stopped);
        assert_eq!(p.migration_job, None, "no migration while old pods remain");
        assert_eq!(p.current_version.as_deref(), Some("0.0.9"));
    }

    #[test]
    fn no_old_pods_left_then_migrate() {
        let p = decide(&testutil::spec(), &upgrading());
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.workloads, Workloads::Stopped);
        assert_eq!(p.migration_job, Some(0));
    }

    #[test]
    fn failure_is_recorded_and_nothing_starts() {
        let o = Observed {
            job: JobState::Failed {
                reason: "BackoffLimitExceeded".into(),
            },
            ..upgrading()
        };
        let p = decide(&testutil::spec(), &o);
        assert_eq!(p.phase, Phase::MigrationFailed);
        assert_eq!(p.record_failure.as_deref(), Some("BackoffLimitExceeded"));
        assert_eq!(
            p.workloads,
            Workloads::Stopped,
            "old stays down, new never starts"
        );
        assert_eq!(p.migration_job, None);
        assert_eq!(p.current_version.as_deref(), Some("0.0.9"));
        assert_eq!(p.requeue, Duration::from_secs(30));
    }

    #[test]
    fn retry_waits_for_the_back_off_then_runs_the_next_attempt() {
        let o = Observed {
            migration_attempts: 2,
            since_last_failure: Some(Duration::from_secs(20)),
            ..upgrading()
        };
        let p = decide(&testutil::spec(), &o);
        assert_eq!(p.phase, Phase::MigrationFailed);
        assert_eq!(p.migration_job, None);
        assert_eq!(
            p.requeue,
            Duration::from_secs(40),
            "60 s back-off, 20 s elapsed"
        );
        let p = decide_after(&testutil::spec(), &o, |o| {
            o.since_last_failure = Some(Duration::from_secs(61))
        });
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.migration_job, Some(2), "third attempt gets its own Job");
    }

    #[test]
    fn back_off_doubles_and_caps() {
        assert_eq!(backoff(0), Duration::ZERO);
        assert_eq!(backoff(1), Duration::from_secs(30));
        assert_eq!(backoff(2), Duration::from_secs(60));
        assert_eq!(backoff(3), Duration::from_secs(120));
        assert_eq!(backoff(6), Duration::from_secs(600));
        assert_eq!(backoff(1000), Duration::from_secs(600));
    }

    #[test]
    fn another_migration_still_running_blocks_a_new_one() {
        let p = decide_after(&testutil::spec(), &upgrading(), |o| {
            o.other_migration_active = true
        });
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.migration_job, None);
    }

    #[test]
    fn rolling_strategy_probes_compatibility_with_old_version_up() {
        let o = Observed {
            old_pods: 4,
            ..upgrading()
        };
        for compat in [Compat::Unknown, Compat::Probing] {
            let p = decide_after(&rolling_spec(), &o, |o| o.compat = compat);
            assert_eq!(p.phase, Phase::CheckingCompatibility);
            assert!(p.probe_versions);
            assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
            assert_eq!(p.migration_job, None);
        }
    }

    #[test]
    fn upstream_images_cannot_roll_and_stop_first() {
        let mut spec = rolling_spec();
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        assert_eq!(spec.upgrade_strategy_in_effect(), UpgradeStrategy::Recreate);
        assert!(
            spec.rolling_unavailable()
                .is_some_and(|m| m.contains("upgrades use Recreate"))
        );
        let o = Observed {
            old_pods: 4,
            // Even a (stale) compatible answer does not let the old version run on.
            compat: Compat::Compatible,
            ..upgrading()
        };
        let p = decide(&spec, &o);
        assert_eq!(p.phase, Phase::ScalingDown);
        assert_eq!(p.workloads, Workloads::Stopped);
        assert!(!p.probe_versions);
        assert_eq!(rolling_spec().rolling_unavailable(), None);
    }

    #[test]
    fn compatible_versions_migrate_without_stopping() {
        let o = Observed {
            old_pods: 4,
            compat: Compat::Compatible,
            ..upgrading()
        };
        let p = decide(&rolling_spec(), &o);
        assert_eq!(p.phase, Phase::Migrating);
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
        assert_eq!(p.migration_job, Some(0));
        let p = decide_after(&rolling_spec(), &o, |o| o.job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        let p = decide_after(&rolling_spec(), &o, |o| {
            o.job = JobState::Failed { reason: "x".into() }
        });
        assert_eq!(p.phase, Phase::MigrationFailed);
        assert_eq!(
            p.workloads,
            Workloads::Run("0.0.9".into()),
            "compatible old version keeps serving"
        );
    }

    #[test]
    fn incompatible_versions_fall_back_to_recreate() {
        let o = Observed {
            old_pods: 4,
            compat: Compat::Incompatible,
            page: READY_PAGE,
            ..upgrading()
        };
        let p = decide(&rolling_spec(), &o);
        assert_eq!(p.phase, Phase::ScalingDown);
        assert_eq!(p.workloads, Workloads::Stopped);
    }

    #[test]
    fn rolling_strategy_on_first_install_just_migrates() {
        let p = decide(&rolling_spec(), &obs());
        assert_eq!(p.phase, Phase::Migrating);
        assert!(!p.probe_versions);
        assert_eq!(p.migration_job, Some(0));
    }

    /// Issue 34 item 5: `spec.stopped` scales every role to 0 and starts no Job, whatever the
    /// upgrade state; `false` again rolls the same version out.
    #[test]
    fn stopped_scales_everything_to_zero_and_resumes() {
        let mut spec = testutil::spec();
        spec.stopped = true;
        let running = Observed {
            current_version: Some("0.1.0".into()),
            rolled_out: true,
            pods_ready: true,
            previous_phase: Phase::Running,
            ..obs()
        };
        let p = decide(&spec, &running);
        assert_eq!(p.phase, Phase::Stopped);
        assert_eq!(p.workloads, Workloads::Stopped);
        assert_eq!(p.migration_job, None);
        assert!(p.migrated);
        assert_eq!(p.current_version.as_deref(), Some("0.1.0"));

        // Mid-upgrade: no migration Job is started while stopped, the version stays.
        let p = decide(&spec, &upgrading());
        assert_eq!(p.phase, Phase::Stopped);
        assert_eq!(p.migration_job, None);
        assert!(!p.probe_versions);
        assert!(!p.migrated);
        assert_eq!(p.current_version.as_deref(), Some("0.0.9"));

        // Back to false: the Deployments (at 0, so not rolled out) come back at the version.
        spec.stopped = false;
        let p = decide_after(&spec, &running, |o| {
            o.rolled_out = false;
            o.pods_ready = false;
            o.previous_phase = Phase::Stopped;
        });
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
    }

    /// Issue 34 item 4: an older target is probed with the old version serving, refused
    /// without stopping anything when its schema is below the database's, else upgraded the
    /// usual way.
    #[test]
    fn a_downgrade_below_the_schema_is_refused_before_anything_stops() {
        let spec = testutil::spec();
        let running_newer = Observed {
            current_version: Some("0.2.0".into()),
            old_pods: 3,
            rolled_out: false,
            pods_ready: true,
            previous_phase: Phase::Running,
            schema: SchemaCheck::Probing,
            ..obs()
        };
        let p = decide(&spec, &running_newer);
        assert_eq!(p.phase, Phase::CheckingCompatibility);
        assert_eq!(p.workloads, Workloads::Run("0.2.0".into()));
        assert!(p.probe_versions);
        assert_eq!(p.migration_job, None);

        let refused = Observed {
            schema: SchemaCheck::Refused("schema 1 < 2".into()),
            ..running_newer.clone()
        };
        let p = decide(&spec, &refused);
        assert_eq!(p.phase, Phase::Running, "the running version stays Running");
        assert_eq!(p.workloads, Workloads::Run("0.2.0".into()));
        assert_eq!(p.refused.as_deref(), Some("schema 1 < 2"));
        assert_eq!(p.migration_job, None);
        assert_eq!(p.current_version.as_deref(), Some("0.2.0"));
        assert!(!p.migrated);

        // A safe downgrade takes the usual path.
        let safe = Observed {
            schema: SchemaCheck::Safe,
            ..running_newer
        };
        let p = decide(&spec, &safe);
        assert_eq!(p.phase, Phase::ScalingDown);
        assert_eq!(p.refused, None);
    }

    /// Issue 34 item 3: a stop-migrate-start starts the maintenance page first (old pods
    /// serve until it is ready), keeps it through the migration and a failure, and until a
    /// new web pod is ready; a first install, a compatible rolling upgrade and `stopped` run
    /// none.
    #[test]
    fn the_maintenance_page_covers_the_downtime_only() {
        let spec = testutil::spec();
        let p = decide(&spec, &obs());
        assert!(!p.maintenance_page, "first install: nothing to answer for");

        let stopping = Observed {
            old_pods: 3,
            ..upgrading()
        };
        let p = decide(&spec, &stopping);
        assert_eq!(p.phase, Phase::ScalingDown);
        assert!(p.maintenance_page);
        assert_eq!(
            p.workloads,
            Workloads::Run("0.0.9".into()),
            "old pods serve until the page is ready"
        );

        let ready = Page {
            exists: true,
            ready: true,
            overdue: false,
        };
        let p = decide_after(&spec, &stopping, |o| o.page = ready);
        assert_eq!(
            (p.phase, p.workloads.clone()),
            (Phase::ScalingDown, Workloads::Stopped)
        );
        assert!(p.maintenance_page);

        let overdue = Page {
            exists: true,
            ready: false,
            overdue: true,
        };
        let p = decide_after(&spec, &stopping, |o| o.page = overdue);
        assert_eq!(
            p.workloads,
            Workloads::Stopped,
            "a page that never starts blocks nothing"
        );

        for job in [
            JobState::Absent,
            JobState::Running,
            JobState::Failed { reason: "x".into() },
            JobState::Succeeded,
        ] {
            let p = decide_after(&spec, &upgrading(), |o| {
                o.job = job.clone();
                o.page = ready;
            });
            assert!(p.maintenance_page, "{job:?}: {:?}", p.phase);
        }

        // Migrated: kept while no new web pod is ready, then gone.
        let migrated = Observed {
            current_version: Some("0.1.0".into()),
            page: ready,
            previous_phase: Phase::RollingOut,
            ..obs()
        };
        assert!(decide(&spec, &migrated).maintenance_page);
        let served = Observed {
            http_ready: true,
            ..migrated.clone()
        };
        assert!(!decide(&spec, &served).maintenance_page);
        let no_page = Observed {
            page: Page::default(),
            ..migrated
        };
        assert!(
            !decide(&spec, &no_page).maintenance_page,
            "a same-version rollout"
        );

        let mut off = testutil::spec();
        off.web.maintenance_page.enabled = false;
        assert!(!decide(&off, &upgrading()).maintenance_page);
        let mut stopped = testutil::spec();
        stopped.stopped = true;
        assert!(!decide(&stopped, &upgrading()).maintenance_page);
        let p = decide_after(&rolling_spec(), &upgrading(), |o| {
            o.compat = Compat::Compatible
        });
        assert!(!p.maintenance_page, "the old version keeps serving");
    }

    /// Issue 34 item 4: with `upgrade.backup` the old version serves while the Backup runs;
    /// a failed (or timed-out) Backup starts no migration; a completed one goes on as usual.
    #[test]
    fn a_backup_comes_before_any_migration_and_a_failed_one_stops_it() {
        let spec = testutil::spec();
        for b in [Backup::Absent, Backup::Running] {
            let p = decide_after(&spec, &upgrading(), |o| {
                o.old_pods = 3;
                o.backup = b.clone();
            });
            assert_eq!(p.phase, Phase::BackingUp, "{b:?}");
            assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
            assert!(p.backup);
            assert_eq!(p.migration_job, None);
            assert!(!p.maintenance_page);
        }
        let p = decide_after(&spec, &upgrading(), |o| {
            o.old_pods = 3;
            o.backup = Backup::Failed("timed out".into());
        });
        assert_eq!(p.phase, Phase::BackupFailed);
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
        assert_eq!(p.migration_job, None);
        let p = decide_after(&spec, &upgrading(), |o| o.backup = Backup::Completed);
        assert_eq!((p.phase, p.migration_job), (Phase::Migrating, Some(0)));
        // Once the migration started, the Backup is not waited on again.
        let p = decide_after(&spec, &upgrading(), |o| {
            o.job = JobState::Running;
            o.backup = Backup::Absent;
        });
        assert_eq!(p.phase, Phase::Migrating);
    }

    fn info(td: i64, pre: i64, post: i64, min: i64) -> VersionInfo {
        VersionInfo {
            version: "x".into(),
            schema_version: serde_json::json!(pre),
            task_definition_version: serde_json::json!(td),
            post_schema_version: serde_json::json!(post),
            min_schema_version: serde_json::json!(min),
        }
    }

    /// Issue 34 item 2: what the probes allow.
    #[test]
    fn the_upgrade_path_comes_from_both_images() {
        let old = info(2, 10, 0, 10);
        let ec = |same_tasks| Compat::ExpandContract { same_tasks };
        // (from, to, the path, why)
        #[rustfmt::skip]
        let cases = [
            (old.clone(), old.clone(), Compat::Compatible, "the same schema"),
            (old.clone(), info(2, 11, 0, 11), ec(true), "one more pre-deploy migration"),
            (old.clone(), info(2, 11, 12, 11), ec(true), "and a post-deploy one"),
            (old.clone(), info(2, 10, 12, 10), ec(true), "only a post-deploy one"),
            (old.clone(), info(3, 11, 0, 11), ec(false), "different task definitions"),
            (old.clone(), info(3, 10, 0, 10), ec(false), "task definitions alone"),
            // The old binary would refuse the target's pre-migrated schema.
            (info(2, 10, 0, 12), info(2, 11, 0, 11), Compat::Incompatible, "pre-migrated"),
            // The target cannot run before its post-deploy migrations.
            (old.clone(), info(2, 11, 12, 12), Compat::Incompatible, "post-deploy first"),
            (old.clone(), info(2, 9, 0, 9), Compat::Incompatible, "a downgrade"),
            (info(2, 10, 5, 10), info(2, 11, 4, 11), Compat::Incompatible, "a post-deploy downgrade"),
        ];
        for (from, to, want, why) in cases {
            assert_eq!(upgrade_path(&from, &to), want, "{why}");
        }
        // An image before issue 34 reports no post/min: the safe answer.
        let legacy = VersionInfo {
            post_schema_version: serde_json::Value::Null,
            min_schema_version: serde_json::Value::Null,
            ..info(2, 11, 0, 11)
        };
        assert_eq!(upgrade_path(&old, &legacy), Compat::Incompatible);
        assert_eq!(upgrade_path(&legacy, &old), Compat::Incompatible);
        assert_eq!(
            upgrade_path(&info(2, 11, 0, 11), &legacy),
            Compat::Compatible,
            "no post-deploy version reported: none"
        );
        let string = VersionInfo {
            schema_version: serde_json::json!("11"),
            ..info(2, 11, 0, 11)
        };
        assert_eq!(
            upgrade_path(&old, &string),
            Compat::ExpandContract { same_tasks: true }
        );
    }

    fn expand(same_tasks: bool) -> ExpandContract {
        ExpandContract {
            version: "0.1.0".into(),
            from: "0.0.9".into(),
            same_task_definitions: same_tasks,
        }
    }

    /// Issue 34 item 2, same task definitions: PreMigrating with every old pod serving →
    /// RollingOut → PostMigrating once no old pod is left → Running.
    #[test]
    fn expand_contract_runs_pre_then_rolls_then_post() {
        let spec = rolling_spec();
        let o = Observed {
            old_pods: 3,
            old_workers: 2,
            compat: Compat::ExpandContract { same_tasks: true },
            pods_ready: true,
            previous_phase: Phase::CheckingCompatibility,
            ..upgrading()
        };
        let p = decide(&spec, &o);
        assert_eq!(p.phase, Phase::PreMigrating);
        assert_eq!(
            p.workloads,
            Workloads::Run("0.0.9".into()),
            "old pods serve"
        );
        assert_eq!(p.migration_job, Some(0));
        assert_eq!(p.migration_kind, MigrationKind::Pre);
        assert!(!p.maintenance_page, "nothing stops");
        assert!(!p.migrated);
        assert_eq!(p.expand, None);
        // The full migration's Job does not count for this path.
        let p = decide_after(&spec, &o, |o| o.job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::PreMigrating);

        let p = decide_after(&spec, &o, |o| o.pre_job = JobState::Running);
        assert_eq!((p.phase, p.migration_job), (Phase::PreMigrating, Some(0)));
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));

        let p = decide_after(&spec, &o, |o| o.pre_job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        assert_eq!(p.current_version.as_deref(), Some("0.1.0"));
        assert!(p.migrated);
        assert_eq!(p.expand, Some(expand(true)));
        assert_eq!(p.migration_job, None);

        // Pre-migrated: the next reconciles see the target as current.
        let rolling = Observed {
            current_version: Some("0.1.0".into()),
            expand: Some(expand(true)),
            compat: Compat::Unknown,
            previous_phase: Phase::RollingOut,
            ..o
        };
        let p = decide(&spec, &rolling);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        assert_eq!(p.migration_job, None, "old pods left: no post-deploy yet");
        let rolled = Observed {
            rolled_out: true,
            old_pods: 1,
            old_workers: 0,
            ..rolling.clone()
        };
        assert_eq!(
            decide(&spec, &rolled).migration_job,
            None,
            "a terminating old pod still counts"
        );
        let gone = Observed {
            old_pods: 0,
            ..rolled
        };
        let p = decide(&spec, &gone);
        assert_eq!(p.phase, Phase::PostMigrating);
        assert_eq!(p.migration_kind, MigrationKind::Post);
        assert_eq!(p.migration_job, Some(0));
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        let p = decide_after(&spec, &gone, |o| {
            o.post_job = JobState::Failed { reason: "x".into() }
        });
        assert_eq!(p.phase, Phase::MigrationFailed);
        assert_eq!(p.record_failure.as_deref(), Some("x"));
        assert_eq!(p.migration_kind, MigrationKind::Post);
        assert_eq!(
            p.workloads,
            Workloads::Run("0.1.0".into()),
            "the new version keeps serving"
        );
        assert_eq!(p.expand, Some(expand(true)), "still pending");
        let p = decide_after(&spec, &gone, |o| o.post_job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::Running);
        assert_eq!(p.expand, None, "post-deploy done");
        assert_eq!(p.migration_job, None);
    }

    /// Issue 34 item 2, different task definitions: the old workers stop first (web serves),
    /// then the web rolls, and the new workers start only once no old pod is left.
    #[test]
    fn different_task_definitions_stop_only_the_workers() {
        let spec = rolling_spec();
        let o = Observed {
            old_pods: 3,
            old_workers: 2,
            compat: Compat::ExpandContract { same_tasks: false },
            ..upgrading()
        };
        let p = decide(&spec, &o);
        assert_eq!(p.phase, Phase::PreMigrating);
        assert_eq!(
            p.workloads,
            Workloads::Run("0.0.9".into()),
            "one task-definition version: the old workers consume meanwhile"
        );
        let p = decide_after(&spec, &o, |o| o.pre_job = JobState::Succeeded);
        assert_eq!(p.phase, Phase::RollingOut);
        assert_eq!(p.workloads, Workloads::WebOnly("0.0.9".into()));
        assert_eq!(p.expand, Some(expand(false)));

        let rolling = Observed {
            current_version: Some("0.1.0".into()),
            expand: Some(expand(false)),
            ..o
        };
        let p = decide(&spec, &rolling);
        assert_eq!(
            p.workloads,
            Workloads::WebOnly("0.0.9".into()),
            "old workers still there: no new pod"
        );
        let p = decide_after(&spec, &rolling, |o| {
            o.old_pods = 1;
            o.old_workers = 0;
        });
        assert_eq!(
            p.workloads,
            Workloads::WebOnly("0.1.0".into()),
            "the web rolls, no worker"
        );
        let p = decide_after(&spec, &rolling, |o| {
            o.old_pods = 0;
            o.old_workers = 0;
        });
        assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
        assert_eq!(p.phase, Phase::RollingOut);
        let p = decide_after(&spec, &rolling, |o| {
            o.old_pods = 0;
            o.old_workers = 0;
            o.rolled_out = true;
        });
        assert_eq!((p.phase, p.migration_job), (Phase::PostMigrating, Some(0)));
    }

    /// `mode: all`: every pod consumes, so different task definitions stop, migrate, start;
    /// the same ones take the zero-downtime path.
    #[test]
    fn all_mode_with_different_task_definitions_stops_first() {
        let mut spec = rolling_spec();
        spec.mode = Mode::All;
        let o = Observed {
            old_pods: 2,
            compat: Compat::ExpandContract { same_tasks: false },
            page: READY_PAGE,
            ..upgrading()
        };
        let p = decide(&spec, &o);
        assert_eq!(p.phase, Phase::ScalingDown);
        assert_eq!(p.workloads, Workloads::Stopped);
        let p = decide_after(&spec, &o, |o| {
            o.compat = Compat::ExpandContract { same_tasks: true }
        });
        assert_eq!(p.phase, Phase::PreMigrating);
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
    }

    /// A pre-deploy failure keeps the old version serving and retries with back-off; a
    /// stop keeps the pending post-deploy migrations.
    #[test]
    fn a_failed_pre_migration_keeps_the_old_version_serving() {
        let spec = rolling_spec();
        let o = Observed {
            old_pods: 3,
            compat: Compat::ExpandContract { same_tasks: true },
            pre_job: JobState::Failed {
                reason: "BackoffLimitExceeded".into(),
            },
            ..upgrading()
        };
        let p = decide(&spec, &o);
        assert_eq!(p.phase, Phase::MigrationFailed);
        assert_eq!(p.migration_kind, MigrationKind::Pre);
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
        assert_eq!(p.current_version.as_deref(), Some("0.0.9"));
        let p = decide_after(&spec, &o, |o| {
            o.pre_job = JobState::Absent;
            o.migration_attempts = 1;
            o.since_last_failure = Some(Duration::from_secs(31));
        });
        assert_eq!((p.phase, p.migration_job), (Phase::PreMigrating, Some(1)));

        let mut stopped = rolling_spec();
        stopped.stopped = true;
        let p = decide_after(&stopped, &obs(), |o| {
            o.current_version = Some("0.1.0".into());
            o.expand = Some(expand(true));
        });
        assert_eq!(p.phase, Phase::Stopped);
        assert_eq!(p.expand, Some(expand(true)));
    }
}
