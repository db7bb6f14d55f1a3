//! Pure builders: a `Hollo` (plus decisions made by `phase`) → the Kubernetes objects it owns.
//! Nothing here talks to the API server.

pub mod all;
pub mod autoscaling;
pub mod ingress;
pub mod labels;
pub mod migration;
pub mod pdb;
pub mod pod;
pub mod service;
pub mod web;
pub mod worker;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::crd::Hollo;
use labels::Component;

/// The owner reference every child carries, so deleting the `Hollo` garbage-collects it.
pub fn owner_ref(hollo: &Hollo) -> OwnerReference {
    // `controller_owner_ref` is None only without a uid, i.e. for an object never stored; the
    // reconciler only sees stored objects, so fall back to a reference with an empty uid (which
    // the apiserver then rejects loudly instead of us panicking).
    hollo
        .controller_owner_ref(&())
        .unwrap_or_else(|| OwnerReference {
            api_version: "hollo.social/v1alpha1".into(),
            kind: "Hollo".into(),
            name: hollo.name_any(),
            uid: String::new(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        })
}

/// Metadata of a child named `name` of the given component and version.
pub fn child_meta(hollo: &Hollo, name: String, component: Component, version: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: hollo.namespace(),
        labels: Some(labels::labels(&hollo.name_any(), component, version)),
        owner_references: Some(vec![owner_ref(hollo)]),
        ..ObjectMeta::default()
    }
}

/// Child object names (issue 7's naming contract).
pub fn deployment_name(hollo: &Hollo, component: Component) -> String {
    format!("{}-{}", hollo.name_any(), component.as_str())
}

pub fn web_service_name(hollo: &Hollo) -> String {
    format!("{}-web", hollo.name_any())
}

pub fn worker_autoscaler_name(hollo: &Hollo) -> String {
    format!("{}-worker", hollo.name_any())
}

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment,
};
use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A role Deployment. `replicas: None` leaves the field unset so an autoscaler can own it.
///
/// Rolling updates never surge (`maxSurge: 0`): the connection budget is a hard ceiling, and a
/// surge pod would open connections beyond it. Run 2+ web replicas for updates without a gap.
pub fn deployment(
    hollo: &Hollo,
    component: Component,
    version: &str,
    replicas: Option<i32>,
    container: Container,
    termination_grace_seconds: i64,
) -> Deployment {
    Deployment {
        metadata: child_meta(hollo, deployment_name(hollo, component), component, version),
        spec: DeploymentSpec {
            replicas,
            selector: LabelSelector {
                match_labels: Some(labels::selector(&hollo.name_any(), component)),
                match_expressions: None,
            },
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(0)),
                    max_unavailable: Some(IntOrString::Int(1)),
                }),
            }),
            revision_history_limit: Some(3),
            template: pod::pod_template(
                hollo,
                component,
                version,
                container,
                termination_grace_seconds,
                None,
            ),
            ..DeploymentSpec::default()
        },
        status: None,
    }
}
