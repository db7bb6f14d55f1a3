//! Pod pieces shared by every role: environment, security, volumes, probes, scheduling.

use k8s_openapi::api::core::v1::{
    Capabilities, Container, EmptyDirVolumeSource, EnvFromSource, EnvVar, EnvVarSource,
    PersistentVolumeClaimVolumeSource, PodSecurityContext, PodSpec, PodTemplateSpec,
    ResourceRequirements, SeccompProfile, SecretEnvSource, SecretKeySelector, SecurityContext,
    TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use kube::ResourceExt;

use super::labels::{self, Component};
use crate::crd::{Disk, Hollo, HolloSpec, ImageProfile, SchedulingSpec, SecretKeyRef};

/// The container name in every pod (`kubectl logs deploy/x -c hollo`).
pub const CONTAINER: &str = "hollo";
/// Non-root uid/gid the pods run as; `fsGroup` makes the shared media claim writable.
/// The distroless `nonroot` user of both images (runtime/Dockerfile, operator/Dockerfile).
pub const RUN_AS: i64 = 65532;
const TMP_VOLUME: &str = "tmp";
pub const STORAGE_VOLUME: &str = "storage";

pub fn plain(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: Some(value.into()),
        value_from: None,
    }
}

/// An env var read from a Secret key: secrets are only ever passed by reference.
pub fn secret(name: &str, r: &SecretKeyRef) -> EnvVar {
    EnvVar {
        name: name.into(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: r.name.clone(),
                key: r.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }
}

/// Which database connection a process gets (R-DB-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbRoute {
    /// HTTP-serving nodes: through the CloudNativePG Pooler when one is named.
    Http,
    /// Workers and migrations: the direct URL (LISTEN/NOTIFY, item locks, DDL).
    Direct,
}

/// Env var names of the CloudNativePG application Secret's parts a pooler URL is built from.
pub const CNPG_USER: &str = "CNPG_USER";
pub const CNPG_PASSWORD: &str = "CNPG_PASSWORD";
pub const CNPG_DBNAME: &str = "CNPG_DBNAME";

/// The application Secret of a CloudNativePG cluster.
pub fn cnpg_app_secret(cluster: &str) -> String {
    format!("{cluster}-app")
}

fn key(name: &str, key: &str) -> SecretKeyRef {
    SecretKeyRef {
        name: name.into(),
        key: key.into(),
    }
}

/// `DATABASE_URL` (and `DATABASE_DIRECT_URL` where the profile reads it), by reference only.
///
/// CloudNativePG: the app Secret's `uri` is the direct URL (`<cluster>-rw`). Through a Pooler,
/// `DATABASE_URL` is assembled by the kubelet from the Secret's `username`, `password` and
/// `dbname` (dependent env vars, `$(VAR)`) with the Pooler's Service as host, so the password
/// is never copied into an object; CloudNativePG's generated passwords are URL-safe.
pub fn database_env(spec: &HolloSpec, route: DbRoute) -> Vec<EnvVar> {
    let hollo_rs = spec.image.profile == ImageProfile::HolloRs;
    let db = &spec.database;
    let mut env = vec![];
    match (&db.cnpg, &db.url_secret_ref) {
        (Some(cnpg), _) => {
            let app = cnpg_app_secret(&cnpg.cluster);
            let direct = secret("DATABASE_URL", &key(&app, "uri"));
            match (&cnpg.pooler, route) {
                (Some(pooler), DbRoute::Http) => {
                    env.push(secret(CNPG_USER, &key(&app, "username")));
                    env.push(secret(CNPG_PASSWORD, &key(&app, "password")));
                    env.push(secret(CNPG_DBNAME, &key(&app, "dbname")));
                    env.push(plain(
                        "DATABASE_URL",
                        format!(
                            "postgresql://$({CNPG_USER}):$({CNPG_PASSWORD})@{pooler}:5432/$({CNPG_DBNAME})"
                        ),
                    ));
                    if hollo_rs {
                        env.push(EnvVar {
                            name: "DATABASE_DIRECT_URL".into(),
                            ..direct
                        });
                    }
                }
                _ => env.push(direct),
            }
        }
        (None, Some(url)) => {
            env.push(secret("DATABASE_URL", url));
            if let (Some(direct), true) = (&db.direct_url_secret_ref, hollo_rs) {
                env.push(secret("DATABASE_DIRECT_URL", direct));
            }
        }
        // Admission requires one of the two; nothing to reference otherwise.
        (None, None) => {}
    }
    env
}

