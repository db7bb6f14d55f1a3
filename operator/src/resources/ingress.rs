//! Optional Ingress for the web Service.

use k8s_openapi::api::networking::v1::{
    HTTPIngressPath, HTTPIngressRuleValue, Ingress, IngressBackend, IngressRule,
    IngressServiceBackend, IngressSpec, IngressTLS, ServiceBackendPort,
};

use super::labels::Component;
use super::web::PORT_NAME;
use crate::crd::Hollo;

/// `None` when the Ingress is disabled (the reconciler then deletes a leftover one).
pub fn ingress(hollo: &Hollo) -> Option<Ingress> {
    let spec = &hollo.spec.web.ingress;
    if !spec.enabled {
        return None;
    }
    let host = spec.host.clone();
    let mut meta = super::child_meta(
        hollo,
        super::web_service_name(hollo),
        Component::Web,
        &hollo.spec.version,
    );
    meta.annotations = (!spec.annotations.is_empty()).then(|| spec.annotations.clone());
    Some(Ingress {
        metadata: meta,
        spec: Some(IngressSpec {
            ingress_class_name: spec.class_name.clone(),
            rules: Some(vec![IngressRule {
                host: host.clone(),
                http: Some(HTTPIngressRuleValue {
                    paths: vec![HTTPIngressPath {
                        path: Some("/".into()),
                        path_type: "Prefix".into(),
                        backend: IngressBackend {
                            service: Some(IngressServiceBackend {
                                name: super::web_service_name(hollo),
                                port: Some(ServiceBackendPort {
                                    name: Some(PORT_NAME.into()),
                                    number: None,
                                }),
                            }),
                            resource: None,
                        },
                    }],
                }),
            }]),
            tls: spec.tls_secret_name.as_ref().map(|secret| {
                vec![IngressTLS {
                    hosts: host.map(|h| vec![h]),
                    secret_name: Some(secret.clone()),
                }]
            }),
            ..IngressSpec::default()
        }),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn disabled_by_default() {
        assert!(ingress(&testutil::hollo(testutil::spec())).is_none());
    }

    #[test]
    fn ingress_routes_the_host_to_the_web_service() {
        let mut spec = testutil::spec();
        spec.web.ingress.enabled = true;
        spec.web.ingress.host = Some("hollo.example.com".into());
        spec.web.ingress.class_name = Some("nginx".into());
        spec.web.ingress.tls_secret_name = Some("hollo-tls".into());
        let ing = ingress(&testutil::hollo(spec)).expect("enabled");
        assert_eq!(ing.metadata.name.as_deref(), Some("social-web"));
        let s = ing.spec.expect("spec");
        assert_eq!(s.ingress_class_name.as_deref(), Some("nginx"));
        let rule = &s.rules.expect("rules")[0];
        assert_eq!(rule.host.as_deref(), Some("hollo.example.com"));
        let backend = rule
            .http
            .as_ref()
            .and_then(|h| h.paths[0].backend.service.clone())
            .expect("svc");
        assert_eq!(backend.name, "social-web");
        let tls = &s.tls.expect("tls")[0];
        assert_eq!(tls.secret_name.as_deref(), Some("hollo-tls"));
        assert_eq!(tls.hosts, Some(vec!["hollo.example.com".to_string()]));
    }
}
