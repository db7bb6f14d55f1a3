//! The `Hollo` custom resource (`hollo.social/v1alpha1`): spec, status, defaults and the
//! admission rules (OpenAPI schema + CEL `x-kubernetes-validations`).
//!
//! Every default is stated once: in a struct's `Default` impl, read by a container-level
//! `#[serde(default)]` (a field missing from a stored object takes it) and by schemars (which
//! emits it into the CRD schema, so the apiserver defaults stored objects the same way); a field
//! of a struct with required fields has its own default fn instead. Nothing else restates one.
//! Likewise an unset `Option` is left out of a serialized object by the struct's
//! `#[serde_with::skip_serializing_none]`, not by an attribute on each field.

// `printcolumn(...)` repeats `type_ = "string"` across columns by design; clippy reads the
// derive's helper attributes as duplicated attributes.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscalerBehavior;
use k8s_openapi::api::core::v1::{
    Affinity, EnvVar, LocalObjectReference, PodSecurityContext, Probe, ResourceRequirements,
    SecurityContext, Toleration, TopologySpreadConstraint, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[serde_with::skip_serializing_none]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "hollo.social",
    version = "v1alpha1",
    kind = "Hollo",
    plural = "hollos",
    singular = "hollo",
    namespaced,
    status = "HolloStatus",
    derive = "PartialEq",
    doc = "A Hollo fediverse server (ActivityPub, Mastodon client API) run by the Hollo operator: web and worker Deployments, migrations gated before every new version, disruption budgets, autoscalers. `kubectl explain hollo.spec` lists its fields.",
    category = "hollo",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Version",
        type_ = "string",
        json_path = ".status.currentVersion"
    ),
    printcolumn(
        name = "Web Ready",
        type_ = "integer",
        json_path = ".status.web.readyReplicas"
    ),
    printcolumn(
        name = "Workers Ready",
        type_ = "integer",
        json_path = ".status.worker.readyReplicas"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    // `kubectl get hollo -o wide` (R-OP-OPS): the target of an upgrade, pod counts,
    // the conditions an operator checks first.
    printcolumn(
        name = "Target",
        type_ = "string",
        json_path = ".status.targetVersion",
        priority = "1"
    ),
    printcolumn(
        name = "Web",
        type_ = "integer",
        description = "Pods of the web (or all) Deployment",
        json_path = ".status.web.replicas",
        priority = "1"
    ),
    printcolumn(
        name = "Workers",
        type_ = "integer",
        description = "Pods of the worker Deployment",
        json_path = ".status.worker.replicas",
        priority = "1"
    ),
    printcolumn(
        name = "Degraded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Degraded\")].reason",
        priority = "1"
    ),
    printcolumn(
        name = "Budget",
        type_ = "string",
        description = "ConnectionBudget condition",
        json_path = ".status.conditions[?(@.type==\"ConnectionBudget\")].status",
        priority = "1"
    ),
    printcolumn(
        name = "Migrations Failed",
        type_ = "integer",
        json_path = ".status.migrationAttempts",
        priority = "1"
    )
)]
#[x_kube(validation = Rule::new("!self.worker.autoscaling.keda.enabled || self.worker.autoscaling.enabled").message("worker.autoscaling.keda.enabled requires worker.autoscaling.enabled"))]
#[x_kube(validation = Rule::new("self.storage.disk != 'fs' || has(self.storage.fs)").message("storage.disk=fs requires storage.fs (a ReadWriteMany claim)"))]
#[x_kube(validation = Rule::new("self.storage.disk != 's3' || has(self.storage.s3)").message("storage.disk=s3 requires storage.s3"))]
#[x_kube(validation = Rule::new("!self.web.ingress.enabled || (has(self.web.ingress.host) && self.web.ingress.host != '')").message("web.ingress.enabled requires web.ingress.host"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !has(self.adminTokenRef)").message("image.profile=upstream: upstream Hollo has no admin token (ADMIN_TOKEN is hollo-rs only); remove adminTokenRef"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !has(self.admin)").message("image.profile=upstream: upstream Hollo creates its first account on its own setup page (it has no `hollo account create`); remove admin"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !has(self.database.directUrlSecretRef)").message("image.profile=upstream: upstream Hollo reads only DATABASE_URL; remove database.directUrlSecretRef"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !has(self.publicUrl)").message("image.profile=upstream: upstream Hollo takes its origin from the request (BEHIND_PROXY) or from WEB_ORIGIN and HANDLE_HOST in spec.env; remove publicUrl"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || has(self.storage.urlBase) || self.env.exists(e, e.name == 'STORAGE_URL_BASE')").message("image.profile=upstream: upstream Hollo refuses to start without STORAGE_URL_BASE; set storage.urlBase (with disk fs: https://<host>/assets)"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !has(self.migrations.command) || self.migrations.command != ['hollo', 'migrate']").message("image.profile=upstream migrates with `pnpm run migrate`; `hollo migrate` is the hollo-rs command: remove migrations.command"))]
#[x_kube(validation = Rule::new("self.image.profile != 'upstream' || !(self.maintenance.remotePosts.enabled || self.maintenance.media.enabled)").message("image.profile=upstream has no `hollo cleanup` command: spec.maintenance is for the hollo-rs image"))]
#[x_kube(validation = Rule::new("!self.networkPolicy.enabled || has(self.database.cnpg) || size(self.networkPolicy.database) > 0").message("networkPolicy.enabled needs to know where the database is: networkPolicy.database (say [{ipBlock: {cidr: 10.0.5.10/32}}]) unless database.cnpg names the cluster"))]
#[x_kube(validation = Rule::new("!self.upgrade.backup.enabled || has(self.database.cnpg)").message("upgrade.backup.enabled takes a CloudNativePG Backup: it needs database.cnpg"))]
#[serde(rename_all = "camelCase")]
/// The desired state of one Hollo instance: its version and image, database, Secrets, media
/// storage, web and worker roles, migrations and upgrades.
pub struct HolloSpec {
    /// The Hollo version to run; the image tag unless `image.tag` is set. Changing it triggers
    /// the gated upgrade (scale down, migrate, roll out).
    #[x_kube(validation = Rule::new("self.size() > 0 && self.size() <= 128").message("version must be 1-128 characters"))]
    pub version: String,
    /// The image every pod and Job runs: repository, conventions (`profile`), tag and pulling.
    #[serde(default)]
    pub image: ImageSpec,
    #[serde(default)]
    pub mode: Mode,
    /// Environment name → `RUNTIME_ENV`; jobs are scoped to it (R-JOB-9).
    #[serde(default = "default_environment")]
    #[x_kube(validation = Rule::new("self.size() > 0").message("environment must not be empty"))]
    pub environment: String,
    /// Where the database is (a URL Secret or a CloudNativePG cluster) and the numbers the
    /// connection budget is checked against.
    pub database: DatabaseSpec,
    /// Secret holding `SECRET_KEY`, the root of the key that encrypts every account's private
    /// key. Unset: the operator generates the Secret `<name>-secret-key` (key `SECRET_KEY`, 64
    /// hex characters from the operator's random source) once, owned by this `Hollo`, and never
    /// changes it. Deleting the `Hollo` deletes that Secret too: before deleting a `Hollo` whose
    /// database you keep, copy it into a Secret of your own and name that here.
    pub secret_key_ref: Option<SecretKeyRef>,
    /// The first account, declared: an administrator created once the schema is migrated, by
    /// a Job (`<name>-admin-…`) running `hollo account create --if-absent`. An account of
    /// that name that exists is left exactly as it is (a password changed since stays
    /// changed). Condition `AdminAccount`.
    pub admin: Option<AdminSpec>,
    /// Optional Secret holding `ADMIN_TOKEN` (bearer token of the admin API).
    pub admin_token_ref: Option<SecretKeyRef>,
    /// `PUBLIC_URL`; defaults to `https://<web.ingress.host>` when an Ingress is enabled.
    pub public_url: Option<String>,
    /// Where media files are kept: a ReadWriteMany claim every pod mounts (`fs`) or S3.
    #[serde(default)]
    pub storage: StorageSpec,
    /// The web role: the pods serving HTTP (every pod in `mode: all`), their Service, Ingress or
    /// HTTPRoute, autoscaler and disruption budget.
    #[serde(default)]
    pub web: WebSpec,
    /// The worker role (`mode: split`): the pods consuming the queues, their autoscaler and
    /// disruption budget.
    #[serde(default)]
    pub worker: WorkerSpec,
    /// The migration Jobs run before a version's pods start, and the version-probe Jobs.
    #[serde(default)]
    pub migrations: MigrationSpec,
    /// How a version change proceeds: `Recreate` (stop every old pod, migrate, start the new
    /// version) or `RollingWhenCompatible` (without downtime when both versions are shown
    /// compatible, else as `Recreate`).
    #[serde(default)]
    pub upgrade_strategy: UpgradeStrategy,
    /// Extra environment for every pod (web, worker, all, migration). Appended after the
    /// operator's own variables, so a name given here wins (Kubernetes: last definition wins).
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Settings of every pod (web, worker, all, Jobs): labels, annotations, volumes, security
    /// contexts, CA bundle, and where they run unless a role's `scheduling` says otherwise.
    #[serde(default)]
    pub pod: PodOverrides,
    /// Opt-in NetworkPolicies for the instance's pods.
    #[serde(default)]
    pub network_policy: NetworkPolicySpec,
    /// Scheduled cleanups.
    #[serde(default)]
    pub maintenance: MaintenanceSpec,
    /// Stop the instance: every role scaled to 0 and its autoscalers
    /// removed; the Deployments (at 0), Service, PDBs, Ingress, CronJobs (suspended), Secrets and
    /// the database stay. Phase and condition `Stopped`; back to `false` starts the same version
    /// again (`RollingOut` → `Running`).
    #[serde(default)]
    pub stopped: bool,
    /// Pause reconciliation: while `true` the operator changes nothing (no
    /// apply, scale, delete or Job) and only sets the condition `ReconciliationPaused`; edits
    /// made meanwhile take effect when it goes back to `false`.
    #[serde(default)]
    pub reconciliation_paused: bool,
    /// What an upgrade may do.
    #[serde(default)]
    pub upgrade: UpgradeSpec,
}

