//! Opt-in NetworkPolicies (R-OP-OPS): `<name>-web` for the HTTP pods (web, or all) and
//! `<name>-worker` for the workers and the Jobs (migrations, version probes, cleanups). Defence in depth
//! behind the runtime's fetch guard: pods reach DNS, the database, named object storage and the
//! public internet, never private, shared, loopback or link-local addresses (where cloud
//! metadata services live) unless a peer names them.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::labels::{self, Component};
use super::migration::PROBE_COMPONENT;
use super::profile::{HEALTH_PORT_NAME, HTTP_PORT_NAME};
use crate::crd::{Hollo, Mode};

/// IPv4 ranges no pod of a Hollo may reach through the "public internet" rule: RFC 1918,
/// shared address space (RFC 6598), loopback, link-local (169.254.169.254 metadata), "this
/// network", benchmarking, multicast and reserved.
pub const PRIVATE_V4: [&str; 10] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
];
/// The same for IPv6: loopback, unique-local (fd00:ec2::254, AWS' metadata, is one),
/// link-local, multicast. (Not `::ffff:0:0/96`: the apiserver reads IPv4-mapped ranges as IPv4
/// and refuses them as "not a strict subset" of `::/0`.)
pub const PRIVATE_V6: [&str; 4] = ["::1/128", "fc00::/7", "fe80::/10", "ff00::/8"];

/// The label CloudNativePG puts on a cluster's pods.
const CNPG_CLUSTER_LABEL: &str = "cnpg.io/cluster";

/// Both policies, or none when `networkPolicy.enabled` is off (the reconciler then deletes
/// leftovers).
pub fn network_policies(hollo: &Hollo) -> Vec<NetworkPolicy> {
    let np = &hollo.spec.network_policy;
    if !np.enabled {
        return vec![];
    }
    let http = match hollo.spec.mode {
        Mode::Split => Component::Web,
        Mode::All => Component::All,
    };
    let web_ingress = vec![
        from_namespaces(&np.ingress_namespaces, HTTP_PORT_NAME),
        from_namespaces(&np.metrics_namespaces, HEALTH_PORT_NAME),
    ];
    let worker_ingress = vec![from_namespaces(&np.metrics_namespaces, HEALTH_PORT_NAME)];
    vec![
        policy(hollo, Component::Web, &[http.as_str()], web_ingress),
        policy(
            hollo,
            Component::Worker,
            &[
                Component::Worker.as_str(),
                Component::Migration.as_str(),
                PROBE_COMPONENT,
                super::maintenance::CLEANUP_COMPONENT,
                super::admin::COMPONENT,
            ],
            worker_ingress,
        ),
    ]
    .into_iter()
    .map(|mut p| {
        if let Some(s) = p.spec.as_mut() {
            // Rules allowing nobody are dropped: an empty `from` would allow everybody.
            if let Some(i) = s.ingress.as_mut() {
                i.retain(|r| r.from.as_ref().is_some_and(|f| !f.is_empty()));
            }
        }
        p
    })
    .collect()
}

fn name_selector(namespaces: &[String]) -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: "kubernetes.io/metadata.name".into(),
            operator: "In".into(),
            values: Some(namespaces.to_vec()),
        }]),
        match_labels: None,
    }
}

fn from_namespaces(namespaces: &[String], port: &str) -> NetworkPolicyIngressRule {
    NetworkPolicyIngressRule {
        from: Some(if namespaces.is_empty() {
            vec![]
        } else {
            vec![NetworkPolicyPeer {
                namespace_selector: Some(name_selector(namespaces)),
                ..NetworkPolicyPeer::default()
            }]
        }),
        ports: Some(vec![NetworkPolicyPort {
            port: Some(IntOrString::String(port.into())),
            protocol: Some("TCP".into()),
            end_port: None,
        }]),
    }
}

fn port(number: i32, protocol: &str) -> NetworkPolicyPort {
    NetworkPolicyPort {
        port: Some(IntOrString::Int(number)),
        protocol: Some(protocol.into()),
        end_port: None,
    }
}

fn ip_block(cidr: &str, except: &[&str]) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.into(),
            except: (!except.is_empty()).then(|| except.iter().map(|s| s.to_string()).collect()),
        }),
        ..NetworkPolicyPeer::default()
    }
}

/// Every pod's egress: DNS (any destination: cluster DNS and node-local caches differ per
/// cluster), the database, object storage, the public internet, the user's extras.
pub fn egress(hollo: &Hollo) -> Vec<NetworkPolicyEgressRule> {
    let np = &hollo.spec.network_policy;
    let mut rules = vec![NetworkPolicyEgressRule {
        to: None,
        ports: Some(vec![port(53, "UDP"), port(53, "TCP")]),
    }];
    let mut database = np.database.clone();
    if let Some(cnpg) = &hollo.spec.database.cnpg {
        database.push(NetworkPolicyPeer {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    CNPG_CLUSTER_LABEL.to_string(),
                    cnpg.cluster.clone(),
                )])),
                match_expressions: None,
            }),
            ..NetworkPolicyPeer::default()
        });
    }
    if !database.is_empty() {
        rules.push(NetworkPolicyEgressRule {
            to: Some(database),
            ports: Some(vec![port(np.database_port, "TCP")]),
        });
    }
    if !np.object_storage.is_empty() {
        rules.push(NetworkPolicyEgressRule {
            to: Some(np.object_storage.clone()),
            ports: None,
        });
    }
    rules.push(NetworkPolicyEgressRule {
        to: Some(vec![
            ip_block("0.0.0.0/0", &PRIVATE_V4),
            ip_block("::/0", &PRIVATE_V6),
        ]),
        ports: None,
    });
    rules.extend(np.extra_egress.iter().cloned());
    rules
}

