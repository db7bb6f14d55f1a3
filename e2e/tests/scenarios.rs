//! Scenarios 1–8 of issue 9 against a real kube-apiserver with the chart installed and the operator
//! running under the chart's ServiceAccount (set up by `e2e/run`). Each scenario has its own
//! namespace; they run in parallel. Scenario 9 (leader election) is in `leader.rs`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

const V1: &str = "0.1.0";
const V2: &str = "0.2.0";

/// A scenario's namespace with the minimal example applied (its Secrets and claim first),
/// Running at 0.1.0.
async fn running_minimal(scenario: &str) -> Ns {
    let ns = Ns::new(scenario).await;
    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_example())
        .await
        .expect("apply Hollo");
    ns.wait_running(V1, 90).await;
    ns
}

/// Whether this is an external cluster (where a previous run may have left an optional CRD),
/// and whether the CRD `name` is there already.
async fn crd_preinstalled(ns: &Ns, name: &str) -> (bool, bool) {
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let external = std::env::var("E2E_EXTERNAL").as_deref() == Ok("1");
    let preinstalled = crds.get_opt(name).await.unwrap().is_some();
    (external, preinstalled)
}

/// The container of a CronJob's Job.
fn cron_job_container(
    cj: &k8s_openapi::api::batch::v1::CronJob,
) -> &k8s_openapi::api::core::v1::Container {
    &cj.spec
        .job_template
        .spec
        .as_ref()
        .expect("job")
        .template
        .spec
        .as_ref()
        .expect("pod")
        .containers[0]
}

fn env_of(d: &Deployment, container: usize, var: &str) -> Option<String> {
    d.spec.template.spec.as_ref()?.containers[container]
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == var)
        .and_then(|e| e.value.clone())
}

fn image_of(d: &Deployment) -> String {
    d.spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.containers[0].image.clone())
        .unwrap_or_default()
}

/// Scenarios 1–3: the chart's CRD and operator; the README's commands on the minimal example
/// (Secrets, apply, `kubectl get hollo`, `kubectl patch … replicas`); the migration Job comes
/// before any Deployment; everything Ready; scaling 2 → 5 → 1 with PDBs following.
#[tokio::test]
async fn install_first_run_and_scale() {
    let ns = Ns::new("install").await;

    // 1. The chart put the CRD in and the operator (the chart's ServiceAccount) holds the Lease.
    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    let crd = crds
        .get("hollos.hollo.social")
        .await
        .expect("CRD installed by the chart");
    let established = crd
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    assert!(established, "CRD hollos.hollo.social is not Established");
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), "hollo-system");
    wait_until("operator Lease held", 30, || async {
        let l = leases
            .get_opt("hollo-operator-leader")
            .await
            .map_err(|e| e.to_string())?
            .ok_or("no Lease hollo-operator-leader in hollo-system")?;
        l.spec
            .and_then(|s| s.holder_identity)
            .filter(|h| !h.is_empty())
            .map(|_| ())
            .ok_or_else(|| "Lease has no holder".to_string())
    })
    .await;

    // 2. Watch Jobs and Deployments from before the apply, to see which comes first.
    ns.prepare_instance().await;
    let jobs: Api<Job> = ns.api();
    let deps: Api<Deployment> = ns.api();
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let order = tokio::spawn({
        let (jobs, deps) = (jobs.clone(), deps.clone());
        async move {
            // "" marks the end of a watch's initial list (the namespace is empty then).
            let j = watcher(jobs, watcher::Config::default())
                .filter_map(|e| async move {
                    match e {
                        Ok(watcher::Event::Apply(o)) => Some(format!("Job/{}", o.name_any())),
                        Ok(watcher::Event::InitDone) => Some(String::new()),
                        _ => None,
                    }
                })
                .boxed();
            let d = watcher(deps, watcher::Config::default())
                .filter_map(|e| async move {
                    match e {
                        Ok(watcher::Event::Apply(o)) => {
                            Some(format!("Deployment/{}", o.name_any()))
                        }
                        Ok(watcher::Event::InitDone) => Some(String::new()),
                        _ => None,
                    }
                })
                .boxed();
            let mut merged = futures::stream::select(j, d);
            let mut seen: Vec<String> = Vec::new();
            let mut listed = 0;
            let mut ready_tx = Some(ready_tx);
            while let Some(s) = merged.next().await {
                if s.is_empty() {
                    listed += 1;
                    if listed == 2
                        && let Some(tx) = ready_tx.take()
                    {
                        let _ = tx.send(());
                    }
                    continue;
                }
                if !seen.contains(&s) {
                    seen.push(s);
                }
                if seen.iter().filter(|s| s.starts_with("Deployment/")).count() >= 2 {
                    break;
                }
            }
            seen
        }
    });
    tokio::time::timeout(Duration::from_secs(30), ready_rx)
        .await
        .expect("Job and Deployment watches not established in 30 s")
        .expect("watch task ended");
    ns.log("kubectl apply -f examples/hollo-minimal.yaml");
    ns.kubectl(&["apply", "-f", "examples/hollo-minimal.yaml"]);
    let seen = tokio::time::timeout(Duration::from_secs(60), order)
        .await
        .expect("no two Deployments within 60 s")
        .unwrap();
    let first_dep = seen.iter().position(|s| s.starts_with("Deployment/"));
    let job = seen
        .iter()
        .position(|s| s.starts_with(&format!("Job/{HOLLO}-migrate-")));
    assert!(
        matches!((job, first_dep), (Some(j), Some(d)) if j < d),
        "the migration Job must exist before any Deployment; order seen: {seen:?}"
    );
    let job_name = &seen[job.unwrap()]["Job/".len()..];
    let j = jobs.get(job_name).await.expect("migration Job");
    assert!(
        j.status.and_then(|s| s.succeeded).unwrap_or(0) >= 1,
        "Deployments were created while migration Job {job_name} had not succeeded"
    );

    let h = ns.wait_running(V1, 90).await;
    ns.log(&format!("Running: {}", status_line(&h)));
    ns.wait_replicas("web", 1, 60).await;
    ns.wait_replicas("worker", 2, 60).await;
    let svcs: Api<Service> = ns.api();
    svcs.get(&format!("{HOLLO}-web"))
        .await
        .expect("Service social-web");
    let pdbs: Api<PodDisruptionBudget> = ns.api();
    let pdb = pdbs
        .get(&format!("{HOLLO}-worker"))
        .await
        .expect("PDB social-worker (2 workers)");
    assert_eq!(
        pdb.spec.and_then(|s| s.max_unavailable),
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    assert!(
        pdbs.get_opt(&format!("{HOLLO}-web"))
            .await
            .unwrap()
            .is_none(),
        "one web replica must get no PDB (it would block node drains)"
    );
    assert_eq!(condition(&h, "Ready").unwrap().0, "True");
    assert_eq!(
        h.data["status"]["worker"]["readyReplicas"],
        2,
        "{}",
        status_line(&h)
    );

    // Printer columns: `kubectl get hollo`.
    let table = ns.kubectl(&["get", "hollo"]);
    ns.log(&format!("kubectl get hollo:\n{table}"));
    let header = table.lines().next().unwrap_or_default();
    for col in ["PHASE", "VERSION"] {
        assert!(header.contains(col), "no {col} column in:\n{table}");
    }
    let row = table.lines().nth(1).unwrap_or_default();
    assert!(
        row.starts_with(HOLLO) && row.contains("Running") && row.contains(V1),
        "kubectl get hollo row: {row}"
    );

    // 3. Scale with the README's command, then down to one.
    ns.kubectl_patch_hollo(r#"{"spec":{"worker":{"replicas":5}}}"#);
    ns.wait_replicas("worker", 5, 60).await;
    pdbs.get(&format!("{HOLLO}-worker"))
        .await
        .expect("worker PDB with 5 replicas");
    ns.kubectl_patch_hollo(r#"{"spec":{"worker":{"replicas":1}}}"#);
    ns.wait_replicas("worker", 1, 60).await;
    wait_until("worker PDB removed at one replica", 30, || async {
        match pdbs.get_opt(&format!("{HOLLO}-worker")).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|p| p.map(|p| p.spec)))),
        }
    })
    .await;
    wait_until("status.worker.readyReplicas=1", 30, || async {
        let h = ns.wait_running(V1, 30).await;
        if h.data["status"]["worker"]["readyReplicas"] == 1 {
            Ok(())
        } else {
            Err(status_line(&h))
        }
    })
    .await;
}

/// Scenario 4 (HPA): autoscaling on → HPA with min/max and the operator never writes replicas;
/// off → HPA gone, spec replicas restored.
#[tokio::test]
async fn autoscaling_hpa_hand_off() {
    let ns = Ns::new("hpa").await;
    ns.prepare_instance().await;
    ns.kubectl(&["apply", "-f", "examples/hollo-minimal.yaml"]);
    ns.wait_running(V1, 90).await;
    // The README's command.
    ns.kubectl_patch_hollo(r#"{"spec":{"worker":{"autoscaling":{"enabled":true,"minReplicas":2,"maxReplicas":10,"targetCPUUtilization":70}}}}"#);
    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    let hpa = wait_exists("HPA", &hpas, &format!("{HOLLO}-worker"), 30).await;
    let spec = hpa.spec;
    assert_eq!((spec.min_replicas, spec.max_replicas), (Some(2), 10));
    assert_eq!(spec.scale_target_ref.name, format!("{HOLLO}-worker"));

    // Set the count the way the HPA controller does (scale subresource), then edit the spec so
    // the operator reconciles: the autoscaler's number must survive.
    let deps: Api<Deployment> = ns.api();
    let worker = format!("{HOLLO}-worker");
    deps.patch_scale(
        &worker,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"replicas": 4}})),
    )
    .await
    .expect("scale worker to 4");
    let h = ns
        .merge_hollo(json!({"spec": {"worker": {"replicas": 3, "drainSeconds": 45}}}))
        .await;
    let gen_ = h.metadata.generation;
    wait_until("operator observed the edit", 30, || async {
        let h = ns.hollo().await;
        if h.data["status"]["observedGeneration"].as_i64() == gen_ {
            Ok(())
        } else {
            Err(status_line(&h))
        }
    })
    .await;
    wait_until("worker template carries the edit", 30, || async {
        let d = ns.deployment(&worker).await.ok_or("no Deployment")?;
        match env_of(&d, 0, "SHUTDOWN_DRAIN_SECONDS").as_deref() {
            Some("45") => Ok(()),
            other => Err(format!("SHUTDOWN_DRAIN_SECONDS={other:?}")),
        }
    })
    .await;
    holds_for("the HPA-set replica count (4)", 8, || async {
        let d = ns.deployment(&worker).await.ok_or("no Deployment")?;
        match d.spec.replicas {
            Some(4) => Ok(()),
            other => Err(format!(
                "worker replicas {other:?}, the operator fought the HPA"
            )),
        }
    })
    .await;
    ns.wait_replicas("worker", 4, 30).await;

    // Off again: the HPA goes, spec.worker.replicas (3) comes back.
    ns.merge_hollo(json!({"spec": {"worker": {"autoscaling": {"enabled": false}}}}))
        .await;
    wait_until("HPA removed", 30, || async {
        match hpas.get_opt(&worker).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|o| o.map(|h| h.spec)))),
        }
    })
    .await;
    ns.wait_replicas("worker", 3, 60).await;
}