/// `spec.upgrade`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", default = "UpgradeSpec::default")]
pub struct UpgradeSpec {
    /// Allow a `version` older than the running one whose schema is older than the database's
    /// (or cannot be told). Without it such a downgrade is refused before anything stops
    /// (condition `VersionAccepted=False`, a Warning event; the running version keeps
    /// running). Set it only when the older version is known to run on the newer schema.
    pub allow_downgrade: bool,
    /// A CloudNativePG backup before each migration (`database.cnpg` only).
    pub backup: UpgradeBackupSpec,
    /// When a version change may start its work: the backup, the migration Job, the stop of
    /// a stop-migrate-start and the rollout that follows. Outside every window the old version
    /// keeps serving in phase `WaitingForWindow`, the next window's start in the `Progressing`
    /// condition; an upgrade started inside a window runs to its end. The annotation
    /// `hollo.social/approve-upgrade: "<version>"` lets that version start at once. Empty (the
    /// default): upgrades start at once. A first install never waits.
    // The bounds keep the apiserver's estimate of the rules' cost within its budget.
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.size() <= 16").message("upgrade.maintenanceWindows takes at most 16 windows"))]
    pub maintenance_windows: Vec<MaintenanceWindow>,
}

/// One of `upgrade.maintenanceWindows`: it opens at each time `schedule` names in `timeZone`
/// and stays open for `duration`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// When the window opens: a cron schedule of five fields, `minute hour day-of-month month
    /// day-of-week` (Vixie cron's syntax; `0 2 * * 6` is Saturdays at 02:00), read in
    /// `timeZone`. A start in an hour a daylight-saving change skips opens right after the
    /// change; one in an hour it repeats opens once, the first time.
    #[schemars(length(max = 128))]
    #[x_kube(validation = Rule::new("self.matches('^ *[^ ]+( +[^ ]+){4} *$')").message("upgrade.maintenanceWindows[].schedule must be a cron schedule of five fields: minute hour day-of-month month day-of-week"))]
    pub schedule: String,
    /// How long the window stays open after each start, in hours and minutes: `2h`, `90m`,
    /// `1h30m`. Elapsed time: a `2h` window across a daylight-saving change is two real hours.
    #[schemars(length(max = 16))]
    #[x_kube(validation = Rule::new("self.matches('^([0-9]{1,3}h)?([0-9]{1,5}m)?$') && !self.matches('^(0+h)?(0+m)?$')").message("upgrade.maintenanceWindows[].duration must be hours and minutes, more than zero: 2h, 90m, 1h30m"))]
    pub duration: String,
    /// The IANA time zone `schedule` is read in, say `Europe/Berlin`.
    #[serde(default = "default_window_time_zone")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.size() > 0").message("upgrade.maintenanceWindows[].timeZone must name an IANA time zone"))]
    pub time_zone: String,
}

fn default_window_time_zone() -> String {
    "UTC".into()
}

/// `spec.upgrade.backup`: before an upgrade migrates, the operator creates a
/// CloudNativePG `Backup` `<name>-backup-<version>` of `database.cnpg.cluster` and waits, with
/// the old version serving (`BackingUp`), until it is `completed`. `failed`, or not completed
/// within `timeoutSeconds`: `BackupFailed`, no migration, the old version keeps running; delete
/// that Backup to try again. The Backup's method follows the Cluster's own backup
/// configuration unless `method` says otherwise.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "UpgradeBackupSpec::default")]
#[x_kube(validation = Rule::new("!has(self.pluginConfiguration) || (has(self.method) && self.method == 'plugin')").message("upgrade.backup.pluginConfiguration is for method: plugin; set method: plugin or remove pluginConfiguration"))]
pub struct UpgradeBackupSpec {
    /// Back up the cluster before each migration.
    pub enabled: bool,
    /// How long to wait for the Backup to complete before giving up (`BackupFailed`).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 86400").message("upgrade.backup.timeoutSeconds must be 1-86400"))]
    pub timeout_seconds: i32,
    /// How CloudNativePG takes the Backup (its `spec.method`): `volumeSnapshot`, `plugin` (say,
    /// the Barman Cloud plugin) or `barmanObjectStore` (deprecated by CloudNativePG). Unset: the
    /// Cluster's own configuration decides — `spec.backup.volumeSnapshot` gives
    /// `volumeSnapshot`, else a plugin of `spec.plugins` marked `isWALArchiver` gives `plugin`
    /// with that plugin's name, else `spec.backup.barmanObjectStore` gives `barmanObjectStore`;
    /// a Cluster with none of them has no backup to take (`BackupFailed`, `BackedUp=False`
    /// with reason `NoBackupMethod`).
    pub method: Option<BackupMethod>,
    /// `method: plugin`: the plugin that takes the Backup and its parameters (CloudNativePG's
    /// `spec.pluginConfiguration`). Unset: the Cluster's WAL-archiver plugin, no parameters.
    pub plugin_configuration: Option<BackupPluginConfiguration>,
    /// Whether the backup is online (hot, CloudNativePG's default) or offline (cold: the
    /// instance is stopped while it is taken); CloudNativePG's `spec.online`, read for volume
    /// snapshots. Unset: the Cluster's `spec.backup.volumeSnapshot.online`.
    pub online: Option<bool>,
    /// Which instance takes the backup: `primary` or `prefer-standby` (CloudNativePG's
    /// `spec.target`). Unset: the Cluster's `spec.backup.target`.
    pub target: Option<BackupTarget>,
}

