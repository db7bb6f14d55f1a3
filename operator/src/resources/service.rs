//! The web Service `<name>-web`, in front of the web (or all) pods.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::labels::{self, Component};
use super::web::PORT_NAME;
use crate::crd::{Hollo, Mode};

/// The component serving HTTP in the spec's mode.
pub fn http_component(hollo: &Hollo) -> Component {
    match hollo.spec.mode {
        Mode::Split => Component::Web,
        Mode::All => Component::All,
    }
}

pub fn service(hollo: &Hollo) -> Service {
    service_selecting(hollo, http_component(hollo))
}

/// The web Service with its selector on `component`: the HTTP role, or the maintenance page
/// while an upgrade has stopped it (R-OP-ZD). Same name, port and port name.
pub fn service_selecting(hollo: &Hollo, component: Component) -> Service {
    Service {
        metadata: super::child_meta(
            hollo,
            super::web_service_name(hollo),
            Component::Web,
            &hollo.spec.version,
        ),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            selector: Some(labels::selector(&hollo.name_any(), component)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: hollo.spec.web.port,
                target_port: Some(IntOrString::String(PORT_NAME.into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn service_selects_web_pods() {
        let s = service(&testutil::hollo(testutil::spec()));
        assert_eq!(s.metadata.name.as_deref(), Some("social-web"));
        let spec = s.spec.expect("spec");
        assert_eq!(
            spec.selector.expect("selector")["app.kubernetes.io/component"],
            "web"
        );
        let port = &spec.ports.expect("ports")[0];
        assert_eq!(port.port, 3000);
        assert_eq!(port.target_port, Some(IntOrString::String("http".into())));
    }

    #[test]
    fn all_mode_service_selects_all_pods() {
        let mut spec = testutil::spec();
        spec.mode = Mode::All;
        let s = service(&testutil::hollo(spec));
        let sel = s.spec.and_then(|s| s.selector).expect("selector");
        assert_eq!(sel["app.kubernetes.io/component"], "all");
    }
}
