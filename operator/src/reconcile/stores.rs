//! The watch caches of every kind the operator makes (R-OP-1): one reflector store per kind,
//! fed by the same watches that trigger a `Hollo`'s reconcile when one of its children changes.
//! `observe` reads the cluster from here instead of asking the apiserver again.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::crd::Hollo;
use crate::resources::labels;

/// One store per child kind the operator applies and watches.
#[derive(Clone)]
pub struct Stores {
    pub deployments: Store<Deployment>,
    pub services: Store<Service>,
    pub jobs: Store<Job>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub hpas: Store<HorizontalPodAutoscaler>,
    pub ingresses: Store<Ingress>,
    /// `spec.networkPolicy` (R-OP-OPS).
    pub network_policies: Store<NetworkPolicy>,
    /// `spec.maintenance` (R-OP-OPS).
    pub cron_jobs: Store<CronJob>,
}

impl Stores {
    /// Waits until every store holds its first complete list: before that, "absent" would
    /// only mean "not listed yet".
    pub async fn ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.deployments.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.jobs.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await?;
        self.hpas.wait_until_ready().await?;
        self.ingresses.wait_until_ready().await?;
        self.network_policies.wait_until_ready().await?;
        self.cron_jobs.wait_until_ready().await
    }
}

/// The children in `store` that `hollo` owns: its namespace, its instance label and an owner
/// reference to its uid (an object of the same name made by someone else is never ours).
pub fn owned<K>(store: &Store<K>, hollo: &Hollo) -> Vec<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let ns = hollo.namespace();
    let name = hollo.name_any();
    let uid = hollo.uid().unwrap_or_default();
    let mut owned = store.state_filter(|o| {
        o.namespace() == ns
            && o.labels().get(labels::INSTANCE) == Some(&name)
            && o.owner_references().iter().any(|r| r.uid == uid)
    });
    // By name: a reconcile's requests come in the same order every time.
    owned.sort_by_key(|o| o.name_any());
    owned
}

/// The label selector of every watch: only what the operator made.
fn managed() -> watcher::Config {
    watcher::Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::MANAGER))
}

/// The client-side apply annotation: never read here, and a copy of the whole object when set.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What no cached object needs: `managedFields` (a good part of every
/// object's size) and `kubectl apply`'s copy of the object. Nothing here reads either.
pub fn strip_meta<K: Resource>(o: &mut K) {
    o.managed_fields_mut().clear();
    let annotations = o.annotations_mut();
    annotations.remove(LAST_APPLIED);
}

/// What each cached kind keeps: its metadata without [`strip_meta`]'s fields and, beyond that,
/// everything an apply compares (`apply::Applier::unchanged` projects the cached object on the
/// desired one) and everything `observe`/`report` read. Status parts nobody reads go.
pub trait Slim: Resource + Sized {
    fn slim(&mut self) {
        strip_meta(self);
    }

    /// What stands in for a part [`Slim::slim`] dropped but an apply must still compare (a
    /// digest): `apply::Applier` remembers it beside the projection of the stored object.
    fn fingerprint(&self) -> Option<&str> {
        None
    }
}

/// Where a cached Deployment keeps the digest of the pod spec it no longer holds.
pub const POD_SPEC_DIGEST: &str = "hollo-operator.internal/pod-spec-digest";

impl Slim for Deployment {
    /// `observe` reads replicas, updated/ready replicas and `observedGeneration`; never the
    /// conditions (two messages per Deployment). The pod template's labels (its version) and
    /// annotations stay; its pod spec (containers, env, probes, volumes: most of a
    /// Deployment's size) is read by nobody but the apply's comparison, so a digest of it
    /// stays instead: any change of the stored pod spec (a manual edit) is still a change.
    fn slim(&mut self) {
        strip_meta(self);
        if let Some(s) = self.status.as_mut() {
            s.conditions = None;
        }
        if let Some(pod) = self.spec.template.spec.take() {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            serde_json::to_string(&pod).unwrap_or_default().hash(&mut h);
            self.spec
                .template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(Default::default)
                .insert(POD_SPEC_DIGEST.into(), format!("{:016x}", h.finish()));
        }
    }

