use super::*;
use serde_json::Value;

#[test]
fn defaults_match_the_contract() {
    let spec: HolloSpec = serde_json::from_value(serde_json::json!({
        "version": "0.1.0",
        "database": {"urlSecretRef": {"name": "hollo-db", "key": "url"}},
        "secretKeyRef": {"name": "hollo-secret", "key": "key"},
    }))
    .expect("minimal spec parses");
    assert_eq!(spec.mode, Mode::Split);
    assert_eq!(spec.environment, "production");
    assert_eq!(spec.database.max_connections, 100);
    assert_eq!(spec.web.replicas, 2);
    assert_eq!(spec.web.port, 3000);
    assert_eq!(spec.web.health_port, 9090);
    assert_eq!(spec.web.pool_max, 20);
    assert_eq!(spec.web.pre_stop_seconds, 5);
    assert_eq!(spec.worker.replicas, 2);
    assert_eq!(spec.worker.drain_seconds, 30);
    assert_eq!(spec.worker.health_port, 9090);
    assert_eq!(
        spec.worker.concurrency,
        ConcurrencySpec {
            activities: 10,
            tasks: 4,
            replies: 2,
            deliveries: 64
        }
    );
    assert!(!spec.worker.autoscaling.enabled);
    assert_eq!(spec.worker.autoscaling.target_cpu_utilization, Some(70));
    assert_eq!(spec.migrations.command, None);
    assert_eq!(
        crate::resources::profile::migration_command(&spec),
        ["hollo", "migrate"]
    );
    assert_eq!(spec.image.profile, ImageProfile::HolloRs);
    assert_eq!(spec.migrations.active_deadline_seconds, 600);
    assert_eq!(spec.migrations.backoff_limit, 3);
    assert_eq!(spec.upgrade_strategy, UpgradeStrategy::Recreate);
    assert_eq!(spec.image.pull_policy, PullPolicy::IfNotPresent);
    assert_eq!(spec.image_ref(), "ghcr.io/hollo-social/hollo:0.1.0");
}

#[test]
fn image_tag_overrides_version() {
    let mut spec = crate::testutil::spec();
    spec.image.tag = Some("0.1.0-build7".into());
    assert_eq!(spec.image_ref(), "ghcr.io/hollo-social/hollo:0.1.0-build7");
}

#[test]
fn public_url_defaults_to_ingress_host() {
    let mut spec = crate::testutil::spec();
    assert_eq!(spec.public_url(), None);
    spec.web.ingress.enabled = true;
    spec.web.ingress.host = Some("hollo.example.com".into());
    assert_eq!(
        spec.public_url().as_deref(),
        Some("https://hollo.example.com")
    );
    spec.public_url = Some("https://social.example".into());
    assert_eq!(spec.public_url().as_deref(), Some("https://social.example"));
}

#[test]
fn crd_has_status_subresource_and_printer_columns() {
    let crd = Hollo::crd();
    assert_eq!(crd.metadata.name.as_deref(), Some("hollos.hollo.social"));
    assert_eq!(crd.spec.scope, "Namespaced");
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert!(
        v.subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    );
    let cols = |wide: bool| -> Vec<&str> {
        v.additional_printer_columns
            .iter()
            .flatten()
            .filter(|c| (c.priority.unwrap_or(0) > 0) == wide)
            .map(|c| c.name.as_str())
            .collect()
    };
    assert_eq!(
        cols(false),
        ["Phase", "Version", "Web Ready", "Workers Ready", "Age"]
    );
    // `-o wide` only (R-OP-OPS).
    assert_eq!(
        cols(true),
        [
            "Target",
            "Web",
            "Workers",
            "Degraded",
            "Budget",
            "Migrations Failed"
        ]
    );
}

/// The committed `crds/hollo.social_hollos.yaml` must be what the binary prints.
/// Regenerate with: `cargo run -q -p hollo-operator -- crd > crds/hollo.social_hollos.yaml`
#[test]
fn committed_crd_is_up_to_date() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../crds/hollo.social_hollos.yaml"
    );
    let committed = std::fs::read_to_string(path).expect("crds/hollo.social_hollos.yaml exists");
    let generated = crd_yaml().expect("CRD serializes");
    assert!(
        committed == generated,
        "crds/hollo.social_hollos.yaml is stale; regenerate with \
         `cargo run -q -p hollo-operator -- crd > crds/hollo.social_hollos.yaml`"
    );
}