fn scaled_object_resource() -> ApiResource {
    ApiResource {
        group: "keda.sh".into(),
        version: "v1alpha1".into(),
        api_version: "keda.sh/v1alpha1".into(),
        kind: "ScaledObject".into(),
        plural: "scaledobjects".into(),
    }
}

/// Scenario 4 (KEDA): without KEDA's CRDs the operator says KEDA is missing; with them (from
/// KEDA's Go module, applied by this test) a ScaledObject with a PostgreSQL trigger on ready
/// messages.
#[tokio::test]
async fn keda_scaled_object() {
    let ns = Ns::new("keda").await;
    let crd_file = std::env::var("HOLLO_E2E_KEDA_CRD")
        .expect("HOLLO_E2E_KEDA_CRD (the ScaledObject CRD from KEDA's module; e2e/run sets it)");
    // Only this scenario uses KEDA; a previous run on an external cluster may have left it.
    let (external, preinstalled) = crd_preinstalled(&ns, "scaledobjects.keda.sh").await;
    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_with(json!({"spec": {"worker": {"autoscaling": {
        "enabled": true, "minReplicas": 1, "maxReplicas": 8,
        "keda": {"enabled": true, "targetReadyMessagesPerReplica": 25}}}}})))
        .await
        .expect("apply Hollo");
    if !preinstalled {
        let ev = ns.wait_event("KedaNotInstalled", "Warning", 90).await;
        ns.log(&format!("without KEDA: {:?}", ev.note));
        assert!(
            ev.note.unwrap_or_default().to_lowercase().contains("keda"),
            "the event must say KEDA is missing"
        );
        // The status says it too, for this generation, while the rest of the instance runs.
        wait_until("Degraded=True KedaNotInstalled", 60, || async {
            let h = ns.hollo().await;
            let d = condition(&h, "Degraded");
            let current = h.data["status"]["observedGeneration"].as_i64() == h.metadata.generation;
            match d {
                Some((status, reason, _))
                    if status == "True" && reason == "KedaNotInstalled" && current =>
                {
                    Ok(())
                }
                other => Err(format!("{other:?}; {}", status_line(&h))),
            }
        })
        .await;
        // Install KEDA's CRD as a user would (kubectl apply of KEDA's manifest).
        ns.kubectl(&["apply", "--server-side", "-f", &crd_file]);
    } else {
        assert!(
            external,
            "scaledobjects.keda.sh exists before the KEDA scenario installed it"
        );
    }
    ns.wait_crd_established("scaledobjects.keda.sh", 30).await;
    let sos: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &scaled_object_resource());
    let so = wait_exists("ScaledObject", &sos, &format!("{HOLLO}-worker"), 60).await;
    let spec = &so.data["spec"];
    ns.log(&format!("ScaledObject spec: {spec}"));
    assert_eq!(spec["scaleTargetRef"]["name"], format!("{HOLLO}-worker"));
    assert_eq!(
        (
            spec["minReplicaCount"].as_i64(),
            spec["maxReplicaCount"].as_i64()
        ),
        (Some(1), Some(8))
    );
    let triggers = spec["triggers"].as_array().expect("triggers");
    let pg = triggers
        .iter()
        .find(|t| t["type"] == "postgresql")
        .unwrap_or_else(|| panic!("no postgresql trigger in {triggers:?}"));
    let query = pg["metadata"]["query"]
        .as_str()
        .unwrap_or_default()
        .to_lowercase();
    assert!(
        query.contains("ready") || query.contains("visible_at") || query.contains("<= now()"),
        "the trigger must count ready messages; query: {query}"
    );
    assert_eq!(pg["metadata"]["targetQueryValue"], "25");
    // No HPA of our own next to KEDA's.
    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    assert!(
        hpas.get_opt(&format!("{HOLLO}-worker"))
            .await
            .unwrap()
            .is_none()
    );
    ns.wait_running(V1, 60).await;
    if !preinstalled {
        // The operator looks again on its own (nothing notifies it of a new CRD).
        wait_until("Degraded back to False", 60, || async {
            let h = ns.hollo().await;
            match condition(&h, "Degraded") {
                Some((status, _, _)) if status == "False" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }
}

/// Scenario 4 (Ingress): an Ingress object and `BEHIND_PROXY=true` on the web pods.
#[tokio::test]
async fn ingress_behind_proxy() {
    let ns = Ns::new("ingress").await;
    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_with(
        json!({"spec": {"web": {"ingress": {"enabled": true, "host": "hollo.example.test"}}}}),
    ))
    .await
    .expect("apply Hollo");
    ns.wait_running(V1, 90).await;
    let ings: Api<Ingress> = ns.api();
    let ing = ings
        .get(&format!("{HOLLO}-web"))
        .await
        .expect("Ingress social-web");
    let rule = &ing.spec.unwrap().rules.unwrap()[0];
    assert_eq!(rule.host.as_deref(), Some("hollo.example.test"));
    let pods = ns.ready_pods("web").await;
    assert!(!pods.is_empty());
    for p in pods {
        let env = p.spec.unwrap().containers[0]
            .env
            .clone()
            .unwrap_or_default();
        let v = env
            .iter()
            .find(|e| e.name == "BEHIND_PROXY")
            .and_then(|e| e.value.clone());
        assert_eq!(v.as_deref(), Some("true"), "web pod {:?}", p.metadata.name);
    }
    // Off again: the Ingress goes.
    ns.merge_hollo(json!({"spec": {"web": {"ingress": {"enabled": false}}}}))
        .await;
    wait_until("Ingress removed", 30, || async {
        match ings.get_opt(&format!("{HOLLO}-web")).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|o| o.is_some()))),
        }
    })
    .await;
}

/// A same-version change rolls the single web pod over without a gap: the minimal example's
/// connection budget (74 of 100) has room for one more web pod, so the operator lets the web
/// Deployment surge, and a Ready web pod exists at every moment. Every pod event is watched,
/// not sampled, so a moment with none cannot slip between two polls.
#[tokio::test]
async fn one_web_replica_rolls_without_a_gap() {
    let ns = running_minimal("surge").await;
    ns.wait_replicas("web", 1, 60).await;
    let before: BTreeSet<String> = ns
        .ready_pods("web")
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    let pods: Api<Pod> = ns.api();
    let mut events = watcher(
        pods,
        watcher::Config::default().labels(&format!(
            "app.kubernetes.io/instance={HOLLO},app.kubernetes.io/component=web"
        )),
    )
    .boxed();
    // name → serving (Ready and not terminating)
    let mut serving: BTreeMap<String, bool> = BTreeMap::new();
    let mut listed = false;
    let mut patched = false;
    let mut fewest = usize::MAX;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let Some(ev) = ns.next_event(&mut events, deadline).await else {
            panic!("the web pod was not replaced in 120 s; pods: {serving:?}")
        };
        match ev {
            watcher::Event::Init => serving.clear(),
            watcher::Event::InitApply(p) | watcher::Event::Apply(p) => {
                let up = p.metadata.deletion_timestamp.is_none() && pod_ready(&p);
                serving.insert(p.name_any(), up);
            }
            watcher::Event::Delete(p) => {
                serving.remove(&p.name_any());
            }
            watcher::Event::InitDone => listed = true,
        }
        if !listed {
            continue;
        }
        let up = serving.values().filter(|u| **u).count();
        if !patched {
            ns.merge_hollo(json!({"spec": {"env": [{"name": "E2E_ROLL", "value": "1"}]}}))
                .await;
            patched = true;
            continue;
        }
        fewest = fewest.min(up);
        assert!(
            up >= 1,
            "no web pod was serving during the rollout: {serving:?}"
        );
        let replaced = serving.keys().all(|n| !before.contains(n))
            && serving.iter().any(|(n, u)| *u && !before.contains(n));
        if replaced {
            break;
        }
    }
    ns.log(&format!(
        "fewest serving web pods during the rollout: {fewest}"
    ));
    let web = ns
        .deployment(&format!("{HOLLO}-web"))
        .await
        .expect("web Deployment");
    let ru = web.spec.strategy.and_then(|s| s.rolling_update);
    assert_eq!(
        ru.map(|r| (r.max_surge, r.max_unavailable)),
        Some((
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)),
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0))
        ))
    );
    ns.wait_running(V1, 60).await;
}

