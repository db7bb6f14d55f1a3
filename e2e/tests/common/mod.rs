//! Shared helpers of the end-to-end scenarios: the client `e2e/run` set up, one namespace per
//! scenario, kubectl as a user types it, polling with deadlines, and object accessors.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config, ResourceExt};
use serde_json::{Value, json};

pub const HOLLO: &str = "social";

/// What `e2e/run` exported. Panics with a clear message when the suite was started any other way.
pub struct Env {
    pub kubeconfig: PathBuf,
    pub kubectl: String,
    pub repo: PathBuf,
    pub workdir: PathBuf,
}

pub fn env() -> Env {
    let kubeconfig = std::env::var_os("HOLLO_E2E_KUBECONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let Some(kubeconfig) = kubeconfig.filter(|p| p.is_file()) else {
        panic!(
            "the e2e scenarios need the control plane, the chart and the operator that e2e/run \
             sets up (HOLLO_E2E_KUBECONFIG is not set or not a file): run e2e/run"
        );
    };
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("repo root")
        .to_path_buf();
    let workdir = std::env::var_os("HOLLO_E2E_WORKDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("target/e2e/run"));
    std::fs::create_dir_all(&workdir).expect("create HOLLO_E2E_WORKDIR");
    Env {
        kubeconfig,
        kubectl: std::env::var("HOLLO_E2E_KUBECTL").unwrap_or_else(|_| "kubectl".into()),
        repo,
        workdir,
    }
}

pub async fn client_for(kubeconfig: &Path) -> Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("read kubeconfig");
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    Client::try_from(cfg).expect("client")
}

/// The `Hollo` resource, driven as untyped JSON the way a user's YAML is.
pub fn hollo_resource() -> ApiResource {
    ApiResource {
        group: "hollo.social".into(),
        version: "v1alpha1".into(),
        api_version: "hollo.social/v1alpha1".into(),
        kind: "Hollo".into(),
        plural: "hollos".into(),
    }
}

/// One scenario's namespace, with a kubeconfig whose context defaults to it so the README's
/// commands run unchanged. On a failing scenario its objects and events are printed.
pub struct Ns {
    pub name: String,
    pub client: Client,
    pub env: Env,
    pub kubeconfig: PathBuf,
    pub started: Instant,
}

