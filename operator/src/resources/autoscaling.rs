//! Worker autoscaling: an `autoscaling/v2` HPA on CPU, or a KEDA `ScaledObject` with a PostgreSQL
//! trigger on the *ready* message count (KEDA then manages its own HPA, so never both).

use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerBehavior,
    HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget, ResourceMetricSource,
};
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::labels::Component;
use crate::crd::{Hollo, ImageProfile};

/// Ready messages across both queues: due (`created + delay <= now()`) and not leased by a
/// worker. One number, `COALESCE`d, as KEDA's PostgreSQL scaler requires.
pub const READY_MESSAGES_QUERY: &str = "SELECT COALESCE((SELECT count(*) FROM hollo_task_message_v1 \
WHERE created + delay <= now() AND (lease_until IS NULL OR lease_until < now())), 0) + \
COALESCE((SELECT count(*) FROM hollo_activity_message_v1 \
WHERE created + delay <= now() AND (lease_until IS NULL OR lease_until < now())), 0)";

/// Upstream (fedify-dev/hollo): Fedify's `PostgresMessageQueue` table (`@fedify/postgres`,
/// default name `fedify_message_v2`). A consumer deletes a message when it takes it, so the
/// rows due now are exactly the ready ones (Fedify's own `getDepth()` counts `ready` the
/// same way). The queue creates its table on first use; until a worker has started, KEDA
/// reports the query as failing and keeps the current count.
pub const UPSTREAM_READY_MESSAGES_QUERY: &str = "SELECT COALESCE((SELECT count(*) FROM fedify_message_v2 \
WHERE created + delay <= now()), 0)";

/// The ready-message query of the image profile.
pub fn ready_messages_query(profile: ImageProfile) -> &'static str {
    match profile {
        ImageProfile::HolloRs => READY_MESSAGES_QUERY,
        ImageProfile::Upstream => UPSTREAM_READY_MESSAGES_QUERY,
    }
}

pub fn scaled_object_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject"),
        "scaledobjects",
    )
}

/// What the worker autoscaling wants to exist.
#[derive(Debug, Clone, PartialEq)]
pub enum Autoscaler {
    None,
    Hpa(Box<HorizontalPodAutoscaler>),
    Keda(Box<DynamicObject>),
}

pub fn autoscaler(hollo: &Hollo) -> Autoscaler {
    let spec = &hollo.spec;
    if !spec.worker_autoscaled() {
        return Autoscaler::None;
    }
    if spec.worker.autoscaling.keda.enabled {
        Autoscaler::Keda(Box::new(scaled_object(hollo)))
    } else {
        Autoscaler::Hpa(Box::new(hpa(hollo)))
    }
}

fn target_name(hollo: &Hollo) -> String {
    super::deployment_name(hollo, Component::Worker)
}

pub fn hpa(hollo: &Hollo) -> HorizontalPodAutoscaler {
    let a = &hollo.spec.worker.autoscaling;
    deployment_hpa(
        hollo,
        (super::worker_autoscaler_name(hollo), Component::Worker),
        target_name(hollo),
        (a.min_replicas, a.max_replicas),
        a.target_cpu_utilization.map(|cpu| vec![cpu_metric(cpu)]),
        a.behavior.as_deref().cloned(),
    )
}

/// An `autoscaling/v2` HPA `name` (a child of `component`) scaling the Deployment `target`
/// between `min` and `max` replicas on `metrics`.
fn deployment_hpa(
    hollo: &Hollo,
    (name, component): (String, Component),
    target: String,
    (min, max): (i32, i32),
    metrics: Option<Vec<MetricSpec>>,
    behavior: Option<HorizontalPodAutoscalerBehavior>,
) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: super::child_meta(hollo, name, component, &hollo.spec.version),
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some("apps/v1".into()),
                kind: "Deployment".into(),
                name: target,
            },
            min_replicas: Some(min),
            max_replicas: max,
            metrics,
            behavior,
        },
        status: None,
    }
}

/// The HTTP role's Deployment (`web`, or `all`): what a web HPA scales.
pub fn http_component(hollo: &Hollo) -> Component {
    match hollo.spec.mode {
        crate::crd::Mode::Split => Component::Web,
        crate::crd::Mode::All => Component::All,
    }
}

/// Web autoscaling (R-OP-OPS): a CPU HPA named like the HTTP Deployment it scales,
/// when `web.autoscaling.enabled`.
pub fn web_hpa(hollo: &Hollo) -> Option<HorizontalPodAutoscaler> {
    let spec = &hollo.spec;
    if !spec.web_autoscaled() {
        return None;
    }
    let a = &spec.web.autoscaling;
    let component = http_component(hollo);
    let name = super::deployment_name(hollo, component);
    Some(deployment_hpa(
        hollo,
        (name.clone(), component),
        name,
        (a.min_replicas, a.max_replicas),
        Some(vec![cpu_metric(a.target_cpu_utilization)]),
        a.behavior.as_deref().cloned(),
    ))
}

