//! `spec.admin` (issue 63 item 7): the declared first account, created by the Job
//! `<name>-admin-<hash>` running `hollo account create <username> --admin --password-env …
//! --if-absent --no-token` in the running version's image with the workers' environment.
//!
//! Created once that version's schema is migrated (phase `RollingOut` or `Running`) and the
//! password Secret is there; the pod reads the password from it by reference (never in the
//! Job's spec, and the command prints no token into its log). An account of that name that
//! exists is left exactly as it is, so a rerun — the Job deleted, a new operator — changes
//! nothing, and a password the owner changed stays changed. The name hashes the username and
//! the Secret reference: a new name (or a fixed reference after a failure) makes a new Job, and
//! the Jobs of earlier ones are deleted once finished ([`stale`]). Condition `AdminAccount`
//! ([`check`]).

use k8s_openapi::api::batch::v1::{Job, JobSpec};
use kube::ResourceExt;

use super::labels::{self, Component};
use super::{migration, pod};
use crate::crd::{Hollo, ImageProfile, Phase};
use crate::phase::JobState;
use crate::status::{self, Check};

/// `app.kubernetes.io/component` of the Job and its pod (the NetworkPolicy `<name>-worker`
/// selects it: it needs the database).
pub const COMPONENT: &str = "admin-account";
/// The variable the pod reads the password from (`valueFrom.secretKeyRef`).
pub const PASSWORD_ENV: &str = "HOLLO_ADMIN_PASSWORD";
/// `AdminAccount` reasons that are progress, not a problem (they do not mark the `Hollo`
/// `Degraded`).
pub const PENDING: [&str; 2] = [WAITING, CREATING];
const WAITING: &str = "WaitingForMigration";
const CREATING: &str = "Creating";

/// `<name>-admin-<hash of the username and the Secret reference>`, when `spec.admin` is set.
pub fn job_name(hollo: &Hollo) -> Option<String> {
    let admin = hollo.spec.admin.as_ref()?;
    let r = &admin.password_secret_ref;
    let id = migration::short_hash(&format!(
        "{}\0{}\0{}",
        admin.username.to_ascii_lowercase(),
        r.name,
        r.key
    ));
    Some(migration::named(&hollo.name_any(), "admin", &id, 0))
}

/// What the Job runs.
pub fn command(username: &str) -> Vec<String> {
    [
        "hollo",
        "account",
        "create",
        username,
        "--admin",
        "--password-env",
        PASSWORD_ENV,
        "--if-absent",
        "--no-token",
    ]
    .map(String::from)
    .to_vec()
}

/// The Job, in `spec.version`'s image (the one whose schema is migrated when it is created).
/// `None` without `spec.admin`, and for the upstream image, which has no such command
/// (admission refuses that combination).
pub fn job(hollo: &Hollo) -> Option<Job> {
    let spec = &hollo.spec;
    let admin = spec.admin.as_ref()?;
    if spec.image.profile != ImageProfile::HolloRs {
        return None;
    }
    let name = job_name(hollo)?;
    let version = &spec.version;
    let mut env = pod::common_env(spec, false);
    env.push(pod::secret(PASSWORD_ENV, &admin.password_secret_ref));
    let mut c = pod::base_container(spec, spec.image_ref(), env, migration::resources(spec));
    c.command = Some(command(&admin.username));
    let mut meta = super::child_meta(hollo, name, Component::Migration, version);
    if let Some(l) = meta.labels.as_mut() {
        l.insert(labels::COMPONENT.into(), COMPONENT.into());
    }
    let mut template =
        pod::pod_template(hollo, Component::Migration, version, c, 10, Some("Never"));
    if let Some(l) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        l.insert(labels::COMPONENT.into(), COMPONENT.into());
    }
    Some(Job {
        metadata: meta,
        spec: Some(JobSpec {
            backoff_limit: Some(2),
            active_deadline_seconds: Some(300),
            template: pod::without_storage(template),
            ..JobSpec::default()
        }),
        status: None,
    })
}