    fn fingerprint(&self) -> Option<&str> {
        self.spec
            .template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get(POD_SPEC_DIGEST)
            .map(String::as_str)
    }
}
/// Kinds whose status nothing reads (a PDB's conditions and per-pod disruption times, a
/// Service's or Ingress's load balancer, an HPA's metrics): metadata stripped, status dropped.
macro_rules! slim_without_status {
    ($($kind:ty),+) => {$(
        impl Slim for $kind {
            fn slim(&mut self) {
                strip_meta(self);
                self.status = None;
            }
        }
    )+};
}
slim_without_status!(
    Service,
    PodDisruptionBudget,
    HorizontalPodAutoscaler,
    Ingress
);
/// Job conditions (type, status, reason, message), start and completion times are read
/// (`observe::job_state`, `report::migration_seconds`): a Job keeps them. Its pod counts and the
/// conditions' probe and transition times are read by nobody, and each of their changes was an
/// event that woke the `Hollo`, so they go. Its pod template is immutable and
/// never read, so it goes; `apply::Applier` hashes what it stored slimmed the same way, so an
/// unchanged Job is still seen as unchanged.
impl Slim for Job {
    fn slim(&mut self) {
        strip_meta(self);
        if let Some(s) = self.spec.as_mut() {
            s.template = Default::default();
        }
        if let Some(s) = self.status.as_mut() {
            *s = k8s_openapi::api::batch::v1::JobStatus {
                conditions: s.conditions.take().map(|cs| {
                    cs.into_iter()
                        .map(|c| k8s_openapi::api::batch::v1::JobCondition {
                            last_probe_time: None,
                            last_transition_time: None,
                            ..c
                        })
                        .collect()
                }),
                start_time: s.start_time.take(),
                completion_time: s.completion_time.take(),
                ..Default::default()
            };
        }
    }
}
/// KEDA's ScaledObjects and HTTPRoutes (listed, not watched).
impl Slim for kube::api::DynamicObject {}
impl Slim for NetworkPolicy {}
/// `lastSuccessfulTime` is read (`report::last_cleanup`).
impl Slim for CronJob {}

/// Watches `api`, caches what it sees without what [`Slim`] drops, and lets the controller
/// trigger owners on it.
fn cached<K>(controller: Controller<Hollo>, api: Api<K>) -> (Controller<Hollo>, Store<K>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: Slim + serde::Serialize + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, managed())
        .default_backoff()
        .modify(Slim::slim)
        .reflect(writer);
    (
        controller.owns_stream(changes(stream, digest).boxed()),
        reader,
    )
}

/// A digest of what the cache keeps of an object, its `resourceVersion` aside.
fn digest<K: Resource + Clone + serde::Serialize>(o: &K) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut o = o.clone();
    o.meta_mut().resource_version = None;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_vec(&o).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// Which object of one kind `o` is (its namespace and name), as a hash: two objects of one kind
/// share it only by a 64-bit collision.
pub fn object_key<K: Resource>(o: &K) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    o.meta().namespace.hash(&mut h);
    o.meta().name.hash(&mut h);
    h.finish()
}

/// The objects of a (slimmed) watch whose `digest` changed, and every deleted one. With
/// [`digest`]: the cache keeps all the operator reads of a child, so an event that leaves it
/// unchanged (a Deployment condition's `lastUpdateTime`, a re-list after a watch
/// timeout) cannot change a decision, and no longer wakes its `Hollo`.
pub fn changes<K, S>(
    events: S,
    digest: fn(&K) -> u64,
) -> impl futures::Stream<Item = Result<K, watcher::Error>>
where
    K: Resource + Clone + serde::Serialize + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    // Keyed by a hash of namespace and name, not by `ObjectRef` (four strings an object: a
    // few hundred bytes each for thousands of children at 1 000 `Hollo`s per operator).
    let mut seen: std::collections::HashMap<u64, u64> = Default::default();
    events.filter_map(move |event| {
        let out = match event {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                let d = digest(&o);
                let changed = seen.insert(object_key(&o), d) != Some(d);
                // How many events wake a `Hollo` and how many do not, by kind.
                tracing::trace!(kind = %K::kind(&Default::default()), changed, "watch event");
                changed.then_some(Ok(o))
            }
            Ok(watcher::Event::Delete(o)) => {
                seen.remove(&object_key(&o));
                Some(Ok(o))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
        };
        std::future::ready(out)
    })
}