/// `upgradeStrategy: RollingWhenCompatible` on a real control plane: both images' version
/// probes report the same task-definition and schema versions (scripted through
/// `migrations.versionCommand`; kwok hands an `echo`'s argument back as the termination message,
/// as `hollo version --json --termination-log` writes it), so the old pods keep serving through
/// `CheckingCompatibility` and the (no-op) migration, and the new version rolls in. Every event
/// of the Hollo and its pods is watched: a Ready web pod exists at every moment and the phases
/// never include `ScalingDown`.
#[tokio::test]
async fn compatible_upgrade_rolls_without_stopping_the_old_version() {
    let ns = Ns::new("rolling").await;
    ns.prepare_instance().await;
    let probe = r#"{"version":"e2e","schemaVersion":"20261130000700","taskDefinitionVersion":1}"#;
    ns.apply_hollo(&minimal_with(json!({"spec": {
        "upgradeStrategy": "RollingWhenCompatible",
        "migrations": {"versionCommand": ["echo", probe]},
    }})))
    .await
    .expect("apply Hollo");
    ns.wait_running(V1, 90).await;
    ns.wait_replicas("web", 1, 60).await;

    let mut all = futures::stream::select_all(hollo_and_pod_events(&ns));
    // web pod → (serving, version)
    let mut web: BTreeMap<String, (bool, String)> = BTreeMap::new();
    let mut phases: Vec<String> = Vec::new();
    let mut patched = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let Some(ev) = ns.next_event(&mut all, deadline).await else {
            panic!("the rolling upgrade did not finish in 120 s; phases {phases:?}, web {web:?}")
        };
        let Some((deleted, obj)) = ev.1 else {
            continue;
        };
        match obj {
            Obj::Hollo(h) if patched && upgraded_to_v2(&ns, &h, &mut phases) => break,
            Obj::Pod(p) if label(&*p, "app.kubernetes.io/component") == "web" => {
                if deleted {
                    web.remove(&p.name_any());
                } else {
                    let up = p.metadata.deletion_timestamp.is_none() && pod_ready(&p);
                    web.insert(p.name_any(), (up, label(&*p, "app.kubernetes.io/version")));
                }
            }
            _ => {}
        }
        if !patched {
            if web.values().any(|(up, _)| *up) {
                ns.merge_hollo(json!({"spec": {"version": V2}})).await;
                patched = true;
            }
            continue;
        }
        assert!(
            web.values().any(|(up, _)| *up),
            "no web pod was serving during the upgrade (phases so far {phases:?}): {web:?}"
        );
    }
    assert!(
        phases.iter().any(|p| p == "CheckingCompatibility"),
        "{phases:?}"
    );
    assert!(!phases.iter().any(|p| p == "ScalingDown"), "{phases:?}");
    // The migration still ran — with the old version up — before the new one started.
    let jobs: Api<Job> = ns.api();
    let job = jobs
        .get(&format!("{HOLLO}-migrate-{}", V2.replace('.', "-")))
        .await
        .expect("the new version's migration Job");
    assert!(
        job.status.and_then(|s| s.succeeded).unwrap_or(0) >= 1,
        "migration Job succeeded"
    );
    wait_until("every app pod on the new version", 60, || async {
        let pods = ns
            .api::<Pod>()
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={HOLLO}")))
            .await
            .map_err(|e| e.to_string())?;
        let old: Vec<String> = pods
            .items
            .iter()
            .filter(|p| is_app_pod(p) && label(*p, "app.kubernetes.io/version") != V2)
            .map(|p| p.name_any())
            .collect();
        none_left(&old)
    })
    .await;
}

/// What the upgrade watcher saw.
#[derive(Default, Debug)]
struct Timeline {
    phases: Vec<String>,
    violations: Vec<String>,
    job_seen: bool,
    job_succeeded: bool,
    live: BTreeMap<String, String>, // app pod → version
    new_pods: BTreeSet<String>,
}

fn is_app_pod(p: &Pod) -> bool {
    matches!(
        label(p, "app.kubernetes.io/component").as_str(),
        "web" | "worker" | "all"
    )
}

/// Scenario 5: upgrade by `spec.version`; every event of the Hollo, its pods and Jobs is
/// watched, not sampled.
#[tokio::test]
async fn upgrade_phases_in_order() {
    let ns = Ns::new("upgrade").await;
    ns.prepare_instance().await;
    ns.kubectl(&["apply", "-f", "examples/hollo-minimal.yaml"]);
    ns.wait_running(V1, 90).await;
    ns.wait_replicas("worker", 2, 60).await;

    let pods: Api<Pod> = ns.api();
    let jobs: Api<Job> = ns.api();
    // `<name>-migrate-<version with dots as dashes>`, the operator's naming
    let job_name = format!("{HOLLO}-migrate-{}", V2.replace('.', "-"));
    let mut streams = hollo_and_pod_events(&ns);
    streams.push(tagged(
        jobs.clone(),
        watcher::Config::default(),
        "job",
        |o| Obj::Job(Box::new(o)),
    ));
    let mut all = futures::stream::select_all(streams);
    // What a user watching with the README's command sees (it prints the current row, then
    // every change from that resourceVersion on).
    let mut user_watch = ns.spawn_kubectl(&["get", "hollo", "social", "-w"]);
    let watched = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let reader = {
        let out = user_watch.stdout.take().expect("stdout");
        let watched = watched.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
                watched.lock().unwrap().push(line);
            }
        })
    };
    wait_until(
        "kubectl get hollo social -w printed the current row",
        20,
        || async {
            let n = watched.lock().unwrap().len();
            if n >= 2 {
                Ok(())
            } else {
                Err(format!("{n} lines"))
            }
        },
    )
    .await;
    let mut t = Timeline::default();
    let mut changed = false;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let Some(ev) = ns.next_event(&mut all, deadline).await else {
            panic!("upgrade did not finish in 120 s; observed: {t:#?}")
        };
        let Some((deleted, obj)) = ev.1 else {
            continue;
        };
        match obj {
            Obj::Hollo(h) if changed && upgraded_to_v2(&ns, &h, &mut t.phases) => break,
            Obj::Hollo(_) => {}
            Obj::Pod(p) if is_app_pod(&p) => {
                let name = p.name_any();
                let v = label(&*p, "app.kubernetes.io/version");
                if deleted {
                    t.live.remove(&name);
                    continue;
                }
                t.live.insert(name.clone(), v.clone());
                if v == V2 && t.new_pods.insert(name.clone()) && !t.job_succeeded {
                    // Streams are not ordered with each other: confirm with the Job as it is now.
                    let j = jobs.get_opt(&job_name).await.unwrap();
                    let done = j.as_ref().and_then(|j| j.status.as_ref());
                    let completed = done.and_then(|s| s.completion_time.clone());
                    let created = p.creation_timestamp();
                    let ok = match (completed, created) {
                        (Some(c), Some(p)) => p.0 >= c.0,
                        _ => false,
                    };
                    if !ok {
                        t.violations.push(format!(
                            "pod {name} of {V2} exists before Job {job_name} succeeded (job status {done:?})"
                        ));
                    }
                }
            }
            Obj::Pod(_) => {}
            Obj::Job(j) => {
                if j.name_any() != job_name || deleted {
                    continue;
                }
                if !t.job_seen {
                    t.job_seen = true;
                    ns.log(&format!("Job {job_name} created"));
                    let old: Vec<_> = t.live.iter().filter(|(_, v)| *v == V1).collect();
                    if !old.is_empty() {
                        // Confirm with a fresh list: anything still there existed at Job creation.
                        let now = pods
                            .list(&ListParams::default().labels(&format!(
                                "app.kubernetes.io/instance={HOLLO},app.kubernetes.io/version={V1}"
                            )))
                            .await
                            .unwrap();
                        let still: Vec<String> = now
                            .items
                            .iter()
                            .filter(|p| is_app_pod(p))
                            .map(|p| p.name_any())
                            .collect();
                        if !still.is_empty() {
                            t.violations.push(format!(
                                "pods of {V1} exist when migration Job {job_name} starts: {still:?}"
                            ));
                        }
                    }
                }
                if j.status.and_then(|s| s.succeeded).unwrap_or(0) >= 1 && !t.job_succeeded {
                    ns.log(&format!("Job {job_name} succeeded"));
                    t.job_succeeded = true;
                }
            }
        }
        if !changed && ev.0 == "hollo" {
            // The first Hollo event comes from the initial list: now change the version.
            changed = true;
            ns.log(&format!("patch spec.version {V1} → {V2}"));
            // The README's command.
            ns.kubectl_patch_hollo(r#"{"spec":{"version":"0.2.0"}}"#);
        }
    }
    ns.log(&format!("phases observed: {:?}", t.phases));
    // The last change may still be on its way to kubectl.
    wait_until(
        "kubectl get -w shows Running at the new version",
        10,
        || async {
            let rows = watched.lock().unwrap().clone();
            match rows.last() {
                Some(r) if r.contains("Running") && r.contains(V2) => Ok(()),
                other => Err(format!("last row {other:?}")),
            }
        },
    )
    .await;
    let _ = user_watch.kill();
    let _ = user_watch.wait();
    let _ = reader.join();
    let rows = watched.lock().unwrap().clone();
    let watched = rows.join("\n");
    ns.log(&format!("kubectl get hollo social -w:\n{watched}"));
    for p in ["ScalingDown", "Migrating", "RollingOut"] {
        assert!(
            rows.iter().any(|r| r.contains(p)),
            "kubectl get hollo social -w never showed {p}:\n{watched}"
        );
    }
    assert!(
        rows.last()
            .is_some_and(|r| r.contains("Running") && r.contains(V2)),
        "kubectl get hollo social -w did not end Running at {V2}:\n{watched}"
    );
    // The first recorded phase may be the Running just before the edit took effect.
    let after: Vec<&str> = t
        .phases
        .iter()
        .map(String::as_str)
        .skip_while(|p| *p == "Running")
        .collect();
    assert_eq!(
        after,
        ["ScalingDown", "Migrating", "RollingOut", "Running"],
        "phases in order; observed: {t:#?}"
    );
    assert!(
        t.violations.is_empty(),
        "ordering violated: {:#?}",
        t.violations
    );
    assert!(t.job_succeeded, "{t:#?}");
    ns.wait_replicas("web", 1, 30).await;
    ns.wait_replicas("worker", 2, 30).await;
    for p in ns
        .ready_pods("worker")
        .await
        .iter()
        .chain(ns.ready_pods("web").await.iter())
    {
        assert_eq!(
            label(p, "app.kubernetes.io/version"),
            V2,
            "{}",
            p.name_any()
        );
    }
}

/// (deleted, object) of a watch event; None for the list markers.
fn obj_event<K>(e: watcher::Event<K>, wrap: fn(K) -> Obj) -> Option<(bool, Obj)> {
    match e {
        watcher::Event::Apply(o) | watcher::Event::InitApply(o) => Some((false, wrap(o))),
        watcher::Event::Delete(o) => Some((true, wrap(o))),
        _ => None,
    }
}

enum Obj {
    Hollo(Box<DynamicObject>),
    Pod(Box<Pod>),
    Job(Box<Job>),
}