/// Environment every Hollo process needs. `serves_http` adds what only HTTP-serving nodes read.
pub fn common_env(spec: &HolloSpec, serves_http: bool) -> Vec<EnvVar> {
    let route = if serves_http {
        DbRoute::Http
    } else {
        DbRoute::Direct
    };
    let mut env = database_env(spec, route);
    // Unset only in a spec not yet `secret_key::resolved` (every reconcile resolves it first).
    if let Some(key) = &spec.secret_key_ref {
        env.push(secret("SECRET_KEY", key));
    }
    let hollo_rs = spec.image.profile == ImageProfile::HolloRs;
    if hollo_rs {
        if let Some(admin) = &spec.admin_token_ref {
            env.push(secret("ADMIN_TOKEN", admin));
        }
        env.push(plain("RUNTIME_ENV", spec.environment.clone()));
        env.push(plain("LOG_FORMAT", "json"));
    } else {
        // pnpm and Node.js write caches under $HOME; the root filesystem is read-only.
        env.push(plain("HOME", "/tmp"));
    }
    env.push(plain(
        "DRIVE_DISK",
        match spec.storage.disk {
            Disk::Fs => "fs",
            Disk::S3 => "s3",
        },
    ));
    if let (Disk::Fs, Some(fs)) = (spec.storage.disk, &spec.storage.fs) {
        env.push(plain("FS_STORAGE_PATH", fs.mount_path.clone()));
    }
    if let Some(base) = &spec.storage.url_base {
        env.push(plain("STORAGE_URL_BASE", base.clone()));
    }
    // Workers build absolute URLs too (outbox delivery), so PUBLIC_URL goes everywhere.
    // Upstream has no PUBLIC_URL: its origin is the request's (or WEB_ORIGIN).
    if let (Some(url), true) = (spec.public_url(), hollo_rs) {
        env.push(plain("PUBLIC_URL", url));
    }
    if serves_http && spec.web.ingress.enabled {
        env.push(plain("BEHIND_PROXY", "true"));
    }
    env
}

/// `envFrom` for S3 settings: a Secret whose keys are the runtime's variable names.
pub fn env_from(spec: &HolloSpec) -> Option<Vec<EnvFromSource>> {
    match (spec.storage.disk, &spec.storage.s3) {
        (Disk::S3, Some(s3)) => Some(vec![EnvFromSource {
            secret_ref: Some(SecretEnvSource {
                name: s3.secret_name.clone(),
                optional: Some(false),
            }),
            ..EnvFromSource::default()
        }]),
        _ => None,
    }
}

/// Appends the user's extra env last so a name given there wins over ours.
pub fn with_extra_env(spec: &HolloSpec, mut env: Vec<EnvVar>) -> Vec<EnvVar> {
    if let Some(ca) = &spec.pod.ca_bundle {
        let var = match spec.image.profile {
            ImageProfile::HolloRs => "EXTRA_CA_CERTS_FILE",
            ImageProfile::Upstream => "NODE_EXTRA_CA_CERTS",
        };
        env.push(plain(var, format!("{CA_MOUNT}/{}", ca.key)));
    }
    env.extend(spec.env.iter().cloned());
    env
}

/// Where `spec.pod.caBundle` is mounted (R-OP-OPS).
pub const CA_MOUNT: &str = "/etc/hollo/ca";
const CA_VOLUME: &str = "ca-bundle";

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        localhost_profile: None,
    }
}

