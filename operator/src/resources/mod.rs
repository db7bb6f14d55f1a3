//! Pure builders: a `Hollo` (plus decisions made by `phase`) → the Kubernetes objects it owns.
//! Nothing here talks to the API server.

pub mod admin;
pub mod all;
pub mod autoscaling;
pub mod backup;
pub mod httproute;
pub mod ingress;
pub mod labels;
pub mod maintenance;
pub mod maintenance_page;
pub mod migration;
pub mod networkpolicy;
pub mod pdb;
pub mod pod;
pub mod profile;
pub mod secret_key;
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

/// Child object names (the naming contract README documents; R-OP-1).
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

/// How a role's pods are replaced when its pod template changes.
///
/// The HTTP role (web, or all) surges one pod and keeps every old pod until its replacement is
/// ready (`maxSurge: 1, maxUnavailable: 0`): no gap in service, even with one replica — but
/// only when the connection budget has room for that extra pod's pool (R-DB-2), because the
/// budget is a hard ceiling. Otherwise, and always for workers (whose brief capacity dip costs
/// nothing but queue latency), nothing surges: one pod at a time stops, then its replacement
/// starts.
pub fn rolling_update(hollo: &Hollo, component: Component) -> RollingUpdateDeployment {
    let http = matches!(component, Component::Web | Component::All);
    if http && crate::budget::Budget::for_spec(&hollo.spec).surge_fits() {
        RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(1)),
            max_unavailable: Some(IntOrString::Int(0)),
        }
    } else {
        RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(0)),
            max_unavailable: Some(IntOrString::Int(1)),
        }
    }
}

/// A role Deployment. `replicas: None` leaves the field unset so an autoscaler can own it.
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
                rolling_update: Some(rolling_update(hollo, component)),
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

/// The Deployment of a web, worker or `all` role: its module's container and grace period.
fn role_deployment(
    hollo: &Hollo,
    component: Component,
    version: &str,
    replicas: Option<i32>,
) -> Deployment {
    let (container, grace_seconds) = match component {
        Component::Web => (web::container(hollo, version), web::grace_seconds(hollo)),
        Component::Worker => (
            worker::container(hollo, version),
            worker::grace_seconds(hollo),
        ),
        _ => (all::container(hollo, version), all::grace_seconds(hollo)),
    };
    deployment(
        hollo,
        component,
        version,
        replicas,
        container,
        grace_seconds,
    )
}

/// Every child a `Hollo` wants in steady state at `spec.version` (Deployments with their initial
/// replica count, the first migration Job), in apply order. Used by `hollo-operator render`
/// and the snapshot test; the reconciler itself builds the same objects one by one.
pub fn desired_children(hollo: &Hollo) -> Result<Vec<serde_json::Value>, serde_json::Error> {
    use crate::crd::Mode;
    // The generated SECRET_KEY Secret itself is not rendered (its key is drawn when the
    // operator creates it); the pods reference it all the same.
    let hollo = &*secret_key::resolved(hollo);
    let spec = &hollo.spec;
    let v = spec.version.as_str();
    let mut out = vec![serde_json::to_value(service::service(hollo))?];
    if let Some(i) = ingress::ingress(hollo) {
        out.push(serde_json::to_value(i)?);
    }
    for p in [pdb::web(hollo), pdb::worker(hollo)].into_iter().flatten() {
        out.push(serde_json::to_value(p)?);
    }
    out.push(serde_json::to_value(migration::job(hollo, 0))?);
    if let Some(job) = admin::job(hollo) {
        out.push(serde_json::to_value(job)?);
    }
    match spec.mode {
        Mode::Split => {
            let workers = if spec.worker_autoscaled() {
                spec.worker.autoscaling.min_replicas
            } else {
                spec.worker.replicas
            };
            out.push(serde_json::to_value(web::deployment(
                hollo,
                v,
                Some(http_initial_replicas(spec)),
            ))?);
            out.push(serde_json::to_value(worker::deployment(
                hollo,
                v,
                Some(workers),
            ))?);
        }
        Mode::All => {
            out.push(serde_json::to_value(all::deployment(
                hollo,
                v,
                Some(http_initial_replicas(spec)),
            ))?);
        }
    }
    if let Some(h) = autoscaling::web_hpa(hollo) {
        out.push(serde_json::to_value(h)?);
    }
    match autoscaling::autoscaler(hollo) {
        autoscaling::Autoscaler::None => {}
        autoscaling::Autoscaler::Hpa(h) => out.push(serde_json::to_value(h)?),
        autoscaling::Autoscaler::Keda(o) => out.push(serde_json::to_value(o)?),
    }
    Ok(out)
}

