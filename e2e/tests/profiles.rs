//! Scenarios of issue 21 on the real apiserver (kwok nodes): the `upstream` image profile
//! (rendered pods, probes, env, migration command, KEDA query, Recreate instead of rolling,
//! the SECRET_KEY length condition), a `Hollo` on CloudNativePG (its CRDs from the pinned Go
//! module, a `Cluster`, a `Pooler` name and the application Secret made by the test), and the
//! admission rules of both. Run by `e2e/run` after scenarios 1-8.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Container, Probe, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

const V1: &str = "0.1.0";
const V2: &str = "0.2.0";
const SERVE: &str = "node --dns-result-order=ipv6first dist/bin/server.js";

fn container(d: &Deployment) -> Container {
    d.spec.template.spec.as_ref().expect("pod spec").containers[0].clone()
}

fn env_value(c: &Container, name: &str) -> Option<String> {
    c.env
        .iter()
        .flatten()
        .find(|e| e.name == name)
        .and_then(|e| e.value.clone())
}

fn env_secret(c: &Container, name: &str) -> Option<(String, String)> {
    let s = c
        .env
        .iter()
        .flatten()
        .find(|e| e.name == name)?
        .value_from
        .as_ref()?
        .secret_key_ref
        .as_ref()?;
    Some((s.name.clone(), s.key.clone()))
}

fn has_env(c: &Container, name: &str) -> bool {
    c.env.iter().flatten().any(|e| e.name == name)
}

fn probe_path(p: &Option<Probe>) -> Option<String> {
    p.as_ref()?.http_get.as_ref()?.path.clone()
}

fn upstream_hollo(patch: Value) -> Value {
    let mut h = minimal_with(json!({"spec": {"image": {"profile": "upstream"},
        "storage": {"urlBase": "https://hollo.example.test/assets"}}}));
    merge(&mut h, &patch);
    h
}

/// The container of the migration Job of 0.1.0 (its first attempt).
async fn migration_container(jobs: &Api<Job>) -> Container {
    let migrate = jobs
        .get(&format!("{HOLLO}-migrate-0-1-0"))
        .await
        .expect("migration Job");
    migrate
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod")
        .containers
        .swap_remove(0)
}

/// Replaces a Secret's data the way `kubectl create secret … --dry-run=client -o yaml |
/// kubectl apply` would.
async fn put_secret(ns: &Ns, name: &str, data: Value) {
    let secrets: Api<Secret> = ns.api();
    secrets
        .patch(
            name,
            &PatchParams::apply("e2e-user").force(),
            &Patch::Apply(json!({"apiVersion": "v1", "kind": "Secret",
                                 "metadata": {"name": name}, "stringData": data})),
        )
        .await
        .expect("apply Secret");
}

/// Pokes the Hollo (an annotation) so the operator looks at it now rather than at its next
/// periodic check of the Secrets it does not watch.
async fn poke(ns: &Ns, n: u32) {
    ns.merge_hollo(json!({"metadata": {"annotations": {"e2e/poke": n.to_string()}}}))
        .await;
}

async fn ensure_crd(ns: &Ns, name: &str, file: &str) {
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    if crds.get_opt(name).await.expect("get CRD").is_none() {
        ns.kubectl(&["apply", "--server-side", "-f", file]);
    }
    ns.wait_crd_established(name, 60).await;
}