fn cpu_metric(utilization: i32) -> MetricSpec {
    MetricSpec {
        type_: "Resource".into(),
        resource: Some(ResourceMetricSource {
            name: "cpu".into(),
            target: MetricTarget {
                type_: "Utilization".into(),
                average_utilization: Some(utilization),
                ..MetricTarget::default()
            },
        }),
        ..MetricSpec::default()
    }
}

pub fn scaled_object(hollo: &Hollo) -> DynamicObject {
    let a = &hollo.spec.worker.autoscaling;
    let mut triggers = vec![json!({
        "type": "postgresql",
        "metadata": {
            "query": ready_messages_query(hollo.spec.image.profile),
            "targetQueryValue": a.keda.target_ready_messages_per_replica.to_string(),
            // KEDA resolves the worker container's DATABASE_URL (a secretKeyRef) itself, so the
            // connection string is never copied into this object.
            "connectionFromEnv": "DATABASE_URL",
        },
    })];
    if let Some(cpu) = a.target_cpu_utilization {
        triggers.push(json!({
            "type": "cpu",
            "metricType": "Utilization",
            "metadata": {"value": cpu.to_string()},
        }));
    }
    let mut obj = DynamicObject::new(
        &super::worker_autoscaler_name(hollo),
        &scaled_object_resource(),
    );
    obj.metadata = super::child_meta(
        hollo,
        super::worker_autoscaler_name(hollo),
        Component::Worker,
        &hollo.spec.version,
    );
    obj.data = json!({
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": target_name(hollo)},
            "minReplicaCount": a.min_replicas,
            "maxReplicaCount": a.max_replicas,
            "pollingInterval": a.keda.polling_interval_seconds,
            "cooldownPeriod": a.keda.cooldown_period_seconds,
            "triggers": triggers,
        }
    });
    // KEDA hands `behavior` to the HPA it manages.
    if let Some(b) = &a.behavior {
        obj.data["spec"]["advanced"] = json!({"horizontalPodAutoscalerConfig": {"behavior": b}});
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    fn autoscaled() -> crate::crd::HolloSpec {
        let mut spec = testutil::spec();
        spec.worker.autoscaling.enabled = true;
        spec.worker.autoscaling.min_replicas = 2;
        spec.worker.autoscaling.max_replicas = 8;
        spec
    }

    #[test]
    fn no_autoscaler_by_default() {
        assert_eq!(
            autoscaler(&testutil::hollo(testutil::spec())),
            Autoscaler::None
        );
    }

    #[test]
    fn hpa_targets_the_worker_deployment_on_cpu() {
        let Autoscaler::Hpa(h) = autoscaler(&testutil::hollo(autoscaled())) else {
            panic!("expected an HPA");
        };
        assert_eq!(h.metadata.name.as_deref(), Some("social-worker"));
        let s = h.spec;
        assert_eq!(s.scale_target_ref.name, "social-worker");
        assert_eq!(s.scale_target_ref.kind, "Deployment");
        assert_eq!((s.min_replicas, s.max_replicas), (Some(2), 8));
        let m = &s.metrics.expect("metrics")[0];
        let r = m.resource.as_ref().expect("resource");
        assert_eq!(r.name, "cpu");
        assert_eq!(r.target.average_utilization, Some(70));
    }

    #[test]
    fn keda_scaled_object_counts_ready_messages() {
        let mut spec = autoscaled();
        spec.worker.autoscaling.keda.enabled = true;
        spec.worker.autoscaling.target_cpu_utilization = None;
        let Autoscaler::Keda(o) = autoscaler(&testutil::hollo(spec)) else {
            panic!("expected a ScaledObject");
        };
        assert_eq!(
            o.types.as_ref().map(|t| t.api_version.as_str()),
            Some("keda.sh/v1alpha1")
        );
        assert_eq!(
            o.types.as_ref().map(|t| t.kind.as_str()),
            Some("ScaledObject")
        );
        assert_eq!(o.metadata.name.as_deref(), Some("social-worker"));
        assert_eq!(
            o.metadata.owner_references.as_ref().map(|r| r.len()),
            Some(1)
        );
        let s = &o.data["spec"];
        assert_eq!(s["scaleTargetRef"]["name"], "social-worker");
        assert_eq!(s["minReplicaCount"], 2);
        assert_eq!(s["maxReplicaCount"], 8);
        let triggers = s["triggers"].as_array().expect("triggers");
        assert_eq!(triggers.len(), 1);
        assert_eq!(triggers[0]["type"], "postgresql");
        assert_eq!(triggers[0]["metadata"]["targetQueryValue"], "50");
        assert_eq!(triggers[0]["metadata"]["connectionFromEnv"], "DATABASE_URL");
        let q = triggers[0]["metadata"]["query"].as_str().expect("query");
        assert!(q.starts_with("SELECT COALESCE("));
        assert!(q.contains("hollo_task_message_v1") && q.contains("hollo_activity_message_v1"));
        assert_eq!(q.matches("created + delay <= now()").count(), 2);
    }

    #[test]
    fn upstream_keda_counts_ready_messages_of_fedifys_queue() {
        let mut spec = autoscaled();
        spec.image.profile = ImageProfile::Upstream;
        spec.worker.autoscaling.keda.enabled = true;
        let o = scaled_object(&testutil::hollo(spec));
        let t = &o.data["spec"]["triggers"][0];
        assert_eq!(t["type"], "postgresql");
        assert_eq!(t["metadata"]["connectionFromEnv"], "DATABASE_URL");
        assert_eq!(
            t["metadata"]["query"],
            "SELECT COALESCE((SELECT count(*) FROM fedify_message_v2 WHERE created + delay <= now()), 0)"
        );
    }

    #[test]
    fn keda_adds_cpu_trigger_when_set() {
        let mut spec = autoscaled();
        spec.worker.autoscaling.keda.enabled = true;
        let o = scaled_object(&testutil::hollo(spec));
        let triggers = o.data["spec"]["triggers"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(triggers.len(), 2);
        assert_eq!(triggers[1]["type"], "cpu");
        assert_eq!(triggers[1]["metadata"]["value"], "70");
    }

    #[test]
    fn all_mode_never_autoscales_workers() {
        let mut spec = autoscaled();
        spec.mode = crate::crd::Mode::All;
        assert_eq!(autoscaler(&testutil::hollo(spec)), Autoscaler::None);
    }

    fn scale_down_after(
        seconds: i32,
    ) -> k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior {
        use k8s_openapi::api::autoscaling::v2::{HPAScalingPolicy, HPAScalingRules};
        k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior {
            scale_down: Some(HPAScalingRules {
                stabilization_window_seconds: Some(seconds),
                policies: Some(vec![HPAScalingPolicy {
                    type_: "Pods".into(),
                    value: 1,
                    period_seconds: 60,
                }]),
                ..HPAScalingRules::default()
            }),
            scale_up: None,
        }
    }

    #[test]
    fn web_hpa_scales_the_http_deployment_on_cpu_with_its_behavior() {
        let mut spec = testutil::spec();
        assert_eq!(
            web_hpa(&testutil::hollo(spec.clone())),
            None,
            "off by default"
        );
        spec.web.autoscaling.enabled = true;
        spec.web.autoscaling.min_replicas = 2;
        spec.web.autoscaling.max_replicas = 5;
        spec.web.autoscaling.target_cpu_utilization = 60;
        spec.web.autoscaling.behavior = Some(Box::new(scale_down_after(600)));
        let h = web_hpa(&testutil::hollo(spec.clone())).expect("an HPA");
        assert_eq!(h.metadata.name.as_deref(), Some("social-web"));
        let labels = h.metadata.labels.clone().expect("labels");
        assert_eq!(labels["app.kubernetes.io/component"], "web");
        let s = &h.spec;
        assert_eq!(s.scale_target_ref.name, "social-web");
        assert_eq!((s.min_replicas, s.max_replicas), (Some(2), 5));
        let m = &s.metrics.as_ref().expect("metrics")[0];
        assert_eq!(
            m.resource.as_ref().map(|r| r.target.average_utilization),
            Some(Some(60))
        );
        let down = s
            .behavior
            .as_ref()
            .and_then(|b| b.scale_down.as_ref())
            .expect("behavior");
        assert_eq!(down.stabilization_window_seconds, Some(600));
        // The worker autoscaler is independent of it.
        assert_eq!(autoscaler(&testutil::hollo(spec.clone())), Autoscaler::None);
        spec.mode = crate::crd::Mode::All;
        let h = web_hpa(&testutil::hollo(spec)).expect("an HPA");
        assert_eq!(
            h.spec.scale_target_ref.name, "social-all",
            "all mode: the all Deployment"
        );
        assert_eq!(h.metadata.name.as_deref(), Some("social-all"));
    }

    #[test]
    fn worker_behavior_reaches_the_hpa_and_kedas_hpa_config() {
        let mut spec = autoscaled();
        spec.worker.autoscaling.behavior = Some(Box::new(scale_down_after(900)));
        let Autoscaler::Hpa(h) = autoscaler(&testutil::hollo(spec.clone())) else {
            panic!("expected an HPA");
        };
        let down = h
            .spec
            .behavior
            .and_then(|b| b.scale_down)
            .expect("behavior");
        assert_eq!(down.stabilization_window_seconds, Some(900));
        spec.worker.autoscaling.keda.enabled = true;
        let o = scaled_object(&testutil::hollo(spec.clone()));
        let b = &o.data["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"];
        assert_eq!(b["scaleDown"]["stabilizationWindowSeconds"], 900);
        assert_eq!(b["scaleDown"]["policies"][0]["type"], "Pods");
        spec.worker.autoscaling.behavior = None;
        let o = scaled_object(&testutil::hollo(spec));
        assert!(
            o.data["spec"].get("advanced").is_none(),
            "nothing when unset"
        );
    }
}
