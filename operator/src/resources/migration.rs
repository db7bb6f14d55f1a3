//! The migration Job of a version (R-OP-MIG). Job specs are immutable, so each version — and
//! each retry after a failure — gets its own Job name; the failed one stays for its logs.

use k8s_openapi::api::batch::v1::{Job, JobSpec};

use super::labels::Component;
use super::pod;
use crate::crd::Hollo;

/// Which migrations a Job applies (R-OP-MIG, expand/contract).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MigrationKind {
    /// `hollo migrate`: pre- then post-deploy, every pod stopped (or none changed).
    #[default]
    Full,
    /// `hollo migrate --pre`: additive ones, the old version serving.
    Pre,
    /// `hollo migrate --post`: contract ones, no old pod left.
    Post,
}

/// Longest Kubernetes object name that is also a valid label value (Jobs label their pods with
/// their own name).
const MAX_NAME: usize = 63;

/// FNV-1a: a stable short hash (std's hasher is randomly seeded, names must be stable).
pub(crate) fn short_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{:08x}", h & 0xffff_ffff)
}

/// `<name>-migrate-<version>[-r<attempt>]`, a DNS-1123 label. A version with characters a name
/// cannot hold, or a name too long, gets a short hash of the raw version so two versions never
/// share a Job.
pub fn job_name(instance: &str, version: &str, attempt: i32) -> String {
    named(instance, "migrate", version, attempt)
}

/// `<name>-migrate-pre-<version>[-r<attempt>]` / `<name>-migrate-post-…`: the Jobs of a
/// zero-downtime upgrade (R-OP-ZD), named apart from the full migration's so a Job
/// never stands for another command.
pub fn kind_job_name(instance: &str, kind: MigrationKind, version: &str, attempt: i32) -> String {
    match kind {
        MigrationKind::Full => job_name(instance, version, attempt),
        MigrationKind::Pre => named(instance, "migrate-pre", version, attempt),
        MigrationKind::Post => named(instance, "migrate-post", version, attempt),
    }
}

/// `<name>-version-<version>`: the Job printing `hollo version --json` of an image.
pub fn probe_name(instance: &str, version: &str) -> String {
    named(instance, "version", version, 0)
}

/// `<name>-backup-<version>`: the CloudNativePG Backup taken before migrating to `version`.
pub fn backup_name(instance: &str, version: &str) -> String {
    named(instance, "backup", version, 0)
}

/// `<instance>-<infix>-<version>[-r<attempt>]`, shortened with a hash to a valid name.
pub(crate) fn named(instance: &str, infix: &str, version: &str, attempt: i32) -> String {
    let sanitized: String = version
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let sanitized = sanitized.trim_matches('-').to_string();
    let exact = sanitized == version.replace('.', "-") && !sanitized.is_empty();
    let suffix = if attempt > 0 {
        format!("-r{attempt}")
    } else {
        String::new()
    };
    let plain = format!("{instance}-{infix}-{sanitized}{suffix}");
    if exact && plain.len() <= MAX_NAME {
        return plain;
    }
    let hash = short_hash(version);
    let fixed = format!("-{hash}{suffix}");
    let mut head = format!("{instance}-{infix}-{sanitized}");
    head.truncate(MAX_NAME.saturating_sub(fixed.len()));
    let head = head.trim_end_matches('-');
    format!("{head}{fixed}")
}

/// Resources of migration and probe Jobs: `migrations.resources`, else the web role's.
pub fn resources(
    spec: &crate::crd::HolloSpec,
) -> &k8s_openapi::api::core::v1::ResourceRequirements {
    spec.migrations
        .resources
        .as_ref()
        .unwrap_or(&spec.web.resources)
}

pub fn job(hollo: &Hollo, attempt: i32) -> Job {
    kind_job(hollo, MigrationKind::Full, attempt)
}

/// The migration command of a kind: the profile's (or `migrations.command`), with `--pre` or
/// `--post` appended for the zero-downtime path (a custom command must accept them).
pub fn kind_command(spec: &crate::crd::HolloSpec, kind: MigrationKind) -> Vec<String> {
    let mut command = super::profile::migration_command(spec);
    match kind {
        MigrationKind::Full => {}
        MigrationKind::Pre => command.push("--pre".into()),
        MigrationKind::Post => command.push("--post".into()),
    }
    command
}

