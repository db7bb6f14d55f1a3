//! Orchestration tests: one reconcile against a mocked API server (tower-test, the pattern of
//! kube-rs' controller-rs), asserting the exact requests it makes. They complement the e2e
//! suite on a real apiserver: here a decision is checked request by request, in milliseconds.

use std::sync::{Arc, Mutex};

use crate::testutil::mock;
use http::Response;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::client::Body;
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::stores::Stores;
use super::{Context, Error, apply::Applier, reconcile};
use crate::crd::{Hollo, HolloStatus, Mode, Phase};
use crate::resources;
use crate::telemetry::Health;
use crate::testutil;

/// One request the reconciler made.
#[derive(Debug, Clone)]
struct Call {
    /// `METHOD path` (no query), e.g. `PATCH /api/v1/namespaces/fedi/services/social-web`.
    line: String,
    query: String,
    body: Value,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// What the apiserver would answer: the object as sent (an apply or create stores what it is
/// given), an empty pod list, KEDA's API missing, an event accepted.
fn answer(call: &Call, hollo: &Hollo) -> (u16, Value) {
    let (method, path) = call.line.split_once(' ').unwrap_or_default();
    match method {
        "GET" if path.ends_with("/pods") => (
            200,
            json!({"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": []}),
        ),
        "GET" if path.contains("/scaledobjects") => not_found(),
        // Every referenced Secret exists with every key a test spec reads (base64 of "x").
        "GET" if path.contains("/secrets/") => (
            200,
            mock_secret(path.rsplit('/').next().unwrap_or_default()),
        ),
        "PATCH" if path.ends_with("/scale") => {
            let name = path.rsplit('/').nth(1).unwrap_or_default();
            (
                200,
                json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                       "metadata": {"name": name, "namespace": "fedi"},
                       "spec": call.body["spec"]}),
            )
        }
        "PATCH" if path.ends_with("/status") => {
            let mut h = serde_json::to_value(hollo).unwrap_or_default();
            h["status"] = call.body["status"].clone();
            (200, h)
        }
        "DELETE" => (
            200,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 200}),
        ),
        _ => (200, call.body.clone()),
    }
}

/// The apiserver's answer for an object that does not exist.
fn not_found() -> (u16, Value) {
    (
        404,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
               "reason": "NotFound", "code": 404, "message": "not found"}),
    )
}

/// The Secret the mocked apiserver has under any name: every key a test spec reads.
fn mock_secret(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Secret",
           "metadata": {"name": name, "namespace": "fedi"},
           // base64 of "x"
           "data": {"url": "eA==", "key": "eA==", "uri": "eA==", "username": "eA==",
                    "password": "eA==", "dbname": "eA=="}})
}

/// `hollo` as the builders see it when every referenced Secret is [`mock_secret`].
fn effective(hollo: &Hollo) -> Hollo {
    use super::external;
    let refs = external::referenced_secrets(&hollo.spec);
    let found = refs
        .keys()
        .map(|n| (n.clone(), serde_json::from_value(mock_secret(n)).ok()))
        .collect();
    external::effective(
        hollo,
        &external::External {
            secrets_hash: Some(external::secrets_hash(&refs, &found)),
            ..Default::default()
        },
    )
}

/// A reconciler context whose client talks to a mocked API server that records every request
/// and answers with `answer` (or `override_` first, when it returns something).
struct Fixture {
    ctx: Arc<Context>,
    calls: Calls,
    server: tokio::task::JoinHandle<()>,
    writers: Writers,
}

type Override = Box<dyn Fn(&Call) -> Option<(u16, Value)> + Send + Sync>;

struct Writers {
    deployments: Writer<Deployment>,
    services: Writer<Service>,
    jobs: Writer<Job>,
    pdbs: Writer<PodDisruptionBudget>,
    hpas: Writer<HorizontalPodAutoscaler>,
    ingresses: Writer<Ingress>,
}

/// A watch cache that has had its (empty) first list, and its writer.
fn ready_store<K>() -> (reflector::Store<K>, Writer<K>)
where
    K: Resource<DynamicType = ()> + Clone,
{
    let (store, mut w) = reflector::store();
    w.apply_watcher_event(&watcher::Event::Init);
    w.apply_watcher_event(&watcher::Event::InitDone);
    (store, w)
}