impl Ns {
    pub async fn new(scenario: &str) -> Ns {
        let env = env();
        let client = client_for(&env.kubeconfig).await;
        let suffix = format!(
            "{:x}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
                & 0xfffff
        );
        let name = format!("e2e-{scenario}-{suffix}");
        let nss: Api<Namespace> = Api::all(client.clone());
        nss.create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"hollo-e2e": "scenario"}}
            }))
            .unwrap(),
        )
        .await
        .expect("create namespace");
        let ns = Ns::with_context(name, env, client);
        ns.log("namespace created");
        ns
    }

    /// A namespace `e2e/run` made (e.g. the one a namespaced operator install watches).
    pub async fn existing(name: &str) -> Ns {
        let env = env();
        let client = client_for(&env.kubeconfig).await;
        Ns::with_context(name.to_string(), env, client)
    }

    /// The scenario's own copy of the kubeconfig, whose context defaults to namespace `name`.
    fn with_context(name: String, env: Env, client: Client) -> Ns {
        let kubeconfig = env.workdir.join(format!("{name}.kubeconfig"));
        std::fs::copy(&env.kubeconfig, &kubeconfig).expect("copy kubeconfig");
        let ns = Ns {
            name,
            client,
            env,
            kubeconfig,
            started: Instant::now(),
        };
        ns.kubectl(&[
            "config",
            "set-context",
            "--current",
            &format!("--namespace={}", ns.name),
        ]);
        ns
    }

    /// The next event of a watch stream, or `None` once `deadline` passes. Watch errors are
    /// logged and skipped (kube's watcher re-establishes the watch itself).
    pub async fn next_event<T, E, S>(
        &self,
        events: &mut S,
        deadline: tokio::time::Instant,
    ) -> Option<T>
    where
        S: futures::Stream<Item = Result<T, E>> + Unpin,
        E: std::fmt::Display,
    {
        use futures::StreamExt;
        loop {
            match tokio::time::timeout_at(deadline, events.next()).await {
                Ok(Some(Ok(ev))) => return Some(ev),
                Ok(Some(Err(e))) => self.log(&format!("watch error (the watcher retries): {e}")),
                Ok(None) => panic!("watch ended"),
                Err(_) => return None,
            }
        }
    }

    pub fn log(&self, msg: &str) {
        eprintln!(
            "[{} +{:>5.1}s] {msg}",
            self.name,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Runs kubectl with this namespace as the default; panics with its output on failure.
    pub fn kubectl(&self, args: &[&str]) -> String {
        match self.try_kubectl(args, None) {
            Ok(out) => out,
            Err(e) => panic!("kubectl {}: {e}", args.join(" ")),
        }
    }

    pub fn try_kubectl(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        use std::io::Write;
        let mut cmd = Command::new(&self.env.kubectl);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .current_dir(&self.env.repo)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if stdin.is_some() {
            cmd.stdin(std::process::Stdio::piped());
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run kubectl: {e}"))?;
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .map_err(|e| e.to_string())?;
        }
        let out = child.wait_with_output().map_err(|e| e.to_string())?;
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        if out.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "{}\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ))
        }
    }

    /// Starts a long-running kubectl (e.g. `get -w`); stdout is piped, stderr discarded.
    pub fn spawn_kubectl(&self, args: &[&str]) -> std::process::Child {
        Command::new(&self.env.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start kubectl")
    }

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }

    pub fn hollos(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.name, &hollo_resource())
    }

    /// The Secrets the examples reference, created with the README's commands, and the
    /// ReadWriteMany claim `hollo-media` (bound to a static hostPath volume so the scheduler
    /// can place pods that mount it).
    pub async fn prepare_instance(&self) {
        self.kubectl(&[
            "create",
            "secret",
            "generic",
            "hollo-db",
            "--from-literal=url=postgres://hollo:e2e@postgres:5432/hollo",
        ]);
        self.kubectl(&[
            "create",
            "secret",
            "generic",
            "hollo-secret",
            "--from-literal=key=0123456789abcdef0123456789abcdef",
        ]);
        self.media_claim().await;
    }

    pub async fn media_claim(&self) {
        let pv_name = format!("hollo-media-{}", self.name);
        let pvs: Api<PersistentVolume> = Api::all(self.client.clone());
        pvs.create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": pv_name, "labels": {"hollo-e2e": "scenario"}},
                "spec": {
                    "capacity": {"storage": "1Gi"},
                    "accessModes": ["ReadWriteMany"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "",
                    "hostPath": {"path": format!("/tmp/hollo-e2e-media/{}", self.name)},
                    "claimRef": {"namespace": self.name, "name": "hollo-media"}
                }
            }))
            .unwrap(),
        )
        .await
        .expect("create PersistentVolume");
        let pvcs: Api<PersistentVolumeClaim> = self.api();
        pvcs.create(
            &Default::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "hollo-media"},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "storageClassName": "",
                    "volumeName": pv_name,
                    "resources": {"requests": {"storage": "1Gi"}}
                }
            }))
            .unwrap(),
        )
        .await
        .expect("create PersistentVolumeClaim");
        wait_until("claim hollo-media Bound", 60, || async {
            let pvc = pvcs.get("hollo-media").await.map_err(|e| e.to_string())?;
            let phase = pvc.status.and_then(|s| s.phase).unwrap_or_default();
            if phase == "Bound" {
                Ok(())
            } else {
                Err(format!("phase {phase:?}"))
            }
        })
        .await;
    }

    /// Server-side apply of a Hollo manifest (as `kubectl apply --server-side` would).
    pub async fn apply_hollo(&self, manifest: &Value) -> Result<DynamicObject, kube::Error> {
        let name = manifest["metadata"]["name"].as_str().unwrap_or(HOLLO);
        self.hollos()
            .patch(
                name,
                &PatchParams::apply("e2e-user").force(),
                &Patch::Apply(manifest),
            )
            .await
    }

    /// `kubectl patch hollo social --type merge -p <patch>`, the README's command, with kubectl.
    pub fn kubectl_patch_hollo(&self, patch: &str) -> String {
        self.kubectl(&["patch", "hollo", HOLLO, "--type", "merge", "-p", patch])
    }

    /// Applies the minimal example with `patch`: admission must refuse it (422) with `message`.
    pub async fn assert_rejected(&self, patch: Value, message: &str) {
        match self.apply_hollo(&minimal_with(patch.clone())).await {
            Ok(_) => panic!("accepted an invalid Hollo ({patch}); expected: {message}"),
            Err(kube::Error::Api(e)) => {
                self.log(&format!("rejected ({}): {}", e.code, e.message));
                assert_eq!(e.code, 422, "{e:?}");
                assert!(
                    e.message.contains(message),
                    "expected {message:?} in {:?}",
                    e.message
                );
            }
            Err(e) => panic!("unexpected error {e}"),
        }
    }

    /// Waits until `status.lastCleanup` records a remote-posts cleanup; no media one ran.
    pub async fn wait_remote_posts_cleaned(&self, secs: u64) {
        let h = wait_until("status.lastCleanup.remotePosts", secs, || async {
            let h = self.hollo().await;
            if h.data["status"]["lastCleanup"]["remotePosts"].is_string() {
                Ok(h)
            } else {
                Err(status_line(&h))
            }
        })
        .await;
        self.log(&format!("lastCleanup: {}", h.data["status"]["lastCleanup"]));
        assert!(
            h.data["status"]["lastCleanup"]["media"].is_null(),
            "media never ran"
        );
    }

    /// Waits until `VersionAccepted=False` names generation `gen_` (a downgrade refused) with
    /// the reason `BelowDatabaseSchema`: the Hollo and the condition's message.
    pub async fn wait_downgrade_refused(
        &self,
        gen_: Option<i64>,
        secs: u64,
    ) -> (DynamicObject, String) {
        let h = wait_until("VersionAccepted=False for the downgrade", secs, || async {
            let h = self.hollo().await;
            match condition_generation(&h, "VersionAccepted") {
                Some((s, g)) if s == "False" && g == gen_ => Ok(h),
                _ => Err(status_line(&h)),
            }
        })
        .await;
        self.log(&status_line(&h));
        let (_, reason, message) = condition(&h, "VersionAccepted").expect("condition");
        self.log(&format!("VersionAccepted=False {reason}: {message}"));
        assert_eq!(reason, "BelowDatabaseSchema", "{message}");
        (h, message)
    }

    /// `kubectl patch hollo <name> --type merge -p <patch>`, through the API.
    pub async fn merge_hollo(&self, patch: Value) -> DynamicObject {
        self.hollos()
            .patch(HOLLO, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("merge patch Hollo")
    }

    pub async fn hollo(&self) -> DynamicObject {
        self.hollos().get(HOLLO).await.expect("get Hollo")
    }

    /// Waits for `status.phase == Running`, `Ready=True`, `observedGeneration == generation` and
    /// `currentVersion == version`.
    pub async fn wait_running(&self, version: &str, secs: u64) -> DynamicObject {
        wait_until(&format!("Hollo Running at {version}"), secs, || async {
            let h = self.hollos().get(HOLLO).await.map_err(|e| e.to_string())?;
            let ok = phase(&h) == "Running"
                && condition(&h, "Ready").map(|c| c.0) == Some("True".into())
                && h.data["status"]["observedGeneration"].as_i64() == h.metadata.generation
                && h.data["status"]["currentVersion"].as_str() == Some(version);
            if ok { Ok(h) } else { Err(status_line(&h)) }
        })
        .await
    }

    /// Waits for `status.phase == MigrationFailed` with `Degraded=True`.
    pub async fn wait_migration_failed(&self, secs: u64) -> DynamicObject {
        wait_until("MigrationFailed with Degraded=True", secs, || async {
            let h = self.hollos().get(HOLLO).await.map_err(|e| e.to_string())?;
            let degraded = condition(&h, "Degraded").map(|c| c.0);
            if phase(&h) == "MigrationFailed" && degraded.as_deref() == Some("True") {
                Ok(h)
            } else {
                Err(status_line(&h))
            }
        })
        .await
    }

    /// `spec.stopped: true`: waits (`secs`) for phase `Stopped` with `Stopped=True` at that
    /// generation, then for both roles' Deployments at 0 with no Ready pod.
    pub async fn stop(&self, secs: u64) {
        let gen_ = self
            .merge_hollo(json!({"spec": {"stopped": true}}))
            .await
            .metadata
            .generation;
        self.log("spec.stopped: true");
        wait_until("phase Stopped, Stopped=True", secs, || async {
            let h = self.hollo().await;
            let stopped = condition(&h, "Stopped").map(|c| c.0);
            if phase(&h) == "Stopped"
                && stopped.as_deref() == Some("True")
                && h.data["status"]["observedGeneration"].as_i64() == gen_
            {
                Ok(())
            } else {
                Err(status_line(&h))
            }
        })
        .await;
        self.wait_replicas("web", 0, 60).await;
        self.wait_replicas("worker", 0, 60).await;
    }

    /// `spec.stopped: false`: Running at `version` (within `secs`) with `Stopped=False`, one web
    /// pod and two workers (within `pods_secs`).
    pub async fn start(&self, version: &str, secs: u64, pods_secs: u64) {
        self.merge_hollo(json!({"spec": {"stopped": false}})).await;
        self.log("spec.stopped: false");
        let h = self.wait_running(version, secs).await;
        assert_eq!(
            condition(&h, "Stopped").map(|c| c.0).as_deref(),
            Some("False"),
            "{}",
            status_line(&h)
        );
        self.wait_replicas("web", 1, pods_secs).await;
        self.wait_replicas("worker", 2, pods_secs).await;
    }

    /// Pauses reconciliation, then edits `web.replicas` to 2: waits (`secs`) until
    /// `ReconciliationPaused=True` names the edit's generation, and for its event.
    pub async fn pause_and_scale_web(&self, secs: u64) {
        self.merge_hollo(json!({"spec": {"reconciliationPaused": true}}))
            .await;
        let gen_ = self
            .merge_hollo(json!({"spec": {"web": {"replicas": 2}}}))
            .await
            .metadata
            .generation;
        self.log("spec.reconciliationPaused: true, then web.replicas: 2");
        wait_until(
            "ReconciliationPaused=True for the edit's generation",
            secs,
            || async {
                let h = self.hollo().await;
                match condition_generation(&h, "ReconciliationPaused") {
                    Some((s, g)) if s == "True" && g == gen_ => Ok(()),
                    other => Err(format!("{other:?}; {}", status_line(&h))),
                }
            },
        )
        .await;
        self.wait_event("ReconciliationPaused", "Normal", 30).await;
    }

    /// Unpauses after [`Self::pause_and_scale_web`]: the paused edit is carried out (2 web pods
    /// within `secs`), Running at `version` with `ReconciliationPaused=False` and the event
    /// `ReconciliationResumed`.
    pub async fn unpause(&self, version: &str, secs: u64) {
        self.merge_hollo(json!({"spec": {"reconciliationPaused": false}}))
            .await;
        self.log("spec.reconciliationPaused: false");
        self.wait_replicas("web", 2, secs).await;
        let h = self.wait_running(version, 60).await;
        assert_eq!(
            condition(&h, "ReconciliationPaused")
                .map(|c| c.0)
                .as_deref(),
            Some("False"),
            "{}",
            status_line(&h)
        );
        self.wait_event("ReconciliationResumed", "Normal", 30).await;
    }

    /// Waits until the Hollo's condition `type_` is `status` with `reason`: its message.
    pub async fn wait_condition(
        &self,
        type_: &str,
        status: &str,
        reason: &str,
        secs: u64,
    ) -> String {
        self.wait_condition_as(type_, status, Some(reason), secs)
            .await
            .1
    }

    /// Waits until the Hollo's condition `type_` is `status` (any reason): the Hollo.
    pub async fn wait_condition_status(
        &self,
        type_: &str,
        status: &str,
        secs: u64,
    ) -> DynamicObject {
        self.wait_condition_as(type_, status, None, secs).await.0
    }

    /// Waits until the Hollo's condition `type_` is `status` (with `reason`, when given): the
    /// Hollo and the condition's message.
    async fn wait_condition_as(
        &self,
        type_: &str,
        status: &str,
        reason: Option<&str>,
        secs: u64,
    ) -> (DynamicObject, String) {
        let what = match reason {
            Some(r) => format!("{type_}={status} {r}"),
            None => format!("{type_}={status}"),
        };
        wait_until(&what, secs, || async {
            let h = self.hollo().await;
            match condition(&h, type_) {
                Some((s, r, m)) if s == status && reason.is_none_or(|want| r == want) => Ok((h, m)),
                other => Err(format!("{other:?}; {}", status_line(&h))),
            }
        })
        .await
    }

    /// Waits until the CustomResourceDefinition `name` is Established.
    pub async fn wait_crd_established(&self, name: &str, secs: u64) {
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        wait_until(&format!("CRD {name} Established"), secs, || async {
            let c = crds.get(name).await.map_err(|e| e.to_string())?;
            c.status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
                .then_some(())
                .ok_or_else(|| "not established".to_string())
        })
        .await;
    }

    /// Waits (100 s: the operator's own periodic look at Secrets is 60 s) until the web
    /// Deployment's template carries a Secrets hash other than `before`; `what` says why.
    pub async fn wait_web_hash_changes(&self, before: &str, what: &str) {
        wait_until(what, 100, || async {
            let d = self
                .deployment(&format!("{HOLLO}-web"))
                .await
                .ok_or("no web")?;
            match secrets_hash(&d) {
                Some(h) if h != before => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }

    pub async fn deployment(&self, name: &str) -> Option<Deployment> {
        self.api::<Deployment>()
            .get_opt(name)
            .await
            .expect("get Deployment")
    }

    /// Pods of one component that are Ready and not terminating.
    pub async fn ready_pods(&self, component: &str) -> Vec<Pod> {
        let mut pods = self.live_pods(component).await;
        pods.retain(pod_ready);
        pods
    }

    /// Pods of the `components` (say `web,worker`) that are not terminating.
    pub async fn live_pods(&self, components: &str) -> Vec<Pod> {
        let mut pods = self.pods(components).await;
        pods.retain(|p| p.metadata.deletion_timestamp.is_none());
        pods
    }

    /// Every pod of the `components` (say `web,worker`), terminating ones included.
    pub async fn pods(&self, components: &str) -> Vec<Pod> {
        self.api::<Pod>()
            .list(&ListParams::default().labels(&format!(
                "app.kubernetes.io/instance={HOLLO},app.kubernetes.io/component in ({components})"
            )))
            .await
            .expect("list pods")
            .items
    }

    /// Waits until the component's Deployment wants `n` replicas and exactly `n` pods are Ready.
    pub async fn wait_replicas(&self, component: &str, n: i32, secs: u64) {
        let dep = format!("{HOLLO}-{component}");
        wait_until(
            &format!("{dep}: {n} replicas, {n} Ready pods"),
            secs,
            || async {
                let d = self.deployment(&dep).await.ok_or("no Deployment")?;
                let want = d.spec.replicas.unwrap_or(1);
                let ready = self.ready_pods(component).await.len() as i32;
                if want == n && ready == n {
                    Ok(())
                } else {
                    Err(format!("spec.replicas={want}, ready pods={ready}"))
                }
            },
        )
        .await
    }

    /// Events (events.k8s.io/v1) about the Hollo with this reason.
    pub async fn events(&self, reason: &str) -> Vec<Event> {
        self.api::<Event>()
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Hollo")
            })
            .collect()
    }

    pub async fn wait_event(&self, reason: &str, type_: &str, secs: u64) -> Event {
        wait_until(
            &format!("{type_} event {reason} on the Hollo"),
            secs,
            || async {
                let evs = self.events(reason).await;
                evs.into_iter()
                    .find(|e| e.type_.as_deref() == Some(type_))
                    .ok_or_else(|| "none yet".to_string())
            },
        )
        .await
    }
}

impl Drop for Ns {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // What the cluster looked like when the scenario failed.
            let what = "hollo,deployments,replicasets,pods,jobs,services,pdb,hpa,ingress,pvc";
            let out = self.try_kubectl(&["get", what, "-o", "wide"], None);
            let hollo = self.try_kubectl(&["get", "hollo", "-o", "yaml"], None);
            let events = self.try_kubectl(
                &["get", "events", "--sort-by=.metadata.creationTimestamp"],
                None,
            );
            eprintln!(
                "==== namespace {} at failure\n{}\n---- Hollo\n{}\n---- events\n{}\n====",
                self.name,
                out.unwrap_or_else(|e| e),
                hollo.unwrap_or_else(|e| e),
                events.unwrap_or_else(|e| e)
            );
        } else {
            // Leave nothing behind on a shared cluster; do not wait for it.
            let _ = self.try_kubectl(&["delete", "namespace", &self.name, "--wait=false"], None);
            let _ = self.try_kubectl(
                &[
                    "delete",
                    "pv",
                    &format!("hollo-media-{}", self.name),
                    "--ignore-not-found",
                    "--wait=false",
                ],
                None,
            );
        }
    }
}

