//! Step 1 of the pipeline: read what `phase::decide` needs. Children come from the watch
//! caches; the apiserver is asked only for what is not cached, and only while it matters
//! (pods while an upgrade waits for old ones to stop, probe output while versions are compared).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, LogParams};
use kube::runtime::reflector::Store;
use kube::{Client, ResourceExt};

use super::Error;
use super::stores::{self, Stores};
use crate::crd::{Hollo, Mode, UpgradeStrategy};
use crate::downgrade::{self, SchemaCheck};
use crate::phase::{Backup, Compat, JobState, Observed, Page};
use crate::resources::labels::{self, Component};
use crate::resources::{self, migration};

/// What one reconcile saw.
pub struct World {
    /// The role Deployments by component (`web`, `worker`, `all`).
    pub deployments: BTreeMap<&'static str, Arc<Deployment>>,
    /// Every Job this Hollo owns (migrations and version probes).
    pub jobs: Vec<Arc<Job>>,
    pub history: History,
    pub observed: Observed,
}

/// The migration failures recorded in the status, counted per target version: a new version
/// starts with a clean slate.
#[derive(Debug, Clone, PartialEq)]
pub struct History {
    pub attempts: i32,
    pub last_failure: Option<String>,
    /// `metadata.generation` when the last failure was recorded.
    pub failure_generation: Option<i64>,
    /// Time since that failure; `None` when the spec was edited since (the user may have fixed
    /// it: retry now).
    pub since_failure: Option<Duration>,
}

impl History {
    pub fn of(hollo: &Hollo, now: Timestamp) -> Self {
        let previous = hollo.status.clone().unwrap_or_default();
        if previous.target_version.as_deref() != Some(hollo.spec.version.as_str()) {
            return Self {
                attempts: 0,
                last_failure: None,
                failure_generation: None,
                since_failure: None,
            };
        }
        let failure_generation = previous.migration_failure_generation;
        let edited =
            failure_generation.is_some() && failure_generation != hollo.metadata.generation;
        let since_failure = if edited {
            None
        } else {
            previous
                .last_migration_failure
                .as_deref()
                .and_then(|s| s.parse::<Timestamp>().ok())
                .and_then(|t| now.duration_since(t).try_into().ok())
        };
        Self {
            attempts: previous.migration_attempts,
            last_failure: previous.last_migration_failure,
            failure_generation,
            since_failure,
        }
    }
}

/// The role components of a mode.
pub fn roles(mode: Mode) -> &'static [Component] {
    match mode {
        Mode::Split => &[Component::Web, Component::Worker],
        Mode::All => &[Component::All],
    }
}

pub fn job_state(job: Option<&Job>) -> JobState {
    let Some(job) = job else {
        return JobState::Absent;
    };
    let conds = job
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let is = |t: &str| conds.iter().find(|c| c.type_ == t && c.status == "True");
    if is("Complete").is_some() {
        JobState::Succeeded
    } else if let Some(c) = is("Failed") {
        let reason = c.reason.clone().unwrap_or_else(|| "Failed".into());
        JobState::Failed {
            reason: match &c.message {
                Some(m) if !m.is_empty() => format!("{reason}: {m}"),
                _ => reason,
            },
        }
    } else {
        JobState::Running
    }
}

/// Whether every pod of a Deployment runs `version` (template updated, old pods gone).
pub fn rolled_out(d: &Deployment, version: &str) -> bool {
    let template_version = d
        .spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get(labels::VERSION));
    if template_version.map(String::as_str) != Some(labels::label_value(version).as_str()) {
        return false;
    }
    let Some(s) = &d.status else { return false };
    let want = d.spec.replicas.unwrap_or(1);
    s.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
        && s.updated_replicas.unwrap_or(0) == want
        && s.replicas.unwrap_or(0) == want
}

/// The `app.kubernetes.io/version` of a Deployment's pod template.
pub fn template_version(d: &Deployment) -> Option<&str> {
    d.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.as_ref())
        .and_then(|l| l.get(labels::VERSION))
        .map(String::as_str)
}

