//! Step 4 of the pipeline: make the cluster match the desired set. Every write is a server-side
//! apply under the one field manager (R-OP-1), except the two that must stay out of the apply's
//! managed fields (a Deployment's first create with its initial `replicas`, and scaling).
//! An apply is skipped when neither the desired object nor the observed one changed since the
//! last apply, so a steady reconcile writes nothing. Then every owned child of a pruned kind
//! that is not in the desired set is deleted.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::fmt::Debug;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::desired::{self, Desired};
use super::observe::World;
use super::stores::{self, Slim, Stores};
use super::{Error, MANAGER};
use crate::crd::Hollo;
use crate::resources::{autoscaling, httproute, labels};

/// What was applied last to one object: a hash of the desired object, and a hash of the
/// fields it sets as the apiserver stored them (defaulted and normalised), as the watch cache
/// keeps them (`stores::Slim`: with a digest in place of a Deployment's pod spec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Memo {
    desired: u64,
    stored: u64,
    /// The stored object's `Slim::fingerprint`, hashed (0 without one).
    fingerprint: u64,
}

fn fingerprint<K: Slim>(o: &K) -> u64 {
    o.fingerprint().map_or(0, |f| {
        let mut h = DefaultHasher::new();
        f.hash(&mut h);
        h.finish()
    })
}

/// Whether KEDA's ScaledObject API exists, as far as this process knows (it is not watched:
/// it may be installed after the operator starts).
const API_UNKNOWN: u8 = 0;
const API_ABSENT: u8 = 1;
const API_PRESENT: u8 = 2;

/// Carries out writes; remembers what it applied.
pub struct Applier {
    /// By [`Applier::key`]: a hash, not the strings (thousands of children at 1 000 `Hollo`s).
    memo: Mutex<HashMap<u64, Memo>>,
    keda: AtomicU8,
    /// The same for the Gateway API's HTTPRoute (R-OP-OPS).
    gateway: AtomicU8,
    /// API writes made (applies, creates, scales, deletes): a steady reconcile adds none.
    pub writes: Counter,
}

impl Applier {
    /// `writes` counts every write (the `/metrics` counter).
    pub fn new(writes: Counter) -> Self {
        Self {
            memo: Mutex::default(),
            keda: AtomicU8::new(API_UNKNOWN),
            gateway: AtomicU8::new(API_UNKNOWN),
            writes,
        }
    }
}

fn apply_params() -> PatchParams {
    // `force`: we are the only intended manager of these fields; take them back after a manual
    // edit instead of failing on the conflict (that is how drift gets corrected).
    PatchParams::apply(MANAGER).force()
}

pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn hash(v: &Value) -> u64 {
    let mut h = DefaultHasher::new();
    v.to_string().hash(&mut h);
    h.finish()
}

/// The part of `stored` that `want` sets: objects keep only `want`'s keys, arrays keep their
/// length (an element more or less is a change).
fn project(stored: &Value, want: &Value) -> Value {
    match (stored, want) {
        (Value::Object(s), Value::Object(w)) => Value::Object(
            w.iter()
                .map(|(k, wv)| {
                    (
                        k.clone(),
                        s.get(k).map_or(Value::Null, |sv| project(sv, wv)),
                    )
                })
                .collect(),
        ),
        (Value::Array(s), Value::Array(w)) => Value::Array(
            s.iter()
                .enumerate()
                .map(|(i, sv)| w.get(i).map_or(Value::Null, |wv| project(sv, wv)))
                .collect(),
        ),
        (s, _) => s.clone(),
    }
}

impl Applier {
    /// The kind, namespace and name of `obj`, hashed: two objects share it only by a 64-bit
    /// collision, which costs at most applies that change nothing (each overwrites the
    /// other's memo, so neither matches).
    fn key<K: Resource>(obj: &K) -> u64 {
        let mut h = DefaultHasher::new();
        std::any::type_name::<K>().hash(&mut h);
        h.write_u64(stores::object_key(obj));
        h.finish()
    }

