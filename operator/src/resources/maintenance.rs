//! Scheduled cleanups (R-OP-OPS): `spec.maintenance` → CronJobs
//! `<name>-cleanup-remote-posts` and `<name>-cleanup-media` running `hollo cleanup …` (the
//! runtime's cleanup job, R-JOB-11, started as `POST /api/v1/admin/cleanups` would; the workers
//! carry it out). Same image, the workers' environment (direct database URL), the migrations'
//! scheduling and resources, no media volume (the command only writes the job's rows).

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;

use super::labels::{self, Component};
use super::pod;
use crate::crd::Hollo;

/// The pods' and Jobs' `app.kubernetes.io/component` (the NetworkPolicy `<name>-worker`
/// selects it).
pub const CLEANUP_COMPONENT: &str = "cleanup";

/// The cleanups `spec.maintenance` enables: (name suffix, `hollo cleanup` arguments).
pub fn cleanups(hollo: &Hollo) -> Vec<(&'static str, String, Vec<String>)> {
    let m = &hollo.spec.maintenance;
    let mut out = vec![];
    if m.remote_posts.enabled {
        out.push((
            "remote-posts",
            m.remote_posts.schedule.clone(),
            vec![
                "remote-posts".to_string(),
                "--older-than-days".to_string(),
                m.remote_posts.older_than_days.to_string(),
            ],
        ));
    }
    if m.media.enabled {
        out.push(("media", m.media.schedule.clone(), vec!["media".to_string()]));
    }
    out
}

pub fn cron_job_name(hollo: &Hollo, which: &str) -> String {
    format!("{}-cleanup-{which}", hollo.name_any())
}

/// The CronJobs, in `version`'s image; `suspend` while the workers are stopped (an upgrade).
pub fn cron_jobs(hollo: &Hollo, version: &str, suspend: bool) -> Vec<CronJob> {
    let spec = &hollo.spec;
    cleanups(hollo)
        .into_iter()
        .map(|(which, schedule, args)| {
            let env = pod::common_env(spec, false);
            let image = format!(
                "{}:{}",
                spec.image.repository,
                spec.image.tag.as_deref().unwrap_or(version)
            );
            let mut c = pod::base_container(spec, image, env, super::migration::resources(spec));
            c.command = Some(vec!["hollo".into(), "cleanup".into()]);
            c.args = Some(args);
            let mut template = pod::without_storage(pod::pod_template(
                hollo,
                Component::Migration,
                version,
                c,
                30,
                Some("Never"),
            ));
            let mut job_labels = labels::labels(&hollo.name_any(), Component::Migration, version);
            job_labels.insert(labels::COMPONENT.into(), CLEANUP_COMPONENT.into());
            if let Some(l) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
                l.insert(labels::COMPONENT.into(), CLEANUP_COMPONENT.into());
            }
            let mut meta = super::child_meta(
                hollo,
                cron_job_name(hollo, which),
                Component::Migration,
                version,
            );
            meta.labels = Some(job_labels.clone());
            CronJob {
                metadata: meta,
                spec: CronJobSpec {
                    schedule,
                    time_zone: spec.maintenance.time_zone.clone(),
                    suspend: Some(suspend),
                    // A cleanup job already running is enough; the runtime de-duplicates too.
                    concurrency_policy: Some("Forbid".into()),
                    starting_deadline_seconds: Some(3600),
                    successful_jobs_history_limit: Some(1),
                    failed_jobs_history_limit: Some(3),
                    job_template: JobTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(job_labels),
                            ..ObjectMeta::default()
                        }),
                        spec: Some(JobSpec {
                            backoff_limit: Some(3),
                            active_deadline_seconds: Some(600),
                            template,
                            ..JobSpec::default()
                        }),
                    },
                },
                status: None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn none_by_default() {
        assert!(cron_jobs(&testutil::hollo(testutil::spec()), "1.0.0", false).is_empty());
    }

    #[test]
    fn each_enabled_cleanup_is_a_cron_job_running_hollo_cleanup() {
        let mut spec = testutil::spec();
        spec.maintenance.remote_posts.enabled = true;
        spec.maintenance.remote_posts.older_than_days = 14;
        spec.maintenance.media.enabled = true;
        spec.maintenance.time_zone = Some("Europe/Berlin".into());
        let h = testutil::hollo(spec);
        let cjs = cron_jobs(&h, &h.spec.version, false);
        let names: Vec<_> = cjs.iter().map(|c| c.name_any()).collect();
        assert_eq!(
            names,
            ["social-cleanup-remote-posts", "social-cleanup-media"]
        );
        let s = &cjs[0].spec;
        assert_eq!(s.schedule, "17 3 * * *");
        assert_eq!(s.time_zone.as_deref(), Some("Europe/Berlin"));
        assert_eq!(s.suspend, Some(false));
        assert_eq!(s.concurrency_policy.as_deref(), Some("Forbid"));
        let job = s.job_template.spec.as_ref().expect("job");
        let pod = job.template.spec.as_ref().expect("pod");
        let c = &pod.containers[0];
        assert_eq!(
            c.command.as_deref(),
            Some(&["hollo".to_string(), "cleanup".to_string()][..])
        );
        assert_eq!(
            c.args.as_deref(),
            Some(
                &[
                    "remote-posts".to_string(),
                    "--older-than-days".into(),
                    "14".into()
                ][..]
            )
        );
        assert!(
            c.env.iter().flatten().any(|e| e.name == "DATABASE_URL"),
            "the database"
        );
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        let pod_labels = job
            .template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone());
        assert_eq!(
            pod_labels
                .expect("labels")
                .get(labels::COMPONENT)
                .map(String::as_str),
            Some(CLEANUP_COMPONENT)
        );
        assert_eq!(
            cjs[1]
                .spec
                .job_template
                .spec
                .as_ref()
                .expect("job")
                .template
                .spec
                .as_ref()
                .expect("pod")
                .containers[0]
                .args
                .as_deref(),
            Some(&["media".to_string()][..])
        );
        assert!(
            cron_jobs(&h, &h.spec.version, true)[0]
                .spec
                .suspend
                .unwrap_or_default(),
            "suspended during an upgrade"
        );
    }
}
