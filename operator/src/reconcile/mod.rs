//! The reconcile pipeline (R-OP-1): observe the cluster (watch caches first) → let
//! `phase::decide` choose → build the desired set of children (pure) → converge: server-side
//! apply what differs under one field manager, delete owned children that are not wanted →
//! status and events.
//!
//! | module     | step                                                                   |
//! |------------|------------------------------------------------------------------------|
//! | `stores`   | the watch caches of every child kind                                   |
//! | `observe`  | 1. what the decision needs                                             |
//! | `external` | 1b. Secrets and the CloudNativePG Cluster a spec names (not owned), and |
//! |            | the generated `SECRET_KEY` Secret, created once when due              |
//! | `desired`  | 3. the desired set (pure)                                              |
//! | `apply`    | 4. apply what differs, prune the rest                                  |
//! | `report`   | 5. status (written when changed) and events                            |
//! | `gate`     | which waiting reconcile runs next (spec edits first)                   |
//!
//! `resources::secret_key::resolved` runs first: from 1b on, every step sees
//! `spec.secretKeyRef` set (the spec's, or the operator's own Secret).

pub mod apply;
pub mod desired;
pub mod external;
pub mod gate;
pub mod observe;
pub mod report;
pub mod stores;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Client, ResourceExt};

use crate::crd::{Hollo, Phase};
use crate::phase;
use crate::resources::admin;
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
    #[error(
        "web.httpRoute.enabled but the Gateway API's HTTPRoute (gateway.networking.k8s.io/v1) \
         is not installed: install the Gateway API CRDs or disable web.httpRoute"
    )]
    GatewayApiMissing,
    #[error(
        "the watch caches of the child kinds are not filled after {0:?}: can the operator list \
         and watch Deployments, Services, Jobs, PodDisruptionBudgets, HPAs, Ingresses and \
         NetworkPolicies here (and Secrets, with WATCH_SECRETS)?"
    )]
    CachesNotReady(Duration),
}

impl Error {
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube(kube::Error::Api(_)) => "api",
            Error::Kube(_) => "client",
            Error::NoNamespace => "no_namespace",
            Error::KedaMissing => "keda_missing",
            Error::GatewayApiMissing => "gateway_api_missing",
            Error::CachesNotReady(_) => "caches_not_ready",
        }
    }

    /// A write refused because the `Hollo`'s namespace is being deleted (403, "… because it is
    /// being terminated"): the namespace controller removes the `Hollo` soon; until then it is
    /// treated like a `Hollo` being deleted — no retry, no warning per `Hollo`.
    pub fn namespace_terminating(&self) -> bool {
        matches!(self, Error::Kube(kube::Error::Api(s))
            if s.code == 403 && s.message.contains("because it is being terminated"))
    }

    /// An error that retrying cannot fix: the spec makes children the apiserver rejects as
    /// invalid (400, 422), or the object itself is unusable. It waits for a change instead.
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Kube(kube::Error::Api(s)) => matches!(s.code, 400 | 422),
            Error::NoNamespace => true,
            _ => false,
        }
    }
}

pub struct Context {
    pub client: Client,
    pub recorder: report::Events,
    pub health: Arc<Health>,
    pub stores: stores::Stores,
    pub applier: apply::Applier,
    /// How referenced Secrets are read (GET each time, or watched: `WATCH_SECRETS`).
    pub secrets: external::SecretReader,
}

/// How soon to look again while KEDA (or the Gateway API) is asked for but its API is missing
/// (nothing notifies us when its CRD appears).
const KEDA_RECHECK: Duration = Duration::from_secs(30);
/// How soon to look again while a Secret the pods need is missing.
const HOLD_RECHECK: Duration = Duration::from_secs(15);
/// How often a `Hollo` with Secrets read by GET (not watched), or a CloudNativePG Cluster (never
/// watched), is looked at in steady state.
const EXTERNAL_RECHECK: Duration = Duration::from_secs(60);
/// How long a reconcile waits for the watch caches' first complete list.
const CACHE_WAIT: Duration = Duration::from_secs(30);
/// How soon to retry after a transient error.
const RETRY: Duration = Duration::from_secs(15);