impl Default for UpgradeBackupSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            timeout_seconds: 3600,
            method: None,
            plugin_configuration: None,
            online: None,
            target: None,
        }
    }
}

// CloudNativePG's backup methods (`Backup.spec.method`). No doc comment: the schema takes the
// field's description.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum BackupMethod {
    /// Kubernetes VolumeSnapshots of the instance's volumes.
    VolumeSnapshot,
    /// A CNPG-I plugin (say, Barman Cloud: `barman-cloud.cloudnative-pg.io`).
    Plugin,
    /// Barman to the Cluster's `spec.backup.barmanObjectStore`.
    BarmanObjectStore,
}

// Which instance takes a backup (`Backup.spec.target`); the field's doc is the description.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum BackupTarget {
    /// Always the primary.
    Primary,
    /// The most up-to-date standby when there is one, else the primary.
    PreferStandby,
}

/// `upgrade.backup.pluginConfiguration` (CloudNativePG's `Backup.spec.pluginConfiguration`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct BackupPluginConfiguration {
    /// The plugin's name, say `barman-cloud.cloudnative-pg.io`.
    #[schemars(length(max = 253))]
    #[x_kube(validation = Rule::new("self.size() > 0").message("upgrade.backup.pluginConfiguration.name must be 1-253 characters"))]
    pub name: String,
    /// Parameters passed to the plugin for this backup.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// `spec.maintenance`: owned CronJobs `<name>-cleanup-remote-posts` and
/// `<name>-cleanup-media` running `hollo cleanup …` in the instance's image with the workers'
/// environment; each starts the runtime's cleanup job (R-JOB-11), which the workers carry out.
/// Suspended while an upgrade stops the workers. `status.lastCleanup` tells when each last
/// started one.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct MaintenanceSpec {
    /// Remote posts older than `olderThanDays` that no local account bookmarked.
    pub remote_posts: RemotePostsCleanup,
    /// Media files no row names, and uploads no status took within a day.
    pub media: MediaCleanup,
    /// The CronJobs' `timeZone` (IANA name); unset: the controller manager's (usually UTC).
    pub time_zone: Option<String>,
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "RemotePostsCleanup::default")]
#[x_kube(validation = Rule::new("self.olderThanDays >= 1 && self.olderThanDays <= 36500").message("maintenance.remotePosts.olderThanDays must be 1-36500"))]
#[x_kube(validation = Rule::new("self.schedule.size() > 0").message("maintenance.remotePosts.schedule must be a cron schedule"))]
pub struct RemotePostsCleanup {
    /// Run the CronJob `<name>-cleanup-remote-posts`.
    pub enabled: bool,
    /// Cron schedule (`minute hour day month weekday`).
    pub schedule: String,
    /// Remote posts older than this many days are deleted.
    pub older_than_days: i32,
}

impl Default for RemotePostsCleanup {
    fn default() -> Self {
        Self {
            enabled: false,
            schedule: "17 3 * * *".into(),
            older_than_days: 30,
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "MediaCleanup::default")]
#[x_kube(validation = Rule::new("self.schedule.size() > 0").message("maintenance.media.schedule must be a cron schedule"))]
pub struct MediaCleanup {
    /// Run the CronJob `<name>-cleanup-media`.
    pub enabled: bool,
    /// Cron schedule (`minute hour day month weekday`).
    pub schedule: String,
}

impl Default for MediaCleanup {
    fn default() -> Self {
        Self {
            enabled: false,
            schedule: "47 3 * * 0".into(),
        }
    }
}

/// `spec.networkPolicy`: NetworkPolicies `<name>-web` (web or all pods) and
/// `<name>-worker` (workers; migration, version-probe, cleanup and admin-account Jobs). Ingress:
/// the web port only from `ingressNamespaces`, the health port (`/metrics`) only from `metricsNamespaces`, nothing else.
/// Egress: DNS, the database, `objectStorage` peers, and the public internet (any port) except
/// private, shared, loopback and link-local ranges (cloud metadata is link-local), beside the
/// runtime's own fetch guard. Enforced only by a CNI that implements NetworkPolicy.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "NetworkPolicySpec::default")]
#[x_kube(validation = Rule::new("!self.enabled || size(self.ingressNamespaces) > 0").message("networkPolicy.enabled requires ingressNamespaces: the namespaces of the ingress controller or gateway that reach the web port"))]
pub struct NetworkPolicySpec {
    /// Create both NetworkPolicies.
    pub enabled: bool,
    /// Namespaces (by name) whose pods may reach the web port: the ingress controller's or the
    /// Gateway's.
    pub ingress_namespaces: Vec<String>,
    /// Namespaces (by name) whose pods may scrape the health port (`/metrics`) of every pod;
    /// empty: no scraping.
    pub metrics_namespaces: Vec<String>,
    /// Where the database is, when it is not a CloudNativePG cluster of `database.cnpg` (whose
    /// pods are allowed by their `cnpg.io/cluster` label) nor on the public internet: say an
    /// `ipBlock` of a private address or a pod/namespace selector. Reached on `databasePort`.
    pub database: Vec<k8s_openapi::api::networking::v1::NetworkPolicyPeer>,
    /// The database's port, allowed towards `database` (or the CloudNativePG pods).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 65535").message("networkPolicy.databasePort must be 1-65535"))]
    pub database_port: i32,
    /// Object storage in a private range (say an in-cluster MinIO), any port. A public S3
    /// endpoint needs nothing: the public internet is allowed.
    pub object_storage: Vec<k8s_openapi::api::networking::v1::NetworkPolicyPeer>,
    /// More egress rules, appended as they are (say a proxy in a private range).
    pub extra_egress: Vec<k8s_openapi::api::networking::v1::NetworkPolicyEgressRule>,
}

impl Default for NetworkPolicySpec {
    fn default() -> Self {
        Self {
            enabled: false,
            ingress_namespaces: vec![],
            metrics_namespaces: vec![],
            database: vec![],
            database_port: 5432,
            object_storage: vec![],
            extra_egress: vec![],
        }
    }
}

fn default_environment() -> String {
    "production".into()
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "ImageSpec::default")]
#[x_kube(validation = Rule::new("self.profile == 'hollo-rs' || self.profile == 'upstream'").message("image.profile must be hollo-rs or upstream"))]
pub struct ImageSpec {
    /// The image repository, without a tag: the tag is `spec.version` unless `tag` is set.
    pub repository: String,
    /// Which conventions the image follows: `hollo-rs` (this project's runtime) or `upstream`
    /// (fedify-dev/hollo's image). Sets the default commands, probes, ports, environment and
    /// autoscaling query; every one of them can be overridden per role.
    pub profile: ImageProfile,
    /// Overrides `spec.version` as the image tag (e.g. a digest-pinned build of that version).
    pub tag: Option<String>,
    /// `imagePullPolicy` of every container.
    pub pull_policy: PullPolicy,
    /// `imagePullSecrets` of every pod: Secrets of the Hollo's namespace.
    pub pull_secrets: Vec<LocalObjectReference>,
}