impl Fixture {
    fn new(hollo: &Hollo, override_: Override) -> Self {
        let (service, mut handle) = mock::pair();
        let client = Client::new(service, "fedi");
        let calls: Calls = Arc::default();
        let seen = calls.clone();
        let hollo = hollo.clone();
        let server = tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let line = format!("{} {}", request.method(), request.uri().path());
                let query = request.uri().query().unwrap_or_default().to_string();
                let bytes = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .unwrap_or_default();
                let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                let call = Call { line, query, body };
                let (code, reply) = override_(&call).unwrap_or_else(|| answer(&call, &hollo));
                if let Ok(mut c) = seen.lock() {
                    c.push(call);
                }
                let response = Response::builder()
                    .status(code)
                    .body(Body::from(serde_json::to_vec(&reply).unwrap_or_default()))
                    .expect("response");
                send.send_response(response);
            }
        });
        let (deployments, dw) = ready_store();
        let (services, sw) = ready_store();
        let (jobs, jw) = ready_store();
        let (pdbs, pw) = ready_store();
        let (hpas, hw) = ready_store();
        let (ingresses, iw) = ready_store();
        let (network_policies, _) = ready_store();
        let (cron_jobs, _) = ready_store();
        let ctx = Arc::new(Context {
            recorder: super::report::Events::new(
                client.clone(),
                Reporter {
                    controller: super::MANAGER.into(),
                    instance: None,
                },
            ),
            client,
            health: Arc::new(Health::default()),
            stores: Stores {
                deployments,
                services,
                jobs,
                pdbs,
                hpas,
                ingresses,
                network_policies,
                cron_jobs,
            },
            applier: Applier::new(Default::default()),
            secrets: Default::default(),
        });
        Self {
            ctx,
            calls,
            server,
            writers: Writers {
                deployments: dw,
                services: sw,
                jobs: jw,
                pdbs: pw,
                hpas: hw,
                ingresses: iw,
            },
        }
    }

    fn plain(hollo: &Hollo) -> Self {
        Self::new(hollo, Box::new(|_| None))
    }

    /// Runs one reconcile; returns its result and the requests it made (then forgets them),
    /// without the GETs of referenced Secrets that every reconcile makes (see
    /// `every_reconcile_reads_the_referenced_secrets`).
    async fn reconcile(
        &self,
        hollo: &Hollo,
    ) -> (Result<kube::runtime::controller::Action, Error>, Vec<Call>) {
        let (result, mut calls) = self.reconcile_with_reads(hollo).await;
        calls.retain(|c| !c.line.starts_with(&format!("GET /api/v1{NS}/secrets/")));
        (result, calls)
    }

    /// [`Self::reconcile`] with every request.
    async fn reconcile_with_reads(
        &self,
        hollo: &Hollo,
    ) -> (Result<kube::runtime::controller::Action, Error>, Vec<Call>) {
        let result = reconcile(Arc::new(hollo.clone()), self.ctx.clone()).await;
        let calls = std::mem::take(&mut *self.calls.lock().expect("calls"));
        (result, calls)
    }

    /// Puts `deps` into the Deployment cache as the watch shows them.
    fn cache_deployments(&mut self, deps: &[Deployment]) {
        use super::stores::Slim;
        for d in deps {
            // As the watch caches keep it (`stores::Slim`).
            let mut d = d.clone();
            d.slim();
            self.writers
                .deployments
                .apply_watcher_event(&watcher::Event::Apply(d));
        }
    }

    /// Puts what the reconcile applied into the watch caches, as the watches would.
    fn cache_applied(&mut self, calls: &[Call]) {
        for c in calls.iter().filter(|c| c.line.starts_with("PATCH ")) {
            if c.line.ends_with("/status") || c.line.ends_with("/scale") {
                continue;
            }
            cache(&mut self.writers, &c.body);
        }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn put<K>(w: &mut Writer<K>, v: &Value)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + super::stores::Slim,
{
    // As the watch caches keep it (`stores::Slim`).
    if let Ok(mut o) = serde_json::from_value::<K>(v.clone()) {
        o.slim();
        w.apply_watcher_event(&watcher::Event::Apply(o));
    }
}

fn cache(w: &mut Writers, v: &Value) {
    match v["kind"].as_str().unwrap_or_default() {
        "Deployment" => put(&mut w.deployments, v),
        "Service" => put(&mut w.services, v),
        "Job" => put(&mut w.jobs, v),
        "PodDisruptionBudget" => put(&mut w.pdbs, v),
        "HorizontalPodAutoscaler" => put(&mut w.hpas, v),
        "Ingress" => put(&mut w.ingresses, v),
        _ => {}
    }
}

fn lines(calls: &[Call]) -> Vec<&str> {
    calls.iter().map(|c| c.line.as_str()).collect()
}

const NS: &str = "/namespaces/fedi";

/// The first requests of a reconcile that migrates to `version` (attempt 0): the pod list (an
/// upgrade's; a first install with no Deployment has no pods to list), the
/// Service and PDBs applied, the migration Job applied.
fn migration_start(version: &str, upgrade: bool) -> Vec<String> {
    let job = resources::migration::job_name("social", version, 0);
    let pods = upgrade.then(|| format!("GET /api/v1{NS}/pods"));
    pods.into_iter()
        .chain([
            format!("PATCH /api/v1{NS}/services/social-web"),
            format!("PATCH /apis/policy/v1{NS}/poddisruptionbudgets/social-web"),
            format!("PATCH /apis/policy/v1{NS}/poddisruptionbudgets/social-worker"),
            format!("PATCH /apis/batch/v1{NS}/jobs/{job}"),
        ])
        .collect()
}

/// A Deployment as the watch shows it once rolled out: `replicas` set, every pod ready.
fn rolled_out(mut d: Deployment, replicas: i32) -> Deployment {
    d.spec.replicas = Some(replicas);
    d.metadata.generation = Some(1);
    d.status = Some(DeploymentStatus {
        observed_generation: Some(1),
        replicas: Some(replicas),
        updated_replicas: Some(replicas),
        ready_replicas: Some(replicas),
        ..DeploymentStatus::default()
    });
    d
}

/// A `Hollo` at 0.1.0 that has reached Running, with its Deployments in the cache.
fn running(spec: crate::crd::HolloSpec) -> (Hollo, Vec<Deployment>) {
    let mut h = testutil::hollo(spec);
    h.status = Some(HolloStatus {
        phase: Phase::Running,
        current_version: Some("0.1.0".into()),
        target_version: Some("0.1.0".into()),
        ..HolloStatus::default()
    });
    let e = effective(&h);
    let deps = vec![
        rolled_out(resources::web::deployment(&e, "0.1.0", None), 2),
        rolled_out(resources::worker::deployment(&e, "0.1.0", None), 2),
    ];
    (h, deps)
}

/// The stored status after a reconcile (from its status apply).
fn with_status(mut h: Hollo, calls: &[Call]) -> Hollo {
    if let Some(c) = calls.iter().find(|c| c.line.ends_with("/status")) {
        h.status = serde_json::from_value(c.body["status"].clone()).ok();
    }
    h
}

#[tokio::test]
async fn a_new_hollo_first_migrates_and_starts_nothing() {
    let h = testutil::hollo(testutil::spec());
    let f = Fixture::plain(&h);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        lines(&calls),
        [
            migration_start("0.1.0", false),
            vec![
                format!("GET /apis/keda.sh/v1alpha1{NS}/scaledobjects"),
                format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
                format!("POST /apis/events.k8s.io/v1{NS}/events"),
            ]
        ]
        .concat()
    );
    for apply in calls.iter().filter(|c| c.line.starts_with("PATCH")) {
        assert!(
            apply.query.contains("fieldManager=hollo-operator")
                && apply.query.contains("force=true"),
            "one field manager, forced (R-OP-1): {apply:?}"
        );
    }
    // (no pod list before them: a first install has no pods)
    let status = &calls[5].body["status"];
    assert_eq!(status["phase"], "Migrating");
    assert_eq!(calls[6].body["reason"], "Migrating");
}

