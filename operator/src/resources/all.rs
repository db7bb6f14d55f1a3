//! `mode: all`: one Deployment of `NODE_TYPE=all` nodes that serve HTTP and consume the queues.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

use super::labels::Component;
use super::{web, worker};
use crate::crd::Hollo;

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

/// A web container that also runs the worker side (`worker_env`) and drains for both.
pub fn container(hollo: &Hollo, version: &str) -> Container {
    web::http_container(
        hollo,
        version,
        "all",
        worker::worker_env(hollo),
        drain_seconds(hollo),
    )
}

/// Replicas follow `spec.web.replicas` (an all node is first of all a web server).
pub fn deployment(hollo: &Hollo, version: &str, replicas: Option<i32>) -> Deployment {
    super::role_deployment(hollo, Component::All, version, replicas)
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
        let env = |n: &str| crate::testutil::env(c, n);
        assert_eq!(env("NODE_TYPE"), Some("all"));
        assert_eq!(env("SHUTDOWN_DRAIN_SECONDS"), Some("60"));
        assert_eq!(env("SHUTDOWN_PRESTOP_SECONDS"), Some("5"));
        assert!(c.lifecycle.is_none());
        assert_eq!(env("WORKER_POOL_MAX"), Some("20"));
        assert_eq!(env("PORT"), Some("3000"));
        assert_eq!(env("HEALTH_PORT"), Some("9090"), "/metrics");
    }
}
