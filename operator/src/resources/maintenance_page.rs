//! The maintenance page Deployment `<name>-maintenance-page` (R-OP-ZD): `hollo
//! maintenance-page` of the version being stopped, on the web port under the same port name,
//! so the web Service can select it while an upgrade has no web pod. No database, no Secret,
//! no media: the container gets `PORT` and `RETRY_AFTER_SECONDS` only.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ContainerPort, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::labels::Component;
use super::{pod, profile};
use crate::crd::Hollo;

pub const COMMAND: [&str; 2] = ["hollo", "maintenance-page"];

/// Small fixed requests: it answers from memory.
fn resources() -> ResourceRequirements {
    let q = |s: &str| Quantity(s.into());
    ResourceRequirements {
        requests: Some([("cpu".into(), q("10m")), ("memory".into(), q("16Mi"))].into()),
        limits: Some([("memory".into(), q("64Mi"))].into()),
        ..ResourceRequirements::default()
    }
}

/// One replica of the page in `version`'s image.
pub fn deployment(hollo: &Hollo, version: &str) -> Deployment {
    let spec = &hollo.spec;
    let page = &spec.web.maintenance_page;
    let env = vec![
        pod::plain("PORT", spec.web.port.to_string()),
        pod::plain("RETRY_AFTER_SECONDS", page.retry_after_seconds.to_string()),
        // It keeps answering this long after SIGTERM, as the web pods do, so the Service can
        // move back to them without a refused connection.
        pod::plain(
            "SHUTDOWN_PRESTOP_SECONDS",
            spec.web.pre_stop_seconds.to_string(),
        ),
    ];
    let mut c = pod::base_container(spec, pod::image_for(spec, version), vec![], &resources());
    // Only its own two variables: neither spec.env nor the Secrets reach it.
    c.env = Some(env);
    c.env_from = None;
    c.command = Some(COMMAND.iter().map(|s| s.to_string()).collect());
    c.ports = Some(vec![ContainerPort {
        name: Some(profile::HTTP_PORT_NAME.into()),
        container_port: spec.web.port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }]);
    c.readiness_probe = Some(profile::http_probe(
        "/readyz",
        profile::HTTP_PORT_NAME,
        2,
        3,
    ));
    let grace = i64::from(spec.web.pre_stop_seconds) + super::web::EXIT_MARGIN_SECONDS;
    let mut d = super::deployment(
        hollo,
        Component::MaintenancePage,
        version,
        Some(1),
        c,
        grace,
    );
    d.spec.template = pod::without_storage(d.spec.template);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn the_page_runs_the_command_on_the_web_port_without_secrets() {
        let h = testutil::hollo(testutil::spec());
        let d = deployment(&h, "0.0.9");
        assert_eq!(d.metadata.name.as_deref(), Some("social-maintenance-page"));
        let labels = d.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels["app.kubernetes.io/component"], "maintenance-page");
        assert_eq!(labels["app.kubernetes.io/version"], "0.0.9");
        assert_eq!(d.spec.replicas, Some(1));
        let pod = d.spec.template.spec.expect("pod");
        let c = &pod.containers[0];
        assert_eq!(
            c.command.as_deref(),
            Some(&["hollo".to_string(), "maintenance-page".to_string()][..])
        );
        assert!(c.image.as_deref().is_some_and(|i| i.ends_with(":0.0.9")));
        let env: Vec<(String, Option<String>)> = c
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect();
        assert!(
            env.contains(&("PORT".into(), Some("3000".into()))),
            "{env:?}"
        );
        assert!(env.contains(&("RETRY_AFTER_SECONDS".into(), Some("30".into()))));
        assert!(env.contains(&("SHUTDOWN_PRESTOP_SECONDS".into(), Some("5".into()))));
        assert_eq!(pod.termination_grace_period_seconds, Some(10));
        assert!(
            !env.iter()
                .any(|(n, _)| n == "DATABASE_URL" || n == "SECRET_KEY")
        );
        assert!(c.env_from.is_none());
        let port = &c.ports.as_ref().expect("ports")[0];
        assert_eq!(
            (port.name.as_deref(), port.container_port),
            (Some("http"), 3000)
        );
        let volumes: Vec<&str> = pod
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert!(!volumes.contains(&pod::STORAGE_VOLUME), "{volumes:?}");
    }
}
