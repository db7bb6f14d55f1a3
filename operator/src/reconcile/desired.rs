//! Step 3 of the pipeline: the desired set — every child the `Hollo` wants after
//! `phase::decide`, built by the pure builders in `resources`. `apply` makes the cluster match
//! it and deletes every owned child of a pruned kind that is not in it. Pure: no API calls.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::networking::v1::{Ingress, NetworkPolicy};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::ResourceExt;
use kube::api::DynamicObject;

use super::observe::{World, roles};
use crate::crd::Hollo;
use crate::phase::{JobState, Plan, Workloads};
use crate::resources::labels::Component;
use crate::resources::migration::MigrationKind;
use crate::resources::{
    self, admin, autoscaling, httproute, ingress, maintenance, maintenance_page, migration,
    networkpolicy, pdb, service,
};

/// How many replicas a role Deployment should have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replicas {
    /// `spec.*.replicas`, enforced (drift is corrected).
    Exactly(i32),
    /// An autoscaler owns the count; only lift it to the autoscaler's minimum (after a stop
    /// the workers sit at 0, where an HPA never scales).
    AtLeast(i32),
}

impl Replicas {
    /// The count a new Deployment is created with.
    pub fn initial(self) -> i32 {
        match self {
            Replicas::Exactly(n) | Replicas::AtLeast(n) => n,
        }
    }

    /// The count to set through the scale subresource, if the current one must change.
    pub fn scale_to(self, current: Option<i32>) -> Option<i32> {
        // The apiserver defaults an unset count to 1.
        let current = current.unwrap_or(1);
        match self {
            Replicas::Exactly(n) => (current != n).then_some(n),
            Replicas::AtLeast(min) => (current < min).then_some(min),
        }
    }
}

/// A role Deployment in the desired set.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    /// The Deployment to apply, *without* `replicas`: our apply then never owns the count, so
    /// handing it to an autoscaler (or back) cannot reset it. `None` keeps the existing
    /// template (a stopped role keeps its Deployment at 0 replicas).
    pub template: Option<Deployment>,
    pub replicas: Replicas,
}

/// The desired set of children.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    pub services: Vec<Service>,
    pub ingresses: Vec<Ingress>,
    /// `spec.networkPolicy` (R-OP-OPS).
    pub network_policies: Vec<NetworkPolicy>,
    /// `spec.maintenance` cleanups (R-OP-OPS).
    pub cron_jobs: Vec<CronJob>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub workloads: Vec<Workload>,
    pub hpas: Vec<HorizontalPodAutoscaler>,
    pub scaled_objects: Vec<DynamicObject>,
    /// Gateway API `HTTPRoute`s (R-OP-OPS); the API may be absent.
    pub http_routes: Vec<DynamicObject>,
    /// The CloudNativePG Backup before migrating, created if absent, never pruned (R-OP-OPS).
    pub backups: Vec<DynamicObject>,
    /// Jobs to create if absent. Job specs are immutable and finished Jobs are history (a failed
    /// attempt's logs stay reachable), so Jobs are never pruned by this set; see
    /// [`finished_jobs`].
    pub jobs: Vec<Job>,
}

impl Desired {
    /// Names wanted of one kind (what `apply` keeps when it prunes that kind).
    pub fn names<K: kube::Resource>(objects: &[K]) -> Vec<String> {
        objects.iter().map(|o| o.name_any()).collect()
    }

    pub fn workload_names(&self) -> Vec<String> {
        self.workloads.iter().map(|w| w.name.clone()).collect()
    }
}