/// Polls `f` every 250 ms until it returns `Ok`, or panics after `secs` with the last thing it
/// observed.
pub async fn wait_until<T, F, Fut>(what: &str, secs: u64, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let last = match f().await {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {secs}s waiting for {what}; last observed: {last}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until `api` has the object `name` (one the operator applies); `what` names its kind
/// in the wait's message.
pub async fn wait_exists<K>(what: &str, api: &Api<K>, name: &str, secs: u64) -> K
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_until(&format!("{what} {name}"), secs, || async {
        api.get_opt(name)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_string())
    })
    .await
}

/// `<kind>/<name>` of every object `api` lists.
pub async fn names_of<K>(kind: &str, api: &Api<K>) -> Result<Vec<String>, String>
where
    K: Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug + kube::Resource,
{
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?
        .items
        .iter()
        .map(|o| format!("{kind}/{}", o.name_any()))
        .collect())
}

/// Checks that `f` keeps returning `Ok` for `secs` (a steady state, e.g. the operator does not
/// undo something); panics with the observation that broke it.
pub async fn holds_for<F, Fut>(what: &str, secs: u64, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if let Err(e) = f().await {
            panic!("{what} stopped holding: {e}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

pub fn phase(h: &DynamicObject) -> String {
    h.data["status"]["phase"].as_str().unwrap_or("").to_string()
}

/// (status, reason, message) of a condition.
pub fn condition(h: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    h.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("status"), s("reason"), s("message"))
        })
}