/// The count the HTTP Deployment starts with: the web autoscaler's minimum, else `web.replicas`.
pub fn http_initial_replicas(spec: &crate::crd::HolloSpec) -> i32 {
    if spec.web_autoscaled() {
        spec.web.autoscaling.min_replicas
    } else {
        spec.web.replicas
    }
}

/// Multi-document YAML of [`desired_children`].
pub fn render(hollo: &Hollo) -> anyhow::Result<String> {
    let mut s = String::new();
    for obj in desired_children(hollo)? {
        s.push_str("---\n");
        s.push_str(&serde_yaml::to_string(&obj)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example's children, object by object and field by field, against the committed
    /// snapshot. Regenerate after an intended change with:
    /// `cargo run -q -p hollo-operator -- render examples/hollo.yaml --namespace fedi > operator/testdata/example-children.yaml`
    #[test]
    fn example_children_match_the_snapshot() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        for (example, snapshot) in [
            ("hollo.yaml", "example-children.yaml"),
            ("hollo-upstream.yaml", "upstream-children.yaml"),
        ] {
            let text =
                std::fs::read_to_string(format!("{root}/examples/{example}")).expect("example");
            let hollo = crate::render_input(&text, "fedi").expect("example parses");
            let rendered = render(&hollo).expect("renders");
            let committed = std::fs::read_to_string(format!("{root}/operator/testdata/{snapshot}"))
                .expect("snapshot exists");
            assert!(
                rendered == committed,
                "operator/testdata/{snapshot} is stale; regenerate with `cargo run -q -p \
                 hollo-operator -- render examples/{example} --namespace fedi > \
                 operator/testdata/{snapshot}` and review the diff"
            );
        }
    }

    fn strategy(d: &Deployment) -> (Option<IntOrString>, Option<IntOrString>) {
        let r = d
            .spec
            .strategy
            .as_ref()
            .and_then(|s| s.rolling_update.clone())
            .expect("rolling update");
        (r.max_surge, r.max_unavailable)
    }

    #[test]
    fn http_rollouts_surge_only_when_the_budget_has_room_for_one_more_pod() {
        use IntOrString::Int;
        let mut spec = crate::testutil::spec();
        spec.web.replicas = 1;
        // 1×20 + 2×24 + 1 + 5 = 74; a surge web pod makes 94.
        spec.database.max_connections = 94;
        let h = crate::testutil::hollo(spec.clone());
        assert_eq!(
            strategy(&web::deployment(&h, "0.1.0", Some(1))),
            (Some(Int(1)), Some(Int(0))),
            "one web replica is replaced without a gap"
        );
        assert_eq!(
            strategy(&worker::deployment(&h, "0.1.0", Some(2))),
            (Some(Int(0)), Some(Int(1))),
            "workers never surge"
        );
        spec.database.max_connections = 93;
        let h = crate::testutil::hollo(spec.clone());
        assert_eq!(
            strategy(&web::deployment(&h, "0.1.0", Some(1))),
            (Some(Int(0)), Some(Int(1))),
            "no room for a surge pod: one at a time"
        );
        spec.mode = crate::crd::Mode::All;
        spec.database.max_connections = 1000;
        let h = crate::testutil::hollo(spec);
        assert_eq!(
            strategy(&all::deployment(&h, "0.1.0", Some(1))),
            (Some(Int(1)), Some(Int(0)))
        );
    }

    #[test]
    fn every_child_is_owned_and_labelled() {
        let mut spec = crate::testutil::spec();
        spec.web.ingress.enabled = true;
        spec.web.ingress.host = Some("h.example".into());
        spec.worker.autoscaling.enabled = true;
        let hollo = crate::testutil::hollo(spec);
        let children = desired_children(&hollo).expect("renders");
        let kinds: Vec<&str> = children.iter().filter_map(|c| c["kind"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "Service",
                "Ingress",
                "PodDisruptionBudget",
                "PodDisruptionBudget",
                "Job",
                "Deployment",
                "Deployment",
                "HorizontalPodAutoscaler"
            ]
        );
        for c in &children {
            assert_eq!(
                c["metadata"]["ownerReferences"][0]["uid"], "0b3c-uid",
                "{c}"
            );
            assert_eq!(c["metadata"]["namespace"], "fedi");
            assert_eq!(
                c["metadata"]["labels"]["app.kubernetes.io/managed-by"],
                "hollo-operator"
            );
            assert_eq!(
                c["metadata"]["labels"]["app.kubernetes.io/instance"],
                "social"
            );
        }
    }
}