/// One reconcile, without waiting at a [`gate::Gate`] (the orchestration tests call it).
#[cfg(test)]
pub async fn reconcile(hollo: Arc<Hollo>, ctx: Arc<Context>) -> Result<Action, Error> {
    reconcile_traced(hollo, ctx).await
}

/// Whether `hollo`'s spec has a change no reconcile has carried out yet (an edit, a new
/// `Hollo`): `metadata.generation` is not the status's `observedGeneration`.
pub fn spec_pending(hollo: &Hollo) -> bool {
    hollo.metadata.generation != hollo.status.as_ref().and_then(|s| s.observed_generation)
}

/// One reconcile, when `gate` gives it a slot: one whose `Hollo` has a spec change pending
/// ([`spec_pending`]) before the other wake-ups. The controller starts every reconcile at once
/// (no bound of its own) and the gate bounds how many run (`RECONCILE_CONCURRENCY`). A waiting
/// reconcile holds no more than this future (the reconcile's own is made with its slot), and
/// it reads the `Hollo` from `hollos` again once it has the slot: it may have changed
/// meanwhile, or gone.
///
/// Runs inside the controller's `reconciling object` span (its `object.reason`:
/// why this reconcile ran, e.g. `related object updated: Secret…`), which kube-runtime enters
/// only while the future is made: `RUST_LOG=kube_runtime::controller=info,
/// hollo_operator::reconcile=debug` logs one `reconcile started` line per reconcile with it
/// (which events wake how many `Hollo`s) when it leaves the gate.
pub fn gated(
    gate: Arc<gate::Gate>,
    hollos: kube::runtime::reflector::Store<Hollo>,
    hollo: Arc<Hollo>,
    ctx: Arc<Context>,
) -> impl std::future::Future<Output = Result<Action, Error>> + Send + 'static {
    use tracing::Instrument;
    let span = tracing::Span::current();
    async move {
        let uid = hollo.uid().unwrap_or_default();
        let urgent = spec_pending(&hollo) && gate.pending(&uid, hollo.metadata.generation);
        let waiting = Instant::now();
        let _slot = gate.enter(urgent).await;
        let key = kube::runtime::reflector::ObjectRef::from_obj(hollo.as_ref());
        let Some(hollo) = hollos.get(&key) else {
            gate.done(&uid, None, || live_uids(&hollos));
            return Ok(Action::await_change());
        };
        let waited_ms = waiting.elapsed().as_millis();
        tracing::debug!(urgent, waited_ms, "reconcile started");
        let generation = hollo.metadata.generation;
        let started = Instant::now();
        let result = Box::pin(reconcile_traced(hollo, ctx)).await;
        let ms = started.elapsed().as_millis();
        tracing::debug!(urgent, ms, ok = result.is_ok(), "reconcile finished");
        if result.is_ok() {
            gate.done(&uid, generation, || live_uids(&hollos));
        }
        result
    }
    .instrument(span)
}

async fn reconcile_traced(hollo: Arc<Hollo>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = run(&hollo, &ctx).await;
    let error = result.as_ref().err();
    ctx.health
        .metrics
        .observe(started.elapsed(), error.map(Error::metric_label));
    if error.is_some() {
        ctx.health.metrics.hollo_error(key(&hollo));
    }
    if let Some(e) = error.filter(|e| e.is_permanent()) {
        let note = format!("{e}; waiting for a change of the Hollo");
        report::publish(
            &ctx.recorder,
            &hollo,
            EventType::Warning,
            "InvalidSpec",
            "Reconcile",
            note,
        )
        .await;
    }
    result
}

/// The uids of the `Hollo`s in the cache.
fn live_uids(hollos: &kube::runtime::reflector::Store<Hollo>) -> std::collections::HashSet<String> {
    hollos.state().iter().filter_map(|h| h.uid()).collect()
}