/// The `Hollo` controller, its cache without [`strip_meta`]'s fields (at
/// 1 000 `Hollo`s the `managedFields` of their status writes are much of the cache). Triggers
/// as `Controller::new` does: every applied object.
pub fn hollo_controller(api: Api<Hollo>) -> Controller<Hollo> {
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).modify(strip_meta),
    )
    .applied_objects();
    Controller::for_stream(stream, reader)
}

/// The size of each cache as JSON (`kind`, objects, bytes): logged at debug level
/// (`hollo_operator::reconcile::stores=debug`) to see which cache dominates the RSS.
pub fn sizes(hollos: &Store<Hollo>, stores: &Stores) -> Vec<(&'static str, usize, usize)> {
    fn size<K: Resource + Clone + serde::Serialize>(
        kind: &'static str,
        store: &Store<K>,
    ) -> (&'static str, usize, usize)
    where
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let all = store.state();
        let bytes = all
            .iter()
            .map(|o| serde_json::to_vec(o.as_ref()).map_or(0, |v| v.len()))
            .sum();
        (kind, all.len(), bytes)
    }
    vec![
        size("Hollo", hollos),
        size("Deployment", &stores.deployments),
        size("Service", &stores.services),
        size("Job", &stores.jobs),
        size("PodDisruptionBudget", &stores.pdbs),
        size("HorizontalPodAutoscaler", &stores.hpas),
        size("Ingress", &stores.ingresses),
        size("NetworkPolicy", &stores.network_policies),
        size("CronJob", &stores.cron_jobs),
    ]
}

/// Logs [`sizes`] every `every` while debug logging is on for this module.
pub fn log_sizes(hollos: Store<Hollo>, stores: Stores, every: std::time::Duration) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            if !tracing::enabled!(tracing::Level::DEBUG) {
                continue;
            }
            let sizes = sizes(&hollos, &stores);
            let total: usize = sizes.iter().map(|(_, _, b)| b).sum();
            let each = sizes
                .iter()
                .map(|(k, n, b)| format!("{k}:{n}:{}KiB", b / 1024))
                .collect::<Vec<_>>()
                .join(" ");
            tracing::debug!(total_kib = total / 1024, caches = %each, "cache sizes (JSON)");
        }
    });
}