impl Default for ImageSpec {
    fn default() -> Self {
        Self {
            repository: "ghcr.io/hollo-social/hollo".into(),
            profile: ImageProfile::HolloRs,
            tag: None,
            pull_policy: PullPolicy::IfNotPresent,
            pull_secrets: vec![],
        }
    }
}

/// The conventions of an image (see `resources::profile`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ImageProfile {
    /// This project's `hollo` binary: `hollo serve`, `hollo migrate`, `/healthz` and `/readyz`
    /// on every role (workers on `HEALTH_PORT`), `hollo version --json`.
    #[default]
    #[serde(rename = "hollo-rs")]
    HolloRs,
    /// fedify-dev/hollo's image: `pnpm run migrate`, `node dist/bin/server.js`, no worker port,
    /// no version command, Fedify's PostgreSQL queue.
    #[serde(rename = "upstream")]
    Upstream,
}

impl ImageProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            ImageProfile::HolloRs => "hollo-rs",
            ImageProfile::Upstream => "upstream",
        }
    }

    /// Whether the image can report its task-definition and schema versions (`hollo version
    /// --json`), which `RollingWhenCompatible` compares. Upstream's image has no such command.
    pub fn reports_versions(self) -> bool {
        self == ImageProfile::HolloRs
    }
}

// A plain string in the schema: an unknown profile is then rejected by the CEL rule on
// `image` with a message that names the valid ones (an OpenAPI enum would answer first, with
// the apiserver's generic "Unsupported value").
impl JsonSchema for ImageProfile {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ImageProfile".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string"})
    }

    fn inline_schema() -> bool {
        true
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum PullPolicy {
    Always,
    IfNotPresent,
    Never,
}

impl PullPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// `split`: web Deployment + worker Deployment. `all`: one Deployment with `NODE_TYPE=all`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    #[default]
    Split,
    All,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpgradeStrategy {
    /// Stop every old pod, migrate, start the new version (the seed rule; always safe).
    #[default]
    Recreate,
    /// Roll without downtime when both versions share the task-definition version and the
    /// migration Job found nothing to apply; otherwise behaves like `Recreate`.
    RollingWhenCompatible,
}

/// A key in a Secret in the Hollo's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key in that Secret.
    pub key: String,
}

/// `spec.admin`: the account the Job creates.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AdminSpec {
    /// Its user name (its handle is `@<username>@<host>`; sign in with it): 1-30 letters,
    /// digits or underscores. A new name creates another account; the old one stays.
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9_]{1,30}$')").message("admin.username must be 1-30 letters, digits or underscores"))]
    pub username: String,
    /// The Secret key holding its sign-in password (8 characters to 1 KiB; one trailing line
    /// break is dropped). Read by the Job's pod only (an environment variable from the
    /// Secret), and only when the account is created: changing it later changes nothing.
    pub password_secret_ref: SecretKeyRef,
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.urlSecretRef) != has(self.cnpg)").message("database: set exactly one of urlSecretRef and cnpg"))]
#[x_kube(validation = Rule::new("!has(self.cnpg) || !has(self.directUrlSecretRef)").message("database.cnpg gives the direct URL itself (the cluster's -rw Service); remove database.directUrlSecretRef"))]
pub struct DatabaseSpec {
    /// Secret key holding `DATABASE_URL`. Exactly one of this and `cnpg`.
    pub url_secret_ref: Option<SecretKeyRef>,
    /// A CloudNativePG `Cluster` in the same namespace: the URL comes from its application
    /// Secret (`<cluster>-app`, key `uri`, which points at `<cluster>-rw`).
    pub cnpg: Option<CnpgSpec>,
    /// Secret key holding `DATABASE_DIRECT_URL` (bypasses a transaction pooler for LISTEN/NOTIFY
    /// and migrations).
    pub direct_url_secret_ref: Option<SecretKeyRef>,
    /// PostgreSQL `max_connections` the connection budget is checked against.
    #[serde(default = "default_max_connections")]
    #[x_kube(validation = Rule::new("self >= 1").message("database.maxConnections must be at least 1"))]
    pub max_connections: i32,
    /// Connections kept free for administrators, monitoring and superuser reserve.
    #[serde(default = "default_headroom")]
    #[x_kube(validation = Rule::new("self >= 0").message("database.headroom must be >= 0"))]
    pub headroom: i32,
}

/// CloudNativePG: the cluster whose application Secret holds the URL, and optionally a
/// `Pooler` (PgBouncer) of that cluster that web nodes connect through.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.cluster != ''").message("database.cnpg.cluster must name the CloudNativePG Cluster (a pooler alone is not enough)"))]
pub struct CnpgSpec {
    /// The `Cluster` name; its Secret `<cluster>-app` must hold `uri`.
    #[serde(default)]
    pub cluster: String,
    /// A `Pooler` of that cluster: web nodes connect through its Service (same name);
    /// migrations and LISTEN/NOTIFY keep the direct `<cluster>-rw` URL.
    pub pooler: Option<String>,
}

fn default_max_connections() -> i32 {
    100
}
fn default_headroom() -> i32 {
    5
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Disk {
    #[default]
    Fs,
    S3,
}

#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct StorageSpec {
    /// `fs`: files on the claim of `fs`; `s3`: objects in the bucket of `s3` (`DRIVE_DISK`).
    pub disk: Disk,
    /// The shared claim of `disk: fs`.
    pub fs: Option<FsStorage>,
    /// The S3 settings of `disk: s3`.
    pub s3: Option<S3Storage>,
    /// `STORAGE_URL_BASE`: the public URL media is served from.
    pub url_base: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FsStorage {
    /// A ReadWriteMany PersistentVolumeClaim shared by every pod.
    pub claim_name: String,
    /// Where every pod mounts it (`FS_STORAGE_PATH`).
    #[serde(default = "default_mount_path")]
    pub mount_path: String,
}

fn default_mount_path() -> String {
    "/data/storage".into()
}

/// S3 settings come from a Secret whose keys are the runtime's env var names (e.g.
/// `S3_BUCKET`, `AWS_ACCESS_KEY_ID`, …); it is mounted with `envFrom`, never copied.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct S3Storage {
    /// The Secret (in the Hollo's namespace) holding the S3 variables.
    pub secret_name: String,
}

/// A PodDisruptionBudget `<name>-<role>` for one role's pods.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "DisruptionBudgetSpec::default")]
pub struct DisruptionBudgetSpec {
    /// `None` = automatic: on when the role has 2 or more replicas.
    pub enabled: Option<bool>,
    /// The budget's `maxUnavailable`: pods of the role a drain may evict at once.
    #[x_kube(validation = Rule::new("self >= 1").message("disruptionBudget.maxUnavailable must be at least 1 (0 blocks node drains forever)"))]
    pub max_unavailable: i32,
}

impl Default for DisruptionBudgetSpec {
    fn default() -> Self {
        Self {
            enabled: None,
            max_unavailable: 1,
        }
    }
}

// Here and for the other large, rarely set Kubernetes types of the spec (affinity, security
// contexts, an HPA's behavior) a `Box`: an unset `Option<Probe>` still takes the size of a
// `Probe` in every cached `Hollo` (6.4 KB a `Hollo` before, most of it unset options; at
// 1 000 `Hollo`s per operator). Serialized and in the schema a `Box` is its content.
// (Not a doc comment: those become the CRD's descriptions.)
/// Probes replacing the profile's defaults for one role (each one independently).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeOverrides {
    pub startup: Option<Box<Probe>>,
    pub liveness: Option<Box<Probe>>,
    pub readiness: Option<Box<Probe>>,
}