/// Upstream profile: pods, probes, env, migration, KEDA query, Recreate, SECRET_KEY length.
#[tokio::test]
async fn upstream_profile_renders_upstreams_conventions() {
    let ns = Ns::new("upstream").await;
    // KEDA's CRD (scenario 4 installs it too; this file runs after it, alone it installs it).
    let keda = std::env::var("HOLLO_E2E_KEDA_CRD").expect("HOLLO_E2E_KEDA_CRD (e2e/run sets it)");
    ensure_crd(&ns, "scaledobjects.keda.sh", &keda).await;
    // The README's key (`openssl rand -hex 16` style, 32 characters) is too short upstream.
    ns.prepare_instance().await;
    ns.apply_hollo(&upstream_hollo(json!({"spec": {
        "upgradeStrategy": "RollingWhenCompatible",
        "worker": {"autoscaling": {"enabled": true, "minReplicas": 1, "maxReplicas": 3,
                   "keda": {"enabled": true, "targetReadyMessagesPerReplica": 40}}},
    }})))
    .await
    .expect("apply an upstream Hollo");
    let m = ns
        .wait_condition("SecretKey", "False", "SecretKeyTooShort", 60)
        .await;
    ns.log(&format!("SecretKey=False: {m}"));
    assert!(m.contains("has 32 characters"), "{m}");
    ns.wait_event("SecretKeyTooShort", "Warning", 30).await;
    put_secret(
        &ns,
        "hollo-secret",
        json!({"key": "0123456789abcdef".repeat(4)}),
    )
    .await;
    poke(&ns, 1).await;
    ns.wait_condition("SecretKey", "True", "LongEnough", 60)
        .await;
    let m = ns
        .wait_condition("UpgradeStrategy", "False", "RecreateUsed", 30)
        .await;
    assert!(m.contains("upgrades use Recreate"), "{m}");
    ns.wait_running(V1, 120).await;

    let jobs: Api<Job> = ns.api();
    let mc = &migration_container(&jobs).await;
    assert_eq!(
        mc.command.as_ref().map(|c| c.join(" ")).as_deref(),
        Some("pnpm run migrate")
    );
    assert_eq!(
        env_secret(mc, "DATABASE_URL"),
        Some(("hollo-db".into(), "url".into()))
    );

    let web = container(&ns.deployment(&format!("{HOLLO}-web")).await.expect("web"));
    assert_eq!(
        web.command.as_ref().map(|c| c.join(" ")).as_deref(),
        Some(SERVE)
    );
    assert_eq!(env_value(&web, "NODE_TYPE").as_deref(), Some("web"));
    assert_eq!(env_value(&web, "PORT").as_deref(), Some("3000"));
    assert_eq!(env_value(&web, "HOME").as_deref(), Some("/tmp"));
    assert_eq!(env_value(&web, "DRIVE_DISK").as_deref(), Some("fs"));
    assert_eq!(
        env_secret(&web, "SECRET_KEY").map(|s| s.0).as_deref(),
        Some("hollo-secret")
    );
    for hollo_rs_only in [
        "DATABASE_POOL_MAX",
        "RUNTIME_ENV",
        "LOG_FORMAT",
        "SHUTDOWN_DRAIN_SECONDS",
    ] {
        assert!(!has_env(&web, hollo_rs_only), "web has {hollo_rs_only}");
    }
    assert_eq!(
        probe_path(&web.startup_probe).as_deref(),
        Some("/.well-known/nodeinfo")
    );
    assert_eq!(
        probe_path(&web.liveness_probe).as_deref(),
        Some("/.well-known/nodeinfo")
    );
    assert_eq!(
        probe_path(&web.readiness_probe).as_deref(),
        Some("/nodeinfo/2.1")
    );
    assert_eq!(web.ports.as_ref().map(|p| p[0].container_port), Some(3000));

    let worker = container(
        &ns.deployment(&format!("{HOLLO}-worker"))
            .await
            .expect("worker"),
    );
    assert_eq!(
        worker.command.as_ref().map(|c| c.join(" ")).as_deref(),
        Some(SERVE)
    );
    assert_eq!(env_value(&worker, "NODE_TYPE").as_deref(), Some("worker"));
    assert!(!has_env(&worker, "HEALTH_PORT"));
    assert_eq!(worker.ports, None, "upstream workers open no port");
    assert_eq!(
        (
            &worker.startup_probe,
            &worker.liveness_probe,
            &worker.readiness_probe
        ),
        (&None, &None, &None),
        "process-based: no probe needs a port"
    );

    let sos: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("keda.sh", "v1alpha1", "ScaledObject"),
            "scaledobjects",
        ),
    );
    let so = wait_exists("ScaledObject", &sos, &format!("{HOLLO}-worker"), 60).await;
    let t = &so.data["spec"]["triggers"][0];
    ns.log(&format!("KEDA trigger: {t}"));
    assert_eq!(
        t["metadata"]["query"],
        "SELECT COALESCE((SELECT count(*) FROM fedify_message_v2 WHERE created + delay <= now()), 0)"
    );
    assert_eq!(t["metadata"]["targetQueryValue"], "40");

    // An upgrade takes the Recreate path: no version probe, old pods stopped first.
    ns.merge_hollo(json!({"spec": {"version": V2}})).await;
    wait_until("ScalingDown (not CheckingCompatibility)", 60, || async {
        let h = ns.hollo().await;
        let at_v2 = h.data["status"]["currentVersion"].as_str() == Some(V2);
        match phase(&h).as_str() {
            "ScalingDown" | "Migrating" | "RollingOut" => Ok(()),
            "Running" if at_v2 => Ok(()),
            "CheckingCompatibility" => panic!("an upstream image cannot be probed"),
            _ => Err(status_line(&h)),
        }
    })
    .await;
    ns.wait_running(V2, 120).await;
    let probes = jobs
        .list(&ListParams::default().labels("app.kubernetes.io/component=version-probe"))
        .await
        .expect("list Jobs");
    assert!(probes.items.is_empty(), "no version probe Job for upstream");
}