/// Adds a cached watch of every child kind to `controller`.
pub fn watch_children(
    controller: Controller<Hollo>,
    client: &Client,
    ns: Option<&str>,
) -> (Controller<Hollo>, Stores) {
    fn api<K>(client: &Client, ns: Option<&str>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let (c, deployments) = cached(controller, api(client, ns));
    let (c, services) = cached(c, api(client, ns));
    let (c, jobs) = cached(c, api(client, ns));
    let (c, pdbs) = cached(c, api(client, ns));
    let (c, hpas) = cached(c, api(client, ns));
    let (c, ingresses) = cached(c, api(client, ns));
    let (c, network_policies) = cached(c, api(client, ns));
    let (c, cron_jobs) = cached(c, api(client, ns));
    (
        c,
        Stores {
            deployments,
            services,
            jobs,
            pdbs,
            hpas,
            ingresses,
            network_policies,
            cron_jobs,
        },
    )
}

/// What wakes the `Hollo`s that read a Secret: a new `resourceVersion` (a write of the Secret,
/// a rotation), not a re-list of the same Secrets.
fn secret_version(s: &kube::api::PartialObjectMeta<Secret>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    s.resource_version().hash(&mut h);
    h.finish()
}

/// `WATCH_SECRETS`: a metadata-only watch of Secrets (names and
/// `resourceVersion`s, never their data), so a steady `Hollo` needs no GET of its Secrets and a
/// rotated Secret reconciles the `Hollo`s that read it at once. Needs `list` and `watch` on
/// Secrets.
pub fn watch_secrets(
    controller: Controller<Hollo>,
    client: &Client,
    ns: Option<&str>,
) -> (Controller<Hollo>, crate::reconcile::external::SecretReader) {
    // `Api<PartialObjectMeta<_>>`: metadata-only list and watch requests.
    let api: Api<kube::api::PartialObjectMeta<Secret>> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let (reader, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|o| {
            strip_meta(o);
            // What is left of a Secret: its name, namespace and resourceVersion matter.
            o.annotations_mut().clear();
        })
        .reflect(writer);
    let stream = changes(stream, secret_version);
    let hollos = controller.store();
    let controller = controller.watches_stream(stream.boxed(), move |s| {
        crate::reconcile::external::hollos_reading(
            &hollos.state(),
            s.namespace().as_deref(),
            &s.name_any(),
        )
    });
    (
        controller,
        crate::reconcile::external::SecretReader::watched(reader),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentStatus;

    fn deployment(rv: &str, ready: i32) -> Deployment {
        let mut d = Deployment::default();
        d.metadata.name = Some("web".into());
        d.metadata.namespace = Some("ns".into());
        d.metadata.resource_version = Some(rv.into());
        d.status = Some(DeploymentStatus {
            ready_replicas: Some(ready),
            ..Default::default()
        });
        d
    }

    fn ready(events: Vec<watcher::Event<Deployment>>) -> Vec<(String, i32)> {
        let stream = futures::stream::iter(events.into_iter().map(Ok));
        futures::executor::block_on(changes(stream, digest).collect::<Vec<_>>())
            .into_iter()
            .map(|d| {
                let d = d.unwrap();
                let ready = d.status.and_then(|s| s.ready_replicas).unwrap_or(-1);
                (d.metadata.resource_version.unwrap(), ready)
            })
            .collect()
    }

    #[test]
    fn only_changes_of_the_cached_form_and_deletions_wake() {
        use watcher::Event::*;
        let got = ready(vec![
            Init,
            InitApply(deployment("1", 0)),
            InitDone,
            // a condition's heartbeat, dropped by `slim`: same cached form, new version
            Apply(deployment("2", 0)),
            Apply(deployment("3", 1)),
            // a re-list of the same object
            Init,
            InitApply(deployment("3", 1)),
            InitDone,
            Delete(deployment("4", 1)),
            // made again, as it was
            Apply(deployment("5", 1)),
        ]);
        let want = [("1", 0), ("3", 1), ("4", 1), ("5", 1)];
        let want: Vec<(String, i32)> = want.iter().map(|(v, r)| (v.to_string(), *r)).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_secret_wakes_on_a_new_resource_version_only() {
        use kube::api::{ObjectMeta, PartialObjectMeta, PartialObjectMetaExt};
        use watcher::Event::*;
        let secret = |rv: &str| -> PartialObjectMeta<Secret> {
            ObjectMeta {
                name: Some("hollo-db".into()),
                namespace: Some("ns".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            }
            .into_request_partial()
        };
        let events = vec![
            Init,
            InitApply(secret("1")),
            InitDone,
            // a re-list: the same Secret
            Init,
            InitApply(secret("1")),
            InitDone,
            // rotated
            Apply(secret("2")),
            Delete(secret("2")),
        ];
        let stream = futures::stream::iter(events.into_iter().map(Ok));
        let got: Vec<String> =
            futures::executor::block_on(changes(stream, secret_version).collect::<Vec<_>>())
                .into_iter()
                .map(|s| s.unwrap().resource_version().unwrap())
                .collect();
        assert_eq!(got, ["1", "2", "2"]);
    }
}