    fn memo_of<K: Resource + Serialize>(&self, want: &K) -> Option<Memo> {
        self.memo.lock().ok()?.get(&Self::key(want)).copied()
    }

    /// Whether applying `want` would change nothing: it is what was applied last, and the
    /// fields it sets are still as the apiserver stored them then.
    fn unchanged<K: Resource + Serialize + Slim>(&self, want: &K, observed: Option<&K>) -> bool {
        let (Some(memo), Some(observed)) = (self.memo_of(want), observed) else {
            return false;
        };
        let (Ok(w), Ok(o)) = (serde_json::to_value(want), serde_json::to_value(observed)) else {
            return false;
        };
        memo == (Memo {
            desired: hash(&w),
            stored: hash(&project(&o, &w)),
            fingerprint: fingerprint(observed),
        })
    }

    /// `stored` slimmed as the watch cache slims it (`stores::Slim`), so that the next
    /// [`Self::unchanged`] compares like with like.
    fn remember<K: Resource + Serialize + Slim + Clone>(&self, want: &K, stored: &K) {
        let mut stored = stored.clone();
        stored.slim();
        let (Ok(w), Ok(s)) = (serde_json::to_value(want), serde_json::to_value(&stored)) else {
            return;
        };
        let memo = Memo {
            desired: hash(&w),
            stored: hash(&project(&s, &w)),
            fingerprint: fingerprint(&stored),
        };
        if let Ok(mut m) = self.memo.lock() {
            m.insert(Self::key(want), memo);
        }
    }

    /// Server-side applies `want` unless that would change nothing.
    pub async fn apply<K>(&self, api: &Api<K>, want: &K, observed: Option<&K>) -> Result<(), Error>
    where
        K: Resource + Serialize + DeserializeOwned + Clone + Debug + Slim,
    {
        if self.unchanged(want, observed) {
            return Ok(());
        }
        self.writes.inc();
        let stored = api
            .patch(&want.name_any(), &apply_params(), &Patch::Apply(want))
            .await?;
        self.remember(want, &stored);
        Ok(())
    }