/// The operator chart carries the CRD as a template (Helm upgrades templates, never `crds/`):
/// it must be the generated one, behind `crds.install`, kept on uninstall; and the chart must
/// have no `crds/` of its own, or `helm install` would create the CRD outside the release and
/// the template would then clash with it.
#[test]
fn chart_template_is_the_generated_crd() {
    let top = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let template = std::fs::read_to_string(format!("{top}/{CHART_TEMPLATE_PATH}"))
        .expect("the chart's CRD template exists");
    assert!(
        template == chart_template().expect("CRD serializes"),
        "{CHART_TEMPLATE_PATH} is stale; regenerate with \
         `cargo run -q -p hollo-operator -- crd --chart-template > {CHART_TEMPLATE_PATH}`"
    );
    // What Helm renders with the default values: crds/ plus the keep annotation.
    let values: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(format!("{top}/charts/hollo-operator/values.yaml")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        values["crds"]["install"].as_bool(),
        Some(true),
        "crds.install"
    );
    let body = template
        .split_once("{{- if .Values.crds.install }}\n")
        .expect("behind crds.install")
        .1
        .strip_suffix("{{- end }}\n")
        .expect("ends the if");
    assert!(!body.contains("{{"), "no other template action in the CRD");
    let mut rendered: serde_yaml::Value = serde_yaml::from_str(body).unwrap();
    let annotations = rendered["metadata"]
        .as_mapping_mut()
        .unwrap()
        .remove("annotations")
        .expect("annotations");
    assert_eq!(annotations[HELM_KEEP.0].as_str(), Some(HELM_KEEP.1));
    let committed: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(format!("{top}/crds/hollo.social_hollos.yaml")).unwrap(),
    )
    .unwrap();
    assert!(
        rendered == committed,
        "the template is crds/ plus the annotation"
    );
    assert!(
        !std::path::Path::new(&format!("{top}/charts/hollo-operator/crds")).exists(),
        "charts/hollo-operator/crds/: Helm would install it outside the release"
    );
}

/// `kubectl explain hollo.spec…` answers for every field: the root, and every property below
/// it (Kubernetes types included) has a description.
#[test]
fn every_field_is_described() {
    fn undescribed(schema: &Value, path: &str, out: &mut Vec<String>) {
        for (name, s) in schema["properties"].as_object().into_iter().flatten() {
            let here = format!("{path}.{name}");
            if s["description"]
                .as_str()
                .is_none_or(|d| d.trim().is_empty())
            {
                out.push(here.clone());
            }
            undescribed(s, &here, out);
        }
        if schema["items"].is_object() {
            undescribed(&schema["items"], &format!("{path}[]"), out);
        }
        if schema["additionalProperties"].is_object() {
            undescribed(&schema["additionalProperties"], &format!("{path}{{}}"), out);
        }
    }
    let crd = serde_json::to_value(Hollo::crd()).unwrap();
    let root = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
    let top = root["description"].as_str().unwrap_or_default();
    assert!(
        top.starts_with("A Hollo ") && !top.contains("Auto-generated"),
        "{top}"
    );
    let mut missing = vec![];
    undescribed(root, "", &mut missing);
    assert!(missing.is_empty(), "no description: {missing:?}");
    let mut count = 0;
    fn count_properties(schema: &Value, count: &mut usize) {
        for (_, s) in schema["properties"].as_object().into_iter().flatten() {
            *count += 1;
            count_properties(s, count);
        }
        if schema["items"].is_object() {
            count_properties(&schema["items"], count);
        }
    }
    count_properties(root, &mut count);
    assert!(count > 500, "the walk saw {count} properties");
}

/// Conditions merge by `type` (a server-side apply of one condition keeps the others), and
/// `kubectl get hollo` also answers as part of the category `hollo`.
#[test]
fn conditions_are_a_map_and_the_kind_has_a_category() {
    let crd = Hollo::crd();
    assert_eq!(crd.spec.names.categories, Some(vec!["hollo".to_string()]));
    let crd = serde_json::to_value(crd).unwrap();
    let conditions = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
        ["properties"]["conditions"];
    assert_eq!(conditions["x-kubernetes-list-type"], "map");
    assert_eq!(
        conditions["x-kubernetes-list-map-keys"],
        serde_json::json!(["type"])
    );
    let required = conditions["items"]["required"].as_array().unwrap();
    assert!(
        required.contains(&"type".into()),
        "a map key must be required"
    );
}

