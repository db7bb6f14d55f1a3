//! The web Deployment (`NODE_TYPE=web`): serves HTTP, only enqueues work.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, Lifecycle, LifecycleHandler, SleepAction};

use super::labels::Component;
use super::{pod, profile};
use crate::crd::{Hollo, ImageProfile};

pub const PORT_NAME: &str = profile::HTTP_PORT_NAME;
/// Seconds between the end of the app's drain and SIGKILL, so the process can exit cleanly.
pub const EXIT_MARGIN_SECONDS: i64 = 5;

/// `terminationGracePeriodSeconds` of web pods: it must cover the pre-stop delay (the app's
/// own, or the `preStop` sleep that the grace countdown includes), the drain window and an
/// exit margin.
pub fn grace_seconds(hollo: &Hollo) -> i64 {
    let w = &hollo.spec.web;
    i64::from(w.pre_stop_seconds) + i64::from(w.drain_seconds) + EXIT_MARGIN_SECONDS
}

/// hollo-rs keeps serving through the pre-stop delay itself (`SHUTDOWN_PRESTOP_SECONDS`): from
/// SIGTERM on it answers `/readyz` 503 and asks every client for `Connection: close` while it
/// still serves, so keep-alive clients move to other pods while the endpoint removal reaches
/// every node's proxy. A sleeping hook would keep them on this pod until its listener closes.
pub fn pre_stop_env(seconds: i32) -> EnvVar {
    pod::plain("SHUTDOWN_PRESTOP_SECONDS", seconds.to_string())
}

/// `HEALTH_PORT` of an HTTP-serving hollo-rs pod: its `/metrics` (and probes) port, declared
/// as `health` by `profile::http`.
pub fn health_port_env(hollo: &Hollo) -> EnvVar {
    pod::plain("HEALTH_PORT", hollo.spec.web.health_port.to_string())
}

