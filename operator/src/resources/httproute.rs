//! Optional Gateway API `HTTPRoute` for the web Service (R-OP-OPS). A `DynamicObject`:
//! the Gateway API's CRDs may be absent, which the reconciler tolerates like KEDA's.

use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use serde_json::json;

use super::labels::Component;
use crate::crd::Hollo;

pub fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// `None` when `web.httpRoute` is disabled (the reconciler then deletes a leftover one).
pub fn http_route(hollo: &Hollo) -> Option<DynamicObject> {
    let spec = &hollo.spec.web.http_route;
    if !spec.enabled {
        return None;
    }
    let name = super::web_service_name(hollo);
    let mut obj = DynamicObject::new(&name, &http_route_resource());
    obj.metadata = super::child_meta(hollo, name.clone(), Component::Web, &hollo.spec.version);
    obj.metadata.annotations = (!spec.annotations.is_empty()).then(|| spec.annotations.clone());
    let mut route = json!({
        "parentRefs": spec.parent_refs,
        "rules": [{
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "backendRefs": [{"name": name, "port": hollo.spec.web.port}],
        }],
    });
    if !spec.hostnames.is_empty() {
        route["hostnames"] = json!(spec.hostnames);
    }
    obj.data = json!({ "spec": route });
    Some(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::GatewayParentRef;
    use crate::testutil;

    #[test]
    fn disabled_by_default() {
        assert!(http_route(&testutil::hollo(testutil::spec())).is_none());
    }

    #[test]
    fn route_sends_every_path_of_the_hostnames_to_the_web_service() {
        let mut spec = testutil::spec();
        spec.web.http_route.enabled = true;
        spec.web.http_route.hostnames = vec!["hollo.example.com".into()];
        spec.web.http_route.parent_refs = vec![GatewayParentRef {
            name: "public".into(),
            namespace: Some("gateway".into()),
            section_name: Some("https".into()),
            ..GatewayParentRef::default()
        }];
        let r = http_route(&testutil::hollo(spec)).expect("enabled");
        assert_eq!(r.metadata.name.as_deref(), Some("social-web"));
        let t = r.types.as_ref().expect("types");
        assert_eq!(
            (t.api_version.as_str(), t.kind.as_str()),
            ("gateway.networking.k8s.io/v1", "HTTPRoute")
        );
        assert_eq!(
            &r.data["spec"],
            &json!({
                "parentRefs": [{"name": "public", "namespace": "gateway", "sectionName": "https"}],
                "hostnames": ["hollo.example.com"],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
                    "backendRefs": [{"name": "social-web", "port": 3000}],
                }],
            })
        );
        assert!(r.metadata.owner_references.is_some());
    }
}