/// Chart.yaml's appVersion (the operator image tag by default) and version follow the
/// workspace version.
#[test]
fn chart_versions_follow_the_workspace() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../charts/hollo-operator/Chart.yaml"
    );
    let chart: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(path).expect("Chart.yaml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(chart["appVersion"].as_str(), Some(version), "appVersion");
    assert_eq!(chart["version"].as_str(), Some(version), "version");
}

/// The admission rules, evaluated on the *generated* schema with Kubernetes' CEL library
/// (defaults applied first, as the apiserver does). A real-apiserver check of the same rules
/// lives in the e2e suite.
mod cel {
    use super::*;
    use serde_json::{Value, json};

    fn schema() -> Value {
        let crd = Hollo::crd();
        let s = crd.spec.versions[0]
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .expect("schema");
        serde_json::to_value(s).expect("schema serializes")
    }

    fn object(patch: Value) -> Value {
        let mut spec = json!({
            "version": "0.1.0",
            "database": {"urlSecretRef": {"name": "hollo-db", "key": "url"}},
            "secretKeyRef": {"name": "hollo-secret", "key": "key"},
            "storage": {"disk": "fs", "fs": {"claimName": "media"}},
        });
        merge(&mut spec, patch);
        json!({"apiVersion": "hollo.social/v1alpha1", "kind": "Hollo",
               "metadata": {"name": "social"}, "spec": spec})
    }