/// A watch's events as `(tag, (deleted, object))`.
type Tagged = futures::stream::BoxStream<
    'static,
    Result<(&'static str, Option<(bool, Obj)>), watcher::Error>,
>;

fn tagged<K>(api: Api<K>, cfg: watcher::Config, tag: &'static str, wrap: fn(K) -> Obj) -> Tagged
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + k8s_openapi::serde::de::DeserializeOwned
        + Send
        + 'static,
{
    watcher(api, cfg)
        .map(move |e| e.map(|e| (tag, obj_event(e, wrap))))
        .boxed()
}

/// The watches of the Hollo (`"hollo"`) and of its pods (`"pod"`).
fn hollo_and_pod_events(ns: &Ns) -> Vec<Tagged> {
    vec![
        tagged(ns.hollos(), watcher::Config::default(), "hollo", |o| {
            Obj::Hollo(Box::new(o))
        }),
        tagged(
            ns.api::<Pod>(),
            watcher::Config::default().labels(&format!("app.kubernetes.io/instance={HOLLO}")),
            "pod",
            |o| Obj::Pod(Box::new(o)),
        ),
    ]
}

/// After the upgrade's edit: records the Hollo's phase in `phases` when it changed (logging
/// it); whether the upgrade is over (Running at 0.2.0, after another phase).
fn upgraded_to_v2(ns: &Ns, h: &DynamicObject, phases: &mut Vec<String>) -> bool {
    let p = phase(h);
    if phases.last() != Some(&p) {
        ns.log(&format!("phase {p}"));
        phases.push(p.clone());
    }
    p == "Running" && h.data["status"]["currentVersion"] == V2 && phases.len() > 1
}

/// Scenario 6: a migration that exits 1 → MigrationFailed, Degraded, a Warning event, nothing of
/// the new version; fixing `migrations.command` recovers.
#[tokio::test]
async fn failing_migration_then_fix() {
    let ns = running_minimal("migfail").await;

    ns.merge_hollo(json!({"spec": {"version": V2,
        "migrations": {"command": ["sh", "-c", "exit 1"], "backoffLimit": 0}}}))
        .await;
    let h = ns.wait_migration_failed(90).await;
    ns.log(&format!("failed: {}", status_line(&h)));
    let ev = ns.wait_event("MigrationFailed", "Warning", 30).await;
    ns.log(&format!("event: {:?}", ev.note));
    // Nothing of the new version, and the old one stays down, while it fails.
    holds_for("nothing of the new version runs", 5, || async {
        let pods: Api<Pod> = ns.api();
        let app: Vec<String> = pods
            .list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={HOLLO}")))
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|p| is_app_pod(p))
            .map(|p| format!("{}@{}", p.name_any(), label(p, "app.kubernetes.io/version")))
            .collect();
        if !app.is_empty() {
            return Err(format!("web/worker pods exist: {app:?}"));
        }
        let deps: Api<Deployment> = ns.api();
        for d in deps
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
        {
            let v = d
                .spec
                .template
                .metadata
                .as_ref()
                .and_then(|m| m.labels.as_ref())
                .and_then(|l| l.get("app.kubernetes.io/version").cloned());
            if v.as_deref() == Some(V2) {
                return Err(format!(
                    "Deployment {} has the new version's template",
                    d.name_any()
                ));
            }
        }
        Ok(())
    })
    .await;

    // Retried with back-off (30 s for the first retry), each attempt a new Job, still failing.
    let jobs: Api<Job> = ns.api();
    let first = format!("{HOLLO}-migrate-0-2-0");
    let retry = format!("{first}-r1");
    let (failed_at, retried) = wait_until("the retry Job after the back-off", 90, || async {
        let f = |j: &Job| {
            j.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| {
                    cs.iter()
                        .find(|c| c.type_ == "Failed" && c.status == "True")
                })
                .and_then(|c| c.last_transition_time.clone())
        };
        let j0 = jobs.get_opt(&first).await.map_err(|e| e.to_string())?;
        let j1 = jobs.get_opt(&retry).await.map_err(|e| e.to_string())?;
        let h = ns.hollo().await;
        match (j0.as_ref().and_then(f), j1.as_ref().and_then(f)) {
            (Some(t0), Some(_)) if h.data["status"]["migrationAttempts"].as_i64() >= Some(2) => {
                Ok((t0, j1.unwrap().creation_timestamp().unwrap()))
            }
            (a, b) => Err(format!(
                "{first} failed at {a:?}, {retry} failed at {b:?}; {}",
                status_line(&h)
            )),
        }
    })
    .await;
    let waited = retried.0.as_second() - failed_at.0.as_second();
    ns.log(&format!(
        "retry Job created {waited}s after the first attempt failed"
    ));
    assert!(
        waited >= 25,
        "retried after {waited}s, before the 30 s back-off"
    );
    assert_eq!(phase(&ns.hollo().await), "MigrationFailed");

    // Fix the command: the operator retries at once and the new version comes up.
    ns.merge_hollo(json!({"spec": {"migrations": {"command": ["hollo", "migrate"]}}}))
        .await;
    let h = ns.wait_running(V2, 90).await;
    assert_eq!(
        condition(&h, "Degraded").map(|c| c.0).as_deref(),
        Some("False")
    );
    ns.wait_replicas("worker", 2, 30).await;
}

/// Issue 63 item 6: `upgrade.maintenanceWindows`. A first install never waits; a version change
/// outside every window waits in `WaitingForWindow` with the old pods untouched, no migration
/// Job, `Ready=True` and the next window's start in `Progressing`; an approval of another
/// version changes nothing; `kubectl annotate … hollo.social/approve-upgrade=0.2.0` lets it
/// proceed; a window that is open lets the next one through by itself.
#[tokio::test]
async fn upgrade_waits_for_its_maintenance_window() {
    let ns = Ns::new("window").await;
    ns.assert_rejected(
        json!({"spec": {"upgrade": {"maintenanceWindows": [
            {"schedule": "0 2 * * 6", "duration": "2 hours"}]}}}),
        "duration must be hours and minutes",
    )
    .await;
    ns.prepare_instance().await;
    // A daily one-hour window twelve hours from now (UTC): closed for the whole scenario.
    let hour = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs()
        / 3600
        % 24;
    let at = (hour + 12) % 24;
    let mut h = minimal_example();
    merge(
        &mut h,
        &json!({"spec": {"upgrade": {"maintenanceWindows": [
            {"schedule": format!("0 {at} * * *"), "duration": "1h"}]}}}),
    );
    ns.apply_hollo(&h)
        .await
        .expect("apply a Hollo with a window");
    ns.wait_running(V1, 90).await;
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
    let jobs: Api<Job> = ns.api();
    let migration = format!("{HOLLO}-migrate-0-2-0");
    let before = pods().await;
    ns.merge_hollo(json!({"spec": {"version": V2}})).await;
    let m = ns
        .wait_condition("Progressing", "False", "WaitingForWindow", 60)
        .await;
    ns.log(&format!("Progressing: {m}"));
    assert!(
        m.contains("version 0.2.0 waits for the next maintenance window, opening at ")
            && m.contains(&format!("T{at:02}:00:00+00:00[UTC]"))
            && m.contains("hollo.social/approve-upgrade: \"0.2.0\""),
        "{m}"
    );
    let waiting = || async {
        let h = ns.hollo().await;
        let ready = condition(&h, "Ready").map(|c| c.0);
        if phase(&h) != "WaitingForWindow" || ready.as_deref() != Some("True") {
            return Err(status_line(&h));
        }
        if pods().await != before {
            return Err("pods changed".into());
        }
        match jobs.get_opt(&migration).await {
            Ok(None) => Ok(()),
            other => Err(format!("{migration}: {other:?}")),
        }
    };
    holds_for(
        "WaitingForWindow: the 0.1.0 pods serve, no migration",
        3,
        waiting,
    )
    .await;
    ns.kubectl(&[
        "annotate",
        "hollo",
        HOLLO,
        "hollo.social/approve-upgrade=0.3.0",
    ]);
    holds_for("an approval of another version changes nothing", 3, waiting).await;

    ns.kubectl(&[
        "annotate",
        "hollo",
        HOLLO,
        "--overwrite",
        "hollo.social/approve-upgrade=0.2.0",
    ]);
    ns.wait_running(V2, 120).await;
    assert!(
        jobs.get_opt(&migration).await.expect("get").is_some(),
        "migrated once approved"
    );

    // A window that is open now: the next version goes through without an approval.
    ns.wait_replicas("worker", 2, 60).await;
    ns.merge_hollo(
        json!({"spec": {"version": "0.3.0", "upgrade": {"maintenanceWindows": [
        {"schedule": format!("0 {at} * * *"), "duration": "1h"},
        {"schedule": "* * * * *", "duration": "1h", "timeZone": "Pacific/Kiritimati"}]}}}),
    )
    .await;
    ns.wait_running("0.3.0", 120).await;
}