/// An Ingress (named as the web Service) sending every path of `host` to the web pods; the
/// web pods then trust `X-Forwarded-*` headers (`BEHIND_PROXY=true`).
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct IngressSpec {
    /// Create the Ingress (needs `host`).
    pub enabled: bool,
    /// The Ingress's `ingressClassName`; unset: the cluster's default class.
    pub class_name: Option<String>,
    /// The host name it answers for; also the default `publicUrl` (`https://<host>`).
    pub host: Option<String>,
    /// A Secret holding the TLS certificate of `host`; unset: no TLS section.
    pub tls_secret_name: Option<String>,
    /// Annotations of the Ingress (say, for its controller).
    pub annotations: BTreeMap<String, String>,
}

/// `web.httpRoute`: a `gateway.networking.k8s.io/v1` `HTTPRoute` sending every
/// path of `hostnames` to the web Service, attached to `parentRefs` (your Gateway). Without the
/// Gateway API's CRDs in the cluster everything else is applied and `Degraded` says so. Body
/// size limits are the Gateway implementation's (see the README: an upload needs more than 1 MiB).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", default = "HttpRouteSpec::default")]
#[x_kube(validation = Rule::new("!self.enabled || size(self.parentRefs) > 0").message("web.httpRoute.enabled requires at least one parentRefs entry (the Gateway)"))]
pub struct HttpRouteSpec {
    /// Create the HTTPRoute (needs `parentRefs`).
    pub enabled: bool,
    /// The Gateways (or listeners, with `sectionName`) the route attaches to.
    pub parent_refs: Vec<GatewayParentRef>,
    /// Host names the route answers for; empty: the listeners' host names.
    pub hostnames: Vec<String>,
    /// Annotations of the HTTPRoute.
    pub annotations: BTreeMap<String, String>,
}

/// A Gateway API `ParentReference`.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GatewayParentRef {
    /// The Gateway's name.
    pub name: String,
    /// Default: the Hollo's namespace (the Gateway must then allow routes from it).
    pub namespace: Option<String>,
    /// A listener of the Gateway.
    pub section_name: Option<String>,
    /// A port of the Gateway's listeners.
    pub port: Option<i32>,
    /// Default `gateway.networking.k8s.io`.
    pub group: Option<String>,
    /// Default `Gateway`.
    pub kind: Option<String>,
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "WebSpec::default")]
#[x_kube(validation = Rule::new("self.replicas >= 0").message("web.replicas must be >= 0"))]
#[x_kube(validation = Rule::new("self.port >= 1 && self.port <= 65535").message("web.port must be 1-65535"))]
#[x_kube(validation = Rule::new("self.poolMax >= 1").message("web.poolMax must be at least 1"))]
#[x_kube(validation = Rule::new("self.preStopSeconds >= 0 && self.preStopSeconds <= 300").message("web.preStopSeconds must be 0-300"))]
#[x_kube(validation = Rule::new("self.drainSeconds >= 0 && self.drainSeconds <= 3600").message("web.drainSeconds must be 0-3600"))]
#[x_kube(validation = Rule::new("self.healthPort >= 1 && self.healthPort <= 65535 && self.healthPort != self.port").message("web.healthPort must be 1-65535 and differ from web.port"))]
pub struct WebSpec {
    /// Web pods, when `autoscaling` is off.
    pub replicas: i32,
    /// The HTTP port (`PORT`) of the web pods and of the web Service.
    pub port: i32,
    /// `HEALTH_PORT` of web (and `all`) pods with `hollo-rs`: `/healthz`, `/readyz` and
    /// `/metrics`, which the public `port` does not serve. Declared as the
    /// container port `health`, for a PodMonitor or scrape config to name.
    pub health_port: i32,
    /// `DATABASE_POOL_MAX` of each web pod.
    pub pool_max: i32,
    /// Seconds the pod keeps serving after termination starts (`SHUTDOWN_PRESTOP_SECONDS`:
    /// not ready, `Connection: close` on every response), so every node's proxy drops it first.
    pub pre_stop_seconds: i32,
    /// `SHUTDOWN_DRAIN_SECONDS` for in-flight requests after the pre-stop delay.
    pub drain_seconds: i32,
    pub resources: ResourceRequirements,
    /// The web pods' PodDisruptionBudget `<name>-web` (`<name>-all` in `mode: all`).
    pub disruption_budget: DisruptionBudgetSpec,
    /// An Ingress to the web Service.
    pub ingress: IngressSpec,
    /// A Gateway API `HTTPRoute` `<name>-web` to the web Service, beside (or instead of) the
    /// Ingress.
    #[serde(rename = "httpRoute")]
    pub http_route: HttpRouteSpec,
    /// Replaces the profile's serve command (the container's `command`); `all` nodes use it too.
    pub command: Option<Vec<String>>,
    /// Replaces the profile's arguments (the container's `args`).
    pub args: Option<Vec<String>>,
    pub probes: ProbeOverrides,
    /// Where web (and `all`) pods run; unset fields fall back to `spec.pod`.
    pub scheduling: SchedulingSpec,
    /// A CPU HPA on the web (or `all`) Deployment; `replicas` is then the autoscaler's.
    pub autoscaling: WebAutoscalingSpec,
    /// The 503 page served in the web pods' place while an upgrade stops them.
    pub maintenance_page: MaintenancePageSpec,
}

/// `web.maintenancePage`: while an upgrade stops every web pod to migrate
/// (`ScalingDown`, `Migrating`, `MigrationFailed`, and `RollingOut` until a new web pod is
/// ready) the web Service selects a Deployment `<name>-maintenance-page` running `hollo
/// maintenance-page` of the version being stopped: `503` with `Retry-After` (JSON for the API,
/// OAuth and federation paths, a small HTML page for browsers) instead of refused connections.
/// The `hollo-rs` profile only (the upstream image has no such command).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "MaintenancePageSpec::default")]
pub struct MaintenancePageSpec {
    /// Serve the page while an upgrade stops the web pods.
    pub enabled: bool,
    /// `Retry-After` in seconds (`RETRY_AFTER_SECONDS`).
    #[x_kube(validation = Rule::new("self >= 1 && self <= 3600").message("web.maintenancePage.retryAfterSeconds must be 1-3600"))]
    pub retry_after_seconds: i32,
}

impl Default for MaintenancePageSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            retry_after_seconds: 30,
        }
    }
}

/// Web autoscaling: an `autoscaling/v2` HPA `<name>-web` (`<name>-all` in all
/// mode) on CPU. The connection budget counts `maxReplicas` web pods.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "WebAutoscalingSpec::default")]
#[x_kube(validation = Rule::new("self.minReplicas >= 1").message("web.autoscaling.minReplicas must be at least 1"))]
#[x_kube(validation = Rule::new("self.minReplicas <= self.maxReplicas").message("web.autoscaling.minReplicas must be <= maxReplicas"))]
#[x_kube(validation = Rule::new("self.targetCPUUtilization >= 1 && self.targetCPUUtilization <= 100").message("web.autoscaling.targetCPUUtilization must be 1-100"))]
pub struct WebAutoscalingSpec {
    /// Create the HPA; it then owns the web Deployment's `replicas`.
    pub enabled: bool,
    /// The HPA's `minReplicas`.
    pub min_replicas: i32,
    /// The HPA's `maxReplicas`.
    pub max_replicas: i32,
    /// Average CPU use the HPA aims for, in percent of the pods' CPU request.
    #[serde(rename = "targetCPUUtilization")]
    pub target_cpu_utilization: i32,
    /// The HPA's `behavior` (scale-up/scale-down policies and stabilization windows); unset =
    /// Kubernetes' defaults (scale down after a 300 s window).
    pub behavior: Option<Box<HorizontalPodAutoscalerBehavior>>,
}