/// Whether the Job is due: `spec.admin` set, its password Secret there with its key
/// (`password`), and `spec.version` migrated and starting or running (`current` is
/// `status.currentVersion` after this step).
pub fn due(hollo: &Hollo, phase: Phase, current: Option<&str>, password: bool) -> bool {
    hollo.spec.admin.is_some()
        && password
        && matches!(phase, Phase::RollingOut | Phase::Running)
        && current == Some(hollo.spec.version.as_str())
}

/// Whether `job` is an admin-account Job other than `hollo`'s current one (of an earlier
/// username or Secret reference, or `spec.admin` removed): deleted once finished. Their
/// accounts stay.
pub fn stale(hollo: &Hollo, job: &Job) -> bool {
    job.labels().get(labels::COMPONENT).map(String::as_str) == Some(COMPONENT)
        && Some(job.name_any()) != job_name(hollo)
}

/// The `AdminAccount` condition: `job` is the state of [`job_name`]'s Job, `password` whether
/// its Secret is there with its key, `due` whether the Job may run now ([`due`]).
pub fn check(hollo: &Hollo, password: bool, job: &JobState, due: bool) -> Option<Check> {
    let admin = hollo.spec.admin.as_ref()?;
    let name = job_name(hollo)?;
    let user = &admin.username;
    let r = &admin.password_secret_ref;
    let (ok, reason, message) = match job {
        JobState::Succeeded => (
            true,
            "AccountExists",
            format!(
                "@{user} exists (Job {name} succeeded; an account already there is left as it is)"
            ),
        ),
        JobState::Failed { reason } => (
            false,
            "JobFailed",
            format!(
                "Job {name} could not create @{user} ({reason}): `kubectl logs job/{name}` says \
                 why; delete the Job to run it again"
            ),
        ),
        JobState::Running => (false, CREATING, format!("Job {name} creates @{user}")),
        JobState::Absent => match password {
            true if due => (false, CREATING, format!("Job {name} creates @{user}")),
            true => (
                false,
                WAITING,
                format!(
                    "@{user} is created once version {} runs migrated",
                    hollo.spec.version
                ),
            ),
            false => (
                false,
                "PasswordSecretMissing",
                format!(
                    "Secret {} with key {} (the password of @{user}) not found: the account is \
                     created once it exists",
                    r.name, r.key
                ),
            ),
        },
    };
    Some(Check {
        type_: status::ADMIN_ACCOUNT,
        ok,
        reason,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{AdminSpec, SecretKeyRef};
    use crate::testutil;

    fn with_admin(username: &str) -> Hollo {
        let mut spec = testutil::spec();
        spec.admin = Some(AdminSpec {
            username: username.into(),
            password_secret_ref: SecretKeyRef {
                name: "hollo-admin".into(),
                key: "password".into(),
            },
        });
        testutil::hollo(spec)
    }

    #[test]
    fn the_job_creates_the_account_with_the_password_by_reference_only() {
        let h = with_admin("owner");
        let job = job(&h).expect("a Job");
        let name = job.name_any();
        assert!(name.starts_with("social-admin-"), "{name}");
        assert_eq!(job.labels()[labels::COMPONENT], COMPONENT);
        let spec = job.spec.unwrap();
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(
            spec.template.metadata.unwrap().labels.unwrap()[labels::COMPONENT],
            COMPONENT,
            "the worker NetworkPolicy selects its pod"
        );
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("ghcr.io/hollo-social/hollo:0.1.0"));
        assert_eq!(
            c.command.as_deref().unwrap(),
            [
                "hollo",
                "account",
                "create",
                "owner",
                "--admin",
                "--password-env",
                PASSWORD_ENV,
                "--if-absent",
                "--no-token"
            ]
        );
        let env = c.env.as_ref().unwrap();
        let password = env.iter().find(|e| e.name == PASSWORD_ENV).unwrap();
        assert_eq!(password.value, None, "never a value in the spec");
        let from = password
            .value_from
            .as_ref()
            .unwrap()
            .secret_key_ref
            .as_ref()
            .unwrap();
        assert_eq!(
            (from.name.as_str(), from.key.as_str()),
            ("hollo-admin", "password")
        );
        for needed in ["DATABASE_URL", "SECRET_KEY"] {
            assert!(env.iter().any(|e| e.name == needed), "{needed}");
        }
        // The media claim is not mounted (the command writes rows only).
        assert!(
            pod.volumes
                .iter()
                .flatten()
                .all(|v| v.name != pod::STORAGE_VOLUME)
        );
    }

    #[test]
    fn no_job_without_admin_or_for_the_upstream_image() {
        assert_eq!(job(&testutil::hollo(testutil::spec())), None);
        let mut h = with_admin("owner");
        h.spec.image.profile = ImageProfile::Upstream;
        assert_eq!(job(&h), None);
    }

    #[test]
    fn the_name_follows_the_account_and_its_secret_not_the_version() {
        let a = job_name(&with_admin("owner")).unwrap();
        let mut b = with_admin("owner");
        b.spec.version = "0.2.0".into();
        assert_eq!(job_name(&b).unwrap(), a, "an upgrade does not run it again");
        assert_eq!(
            job_name(&with_admin("Owner")).unwrap(),
            a,
            "the same account"
        );
        assert_ne!(job_name(&with_admin("second")).unwrap(), a);
        let mut c = with_admin("owner");
        c.spec.admin.as_mut().unwrap().password_secret_ref.name = "fixed".into();
        assert_ne!(job_name(&c).unwrap(), a, "a fixed reference runs it again");
        let long = {
            let mut h = with_admin("owner");
            h.metadata.name = Some("x".repeat(80));
            job_name(&h).unwrap()
        };
        assert!(long.len() <= 63, "{long}");
    }

    #[test]
    fn due_once_the_version_is_migrated_and_the_secret_is_there() {
        let h = with_admin("owner");
        assert!(due(&h, Phase::RollingOut, Some("0.1.0"), true));
        assert!(due(&h, Phase::Running, Some("0.1.0"), true));
        assert!(!due(&h, Phase::Migrating, None, true));
        assert!(!due(&h, Phase::Stopped, Some("0.1.0"), true));
        assert!(!due(&h, Phase::Running, Some("0.0.9"), true), "mid-upgrade");
        assert!(
            !due(&h, Phase::Running, Some("0.1.0"), false),
            "no password yet"
        );
        assert!(!due(
            &testutil::hollo(testutil::spec()),
            Phase::Running,
            Some("0.1.0"),
            true
        ));
    }

    #[test]
    fn the_condition_says_what_happened_and_only_problems_are_problems() {
        let h = with_admin("owner");
        let name = job_name(&h).unwrap();
        let reason = |password: bool, job: &JobState, due: bool| {
            let c = check(&h, password, job, due).unwrap();
            (c.ok, c.reason, c.message)
        };
        let (ok, r, m) = reason(true, &JobState::Succeeded, true);
        assert!(ok && r == "AccountExists" && m.contains("@owner"), "{m}");
        // Gone Secret after success: still fine, nothing more to do.
        assert!(reason(false, &JobState::Succeeded, false).0);
        let (ok, r, m) = reason(
            true,
            &JobState::Failed {
                reason: "BackoffLimitExceeded".into(),
            },
            true,
        );
        assert!(!ok && r == "JobFailed", "{r}");
        assert!(m.contains(&format!("kubectl logs job/{name}")), "{m}");
        let (_, r, m) = reason(false, &JobState::Absent, false);
        assert_eq!(r, "PasswordSecretMissing");
        assert!(m.contains("hollo-admin") && m.contains("password"), "{m}");
        assert_eq!(reason(true, &JobState::Absent, false).1, WAITING);
        assert_eq!(reason(true, &JobState::Absent, true).1, CREATING);
        assert_eq!(reason(true, &JobState::Running, true).1, CREATING);
        assert!(PENDING.contains(&WAITING) && PENDING.contains(&CREATING));
        assert_eq!(
            check(
                &testutil::hollo(testutil::spec()),
                true,
                &JobState::Absent,
                false
            ),
            None
        );
    }
}