/// The first reconcile of a fresh process of a running `Hollo` (with its Deployments cached),
/// with what it applied then in the caches: the fixture, the `Hollo` with the status it wrote,
/// that reconcile's requests.
async fn first_reconcile(spec: crate::crd::HolloSpec) -> (Fixture, Hollo, Vec<Call>) {
    let (h, deps) = running(spec);
    let mut f = Fixture::plain(&h);
    f.cache_deployments(&deps);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    f.cache_applied(&calls);
    // The watch shows the Deployments with their status again (an apply's answer has it).
    f.cache_deployments(&deps);
    let h = with_status(h, &calls);
    (f, h, calls)
}

#[tokio::test]
async fn a_steady_reconcile_writes_nothing() {
    // The first reconcile of a fresh process applies everything once (it remembers nothing);
    // the apiserver stores what it is given.
    let (f, h, calls) = first_reconcile(testutil::spec()).await;
    assert_eq!(
        lines(&calls),
        [
            format!("PATCH /api/v1{NS}/services/social-web"),
            format!("PATCH /apis/policy/v1{NS}/poddisruptionbudgets/social-web"),
            format!("PATCH /apis/policy/v1{NS}/poddisruptionbudgets/social-worker"),
            format!("GET /apis/keda.sh/v1alpha1{NS}/scaledobjects"),
            format!("PATCH /apis/apps/v1{NS}/deployments/social-web"),
            format!("PATCH /apis/apps/v1{NS}/deployments/social-worker"),
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
        ]
    );
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        lines(&calls),
        Vec::<&str>::new(),
        "steady: no request at all"
    );
    let (_, calls) = f.reconcile(&h).await;
    assert!(calls.is_empty());
    assert_eq!(
        f.ctx.applier.writes.get(),
        6,
        "only the first reconcile wrote"
    );
}

/// Prepares a fixture in steady state: everything applied once and cached.
async fn steady(spec: crate::crd::HolloSpec) -> (Fixture, Hollo) {
    let (f, h, _) = first_reconcile(spec).await;
    let (_, calls) = f.reconcile(&h).await;
    assert!(calls.is_empty(), "steady: {:?}", lines(&calls));
    (f, h)
}

/// From steady state, edits the spec (a new generation) and reconciles once: its requests.
async fn after_edit(spec: crate::crd::HolloSpec, edit: impl FnOnce(&mut Hollo)) -> Vec<Call> {
    let (f, mut h) = steady(spec).await;
    edit(&mut h);
    h.metadata.generation = Some(4);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    calls
}

#[tokio::test]
async fn a_worker_replicas_change_is_one_scale_and_the_status() {
    let mut spec = testutil::spec();
    // Room for five workers in the connection budget (else a Warning event comes too).
    spec.database.max_connections = 500;
    let calls = after_edit(spec, |h| h.spec.worker.replicas = 5).await;
    assert_eq!(
        lines(&calls),
        [
            format!("PATCH /apis/apps/v1{NS}/deployments/social-worker/scale"),
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
        ]
    );
    assert_eq!(calls[0].body, json!({"spec": {"replicas": 5}}));
    assert_eq!(calls[1].body["status"]["observedGeneration"], 4);
}

#[tokio::test]
async fn a_mode_switch_creates_the_all_role_then_prunes_what_split_made() {
    let calls = after_edit(testutil::spec(), |h| h.spec.mode = Mode::All).await;
    assert_eq!(
        lines(&calls),
        [
            // The Service now selects the all pods; the all role's PDB replaces web's.
            format!("PATCH /api/v1{NS}/services/social-web"),
            format!("PATCH /apis/policy/v1{NS}/poddisruptionbudgets/social-all"),
            format!("POST /apis/apps/v1{NS}/deployments"),
            format!("DELETE /apis/apps/v1{NS}/deployments/social-web"),
            format!("DELETE /apis/apps/v1{NS}/deployments/social-worker"),
            format!("DELETE /apis/policy/v1{NS}/poddisruptionbudgets/social-web"),
            format!("DELETE /apis/policy/v1{NS}/poddisruptionbudgets/social-worker"),
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
            format!("POST /apis/events.k8s.io/v1{NS}/events"),
        ]
    );
    assert_eq!(calls[2].body["metadata"]["name"], "social-all");
    assert_eq!(
        calls[2].body["spec"]["replicas"], 2,
        "created with its count"
    );
}

