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
        window: Gate::Unrestricted,
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
    // A first install waits for the Job alone, which is watched: no poll.
    assert_eq!(p.requeue, STEADY_REQUEUE);
}

#[test]
fn an_upgrade_s_migration_keeps_polling() {
    let p = decide_after(&testutil::spec(), &upgrading(), |o| {
        o.job = JobState::Running
    });
    assert_eq!(p.phase, Phase::Migrating);
    assert_eq!(p.migration_job, Some(0));
    assert_eq!(p.requeue, POLL, "old pods and backups are not watched");
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
    // Deployments are watched: their changes wake the Hollo, no poll.
    assert_eq!(p.requeue, STEADY_REQUEUE);
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
    assert_eq!(
        p.requeue, STEADY_REQUEUE,
        "readiness is watched, not polled"
    );
    // A spec change that rolls the pods again is a rollout.
    let p = decide_after(&testutil::spec(), &o, |o| o.rolled_out = false);
    assert_eq!(p.phase, Phase::RollingOut);
}

#[test]
fn version_change_scales_down_first() {
    let p = decide_after(&testutil::spec(), &upgrading(), |o| {
        o.old_pods = 3;
        o.rolled_out = true;
        // Its maintenance page answers already (R-OP-ZD).
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

/// R-OP-OPS: `spec.stopped` scales every role to 0 and starts no Job, whatever the
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

    // The stop's Deployments, still at 0 replicas when the start is first reconciled, look
    // rolled out and ready (0 of 0): still RollingOut, not Running before a pod is up.
    let p = decide_after(&spec, &running, |o| o.previous_phase = Phase::Stopped);
    assert_eq!(p.phase, Phase::RollingOut);
    assert_eq!(p.workloads, Workloads::Run("0.1.0".into()));
    // The next reconcile sees them scaled up and ready: Running.
    let p = decide_after(&spec, &running, |o| o.previous_phase = Phase::RollingOut);
    assert_eq!(p.phase, Phase::Running);
}

/// R-OP-ZD: an older target is probed with the old version serving, refused
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

/// R-OP-ZD: a stop-migrate-start starts the maintenance page first (old pods
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

/// R-OP-OPS: with `upgrade.backup` the old version serves while the Backup runs;
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
    // A Cluster with no backup configured: nothing is created (CloudNativePG's default
    // method would fail the same way), the old version keeps serving.
    let p = decide_after(&spec, &upgrading(), |o| {
        o.old_pods = 3;
        o.backup = Backup::Unavailable("no backup configured".into());
    });
    assert_eq!(p.phase, Phase::BackupFailed);
    assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
    assert!(!p.backup, "no Backup without a method");
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

/// R-OP-ZD: what the probes allow.
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
    // An image without expand/contract migrations reports no post/min: the safe answer.
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

/// R-OP-ZD, same task definitions: PreMigrating with every old pod serving →
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

/// R-OP-ZD, different task definitions: the old workers stop first (web serves),
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

/// A closed gate: the next window opens in `secs`.
fn closed(secs: u64) -> Gate {
    let opens = jiff::Timestamp::from_second(1_800_000_000)
        .unwrap()
        .to_zoned(jiff::tz::TimeZone::UTC);
    Gate::Closed {
        opens,
        wait: Duration::from_secs(secs),
    }
}

/// Issue 63 item 6: outside every maintenance window a version change waits before its first
/// step, the old version serving, requeued at the next start; inside one, or approved, it goes
/// the usual way.
#[test]
fn an_upgrade_waits_for_its_window_with_the_old_version_serving() {
    let spec = testutil::spec();
    let waiting = Observed {
        old_pods: 3,
        window: closed(7200),
        ..upgrading()
    };
    let p = decide(&spec, &waiting);
    assert_eq!(p.phase, Phase::WaitingForWindow);
    assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
    assert_eq!(p.current_version.as_deref(), Some("0.0.9"));
    assert_eq!(p.migration_job, None);
    assert!(!p.maintenance_page && !p.backup && !p.migrated);
    assert_eq!(p.requeue, STEADY_REQUEUE, "at least every few minutes");
    let note = p.window.expect("what it waits for");
    assert!(
        note.contains("opening at 2027-01-15T08:00:00+00:00[UTC]"),
        "{note}"
    );
    // Requeued a second past the next start when that is sooner.
    let p = decide_after(&spec, &waiting, |o| o.window = closed(42));
    assert_eq!(p.requeue, Duration::from_secs(43));
    // A window that cannot be read waits too, and says why.
    let p = decide_after(&spec, &waiting, |o| {
        o.window = Gate::Never("maintenance window 1 timeZone \"X\" is not …".into())
    });
    assert_eq!(p.phase, Phase::WaitingForWindow);
    assert!(p.window.is_some_and(|n| n.contains("timeZone \"X\"")));
    // Open, or approved by the annotation: the stop-migrate-start as usual.
    let open = Gate::Open {
        closes: jiff::Timestamp::UNIX_EPOCH.to_zoned(jiff::tz::TimeZone::UTC),
    };
    for gate in [open, Gate::Approved, Gate::Unrestricted] {
        let p = decide_after(&spec, &waiting, |o| o.window = gate.clone());
        assert_eq!(p.phase, Phase::ScalingDown, "{gate:?}");
        assert_eq!(p.window, None);
    }
}

/// Every first step waits: the backup, the compatible path's migration Job, the zero-downtime
/// path's pre-deploy Job. The version probes (nothing stops, nothing migrates) do not.
#[test]
fn every_first_step_of_an_upgrade_waits() {
    let spec = testutil::spec();
    let p = decide_after(&spec, &upgrading(), |o| {
        o.old_pods = 3;
        o.backup = Backup::Absent;
        o.window = closed(60);
    });
    assert_eq!((p.phase, p.backup), (Phase::WaitingForWindow, false));
    let rolling = rolling_spec();
    let p = decide_after(&rolling, &upgrading(), |o| {
        o.old_pods = 3;
        o.compat = Compat::Unknown;
        o.window = closed(60);
    });
    assert_eq!(
        p.phase,
        Phase::CheckingCompatibility,
        "probing stops nothing"
    );
    for compat in [
        Compat::Compatible,
        Compat::ExpandContract { same_tasks: true },
    ] {
        let p = decide_after(&rolling, &upgrading(), |o| {
            o.old_pods = 3;
            o.compat = compat;
            o.window = closed(60);
        });
        assert_eq!(p.phase, Phase::WaitingForWindow, "{compat:?}");
        assert_eq!(p.migration_job, None);
        assert_eq!(p.workloads, Workloads::Run("0.0.9".into()));
    }
}

/// An upgrade under way runs to its end when its window closes; a first install, a stop and
/// a migrated version never wait.
#[test]
fn what_is_under_way_or_no_upgrade_does_not_wait() {
    let spec = testutil::spec();
    let closed = |o: &mut Observed| o.window = closed(3600);
    for previous in [
        Phase::BackingUp,
        Phase::ScalingDown,
        Phase::Migrating,
        Phase::MigrationFailed,
    ] {
        let p = decide_after(&spec, &upgrading(), |o| {
            closed(o);
            o.old_pods = 1;
            o.previous_phase = previous;
        });
        assert_eq!(p.phase, Phase::ScalingDown, "after {previous:?}");
    }
    let p = decide_after(&spec, &upgrading(), |o| {
        closed(o);
        o.previous_phase = Phase::BackingUp;
        o.backup = Backup::Running;
    });
    assert_eq!(p.phase, Phase::BackingUp, "a backup started in the window");
    let p = decide_after(&spec, &upgrading(), |o| {
        closed(o);
        o.job = JobState::Running;
    });
    assert_eq!(p.phase, Phase::Migrating);
    let p = decide_after(&spec, &upgrading(), |o| {
        closed(o);
        o.migration_attempts = 1;
        o.since_last_failure = Some(Duration::from_secs(3600));
    });
    assert_eq!((p.phase, p.migration_job), (Phase::Migrating, Some(1)));
    // Waiting is not under way: the next reconcile waits again.
    let p = decide_after(&spec, &upgrading(), |o| {
        closed(o);
        o.old_pods = 2;
        o.previous_phase = Phase::WaitingForWindow;
    });
    assert_eq!(p.phase, Phase::WaitingForWindow);

    let p = decide_after(&spec, &obs(), closed);
    assert_eq!(p.phase, Phase::Migrating, "a first install never waits");
    let mut stopped = testutil::spec();
    stopped.stopped = true;
    assert_eq!(
        decide_after(&stopped, &upgrading(), closed).phase,
        Phase::Stopped
    );
    let p = decide_after(&spec, &upgrading(), |o| {
        closed(o);
        o.current_version = Some("0.1.0".into());
        o.rolled_out = true;
        o.pods_ready = true;
    });
    assert_eq!(p.phase, Phase::Running);
}