/// Scenario 7: the apiserver rejects invalid specs with the CRD's CEL messages; an over-budget
/// spec is accepted but reported (`ConnectionBudget=False`, Warning event).
#[tokio::test]
async fn admission_rejections_and_connection_budget() {
    let ns = Ns::new("admission").await;
    let cases = [
        (
            json!({"spec": {"worker": {"autoscaling": {"enabled": false, "keda": {"enabled": true}}}}}),
            "worker.autoscaling.keda.enabled requires worker.autoscaling.enabled",
        ),
        (
            json!({"spec": {"web": {"ingress": {"enabled": true}}}}),
            "web.ingress.enabled requires web.ingress.host",
        ),
        (
            json!({"spec": {"worker": {"autoscaling": {"enabled": true, "minReplicas": 5, "maxReplicas": 2, "targetCPUUtilization": 70}}}}),
            "worker.autoscaling.minReplicas must be <= maxReplicas",
        ),
        (
            json!({"spec": {"worker": {"disruptionBudget": {"maxUnavailable": 0}}}}),
            "disruptionBudget.maxUnavailable must be at least 1",
        ),
        (
            json!({"spec": {"storage": {"disk": "fs", "fs": null}}}),
            "storage.disk=fs requires storage.fs",
        ),
        (
            json!({"spec": {"migrations": {"command": []}}}),
            "migrations.command must not be empty",
        ),
    ];
    for (patch, message) in cases {
        ns.assert_rejected(patch, message).await;
    }
    // The same message reaches a kubectl user.
    let bad = serde_json::to_string(&minimal_with(
        json!({"spec": {"web": {"ingress": {"enabled": true}}}}),
    ))
    .unwrap();
    let err = ns
        .try_kubectl(&["apply", "-f", "-"], Some(&bad))
        .expect_err("kubectl apply of an invalid Hollo");
    assert!(
        err.contains("web.ingress.enabled requires web.ingress.host"),
        "{err}"
    );

    // Over budget: accepted, reported with the numbers.
    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_with(
        json!({"spec": {"database": {"maxConnections": 5}, "worker": {"replicas": 3}}}),
    ))
    .await
    .expect("an over-budget Hollo is valid");
    let h = ns
        .wait_condition_status("ConnectionBudget", "False", 60)
        .await;
    let (_, reason, message) = condition(&h, "ConnectionBudget").unwrap();
    ns.log(&format!("ConnectionBudget=False {reason}: {message}"));
    assert!(
        message.contains('5'),
        "the message must give the numbers: {message}"
    );
    let ev = ns
        .wait_event("ConnectionBudgetExceeded", "Warning", 30)
        .await;
    ns.log(&format!("event: {:?}", ev.note));
    // Back under budget: True again.
    ns.merge_hollo(json!({"spec": {"database": {"maxConnections": 500}}}))
        .await;
    ns.wait_condition_status("ConnectionBudget", "True", 60)
        .await;
}

/// Scenario 8: drift is undone (deleted worker Deployment, edited image); deleting the Hollo
/// garbage-collects every child.
#[tokio::test]
async fn drift_restored_and_children_collected() {
    let ns = running_minimal("drift").await;
    let deps: Api<Deployment> = ns.api();
    let worker = format!("{HOLLO}-worker");
    let before = ns.deployment(&worker).await.unwrap();
    let image = image_of(&before);

    deps.delete(&worker, &DeleteParams::foreground())
        .await
        .expect("delete worker");
    let old_uid = before.uid();
    wait_until("worker Deployment recreated", 60, || async {
        let d = ns.deployment(&worker).await.ok_or("absent")?;
        if d.uid() != old_uid && d.metadata.deletion_timestamp.is_none() {
            Ok(())
        } else {
            Err("the old one is still there".to_string())
        }
    })
    .await;
    ns.wait_replicas("worker", 2, 60).await;

    ns.kubectl(&[
        "set",
        "image",
        &format!("deployment/{worker}"),
        "hollo=example.invalid/evil:1",
    ]);
    wait_until("worker image restored", 60, || async {
        let d = ns.deployment(&worker).await.ok_or("absent")?;
        let now = image_of(&d);
        if now == image {
            Ok(())
        } else {
            Err(format!("image {now}"))
        }
    })
    .await;

    // Delete the Hollo: everything it made goes (GC through owner references).
    let mut children = vec![];
    for d in deps.list(&ListParams::default()).await.unwrap() {
        children.push(format!("Deployment/{}", d.name_any()));
    }
    ns.log(&format!("children before delete: {children:?}"));
    assert!(children.len() >= 2);
    ns.kubectl(&["delete", "hollo", "social"]);
    wait_until("every child garbage-collected", 120, || async {
        let mut left = [
            names_of("Deployment", &ns.api::<Deployment>()).await?,
            names_of("Service", &ns.api::<Service>()).await?,
            names_of("PDB", &ns.api::<PodDisruptionBudget>()).await?,
            names_of("Job", &ns.api::<Job>()).await?,
            names_of("Pod", &ns.api::<Pod>()).await?,
        ]
        .concat();
        let h = ns
            .hollos()
            .get_opt(HOLLO)
            .await
            .map_err(|e| e.to_string())?;
        if h.is_some() {
            left.push("Hollo/social".into());
        }
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("left: {left:?}"))
        }
    })
    .await;
}