#[tokio::test]
async fn a_labelled_child_someone_else_owns_is_never_pruned() {
    let (mut f, h) = steady(testutil::spec()).await;
    let mut foreign = resources::pdb::web(&h).expect("pdb");
    foreign.metadata.name = Some("social-extra".into());
    foreign.metadata.owner_references = None;
    f.writers
        .pdbs
        .apply_watcher_event(&watcher::Event::Apply(foreign));
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(calls.is_empty(), "not ours: {:?}", lines(&calls));
}

#[tokio::test]
async fn an_invalid_child_waits_for_a_change_instead_of_retrying() {
    let h = testutil::hollo(testutil::spec());
    let f = Fixture::new(
        &h,
        Box::new(|c: &Call| {
            c.line.contains("/services/").then(|| {
                (
                    422,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "Invalid", "code": 422,
                           "message": "Service \"social-web\" is invalid: spec.ports[0].port: Invalid value: 0"}),
                )
            })
        }),
    );
    let (result, calls) = f.reconcile(&h).await;
    let err = result.expect_err("the apply fails");
    assert!(err.is_permanent(), "{err}");
    assert_eq!(
        super::error_policy(Arc::new(h.clone()), &err, f.ctx.clone()),
        kube::runtime::controller::Action::await_change()
    );
    let event = calls.last().expect("an event");
    assert_eq!(
        event.line,
        format!("POST /apis/events.k8s.io/v1{NS}/events")
    );
    assert_eq!(event.body["reason"], "InvalidSpec");
    assert!(
        event.body["note"]
            .as_str()
            .unwrap_or_default()
            .contains("spec.ports[0].port"),
        "{event:?}"
    );
    let transient = Error::Kube(kube::Error::Api(
        kube::core::Status::failure("etcd timeout", "Timeout")
            .with_code(504)
            .boxed(),
    ));
    assert!(!transient.is_permanent());
}

#[tokio::test]
async fn an_upgrade_removes_the_autoscaler_before_stopping_the_old_pods() {
    let mut spec = testutil::spec();
    spec.worker.autoscaling.enabled = true;
    spec.worker.autoscaling.max_replicas = 4;
    spec.database.max_connections = 500;
    let calls = after_edit(spec, |h| h.spec.version = "0.2.0".into()).await;
    assert_eq!(
        lines(&calls),
        [
            // No old pod is left (the mocked pod list is empty): migrate, nothing runs.
            migration_start("0.2.0", true),
            vec![
                // The autoscaler goes first, or it would scale the old version back up.
                format!("DELETE /apis/autoscaling/v2{NS}/horizontalpodautoscalers/social-worker"),
                format!("PATCH /apis/apps/v1{NS}/deployments/social-web/scale"),
                format!("PATCH /apis/apps/v1{NS}/deployments/social-worker/scale"),
                // R-OP-ZD: the maintenance page of the old version starts.
                format!("POST /apis/apps/v1{NS}/deployments"),
                format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
                format!("POST /apis/events.k8s.io/v1{NS}/events"),
            ]
        ]
        .concat()
    );
    assert_eq!(calls[6].body, json!({"spec": {"replicas": 0}}));
    assert_eq!(calls[8].body["metadata"]["name"], "social-maintenance-page");
    assert_eq!(
        calls[8].body["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/version"],
        "0.1.0"
    );
    assert_eq!(calls[9].body["status"]["phase"], "Migrating");
}

#[tokio::test]
async fn a_hollo_being_deleted_is_left_to_the_garbage_collector() {
    let (f, mut h) = steady(testutil::spec()).await;
    h.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    h.spec.worker.replicas = 1;
    let (result, calls) = f.reconcile(&h).await;
    assert_eq!(
        result.ok(),
        Some(kube::runtime::controller::Action::await_change())
    );
    assert!(calls.is_empty(), "{:?}", lines(&calls));
}

/// The condition `type_` of the status a status apply wrote.
fn condition(status_apply: &Call, type_: &str) -> Value {
    status_apply.body["status"]["conditions"]
        .as_array()
        .and_then(|conds| conds.iter().find(|c| c["type"] == type_))
        .cloned()
        .unwrap_or_else(|| panic!("condition {type_}"))
}

fn cnpg_hollo() -> Hollo {
    let mut spec = testutil::spec();
    spec.database.url_secret_ref = None;
    spec.database.cnpg = Some(crate::crd::CnpgSpec {
        cluster: "pg".into(),
        pooler: None,
    });
    testutil::hollo(spec)
}

#[tokio::test]
async fn a_missing_cnpg_secret_holds_everything_and_says_why() {
    let h = cnpg_hollo();
    // Neither the Secret nor the Cluster exists.
    let f = Fixture::new(
        &h,
        Box::new(|call| call.line.starts_with("GET ").then(not_found)),
    );
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        lines(&calls),
        [
            format!("GET /apis/postgresql.cnpg.io/v1{NS}/clusters/pg"),
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
            format!("POST /apis/events.k8s.io/v1{NS}/events"),
        ],
        "read-only GETs, the status and one event: nothing applied"
    );
    let db = condition(&calls[1], "Database");
    assert_eq!(
        (db["status"].as_str(), db["reason"].as_str()),
        (Some("False"), Some("SecretMissing"))
    );
    assert_eq!(calls[2].body["reason"], "SecretMissing");
}