    /// Creates a Deployment with its initial `replicas` (a create is not an apply, so the count
    /// stays out of our apply's managed fields). A concurrent create falls back to the apply.
    async fn create_deployment(&self, api: &Api<Deployment>, d: &Deployment) -> Result<(), Error> {
        let pp = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        self.writes.inc();
        match api.create(&pp, d).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let mut without = d.clone();
                without.spec.replicas = None;
                self.apply(api, &without, None).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Sets `replicas` through the scale subresource (an update, not part of our apply).
    async fn scale(&self, api: &Api<Deployment>, name: &str, replicas: i32) -> Result<(), Error> {
        let pp = PatchParams {
            field_manager: Some(MANAGER.into()),
            ..PatchParams::default()
        };
        self.writes.inc();
        api.patch_scale(
            name,
            &pp,
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
        tracing::info!(deployment = %name, replicas, "scaled");
        Ok(())
    }

    async fn delete<K>(&self, api: &Api<K>, name: &str, dp: &DeleteParams) -> Result<(), Error>
    where
        K: Resource + DeserializeOwned + Clone + Debug,
    {
        self.writes.inc();
        match api.delete(name, dp).await {
            Ok(_) => {
                tracing::info!(%name, kind = std::any::type_name::<K>(), "deleted child no longer wanted");
                Ok(())
            }
            Err(e) if is_not_found(&e) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Creates `secret` (the operator's generated `SECRET_KEY`): a create, never an apply, so a
/// Secret already there — made meanwhile by another reconcile or by hand — is kept and
/// returned as it is (409), never overwritten. Logs the name only.
pub async fn create_secret(
    applier: &Applier,
    api: &Api<k8s_openapi::api::core::v1::Secret>,
    secret: &k8s_openapi::api::core::v1::Secret,
) -> Result<k8s_openapi::api::core::v1::Secret, Error> {
    let name = secret.name_any();
    let pp = PostParams {
        field_manager: Some(MANAGER.into()),
        ..PostParams::default()
    };
    applier.writes.inc();
    match api.create(&pp, secret).await {
        Ok(created) => {
            tracing::info!(secret = %name, "created Secret with a generated SECRET_KEY");
            Ok(created)
        }
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(api.get(&name).await?),
        Err(e) => Err(e.into()),
    }
}

/// The namespaced APIs of one reconcile.
struct Apis {
    deployments: Api<Deployment>,
    services: Api<Service>,
    jobs: Api<Job>,
    pdbs: Api<PodDisruptionBudget>,
    hpas: Api<HorizontalPodAutoscaler>,
    ingresses: Api<Ingress>,
    network_policies: Api<NetworkPolicy>,
    cron_jobs: Api<CronJob>,
    scaled_objects: Api<DynamicObject>,
    http_routes: Api<DynamicObject>,
}

impl Apis {
    fn new(client: &Client, ns: &str) -> Self {
        Self {
            deployments: Api::namespaced(client.clone(), ns),
            services: Api::namespaced(client.clone(), ns),
            jobs: Api::namespaced(client.clone(), ns),
            pdbs: Api::namespaced(client.clone(), ns),
            hpas: Api::namespaced(client.clone(), ns),
            ingresses: Api::namespaced(client.clone(), ns),
            network_policies: Api::namespaced(client.clone(), ns),
            cron_jobs: Api::namespaced(client.clone(), ns),
            scaled_objects: Api::namespaced_with(
                client.clone(),
                ns,
                &autoscaling::scaled_object_resource(),
            ),
            http_routes: Api::namespaced_with(
                client.clone(),
                ns,
                &httproute::http_route_resource(),
            ),
        }
    }
}

fn cached<K>(store: &Store<K>, want: &K) -> Option<std::sync::Arc<K>>
where
    K: Resource<DynamicType = ()> + Clone + 'static,
{
    let ns = want.namespace().unwrap_or_default();
    store.get(&ObjectRef::new(&want.name_any()).within(&ns))
}

impl Applier {
    /// Applies every object of one kind, comparing with the watch cache.
    async fn apply_all<K>(&self, api: &Api<K>, store: &Store<K>, want: &[K]) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug + Slim,
        K: 'static,
    {
        for w in want {
            self.apply(api, w, cached(store, w).as_deref()).await?;
        }
        Ok(())
    }

    /// Deletes the children of one kind that `hollo` owns and `keep` does not name.
    async fn prune<K>(
        &self,
        api: &Api<K>,
        store: &Store<K>,
        hollo: &Hollo,
        keep: &[String],
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug + 'static,
    {
        for o in stores::owned(store, hollo) {
            if !keep.contains(&o.name_any()) && o.meta().deletion_timestamp.is_none() {
                self.delete(api, &o.name_any(), &DeleteParams::default())
                    .await?;
            }
        }
        Ok(())
    }

    /// [`Self::prune`] of every child of the kind that is not in `want`.
    async fn prune_all<K>(
        &self,
        api: &Api<K>,
        store: &Store<K>,
        hollo: &Hollo,
        want: &[K],
    ) -> Result<(), Error>
    where
        K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug + 'static,
    {
        self.prune(api, store, hollo, &Desired::names(want)).await
    }

    /// Deletes the objects of an optional API (`owned`, from [`Self::owned_optional`]) that
    /// `want` does not name.
    async fn prune_optional(
        &self,
        api: &Api<DynamicObject>,
        owned: &[DynamicObject],
        want: &[DynamicObject],
    ) -> Result<(), Error> {
        let keep = Desired::names(want);
        for o in owned.iter().filter(|o| !keep.contains(&o.name_any())) {
            self.delete(api, &o.name_any(), &DeleteParams::default())
                .await?;
        }
        Ok(())
    }

    /// Applies `want` of an optional API, comparing with `owned` (from
    /// [`Self::owned_optional`]). An absent API is remembered in `known` and answered with
    /// `missing`'s message, not an error: everything else is applied all the same.
    async fn apply_optional(
        &self,
        api: &Api<DynamicObject>,
        owned: &[DynamicObject],
        want: &[DynamicObject],
        known: &AtomicU8,
        missing: Error,
    ) -> Result<Option<String>, Error> {
        let mut absent = None;
        for o in want {
            let observed = owned.iter().find(|s| s.name_any() == o.name_any());
            match self.apply(api, o, observed).await {
                Ok(()) => known.store(API_PRESENT, Ordering::Relaxed),
                Err(Error::Kube(e)) if is_not_found(&e) => {
                    known.store(API_ABSENT, Ordering::Relaxed);
                    absent = Some(missing.to_string());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(absent)
    }

    /// The objects of an optional API (KEDA's ScaledObjects, Gateway API HTTPRoutes) `hollo`
    /// owns, listed: such an API is not watched. Empty while the API is known to be missing
    /// (`known` remembers what the last request said).
    async fn owned_optional(
        &self,
        api: &Api<DynamicObject>,
        hollo: &Hollo,
        known: &AtomicU8,
    ) -> Result<Vec<DynamicObject>, Error> {
        if known.load(Ordering::Relaxed) == API_ABSENT {
            return Ok(vec![]);
        }
        let lp = ListParams::default().labels(&format!(
            "{}={},{}={}",
            labels::MANAGED_BY,
            labels::MANAGER,
            labels::INSTANCE,
            hollo.name_any()
        ));
        match api.list(&lp).await {
            Ok(l) => {
                known.store(API_PRESENT, Ordering::Relaxed);
                let uid = hollo.uid().unwrap_or_default();
                Ok(l.items
                    .into_iter()
                    .filter(|o| o.owner_references().iter().any(|r| r.uid == uid))
                    .collect())
            }
            Err(e) if is_not_found(&e) => {
                known.store(API_ABSENT, Ordering::Relaxed);
                Ok(vec![])
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// What converging left undone without failing.
#[derive(Debug, Default, PartialEq)]
pub struct Outcome {
    /// KEDA asked for but not installed: everything else is applied (the autoscaler comes
    /// last); the status says so and the operator looks again soon.
    pub autoscaler_missing: Option<String>,
    /// `web.httpRoute` asked for but the Gateway API's HTTPRoute is not installed (the same
    /// tolerance, R-OP-OPS).
    pub route_missing: Option<String>,
}

/// Makes the cluster match `want`. Order matters: autoscalers that are no longer wanted go
/// before any Deployment is scaled (they would scale a stopped role back up); a role's new
/// Deployment exists before the other mode's is deleted; autoscalers come last.
pub async fn converge(
    applier: &Applier,
    client: &Client,
    stores: &Stores,
    hollo: &Hollo,
    world: &World,
    want: &Desired,
    running: bool,
) -> Result<Outcome, Error> {
    let ns = hollo.namespace().ok_or(Error::NoNamespace)?;
    let apis = Apis::new(client, &ns);

    applier
        .apply_all(&apis.services, &stores.services, &want.services)
        .await?;
    applier
        .apply_all(&apis.ingresses, &stores.ingresses, &want.ingresses)
        .await?;
    applier
        .apply_all(&apis.pdbs, &stores.pdbs, &want.pdbs)
        .await?;
    // Before any pod starts, so none runs unconfined while the policy is wanted.
    applier
        .apply_all(
            &apis.network_policies,
            &stores.network_policies,
            &want.network_policies,
        )
        .await?;
    applier
        .apply_all(&apis.cron_jobs, &stores.cron_jobs, &want.cron_jobs)
        .await?;
    applier
        .prune_all(&apis.cron_jobs, &stores.cron_jobs, hollo, &want.cron_jobs)
        .await?;
    if world.observed.backup == crate::phase::Backup::Absent {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client.clone(), &ns, &crate::resources::backup::resource());
        for b in &want.backups {
            applier.apply(&api, b, None).await?;
            tracing::info!(backup = %b.name_any(), "created CloudNativePG Backup");
        }
    }
    for job in &want.jobs {
        // Job specs are immutable: an existing Job is left alone, finished or not.
        if !world.jobs.iter().any(|j| j.name_any() == job.name_any()) {
            applier.apply(&apis.jobs, job, None).await?;
            tracing::info!(job = %job.name_any(), "created Job");
        }
    }

    applier
        .prune_all(&apis.hpas, &stores.hpas, hollo, &want.hpas)
        .await?;
    let scaled = applier
        .owned_optional(&apis.scaled_objects, hollo, &applier.keda)
        .await?;
    applier
        .prune_optional(&apis.scaled_objects, &scaled, &want.scaled_objects)
        .await?;

    for w in &want.workloads {
        let existing = world.deployments.values().find(|d| d.name_any() == w.name);
        match (existing, &w.template) {
            (None, Some(template)) => {
                let mut first = template.clone();
                first.spec.replicas = Some(w.replicas.initial());
                applier.create_deployment(&apis.deployments, &first).await?;
            }
            (None, None) => {}
            (Some(existing), template) => {
                if let Some(t) = template {
                    applier.apply(&apis.deployments, t, Some(existing)).await?;
                }
                if let Some(n) = w.replicas.scale_to(existing.spec.replicas) {
                    applier.scale(&apis.deployments, &w.name, n).await?;
                }
            }
        }
    }
    applier
        .prune(
            &apis.deployments,
            &stores.deployments,
            hollo,
            &want.workload_names(),
        )
        .await?;
    applier
        .prune_all(&apis.services, &stores.services, hollo, &want.services)
        .await?;
    applier
        .prune_all(&apis.ingresses, &stores.ingresses, hollo, &want.ingresses)
        .await?;
    applier
        .prune_all(&apis.pdbs, &stores.pdbs, hollo, &want.pdbs)
        .await?;
    applier
        .prune_all(
            &apis.network_policies,
            &stores.network_policies,
            hollo,
            &want.network_policies,
        )
        .await?;

    applier
        .apply_all(&apis.hpas, &stores.hpas, &want.hpas)
        .await?;
    let autoscaler_missing = applier
        .apply_optional(
            &apis.scaled_objects,
            &scaled,
            &want.scaled_objects,
            &applier.keda,
            Error::KedaMissing,
        )
        .await?;

    // Gateway API routes: pruned when no longer wanted, applied when wanted; an absent API is
    // reported, not an error. Listed only while a route is wanted or the status says one was
    // (its `HTTPRoute` condition), so a Hollo that never had one makes no request for them.
    let had_route = hollo.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == crate::status::HTTP_ROUTE)
    });
    let routes = if want.http_routes.is_empty() && !had_route {
        vec![]
    } else {
        applier
            .owned_optional(&apis.http_routes, hollo, &applier.gateway)
            .await?
    };
    applier
        .prune_optional(&apis.http_routes, &routes, &want.http_routes)
        .await?;
    let route_missing = applier
        .apply_optional(
            &apis.http_routes,
            &routes,
            &want.http_routes,
            &applier.gateway,
            Error::GatewayApiMissing,
        )
        .await?;

    if running {
        for j in desired::finished_jobs(hollo, &world.jobs) {
            if j.meta().deletion_timestamp.is_none() {
                applier
                    .delete(&apis.jobs, &j.name_any(), &DeleteParams::background())
                    .await?;
            }
        }
    }
    Ok(Outcome {
        autoscaler_missing,
        route_missing,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn projection_keeps_what_the_desired_object_sets() {
        let want = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                          "spec": {"ports": [{"port": 80}]}});
        let stored = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"},
                                         "resourceVersion": "9"},
                            "spec": {"ports": [{"port": 80, "protocol": "TCP"}],
                                     "clusterIP": "10.0.0.1"},
                            "status": {}});
        assert_eq!(project(&stored, &want), want);
        let edited = json!({"metadata": {"name": "a", "labels": {"x": "2"}},
                            "spec": {"ports": [{"port": 80}]}});
        assert_ne!(project(&edited, &want), want, "a changed field shows");
        let more = json!({"metadata": {"name": "a", "labels": {"x": "1"}},
                          "spec": {"ports": [{"port": 80}, {"port": 81}]}});
        assert_ne!(project(&more, &want), want, "an added element shows");
    }
}