/// A CloudNativePG kind (`postgresql.cnpg.io/v1`).
fn cnpg_resource(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("postgresql.cnpg.io", "v1", kind),
        plural,
    )
}

/// CloudNativePG's CRDs of `plurals` (from its config/crd/bases), installed unless present.
async fn ensure_cnpg_crds(ns: &Ns, plurals: &[&str]) {
    let dir = std::env::var("HOLLO_E2E_CNPG_CRDS")
        .expect("HOLLO_E2E_CNPG_CRDS (CloudNativePG's config/crd/bases; e2e/run sets it)");
    for plural in plurals {
        ensure_crd(
            ns,
            &format!("{plural}.postgresql.cnpg.io"),
            &format!("{dir}/postgresql.cnpg.io_{plural}.yaml"),
        )
        .await;
    }
}

/// The CloudNativePG Cluster `pg` (as a user writes it) with `max_connections`.
async fn create_cluster(ns: &Ns, max_connections: &str) {
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &cnpg_resource("Cluster", "clusters"),
    );
    let mut cluster = DynamicObject::new("pg", &cnpg_resource("Cluster", "clusters"));
    cluster.data = json!({"spec": {"instances": 1, "storage": {"size": "1Gi"},
        "postgresql": {"parameters": {"max_connections": max_connections}}}});
    clusters
        .create(&Default::default(), &cluster)
        .await
        .expect("create Cluster");
}

/// Merge-patches the Cluster `pg`'s spec (CloudNativePG's own validation on the apiserver).
async fn patch_cluster(ns: &Ns, spec: Value) {
    let clusters: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &cnpg_resource("Cluster", "clusters"),
    );
    clusters
        .patch(
            "pg",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": spec})),
        )
        .await
        .expect("patch Cluster");
}

/// The application Secret CloudNativePG would make for the Cluster `pg`.
async fn put_app_secret(ns: &Ns) {
    put_secret(
        ns,
        "pg-app",
        json!({"username": "app", "user": "app", "password": "pw", "dbname": "app",
               "host": "pg-rw", "port": "5432",
               "uri": format!("postgresql://app:pw@pg-rw.{}:5432/app", ns.name)}),
    )
    .await;
}