/// Issue 35 items 2, 3 and 7 on a real apiserver: per-role scheduling, the default soft
/// spread, pod labels, extra volumes, migration resources, web autoscaling with a `behavior`
/// all render and round-trip (the stored objects carry them), and a rotated admin token (not a
/// CloudNativePG Secret) rolls the pods through the Secrets hash.
#[tokio::test]
async fn issue35_scheduling_web_autoscaling_and_secret_roll() {
    use k8s_openapi::api::core::v1::Secret;
    let ns = Ns::new("issue35").await;
    ns.prepare_instance().await;
    ns.kubectl(&[
        "create",
        "secret",
        "generic",
        "hollo-admin",
        "--from-literal=token=first-token",
    ]);
    let behavior = json!({"scaleDown": {"stabilizationWindowSeconds": 600,
                          "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]}});
    let manifest = minimal_with(json!({"spec": {
        "adminTokenRef": {"name": "hollo-admin", "key": "token"},
        "database": {"maxConnections": 300},
        "web": {"autoscaling": {"enabled": true, "minReplicas": 1, "maxReplicas": 3,
                                "targetCPUUtilization": 60, "behavior": behavior},
                "scheduling": {"tolerations": [{"key": "hollo-web", "operator": "Exists",
                                                "effect": "NoSchedule"}]}},
        "worker": {"scheduling": {"topologySpreadConstraints": [
            {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
             "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": {"matchLabels": {"app.kubernetes.io/component": "worker"}}}]}},
        "migrations": {"resources": {"requests": {"cpu": "50m", "memory": "64Mi"}}},
        "pod": {"labels": {"team": "fedi"},
                "volumes": [{"name": "scratch", "emptyDir": {}}],
                "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}]},
    }}));
    ns.apply_hollo(&manifest)
        .await
        .expect("the real apiserver admits every new field");
    let stored = ns.hollo().await;
    assert_eq!(
        stored.data["spec"]["web"]["autoscaling"]["behavior"], behavior,
        "behavior round-trips"
    );
    assert_eq!(stored.data["spec"]["pod"]["labels"]["team"], "fedi");
    ns.wait_running(V1, 180).await;

    let web = ns.deployment(&format!("{HOLLO}-web")).await.expect("web");
    let pod = web.spec.template.spec.clone().expect("pod");
    let spread = pod
        .topology_spread_constraints
        .clone()
        .expect("default spread");
    assert_eq!(spread.len(), 1);
    assert_eq!(spread[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(spread[0].when_unsatisfiable, "ScheduleAnyway");
    assert_eq!(
        spread[0].match_label_keys,
        Some(vec!["pod-template-hash".to_string()])
    );
    let tol = pod.tolerations.clone().unwrap_or_default();
    assert!(
        tol.iter().any(|t| t.key.as_deref() == Some("hollo-web")),
        "{tol:?}"
    );
    assert!(pod.volumes.iter().flatten().any(|v| v.name == "scratch"));
    assert!(
        pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .any(|m| m.mount_path == "/scratch")
    );
    assert_eq!(label(&web, "app.kubernetes.io/component"), "web");
    let labels = web
        .spec
        .template
        .metadata
        .clone()
        .and_then(|m| m.labels)
        .unwrap_or_default();
    assert_eq!(labels.get("team").map(String::as_str), Some("fedi"));
    let worker = ns
        .deployment(&format!("{HOLLO}-worker"))
        .await
        .expect("worker");
    let wspread = worker
        .spec
        .template
        .spec
        .clone()
        .and_then(|p| p.topology_spread_constraints)
        .expect("the worker's own spread");
    assert_eq!(wspread[0].max_skew, 2);

    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    // Applied after the Deployments: wait for it rather than assume it is there already.
    let hpa = wait_exists("HPA", &hpas, &format!("{HOLLO}-web"), 60).await;
    assert_eq!(hpa.spec.scale_target_ref.name, format!("{HOLLO}-web"));
    assert_eq!((hpa.spec.min_replicas, hpa.spec.max_replicas), (Some(1), 3));
    let down = hpa
        .spec
        .behavior
        .and_then(|b| b.scale_down)
        .expect("behavior");
    assert_eq!(down.stabilization_window_seconds, Some(600));

    let jobs: Api<Job> = ns.api();
    let job = jobs
        .list(&ListParams::default().labels("app.kubernetes.io/component=migration"))
        .await
        .expect("jobs")
        .items
        .into_iter()
        .next()
        .expect("the migration Job");
    let requests = job
        .spec
        .and_then(|s| s.template.spec)
        .expect("pod")
        .containers[0]
        .resources
        .clone()
        .and_then(|r| r.requests)
        .unwrap_or_default();
    assert_eq!(requests.get("cpu").map(|q| q.0.as_str()), Some("50m"));

    // Item 7: rotate the admin token; the operator's periodic GET (≤ 60 s) rolls the pods.
    let before = secrets_hash(&web).expect("the Secrets hash is on the web template");
    assert_eq!(secrets_hash(&worker), Some(before.clone()), "every role");
    let secrets: Api<Secret> = ns.api();
    secrets
        .patch(
            "hollo-admin",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"token": "second-token"}})),
        )
        .await
        .expect("rotate the token");
    ns.wait_web_hash_changes(&before, "web template carries the rotated token's hash")
        .await;
}

/// Issue 35 items 1, 4 and 6 on the real apiserver: the CEL rules refuse a route without a
/// Gateway and a policy without ingress namespaces; without the Gateway API's CRD the rest is
/// applied and `Degraded=True GatewayAPINotInstalled` (Warning event); the NetworkPolicies
/// round-trip as rendered (the e2e CNI does not enforce them: what is checked is what the
/// apiserver stores); installing the HTTPRoute CRD makes the route without any edit; `-o wide`
/// shows the extra columns; the leader's `/metrics` has this Hollo's gauges; turning both off
/// deletes the route and the policies.
#[tokio::test]
async fn issue35_http_route_and_network_policy() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let ns = Ns::new("i35route").await;
    let crd_file = std::env::var("HOLLO_E2E_GATEWAY_CRD").expect(
        "HOLLO_E2E_GATEWAY_CRD (the HTTPRoute CRD from the Gateway API's module; e2e/run sets it)",
    );
    let (external, preinstalled) =
        crd_preinstalled(&ns, "httproutes.gateway.networking.k8s.io").await;
    ns.prepare_instance().await;

    // Admission (CEL): 422 with the rule's message, nothing stored.
    for (patch, message) in [
        (
            json!({"spec": {"web": {"httpRoute": {"enabled": true}}}}),
            "web.httpRoute.enabled requires at least one parentRefs entry",
        ),
        (
            json!({"spec": {"networkPolicy": {"enabled": true,
                "database": [{"ipBlock": {"cidr": "10.0.5.10/32"}}]}}}),
            "networkPolicy.enabled requires ingressNamespaces",
        ),
        (
            json!({"spec": {"networkPolicy": {"enabled": true, "ingressNamespaces": ["gw"]}}}),
            "networkPolicy.enabled needs to know where the database is",
        ),
    ] {
        ns.assert_rejected(patch, message).await;
    }
    assert!(ns.hollos().get_opt(HOLLO).await.unwrap().is_none());

    let route = json!({"enabled": true,
        "parentRefs": [{"name": "public", "namespace": "gateway", "sectionName": "https"}],
        "hostnames": ["hollo.example.com"]});
    ns.apply_hollo(&minimal_with(json!({"spec": {
        "web": {"httpRoute": route},
        "networkPolicy": {"enabled": true, "ingressNamespaces": ["gateway"],
                          "metricsNamespaces": ["monitoring"],
                          "database": [{"ipBlock": {"cidr": "10.0.5.10/32"}}]},
    }})))
    .await
    .expect("apply Hollo");

    // The NetworkPolicies, as the apiserver stores them.
    let nps: Api<NetworkPolicy> = ns.api();
    let web_np = wait_exists("NetworkPolicy", &nps, &format!("{HOLLO}-web"), 60).await;
    // Applied one after the other: the worker's may come a moment after the web's.
    let worker_np = wait_exists("NetworkPolicy", &nps, &format!("{HOLLO}-worker"), 60).await;
    let web = serde_json::to_value(web_np.spec.expect("spec")).expect("json");
    let worker = serde_json::to_value(worker_np.spec.expect("spec")).expect("json");
    ns.log(&format!("web policy: {web}"));
    assert_eq!(web["policyTypes"], json!(["Ingress", "Egress"]));
    assert_eq!(
        web["ingress"][0]["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"],
        json!(["gateway"])
    );
    assert_eq!(web["ingress"][0]["ports"][0]["port"], "http");
    assert_eq!(
        worker["ingress"],
        json!([{"from": [{"namespaceSelector": {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": ["monitoring"]}]}}],
            "ports": [{"port": "health", "protocol": "TCP"}]}]),
        "workers: only scraping"
    );
    let egress = worker["egress"].as_array().expect("egress");
    let public = egress
        .iter()
        .find(|r| r["to"][0]["ipBlock"]["cidr"] == "0.0.0.0/0")
        .expect("a public internet rule");
    let except = public["to"][0]["ipBlock"]["except"]
        .as_array()
        .expect("except");
    for private in [
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
    ] {
        assert!(except.contains(&json!(private)), "{private} excluded");
    }
    assert!(
        egress
            .iter()
            .any(|r| r["to"][0]["ipBlock"]["cidr"] == "10.0.5.10/32"
                && r["ports"][0]["port"] == 5432),
        "the database"
    );

    let routes: Api<DynamicObject> =
        Api::namespaced_with(ns.client.clone(), &ns.name, &http_route_resource());
    if !preinstalled {
        let ev = ns.wait_event("GatewayAPINotInstalled", "Warning", 90).await;
        ns.log(&format!("without the Gateway API: {:?}", ev.note));
        ns.wait_condition("Degraded", "True", "GatewayAPINotInstalled", 60)
            .await;
        ns.kubectl(&["apply", "--server-side", "-f", &crd_file]);
    } else {
        assert!(
            external,
            "the HTTPRoute CRD exists before this scenario installed it"
        );
    }
    let r = wait_exists("HTTPRoute", &routes, &format!("{HOLLO}-web"), 90).await;
    let spec = &r.data["spec"];
    ns.log(&format!("HTTPRoute spec: {spec}"));
    assert_eq!(spec["hostnames"], json!(["hollo.example.com"]));
    assert_eq!(spec["parentRefs"][0]["name"], "public");
    assert_eq!(spec["parentRefs"][0]["sectionName"], "https");
    assert_eq!(
        spec["rules"][0]["backendRefs"][0]["name"],
        format!("{HOLLO}-web")
    );
    assert_eq!(spec["rules"][0]["backendRefs"][0]["port"], 3000);
    let h = ns.wait_running(V1, 120).await;
    wait_until("HTTPRoute=True, Degraded=False", 60, || async {
        let h = ns.hollo().await;
        match (condition(&h, "HTTPRoute"), condition(&h, "Degraded")) {
            (Some((r, _, _)), Some((d, _, _))) if r == "True" && d == "False" => Ok(()),
            other => Err(format!("{other:?}; {}", status_line(&h))),
        }
    })
    .await;

    // `kubectl get hollo -o wide` (issue 35 item 1).
    let wide = ns.kubectl(&["get", "hollo", HOLLO, "-o", "wide"]);
    ns.log(&wide);
    let header = wide.lines().next().unwrap_or_default();
    for col in [
        "PHASE",
        "TARGET",
        "WEB",
        "WORKERS",
        "DEGRADED",
        "BUDGET",
        "MIGRATIONS FAILED",
    ] {
        assert!(header.contains(col), "{col} in {header:?}");
    }
    let plain = ns.kubectl(&["get", "hollo", HOLLO]);
    assert!(
        !plain.contains("TARGET"),
        "the extra columns are -o wide only"
    );

    // The leader's /metrics carries this Hollo's gauges (issue 35 item 1).
    let ports: Vec<String> = std::env::var("HOLLO_E2E_OPERATORS")
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|s| s.rsplit('=').next().map(str::to_string))
        .collect();
    let want = format!(
        "hollo_operator_hollo_phase{{hollo_namespace=\"{}\",hollo=\"{HOLLO}\",phase=\"Running\"}} 1",
        ns.name
    );
    wait_until("per-Hollo gauges on an operator's /metrics", 60, || async {
        for port in &ports {
            let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/metrics")).await else {
                continue;
            };
            let text = r.text().await.unwrap_or_default();
            if text.contains(&want) {
                let ready = format!(
                    "hollo_operator_hollo_ready_replicas{{hollo_namespace=\"{}\",hollo=\"{HOLLO}\",role=\"worker\"}}",
                    ns.name
                );
                return if text.contains(&ready)
                    && text.contains("hollo_operator_hollo_condition{")
                {
                    Ok(())
                } else {
                    Err(format!("gauges missing on port {port}"))
                };
            }
        }
        Err(format!("no operator has {want}"))
    })
    .await;
    assert!(phase(&h) == "Running");

    // Off → the route and the policies are deleted.
    ns.merge_hollo(json!({"spec": {"web": {"httpRoute": {"enabled": false}},
                                   "networkPolicy": {"enabled": false}}}))
        .await;
    wait_until("HTTPRoute and NetworkPolicies deleted", 60, || async {
        let r = routes
            .get_opt(&format!("{HOLLO}-web"))
            .await
            .map_err(|e| e.to_string())?;
        let n = nps
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if r.is_none() && n.items.is_empty() {
            Ok(())
        } else {
            Err(format!("route {}, policies {}", r.is_some(), n.items.len()))
        }
    })
    .await;
}

fn http_route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("gateway.networking.k8s.io", "v1", "HTTPRoute"),
        "httproutes",
    )
}

/// Issue 35 item 5 (and item 3's `pod.caBundle` on the web Deployment) on the real apiserver and
/// controller manager: `spec.maintenance` makes the
/// cleanup CronJobs (the real CronJob controller runs them on schedule; kwok completes their
/// pods, so what runs here is the scheduling, not `hollo cleanup` itself), `status.lastCleanup`
/// follows the CronJob's `lastSuccessfulTime`, and turning a cleanup off deletes its CronJob.
#[tokio::test]
async fn issue35_scheduled_cleanups() {
    use k8s_openapi::api::batch::v1::CronJob;
    let ns = Ns::new("i35clean").await;
    ns.prepare_instance().await;
    ns.assert_rejected(
        json!({"spec": {"maintenance": {
            "remotePosts": {"enabled": true, "olderThanDays": 0}}}}),
        "olderThanDays must be 1-36500",
    )
    .await;
    // Issue 35 item 3 rides along: a CA bundle from a ConfigMap.
    ns.kubectl(&[
        "create",
        "configmap",
        "corp-ca",
        "--from-literal=ca.crt=-----BEGIN CERTIFICATE-----",
    ]);
    ns.apply_hollo(&minimal_with(json!({"spec": {"maintenance": {
        "remotePosts": {"enabled": true, "schedule": "* * * * *", "olderThanDays": 14},
        "media": {"enabled": true, "schedule": "0 4 * * 0"},
        "timeZone": "Etc/UTC"},
        "pod": {"caBundle": {"configMap": "corp-ca"}}}})))
        .await
        .expect("apply Hollo");
    ns.wait_running(V1, 120).await;
    let web = ns.deployment(&format!("{HOLLO}-web")).await.expect("web");
    let pod = web.spec.template.spec.as_ref().expect("pod");
    assert!(
        pod.volumes.iter().flatten().any(|v| v.name == "ca-bundle"
            && v.config_map.as_ref().map(|c| c.name.as_str()) == Some("corp-ca")),
        "the CA bundle volume"
    );
    assert_eq!(
        env_of(&web, 0, "EXTRA_CA_CERTS_FILE").as_deref(),
        Some("/etc/hollo/ca/ca.crt")
    );
    let cjs: Api<CronJob> = ns.api();
    let remote = wait_exists(
        "CronJob",
        &cjs,
        &format!("{HOLLO}-cleanup-remote-posts"),
        60,
    )
    .await;
    let media = wait_exists("CronJob", &cjs, &format!("{HOLLO}-cleanup-media"), 60).await;
    assert_eq!(remote.spec.schedule, "* * * * *");
    assert_eq!(remote.spec.time_zone.as_deref(), Some("Etc/UTC"));
    assert_eq!(remote.spec.suspend, Some(false));
    assert_eq!(remote.spec.concurrency_policy.as_deref(), Some("Forbid"));
    let c = cron_job_container(&remote);
    assert_cleans_remote_posts(c, 14);
    assert_eq!(
        cron_job_container(&media).args,
        Some(vec!["media".to_string()])
    );
    // The CronJob controller starts the Job at the next minute; kwok completes its pod.
    ns.wait_remote_posts_cleaned(150).await;

    ns.merge_hollo(json!({"spec": {"maintenance": {"remotePosts": {"enabled": false}}}}))
        .await;
    wait_until("remote-posts CronJob deleted", 60, || async {
        match cjs
            .get_opt(&format!("{HOLLO}-cleanup-remote-posts"))
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(()),
            Some(_) => Err("still there".to_string()),
        }
    })
    .await;
    assert!(
        cjs.get_opt(&format!("{HOLLO}-cleanup-media"))
            .await
            .unwrap()
            .is_some(),
        "the media cleanup stays"
    );
}