/// The `(status, observedGeneration)` of a condition.
pub fn condition_generation(h: &DynamicObject, type_: &str) -> Option<(String, Option<i64>)> {
    h.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["observedGeneration"].as_i64(),
            )
        })
}

pub fn status_line(h: &DynamicObject) -> String {
    let conds: Vec<String> = h.data["status"]["conditions"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| format!("{}={}({})", c["type"], c["status"], c["reason"]))
                .collect()
        })
        .unwrap_or_default();
    format!(
        "generation={:?} observedGeneration={} phase={:?} current={} target={} web={} worker={} conditions=[{}]",
        h.metadata.generation,
        h.data["status"]["observedGeneration"],
        phase(h),
        h.data["status"]["currentVersion"],
        h.data["status"]["targetVersion"],
        h.data["status"]["web"],
        h.data["status"]["worker"],
        conds.join(" ")
    )
}

/// The `hollo.social/secrets-hash` annotation of a Deployment's pod template.
pub fn secrets_hash(d: &Deployment) -> Option<String> {
    d.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get("hollo.social/secrets-hash").cloned())
}

/// For a wait: `Ok` when nothing is `left`, else what is.
pub fn none_left<L: std::fmt::Debug + IntoIterator + Copy>(left: L) -> Result<(), String> {
    if left.into_iter().next().is_none() {
        Ok(())
    } else {
        Err(format!("{left:?}"))
    }
}

