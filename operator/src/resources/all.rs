//! `mode: all`: one Deployment of `NODE_TYPE=all` nodes that serve HTTP and consume the queues.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

use super::labels::Component;
use super::{pod, profile, web, worker};
use crate::crd::{Hollo, ImageProfile};

/// Drain for the longer of the two windows: an all node finishes requests and jobs alike.
pub fn drain_seconds(hollo: &Hollo) -> i32 {
    hollo
        .spec
        .web
        .drain_seconds
        .max(hollo.spec.worker.drain_seconds)
}

pub fn grace_seconds(hollo: &Hollo) -> i64 {
    i64::from(hollo.spec.web.pre_stop_seconds)
        + i64::from(drain_seconds(hollo))
        + web::EXIT_MARGIN_SECONDS
}

pub fn container(hollo: &Hollo, version: &str) -> Container {
    let spec = &hollo.spec;
    let mut env = pod::common_env(spec, true);
    env.push(pod::plain("NODE_TYPE", "all"));
    env.push(pod::plain("PORT", spec.web.port.to_string()));
    if spec.image.profile == ImageProfile::HolloRs {
        env.push(pod::plain(
            "DATABASE_POOL_MAX",
            spec.web.pool_max.to_string(),
        ));
        env.extend(worker::worker_env(hollo));
        // The web side's health port (a worker's `worker.healthPort` is for worker pods).
        env.push(web::health_port_env(hollo));
        env.push(pod::plain(
            "SHUTDOWN_DRAIN_SECONDS",
            drain_seconds(hollo).to_string(),
        ));
        env.push(web::pre_stop_env(spec.web.pre_stop_seconds));
    }
    let mut c = pod::base_container(
        spec,
        pod::image_for(spec, version),
        env,
        &spec.web.resources,
    );
    if spec.image.profile != ImageProfile::HolloRs {
        c.lifecycle = web::pre_stop(spec.web.pre_stop_seconds);
    }
    pod::with_process(c, profile::http(spec))
}

/// Replicas follow `spec.web.replicas` (an all node is first of all a web server).
pub fn deployment(hollo: &Hollo, version: &str, replicas: Option<i32>) -> Deployment {
    super::deployment(
        hollo,
        Component::All,
        version,
        replicas,
        container(hollo, version),
        grace_seconds(hollo),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::Mode;
    use crate::testutil;

    #[test]
    fn all_deployment_runs_both_sides() {
        let mut spec = testutil::spec();
        spec.mode = Mode::All;
        spec.worker.drain_seconds = 60;
        let h = testutil::hollo(spec);
        let d = deployment(&h, "0.1.0", Some(1));
        assert_eq!(d.metadata.name.as_deref(), Some("social-all"));
        let pod = d.spec.template.spec.expect("pod");
        assert_eq!(
            pod.termination_grace_period_seconds,
            Some(70),
            "preStop 5 + drain 60 + 5"
        );
        let c = &pod.containers[0];
        let env = |n: &str| {
            c.env
                .iter()
                .flatten()
                .find(|e| e.name == n)
                .and_then(|e| e.value.clone())
        };
        assert_eq!(env("NODE_TYPE").as_deref(), Some("all"));
        assert_eq!(env("SHUTDOWN_DRAIN_SECONDS").as_deref(), Some("60"));
        assert_eq!(env("SHUTDOWN_PRESTOP_SECONDS").as_deref(), Some("5"));
        assert!(c.lifecycle.is_none());
        assert_eq!(env("WORKER_POOL_MAX").as_deref(), Some("20"));
        assert_eq!(env("PORT").as_deref(), Some("3000"));
        assert_eq!(env("HEALTH_PORT").as_deref(), Some("9090"), "/metrics");
    }
}