/// `(namespace, name)`: the per-Hollo metrics' key.
fn key(hollo: &Hollo) -> (String, String) {
    (hollo.namespace().unwrap_or_default(), hollo.name_any())
}

/// The per-Hollo gauges of `/metrics` (R-OP-OPS): what this reconcile wrote.
fn record(ctx: &Context, hollo: &Hollo, status: &crate::crd::HolloStatus, jobs: &[Arc<Job>]) {
    ctx.health.metrics.record_hollo(
        key(hollo),
        status,
        &crate::budget::Budget::for_spec(&hollo.spec),
        report::migration_seconds(jobs),
    );
}

async fn run(hollo: &Hollo, ctx: &Context) -> Result<Action, Error> {
    // Being deleted: the garbage collector removes the children; recreating them would race it.
    if hollo.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    // `spec.reconciliationPaused` (R-OP-OPS): say so, change nothing else, wait for the
    // next edit of the Hollo (a child's change wakes us too, and is ignored the same way).
    if hollo.spec.reconciliation_paused {
        let status = report::paused(hollo, Timestamp::now());
        if report::write_status(&ctx.client, hollo, &status).await? {
            ctx.applier.writes.inc();
            report::paused_event(&ctx.recorder, hollo).await;
        }
        return Ok(Action::await_change());
    }
    // Before the first complete list, "absent" would only mean "not listed yet". A watch that
    // never fills (say, a missing RBAC rule) is an error to see, not a silent wait.
    // Looked at every 100 ms, not awaited: kube-runtime's ready signal is a oneshot channel
    // that keeps one waker, so of several reconciles waiting at once (Hollos that exist when
    // the operator starts) only the last was woken; the others waited for CACHE_WAIT, failed
    // and were retried 15 s later.
    let caches = async {
        loop {
            use futures::FutureExt;
            let ready = async {
                ctx.stores.ready().await?;
                ctx.secrets.ready().await
            };
            match ready.now_or_never() {
                Some(r) => return r,
                None => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    match tokio::time::timeout(CACHE_WAIT, caches).await {
        Ok(Ok(())) => {}
        _ => return Err(Error::CachesNotReady(CACHE_WAIT)),
    }
    let now = Timestamp::now();
    let ext = external::read(&ctx.client, &ctx.secrets, &ctx.applier, hollo).await?;
    // From here on `spec.secretKeyRef` is set: the spec's, or the operator's own Secret.
    let resolved = crate::resources::secret_key::resolved(hollo);
    let hollo: &Hollo = &resolved;
    let mut checks = external::checks(&hollo.spec, &ext);
    if let Some(hold) = ext.hold(&hollo.spec) {
        let mut status = report::held(hollo, &hold, now);
        status.last_cleanup = hollo.status.as_ref().and_then(|s| s.last_cleanup.clone());
        record(ctx, hollo, &status, &[]);
        if report::write_status(&ctx.client, hollo, &status).await? {
            ctx.applier.writes.inc();
        }
        report::check_events(&ctx.recorder, hollo, &status).await;
        return Ok(Action::requeue(HOLD_RECHECK));
    }
    // The builders see the Cluster's max_connections and the Secrets' hash (rotation rolls).
    let effective = external::effective(hollo, &ext);
    let backup_unavailable = match external::backup_method(&hollo.spec, &ext) {
        Some(Err(why)) => Some(why),
        _ => None,
    };
    let hollo = &effective;
    let world = observe::observe(
        &ctx.client,
        &ctx.stores,
        hollo,
        now,
        backup_unavailable.as_deref(),
    )
    .await?;
    let plan = phase::decide(&hollo.spec, &world.observed);
    tracing::debug!(
        hollo = %hollo.name_any(), phase = plan.phase.as_str(),
        old_pods = world.observed.old_pods, job = ?world.observed.job, "reconciling"
    );
    // `spec.admin`: the Job once the version is migrated and the password Secret is there.
    let admin_password = matches!(ext.admin_password, Some(external::SecretState::Found(_)));
    let current = plan.current_version.as_deref();
    let admin_due = admin::due(hollo, plan.phase, current, admin_password);
    let want = desired::desired(hollo, &plan, &world, admin_due);
    // A refused downgrade runs the old version but keeps its probes (they are the reason).
    let running = plan.phase == Phase::Running && plan.refused.is_none();
    let (client, stores, applier) = (&ctx.client, &ctx.stores, &ctx.applier);
    let outcome = apply::converge(applier, client, stores, hollo, &world, &want, running).await?;
    let missing = outcome.autoscaler_missing;
    // R-OP-OPS: the pre-migration Backup's outcome.
    match &world.observed.backup {
        crate::phase::Backup::Failed(why) => checks.push(crate::status::Check {
            type_: crate::status::BACKED_UP,
            ok: false,
            reason: "BackupFailed",
            message: why.clone(),
        }),
        crate::phase::Backup::Unavailable(why) => checks.push(crate::status::Check {
            type_: crate::status::BACKED_UP,
            ok: false,
            reason: "NoBackupMethod",
            message: why.clone(),
        }),
        crate::phase::Backup::Completed => checks.push(crate::status::Check {
            type_: crate::status::BACKED_UP,
            ok: true,
            reason: "BackupCompleted",
            message: crate::resources::backup::name(hollo),
        }),
        _ => {}
    }
    if let Some(why) = &plan.refused {
        checks.push(crate::status::Check {
            type_: crate::status::VERSION_ACCEPTED,
            ok: false,
            reason: "BelowDatabaseSchema",
            message: why.clone(),
        });
    }
    if hollo.spec.web.http_route.enabled {
        let check = crate::status::http_route_check(outcome.route_missing.as_deref());
        checks.push(check);
    }
    let admin_job = admin::job_name(hollo)
        .and_then(|name| world.jobs.iter().find(|j| j.name_any() == name).cloned());
    let admin_job = observe::job_state(admin_job.as_deref());
    checks.extend(admin::check(hollo, admin_password, &admin_job, admin_due));
    let mut status = report::status(hollo, &plan, &world, missing.clone(), checks, now);
    let cron_jobs = stores::owned(&ctx.stores.cron_jobs, hollo);
    status.last_cleanup = report::last_cleanup(hollo, &cron_jobs);
    record(ctx, hollo, &status, &world.jobs);
    if report::write_status(client, hollo, &status).await? {
        applier.writes.inc();
    }
    report::events(&ctx.recorder, hollo, &plan, &status, missing.as_deref()).await;
    report::check_events(&ctx.recorder, hollo, &status).await;
    let requeue = match (&missing, &outcome.route_missing) {
        (None, None) => plan.requeue,
        _ => plan.requeue.min(KEDA_RECHECK),
    };
    // Nothing notifies us when a Secret rotates unless Secrets are watched (by default the
    // operator may not list or watch them), nor when a CloudNativePG Cluster changes: look again
    // within a minute.
    let unwatched = ext.cnpg.is_some() || !ctx.secrets.is_watched();
    Ok(Action::requeue(
        if ext == external::External::default() || !unwatched {
            requeue
        } else {
            requeue.min(EXTERNAL_RECHECK)
        },
    ))
}

pub fn error_policy(hollo: Arc<Hollo>, error: &Error, _ctx: Arc<Context>) -> Action {
    if error.namespace_terminating() {
        tracing::debug!(hollo = %hollo.name_any(), %error, "namespace being deleted; waiting");
        Action::await_change()
    } else if error.is_permanent() {
        tracing::warn!(hollo = %hollo.name_any(), %error, "reconcile failed; waiting for a change");
        Action::await_change()
    } else {
        tracing::warn!(hollo = %hollo.name_any(), %error, "reconcile failed; retrying");
        Action::requeue(RETRY)
    }
}