    fn merge(into: &mut Value, patch: Value) {
        match (into, patch) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in b {
                    // null deletes, as in a JSON merge patch.
                    if v.is_null() {
                        a.remove(&k);
                    } else {
                        merge(a.entry(k).or_insert(Value::Null), v);
                    }
                }
            }
            (slot, v) => *slot = v,
        }
    }

    /// The messages of the rules the object breaks.
    fn violations(patch: Value) -> Vec<String> {
        match kube_cel::validate(&schema(), &object(patch), None) {
            Ok(()) => vec![],
            Err(errs) => errs.iter().map(|e| e.message.clone()).collect(),
        }
    }

    fn rejects(patch: Value, message: &str) {
        let v = violations(patch);
        assert!(
            v.iter().any(|m| m.contains(message)),
            "expected {message:?}, got {v:?}"
        );
    }

    /// The shipped example must pass admission.
    #[test]
    fn the_example_is_valid() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hollo.yaml");
        let text = std::fs::read_to_string(path).expect("examples/hollo.yaml exists");
        let obj: Value = serde_yaml::from_str(&text).expect("example parses");
        assert_eq!(
            kube_cel::validate(&schema(), &obj, None).map_err(|e| e.to_string()),
            Ok(())
        );
        let h: Hollo = serde_json::from_value(obj).expect("example deserializes");
        assert!(crate::budget::Budget::for_spec(&h.spec).fits());
    }

    /// The upstream example (and the CloudNativePG one) must pass admission too.
    #[test]
    fn the_upstream_and_cnpg_examples_are_valid() {
        for file in ["hollo-upstream.yaml", "hollo-cnpg.yaml"] {
            let path = format!("{}/../examples/{file}", env!("CARGO_MANIFEST_DIR"));
            let text = std::fs::read_to_string(&path).expect("example exists");
            let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
                .map(|d| Value::deserialize(d).expect("example parses"))
                .collect();
            let obj = docs
                .iter()
                .find(|o| o["kind"] == "Hollo")
                .cloned()
                .expect("a Hollo in the example");
            // The operator checks the budget against the Cluster's max_connections.
            let cluster_max = docs.iter().find(|o| o["kind"] == "Cluster").and_then(|c| {
                c["spec"]["postgresql"]["parameters"]["max_connections"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
            });
            assert_eq!(
                kube_cel::validate(&schema(), &obj, None).map_err(|e| e.to_string()),
                Ok(()),
                "{file}"
            );
            let mut h: Hollo = serde_json::from_value(obj).expect("example deserializes");
            if let Some(n) = cluster_max {
                h.spec.database.max_connections = n;
            }
            assert!(crate::budget::Budget::for_spec(&h.spec).fits(), "{file}");
        }
    }

    #[test]
    fn profiles_and_database_sources_are_checked() {
        rejects(
            json!({"image": {"profile": "mastodon"}}),
            "image.profile must be hollo-rs or upstream",
        );
        let upstream = json!({"image": {"profile": "upstream"},
                              "storage": {"urlBase": "https://h.example/assets"}});
        assert_eq!(violations(upstream.clone()), Vec::<String>::new());
        rejects(
            json!({"image": {"profile": "upstream"}}),
            "refuses to start without STORAGE_URL_BASE",
        );
        assert_eq!(
            violations(json!({"image": {"profile": "upstream"},
                              "env": [{"name": "STORAGE_URL_BASE", "value": "https://m.example"}]})),
            Vec::<String>::new(),
            "STORAGE_URL_BASE given in env counts"
        );
        for (patch, message) in [
            (
                json!({"adminTokenRef": {"name": "a", "key": "t"}}),
                "upstream Hollo has no admin token",
            ),
            (
                json!({"database": {"directUrlSecretRef": {"name": "d", "key": "u"}}}),
                "upstream Hollo reads only DATABASE_URL",
            ),
            (
                json!({"publicUrl": "https://h.example"}),
                "remove publicUrl",
            ),
            (
                json!({"migrations": {"command": ["hollo", "migrate"]}}),
                "migrates with `pnpm run migrate`",
            ),
        ] {
            merge_rejects(upstream.clone(), patch, message);
        }
        // The same settings are fine for hollo-rs.
        assert_eq!(
            violations(json!({"adminTokenRef": {"name": "a", "key": "t"},
                              "publicUrl": "https://h.example"})),
            Vec::<String>::new()
        );
        let cnpg = json!({"database": {"urlSecretRef": null, "cnpg": {"cluster": "pg", "pooler": "pg-pooler"}}});
        assert_eq!(violations(cnpg), Vec::<String>::new());
        rejects(
            json!({"database": {"cnpg": {"cluster": "pg"}}}),
            "set exactly one of urlSecretRef and cnpg",
        );
        rejects(
            json!({"database": {"urlSecretRef": null}}),
            "set exactly one of urlSecretRef and cnpg",
        );
        rejects(
            json!({"database": {"urlSecretRef": null, "cnpg": {"pooler": "pg-pooler"}}}),
            "a pooler alone is not enough",
        );
        rejects(
            json!({"database": {"urlSecretRef": null, "cnpg": {"cluster": "pg"},
                                "directUrlSecretRef": {"name": "d", "key": "u"}}}),
            "remove database.directUrlSecretRef",
        );
    }

    /// Issue 63 item 7: `spec.admin` and a generated `SECRET_KEY` pass admission; a bad user
    /// name, a missing password reference, or the upstream image (no `hollo account create`)
    /// do not.
    #[test]
    fn the_declared_first_account_and_a_generated_secret_key_are_checked() {
        let admin = |username: &str| {
            json!({"admin": {"username": username,
                             "passwordSecretRef": {"name": "hollo-admin", "key": "password"}}})
        };
        assert_eq!(violations(admin("owner_1")), Vec::<String>::new());
        assert_eq!(
            violations(json!({"secretKeyRef": null})),
            Vec::<String>::new(),
            "secretKeyRef may be left out"
        );
        for bad in ["", "has-dash", "with space", &"x".repeat(31), "café"] {
            rejects(
                admin(bad),
                "admin.username must be 1-30 letters, digits or underscores",
            );
        }
        let schema_errors = |patch: Value| {
            let obj = object(patch);
            let h: Result<Hollo, _> = serde_json::from_value(obj);
            h.is_err()
        };
        assert!(
            schema_errors(json!({"admin": {"username": "owner"}})),
            "passwordSecretRef is required"
        );
        let upstream = json!({"image": {"profile": "upstream"},
                              "storage": {"urlBase": "https://h.example/assets"}});
        merge_rejects(upstream, admin("owner"), "remove admin");
    }

    fn merge_rejects(base: Value, patch: Value, message: &str) {
        let mut all = base;
        merge(&mut all, patch);
        rejects(all, message);
    }

    #[test]
    fn compiles_every_rule() {
        let compiled = kube_cel::compile_schema(&schema());
        assert!(
            !compiled.has_errors(),
            "{:?}",
            compiled.compilation_errors()
        );
    }

    #[test]
    fn a_minimal_and_a_full_spec_are_accepted() {
        assert_eq!(violations(json!({})), Vec::<String>::new());
        let full = json!({
            "mode": "split",
            "web": {"replicas": 3, "ingress": {"enabled": true, "host": "h.example"}},
            "worker": {"autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 6,
                       "keda": {"enabled": true}}},
        });
        assert_eq!(violations(full), Vec::<String>::new());
    }

    #[test]
    fn web_autoscaling_and_behavior_are_admitted_and_checked() {
        let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 600,
                              "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}});
        let ok = json!({"web": {"autoscaling": {"enabled": true, "minReplicas": 2,
                                                "maxReplicas": 3, "behavior": behavior}},
                        "worker": {"autoscaling": {"behavior": behavior}},
                        "database": {"maxConnections": 200}});
        assert_eq!(violations(ok.clone()), Vec::<String>::new());
        let h: Hollo = serde_json::from_value(object(ok)).expect("deserializes");
        assert!(h.spec.web_autoscaled());
        assert_eq!(h.spec.web.autoscaling.target_cpu_utilization, 70, "default");
        assert!(h.spec.worker.autoscaling.behavior.is_some());
        rejects(
            json!({"web": {"autoscaling": {"minReplicas": 5, "maxReplicas": 2}}}),
            "web.autoscaling.minReplicas must be <= maxReplicas",
        );
        rejects(
            json!({"web": {"autoscaling": {"minReplicas": 0}}}),
            "web.autoscaling.minReplicas must be at least 1",
        );
        rejects(
            json!({"web": {"autoscaling": {"targetCPUUtilization": 0}}}),
            "web.autoscaling.targetCPUUtilization must be 1-100",
        );
    }

    #[test]
    fn scheduling_labels_and_volumes_are_admitted_and_checked() {
        let ok = json!({
            "web": {"scheduling": {"priorityClassName": "hollo-web",
                    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                    "whenUnsatisfiable": "DoNotSchedule"}]}},
            "worker": {"scheduling": {"nodeSelector": {"pool": "batch"}, "tolerations": []}},
            "migrations": {"resources": {"requests": {"cpu": "100m"}},
                           "scheduling": {"nodeSelector": {"pool": "general"}}},
            "pod": {"labels": {"team": "fedi"},
                    "volumes": [{"name": "ca", "secret": {"secretName": "corp-ca"}}],
                    "volumeMounts": [{"name": "ca", "mountPath": "/etc/ca"}]},
        });
        assert_eq!(violations(ok.clone()), Vec::<String>::new());
        let h: Hollo = serde_json::from_value(object(ok)).expect("deserializes");
        assert_eq!(
            h.spec.worker.scheduling.tolerations,
            Some(vec![]),
            "[] is kept"
        );
        assert_eq!(h.spec.web.scheduling.tolerations, None);
        rejects(
            json!({"pod": {"labels": {"app.kubernetes.io/component": "x"}}}),
            "pod.labels must not set app.kubernetes.io/ labels",
        );
        rejects(
            json!({"pod": {"volumes": [{"name": "tmp", "emptyDir": {}}]}}),
            "the names tmp, storage and ca-bundle are the operator's",
        );
    }

    #[test]
    fn nonsense_is_rejected_with_clear_messages() {
        rejects(
            json!({"web": {"replicas": -1}}),
            "web.replicas must be >= 0",
        );
        rejects(
            json!({"worker": {"replicas": -2}}),
            "worker.replicas must be >= 0",
        );
        rejects(
            json!({"web": {"poolMax": 0}}),
            "web.poolMax must be at least 1",
        );
        rejects(
            json!({"worker": {"drainSeconds": 3601}}),
            "worker.drainSeconds must be 0-3600",
        );
        rejects(
            json!({"web": {"drainSeconds": 4000}}),
            "web.drainSeconds must be 0-3600",
        );
        rejects(
            json!({"worker": {"autoscaling": {"enabled": true, "minReplicas": 5, "maxReplicas": 2}}}),
            "minReplicas must be <= maxReplicas",
        );
        rejects(
            json!({"worker": {"autoscaling": {"keda": {"enabled": true}}}}),
            "keda.enabled requires worker.autoscaling.enabled",
        );
        rejects(
            json!({"worker": {"concurrency": {"tasks": 2, "replies": 3}}}),
            "replies must not exceed",
        );
        rejects(
            json!({"worker": {"concurrency": {"deliveries": 0}}}),
            "worker.concurrency values must be at least 1",
        );
        rejects(
            json!({"migrations": {"command": []}}),
            "migrations.command must not be empty",
        );
        rejects(json!({"version": ""}), "version must be 1-128 characters");
        rejects(
            json!({"database": {"maxConnections": 0}}),
            "maxConnections must be at least 1",
        );
        rejects(
            json!({"web": {"disruptionBudget": {"maxUnavailable": 0}}}),
            "blocks node drains forever",
        );
        rejects(
            json!({"web": {"ingress": {"enabled": true}}}),
            "requires web.ingress.host",
        );
        rejects(
            json!({"storage": {"disk": "s3", "fs": null}}),
            "storage.disk=s3 requires storage.s3",
        );
    }

    /// R-OP-OPS: a NetworkPolicy needs the ingress namespaces and the database.
    #[test]
    fn a_network_policy_needs_its_ingress_and_database() {
        rejects(
            json!({"networkPolicy": {"enabled": true,
                "database": [{"ipBlock": {"cidr": "10.0.5.10/32"}}]}}),
            "networkPolicy.enabled requires ingressNamespaces",
        );
        rejects(
            json!({"networkPolicy": {"enabled": true, "ingressNamespaces": ["ingress-nginx"]}}),
            "networkPolicy.enabled needs to know where the database is",
        );
        rejects(
            json!({"networkPolicy": {"databasePort": 0}}),
            "networkPolicy.databasePort must be 1-65535",
        );
        let ok = json!({"networkPolicy": {"enabled": true,
            "ingressNamespaces": ["ingress-nginx"], "metricsNamespaces": ["monitoring"],
            "database": [{"ipBlock": {"cidr": "10.0.5.10/32"}}]}});
        assert_eq!(violations(ok), Vec::<String>::new());
        let cnpg = json!({"database": {"urlSecretRef": null, "cnpg": {"cluster": "pg"}},
            "networkPolicy": {"enabled": true, "ingressNamespaces": ["gateway"]}});
        assert_eq!(violations(cnpg), Vec::<String>::new());
    }

    /// R-OP-OPS: a CA bundle comes from exactly one place.
    #[test]
    fn a_ca_bundle_has_one_source() {
        rejects(
            json!({"pod": {"caBundle": {"key": "ca.crt"}}}),
            "pod.caBundle needs exactly one of configMap and secret",
        );
        rejects(
            json!({"pod": {"caBundle": {"configMap": "a", "secret": "b"}}}),
            "pod.caBundle needs exactly one of configMap and secret",
        );
        rejects(
            json!({"pod": {"volumes": [{"name": "ca-bundle", "emptyDir": {}}]}}),
            "the names tmp, storage and ca-bundle are the operator's",
        );
        assert_eq!(
            violations(json!({"pod": {"caBundle": {"secret": "corp-ca"}}})),
            Vec::<String>::new()
        );
    }

    /// R-OP-OPS: cleanups need sane numbers and the hollo-rs image.
    #[test]
    fn maintenance_rules() {
        rejects(
            json!({"maintenance": {"remotePosts": {"enabled": true, "olderThanDays": 0}}}),
            "maintenance.remotePosts.olderThanDays must be 1-36500",
        );
        rejects(
            json!({"maintenance": {"media": {"enabled": true, "schedule": ""}}}),
            "maintenance.media.schedule must be a cron schedule",
        );
        rejects(
            json!({"image": {"profile": "upstream"}, "storage": {"urlBase": "https://x/assets"},
                   "maintenance": {"media": {"enabled": true}}}),
            "spec.maintenance is for the hollo-rs image",
        );
        let ok = json!({"maintenance": {"remotePosts": {"enabled": true, "olderThanDays": 14},
            "media": {"enabled": true, "schedule": "0 4 * * *"}, "timeZone": "Etc/UTC"}});
        assert_eq!(violations(ok), Vec::<String>::new());
    }

    /// R-OP-OPS: a route needs a Gateway to attach to.
    #[test]
    fn an_http_route_needs_a_parent() {
        rejects(
            json!({"web": {"httpRoute": {"enabled": true}}}),
            "web.httpRoute.enabled requires at least one parentRefs entry",
        );
        let ok = json!({"web": {"httpRoute": {"enabled": true,
            "parentRefs": [{"name": "public", "namespace": "gateway"}],
            "hostnames": ["hollo.example.com"]}}});
        assert_eq!(violations(ok), Vec::<String>::new());
    }

    /// `upgrade.backup`'s CloudNativePG fields: a plugin configuration only with `method:
    /// plugin`, and every field deserializes as CloudNativePG spells it.
    #[test]
    fn backup_methods_are_admitted_and_checked() {
        let cnpg = json!({"database": {"urlSecretRef": null, "cnpg": {"cluster": "pg"}}});
        let with = |backup: Value| {
            let mut spec = cnpg.clone();
            merge(&mut spec, json!({"upgrade": {"backup": backup}}));
            spec
        };
        let plugin = with(json!({"enabled": true, "method": "plugin",
            "pluginConfiguration": {"name": "barman-cloud.cloudnative-pg.io",
                                    "parameters": {"barmanObjectName": "store"}},
            "online": true, "target": "prefer-standby"}));
        assert_eq!(violations(plugin.clone()), Vec::<String>::new());
        let h: Hollo = serde_json::from_value(object(plugin)).expect("deserializes");
        let b = &h.spec.upgrade.backup;
        assert_eq!(b.method, Some(BackupMethod::Plugin));
        assert_eq!(b.target, Some(BackupTarget::PreferStandby));
        assert_eq!(
            b.plugin_configuration.as_ref().map(|p| p.name.as_str()),
            Some("barman-cloud.cloudnative-pg.io")
        );
        for method in ["volumeSnapshot", "barmanObjectStore"] {
            let ok = with(json!({"enabled": true, "method": method}));
            assert_eq!(violations(ok), Vec::<String>::new(), "{method}");
        }
        assert_eq!(
            violations(with(json!({"enabled": true}))),
            Vec::<String>::new(),
            "no method: the Cluster's"
        );
        for backup in [
            json!({"enabled": true, "pluginConfiguration": {"name": "p"}}),
            json!({"enabled": true, "method": "volumeSnapshot",
                   "pluginConfiguration": {"name": "p"}}),
        ] {
            merge_rejects(
                cnpg.clone(),
                json!({"upgrade": {"backup": backup}}),
                "upgrade.backup.pluginConfiguration is for method: plugin",
            );
        }
        merge_rejects(
            cnpg,
            json!({"upgrade": {"backup": {"method": "plugin", "pluginConfiguration": {"name": ""}}}}),
            "pluginConfiguration.name must be 1-253 characters",
        );
    }

    /// `upgrade.maintenanceWindows`: five cron fields, a positive duration in hours and
    /// minutes, a zone name; UTC by default; at most 16.
    #[test]
    fn maintenance_windows_are_admitted_and_checked() {
        let windows = |w: Value| json!({"upgrade": {"maintenanceWindows": w}});
        let ok = windows(json!([
            {"schedule": "0 2 * * 6", "duration": "2h", "timeZone": "Europe/Berlin"},
            {"schedule": "30 1 1-7 * SUN", "duration": "1h30m"},
            {"schedule": " */15 3 * * * ", "duration": "45m"},
        ]));
        assert_eq!(violations(ok.clone()), Vec::<String>::new());
        let h: Hollo = serde_json::from_value(object(ok)).expect("deserializes");
        let w = &h.spec.upgrade.maintenance_windows;
        assert_eq!(w[1].time_zone, "UTC", "the default zone");
        assert_eq!(w[0].duration, "2h");
        let one = |w: Value| windows(json!([w]));
        let schedule = "schedule must be a cron schedule of five fields";
        for bad in ["0 2 * *", "0 0 2 * * 6", "@daily", ""] {
            rejects(one(json!({"schedule": bad, "duration": "1h"})), schedule);
        }
        let duration = "duration must be hours and minutes, more than zero";
        for bad in [
            "", "0h", "0h0m", "00m", "2", "1d", "1h30m15s", "90 m", "-1h", "1234h",
        ] {
            rejects(
                one(json!({"schedule": "0 2 * * *", "duration": bad})),
                duration,
            );
        }
        rejects(
            one(json!({"schedule": "0 2 * * *", "duration": "1h", "timeZone": ""})),
            "timeZone must name an IANA time zone",
        );
        let many: Vec<Value> = (0..17)
            .map(|_| json!({"schedule": "0 2 * * *", "duration": "1h"}))
            .collect();
        rejects(windows(json!(many)), "at most 16 windows");
    }
}