/// `admin_due`: the `spec.admin` Job may run now (`resources::admin::due`).
pub fn desired(hollo: &Hollo, plan: &Plan, world: &World, admin_due: bool) -> Desired {
    let spec = &hollo.spec;
    let mut d = Desired {
        // R-OP-ZD: the web Service answers from the maintenance page once it is ready.
        services: vec![if plan.maintenance_page && world.observed.page.ready {
            service::service_selecting(hollo, Component::MaintenancePage)
        } else {
            service::service(hollo)
        }],
        ingresses: ingress::ingress(hollo).into_iter().collect(),
        http_routes: httproute::http_route(hollo).into_iter().collect(),
        network_policies: networkpolicy::network_policies(hollo),
        // Cleanups run in the image that runs; suspended while an upgrade stops the workers.
        cron_jobs: match &plan.workloads {
            Workloads::Run(version) => maintenance::cron_jobs(hollo, version, false),
            Workloads::WebOnly(version) => maintenance::cron_jobs(hollo, version, true),
            Workloads::Stopped => maintenance::cron_jobs(hollo, &spec.version, true),
        },
        pdbs: [pdb::web(hollo), pdb::worker(hollo)]
            .into_iter()
            .flatten()
            .collect(),
        ..Desired::default()
    };
    let o = &world.observed;
    let job_state = match plan.migration_kind {
        MigrationKind::Full => &o.job,
        MigrationKind::Pre => &o.pre_job,
        MigrationKind::Post => &o.post_job,
    };
    if let Some(attempt) = plan.migration_job
        && *job_state != JobState::Succeeded
    {
        d.jobs
            .push(migration::kind_job(hollo, plan.migration_kind, attempt));
    }
    if plan.backup {
        d.backups.extend(resources::backup::backup(hollo));
    }
    if admin_due {
        d.jobs.extend(admin::job(hollo));
    }
    if plan.probe_versions
        && let Some(old) = &world.observed.current_version
    {
        d.jobs.push(migration::probe_job(hollo, old));
        d.jobs.push(migration::probe_job(hollo, &spec.version));
    }
    match &plan.workloads {
        // Existing Deployments stay, at 0; no autoscaler (it would scale the old version back up).
        Workloads::Stopped => {
            d.workloads = world
                .deployments
                .iter()
                .filter(|(c, _)| **c != Component::MaintenancePage.as_str())
                .map(|(_, dep)| Workload {
                    name: dep.name_any(),
                    template: None,
                    replicas: Replicas::Exactly(0),
                })
                .collect();
        }
        // R-OP-ZD: the HTTP role at `version`, existing worker Deployments at 0
        // (template kept), no worker autoscaler (it would scale them back up).
        Workloads::WebOnly(version) => {
            let http = if spec.web_autoscaled() {
                Replicas::AtLeast(spec.web.autoscaling.min_replicas)
            } else {
                Replicas::Exactly(spec.web.replicas)
            };
            let web = resources::web::deployment(hollo, version, None);
            d.workloads.push(Workload {
                name: web.name_any(),
                template: Some(web),
                replicas: http,
            });
            if let Some(worker) = world.deployments.get(Component::Worker.as_str()) {
                d.workloads.push(Workload {
                    name: worker.name_any(),
                    template: None,
                    replicas: Replicas::Exactly(0),
                });
            }
            d.hpas.extend(autoscaling::web_hpa(hollo));
        }
        Workloads::Run(version) => {
            for &component in roles(spec.mode) {
                // With web autoscaling the HPA owns the HTTP role's count: only lift it to the
                // minimum (R-OP-OPS).
                let http = if spec.web_autoscaled() {
                    Replicas::AtLeast(spec.web.autoscaling.min_replicas)
                } else {
                    Replicas::Exactly(spec.web.replicas)
                };
                let (template, replicas) = match component {
                    Component::Web => (resources::web::deployment(hollo, version, None), http),
                    // Never fight an autoscaler over `replicas` (R-OP-1): only lift the
                    // workers to its minimum, as the autoscaler itself would.
                    Component::Worker if spec.worker_autoscaled() => (
                        resources::worker::deployment(hollo, version, None),
                        Replicas::AtLeast(spec.worker.autoscaling.min_replicas),
                    ),
                    Component::Worker => (
                        resources::worker::deployment(hollo, version, None),
                        Replicas::Exactly(spec.worker.replicas),
                    ),
                    _ => (resources::all::deployment(hollo, version, None), http),
                };
                d.workloads.push(Workload {
                    name: template.name_any(),
                    template: Some(template),
                    replicas,
                });
            }
            d.hpas.extend(autoscaling::web_hpa(hollo));
            match autoscaling::autoscaler(hollo) {
                autoscaling::Autoscaler::None => {}
                autoscaling::Autoscaler::Hpa(h) => d.hpas.push(*h),
                autoscaling::Autoscaler::Keda(o) => d.scaled_objects.push(*o),
            }
        }
    }
    // The version being stopped runs it (nothing of the new version starts before its
    // migration succeeded), and keeps running it until it goes: no rollout of the page itself.
    let page_version = world
        .deployments
        .get(Component::MaintenancePage.as_str())
        .and_then(|d| super::observe::template_version(d).map(str::to_string))
        .or_else(|| world.observed.current_version.clone());
    if plan.maintenance_page
        && let Some(version) = page_version
    {
        let page = maintenance_page::deployment(hollo, &version);
        d.workloads.push(Workload {
            name: page.name_any(),
            template: Some(page),
            replicas: Replicas::Exactly(1),
        });
    }
    d
}

/// Once the target runs, migration Jobs of other versions, all version probes and the
/// admin-account Jobs of an earlier `spec.admin` are history; the finished ones are deleted.
/// The target's own Jobs stay (a failed attempt's logs remain reachable), and so does the
/// current `spec.admin` Job (a record that the account was made).
pub fn finished_jobs<'a>(hollo: &Hollo, jobs: &'a [std::sync::Arc<Job>]) -> Vec<&'a Job> {
    use crate::resources::labels;
    let target = labels::label_value(&hollo.spec.version);
    jobs.iter()
        .map(AsRef::as_ref)
        .filter(|j| {
            let l = j.labels();
            let component = l.get(labels::COMPONENT).map(String::as_str);
            let probe = component == Some(migration::PROBE_COMPONENT);
            let old_migration = component == Some(Component::Migration.as_str())
                && l.get(labels::VERSION) != Some(&target);
            (probe || old_migration || admin::stale(hollo, j))
                && super::observe::job_state(Some(j)) != JobState::Running
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_are_enforced_or_only_lifted_for_autoscalers() {
        assert_eq!(Replicas::Exactly(3).scale_to(Some(3)), None);
        assert_eq!(Replicas::Exactly(3).scale_to(Some(0)), Some(3));
        assert_eq!(
            Replicas::Exactly(3).scale_to(Some(5)),
            Some(3),
            "drift corrected"
        );
        assert_eq!(Replicas::Exactly(1).scale_to(None), None, "unset means 1");
        assert_eq!(
            Replicas::AtLeast(2).scale_to(Some(0)),
            Some(2),
            "after a stop"
        );
        assert_eq!(
            Replicas::AtLeast(2).scale_to(Some(7)),
            None,
            "the autoscaler's choice"
        );
        assert_eq!(Replicas::AtLeast(2).initial(), 2);
    }
}