/// CloudNativePG: hold without the app Secret, then the URL from it (web through the Pooler),
/// the budget against the Cluster's max_connections, and a rotated password rolling the pods.
#[tokio::test]
async fn cnpg_database_from_the_clusters_app_secret() {
    let ns = Ns::new("cnpg").await;
    ensure_cnpg_crds(&ns, &["clusters", "poolers"]).await;
    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_with(json!({"spec": {"database": {
        "urlSecretRef": null, "cnpg": {"cluster": "pg", "pooler": "pg-pooler"}}}})))
        .await
        .expect("apply a Hollo on CloudNativePG");
    // No Secret yet: a clear condition and event, and nothing applied (no crash loop).
    let m = ns
        .wait_condition("Database", "False", "SecretMissing", 60)
        .await;
    ns.log(&format!("Database=False: {m}"));
    assert!(m.contains("pg-app not found"), "{m}");
    ns.wait_event("SecretMissing", "Warning", 30).await;
    let h = ns.hollo().await;
    assert_eq!(
        condition(&h, "Degraded").map(|c| c.1).as_deref(),
        Some("SecretMissing")
    );
    let jobs: Api<Job> = ns.api();
    let deployments: Api<Deployment> = ns.api();
    holds_for("nothing applied while the Secret is missing", 5, || async {
        let j = jobs
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let d = deployments
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if j.items.is_empty() && d.items.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{} Jobs, {} Deployments",
                j.items.len(),
                d.items.len()
            ))
        }
    })
    .await;

    // The Cluster (as a user writes it) and the Secret CloudNativePG would make for it.
    create_cluster(&ns, "60").await;
    let app = |password: &str| {
        json!({"username": "app", "user": "app", "password": password, "dbname": "app",
               "host": "pg-rw", "port": "5432",
               "uri": format!("postgresql://app:{password}@pg-rw.{}:5432/app", ns.name)})
    };
    put_secret(&ns, "pg-app", app("first0password")).await;
    poke(&ns, 1).await;
    let m = ns
        .wait_condition("Database", "True", "CnpgSecretFound", 60)
        .await;
    ns.log(&format!("Database=True: {m}"));
    assert!(m.contains("max_connections 60"), "{m}");
    // 1 web × (20 + its LISTEN connection, direct beside the pooler) + 2 workers × 24 + 1 + 5
    // = 75 > the Cluster's 60 (the spec says 100).
    let budget = ns
        .wait_condition("ConnectionBudget", "False", "OverBudget", 60)
        .await;
    assert!(budget.contains("maxConnections 60"), "{budget}");
    ns.wait_running(V1, 120).await;

    let web_d = ns.deployment(&format!("{HOLLO}-web")).await.expect("web");
    let web = container(&web_d);
    assert_eq!(
        env_value(&web, "DATABASE_URL").as_deref(),
        Some("postgresql://$(CNPG_USER):$(CNPG_PASSWORD)@pg-pooler:5432/$(CNPG_DBNAME)")
    );
    assert_eq!(
        env_secret(&web, "CNPG_PASSWORD"),
        Some(("pg-app".into(), "password".into()))
    );
    assert_eq!(
        env_secret(&web, "DATABASE_DIRECT_URL"),
        Some(("pg-app".into(), "uri".into()))
    );
    let worker = container(
        &ns.deployment(&format!("{HOLLO}-worker"))
            .await
            .expect("worker"),
    );
    assert_eq!(
        env_secret(&worker, "DATABASE_URL"),
        Some(("pg-app".into(), "uri".into()))
    );
    let mc = &migration_container(&jobs).await;
    assert_eq!(
        env_secret(mc, "DATABASE_URL"),
        Some(("pg-app".into(), "uri".into()))
    );

    // A rotated password rolls the pods: the template's Secret hash changes.
    let before = secrets_hash(&web_d).expect("hash annotation");
    put_secret(&ns, "pg-app", app("second0password")).await;
    // Not poked: the operator's own periodic look (60 s) must notice.
    ns.wait_web_hash_changes(&before, "web template carries the rotated Secret's hash")
        .await;
}

/// Bad input is rejected at admission with the CEL message, and nothing is stored.
#[tokio::test]
async fn profile_and_cnpg_admission_rules() {
    let ns = Ns::new("profile-admission").await;
    let cases = [
        (
            json!({"spec": {"image": {"profile": "mastodon"}}}),
            "image.profile must be hollo-rs or upstream",
        ),
        (
            json!({"spec": {"database": {"cnpg": {"cluster": "pg"}}}}),
            "database: set exactly one of urlSecretRef and cnpg",
        ),
        (
            json!({"spec": {"database": {"urlSecretRef": null, "cnpg": {"pooler": "pg-pooler"}}}}),
            "database.cnpg.cluster must name the CloudNativePG Cluster",
        ),
        (
            json!({"spec": {"database": {"urlSecretRef": null}}}),
            "database: set exactly one of urlSecretRef and cnpg",
        ),
        (
            json!({"spec": {"image": {"profile": "upstream"}, "adminTokenRef": {"name": "a", "key": "t"}}}),
            "upstream Hollo has no admin token",
        ),
        (
            json!({"spec": {"image": {"profile": "upstream"}}}),
            "upstream Hollo refuses to start without STORAGE_URL_BASE",
        ),
        (
            json!({"spec": {"image": {"profile": "upstream"}, "migrations": {"command": ["hollo", "migrate"]}}}),
            "migrates with `pnpm run migrate`",
        ),
    ];
    for (patch, message) in cases {
        ns.assert_rejected(patch, message).await;
    }
    assert!(
        ns.hollos().get_opt(HOLLO).await.expect("get").is_none(),
        "nothing was stored"
    );
}