fn ready_count(d: &Deployment) -> i32 {
    d.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

/// The maintenance page Deployment as the phase machine needs it (R-OP-ZD).
pub fn page(d: Option<&Arc<Deployment>>, now: Timestamp) -> Page {
    let Some(d) = d else {
        return Page::default();
    };
    let ready = ready_count(d) >= 1;
    let age = d
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(now.duration_since(t.0)).ok());
    Page {
        exists: true,
        ready,
        overdue: !ready && age.is_some_and(|a| a >= crate::phase::PAGE_WAIT),
    }
}

/// Whether every desired pod of a Deployment is ready.
pub fn pods_ready(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    d.status
        .as_ref()
        .is_some_and(|s| s.ready_replicas.unwrap_or(0) >= want)
}

/// Pods of the web/worker/all roles not labelled with the target version (terminating ones
/// included: they may still hold work), and how many of them are workers.
async fn old_pods(pods: &Api<Pod>, hollo: &Hollo) -> Result<(i32, i32), Error> {
    let list = pods
        .list(&ListParams::default().labels(&format!(
            "{}={},{}={},{} in (web,worker,all)",
            labels::NAME,
            labels::APP,
            labels::INSTANCE,
            hollo.name_any(),
            labels::COMPONENT
        )))
        .await?;
    let target = labels::label_value(&hollo.spec.version);
    let old: Vec<&Pod> = list
        .items
        .iter()
        .filter(|p| p.labels().get(labels::VERSION) != Some(&target))
        .collect();
    let workers = old
        .iter()
        .filter(|p| {
            p.labels().get(labels::COMPONENT).map(String::as_str)
                == Some(Component::Worker.as_str())
        })
        .count();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    Ok((count(old.len()), count(workers)))
}

/// Whether this `Hollo` can have web, worker or all pods at all: a first
/// install (no version recorded as running, no zero-downtime upgrade under way) with no
/// Deployment of its name in the cache — made by the operator, whatever `Hollo` owned it —
/// has none, so its reconciles, one per step of the first migration, need no pod list (a
/// label-selected list of a namespace that may hold thousands of pods). Any other time the
/// pods are listed, as R-OP-UPG's old-pods check always did.
fn pods_possible(
    deployments: &Store<Deployment>,
    hollo: &Hollo,
    current: Option<&str>,
    expand: bool,
) -> bool {
    if current.is_some() || expand {
        return true;
    }
    let ns = hollo.namespace();
    let name = hollo.name_any();
    deployments
        .find(|d| d.namespace() == ns && d.labels().get(labels::INSTANCE) == Some(&name))
        .is_some()
}

/// Reads the JSON a finished version probe reported — its termination message, else its log
/// (a custom `versionCommand` may only print it); `None` when neither has it.
async fn probe_output(pods: &Api<Pod>, job_name: &str) -> Option<migration::VersionInfo> {
    let list = pods
        .list(&ListParams::default().labels(&format!("job-name={job_name}")))
        .await
        .ok()?;
    for pod in list.items {
        if let Some(info) = migration::version_from_pod(&pod) {
            return Some(info);
        }
        let lp = LogParams {
            container: Some(resources::pod::CONTAINER.into()),
            ..LogParams::default()
        };
        if let Ok(log) = pods.logs(&pod.name_any(), &lp).await
            && let Some(info) = migration::parse_version_output(&log)
        {
            return Some(info);
        }
    }
    None
}

async fn compat(pods: &Api<Pod>, hollo: &Hollo, jobs: &[Arc<Job>], old: &str) -> Compat {
    let name = hollo.name_any();
    let mut infos = Vec::new();
    for version in [old, hollo.spec.version.as_str()] {
        let job_name = migration::probe_name(&name, version);
        let job = jobs.iter().find(|j| j.name_any() == job_name);
        match job_state(job.map(AsRef::as_ref)) {
            JobState::Absent => return Compat::Unknown,
            JobState::Running => return Compat::Probing,
            // An image without the version command can never be shown compatible.
            JobState::Failed { .. } => return Compat::Incompatible,
            JobState::Succeeded => match probe_output(pods, &job_name).await {
                Some(info) => infos.push(info),
                None => return Compat::Incompatible,
            },
        }
    }
    match infos.as_slice() {
        [o, n] => crate::phase::upgrade_path(o, n),
        _ => Compat::Incompatible,
    }
}