/// Issue 34 item 5 (R-OP-1, R-OP-STATUS): the operations verbs. `spec.stopped: true` → every
/// role at 0 pods, the worker HPA deleted, Service, Deployments and PDB kept, phase and condition
/// `Stopped`; `false` → `Running` again with the replicas and the HPA back.
/// `spec.reconciliationPaused: true` → `ReconciliationPaused=True` for the generation of an edit
/// made while paused, and that edit is not carried out until it is `false` again.
#[tokio::test]
async fn issue34_stopped_and_paused_reconciliation() {
    let ns = Ns::new("stop").await;
    ns.prepare_instance().await;
    let manifest = minimal_with(json!({"spec": {"worker": {"replicas": 2,
        "autoscaling": {"enabled": true, "minReplicas": 2, "maxReplicas": 4}}}}));
    ns.apply_hollo(&manifest).await.expect("apply the Hollo");
    ns.wait_running(V1, 90).await;
    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    let worker = format!("{HOLLO}-worker");
    wait_until("HPA social-worker", 30, || async {
        match hpas.get_opt(&worker).await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    ns.wait_replicas("worker", 2, 60).await;

    // Stop: 0 pods, no autoscaler, everything else kept.
    ns.stop(60).await;
    let pods: Api<Pod> = ns.api();
    wait_until("no pod of any role", 60, || async {
        let left = pods
            .list(&ListParams::default().labels(&format!(
                "app.kubernetes.io/instance={HOLLO},app.kubernetes.io/component in (web,worker,all)"
            )))
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if left == 0 {
            Ok(())
        } else {
            Err(format!("{left} pods left"))
        }
    })
    .await;
    wait_until("HPA removed while stopped", 30, || async {
        match hpas.get_opt(&worker).await {
            Ok(None) => Ok(()),
            other => Err(format!("{:?}", other.map(|o| o.map(|h| h.spec)))),
        }
    })
    .await;
    let services: Api<Service> = ns.api();
    let pdbs: Api<PodDisruptionBudget> = ns.api();
    holds_for(
        "Service, Deployments and worker PDB kept while stopped",
        5,
        || async {
            let web = format!("{HOLLO}-web");
            services
                .get_opt(&web)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no Service")?;
            ns.deployment(&web).await.ok_or("no web Deployment")?;
            ns.deployment(&worker).await.ok_or("no worker Deployment")?;
            pdbs.get_opt(&worker)
                .await
                .map_err(|e| e.to_string())?
                .ok_or("no worker PDB")?;
            let h = ns.hollo().await;
            match phase(&h).as_str() {
                "Stopped" => Ok(()),
                _ => Err(status_line(&h)),
            }
        },
    )
    .await;
    ns.wait_event("Stopped", "Normal", 30).await;

    // Start again: Running, replicas and the HPA back.
    ns.start(V1, 90, 60).await;
    wait_until("HPA back after the stop", 30, || async {
        match hpas.get_opt(&worker).await {
            Ok(Some(_)) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    // Pause, then edit: the operator marks the edit's generation paused and leaves it alone.
    ns.pause_and_scale_web(30).await;
    let web = format!("{HOLLO}-web");
    holds_for("web stays at 1 replica while paused", 6, || async {
        let d = ns.deployment(&web).await.ok_or("no web Deployment")?;
        let h = ns.hollo().await;
        match (d.spec.replicas, phase(&h).as_str()) {
            (Some(1), "Running") => Ok(()),
            (r, p) => Err(format!(
                "replicas {r:?}, phase {p}: the paused edit was applied"
            )),
        }
    })
    .await;

    // Unpause: the edit is carried out.
    ns.unpause(V1, 60).await;
}

/// UIDs of the web and worker pods that are not terminating.
async fn role_pod_uids(ns: &Ns) -> BTreeSet<String> {
    ns.live_pods("web,worker")
        .await
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect()
}

/// Issue 34 item 4 (R-OP-UPG, R-OP-MIG): no outage by mistake. Running at 0.2.0, whose image
/// reports schema 20991231000001 (on kwok images do not run: that probe's answer is a Job this
/// test makes while reconciliation is paused, the way the operator makes it), `version: 0.1.0`
/// whose probe reports an older schema is refused before anything stops:
/// `VersionAccepted=False` (`BelowDatabaseSchema`), a Warning event, phase `Running` at 0.2.0,
/// the same pods, no migration Job. `upgrade.allowDowngrade: true` then downgrades the usual
/// way, to `Running` at 0.1.0.
#[tokio::test]
async fn issue34_downgrade_below_the_schema_is_refused() {
    let ns = Ns::new("downgrade").await;
    ns.prepare_instance().await;
    let h = ns
        .apply_hollo(&minimal_with(json!({"spec": {"version": V2}})))
        .await
        .expect("apply the Hollo");
    let uid = h.metadata.uid.clone().expect("uid");
    ns.wait_running(V2, 90).await;
    ns.wait_replicas("web", 1, 60).await;
    ns.wait_replicas("worker", 2, 60).await;

    // What the 0.2.0 image's version probe says, made while the operator is paused (it would
    // otherwise delete a finished probe of the running version as history).
    ns.merge_hollo(json!({"spec": {"reconciliationPaused": true}}))
        .await;
    ns.wait_condition_status("ReconciliationPaused", "True", 30)
        .await;
    let newer = r#"{"version":"0.2.0","schemaVersion":20991231000001,"taskDefinitionVersion":1}"#;
    let older = r#"{"version":"0.1.0","schemaVersion":20260101000000,"taskDefinitionVersion":1}"#;
    let labels = json!({
        "app.kubernetes.io/name": "hollo",
        "app.kubernetes.io/instance": HOLLO,
        "app.kubernetes.io/component": "version-probe",
        "app.kubernetes.io/version": V2,
        "app.kubernetes.io/managed-by": "hollo-operator",
    });
    let probe: Job = serde_json::from_value(json!({
        "metadata": {
            "name": format!("{HOLLO}-version-0-2-0"),
            "labels": labels,
            "ownerReferences": [{"apiVersion": "hollo.social/v1alpha1", "kind": "Hollo",
                                 "name": HOLLO, "uid": uid, "controller": true}],
        },
        "spec": {"backoffLimit": 0, "template": {
            "metadata": {"labels": labels},
            "spec": {"restartPolicy": "Never", "containers": [{
                "name": "hollo", "image": "ghcr.io/hollo-social/hollo:0.2.0",
                "command": ["echo", newer]}]}}},
    }))
    .expect("probe Job");
    let jobs: Api<Job> = ns.api();
    jobs.create(&Default::default(), &probe)
        .await
        .expect("create the 0.2.0 probe");
    wait_until("the 0.2.0 probe completed", 60, || async {
        let j = jobs
            .get(&format!("{HOLLO}-version-0-2-0"))
            .await
            .map_err(|e| e.to_string())?;
        let done = j
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.type_ == "Complete" && c.status == "True")
            });
        if done {
            Ok(())
        } else {
            Err(format!("{:?}", j.status))
        }
    })
    .await;

    let before = role_pod_uids(&ns).await;
    assert_eq!(before.len(), 3, "1 web + 2 workers before the downgrade");
    let gen_ = ns
        .merge_hollo(
            json!({"spec": {"version": V1, "reconciliationPaused": false,
            "migrations": {"versionCommand": ["echo", older]}}}),
        )
        .await
        .metadata
        .generation;
    let (h, message) = ns.wait_downgrade_refused(gen_, 90).await;
    assert!(
        message.contains("20260101000000") && message.contains("20991231000001"),
        "{message}"
    );
    assert_eq!(phase(&h), "Running", "{}", status_line(&h));
    assert_eq!(h.data["status"]["currentVersion"].as_str(), Some(V2));
    ns.wait_event("BelowDatabaseSchema", "Warning", 30).await;
    holds_for(
        "refused: same pods, still Running at 0.2.0, no migration",
        6,
        || async {
            let h = ns.hollo().await;
            if phase(&h) != "Running" || h.data["status"]["currentVersion"].as_str() != Some(V2) {
                return Err(status_line(&h));
            }
            let now = role_pod_uids(&ns).await;
            if now != before {
                return Err(format!("pods changed: {before:?} → {now:?}"));
            }
            let web = ns
                .deployment(&format!("{HOLLO}-web"))
                .await
                .ok_or("no web")?;
            if !image_of(&web).ends_with(":0.2.0") {
                return Err(format!("web image {}", image_of(&web)));
            }
            let migrations = jobs
                .list(&ListParams::default().labels("app.kubernetes.io/component=migration"))
                .await
                .map_err(|e| e.to_string())?;
            match migrations
                .items
                .iter()
                .find(|j| label(*j, "app.kubernetes.io/version") == V1)
            {
                Some(j) => Err(format!("migration Job {} of 0.1.0 exists", j.name_any())),
                None => Ok(()),
            }
        },
    )
    .await;

    // Explicitly allowed: the usual stop-migrate-start, to Running at 0.1.0.
    ns.merge_hollo(json!({"spec": {"upgrade": {"allowDowngrade": true}}}))
        .await;
    let h = ns.wait_running(V1, 120).await;
    assert_eq!(
        condition(&h, "VersionAccepted"),
        None,
        "{}",
        status_line(&h)
    );
}

/// Issue 34 item 3 (R-OP-UPG): while a stop-migrate-start has no web pod, the web Service
/// selects `<name>-maintenance-page` (`hollo maintenance-page` of the version being stopped:
/// 503 + `Retry-After`; what it answers is tested over a socket in the runtime's
/// `maintenance_page` tests, kwok runs no process). A failing migration holds the downtime
/// open: the page's Deployment (old image, its own two variables, no Secret), a Ready page pod,
/// the Service selecting it, no web or worker pod. Fixed → `Running` at the new version, the
/// Service on the web pods again, the page gone.
#[tokio::test]
async fn issue34_maintenance_page_answers_during_the_downtime() {
    let ns = running_minimal("page").await;

    ns.merge_hollo(json!({"spec": {"version": V2,
        "migrations": {"command": ["sh", "-c", "exit 1"], "backoffLimit": 0}}}))
        .await;
    ns.wait_migration_failed(90).await;
    let page = format!("{HOLLO}-maintenance-page");
    let services: Api<Service> = ns.api();
    let selector_component = || async {
        services
            .get(&format!("{HOLLO}-web"))
            .await
            .map_err(|e| e.to_string())
            .map(|s| {
                s.spec
                    .and_then(|s| s.selector)
                    .and_then(|l| l.get("app.kubernetes.io/component").cloned())
                    .unwrap_or_default()
            })
    };
    wait_until(
        "the web Service selects the maintenance page",
        60,
        || async {
            match selector_component().await? {
                c if c == "maintenance-page" => Ok(()),
                c => Err(format!("selector component {c}")),
            }
        },
    )
    .await;
    let d = ns.deployment(&page).await.expect("the page Deployment");
    let c = &d.spec.template.spec.as_ref().expect("pod").containers[0];
    assert_eq!(
        c.command.as_deref(),
        Some(&["hollo".to_string(), "maintenance-page".to_string()][..])
    );
    assert_eq!(
        image_of(&d),
        format!("ghcr.io/hollo-social/hollo:{V1}"),
        "the old image"
    );
    assert_eq!(env_of(&d, 0, "RETRY_AFTER_SECONDS").as_deref(), Some("30"));
    assert_eq!(env_of(&d, 0, "PORT").as_deref(), Some("3000"));
    assert!(c.env_from.is_none(), "no Secret reaches the page");
    assert_eq!(ns.ready_pods("maintenance-page").await.len(), 1);
    holds_for(
        "page serving, no web or worker pod, still failing",
        4,
        || async {
            let app = ns.ready_pods("web").await.len() + ns.ready_pods("worker").await.len();
            let c = selector_component().await?;
            let h = ns.hollo().await;
            if app == 0 && c == "maintenance-page" && phase(&h) == "MigrationFailed" {
                Ok(())
            } else {
                Err(format!("{app} app pods, selector {c}; {}", status_line(&h)))
            }
        },
    )
    .await;

    ns.merge_hollo(json!({"spec": {"migrations": {"command": ["hollo", "migrate"]}}}))
        .await;
    ns.wait_running(V2, 120).await;
    wait_until(
        "the Service back on the web pods, the page gone",
        60,
        || async {
            let c = selector_component().await?;
            let gone = ns.deployment(&page).await.is_none();
            if c == "web" && gone {
                Ok(())
            } else {
                Err(format!("selector {c}, page Deployment gone: {gone}"))
            }
        },
    )
    .await;
    ns.wait_replicas("web", 1, 30).await;
}

/// The `valueFrom.secretKeyRef` (name, key) of `var` in a container's env; `None` when it is
/// not there or has a plain value.
fn env_secret_ref(
    c: &k8s_openapi::api::core::v1::Container,
    var: &str,
) -> Option<(String, String)> {
    let e = c.env.iter().flatten().find(|e| e.name == var)?;
    if e.value.is_some() {
        return None;
    }
    let r = e.value_from.as_ref()?.secret_key_ref.as_ref()?;
    Some((r.name.clone(), r.key.clone()))
}

/// Issue 63 item 7: the first run without `kubectl exec`. A `Hollo` with no `secretKeyRef`
/// and a `spec.admin`: the operator creates `social-secret-key` (owned by the Hollo,
/// immutable, 64 hex characters) and the pods read it by reference; the admin Job waits for
/// its password Secret (`AdminAccount=False PasswordSecretMissing`, `Degraded`, no Job), then
/// runs `hollo account create owner --admin --password-env … --if-absent --no-token` with the
/// password by reference and `AdminAccount=True`. Reconciles and a spec edit later the Secret
/// is the same object with the same key and no second admin Job exists; deleted, it is not
/// generated again (`SecretKey=False GeneratedSecretMissing`) until it is restored.
#[tokio::test]
async fn issue63_first_account_and_generated_secret_key() {
    use k8s_openapi::api::core::v1::Secret;
    let ns = Ns::new("i63first").await;
    ns.prepare_instance().await;
    let manifest = minimal_with(json!({"spec": {
        "secretKeyRef": null,
        "admin": {"username": "owner",
                  "passwordSecretRef": {"name": "hollo-admin", "key": "password"}}}}));
    let h = ns.apply_hollo(&manifest).await.expect("apply Hollo");
    let uid = h.metadata.uid.clone().expect("uid");
    let secrets: Api<Secret> = ns.api();
    let name = format!("{HOLLO}-secret-key");
    let created = wait_exists("Secret", &secrets, &name, 60).await;
    let owner = &created.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("Hollo", uid.as_str())
    );
    assert_eq!(created.immutable, Some(true));
    let key = created.data.as_ref().expect("data")["SECRET_KEY"].0.clone();
    assert!(
        key.len() == 64 && key.iter().all(u8::is_ascii_hexdigit),
        "64 hex characters"
    );
    ns.wait_running(V1, 120).await;
    let web = ns.deployment(&format!("{HOLLO}-web")).await.expect("web");
    let c = &web.spec.template.spec.as_ref().expect("pod").containers[0];
    assert_eq!(
        env_secret_ref(c, "SECRET_KEY"),
        Some((name.clone(), "SECRET_KEY".to_string()))
    );
    ns.wait_condition("SecretKey", "True", "Generated", 30)
        .await;

    // No password Secret yet: no Job, a condition saying so.
    let message = ns
        .wait_condition("AdminAccount", "False", "PasswordSecretMissing", 60)
        .await;
    assert!(message.contains("hollo-admin"), "{message}");
    ns.wait_condition_status("Degraded", "True", 30).await;
    let jobs: Api<Job> = ns.api();
    let admin_jobs = || async {
        jobs.list(&ListParams::default().labels("app.kubernetes.io/component=admin-account"))
            .await
            .map_err(|e| e.to_string())
            .map(|l| l.items)
    };
    assert!(
        admin_jobs().await.unwrap().is_empty(),
        "no Job without its Secret"
    );
    ns.kubectl(&[
        "create",
        "secret",
        "generic",
        "hollo-admin",
        "--from-literal=password=e2e first password",
    ]);
    // Secrets are not watched here (the chart's default): an edit of the Hollo wakes it.
    ns.kubectl(&["annotate", "hollo", HOLLO, "e2e/poke=1", "--overwrite"]);
    ns.wait_condition("AdminAccount", "True", "AccountExists", 90)
        .await;
    ns.wait_condition_status("Degraded", "False", 30).await;
    let listed = admin_jobs().await.unwrap();
    assert_eq!(listed.len(), 1, "one admin Job");
    let job = &listed[0];
    assert!(
        job.name_any().starts_with(&format!("{HOLLO}-admin-")),
        "{}",
        job.name_any()
    );
    let pod = job
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod");
    let c = &pod.containers[0];
    assert_eq!(
        c.command.as_deref().unwrap_or_default(),
        [
            "hollo",
            "account",
            "create",
            "owner",
            "--admin",
            "--password-env",
            "HOLLO_ADMIN_PASSWORD",
            "--if-absent",
            "--no-token"
        ]
    );
    assert_eq!(
        env_secret_ref(c, "HOLLO_ADMIN_PASSWORD"),
        Some(("hollo-admin".to_string(), "password".to_string()))
    );
    assert_eq!(
        env_secret_ref(c, "SECRET_KEY"),
        Some((name.clone(), "SECRET_KEY".to_string()))
    );
    let job_text = serde_json::to_string(job).unwrap();
    assert!(
        !job_text.contains("e2e first password"),
        "no password in the Job"
    );

    // More reconciles and a spec edit: the same Secret, the same key, no second Job.
    ns.kubectl(&["annotate", "hollo", HOLLO, "e2e/poke=2", "--overwrite"]);
    ns.merge_hollo(json!({"spec": {"worker": {"replicas": 1}}}))
        .await;
    ns.wait_replicas("worker", 1, 60).await;
    ns.wait_running(V1, 60).await;
    let kept = secrets.get(&name).await.expect("Secret");
    assert_eq!(kept.metadata.uid, created.metadata.uid, "never replaced");
    assert_eq!(
        kept.metadata.resource_version,
        created.metadata.resource_version
    );
    assert_eq!(kept.data.as_ref().expect("data")["SECRET_KEY"].0, key);
    let again = admin_jobs().await.unwrap();
    assert_eq!(
        again.iter().map(|j| j.name_any()).collect::<Vec<_>>(),
        [job.name_any()],
        "the account is not made again"
    );

    // Deleted: not generated again (a new key could not decrypt the accounts' keys).
    secrets
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete the Secret");
    ns.kubectl(&["annotate", "hollo", HOLLO, "e2e/poke=3", "--overwrite"]);
    ns.wait_condition("SecretKey", "False", "GeneratedSecretMissing", 60)
        .await;
    holds_for("the deleted key stays deleted", 5, || async {
        match secrets.get_opt(&name).await.map_err(|e| e.to_string())? {
            None => Ok(()),
            Some(_) => Err("generated again".to_string()),
        }
    })
    .await;
    // Restored from a backup (here: the copy the test kept): in use again.
    let mut restored = Secret {
        data: kept.data.clone(),
        immutable: Some(true),
        ..Secret::default()
    };
    restored.metadata.name = Some(name.clone());
    secrets
        .create(&Default::default(), &restored)
        .await
        .expect("restore the Secret");
    ns.kubectl(&["annotate", "hollo", HOLLO, "e2e/poke=4", "--overwrite"]);
    ns.wait_condition("SecretKey", "True", "Generated", 60)
        .await;
    ns.wait_running(V1, 60).await;
}
