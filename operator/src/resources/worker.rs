//! The worker Deployment (`NODE_TYPE=worker`): consumes the queues; probed on its health port.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

use super::labels::Component;
use super::web::EXIT_MARGIN_SECONDS;
use super::{pod, profile};
use crate::crd::{Hollo, ImageProfile};

/// R-OP-DRAIN: the app drains for `drainSeconds`, then needs a few seconds to hand work back.
pub fn grace_seconds(hollo: &Hollo) -> i64 {
    i64::from(hollo.spec.worker.drain_seconds) + EXIT_MARGIN_SECONDS
}

/// Worker-side env (also used by `all` nodes).
pub fn worker_env(hollo: &Hollo) -> Vec<k8s_openapi::api::core::v1::EnvVar> {
    let w = &hollo.spec.worker;
    vec![
        pod::plain("WORKER_POOL_MAX", w.pool_max.to_string()),
        pod::plain("ITEM_LOCK_POOL_SIZE", w.item_lock_pool_size.to_string()),
        pod::plain("ACTIVITY_CONCURRENCY", w.concurrency.activities.to_string()),
        pod::plain("TASK_CONCURRENCY", w.concurrency.tasks.to_string()),
        pod::plain("REPLY_CONCURRENCY", w.concurrency.replies.to_string()),
        pod::plain("DELIVERY_CONCURRENCY", w.concurrency.deliveries.to_string()),
    ]
}

pub fn container(hollo: &Hollo, version: &str) -> Container {
    let spec = &hollo.spec;
    let w = &spec.worker;
    let mut env = pod::common_env(spec, false);
    env.push(pod::plain("NODE_TYPE", "worker"));
    if spec.image.profile == ImageProfile::HolloRs {
        env.push(pod::plain("HEALTH_PORT", w.health_port.to_string()));
        env.extend(worker_env(hollo));
        env.push(pod::plain(
            "SHUTDOWN_DRAIN_SECONDS",
            w.drain_seconds.to_string(),
        ));
    }
    let c = pod::base_container(spec, pod::image_for(spec, version), env, &w.resources);
    pod::with_process(c, profile::worker(spec))
}

/// `replicas` is `None` while an autoscaler owns it.
pub fn deployment(hollo: &Hollo, version: &str, replicas: Option<i32>) -> Deployment {
    super::role_deployment(hollo, Component::Worker, version, replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{self, env};

    #[test]
    fn worker_deployment_has_the_contract_fields() {
        let mut spec = testutil::spec();
        spec.worker.drain_seconds = 45;
        spec.worker.concurrency.activities = 16;
        let h = testutil::hollo(spec);
        let d = deployment(&h, "0.1.0", Some(3));
        assert_eq!(d.metadata.name.as_deref(), Some("social-worker"));
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(3));
        let pod = spec.template.spec.expect("pod");
        assert_eq!(
            pod.termination_grace_period_seconds,
            Some(50),
            "drain 45 + 5"
        );
        let c = &pod.containers[0];
        assert!(c.lifecycle.is_none(), "workers need no preStop");
        assert_eq!(env(c, "NODE_TYPE"), Some("worker"));
        assert_eq!(env(c, "SHUTDOWN_DRAIN_SECONDS"), Some("45"));
        assert_eq!(env(c, "HEALTH_PORT"), Some("9090"));
        assert_eq!(env(c, "WORKER_POOL_MAX"), Some("20"));
        assert_eq!(env(c, "ITEM_LOCK_POOL_SIZE"), Some("4"));
        assert_eq!(env(c, "ACTIVITY_CONCURRENCY"), Some("16"));
        assert_eq!(env(c, "TASK_CONCURRENCY"), Some("4"));
        assert_eq!(env(c, "REPLY_CONCURRENCY"), Some("2"));
        assert_eq!(env(c, "DELIVERY_CONCURRENCY"), Some("64"));
        assert_eq!(env(c, "PORT"), None);
        assert_eq!(c.ports.as_ref().map(|p| p[0].container_port), Some(9090));
        let ready = c
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .expect("probe");
        assert_eq!(ready.path.as_deref(), Some("/readyz"));
        assert_eq!(
            ready.port,
            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("health".into())
        );
    }

    #[test]
    fn upstream_workers_run_the_server_without_port_or_probe() {
        let mut spec = testutil::spec();
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        let c = container(&testutil::hollo(spec), "0.10.0");
        assert_eq!(env(&c, "NODE_TYPE"), Some("worker"));
        for hollo_rs_only in [
            "HEALTH_PORT",
            "WORKER_POOL_MAX",
            "SHUTDOWN_DRAIN_SECONDS",
            "LOG_FORMAT",
        ] {
            assert_eq!(env(&c, hollo_rs_only), None, "{hollo_rs_only}");
        }
        assert_eq!(
            c.command.as_deref().map(|c| c.join(" ")),
            Some("node --dns-result-order=ipv6first dist/bin/server.js".into())
        );
        assert_eq!(c.ports, None);
        assert_eq!(
            (&c.liveness_probe, &c.readiness_probe, &c.startup_probe),
            (&None, &None, &None)
        );
    }

    #[test]
    fn autoscaled_workers_leave_replicas_unset() {
        let h = testutil::hollo(testutil::spec());
        let d = deployment(&h, "0.1.0", None);
        assert_eq!(d.spec.replicas, None);
    }
}