#[tokio::test]
async fn with_the_cnpg_secret_the_cluster_budget_and_hash_are_used() {
    let h = cnpg_hollo();
    let f = Fixture::new(
        &h,
        Box::new(|call| {
            let (method, path) = call.line.split_once(' ')?;
            match (method, path.rsplit('/').next()?) {
                ("GET", "pg-app") => Some((
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "pg-app", "namespace": "fedi"},
                           // base64 of "x"
                           "data": {"uri": "eA==", "username": "eA==", "password": "eA==", "dbname": "eA=="}}),
                )),
                ("GET", "pg") => Some((
                    200,
                    json!({"apiVersion": "postgresql.cnpg.io/v1", "kind": "Cluster",
                           "metadata": {"name": "pg", "namespace": "fedi"},
                           "spec": {"postgresql": {"parameters": {"max_connections": "60"}}}}),
                )),
                _ => None,
            }
        }),
    );
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    let job = calls
        .iter()
        .find(|c| c.line.contains("/jobs/"))
        .expect("the migration Job is applied");
    assert!(
        job.body["spec"]["template"]["metadata"]["annotations"]["hollo.social/secrets-hash"]
            .is_string(),
        "{}",
        job.body
    );
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let budget = condition(status, "ConnectionBudget");
    assert_eq!(budget["status"], "False", "74 > the Cluster's 60: {budget}");
    assert!(
        budget["message"]
            .as_str()
            .is_some_and(|m| m.contains("maxConnections 60"))
    );
}

/// Issue 35 item 7: each reconcile GETs every Secret the pods read (never lists or watches
/// them), and a rotated value rolls the pods: the next apply carries a new hash.
#[tokio::test]
async fn every_reconcile_reads_the_referenced_secrets_and_a_rotation_rolls() {
    let mut spec = testutil::spec();
    spec.admin_token_ref = Some(crate::crd::SecretKeyRef {
        name: "hollo-admin".into(),
        key: "token".into(),
    });
    let (h, deps) = running(spec);
    let token = Arc::new(Mutex::new("eA=="));
    let current = token.clone();
    let mut f = Fixture::new(
        &h,
        Box::new(move |call| {
            call.line.ends_with("/secrets/hollo-admin").then(|| {
                let t = *current.lock().expect("token");
                (
                    200,
                    json!({"apiVersion": "v1", "kind": "Secret",
                           "metadata": {"name": "hollo-admin", "namespace": "fedi"},
                           "data": {"token": t}}),
                )
            })
        }),
    );
    f.cache_deployments(&deps);
    let (result, calls) = f.reconcile_with_reads(&h).await;
    assert!(result.is_ok(), "{result:?}");
    let reads: Vec<&str> = lines(&calls)
        .into_iter()
        .filter(|l| l.contains("/secrets"))
        .collect();
    assert_eq!(
        reads,
        [
            format!("GET /api/v1{NS}/secrets/hollo-admin"),
            format!("GET /api/v1{NS}/secrets/hollo-db"),
            format!("GET /api/v1{NS}/secrets/hollo-secret"),
        ],
        "one GET per referenced Secret, nothing else"
    );
    let hash_of = |calls: &[Call]| {
        calls
            .iter()
            .find(|c| c.line.ends_with("/deployments/social-web"))
            .map(|c| {
                c.body["spec"]["template"]["metadata"]["annotations"]["hollo.social/secrets-hash"]
                    .clone()
            })
    };
    let first = hash_of(&calls).expect("the web Deployment is applied with the hash");
    assert!(first.is_string(), "{first}");
    f.cache_applied(&calls);
    let (_, calls) = f.reconcile(&h).await;
    assert_eq!(
        hash_of(&calls),
        None,
        "unchanged Secrets: nothing re-applied"
    );
    *token.lock().expect("token") = "eQ==";
    let (_, calls) = f.reconcile(&h).await;
    let second = hash_of(&calls).expect("a rotated token re-applies the web Deployment");
    assert_ne!(first, second, "a new hash: the pods roll");
}

/// R-OP-OPS: turning web autoscaling on hands the web count to an HPA `social-web`:
/// the web Deployment is only lifted to the minimum, never set back to `web.replicas`.
#[tokio::test]
async fn web_autoscaling_applies_an_hpa_and_only_lifts_the_web_count() {
    let mut spec = testutil::spec();
    spec.database.max_connections = 500;
    let calls = after_edit(spec, |h| {
        h.spec.web.autoscaling.enabled = true;
        h.spec.web.autoscaling.min_replicas = 3;
        h.spec.web.autoscaling.max_replicas = 6;
    })
    .await;
    assert_eq!(
        lines(&calls),
        [
            format!("PATCH /apis/apps/v1{NS}/deployments/social-web/scale"),
            format!("PATCH /apis/autoscaling/v2{NS}/horizontalpodautoscalers/social-web"),
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
        ]
    );
    assert_eq!(
        calls[0].body,
        json!({"spec": {"replicas": 3}}),
        "lifted to the minimum"
    );
    let hpa = &calls[1].body["spec"];
    assert_eq!(hpa["scaleTargetRef"]["name"], "social-web");
    assert_eq!(
        (hpa["minReplicas"].as_i64(), hpa["maxReplicas"].as_i64()),
        (Some(3), Some(6))
    );
    // Above the minimum, the HPA's count stands: no scale, whatever web.replicas says.
    let calls = after_edit(
        {
            let mut spec = testutil::spec();
            spec.database.max_connections = 500;
            spec
        },
        |h| {
            h.spec.web.replicas = 1;
            h.spec.web.autoscaling.enabled = true;
            h.spec.web.autoscaling.min_replicas = 1;
        },
    )
    .await;
    assert!(
        !lines(&calls).iter().any(|l| l.ends_with("/scale")),
        "{:?}",
        lines(&calls)
    );
}

