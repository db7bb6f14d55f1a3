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
    /// `spec.networkPolicy` (issue 35 item 6).
    pub network_policies: Store<NetworkPolicy>,
    /// `spec.maintenance` (issue 35 item 5).
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

/// Watches `api`, caches what it sees (without `managedFields`, which nothing here reads and
/// which is a good part of every object's size) and lets the controller trigger owners on it.
fn cached<K>(controller: Controller<Hollo>, api: Api<K>) -> (Controller<Hollo>, Store<K>)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync,
    K: 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, managed())
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
        .reflect(writer)
        .touched_objects();
    (controller.owns_stream(stream.boxed()), reader)
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

/// `WATCH_SECRETS` (issue 36 item 4): a metadata-only watch of Secrets (names and
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
            o.managed_fields_mut().clear();
            // What is left of a Secret: its name, namespace and resourceVersion matter.
            o.annotations_mut().clear();
        })
        .reflect(writer)
        .touched_objects();
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