/// The migration Job of `kind` for the target version, attempt `attempt`; it always runs
/// the target's image (its migrations are the ones to apply).
pub fn kind_job(hollo: &Hollo, kind: MigrationKind, attempt: i32) -> Job {
    let spec = &hollo.spec;
    let version = &spec.version;
    let name = kind_job_name(&kube::ResourceExt::name_any(hollo), kind, version, attempt);
    // Migrations are the one thing DATABASE_DIRECT_URL exists for; common_env passes it along.
    let env = pod::common_env(spec, false);
    let mut c = pod::base_container(spec, spec.image_ref(), env, resources(spec));
    c.command = Some(kind_command(spec, kind));
    Job {
        metadata: super::child_meta(hollo, name, Component::Migration, version),
        spec: Some(JobSpec {
            backoff_limit: Some(spec.migrations.backoff_limit),
            active_deadline_seconds: Some(spec.migrations.active_deadline_seconds),
            template: pod::without_storage(pod::pod_template(
                hollo,
                Component::Migration,
                version,
                c,
                30,
                Some("Never"),
            )),
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// Label on version probe Jobs (they are not migrations; the phase machine must not wait on them).
pub const PROBE_COMPONENT: &str = "version-probe";

/// A Job running the version command of `version`'s image; its log is the JSON the
/// compatibility check reads. It needs no database and no secret.
pub fn probe_job(hollo: &Hollo, version: &str) -> Job {
    let spec = &hollo.spec;
    let name = probe_name(&kube::ResourceExt::name_any(hollo), version);
    let mut c = pod::base_container(spec, pod::image_for(spec, version), vec![], resources(spec));
    c.command = Some(spec.migrations.version_command.clone());
    c.env = None;
    c.env_from = None;
    let mut meta = super::child_meta(hollo, name, Component::Migration, version);
    if let Some(l) = meta.labels.as_mut() {
        l.insert(super::labels::COMPONENT.into(), PROBE_COMPONENT.into());
    }
    let mut template =
        pod::pod_template(hollo, Component::Migration, version, c, 10, Some("Never"));
    if let Some(l) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.insert(super::labels::COMPONENT.into(), PROBE_COMPONENT.into());
    }
    Job {
        metadata: meta,
        spec: Some(JobSpec {
            backoff_limit: Some(1),
            active_deadline_seconds: Some(300),
            // Long enough for the upgrade decision; the operator re-probes if it is gone.
            ttl_seconds_after_finished: Some(3600),
            template: pod::without_storage(template),
            ..JobSpec::default()
        }),
        status: None,
    }
}

/// What `hollo version --json` prints. The expand/contract fields (R-OP-ZD) are
/// `null` for an image that predates them: such an image never takes the zero-downtime path.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionInfo {
    pub version: String,
    /// The newest pre-deploy migration the image carries.
    pub schema_version: serde_json::Value,
    pub task_definition_version: serde_json::Value,
    /// The newest post-deploy migration the image carries.
    #[serde(default)]
    pub post_schema_version: serde_json::Value,
    /// The oldest pre-deploy schema the image runs on (newer ones by pre-deploy migrations
    /// only are fine for it).
    #[serde(default)]
    pub min_schema_version: serde_json::Value,
}

/// The last line of a probe's log that parses as version JSON (images may log before it).
pub fn parse_version_output(log: &str) -> Option<VersionInfo> {
    log.lines()
        .rev()
        .find_map(|l| serde_json::from_str::<VersionInfo>(l.trim()).ok())
}

/// What a finished probe pod reported: its container's termination message (what `hollo
/// version --json --termination-log /dev/termination-log` writes), which needs no access to pod
/// logs. `None` when there is none; the caller may then read the log.
pub fn version_from_pod(pod: &k8s_openapi::api::core::v1::Pod) -> Option<VersionInfo> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .filter(|c| c.name == super::pod::CONTAINER)
        .find_map(|c| {
            let message = c.state.as_ref()?.terminated.as_ref()?.message.as_deref()?;
            parse_version_output(message)
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn job_names_follow_the_version() {
        assert_eq!(job_name("social", "0.1.0", 0), "social-migrate-0-1-0");
        assert_eq!(job_name("social", "0.1.0", 2), "social-migrate-0-1-0-r2");
        // `+` cannot appear in a name: hashed so 1.0+a and 1.0-a differ.
        let a = job_name("social", "1.0+a", 0);
        let b = job_name("social", "1.0-a", 0);
        assert_ne!(a, b);
        assert!(a.starts_with("social-migrate-1-0-a-"), "{a}");
        let long = job_name(&"x".repeat(40), &"9".repeat(40), 3);
        assert!(long.len() <= 63, "{long}");
        assert!(long.ends_with("-r3"));
        assert_eq!(
            long,
            job_name(&"x".repeat(40), &"9".repeat(40), 3),
            "stable"
        );
    }

    #[test]
    fn jobs_do_not_mount_the_media_claim() {
        let mut spec = testutil::spec();
        spec.storage.fs = Some(crate::crd::FsStorage {
            claim_name: "media".into(),
            mount_path: "/data/storage".into(),
        });
        let h = testutil::hollo(spec);
        for j in [job(&h, 0), probe_job(&h, "0.1.0")] {
            let pod = j.spec.and_then(|s| s.template.spec).expect("pod");
            let vols: Vec<String> = pod
                .volumes
                .iter()
                .flatten()
                .map(|v| v.name.clone())
                .collect();
            assert_eq!(vols, ["tmp"]);
            let mounts = pod.containers[0].volume_mounts.clone().unwrap_or_default();
            assert_eq!(mounts.len(), 1);
            assert_eq!(mounts[0].mount_path, "/tmp");
        }
    }

    #[test]
    fn migration_job_runs_the_command_once_per_attempt() {
        let h = testutil::hollo(testutil::spec());
        let j = job(&h, 0);
        assert_eq!(j.metadata.name.as_deref(), Some("social-migrate-0-1-0"));
        let labels = j.metadata.labels.clone().expect("labels");
        assert_eq!(labels["app.kubernetes.io/component"], "migration");
        assert_eq!(labels["app.kubernetes.io/version"], "0.1.0");
        let s = j.spec.expect("spec");
        assert_eq!(s.backoff_limit, Some(3));
        assert_eq!(s.active_deadline_seconds, Some(600));
        let pod = s.template.spec.expect("pod");
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let c = &pod.containers[0];
        assert_eq!(
            c.command,
            Some(vec!["hollo".to_string(), "migrate".to_string()])
        );
        assert_eq!(c.image.as_deref(), Some("ghcr.io/hollo-social/hollo:0.1.0"));
        assert!(c.env.iter().flatten().any(|e| e.name == "DATABASE_URL"));
        assert!(!c.env.iter().flatten().any(|e| e.name == "NODE_TYPE"));
    }

    /// R-OP-ZD: the zero-downtime Jobs run the target's image with `--pre` /
    /// `--post`, under names of their own.
    #[test]
    fn pre_and_post_jobs_have_their_own_names_and_flags() {
        let h = testutil::hollo(testutil::spec());
        for (kind, name, flag) in [
            (
                MigrationKind::Pre,
                "social-migrate-pre-0-1-0-r1",
                Some("--pre"),
            ),
            (
                MigrationKind::Post,
                "social-migrate-post-0-1-0-r1",
                Some("--post"),
            ),
            (MigrationKind::Full, "social-migrate-0-1-0-r1", None),
        ] {
            let j = kind_job(&h, kind, 1);
            assert_eq!(j.metadata.name.as_deref(), Some(name));
            let labels = j.metadata.labels.clone().expect("labels");
            assert_eq!(labels["app.kubernetes.io/component"], "migration");
            let c = &j
                .spec
                .and_then(|s| s.template.spec)
                .expect("pod")
                .containers[0];
            let mut want = vec!["hollo".to_string(), "migrate".to_string()];
            want.extend(flag.map(String::from));
            assert_eq!(c.command.as_deref(), Some(&want[..]));
            assert_eq!(c.image.as_deref(), Some("ghcr.io/hollo-social/hollo:0.1.0"));
        }
    }

    #[test]
    fn upstream_migrates_with_pnpm() {
        let mut spec = testutil::spec();
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        let j = job(&testutil::hollo(spec), 0);
        let c = &j
            .spec
            .and_then(|s| s.template.spec)
            .expect("pod")
            .containers[0];
        assert_eq!(
            c.command.as_deref().map(|c| c.join(" ")),
            Some("pnpm run migrate".into())
        );
        assert!(c.env.iter().flatten().any(|e| e.name == "DATABASE_URL"));
    }

    #[test]
    fn probe_job_runs_the_version_command_without_secrets() {
        let h = testutil::hollo(testutil::spec());
        let j = probe_job(&h, "0.0.9");
        assert_eq!(j.metadata.name.as_deref(), Some("social-version-0-0-9"));
        let labels = j.metadata.labels.clone().expect("labels");
        assert_eq!(labels["app.kubernetes.io/component"], "version-probe");
        let pod = j.spec.and_then(|s| s.template.spec).expect("pod");
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("ghcr.io/hollo-social/hollo:0.0.9"));
        assert_eq!(
            c.command.as_deref(),
            Some(
                &[
                    "hollo",
                    "version",
                    "--json",
                    "--termination-log",
                    "/dev/termination-log"
                ]
                .map(String::from)[..]
            )
        );
        assert_eq!(c.env, None);
    }

    #[test]
    fn a_probe_pod_reports_through_its_termination_message() {
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "social-version-0-2-0-abcde"},
            "status": {"phase": "Succeeded", "containerStatuses": [
                {"name": "sidecar", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0, "message": "{\"version\":\"9\",\"schemaVersion\":1,\"taskDefinitionVersion\":1}"}}},
                {"name": "hollo", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 0,
                   "message": "{\"version\":\"0.2.0\",\"schemaVersion\":7,\"taskDefinitionVersion\":2}"}}}
            ]}
        }))
        .expect("pod");
        let v = version_from_pod(&pod).expect("reported");
        assert_eq!(v.version, "0.2.0", "only the hollo container counts");
        let mut silent = pod.clone();
        if let Some(cs) = silent
            .status
            .as_mut()
            .and_then(|s| s.container_statuses.as_mut())
        {
            for c in cs {
                if let Some(t) = c.state.as_mut().and_then(|s| s.terminated.as_mut()) {
                    t.message = Some("not json".into());
                }
            }
        }
        assert_eq!(version_from_pod(&silent), None);
    }

    #[test]
    fn version_output_is_parsed_and_compared() {
        let log =
            "starting\n{\"version\":\"0.1.0\",\"schemaVersion\":7,\"taskDefinitionVersion\":2}\n";
        let new = parse_version_output(log).expect("parses");
        assert_eq!(new.version, "0.1.0");
        use crate::phase::{Compat, upgrade_path};
        let mut old = new.clone();
        old.version = "0.0.9".into();
        assert_eq!(upgrade_path(&old, &new), Compat::Compatible);
        old.task_definition_version = serde_json::json!(1);
        assert_eq!(
            upgrade_path(&old, &new),
            Compat::Incompatible,
            "an image without post/min schema versions never takes the expand path"
        );
        let mut old2 = new.clone();
        old2.schema_version = serde_json::json!(6);
        assert_eq!(upgrade_path(&old2, &new), Compat::Incompatible);
        assert_eq!(parse_version_output("no json here"), None);
    }

    #[test]
    fn jobs_have_their_own_resources_else_the_web_roles() {
        use k8s_openapi::api::core::v1::ResourceRequirements;
        use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
        let req = |cpu: &str| ResourceRequirements {
            requests: Some([("cpu".to_string(), Quantity(cpu.into()))].into()),
            ..ResourceRequirements::default()
        };
        let mut spec = testutil::spec();
        spec.web.resources = req("2");
        let of = |j: Job| {
            j.spec
                .and_then(|s| s.template.spec)
                .expect("pod")
                .containers[0]
                .resources
                .clone()
        };
        let h = testutil::hollo(spec.clone());
        assert_eq!(of(job(&h, 0)), Some(req("2")), "unset: the web role's");
        spec.migrations.resources = Some(req("100m"));
        let h = testutil::hollo(spec);
        assert_eq!(of(job(&h, 0)), Some(req("100m")));
        assert_eq!(of(probe_job(&h, "0.0.9")), Some(req("100m")));
    }
}