pub fn pod_security_context(spec: &HolloSpec) -> PodSecurityContext {
    spec.pod
        .security_context
        .as_deref()
        .cloned()
        .unwrap_or(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(RUN_AS),
            run_as_group: Some(RUN_AS),
            fs_group: Some(RUN_AS),
            seccomp_profile: Some(runtime_default()),
            ..PodSecurityContext::default()
        })
}

pub fn container_security_context(spec: &HolloSpec) -> SecurityContext {
    spec.pod
        .container_security_context
        .as_deref()
        .cloned()
        .unwrap_or(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            seccomp_profile: Some(runtime_default()),
            ..SecurityContext::default()
        })
}

pub fn volumes(spec: &HolloSpec) -> Vec<Volume> {
    // The root filesystem is read-only; /tmp is the one writable scratch place.
    let mut v = vec![Volume {
        name: TMP_VOLUME.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity("1Gi".into())),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if let (Disk::Fs, Some(fs)) = (spec.storage.disk, &spec.storage.fs) {
        v.push(Volume {
            name: STORAGE_VOLUME.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: fs.claim_name.clone(),
                read_only: Some(false),
            }),
            ..Volume::default()
        });
    }
    if let Some(ca) = &spec.pod.ca_bundle {
        let items = Some(vec![k8s_openapi::api::core::v1::KeyToPath {
            key: ca.key.clone(),
            path: ca.key.clone(),
            ..Default::default()
        }]);
        v.push(Volume {
            name: CA_VOLUME.into(),
            config_map: ca.config_map.as_ref().map(|name| {
                k8s_openapi::api::core::v1::ConfigMapVolumeSource {
                    name: name.clone(),
                    items: items.clone(),
                    ..Default::default()
                }
            }),
            secret: ca
                .secret
                .as_ref()
                .map(|name| k8s_openapi::api::core::v1::SecretVolumeSource {
                    secret_name: Some(name.clone()),
                    items: items.clone(),
                    ..Default::default()
                }),
            ..Volume::default()
        });
    }
    v.extend(spec.pod.volumes.iter().cloned());
    v
}