/// The `preStop` sleep that lets endpoints drop the pod before it stops accepting connections,
/// for images that know no pre-stop setting (upstream).
pub fn pre_stop(seconds: i32) -> Option<Lifecycle> {
    (seconds > 0).then(|| Lifecycle {
        pre_stop: Some(LifecycleHandler {
            sleep: Some(SleepAction {
                seconds: i64::from(seconds),
            }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    })
}

pub fn container(hollo: &Hollo, version: &str) -> Container {
    http_container(hollo, version, "web", vec![], hollo.spec.web.drain_seconds)
}

/// The container of a pod serving HTTP (web, or `all`): `NODE_TYPE=node_type`, and with
/// hollo-rs `worker_env` (an `all` node's worker side) and `SHUTDOWN_DRAIN_SECONDS=drain_seconds`.
pub fn http_container(
    hollo: &Hollo,
    version: &str,
    node_type: &str,
    worker_env: Vec<EnvVar>,
    drain_seconds: i32,
) -> Container {
    let spec = &hollo.spec;
    let mut env = pod::common_env(spec, true);
    env.push(pod::plain("NODE_TYPE", node_type));
    env.push(pod::plain("PORT", spec.web.port.to_string()));
    // Pool size and drain window are hollo-rs settings; upstream's are fixed in its code.
    if spec.image.profile == ImageProfile::HolloRs {
        env.push(pod::plain(
            "DATABASE_POOL_MAX",
            spec.web.pool_max.to_string(),
        ));
        env.extend(worker_env);
        // The web side's health port (a worker's `worker.healthPort` is for worker pods).
        env.push(health_port_env(hollo));
        env.push(pod::plain(
            "SHUTDOWN_DRAIN_SECONDS",
            drain_seconds.to_string(),
        ));
        env.push(pre_stop_env(spec.web.pre_stop_seconds));
    }
    let mut c = pod::base_container(
        spec,
        pod::image_for(spec, version),
        env,
        &spec.web.resources,
    );
    if spec.image.profile != ImageProfile::HolloRs {
        c.lifecycle = pre_stop(spec.web.pre_stop_seconds);
    }
    pod::with_process(c, profile::http(spec))
}

pub fn deployment(hollo: &Hollo, version: &str, replicas: Option<i32>) -> Deployment {
    super::role_deployment(hollo, Component::Web, version, replicas)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{self, env};

    #[test]
    fn web_deployment_has_the_contract_fields() {
        let h = testutil::hollo(testutil::spec());
        let d = deployment(&h, "0.1.0", Some(2));
        assert_eq!(d.metadata.name.as_deref(), Some("social-web"));
        assert_eq!(d.metadata.namespace.as_deref(), Some("fedi"));
        let owner = &d.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Hollo", "0b3c-uid")
        );
        assert_eq!(owner.controller, Some(true));
        let spec = d.spec;
        assert_eq!(spec.replicas, Some(2));
        let sel = spec.selector.match_labels.expect("selector");
        assert_eq!(sel["app.kubernetes.io/component"], "web");
        assert!(!sel.contains_key("app.kubernetes.io/version"));
        let pod = spec.template.spec.expect("pod");
        assert_eq!(
            pod.termination_grace_period_seconds,
            Some(40),
            "preStop 5 + drain 30 + 5"
        );
        assert_eq!(pod.automount_service_account_token, Some(false));
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("ghcr.io/hollo-social/hollo:0.1.0"));
        assert_eq!(env(c, "NODE_TYPE"), Some("web"));
        assert_eq!(env(c, "PORT"), Some("3000"));
        assert_eq!(
            env(c, "HEALTH_PORT"),
            Some("9090"),
            "/metrics is served there"
        );
        assert_eq!(env(c, "DATABASE_POOL_MAX"), Some("20"));
        assert_eq!(env(c, "SHUTDOWN_DRAIN_SECONDS"), Some("30"));
        assert_eq!(env(c, "BEHIND_PROXY"), None);
        assert_eq!(c.ports.as_ref().map(|p| p[0].container_port), Some(3000));
        assert_eq!(env(c, "SHUTDOWN_PRESTOP_SECONDS"), Some("5"));
        assert!(
            c.lifecycle.is_none(),
            "hollo-rs serves through its own pre-stop delay; no sleeping hook"
        );
        let probe_path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
            p.as_ref()
                .and_then(|p| p.http_get.as_ref())
                .and_then(|g| g.path.clone())
        };
        assert_eq!(probe_path(&c.liveness_probe).as_deref(), Some("/healthz"));
        assert_eq!(probe_path(&c.readiness_probe).as_deref(), Some("/readyz"));
        let port = c
            .readiness_probe
            .as_ref()
            .and_then(|p| p.http_get.as_ref())
            .map(|g| g.port.clone());
        assert_eq!(
            port,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("http".into()))
        );
    }

    #[test]
    fn upstream_web_skips_the_start_time_migration_and_probes_nodeinfo() {
        let mut spec = testutil::spec();
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        let c = container(&testutil::hollo(spec), "0.10.0");
        assert_eq!(env(&c, "NODE_TYPE"), Some("web"));
        assert_eq!(env(&c, "PORT"), Some("3000"));
        assert_eq!(env(&c, "DATABASE_POOL_MAX"), None);
        let cmd = c.command.clone().unwrap_or_default().join(" ");
        assert_eq!(cmd, "node --dns-result-order=ipv6first dist/bin/server.js");
        assert!(!cmd.contains("migrate"));
        let path = |p: &Option<k8s_openapi::api::core::v1::Probe>| {
            p.as_ref()
                .and_then(|p| p.http_get.as_ref())
                .and_then(|g| g.path.clone())
        };
        assert_eq!(
            path(&c.liveness_probe).as_deref(),
            Some("/.well-known/nodeinfo")
        );
        assert_eq!(path(&c.readiness_probe).as_deref(), Some("/nodeinfo/2.1"));
        assert_eq!(c.ports.as_ref().map(|p| p[0].container_port), Some(3000));
        // upstream knows no SHUTDOWN_PRESTOP_SECONDS: the kubelet sleeps before SIGTERM
        assert_eq!(env(&c, "SHUTDOWN_PRESTOP_SECONDS"), None);
        let sleep = c
            .lifecycle
            .as_ref()
            .and_then(|l| l.pre_stop.as_ref())
            .and_then(|p| p.sleep.as_ref())
            .map(|s| s.seconds);
        assert_eq!(sleep, Some(5));
    }

    #[test]
    fn pre_stop_zero_and_grace_follows() {
        let mut spec = testutil::spec();
        spec.web.pre_stop_seconds = 0;
        spec.web.drain_seconds = 10;
        let h = testutil::hollo(spec.clone());
        let c = container(&h, "0.1.0");
        assert_eq!(env(&c, "SHUTDOWN_PRESTOP_SECONDS"), Some("0"));
        assert_eq!(grace_seconds(&h), 15);
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        let c = container(&testutil::hollo(spec), "0.10.0");
        assert!(c.lifecycle.is_none(), "no sleep of 0 s");
    }

    #[test]
    fn ingress_sets_behind_proxy() {
        let mut spec = testutil::spec();
        spec.web.ingress.enabled = true;
        spec.web.ingress.host = Some("h.example".into());
        let c = container(&testutil::hollo(spec), "0.1.0");
        assert_eq!(env(&c, "BEHIND_PROXY"), Some("true"));
        assert_eq!(env(&c, "PUBLIC_URL"), Some("https://h.example"));
    }
}
