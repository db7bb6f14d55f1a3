//! The thin loop: observe the world, let `phase` decide, build objects with `resources`, apply
//! them with server-side apply (one field manager), write status, publish events, requeue.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams, LogParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::budget::Budget;
use crate::crd::{Hollo, HolloStatus, Mode, Phase, RoleStatus};
use crate::phase::{self, Compat, JobState, Observed, Plan, Workloads};
use crate::resources::labels::{self, Component};
use crate::resources::{self, autoscaling, ingress, migration, pdb, service};
use crate::status;
use crate::telemetry::Health;

/// The one field manager of every write (R-OP-1).
pub const MANAGER: &str = "hollo-operator";

#[derive(thiserror::Error, Debug)]
pub enum Error {
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    #[error("the Hollo has no namespace")]
    NoNamespace,
    #[error(
        "worker.autoscaling.keda.enabled but KEDA's ScaledObject API (keda.sh/v1alpha1) is not \
         installed: install KEDA or disable keda"
    )]
    KedaMissing,
}

impl Error {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "client",
            Error::NoNamespace => "no_namespace",
            Error::KedaMissing => "keda_missing",
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub health: Arc<Health>,
}

fn apply_params() -> PatchParams {
    // `force`: we are the only intended manager of these fields; take them back after a manual
    // edit instead of failing on the conflict (that is how drift gets corrected).
    PatchParams::apply(MANAGER).force()
}

async fn apply<K>(api: &Api<K>, obj: &K) -> Result<K, Error>
where
    K: Resource + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = obj.meta().name.clone().unwrap_or_default();
    Ok(api
        .patch(&name, &apply_params(), &Patch::Apply(obj))
        .await?)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Deletes `name` if it exists *and* this Hollo owns it: an object of the same name created by