pub fn volume_mounts(spec: &HolloSpec) -> Vec<VolumeMount> {
    let mut m = vec![VolumeMount {
        name: TMP_VOLUME.into(),
        mount_path: "/tmp".into(),
        ..VolumeMount::default()
    }];
    if let (Disk::Fs, Some(fs)) = (spec.storage.disk, &spec.storage.fs) {
        m.push(VolumeMount {
            name: STORAGE_VOLUME.into(),
            mount_path: fs.mount_path.clone(),
            ..VolumeMount::default()
        });
    }
    if spec.pod.ca_bundle.is_some() {
        m.push(VolumeMount {
            name: CA_VOLUME.into(),
            mount_path: CA_MOUNT.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    m.extend(spec.pod.volume_mounts.iter().cloned());
    m
}

/// Command, args, ports and probes of a role (`profile`) on its container.
pub fn with_process(mut c: Container, p: super::profile::Process) -> Container {
    c.command = p.command;
    c.args = p.args;
    c.ports = (!p.ports.is_empty()).then_some(p.ports);
    c.startup_probe = p.startup;
    c.liveness_probe = p.liveness;
    c.readiness_probe = p.readiness;
    c
}

/// The one `hollo` container with the security defaults, mounts and image of the spec.
pub fn base_container(
    spec: &HolloSpec,
    version_image: String,
    env: Vec<EnvVar>,
    resources: &ResourceRequirements,
) -> Container {
    Container {
        name: CONTAINER.into(),
        image: Some(version_image),
        image_pull_policy: Some(spec.image.pull_policy.as_str().into()),
        env: Some(with_extra_env(spec, env)),
        env_from: env_from(spec),
        resources: Some(resources.clone()),
        security_context: Some(container_security_context(spec)),
        volume_mounts: Some(volume_mounts(spec)),
        ..Container::default()
    }
}

/// The `scheduling` of the role a component belongs to (`all` pods are the HTTP role's).
pub fn scheduling(spec: &HolloSpec, component: Component) -> &SchedulingSpec {
    match component {
        Component::Web | Component::All | Component::MaintenancePage => &spec.web.scheduling,
        Component::Worker => &spec.worker.scheduling,
        Component::Migration => &spec.migrations.scheduling,
    }
}

/// The spread a role gets when its `scheduling` names none: one pod per node as far as the
/// nodes allow, never blocking scheduling (`ScheduleAnyway`), counted among the pods of the same
/// rollout revision (`pod-template-hash`) so a rollout's new pods spread too. Jobs get none.
pub fn default_spread(hollo: &Hollo, component: Component) -> Vec<TopologySpreadConstraint> {
    if component == Component::Migration {
        return vec![];
    }
    vec![TopologySpreadConstraint {
        max_skew: 1,
        topology_key: "kubernetes.io/hostname".into(),
        when_unsatisfiable: "ScheduleAnyway".into(),
        label_selector: Some(LabelSelector {
            match_labels: Some(labels::selector(&hollo.name_any(), component)),
            match_expressions: None,
        }),
        match_label_keys: Some(vec!["pod-template-hash".into()]),
        ..TopologySpreadConstraint::default()
    }]
}

/// A pod template for `component` running `container`, with scheduling and security of the spec.
pub fn pod_template(
    hollo: &Hollo,
    component: Component,
    version: &str,
    container: Container,
    termination_grace_seconds: i64,
    restart_policy: Option<&str>,
) -> PodTemplateSpec {
    let spec = &hollo.spec;
    let annotations = (!spec.pod.annotations.is_empty()).then(|| spec.pod.annotations.clone());
    let role = scheduling(spec, component);
    let node_selector = role
        .node_selector
        .clone()
        .unwrap_or_else(|| spec.pod.node_selector.clone());
    let tolerations = role
        .tolerations
        .clone()
        .unwrap_or_else(|| spec.pod.tolerations.clone());
    let spread = role
        .topology_spread_constraints
        .clone()
        .unwrap_or_else(|| default_spread(hollo, component));
    // The user's labels first: the operator's (selectors among them) win on a clash, which
    // admission already refuses for `app.kubernetes.io/` keys.
    let mut pod_labels = spec.pod.labels.clone();
    pod_labels.extend(labels::labels(&hollo.name_any(), component, version));
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(pod_labels),
            annotations,
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            containers: vec![container],
            // The pods never talk to the Kubernetes API.
            automount_service_account_token: Some(false),
            service_account_name: spec.pod.service_account_name.clone(),
            // Service links would inject `<SERVICE>_PORT`-style variables into the runtime's env.
            enable_service_links: Some(false),
            security_context: Some(pod_security_context(spec)),
            termination_grace_period_seconds: Some(termination_grace_seconds),
            volumes: Some(volumes(spec)),
            image_pull_secrets: (!spec.image.pull_secrets.is_empty())
                .then(|| spec.image.pull_secrets.clone()),
            node_selector: (!node_selector.is_empty()).then_some(node_selector),
            tolerations: (!tolerations.is_empty()).then_some(tolerations),
            affinity: role
                .affinity
                .as_deref()
                .or(spec.pod.affinity.as_deref())
                .cloned(),
            topology_spread_constraints: (!spread.is_empty()).then_some(spread),
            priority_class_name: role.priority_class_name.clone(),
            restart_policy: restart_policy.map(str::to_string),
            ..PodSpec::default()
        }),
    }
}

/// Removes the media volume from a Job's pod: migrations and version probes never touch media,
/// and a claim that is not bound yet (or is ReadWriteOnce and busy) must not block them.
pub fn without_storage(mut t: PodTemplateSpec) -> PodTemplateSpec {
    if let Some(pod) = t.spec.as_mut() {
        if let Some(v) = pod.volumes.as_mut() {
            v.retain(|v| v.name != STORAGE_VOLUME);
        }
        for c in &mut pod.containers {
            if let Some(m) = c.volume_mounts.as_mut() {
                m.retain(|m| m.name != STORAGE_VOLUME);
            }
        }
    }
    t
}