/// R-OP-ZD: a target older than the running version is checked against the
/// database's schema (the running image's), from both images' version probes.
async fn schema_check(pods: &Api<Pod>, hollo: &Hollo, jobs: &[Arc<Job>], old: &str) -> SchemaCheck {
    let spec = &hollo.spec;
    let target = spec.version.as_str();
    if spec.upgrade.allow_downgrade || !downgrade::older(target, old) {
        return SchemaCheck::NotNeeded;
    }
    if !spec.image.profile.reports_versions() {
        return SchemaCheck::Refused(format!(
            "version {target} is older than the running {old} and image profile {} cannot \
             report its schema version; nothing was stopped. Set spec.upgrade.allowDowngrade \
             to downgrade anyway",
            spec.image.profile.as_str()
        ));
    }
    let name = hollo.name_any();
    let mut infos = Vec::new();
    for version in [old, target] {
        let job_name = migration::probe_name(&name, version);
        let job = jobs.iter().find(|j| j.name_any() == job_name);
        let unreadable = || {
            SchemaCheck::Refused(format!(
                "version {target} is older than the running {old} and the version probe of \
                 {version} ({job_name}) reported no schema version; nothing was stopped. Set \
                 spec.upgrade.allowDowngrade to downgrade anyway"
            ))
        };
        match job_state(job.map(AsRef::as_ref)) {
            JobState::Absent | JobState::Running => return SchemaCheck::Probing,
            JobState::Failed { .. } => return unreadable(),
            JobState::Succeeded => match probe_output(pods, &job_name).await {
                Some(info) => infos.push(info),
                None => return unreadable(),
            },
        }
    }
    match infos.as_slice() {
        [database, new] => downgrade::judge(target, database, new),
        _ => SchemaCheck::Probing,
    }
}

/// R-OP-OPS: the state of the pre-migration Backup (GET by name: CloudNativePG may be
/// absent, so it is not watched); `unavailable`: why none can be asked for, when it cannot.
async fn backup_state(
    client: &Client,
    hollo: &Hollo,
    now: Timestamp,
    unavailable: Option<&str>,
) -> Result<Backup, Error> {
    use crate::resources::backup;
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(client.clone(), &ns, &backup::resource());
    let name = backup::name(hollo);
    let Some(o) = api.get_opt(&name).await? else {
        return Ok(match unavailable {
            Some(why) => Backup::Unavailable(why.to_string()),
            None => Backup::Absent,
        });
    };
    let status = &o.data["status"];
    let phase = status["phase"].as_str().unwrap_or("");
    let timeout =
        Duration::from_secs(u64::try_from(hollo.spec.upgrade.backup.timeout_seconds).unwrap_or(0));
    let age = o
        .metadata
        .creation_timestamp
        .as_ref()
        .and_then(|t| Duration::try_from(now.duration_since(t.0)).ok());
    Ok(match phase {
        "completed" => Backup::Completed,
        "failed" => Backup::Failed(format!(
            "CloudNativePG Backup {name} failed: {}",
            status["error"].as_str().unwrap_or("no error given")
        )),
        _ if age.is_some_and(|a| a >= timeout) => Backup::Failed(format!(
            "CloudNativePG Backup {name} not completed within {}s (phase {:?})",
            timeout.as_secs(),
            phase
        )),
        _ => Backup::Running,
    })
}