/// A Secret as a metadata-only watch shows it.
fn secret_meta(
    name: &str,
    rv: &str,
) -> kube::api::PartialObjectMeta<k8s_openapi::api::core::v1::Secret> {
    serde_json::from_value(json!({
        "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
        "metadata": {"name": name, "namespace": "fedi", "resourceVersion": rv},
    }))
    .expect("partial object metadata")
}

/// Issue 36 item 4: with Secrets watched (`WATCH_SECRETS`, metadata only), a referenced Secret
/// is read by GET only when the watch shows a `resourceVersion` other than the one read last; a
/// Secret the watch does not have is absent without asking; and a steady `Hollo` is not looked
/// at again every minute for its Secrets.
#[tokio::test]
async fn watched_secrets_are_read_again_only_when_their_resource_version_changes() {
    let (h, deps) = running(testutil::spec());
    let mut f = Fixture::plain(&h);
    let (meta, mut mw) = ready_store();
    mw.apply_watcher_event(&watcher::Event::Apply(secret_meta("hollo-db", "1")));
    mw.apply_watcher_event(&watcher::Event::Apply(secret_meta("hollo-secret", "1")));
    Arc::get_mut(&mut f.ctx).expect("one context").secrets =
        super::external::SecretReader::watched(meta);
    for d in &deps {
        put(
            &mut f.writers.deployments,
            &serde_json::to_value(d).expect("json"),
        );
    }
    let reads = |calls: &[Call]| -> Vec<String> {
        calls
            .iter()
            .filter(|c| c.line.contains("/secrets"))
            .map(|c| c.line.clone())
            .collect()
    };
    let (result, calls) = f.reconcile_with_reads(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        reads(&calls),
        [
            format!("GET /api/v1{NS}/secrets/hollo-db"),
            format!("GET /api/v1{NS}/secrets/hollo-secret"),
        ],
        "first look: one GET each"
    );
    f.cache_applied(&calls);
    let (result, calls) = f.reconcile_with_reads(&h).await;
    assert_eq!(reads(&calls), Vec::<String>::new(), "unchanged: no GET");
    let result = result.expect("reconciled");
    assert_ne!(
        result,
        kube::runtime::controller::Action::requeue(super::EXTERNAL_RECHECK),
        "watched Secrets need no periodic recheck"
    );
    mw.apply_watcher_event(&watcher::Event::Apply(secret_meta("hollo-db", "2")));
    let (_, calls) = f.reconcile_with_reads(&h).await;
    assert_eq!(
        reads(&calls),
        [format!("GET /api/v1{NS}/secrets/hollo-db")],
        "a new resourceVersion: that Secret is read again, only it"
    );
    f.server.abort();
}

/// The Hollos a change of a Secret wakes: those in its namespace whose pods read it.
#[test]
fn a_secret_change_maps_to_the_hollos_that_read_it() {
    let a = testutil::hollo(testutil::spec());
    let mut b = a.clone();
    b.metadata.name = Some("other".into());
    if let Some(r) = b.spec.secret_key_ref.as_mut() {
        r.name = "other-secret".into();
    }
    let mut elsewhere = a.clone();
    elsewhere.metadata.namespace = Some("elsewhere".into());
    let hollos: Vec<Arc<Hollo>> = [a, b, elsewhere].into_iter().map(Arc::new).collect();
    let names = |ns: &str, secret: &str| -> Vec<String> {
        super::external::hollos_reading(&hollos, Some(ns), secret)
            .into_iter()
            .map(|r| r.name)
            .collect()
    };
    assert_eq!(names("fedi", "hollo-db"), ["social", "other"]);
    assert_eq!(names("fedi", "hollo-secret"), ["social"]);
    assert_eq!(names("fedi", "other-secret"), ["other"]);
    assert_eq!(names("elsewhere", "hollo-db"), ["social"]);
    assert_eq!(names("fedi", "unrelated"), Vec::<String>::new());
}

/// Issue 63 item 7: a `Hollo` naming no `SECRET_KEY` is woken by its generated Secret, and one
/// with `spec.admin` by the password Secret (it waits for it).
#[test]
fn the_generated_key_and_the_admin_password_wake_their_hollo() {
    let mut spec = with_admin(testutil::spec());
    spec.secret_key_ref = None;
    let hollos = vec![
        Arc::new(testutil::hollo(spec)),
        Arc::new(testutil::hollo(testutil::spec())),
    ];
    let woken = |secret: &str| super::external::hollos_reading(&hollos, Some("fedi"), secret).len();
    assert_eq!(woken("social-secret-key"), 1);
    assert_eq!(woken("hollo-admin"), 1);
    assert_eq!(woken("hollo-secret"), 1, "only the Hollo naming it");
}

/// A mocked apiserver's Secrets for the tests of the generated `SECRET_KEY` (issue 63 item 7):
/// what a POST stored (the Secret `social-secret-key` until then absent), and every other
/// Secret as [`mock_secret`].
fn secrets_kept(store: Arc<Mutex<Option<Value>>>) -> Override {
    Box::new(move |call: &Call| {
        let generated = format!("{NS}/secrets/social-secret-key");
        if call.line == format!("POST /api/v1{NS}/secrets") {
            let mut stored = call.body.clone();
            stored["metadata"]["resourceVersion"] = json!("1");
            *store.lock().expect("store") = Some(stored.clone());
            return Some((201, stored));
        }
        if call.line == format!("GET /api/v1{generated}") {
            return Some(match store.lock().expect("store").clone() {
                Some(s) => (200, s),
                None => not_found(),
            });
        }
        None
    })
}