/// The container runs `hollo cleanup remote-posts --older-than-days <days>`.
pub fn assert_cleans_remote_posts(c: &k8s_openapi::api::core::v1::Container, days: u32) {
    assert_eq!(
        (c.command.clone(), c.args.clone()),
        (
            Some(vec!["hollo".to_string(), "cleanup".into()]),
            Some(vec![
                "remote-posts".to_string(),
                "--older-than-days".into(),
                days.to_string()
            ])
        )
    );
}

pub fn pod_ready(p: &Pod) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .map(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        .unwrap_or(false)
}

pub fn label<K: ResourceExt>(o: &K, key: &str) -> String {
    o.labels().get(key).cloned().unwrap_or_default()
}

/// `examples/hollo-minimal.yaml` as JSON.
pub fn minimal_example() -> Value {
    let path = env().repo.join("examples/hollo-minimal.yaml");
    let text = std::fs::read_to_string(&path).expect("read examples/hollo-minimal.yaml");
    serde_yaml::from_str(&text).expect("parse example")
}

/// The minimal example with a JSON merge patch applied (RFC 7386).
pub fn minimal_with(patch: Value) -> Value {
    let mut v = minimal_example();
    merge(&mut v, &patch);
    v
}

pub fn merge(target: &mut Value, patch: &Value) {
    if let Value::Object(p) = patch {
        if !target.is_object() {
            *target = Value::Object(Default::default());
        }
        let t = target.as_object_mut().unwrap();
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    } else {
        *target = patch.clone();
    }
}