/// What the decision needs of `hollo` (the effective one: see `external::effective`);
/// `backup_unavailable`: why `upgrade.backup` can ask for no Backup, when it cannot.
pub async fn observe(
    client: &Client,
    stores: &Stores,
    hollo: &Hollo,
    now: Timestamp,
    backup_unavailable: Option<&str>,
) -> Result<World, Error> {
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let name = hollo.name_any();
    let target = hollo.spec.version.as_str();
    let status = hollo.status.clone().unwrap_or_default();
    let history = History::of(hollo, now);

    let mut deployments = BTreeMap::new();
    for d in stores::owned(&stores.deployments, hollo) {
        for c in [
            Component::Web,
            Component::Worker,
            Component::All,
            Component::MaintenancePage,
        ] {
            if d.name_any() == resources::deployment_name(hollo, c) {
                deployments.insert(c.as_str(), d.clone());
            }
        }
    }
    let jobs = stores::owned(&stores.jobs, hollo);

    let target_label = labels::label_value(target);
    let is_migration = |j: &Job| {
        j.labels().get(labels::COMPONENT).map(String::as_str) == Some(Component::Migration.as_str())
    };
    let job_name = migration::job_name(&name, target, history.attempts);
    let job = jobs.iter().find(|j| j.name_any() == job_name);
    let other_migration_active = jobs.iter().any(|j| {
        is_migration(j)
            && j.labels().get(labels::VERSION) != Some(&target_label)
            && job_state(Some(j)) == JobState::Running
    });

    let current = status.current_version.clone();
    // R-OP-ZD: a zero-downtime upgrade of the target past its pre-deploy migrations.
    let expand = status
        .expand_contract
        .clone()
        .filter(|e| e.version == target);
    let kind_job = |kind| {
        let name = migration::kind_job_name(&name, kind, target, history.attempts);
        job_state(
            jobs.iter()
                .find(|j| j.name_any() == name)
                .map(AsRef::as_ref),
        )
    };
    let (pre_job, post_job) = (
        kind_job(migration::MigrationKind::Pre),
        kind_job(migration::MigrationKind::Post),
    );
    // Old pods and compatibility only matter while the target is not the running version
    // (or its post-deploy migrations wait for the last old pod).
    let upgrading = current.as_deref() != Some(target);
    let (old_pods, old_workers) = if (upgrading || expand.is_some())
        && pods_possible(
            &stores.deployments,
            hollo,
            current.as_deref(),
            expand.is_some(),
        ) {
        old_pods(&pods, hollo).await?
    } else {
        (0, 0)
    };
    let compat = match (&current, hollo.spec.upgrade_strategy_in_effect()) {
        (Some(old), UpgradeStrategy::RollingWhenCompatible) if upgrading => {
            compat(&pods, hollo, &jobs, old).await
        }
        _ => Compat::Unknown,
    };

    let schema = match &current {
        Some(old) if upgrading => schema_check(&pods, hollo, &jobs, old).await,
        _ => SchemaCheck::NotNeeded,
    };

    let roles = roles(hollo.spec.mode);
    let all_rolled_out = roles.iter().all(|c| {
        deployments
            .get(c.as_str())
            .is_some_and(|d| rolled_out(d, target))
    });
    let all_ready = roles
        .iter()
        .all(|c| deployments.get(c.as_str()).is_some_and(|d| pods_ready(d)));
    let backup = match &current {
        Some(_) if upgrading && hollo.spec.backup_wanted() => {
            backup_state(client, hollo, now, backup_unavailable).await?
        }
        _ => Backup::NotWanted,
    };
    // Issue 63 item 6: only a version change from a running version can wait for a window.
    let window = match &current {
        Some(_) if upgrading => crate::window::gate(
            now,
            &hollo.spec.upgrade.maintenance_windows,
            hollo
                .annotations()
                .get(crate::window::APPROVE_UPGRADE)
                .map(String::as_str),
            target,
        ),
        _ => crate::window::Gate::Unrestricted,
    };
    let page = page(deployments.get(Component::MaintenancePage.as_str()), now);
    let http = crate::resources::service::http_component(hollo);
    let http_ready = deployments
        .get(http.as_str())
        .is_some_and(|d| template_version(d) == Some(target_label.as_str()) && ready_count(d) >= 1);
    let observed = Observed {
        current_version: current,
        migration_attempts: history.attempts,
        since_last_failure: history.since_failure,
        old_pods,
        job: job_state(job.map(AsRef::as_ref)),
        other_migration_active,
        compat,
        rolled_out: all_rolled_out,
        pods_ready: all_ready,
        previous_phase: status.phase,
        schema,
        page,
        http_ready,
        backup,
        pre_job,
        post_job,
        old_workers,
        expand,
        window,
    };
    Ok(World {
        deployments,
        jobs,
        history,
        observed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};

    fn job_with(t: &str, reason: Option<&str>, message: Option<&str>) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: Some(vec![JobCondition {
                    type_: t.into(),
                    status: "True".into(),
                    reason: reason.map(Into::into),
                    message: message.map(Into::into),
                    ..JobCondition::default()
                }]),
                ..JobStatus::default()
            }),
            ..Job::default()
        }
    }

    #[test]
    fn job_states_are_read_from_conditions() {
        assert_eq!(job_state(None), JobState::Absent);
        assert_eq!(job_state(Some(&Job::default())), JobState::Running);
        assert_eq!(
            job_state(Some(&job_with("Complete", None, None))),
            JobState::Succeeded
        );
        assert_eq!(
            job_state(Some(&job_with(
                "Failed",
                Some("BackoffLimitExceeded"),
                Some("Job has reached the specified backoff limit")
            ))),
            JobState::Failed {
                reason: "BackoffLimitExceeded: Job has reached the specified backoff limit".into()
            }
        );
    }

    #[test]
    fn rolled_out_needs_the_version_and_every_pod_ready() {
        let h = crate::testutil::hollo(crate::testutil::spec());
        let mut d = resources::web::deployment(&h, "0.1.0", Some(2));
        d.metadata.generation = Some(4);
        assert!(!rolled_out(&d, "0.1.0"), "no status yet");
        d.status = Some(DeploymentStatus {
            observed_generation: Some(4),
            replicas: Some(2),
            updated_replicas: Some(2),
            ready_replicas: Some(2),
            ..DeploymentStatus::default()
        });
        assert!(rolled_out(&d, "0.1.0"));
        assert!(pods_ready(&d));
        assert!(
            !rolled_out(&d, "0.2.0"),
            "template still on the old version"
        );
        if let Some(s) = d.status.as_mut() {
            s.ready_replicas = Some(1);
        }
        assert!(
            rolled_out(&d, "0.1.0"),
            "updated even while a pod is unready"
        );
        assert!(!pods_ready(&d));
        if let Some(s) = d.status.as_mut() {
            s.updated_replicas = Some(1);
        }
        assert!(!rolled_out(&d, "0.1.0"), "an old pod remains");
    }

    #[test]
    fn only_a_first_install_without_deployments_skips_the_pod_list() {
        use kube::runtime::{reflector, watcher};
        let h = crate::testutil::hollo(crate::testutil::spec());
        let (deployments, mut writer) = reflector::store::<Deployment>();
        assert!(
            !pods_possible(&deployments, &h, None, false),
            "first install"
        );
        assert!(
            pods_possible(&deployments, &h, Some("0.0.9"), false),
            "an upgrade"
        );
        assert!(
            pods_possible(&deployments, &h, None, true),
            "expand/contract"
        );
        let mut other = crate::testutil::hollo(crate::testutil::spec());
        other.metadata.name = Some("other".into());
        writer.apply_watcher_event(&watcher::Event::Apply(resources::web::deployment(
            &other, "0.1.0", None,
        )));
        assert!(
            !pods_possible(&deployments, &h, None, false),
            "another Hollo's"
        );
        // No version recorded but a Deployment of its name (a status lost, a Hollo made again):
        // its pods may run; they are listed.
        writer.apply_watcher_event(&watcher::Event::Apply(resources::worker::deployment(
            &h, "0.0.9", None,
        )));
        assert!(pods_possible(&deployments, &h, None, false));
    }

    #[test]
    fn a_new_target_version_starts_with_a_clean_failure_history() {
        let mut h = crate::testutil::hollo(crate::testutil::spec());
        h.status = Some(crate::crd::HolloStatus {
            target_version: Some("0.0.9".into()),
            migration_attempts: 3,
            last_migration_failure: Some("2026-01-01T00:00:00Z".into()),
            migration_failure_generation: Some(3),
            ..Default::default()
        });
        let now: Timestamp = "2026-01-01T00:01:00Z".parse().expect("time");
        assert_eq!(History::of(&h, now).attempts, 0);
        if let Some(s) = h.status.as_mut() {
            s.target_version = Some("0.1.0".into());
        }
        let same = History::of(&h, now);
        assert_eq!(same.attempts, 3);
        assert_eq!(same.since_failure, Some(Duration::from_secs(60)));
        h.metadata.generation = Some(4);
        assert_eq!(History::of(&h, now).since_failure, None, "edited since");
    }
}