fn job_env_secret(job_apply: &Call, var: &str) -> (String, String) {
    let env = job_apply.body["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let e = env
        .iter()
        .find(|e| e["name"] == var)
        .unwrap_or_else(|| panic!("{var} in {env:?}"));
    assert!(e.get("value").is_none(), "{var} by reference only: {e}");
    let r = &e["valueFrom"]["secretKeyRef"];
    (
        r["name"].as_str().unwrap_or_default().to_string(),
        r["key"].as_str().unwrap_or_default().to_string(),
    )
}

/// No `secretKeyRef`: the first reconcile creates `social-secret-key` (a POST, owned,
/// immutable, 64 hex characters), and the migration Job reads it by reference; the next
/// reconcile finds it and creates nothing, and hashes it as the first did (no roll).
#[tokio::test]
async fn a_hollo_naming_no_secret_key_gets_one_generated_once() {
    let mut spec = testutil::spec();
    spec.secret_key_ref = None;
    let h = testutil::hollo(spec);
    let store: Arc<Mutex<Option<Value>>> = Arc::default();
    let f = Fixture::new(&h, secrets_kept(store.clone()));
    let (result, calls) = f.reconcile_with_reads(&h).await;
    assert!(result.is_ok(), "{result:?}");
    let posts: Vec<&Call> = calls
        .iter()
        .filter(|c| c.line == format!("POST /api/v1{NS}/secrets"))
        .collect();
    assert_eq!(posts.len(), 1, "{:?}", lines(&calls));
    let s = &posts[0].body;
    assert_eq!(s["metadata"]["name"], "social-secret-key");
    assert_eq!(s["metadata"]["ownerReferences"][0]["uid"], "0b3c-uid");
    assert_eq!(s["immutable"], true);
    assert!(posts[0].query.contains("fieldManager=hollo-operator"));
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(s.clone()).expect("a Secret");
    let key = secret.data.expect("data")["SECRET_KEY"].0.clone();
    assert!(
        key.len() == 64 && key.iter().all(u8::is_ascii_hexdigit),
        "{key:?}"
    );
    let job_line = |calls: &[Call]| {
        calls
            .iter()
            .find(|c| c.line.contains("/jobs/social-migrate-"))
            .cloned()
            .expect("the migration Job applied")
    };
    let job = job_line(&calls);
    assert_eq!(
        job_env_secret(&job, "SECRET_KEY"),
        ("social-secret-key".into(), "SECRET_KEY".into())
    );
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let c = condition(status, crate::status::SECRET_KEY);
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("Generated"))
    );
    assert!(
        !status
            .body
            .to_string()
            .contains(&String::from_utf8_lossy(&key).to_string()),
        "the key is in no status"
    );

    let h = with_status(h, &calls);
    let (result, again) = f.reconcile_with_reads(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(
        !again.iter().any(|c| c.line.starts_with("POST /api/v1")),
        "created once: {:?}",
        lines(&again)
    );
    let hash = |c: &Call| {
        c.body["spec"]["template"]["metadata"]["annotations"][super::external::SECRETS_HASH].clone()
    };
    assert_eq!(
        hash(&job_line(&again)),
        hash(&job),
        "hashed alike both times"
    );
    assert!(!hash(&job).is_null());
}

/// A `SECRET_KEY` Secret the operator generated and that is gone is not generated again (a
/// new key could not decrypt the accounts' private keys): nothing is applied, the status says
/// why.
#[tokio::test]
async fn a_generated_secret_key_that_disappears_is_not_replaced() {
    let mut spec = testutil::spec();
    spec.secret_key_ref = None;
    let (mut h, deps) = running(spec);
    let generated = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: crate::status::SECRET_KEY.into(),
        status: "True".into(),
        reason: crate::resources::secret_key::GENERATED.into(),
        message: String::new(),
        observed_generation: Some(3),
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ),
    };
    if let Some(s) = h.status.as_mut() {
        s.conditions.push(generated);
    }
    let mut f = Fixture::new(&h, secrets_kept(Arc::default()));
    f.cache_deployments(&deps);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(
        lines(&calls),
        [
            format!("PATCH /apis/hollo.social/v1alpha1{NS}/hollos/social/status"),
            format!("POST /apis/events.k8s.io/v1{NS}/events"),
        ],
        "no Secret made, nothing applied"
    );
    let c = condition(&calls[0], crate::status::SECRET_KEY);
    assert_eq!(c["status"], "False");
    assert_eq!(c["reason"], "GeneratedSecretMissing");
    assert!(
        c["message"]
            .as_str()
            .unwrap_or_default()
            .contains("restore"),
        "{c}"
    );
    assert_eq!(
        condition(&calls[0], crate::status::DEGRADED)["status"],
        "True"
    );
}