fn policy(
    hollo: &Hollo,
    named: Component,
    components: &[&str],
    ingress: Vec<NetworkPolicyIngressRule>,
) -> NetworkPolicy {
    let name = format!("{}-{}", hollo.name_any(), named.as_str());
    NetworkPolicy {
        metadata: super::child_meta(hollo, name, named, &hollo.spec.version),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([
                    (labels::NAME.to_string(), labels::APP.to_string()),
                    (labels::INSTANCE.to_string(), hollo.name_any()),
                ])),
                match_expressions: Some(vec![LabelSelectorRequirement {
                    key: labels::COMPONENT.into(),
                    operator: "In".into(),
                    values: Some(components.iter().map(|c| c.to_string()).collect()),
                }]),
            }),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            egress: Some(egress(hollo)),
        }),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crd::CnpgSpec;
    use crate::testutil;

    fn enabled() -> crate::crd::HolloSpec {
        let mut spec = testutil::spec();
        spec.network_policy.enabled = true;
        spec.network_policy.ingress_namespaces = vec!["ingress-nginx".into()];
        spec.network_policy.database = vec![ip_block("10.0.5.10/32", &[])];
        spec
    }

    #[test]
    fn off_by_default() {
        assert!(network_policies(&testutil::hollo(testutil::spec())).is_empty());
    }

    #[test]
    fn web_reachable_from_the_ingress_namespace_workers_from_nobody() {
        let ps = network_policies(&testutil::hollo(enabled()));
        let names: Vec<_> = ps.iter().map(|p| p.name_any()).collect();
        assert_eq!(names, ["social-web", "social-worker"]);
        let web = serde_json::to_value(&ps[0].spec).expect("json");
        assert_eq!(
            web["podSelector"]["matchExpressions"],
            json!([{"key": "app.kubernetes.io/component", "operator": "In", "values": ["web"]}])
        );
        assert_eq!(
            web["ingress"],
            json!([{
                "from": [{"namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In",
                    "values": ["ingress-nginx"]}]}}],
                "ports": [{"port": "http", "protocol": "TCP"}],
            }]),
            "no metrics namespace: no rule for the health port (an empty `from` would allow all)"
        );
        let worker = serde_json::to_value(&ps[1].spec).expect("json");
        assert_eq!(worker["ingress"], json!([]), "workers take no ingress");
        assert_eq!(
            worker["podSelector"]["matchExpressions"][0]["values"],
            json!([
                "worker",
                "migration",
                "version-probe",
                "cleanup",
                "admin-account"
            ])
        );
        assert_eq!(worker["policyTypes"], json!(["Ingress", "Egress"]));
    }

    #[test]
    fn metrics_namespaces_reach_the_health_port_of_every_pod() {
        let mut spec = enabled();
        spec.network_policy.metrics_namespaces = vec!["monitoring".into()];
        let ps = network_policies(&testutil::hollo(spec));
        for p in &ps {
            let v = serde_json::to_value(&p.spec).expect("json");
            let rules = v["ingress"].as_array().expect("rules");
            assert!(rules.iter().any(|r| r["ports"][0]["port"] == "health"
                && r["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
                    == json!(["monitoring"])));
        }
    }

    #[test]
    fn egress_dns_database_and_public_internet_without_private_ranges() {
        let ps = network_policies(&testutil::hollo(enabled()));
        let e = serde_json::to_value(&ps[1].spec).expect("json")["egress"].clone();
        assert_eq!(
            e[0],
            json!({"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}]})
        );
        assert_eq!(
            e[1],
            json!({"to": [{"ipBlock": {"cidr": "10.0.5.10/32"}}],
                   "ports": [{"port": 5432, "protocol": "TCP"}]})
        );
        let public = &e[2]["to"];
        assert_eq!(public[0]["ipBlock"]["cidr"], "0.0.0.0/0");
        let except = public[0]["ipBlock"]["except"].as_array().expect("except");
        for private in [
            "10.0.0.0/8",
            "172.16.0.0/12",
            "192.168.0.0/16",
            "169.254.0.0/16",
        ] {
            assert!(except.contains(&json!(private)), "{private}");
        }
        assert_eq!(public[1]["ipBlock"]["cidr"], "::/0");
        assert!(e[2]["ports"].is_null(), "any port on the public internet");
    }

    #[test]
    fn a_cnpg_cluster_is_reached_by_its_pod_label() {
        let mut spec = enabled();
        spec.network_policy.database = vec![];
        spec.database.cnpg = Some(CnpgSpec {
            cluster: "pg".into(),
            pooler: None,
        });
        let e = egress(&testutil::hollo(spec));
        let v = serde_json::to_value(&e[1]).expect("json");
        assert_eq!(
            v["to"],
            json!([{"podSelector": {"matchLabels": {"cnpg.io/cluster": "pg"}}}])
        );
    }

    #[test]
    fn all_mode_selects_the_all_pods() {
        let mut spec = enabled();
        spec.mode = Mode::All;
        let ps = network_policies(&testutil::hollo(spec));
        let v = serde_json::to_value(&ps[0].spec).expect("json");
        assert_eq!(
            v["podSelector"]["matchExpressions"][0]["values"],
            json!(["all"])
        );
    }
}