impl Default for WebAutoscalingSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            min_replicas: 2,
            max_replicas: 4,
            target_cpu_utilization: 70,
            behavior: None,
        }
    }
}

impl Default for WebSpec {
    fn default() -> Self {
        Self {
            replicas: 2,
            port: 3000,
            health_port: 9090,
            pool_max: 20,
            pre_stop_seconds: 5,
            drain_seconds: 30,
            resources: ResourceRequirements::default(),
            disruption_budget: DisruptionBudgetSpec::default(),
            ingress: IngressSpec::default(),
            http_route: HttpRouteSpec::default(),
            command: None,
            args: None,
            probes: ProbeOverrides::default(),
            scheduling: SchedulingSpec::default(),
            autoscaling: WebAutoscalingSpec::default(),
            maintenance_page: MaintenancePageSpec::default(),
        }
    }
}

/// Where one role's pods run. A field set here replaces the same field of
/// `spec.pod` for this role; an unset one falls back to it.
#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulingSpec {
    /// Replaces `spec.pod.nodeSelector` for these pods.
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Replaces `spec.pod.tolerations` for these pods.
    pub tolerations: Option<Vec<Toleration>>,
    pub affinity: Option<Box<Affinity>>,
    /// Unset: web, worker and `all` pods spread softly over nodes (`maxSkew: 1` over
    /// `kubernetes.io/hostname`, `whenUnsatisfiable: ScheduleAnyway`, per rollout revision);
    /// migration Jobs none. `[]`: no constraint at all.
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// The pods' `priorityClassName`; unset: the cluster's default priority.
    pub priority_class_name: Option<String>,
}

/// How much work each worker runs at once.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "ConcurrencySpec::default")]
#[x_kube(validation = Rule::new("self.activities >= 1 && self.tasks >= 1 && self.replies >= 1 && (!has(self.deliveries) || self.deliveries >= 1)").message("worker.concurrency values must be at least 1"))]
#[x_kube(validation = Rule::new("self.replies <= self.tasks").message("worker.concurrency.replies must not exceed worker.concurrency.tasks (replies share the task slots)"))]
pub struct ConcurrencySpec {
    /// `ACTIVITY_CONCURRENCY`: inbox and other activity-queue work per worker.
    pub activities: i32,
    /// `TASK_CONCURRENCY`.
    pub tasks: i32,
    /// `REPLY_CONCURRENCY` (within the task slots).
    pub replies: i32,
    /// `DELIVERY_CONCURRENCY`: outgoing deliveries in flight per worker, in slots of their own
    /// beside the activity slots (a delivery mostly waits on a remote server).
    pub deliveries: i32,
}

impl Default for ConcurrencySpec {
    fn default() -> Self {
        Self {
            activities: 10,
            tasks: 4,
            replies: 2,
            deliveries: 64,
        }
    }
}

#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "KedaSpec::default")]
#[x_kube(validation = Rule::new("self.targetReadyMessagesPerReplica >= 1").message("worker.autoscaling.keda.targetReadyMessagesPerReplica must be at least 1"))]
pub struct KedaSpec {
    /// A KEDA `ScaledObject` instead of the CPU HPA (needs `autoscaling.enabled` and KEDA).
    pub enabled: bool,
    /// Ready queue messages per worker the ScaledObject aims for.
    pub target_ready_messages_per_replica: i32,
    /// KEDA's `pollingInterval`: seconds between two reads of the queue depth.
    pub polling_interval_seconds: i32,
    /// KEDA's `cooldownPeriod`: seconds without ready messages before scaling to
    /// `minReplicas`.
    pub cooldown_period_seconds: i32,
}

impl Default for KedaSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            target_ready_messages_per_replica: 50,
            polling_interval_seconds: 30,
            cooldown_period_seconds: 300,
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "AutoscalingSpec::default")]
#[x_kube(validation = Rule::new("self.minReplicas >= 1").message("worker.autoscaling.minReplicas must be at least 1"))]
#[x_kube(validation = Rule::new("self.minReplicas <= self.maxReplicas").message("worker.autoscaling.minReplicas must be <= maxReplicas"))]
#[x_kube(validation = Rule::new("!has(self.targetCPUUtilization) || (self.targetCPUUtilization >= 1 && self.targetCPUUtilization <= 100)").message("worker.autoscaling.targetCPUUtilization must be 1-100"))]
#[x_kube(validation = Rule::new("has(self.targetCPUUtilization) || self.keda.enabled").message("worker.autoscaling needs targetCPUUtilization or keda.enabled"))]
pub struct AutoscalingSpec {
    /// Create the autoscaler; it then owns the worker Deployment's `replicas`.
    pub enabled: bool,
    /// The autoscaler's `minReplicas`.
    pub min_replicas: i32,
    /// The autoscaler's `maxReplicas`.
    pub max_replicas: i32,
    /// Average CPU use the HPA aims for, in percent of the pods' CPU request; unset: no CPU
    /// target (then `keda` must be on).
    #[serde(rename = "targetCPUUtilization")]
    pub target_cpu_utilization: Option<i32>,
    /// Scale on ready queue messages with KEDA instead.
    pub keda: KedaSpec,
    /// The HPA's `behavior` (scale-down stabilization and policies): on the HPA, or with KEDA
    /// in the ScaledObject's `advanced.horizontalPodAutoscalerConfig.behavior`. Unset =
    /// Kubernetes' defaults.
    pub behavior: Option<Box<HorizontalPodAutoscalerBehavior>>,
}