/// Image reference for a given version (the rollout target or, while stopping, the old one).
pub fn image_for(spec: &HolloSpec, version: &str) -> String {
    if version == spec.version {
        spec.image_ref()
    } else {
        format!("{}:{}", spec.image.repository, version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{FsStorage, S3Storage};
    use crate::testutil::{self, env_value as value_of};

    fn names(env: &[EnvVar]) -> Vec<&str> {
        env.iter().map(|e| e.name.as_str()).collect()
    }

    /// R-OP-OPS: the CA bundle is mounted read-only and named by the profile's variable.
    #[test]
    fn a_ca_bundle_is_mounted_and_named() {
        let mut spec = testutil::spec();
        spec.pod.ca_bundle = Some(crate::crd::CaBundleSpec {
            config_map: Some("corp-ca".into()),
            secret: None,
            key: "bundle.pem".into(),
        });
        let c = base_container(
            &spec,
            "img".into(),
            vec![],
            &ResourceRequirements::default(),
        );
        let env = c.env.clone().unwrap_or_default();
        let var = env
            .iter()
            .find(|e| e.name == "EXTRA_CA_CERTS_FILE")
            .expect("EXTRA_CA_CERTS_FILE");
        assert_eq!(var.value.as_deref(), Some("/etc/hollo/ca/bundle.pem"));
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "ca-bundle")
            .expect("mount");
        assert_eq!(
            (mount.mount_path.as_str(), mount.read_only),
            ("/etc/hollo/ca", Some(true))
        );
        let vol = volumes(&spec)
            .into_iter()
            .find(|v| v.name == "ca-bundle")
            .expect("volume");
        let cm = vol.config_map.expect("configMap");
        assert_eq!(cm.name, "corp-ca");
        assert_eq!(cm.items.expect("items")[0].key, "bundle.pem");
        spec.image.profile = ImageProfile::Upstream;
        let c = base_container(
            &spec,
            "img".into(),
            vec![],
            &ResourceRequirements::default(),
        );
        assert!(
            c.env
                .iter()
                .flatten()
                .any(|e| e.name == "NODE_EXTRA_CA_CERTS")
        );
        assert!(
            volumes(&testutil::spec())
                .iter()
                .all(|v| v.name != "ca-bundle"),
            "none without caBundle"
        );
    }

    #[test]
    fn secrets_are_only_references() {
        let spec = testutil::spec();
        let env = common_env(&spec, true);
        let db = env
            .iter()
            .find(|e| e.name == "DATABASE_URL")
            .expect("DATABASE_URL");
        assert_eq!(db.value, None);
        let sel = db
            .value_from
            .as_ref()
            .and_then(|v| v.secret_key_ref.as_ref())
            .expect("ref");
        assert_eq!((sel.name.as_str(), sel.key.as_str()), ("hollo-db", "url"));
        let key = env
            .iter()
            .find(|e| e.name == "SECRET_KEY")
            .expect("SECRET_KEY");
        assert_eq!(key.value, None);
        assert_eq!(
            names(&env),
            [
                "DATABASE_URL",
                "SECRET_KEY",
                "RUNTIME_ENV",
                "LOG_FORMAT",
                "DRIVE_DISK"
            ]
        );
    }

    #[test]
    fn optional_env_follows_the_spec() {
        let mut spec = testutil::spec();
        spec.database.direct_url_secret_ref = Some(SecretKeyRef {
            name: "db".into(),
            key: "direct".into(),
        });
        spec.admin_token_ref = Some(SecretKeyRef {
            name: "adm".into(),
            key: "token".into(),
        });
        spec.storage.fs = Some(FsStorage {
            claim_name: "media".into(),
            mount_path: "/data/storage".into(),
        });
        spec.storage.url_base = Some("https://media.example".into());
        spec.web.ingress.enabled = true;
        spec.web.ingress.host = Some("hollo.example.com".into());
        let env = common_env(&spec, true);
        assert_eq!(
            names(&env),
            [
                "DATABASE_URL",
                "DATABASE_DIRECT_URL",
                "SECRET_KEY",
                "ADMIN_TOKEN",
                "RUNTIME_ENV",
                "LOG_FORMAT",
                "DRIVE_DISK",
                "FS_STORAGE_PATH",
                "STORAGE_URL_BASE",
                "PUBLIC_URL",
                "BEHIND_PROXY"
            ]
        );
        assert_eq!(
            value_of(&env, "PUBLIC_URL"),
            Some("https://hollo.example.com")
        );
        // Workers never sit behind the Ingress.
        assert!(!names(&common_env(&spec, false)).contains(&"BEHIND_PROXY"));
    }

    fn secret_of(env: &[EnvVar], name: &str) -> Option<(String, String)> {
        let s = env
            .iter()
            .find(|e| e.name == name)?
            .value_from
            .as_ref()?
            .secret_key_ref
            .as_ref()?;
        Some((s.name.clone(), s.key.clone()))
    }

    fn cnpg(pooler: Option<&str>) -> HolloSpec {
        let mut spec = testutil::spec();
        spec.database.url_secret_ref = None;
        spec.database.cnpg = Some(crate::crd::CnpgSpec {
            cluster: "pg".into(),
            pooler: pooler.map(Into::into),
        });
        spec
    }

    #[test]
    fn cnpg_without_a_pooler_is_the_app_secrets_uri_everywhere() {
        let spec = cnpg(None);
        for http in [true, false] {
            let env = common_env(&spec, http);
            assert_eq!(
                secret_of(&env, "DATABASE_URL"),
                Some(("pg-app".into(), "uri".into()))
            );
            assert!(!names(&env).contains(&"DATABASE_DIRECT_URL"));
        }
    }

    #[test]
    fn cnpg_pooler_serves_web_while_workers_and_migrations_go_direct() {
        let mut spec = cnpg(Some("pg-pooler"));
        let web = common_env(&spec, true);
        assert_eq!(
            names(&web)[..5],
            [
                "CNPG_USER",
                "CNPG_PASSWORD",
                "CNPG_DBNAME",
                "DATABASE_URL",
                "DATABASE_DIRECT_URL"
            ],
            "dependent vars are defined before DATABASE_URL uses them"
        );
        assert_eq!(
            value_of(&web, "DATABASE_URL"),
            Some("postgresql://$(CNPG_USER):$(CNPG_PASSWORD)@pg-pooler:5432/$(CNPG_DBNAME)")
        );
        assert_eq!(
            secret_of(&web, "CNPG_PASSWORD"),
            Some(("pg-app".into(), "password".into()))
        );
        assert_eq!(
            secret_of(&web, "DATABASE_DIRECT_URL"),
            Some(("pg-app".into(), "uri".into()))
        );
        let worker = common_env(&spec, false);
        assert_eq!(
            secret_of(&worker, "DATABASE_URL"),
            Some(("pg-app".into(), "uri".into()))
        );
        assert!(!names(&worker).contains(&"CNPG_PASSWORD"));
        // Upstream reads no DATABASE_DIRECT_URL: web just goes through the pooler.
        spec.image.profile = ImageProfile::Upstream;
        let web = common_env(&spec, true);
        assert!(!names(&web).contains(&"DATABASE_DIRECT_URL"));
        assert!(value_of(&web, "DATABASE_URL").is_some_and(|u| u.contains("@pg-pooler:5432/")));
    }

    #[test]
    fn upstream_env_uses_upstreams_names_only() {
        let mut spec = testutil::spec();
        spec.image.profile = ImageProfile::Upstream;
        spec.storage.fs = Some(FsStorage {
            claim_name: "media".into(),
            mount_path: "/data/storage".into(),
        });
        spec.storage.url_base = Some("https://h.example/assets".into());
        spec.web.ingress.enabled = true;
        spec.web.ingress.host = Some("h.example".into());
        assert_eq!(
            names(&common_env(&spec, true)),
            [
                "DATABASE_URL",
                "SECRET_KEY",
                "HOME",
                "DRIVE_DISK",
                "FS_STORAGE_PATH",
                "STORAGE_URL_BASE",
                "BEHIND_PROXY"
            ]
        );
        assert_eq!(value_of(&common_env(&spec, false), "HOME"), Some("/tmp"));
    }

    #[test]
    fn s3_settings_come_from_a_secret() {
        let mut spec = testutil::spec();
        spec.storage.disk = Disk::S3;
        spec.storage.s3 = Some(S3Storage {
            secret_name: "hollo-s3".into(),
        });
        let from = env_from(&spec).expect("envFrom");
        assert_eq!(
            from[0].secret_ref.as_ref().map(|s| s.name.as_str()),
            Some("hollo-s3")
        );
        assert_eq!(volumes(&spec).len(), 1, "no media claim with s3");
    }

    #[test]
    fn security_defaults_are_restrictive() {
        let spec = testutil::spec();
        let p = pod_security_context(&spec);
        assert_eq!(p.run_as_non_root, Some(true));
        assert_eq!(p.run_as_user, Some(65532));
        assert_eq!(
            p.seccomp_profile.map(|s| s.type_).as_deref(),
            Some("RuntimeDefault")
        );
        let c = container_security_context(&spec);
        assert_eq!(c.allow_privilege_escalation, Some(false));
        assert_eq!(c.read_only_root_filesystem, Some(true));
        assert_eq!(
            c.capabilities.and_then(|c| c.drop),
            Some(vec!["ALL".to_string()])
        );
        let m = volume_mounts(&spec);
        assert_eq!(m[0].mount_path, "/tmp");
    }

    #[test]
    fn fs_storage_mounts_the_shared_claim() {
        let mut spec = testutil::spec();
        spec.storage.fs = Some(FsStorage {
            claim_name: "media".into(),
            mount_path: "/data/storage".into(),
        });
        let v = volumes(&spec);
        assert_eq!(
            v[1].persistent_volume_claim
                .as_ref()
                .map(|c| c.claim_name.as_str()),
            Some("media")
        );
        assert_eq!(volume_mounts(&spec)[1].mount_path, "/data/storage");
    }

    #[test]
    fn extra_env_comes_last() {
        let mut spec = testutil::spec();
        spec.env = vec![plain("RUNTIME_ENV", "staging-override")];
        let env = with_extra_env(&spec, common_env(&spec, false));
        assert_eq!(env.last().map(|e| e.name.as_str()), Some("RUNTIME_ENV"));
    }

    #[test]
    fn image_for_old_versions_uses_the_repository() {
        let mut spec = testutil::spec();
        spec.image.tag = Some("custom".into());
        assert_eq!(
            image_for(&spec, "0.1.0"),
            "ghcr.io/hollo-social/hollo:custom"
        );
        assert_eq!(
            image_for(&spec, "0.0.9"),
            "ghcr.io/hollo-social/hollo:0.0.9"
        );
    }

    fn pod_of(d: &k8s_openapi::api::apps::v1::Deployment) -> PodSpec {
        d.spec.template.spec.clone().expect("pod")
    }

    #[test]
    fn every_role_spreads_softly_over_nodes_by_default() {
        let h = testutil::hollo(testutil::spec());
        for (d, component) in [
            (super::super::web::deployment(&h, "0.1.0", None), "web"),
            (
                super::super::worker::deployment(&h, "0.1.0", None),
                "worker",
            ),
        ] {
            let tsc = pod_of(&d)
                .topology_spread_constraints
                .expect("default spread");
            assert_eq!(tsc.len(), 1);
            let c = &tsc[0];
            assert_eq!(c.max_skew, 1);
            assert_eq!(c.topology_key, "kubernetes.io/hostname");
            assert_eq!(c.when_unsatisfiable, "ScheduleAnyway", "soft: never blocks");
            let sel = c
                .label_selector
                .as_ref()
                .and_then(|s| s.match_labels.clone());
            let sel = sel.expect("selector");
            assert_eq!(sel["app.kubernetes.io/component"], component);
            assert_eq!(sel["app.kubernetes.io/instance"], "social");
            assert_eq!(
                c.match_label_keys,
                Some(vec!["pod-template-hash".to_string()])
            );
        }
        let job = super::super::migration::job(&h, 0);
        let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
        assert_eq!(
            pod.topology_spread_constraints, None,
            "a one-pod Job spreads nowhere"
        );
    }

    #[test]
    fn role_scheduling_replaces_the_pod_wide_settings() {
        use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, Toleration};
        let mut spec = testutil::spec();
        spec.pod.node_selector = [("pool".to_string(), "general".to_string())].into();
        spec.pod.tolerations = vec![Toleration {
            key: Some("shared".into()),
            operator: Some("Exists".into()),
            ..Toleration::default()
        }];
        spec.worker.scheduling.node_selector =
            Some([("pool".to_string(), "batch".to_string())].into());
        spec.worker.scheduling.priority_class_name = Some("hollo-workers".into());
        spec.worker.scheduling.topology_spread_constraints = Some(vec![]);
        spec.worker.scheduling.affinity = Some(Box::new(Affinity {
            node_affinity: Some(NodeAffinity::default()),
            ..Affinity::default()
        }));
        spec.migrations.scheduling.tolerations = Some(vec![]);
        let h = testutil::hollo(spec);
        let web = pod_of(&super::super::web::deployment(&h, "0.1.0", None));
        assert_eq!(web.node_selector.expect("pod-wide")["pool"], "general");
        assert_eq!(web.tolerations.map(|t| t.len()), Some(1));
        assert_eq!(web.priority_class_name, None);
        assert_eq!(web.affinity, None);
        let worker = pod_of(&super::super::worker::deployment(&h, "0.1.0", None));
        assert_eq!(worker.node_selector.expect("role's")["pool"], "batch");
        assert_eq!(
            worker.tolerations.map(|t| t.len()),
            Some(1),
            "unset: pod-wide"
        );
        assert_eq!(worker.priority_class_name.as_deref(), Some("hollo-workers"));
        assert!(worker.affinity.and_then(|a| a.node_affinity).is_some());
        assert_eq!(
            worker.topology_spread_constraints, None,
            "[] turns the spread off"
        );
        let job = super::super::migration::job(&h, 0);
        let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
        assert_eq!(pod.tolerations, None, "[] clears them for Jobs");
        assert_eq!(pod.node_selector.expect("pod-wide")["pool"], "general");
    }

    #[test]
    fn extra_labels_and_volumes_reach_every_pod_without_touching_selectors() {
        use k8s_openapi::api::core::v1::SecretVolumeSource;
        let mut spec = testutil::spec();
        spec.pod.labels = [("team".to_string(), "fedi".to_string())].into();
        spec.pod.volumes = vec![Volume {
            name: "ca".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some("corp-ca".into()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        }];
        spec.pod.volume_mounts = vec![VolumeMount {
            name: "ca".into(),
            mount_path: "/etc/ca".into(),
            read_only: Some(true),
            ..VolumeMount::default()
        }];
        let h = testutil::hollo(spec);
        let d = super::super::worker::deployment(&h, "0.1.0", None);
        let meta = d.spec.template.metadata.clone().expect("meta");
        let l = meta.labels.expect("labels");
        assert_eq!(l["team"], "fedi");
        assert_eq!(l["app.kubernetes.io/component"], "worker");
        let sel = d.spec.selector.match_labels.clone().expect("sel");
        assert!(!sel.contains_key("team"));
        let pod = pod_of(&d);
        let vols: Vec<&str> = pod
            .volumes
            .iter()
            .flatten()
            .map(|v| v.name.as_str())
            .collect();
        assert_eq!(vols, ["tmp", "ca"]);
        let mounts: Vec<&str> = pod.containers[0]
            .volume_mounts
            .iter()
            .flatten()
            .map(|m| m.mount_path.as_str())
            .collect();
        assert_eq!(mounts, ["/tmp", "/etc/ca"]);
        let job = super::super::migration::job(&h, 0);
        let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
        assert!(
            pod.volumes.iter().flatten().any(|v| v.name == "ca"),
            "Jobs too"
        );
    }
}