/// Issue 34 item 4 (R-OP-MIG): `upgrade.backup` with `database.cnpg`. CloudNativePG's CRDs
/// only (no controller): the test plays CloudNativePG by writing the Backup's status. An
/// upgrade first creates the Backup `social-backup-0-2-0` of cluster `pg` and waits in
/// `BackingUp` with the old pods untouched and no migration Job; `completed` → the usual
/// upgrade to `Running` at 0.2.0. The next upgrade's Backup never completes within
/// `timeoutSeconds: 3` → `BackupFailed`, `BackedUp=False` (`BackupFailed`), `Degraded`, a
/// Warning event, no migration Job, the 0.2.0 pods untouched.
#[tokio::test]
async fn issue34_cnpg_backup_before_migrating() {
    let ns = Ns::new("backup").await;
    ensure_cnpg_crds(&ns, &["clusters", "backups"]).await;
    ns.prepare_instance().await;
    create_cluster(&ns, "200").await;
    patch_cluster(
        &ns,
        json!({"backup": {"barmanObjectStore": {"destinationPath": "s3://backups/"}}}),
    )
    .await;
    put_app_secret(&ns).await;
    ns.apply_hollo(&minimal_with(json!({"spec": {
        "database": {"urlSecretRef": null, "cnpg": {"cluster": "pg"}},
        "upgrade": {"backup": {"enabled": true}}}})))
        .await
        .expect("apply a Hollo with upgrade.backup");
    ns.wait_running(V1, 120).await;
    ns.wait_replicas("worker", 2, 60).await;

    let backups: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &cnpg_resource("Backup", "backups"),
    );
    let jobs: Api<Job> = ns.api();
    let pod_uids = || async {
        let mut uids: Vec<String> = ns
            .live_pods("web,worker")
            .await
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        uids.sort();
        uids
    };
    let migration_of = |v: &'static str| {
        let jobs = jobs.clone();
        async move {
            jobs.get_opt(&format!("{HOLLO}-migrate-{}", v.replace('.', "-")))
                .await
                .map_err(|e| e.to_string())
        }
    };

    // Upgrade: the Backup first, the old version serving.
    let before = pod_uids().await;
    ns.merge_hollo(json!({"spec": {"version": V2}})).await;
    let backup = wait_until("Backup social-backup-0-2-0 in BackingUp", 60, || async {
        let h = ns.hollo().await;
        let b = backups
            .get_opt(&format!("{HOLLO}-backup-0-2-0"))
            .await
            .map_err(|e| e.to_string())?;
        match b {
            Some(b) if phase(&h) == "BackingUp" => Ok(b),
            b => Err(format!("{b:?}; {}", status_line(&h))),
        }
    })
    .await;
    // The method is the Cluster's own configuration, named (never CloudNativePG's default).
    assert_eq!(
        backup.data["spec"],
        json!({"cluster": {"name": "pg"}, "method": "barmanObjectStore"})
    );
    holds_for("BackingUp: old pods untouched, no migration", 3, || async {
        let h = ns.hollo().await;
        if phase(&h) != "BackingUp" {
            return Err(status_line(&h));
        }
        if pod_uids().await != before {
            return Err("pods changed".into());
        }
        match migration_of(V2).await? {
            Some(_) => Err("a migration Job of 0.2.0 exists".into()),
            None => Ok(()),
        }
    })
    .await;
    backups
        .patch_status(
            &format!("{HOLLO}-backup-0-2-0"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "completed"}})),
        )
        .await
        .expect("complete the Backup as CloudNativePG would");
    ns.wait_running(V2, 120).await;
    assert!(
        migration_of(V2).await.expect("get").is_some(),
        "migrated after the Backup"
    );

    // The next one never completes within 3 s: no migration, the 0.2.0 pods stay.
    ns.wait_replicas("worker", 2, 60).await;
    let before = pod_uids().await;
    ns.merge_hollo(json!({"spec": {"version": "0.3.0",
        "upgrade": {"backup": {"timeoutSeconds": 3}}}}))
        .await;
    let m = ns
        .wait_condition("BackedUp", "False", "BackupFailed", 60)
        .await;
    assert!(m.contains("not completed within 3s"), "{m}");
    let h = ns.hollo().await;
    assert_eq!(phase(&h), "BackupFailed", "{}", status_line(&h));
    assert_eq!(
        condition(&h, "Degraded").map(|c| c.1).as_deref(),
        Some("BackupFailed")
    );
    ns.wait_event("BackupFailed", "Warning", 30).await;
    holds_for(
        "BackupFailed: no migration, the 0.2.0 pods untouched",
        4,
        || async {
            let h = ns.hollo().await;
            if phase(&h) != "BackupFailed" || pod_uids().await != before {
                return Err(status_line(&h));
            }
            match migration_of("0.3.0").await? {
                Some(_) => Err("a migration Job of 0.3.0 exists".into()),
                None => Ok(()),
            }
        },
    )
    .await;
}