impl Default for AutoscalingSpec {
    fn default() -> Self {
        Self {
            enabled: false,
            min_replicas: 1,
            max_replicas: 10,
            target_cpu_utilization: Some(70),
            keda: KedaSpec::default(),
            behavior: None,
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "WorkerSpec::default")]
#[x_kube(validation = Rule::new("self.replicas >= 0").message("worker.replicas must be >= 0"))]
#[x_kube(validation = Rule::new("self.drainSeconds >= 0 && self.drainSeconds <= 3600").message("worker.drainSeconds must be 0-3600"))]
#[x_kube(validation = Rule::new("self.poolMax >= 1 && self.itemLockPoolSize >= 1").message("worker.poolMax and worker.itemLockPoolSize must be at least 1"))]
#[x_kube(validation = Rule::new("self.healthPort >= 1 && self.healthPort <= 65535").message("worker.healthPort must be 1-65535"))]
pub struct WorkerSpec {
    /// Used when autoscaling is off; with autoscaling on the autoscaler owns `replicas`.
    pub replicas: i32,
    /// `SHUTDOWN_DRAIN_SECONDS`; the grace period is this plus 5 s (R-OP-DRAIN).
    pub drain_seconds: i32,
    /// How much work each worker runs at once.
    pub concurrency: ConcurrencySpec,
    /// `WORKER_POOL_MAX`.
    pub pool_max: i32,
    /// `ITEM_LOCK_POOL_SIZE`.
    pub item_lock_pool_size: i32,
    /// `HEALTH_PORT`: `/healthz`, `/readyz`, `/metrics` of a worker. Declared as the port
    /// `health` with `hollo-rs`; with `upstream` (whose workers open no port) only when
    /// `worker.probes` sets a probe, which may then name it.
    pub health_port: i32,
    /// An autoscaler for the workers: an HPA on CPU, or a KEDA ScaledObject on ready messages.
    pub autoscaling: AutoscalingSpec,
    pub resources: ResourceRequirements,
    /// The workers' PodDisruptionBudget `<name>-worker`.
    pub disruption_budget: DisruptionBudgetSpec,
    /// Replaces the profile's serve command of workers.
    pub command: Option<Vec<String>>,
    /// Replaces the profile's arguments of workers.
    pub args: Option<Vec<String>>,
    pub probes: ProbeOverrides,
    /// Where worker pods run; unset fields fall back to `spec.pod`.
    pub scheduling: SchedulingSpec,
}

impl Default for WorkerSpec {
    fn default() -> Self {
        Self {
            replicas: 2,
            drain_seconds: 30,
            concurrency: ConcurrencySpec::default(),
            // Worker connections: the general pool plus the dedicated item-lock pool (R-DB-1).
            pool_max: 20,
            item_lock_pool_size: 4,
            health_port: 9090,
            autoscaling: AutoscalingSpec::default(),
            resources: ResourceRequirements::default(),
            disruption_budget: DisruptionBudgetSpec::default(),
            command: None,
            args: None,
            probes: ProbeOverrides::default(),
            scheduling: SchedulingSpec::default(),
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase", default = "MigrationSpec::default")]
#[x_kube(validation = Rule::new("!has(self.command) || self.command.size() > 0").message("migrations.command must not be empty"))]
#[x_kube(validation = Rule::new("self.activeDeadlineSeconds >= 1").message("migrations.activeDeadlineSeconds must be at least 1"))]
#[x_kube(validation = Rule::new("self.backoffLimit >= 0").message("migrations.backoffLimit must be >= 0"))]
pub struct MigrationSpec {
    /// The migration command; unset = the profile's (`hollo migrate`, `pnpm run migrate`).
    pub command: Option<Vec<String>>,
    /// The Jobs' `activeDeadlineSeconds`: a migration still running after this fails (and is
    /// retried with back-off).
    pub active_deadline_seconds: i64,
    /// The Jobs' `backoffLimit`: pods retried within one attempt before it counts as failed.
    pub backoff_limit: i32,
    /// Prints `{"version","schemaVersion","taskDefinitionVersion"}` and writes it to the
    /// container's termination message (`/dev/termination-log`), which the operator reads from
    /// the pod status (else from the pod log); used by `upgradeStrategy: RollingWhenCompatible`.
    pub version_command: Vec<String>,
    /// Resources of migration, version-probe and admin-account Jobs; unset = `web.resources`.
    pub resources: Option<ResourceRequirements>,
    /// Where migration, version-probe and admin-account Jobs run; unset fields fall back to
    /// `spec.pod`.
    pub scheduling: SchedulingSpec,
}

impl Default for MigrationSpec {
    fn default() -> Self {
        Self {
            command: None,
            active_deadline_seconds: 600,
            backoff_limit: 3,
            version_command: [
                "hollo",
                "version",
                "--json",
                "--termination-log",
                "/dev/termination-log",
            ]
            .map(String::from)
            .to_vec(),
            resources: None,
            scheduling: SchedulingSpec::default(),
        }
    }
}

#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase", default = "PodOverrides::default")]
#[x_kube(validation = Rule::new("self.labels.all(k, !k.startsWith('app.kubernetes.io/'))").message("pod.labels must not set app.kubernetes.io/ labels (the operator's selectors use them)"))]
#[x_kube(validation = Rule::new("self.volumes.all(v, v.name != 'tmp' && v.name != 'storage' && v.name != 'ca-bundle')").message("pod.volumes: the names tmp, storage and ca-bundle are the operator's"))]
pub struct PodOverrides {
    /// Extra CA certificates (PEM) trusted for outgoing federation requests besides the public
    /// roots: mounted read-only at `/etc/hollo/ca/` in every pod and named by
    /// `EXTRA_CA_CERTS_FILE` (hollo-rs) or `NODE_EXTRA_CA_CERTS` (upstream).
    pub ca_bundle: Option<CaBundleSpec>,
    /// Extra labels on every pod (web, worker, all, Jobs).
    pub labels: BTreeMap<String, String>,
    /// Extra volumes of every pod (a CA bundle, a config file, …).
    #[schemars(length(max = 32))]
    pub volumes: Vec<Volume>,
    /// Extra mounts of the `hollo` container of every pod.
    #[schemars(length(max = 32))]
    pub volume_mounts: Vec<VolumeMount>,
    /// `nodeSelector` of every pod; a role's `scheduling.nodeSelector` replaces it.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of every pod; a role's `scheduling.tolerations` replaces them.
    pub tolerations: Vec<Toleration>,
    pub affinity: Option<Box<Affinity>>,
    /// Extra annotations on every pod.
    pub annotations: BTreeMap<String, String>,
    /// The ServiceAccount every pod runs as (its token is never mounted: the pods do not talk
    /// to the Kubernetes API); unset: the namespace's `default`.
    pub service_account_name: Option<String>,
    /// Replaces the operator's restrictive pod security context.
    pub security_context: Option<Box<PodSecurityContext>>,
    /// Replaces the operator's restrictive container security context.
    pub container_security_context: Option<Box<SecurityContext>>,
}

/// Where a CA bundle comes from: a ConfigMap or a Secret of the Hollo's namespace, one key.
#[serde_with::skip_serializing_none]
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.configMap) != has(self.secret)").message("pod.caBundle needs exactly one of configMap and secret"))]
pub struct CaBundleSpec {
    /// A ConfigMap of the Hollo's namespace holding the bundle.
    pub config_map: Option<String>,
    /// A Secret of the Hollo's namespace holding the bundle.
    pub secret: Option<String>,
    /// The key holding the PEM bundle.
    #[serde(default = "default_ca_key")]
    pub key: String,
}

fn default_ca_key() -> String {
    "ca.crt".into()
}

/// Lifecycle phase; see `phase.rs` for the transitions.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum Phase {
    /// Nothing observed yet.
    #[default]
    Pending,
    /// `RollingWhenCompatible`: reading `hollo version --json` of the old and new image.
    CheckingCompatibility,
    /// Old-version pods are being stopped before a migration.
    ScalingDown,
    /// The migration Job of the target version runs.
    Migrating,
    /// Zero-downtime upgrade: the target's pre-deploy (additive) migrations
    /// run (`hollo migrate --pre`, the new image) while every old pod keeps serving.
    PreMigrating,
    /// Zero-downtime upgrade: no old pod is left; the target's post-deploy (contract)
    /// migrations run (`hollo migrate --post`) while the new version serves.
    PostMigrating,
    /// The migration failed; retrying with back-off, nothing of the new version runs.
    MigrationFailed,
    /// Deployments of the target version are rolling out.
    RollingOut,
    Running,
    /// `spec.stopped`: every role at 0, no autoscaler.
    Stopped,
    /// `upgrade.backup`: the CloudNativePG Backup runs, the old version serves.
    BackingUp,
    /// The Backup failed or timed out: no migration, the old version keeps running.
    BackupFailed,
    /// `upgrade.maintenanceWindows`: a version change waits for the next window (or the
    /// approval annotation); the old version serves.
    WaitingForWindow,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "Pending",
            Phase::CheckingCompatibility => "CheckingCompatibility",
            Phase::ScalingDown => "ScalingDown",
            Phase::Migrating => "Migrating",
            Phase::PreMigrating => "PreMigrating",
            Phase::PostMigrating => "PostMigrating",
            Phase::MigrationFailed => "MigrationFailed",
            Phase::RollingOut => "RollingOut",
            Phase::Running => "Running",
            Phase::Stopped => "Stopped",
            Phase::BackingUp => "BackingUp",
            Phase::BackupFailed => "BackupFailed",
            Phase::WaitingForWindow => "WaitingForWindow",
        }
    }
}