/// someone else is never touched.
async fn delete_owned<K>(api: &Api<K>, name: &str, owner_uid: &str) -> Result<(), Error>
where
    K: Resource + DeserializeOwned + Clone + Debug,
{
    let existing = match api.get_opt(name).await {
        Ok(o) => o,
        // The resource type itself may be missing (e.g. KEDA not installed): nothing to delete.
        Err(e) if is_not_found(&e) => None,
        Err(e) => return Err(e.into()),
    };
    let Some(obj) = existing else { return Ok(()) };
    let ours = obj
        .meta()
        .owner_references
        .iter()
        .flatten()
        .any(|r| r.uid == owner_uid);
    if ours {
        match api.delete(name, &Default::default()).await {
            Ok(_) => tracing::info!(%name, "deleted child no longer wanted"),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Creates a Job unless one of that name exists (Job specs are immutable; an existing one is
/// left alone, finished or not).
async fn ensure_job(api: &Api<Job>, job: &Job) -> Result<(), Error> {
    let name = job.metadata.name.clone().unwrap_or_default();
    if api.get_opt(&name).await?.is_none() {
        apply(api, job).await?;
        tracing::info!(job = %name, "created Job");
    }
    Ok(())
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

/// Whether every desired pod of a Deployment is ready.
pub fn pods_ready(d: &Deployment) -> bool {
    let want = d.spec.replicas.unwrap_or(1);
    d.status
        .as_ref()
        .is_some_and(|s| s.ready_replicas.unwrap_or(0) >= want)
}

fn role_status(d: Option<&Deployment>) -> RoleStatus {
    let s = d.and_then(|d| d.status.as_ref());
    RoleStatus {
        replicas: s.and_then(|s| s.replicas).unwrap_or(0),
        ready_replicas: s.and_then(|s| s.ready_replicas).unwrap_or(0),
    }
}

/// The role components of a mode.
fn roles(mode: Mode) -> &'static [Component] {
    match mode {
        Mode::Split => &[Component::Web, Component::Worker],
        Mode::All => &[Component::All],
    }
}

const ALL_ROLES: [Component; 3] = [Component::Web, Component::Worker, Component::All];
/// How soon to look again while KEDA is asked for but its API is missing.
const KEDA_RECHECK: std::time::Duration = std::time::Duration::from_secs(30);

struct Apis {
    deployments: Api<Deployment>,
    pods: Api<Pod>,
    jobs: Api<Job>,
    services: Api<Service>,
    pdbs: Api<PodDisruptionBudget>,
    hpas: Api<HorizontalPodAutoscaler>,
    ingresses: Api<Ingress>,
    scaled_objects: Api<DynamicObject>,
    hollos: Api<Hollo>,
}

impl Apis {
    fn new(client: &Client, ns: &str) -> Self {
        Self {
            deployments: Api::namespaced(client.clone(), ns),
            pods: Api::namespaced(client.clone(), ns),
            jobs: Api::namespaced(client.clone(), ns),
            services: Api::namespaced(client.clone(), ns),
            pdbs: Api::namespaced(client.clone(), ns),
            hpas: Api::namespaced(client.clone(), ns),
            ingresses: Api::namespaced(client.clone(), ns),
            scaled_objects: Api::namespaced_with(
                client.clone(),
                ns,
                &autoscaling::scaled_object_resource(),
            ),
            hollos: Api::namespaced(client.clone(), ns),
        }
    }
}

/// Reads the JSON a finished version probe reported — its termination message, else its log
/// (a custom `versionCommand` may only print it); `None` when neither has it.
async fn probe_output(apis: &Apis, job_name: &str) -> Option<migration::VersionInfo> {
    let pods = apis
        .pods
        .list(&ListParams::default().labels(&format!("job-name={job_name}")))
        .await
        .ok()?;
    for pod in pods.items {
        if let Some(info) = migration::version_from_pod(&pod) {
            return Some(info);
        }
        let lp = LogParams {
            container: Some(resources::pod::CONTAINER.into()),
            ..LogParams::default()
        };
        if let Ok(log) = apis.pods.logs(&pod.name_any(), &lp).await
            && let Some(info) = migration::parse_version_output(&log)
        {
            return Some(info);
        }
    }
    None
}

async fn observe_compat(apis: &Apis, hollo: &Hollo, old: &str) -> Result<Compat, Error> {
    let name = hollo.name_any();
    let mut infos = Vec::new();
    for version in [old, hollo.spec.version.as_str()] {
        let job_name = migration::probe_name(&name, version);
        let job = apis.jobs.get_opt(&job_name).await?;
        match job_state(job.as_ref()) {
            JobState::Absent => return Ok(Compat::Unknown),
            JobState::Running => return Ok(Compat::Probing),
            // An image without the version command can never be shown compatible.
            JobState::Failed { .. } => return Ok(Compat::Incompatible),
            JobState::Succeeded => match probe_output(apis, &job_name).await {
                Some(info) => infos.push(info),
                None => return Ok(Compat::Incompatible),
            },
        }
    }
    Ok(match infos.as_slice() {
        [o, n] if migration::compatible(o, n) => Compat::Compatible,
        _ => Compat::Incompatible,
    })
}

struct World {
    deployments: BTreeMap<&'static str, Deployment>,
    observed: Observed,
}

async fn observe(
    apis: &Apis,
    hollo: &Hollo,
    attempts: i32,
    since_failure: Option<Duration>,
) -> Result<World, Error> {
    let name = hollo.name_any();
    let target = hollo.spec.version.as_str();
    let status = hollo.status.clone().unwrap_or_default();

    let mut deployments = BTreeMap::new();
    for c in ALL_ROLES {
        if let Some(d) = apis
            .deployments
            .get_opt(&resources::deployment_name(hollo, c))
            .await?
        {
            deployments.insert(c.as_str(), d);
        }
    }

    let pods = apis
        .pods
        .list(&ListParams::default().labels(&format!(
            "{}={},{}={},{} in (web,worker,all)",
            labels::NAME,
            labels::APP,
            labels::INSTANCE,
            name,
            labels::COMPONENT
        )))
        .await?;
    let target_label = labels::label_value(target);
    let old_pods = pods
        .items
        .iter()
        .filter(|p| p.labels().get(labels::VERSION) != Some(&target_label))
        .count();

    let jobs = apis
        .jobs
        .list(&ListParams::default().labels(&format!(
            "{}={},{}={}",
            labels::INSTANCE,
            name,
            labels::COMPONENT,
            Component::Migration.as_str()
        )))
        .await?;
    let job_name = migration::job_name(&name, target, attempts);
    let job = jobs.items.iter().find(|j| j.name_any() == job_name);
    let other_migration_active = jobs.items.iter().any(|j| {
        j.labels().get(labels::VERSION) != Some(&target_label)
            && job_state(Some(j)) == JobState::Running
    });

    let current = status.current_version.clone();
    let compat = match (&current, hollo.spec.upgrade_strategy) {
        (Some(old), crate::crd::UpgradeStrategy::RollingWhenCompatible) if old != target => {
            observe_compat(apis, hollo, old).await?
        }
        _ => Compat::Unknown,
    };

    let all_rolled_out = roles(hollo.spec.mode).iter().all(|c| {
        deployments
            .get(c.as_str())
            .is_some_and(|d| rolled_out(d, target))
    });

    let all_ready = roles(hollo.spec.mode)
        .iter()
        .all(|c| deployments.get(c.as_str()).is_some_and(pods_ready));
    Ok(World {
        deployments,
        observed: Observed {
            current_version: current,
            migration_attempts: attempts,
            since_last_failure: since_failure,
            old_pods: i32::try_from(old_pods).unwrap_or(i32::MAX),
            job: job_state(job),
            other_migration_active,
            compat,
            rolled_out: all_rolled_out,
            pods_ready: all_ready,
            previous_phase: status.phase,
        },
    })
}

/// How many replicas a role Deployment should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// `spec.*.replicas`, enforced (drift is corrected).
    Exactly(i32),
    /// An autoscaler owns the count; only lift it to the autoscaler's minimum (after a stop
    /// the workers sit at 0, where an HPA never scales).
    AtLeast(i32),
}

impl Replicas {
    /// The count a new Deployment is created with.
    pub fn initial(self) -> i32 {
        match self {
            Replicas::Exactly(n) | Replicas::AtLeast(n) => n,
        }
    }

    /// The count to set through the scale subresource, if the current one must change.
    pub fn scale_to(self, current: Option<i32>) -> Option<i32> {
        // The apiserver defaults an unset count to 1.
        let current = current.unwrap_or(1);
        match self {
            Replicas::Exactly(n) => (current != n).then_some(n),
            Replicas::AtLeast(min) => (current < min).then_some(min),
        }
    }
}

/// Sets `replicas` through the scale subresource (an update, not part of our apply).
async fn scale(apis: &Apis, name: &str, replicas: i32) -> Result<(), Error> {
    let pp = PatchParams {
        field_manager: Some(MANAGER.into()),
        ..PatchParams::default()
    };
    apis.deployments
        .patch_scale(
            name,
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    tracing::info!(deployment = %name, replicas, "scaled");
    Ok(())
}

/// Creates a Deployment with its initial `replicas` (a create is not an apply, so the count
/// stays out of our apply's managed fields). A concurrent create falls back to the apply.
async fn create_deployment(apis: &Apis, d: &Deployment) -> Result<(), Error> {
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    match apis.deployments.create(&pp, d).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => {
            let mut without = d.clone();
            without.spec.replicas = None;
            apply(&apis.deployments, &without).await.map(|_| ())
        }
        Err(e) => Err(e.into()),
    }
}

/// Once the target runs, migration Jobs of other versions and all version probes are history.
/// The target's own Jobs stay (a failed attempt's logs remain reachable).
async fn cleanup_jobs(apis: &Apis, hollo: &Hollo, uid: &str) -> Result<(), Error> {
    let target = labels::label_value(&hollo.spec.version);
    let jobs = apis
        .jobs
        .list(&ListParams::default().labels(&format!("{}={}", labels::INSTANCE, hollo.name_any())))
        .await?;
    let dp = kube::api::DeleteParams::background();
    for j in jobs.items {
        let l = j.labels();
        let probe =
            l.get(labels::COMPONENT).map(String::as_str) == Some(migration::PROBE_COMPONENT);
        let old_migration = l.get(labels::COMPONENT).map(String::as_str)
            == Some(Component::Migration.as_str())
            && l.get(labels::VERSION) != Some(&target);
        let ours = j.owner_references().iter().any(|r| r.uid == uid);
        if ours && (probe || old_migration) && job_state(Some(&j)) != JobState::Running {
            match apis.jobs.delete(&j.name_any(), &dp).await {
                Ok(_) => tracing::info!(job = %j.name_any(), "deleted finished Job"),
                Err(e) if is_not_found(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(())
}

async fn apply_workloads(
    apis: &Apis,
    hollo: &Hollo,
    world: &World,
    workloads: &Workloads,
    uid: &str,
) -> Result<(), Error> {
    let spec = &hollo.spec;
    let worker_name = resources::worker_autoscaler_name(hollo);
    match workloads {
        Workloads::Stopped => {
            // Autoscalers first, or they would scale the old version back up.
            delete_owned(&apis.hpas, &worker_name, uid).await?;
            delete_owned(&apis.scaled_objects, &worker_name, uid).await?;
            for (component, d) in &world.deployments {
                if d.spec.replicas != Some(0) {
                    scale(apis, &d.name_any(), 0).await?;
                    tracing::info!(role = component, "scaled to 0 before migrating");
                }
            }
        }
        Workloads::Run(version) => {
            let autoscaled = spec.worker_autoscaled();
            let desired: Vec<(Component, Replicas)> = match spec.mode {
                Mode::Split => vec![
                    (Component::Web, Replicas::Exactly(spec.web.replicas)),
                    // Never fight an autoscaler over `replicas` (R-OP-1): only lift the workers
                    // to its minimum, as the autoscaler itself would.
                    (
                        Component::Worker,
                        if autoscaled {
                            Replicas::AtLeast(spec.worker.autoscaling.min_replicas)
                        } else {
                            Replicas::Exactly(spec.worker.replicas)
                        },
                    ),
                ],
                Mode::All => vec![(Component::All, Replicas::Exactly(spec.web.replicas))],
            };
            for (component, replicas) in desired {
                let build = |r: Option<i32>| match component {
                    Component::Web => resources::web::deployment(hollo, version, r),
                    Component::Worker => resources::worker::deployment(hollo, version, r),
                    _ => resources::all::deployment(hollo, version, r),
                };
                match world.deployments.get(component.as_str()) {
                    None => create_deployment(apis, &build(Some(replicas.initial()))).await?,
                    Some(existing) => {
                        // `replicas` is never part of the apply: our apply manager then never
                        // owns it, so handing it to an autoscaler (or back) cannot reset it.
                        apply(&apis.deployments, &build(None)).await?;
                        if let Some(n) = replicas.scale_to(existing.spec.replicas) {
                            scale(apis, &existing.name_any(), n).await?;
                        }
                    }
                }
            }
            for c in ALL_ROLES {
                if !roles(spec.mode).contains(&c) {
                    delete_owned(
                        &apis.deployments,
                        &resources::deployment_name(hollo, c),
                        uid,
                    )
                    .await?;
                }
            }
            match autoscaling::autoscaler(hollo) {
                autoscaling::Autoscaler::None => {
                    delete_owned(&apis.hpas, &worker_name, uid).await?;
                    delete_owned(&apis.scaled_objects, &worker_name, uid).await?;
                }
                autoscaling::Autoscaler::Hpa(h) => {
                    delete_owned(&apis.scaled_objects, &worker_name, uid).await?;
                    apply(&apis.hpas, h.as_ref()).await?;
                }
                autoscaling::Autoscaler::Keda(o) => {
                    delete_owned(&apis.hpas, &worker_name, uid).await?;
                    match apply(&apis.scaled_objects, o.as_ref()).await {
                        Err(Error::Kube(e)) if is_not_found(&e) => return Err(Error::KedaMissing),
                        other => {
                            other?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

async fn publish(
    ctx: &Context,
    hollo: &Hollo,
    type_: EventType,
    reason: &str,
    action: &str,
    note: String,
) {
    let ev = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    };
    // Events are best effort: a failure to record one must not fail the reconcile.
    if let Err(e) = ctx.recorder.publish(&ev, &hollo.object_ref(&())).await {
        tracing::warn!(error = %e, reason, "could not publish event");
    }
}

fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse().ok()
}

pub async fn reconcile(hollo: Arc<Hollo>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_inner(&hollo, &ctx).await;
    ctx.health.metrics.observe(
        started.elapsed(),
        result.as_ref().err().map(Error::metric_label),
    );
    result
}

async fn reconcile_inner(hollo: &Hollo, ctx: &Context) -> Result<Action, Error> {
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let name = hollo.name_any();
    let uid = hollo.uid().unwrap_or_default();
    let apis = Apis::new(&ctx.client, &ns);
    let spec = &hollo.spec;
    let previous = hollo.status.clone().unwrap_or_default();
    let now = Timestamp::now();

    // Failures count per target version: a new version starts with a clean slate.
    let same_target = previous.target_version.as_deref() == Some(spec.version.as_str());
    let (attempts, last_failure) = if same_target {
        (
            previous.migration_attempts,
            previous.last_migration_failure.clone(),
        )
    } else {
        (0, None)
    };
    let failure_generation = if same_target {
        previous.migration_failure_generation
    } else {
        None
    };
    let edited_since_failure =
        failure_generation.is_some() && failure_generation != hollo.meta().generation;
    let since_failure = if edited_since_failure {
        // The spec changed since the failure: the user may have fixed it; retry now.
        None
    } else {
        last_failure
            .as_deref()
            .and_then(parse_time)
            .and_then(|t| now.duration_since(t).try_into().ok())
    };

    let world = observe(&apis, hollo, attempts, since_failure).await?;
    let plan: Plan = phase::decide(spec, &world.observed);
    tracing::debug!(
        hollo = %name, namespace = %ns, phase = plan.phase.as_str(),
        old_pods = world.observed.old_pods, job = ?world.observed.job,
        "reconciling"
    );

    // Objects that do not depend on the phase.
    apply(&apis.services, &service::service(hollo)).await?;
    match ingress::ingress(hollo) {
        Some(i) => {
            apply(&apis.ingresses, &i).await?;
        }
        None => delete_owned(&apis.ingresses, &resources::web_service_name(hollo), &uid).await?,
    }
    let http = service::http_component(hollo);
    match pdb::web(hollo) {
        Some(p) => {
            apply(&apis.pdbs, &p).await?;
        }
        None => delete_owned(&apis.pdbs, &format!("{name}-{}", http.as_str()), &uid).await?,
    }
    match pdb::worker(hollo) {
        Some(p) => {
            apply(&apis.pdbs, &p).await?;
        }
        None => delete_owned(&apis.pdbs, &format!("{name}-worker"), &uid).await?,
    }
    // A mode switch leaves the other HTTP role's PDB behind.
    let other_http = if http == Component::Web {
        Component::All
    } else {
        Component::Web
    };
    delete_owned(&apis.pdbs, &format!("{name}-{}", other_http.as_str()), &uid).await?;

    if let (Some(attempt), true) = (
        plan.migration_job,
        world.observed.job != JobState::Succeeded,
    ) {
        ensure_job(&apis.jobs, &migration::job(hollo, attempt)).await?;
    }
    if plan.probe_versions
        && let Some(old) = &world.observed.current_version
    {
        ensure_job(&apis.jobs, &migration::probe_job(hollo, old)).await?;
        ensure_job(&apis.jobs, &migration::probe_job(hollo, &spec.version)).await?;
    }

    let applied = apply_workloads(&apis, hollo, &world, &plan.workloads, &uid).await;
    // KEDA asked for but not installed: everything else is applied (the autoscaler comes last);
    // say so in the status (Degraded, reason KedaNotInstalled) and a Warning event, and look
    // again soon, since nothing notifies us when its CRD appears.
    let autoscaler_missing = match applied {
        Err(e @ Error::KedaMissing) => Some(e.to_string()),
        other => {
            other?;
            None
        }
    };
    if let Some(why) = &autoscaler_missing {
        publish(
            ctx,
            hollo,
            EventType::Warning,
            "KedaNotInstalled",
            "Autoscale",
            why.clone(),
        )
        .await;
    }
    if plan.phase == Phase::Running {
        cleanup_jobs(&apis, hollo, &uid).await?;
    }

    // Status.
    let (attempts, last_failure) = match &plan.record_failure {
        Some(_) => (attempts + 1, Some(now.to_string())),
        None => (attempts, last_failure),
    };
    let budget = Budget::for_spec(spec);
    let dep = |c: Component| world.deployments.get(c.as_str());
    let (web, worker) = match spec.mode {
        Mode::Split => (
            role_status(dep(Component::Web)),
            role_status(dep(Component::Worker)),
        ),
        Mode::All => (
            role_status(dep(Component::All)),
            role_status(dep(Component::All)),
        ),
    };
    let inputs = status::Inputs {
        pods_ready: world.observed.pods_ready,
        generation: hollo.meta().generation,
        previous: hollo.status.as_ref(),
        web,
        worker,
        budget: &budget,
        now,
        autoscaler_missing: autoscaler_missing.clone(),
    };
    let mut new_status: HolloStatus = status::compute(spec, &plan, &inputs, attempts, last_failure);
    new_status.migration_failure_generation = match &plan.record_failure {
        Some(_) => hollo.meta().generation,
        None => failure_generation,
    };
    let patch = json!({
        "apiVersion": "hollo.social/v1alpha1",
        "kind": "Hollo",
        "status": new_status,
    });
    apis.hollos
        .patch_status(&name, &apply_params(), &Patch::Apply(&patch))
        .await?;

    // Events.
    if let Some(reason) = &plan.record_failure {
        let job = migration::job_name(&name, &spec.version, attempts - 1);
        publish(
            ctx,
            hollo,
            EventType::Warning,
            "MigrationFailed",
            "Migrate",
            format!(
                "migration Job {job} failed ({reason}); retry {} in {}s; the new version does not start",
                attempts,
                phase::backoff(attempts).as_secs()
            ),
        )
        .await;
    }
    if plan.phase != previous.phase {
        tracing::info!(
            hollo = %name, namespace = %ns, from = previous.phase.as_str(),
            to = plan.phase.as_str(), target_version = %spec.version, "phase changed"
        );
        let type_ = if plan.phase == Phase::MigrationFailed {
            EventType::Warning
        } else {
            EventType::Normal
        };
        publish(
            ctx,
            hollo,
            type_,
            plan.phase.as_str(),
            "PhaseChange",
            format!(
                "phase {} → {} (target {})",
                previous.phase.as_str(),
                plan.phase.as_str(),
                spec.version
            ),
        )
        .await;
    }
    let was_over = previous
        .conditions
        .iter()
        .any(|c| c.type_ == status::CONNECTION_BUDGET && c.status == "False");
    let generation_changed = previous.observed_generation != hollo.meta().generation;
    if !budget.fits() && (!was_over || generation_changed) {
        publish(
            ctx,
            hollo,
            EventType::Warning,
            "ConnectionBudgetExceeded",
            "CheckBudget",
            budget.explain(),
        )
        .await;
    }

    let requeue = match autoscaler_missing {
        Some(_) => plan.requeue.min(KEDA_RECHECK),
        None => plan.requeue,
    };
    Ok(Action::requeue(requeue))
}

pub fn error_policy(hollo: Arc<Hollo>, error: &Error, _ctx: Arc<Context>) -> Action {
    tracing::warn!(hollo = %hollo.name_any(), %error, "reconcile failed; retrying");
    Action::requeue(Duration::from_secs(15))
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
    fn replicas_are_enforced_or_only_lifted_for_autoscalers() {
        assert_eq!(Replicas::Exactly(3).scale_to(Some(3)), None);
        assert_eq!(Replicas::Exactly(3).scale_to(Some(0)), Some(3));
        assert_eq!(
            Replicas::Exactly(3).scale_to(Some(5)),
            Some(3),
            "drift corrected"
        );
        assert_eq!(Replicas::Exactly(1).scale_to(None), None, "unset means 1");
        assert_eq!(
            Replicas::AtLeast(2).scale_to(Some(0)),
            Some(2),
            "after a stop"
        );
        assert_eq!(
            Replicas::AtLeast(2).scale_to(Some(7)),
            None,
            "the autoscaler's choice"
        );
        assert_eq!(Replicas::AtLeast(2).initial(), 2);
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
}