/// With Secrets watched, the watch may not show yet the `SECRET_KEY` Secret a reconcile
/// created a moment before: the next one asks the apiserver before calling it gone, so it
/// neither holds nor generates another.
#[tokio::test]
async fn a_generated_secret_key_the_watch_does_not_show_yet_is_asked_for() {
    let mut spec = testutil::spec();
    spec.secret_key_ref = None;
    let h = testutil::hollo(spec);
    let store: Arc<Mutex<Option<Value>>> = Arc::default();
    let mut f = Fixture::new(&h, secrets_kept(store.clone()));
    let (meta, mut mw) = ready_store();
    mw.apply_watcher_event(&watcher::Event::Apply(secret_meta("hollo-db", "1")));
    Arc::get_mut(&mut f.ctx).expect("one context").secrets =
        super::external::SecretReader::watched(meta);
    let (_, calls) = f.reconcile_with_reads(&h).await;
    let posts = |calls: &[Call]| {
        calls
            .iter()
            .filter(|c| c.line == format!("POST /api/v1{NS}/secrets"))
            .count()
    };
    assert_eq!(posts(&calls), 1, "{:?}", lines(&calls));
    // The status now says it was generated; the watch still has not seen the Secret.
    let h = with_status(h, &calls);
    let (result, calls) = f.reconcile_with_reads(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(posts(&calls), 0, "not generated again");
    assert!(
        calls
            .iter()
            .any(|c| c.line == format!("GET /api/v1{NS}/secrets/social-secret-key")),
        "asked: {:?}",
        lines(&calls)
    );
    // Nothing changed: no status write (or one still saying Generated), no Warning event.
    if let Some(status) = calls.iter().find(|c| c.line.ends_with("/status")) {
        assert_eq!(
            condition(status, crate::status::SECRET_KEY)["reason"],
            "Generated"
        );
    }
    assert!(
        !calls
            .iter()
            .any(|c| c.body["reason"] == "GeneratedSecretMissing"),
        "{:?}",
        lines(&calls)
    );
}

fn with_admin(mut spec: crate::crd::HolloSpec) -> crate::crd::HolloSpec {
    spec.admin = Some(crate::crd::AdminSpec {
        username: "owner".into(),
        password_secret_ref: crate::crd::SecretKeyRef {
            name: "hollo-admin".into(),
            key: "password".into(),
        },
    });
    spec
}

/// `spec.admin` on a running `Hollo`: the Job is created (password by reference), the
/// condition says it is on its way without degrading; once it completed, nothing more is
/// created and `AdminAccount=True`.
#[tokio::test]
async fn the_declared_admin_is_created_by_a_job_once_the_version_runs() {
    let (mut f, h, calls) = first_reconcile(with_admin(testutil::spec())).await;
    let name = resources::admin::job_name(&h).expect("a Job name");
    let job = calls
        .iter()
        .find(|c| c.line == format!("PATCH /apis/batch/v1{NS}/jobs/{name}"))
        .cloned()
        .unwrap_or_else(|| panic!("the admin Job applied: {:?}", lines(&calls)));
    assert_eq!(
        job_env_secret(&job, resources::admin::PASSWORD_ENV),
        ("hollo-admin".into(), "password".into())
    );
    assert!(
        !job.body.to_string().contains("eA=="),
        "no Secret value in the Job"
    );
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let c = condition(status, crate::status::ADMIN_ACCOUNT);
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("False"), Some("Creating"))
    );
    assert_eq!(
        condition(status, crate::status::DEGRADED)["status"],
        "False"
    );

    // The Job completes (the watch shows it so).
    let mut done = job.body.clone();
    done["status"] = json!({"conditions": [{"type": "Complete", "status": "True"}],
                            "succeeded": 1});
    cache(&mut f.writers, &done);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(
        !calls.iter().any(|c| c.line.contains("/jobs/")),
        "no Job again: {:?}",
        lines(&calls)
    );
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let c = condition(status, crate::status::ADMIN_ACCOUNT);
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("AccountExists"))
    );
}

/// `spec.admin` naming a Secret that is not there: no Job (its pod could not start), the
/// condition names the Secret and the `Hollo` is `Degraded`; nothing is made before the
/// version is migrated either.
#[tokio::test]
async fn the_declared_admin_waits_for_its_secret_and_for_the_migration() {
    let (h, deps) = running(with_admin(testutil::spec()));
    let missing: Override = Box::new(|call: &Call| {
        (call.line == format!("GET /api/v1{NS}/secrets/hollo-admin")).then(not_found)
    });
    let mut f = Fixture::new(&h, missing);
    f.cache_deployments(&deps);
    let (result, calls) = f.reconcile(&h).await;
    assert!(result.is_ok(), "{result:?}");
    assert!(
        !calls.iter().any(|c| c.line.contains("/jobs/")),
        "{:?}",
        lines(&calls)
    );
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let c = condition(status, crate::status::ADMIN_ACCOUNT);
    assert_eq!(c["reason"], "PasswordSecretMissing");
    assert!(
        c["message"]
            .as_str()
            .unwrap_or_default()
            .contains("hollo-admin"),
        "{c}"
    );
    assert_eq!(condition(status, crate::status::DEGRADED)["status"], "True");

    // A first install: only the migration Job, and the account waits for it.
    let h = testutil::hollo(with_admin(testutil::spec()));
    let f = Fixture::plain(&h);
    let (_, calls) = f.reconcile(&h).await;
    let jobs: Vec<&str> = lines(&calls)
        .into_iter()
        .filter(|l| l.contains("/jobs/"))
        .collect();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    assert!(jobs[0].contains("/jobs/social-migrate-"), "{jobs:?}");
    let status = calls
        .iter()
        .find(|c| c.line.ends_with("/status"))
        .expect("status");
    let c = condition(status, crate::status::ADMIN_ACCOUNT);
    assert_eq!(c["reason"], "WaitingForMigration");
    assert_eq!(
        condition(status, crate::status::DEGRADED)["status"],
        "False"
    );
}