/// Pods of one role's Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoleStatus {
    /// Pods the Deployment has.
    pub replicas: i32,
    /// Of those, the Ready ones.
    pub ready_replicas: i32,
}

#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase", default)]
/// What the operator last observed and did; written by the operator only.
pub struct HolloStatus {
    pub phase: Phase,
    /// The `metadata.generation` this status describes.
    pub observed_generation: Option<i64>,
    /// The version whose pods are (or were last) running and migrated.
    pub current_version: Option<String>,
    /// The version being brought up: `spec.version` once accepted.
    pub target_version: Option<String>,
    /// Pods of the web Deployment (of the `all` one in `mode: all`).
    pub web: RoleStatus,
    /// Pods of the worker Deployment.
    pub worker: RoleStatus,
    /// Failed migration attempts of `targetVersion` (drives the retry back-off).
    pub migration_attempts: i32,
    /// When the last failed migration attempt was observed (RFC 3339), for the back-off.
    pub last_migration_failure: Option<String>,
    /// `metadata.generation` when that failure was recorded: a spec edit since then (say, a
    /// fixed migration command) retries at once instead of waiting out the back-off.
    pub migration_failure_generation: Option<i64>,
    /// The latest observations, one per `type`: `Ready`, `Progressing`, `Migrated`, `Degraded`,
    /// `ConnectionBudget`, `WorkersAvailable`, and when they apply `Stopped`,
    /// `ReconciliationPaused`, `Database`, `SecretKey`, `UpgradeStrategy`, `VersionAccepted`,
    /// `BackedUp`, `HTTPRoute`, `AdminAccount`.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// When each scheduled cleanup (`spec.maintenance`) last started its job: its CronJob's
    /// `lastSuccessfulTime` (RFC 3339).
    pub last_cleanup: Option<LastCleanup>,
    /// A zero-downtime upgrade past its pre-deploy migrations whose post-deploy migrations
    /// have not run yet; cleared once they have.
    pub expand_contract: Option<ExpandContract>,
}

/// A zero-downtime (expand/contract) upgrade in progress: `version`'s
/// pre-deploy migrations are applied, its post-deploy ones wait for the last pod of `from`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ExpandContract {
    /// The version being rolled out, whose pre-deploy migrations are applied.
    pub version: String,
    /// The version being replaced.
    pub from: String,
    /// Both versions read the same queued messages: old and new workers may overlap. When
    /// false the old workers stop before any new pod starts and the new ones start once no
    /// old pod is left.
    pub same_task_definitions: bool,
}

#[serde_with::skip_serializing_none]
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LastCleanup {
    /// When the remote-posts cleanup last started its job (RFC 3339).
    pub remote_posts: Option<String>,
    /// When the media cleanup last started its job (RFC 3339).
    pub media: Option<String>,
}

impl HolloSpec {
    /// The image reference of `spec.version` (or `image.tag`).
    pub fn image_ref(&self) -> String {
        let tag = self.image.tag.as_deref().unwrap_or(&self.version);
        format!("{}:{}", self.image.repository, tag)
    }

    /// Whether an upgrade backs up the CloudNativePG cluster before migrating.
    pub fn backup_wanted(&self) -> bool {
        self.upgrade.backup.enabled && self.database.cnpg.is_some()
    }

    /// Whether an upgrade's downtime is answered by the maintenance page (R-OP-ZD).
    pub fn maintenance_page_enabled(&self) -> bool {
        self.web.maintenance_page.enabled && self.image.profile == ImageProfile::HolloRs
    }

    /// The strategy upgrades follow: `RollingWhenCompatible` needs an image that reports its
    /// task-definition and schema versions; without one (upstream) upgrades are `Recreate`,
    /// and [`Self::rolling_unavailable`] says why.
    pub fn upgrade_strategy_in_effect(&self) -> UpgradeStrategy {
        match self.rolling_unavailable() {
            Some(_) => UpgradeStrategy::Recreate,
            None => self.upgrade_strategy,
        }
    }

    /// Why `RollingWhenCompatible` was asked for but cannot be honoured, if it cannot.
    pub fn rolling_unavailable(&self) -> Option<String> {
        (self.upgrade_strategy == UpgradeStrategy::RollingWhenCompatible
            && !self.image.profile.reports_versions())
        .then(|| {
            format!(
                "upgradeStrategy RollingWhenCompatible needs an image that reports its \
                 task-definition and schema versions (hollo version --json); image.profile {} \
                 has no such command, so old and new versions cannot be shown compatible: \
                 upgrades use Recreate (stop, migrate, start)",
                self.image.profile.as_str()
            )
        })
    }

    /// Whether an HPA owns the HTTP role's (web, or all) `replicas`.
    pub fn web_autoscaled(&self) -> bool {
        self.web.autoscaling.enabled
    }

    /// The most HTTP pods there can be: the autoscaler's maximum, else `web.replicas`.
    pub fn web_max_replicas(&self) -> i32 {
        if self.web_autoscaled() {
            self.web.autoscaling.max_replicas
        } else {
            self.web.replicas
        }
    }

    /// Whether an autoscaler (HPA or KEDA) owns the worker `replicas`.
    pub fn worker_autoscaled(&self) -> bool {
        self.mode == Mode::Split && self.worker.autoscaling.enabled
    }

    /// `PUBLIC_URL`: explicit, else the Ingress host.
    pub fn public_url(&self) -> Option<String> {
        if let Some(url) = &self.public_url {
            return Some(url.clone());
        }
        let ingress = &self.web.ingress;
        match (&ingress.enabled, &ingress.host) {
            (true, Some(host)) if !host.is_empty() => Some(format!("https://{host}")),
            _ => None,
        }
    }
}

/// The CRD as YAML, exactly as `hollo-operator crd` prints it and `crds/` stores it.
pub fn crd_yaml() -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(&Hollo::crd())
}

/// Where the operator chart carries the CRD, relative to the repository.
pub const CHART_TEMPLATE_PATH: &str = "charts/hollo-operator/templates/crd.yaml";

/// The annotation that makes `helm uninstall` leave an object in place.
pub const HELM_KEEP: (&str, &str) = ("helm.sh/resource-policy", "keep");

/// The operator chart's CRD template (`hollo-operator crd --chart-template`): the CRD of
/// [`crd_yaml`] behind the value `crds.install`, annotated so that `helm uninstall` keeps it
/// (and with it every `Hollo`). A template and not the chart's `crds/`, which Helm installs
/// once and never upgrades: a new operator would then run against an old schema that prunes
/// the fields it added.
pub fn chart_template() -> Result<String, serde_yaml::Error> {
    let mut crd = Hollo::crd();
    crd.metadata.annotations = Some(BTreeMap::from([(
        HELM_KEEP.0.to_string(),
        HELM_KEEP.1.to_string(),
    )]));
    Ok(format!(
        "{{{{- /*\n\
         Generated by `hollo-operator crd --chart-template` from the schema crds/hollo.social_hollos.yaml\n\
         holds (do not edit; the test crd::tests::chart_template_is_the_generated_crd fails when it\n\
         differs). Regenerate from the repository root with\n\
         cargo run -q -p hollo-operator -- crd --chart-template > {CHART_TEMPLATE_PATH}\n\
         */}}}}\n\
         {{{{- if .Values.crds.install }}}}\n\
         {}\
         {{{{- end }}}}\n",
        serde_yaml::to_string(&crd)?
    ))
}

#[cfg(test)]
mod tests;