/// Issue 63 item 3: the pre-migration Backup always names its method, taken from the Cluster's
/// own backup configuration as it is at each upgrade, and CloudNativePG's Backup CRD (its
/// schema and rules, on the real apiserver) accepts each: a WAL-archiver plugin → `plugin` with
/// that plugin's name; `backup.volumeSnapshot` → `volumeSnapshot`, with `online` and `target`
/// from `upgrade.backup`; `backup.barmanObjectStore` → `barmanObjectStore`. A Cluster with no
/// backup configured → `BackupFailed`, `BackedUp=False` (`NoBackupMethod`), no Backup, the old
/// pods untouched. No CloudNativePG controller: the test completes each Backup as it would.
#[tokio::test]
async fn issue63_backup_method_from_the_cluster() {
    let ns = Ns::new("backup-method").await;
    ensure_cnpg_crds(&ns, &["clusters", "backups"]).await;
    ns.prepare_instance().await;
    create_cluster(&ns, "200").await;
    patch_cluster(
        &ns,
        json!({"plugins": [{"name": "barman-cloud.cloudnative-pg.io", "isWALArchiver": true,
                            "parameters": {"barmanObjectName": "store"}}]}),
    )
    .await;
    put_app_secret(&ns).await;
    ns.apply_hollo(&minimal_with(json!({"spec": {
        "database": {"urlSecretRef": null, "cnpg": {"cluster": "pg"}},
        "upgrade": {"backup": {"enabled": true}}}})))
        .await
        .expect("apply a Hollo with upgrade.backup");
    ns.wait_running(V1, 120).await;
    let backups: Api<DynamicObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &cnpg_resource("Backup", "backups"),
    );
    // The Backup of `version` as stored (accepted by CloudNativePG's CRD), completed as
    // CloudNativePG would, then the upgrade's end.
    let backed_up = |version: &'static str, patch: Value, want: Value| {
        let (ns, backups) = (&ns, backups.clone());
        async move {
            // A merge patch as given: its nulls remove fields.
            let mut spec = patch;
            spec["version"] = version.into();
            ns.merge_hollo(json!({ "spec": spec })).await;
            let name = format!("{HOLLO}-backup-{}", version.replace('.', "-"));
            let b = wait_exists("Backup", &backups, &name, 60).await;
            ns.log(&format!("Backup {name}: {}", b.data["spec"]));
            assert_eq!(b.data["spec"], want, "{name}");
            backups
                .patch_status(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "completed"}})),
                )
                .await
                .expect("complete the Backup as CloudNativePG would");
            ns.wait_running(version, 120).await;
        }
    };
    let cluster = json!({"name": "pg"});
    backed_up(
        V2,
        json!({}),
        json!({"cluster": cluster, "method": "plugin",
               "pluginConfiguration": {"name": "barman-cloud.cloudnative-pg.io"}}),
    )
    .await;
    patch_cluster(
        &ns,
        json!({"plugins": null, "backup": {"volumeSnapshot": {"className": "csi-snapshots"}}}),
    )
    .await;
    backed_up(
        "0.3.0",
        json!({"upgrade": {"backup": {"online": false, "target": "primary"}}}),
        json!({"cluster": cluster, "method": "volumeSnapshot", "online": false,
               "target": "primary"}),
    )
    .await;
    patch_cluster(
        &ns,
        json!({"backup": {"volumeSnapshot": null,
                          "barmanObjectStore": {"destinationPath": "s3://backups/"}}}),
    )
    .await;
    backed_up(
        "0.4.0",
        json!({"upgrade": {"backup": {"online": null, "target": null}}}),
        json!({"cluster": cluster, "method": "barmanObjectStore"}),
    )
    .await;

    // No backup configured: said so, nothing created, nothing stopped.
    patch_cluster(&ns, json!({"backup": null})).await;
    ns.wait_replicas("worker", 2, 60).await;
    let pods = || async {
        let mut uids: Vec<String> = ns
            .live_pods("web,worker")
            .await
            .into_iter()
            .filter_map(|p| p.metadata.uid)
            .collect();
        uids.sort();
        uids
    };
    let before = pods().await;
    ns.merge_hollo(json!({"spec": {"version": "0.5.0"}})).await;
    let m = ns
        .wait_condition("BackedUp", "False", "NoBackupMethod", 60)
        .await;
    assert!(m.contains("Cluster pg has no backup configured"), "{m}");
    holds_for(
        "BackupFailed: no Backup, the 0.4.0 pods untouched",
        3,
        || async {
            let h = ns.hollo().await;
            if phase(&h) != "BackupFailed" || pods().await != before {
                return Err(status_line(&h));
            }
            match backups.get_opt(&format!("{HOLLO}-backup-0-5-0")).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}
