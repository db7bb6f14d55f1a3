//! One PodDisruptionBudget per role (R-OP-PDB).

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use super::labels::{self, Component};
use crate::crd::{DisruptionBudgetSpec, Hollo, Mode};

/// Whether a role gets a PDB: explicit `enabled`, else only with 2+ replicas (a budget on a
/// single pod buys nothing and, set wrongly, blocks node drains).
pub fn enabled(budget: &DisruptionBudgetSpec, replicas: i32) -> bool {
    budget.enabled.unwrap_or(replicas >= 2)
}

fn build(
    hollo: &Hollo,
    component: Component,
    budget: &DisruptionBudgetSpec,
) -> PodDisruptionBudget {
    PodDisruptionBudget {
        metadata: super::child_meta(
            hollo,
            format!("{}-{}", hollo.name_any(), component.as_str()),
            component,
            &hollo.spec.version,
        ),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(budget.max_unavailable)),
            min_available: None,
            selector: Some(LabelSelector {
                match_labels: Some(labels::selector(&hollo.name_any(), component)),
                match_expressions: None,
            }),
            // Crash-looping pods must never hold a node drain hostage.
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
        }),
        status: None,
    }
}

/// The PDB of the HTTP role (`<name>-web`, or `<name>-all` in all mode), if enabled.
pub fn web(hollo: &Hollo) -> Option<PodDisruptionBudget> {
    let spec = &hollo.spec;
    let component = match spec.mode {
        Mode::Split => Component::Web,
        Mode::All => Component::All,
    };
    enabled(&spec.web.disruption_budget, spec.web_max_replicas())
        .then(|| build(hollo, component, &spec.web.disruption_budget))
}

/// The worker PDB `<name>-worker`, if enabled (split mode only). With autoscaling the
/// autoscaler's maximum decides whether the role can have 2+ pods.
pub fn worker(hollo: &Hollo) -> Option<PodDisruptionBudget> {
    let spec = &hollo.spec;
    if spec.mode != Mode::Split {
        return None;
    }
    let replicas = if spec.worker_autoscaled() {
        spec.worker.autoscaling.max_replicas
    } else {
        spec.worker.replicas
    };
    enabled(&spec.worker.disruption_budget, replicas)
        .then(|| build(hollo, Component::Worker, &spec.worker.disruption_budget))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;

    #[test]
    fn default_pdbs_allow_one_unavailable_and_evict_unhealthy() {
        let h = testutil::hollo(testutil::spec());
        let p = web(&h).expect("2 web replicas → PDB");
        assert_eq!(p.metadata.name.as_deref(), Some("social-web"));
        let s = p.spec.expect("spec");
        assert_eq!(s.max_unavailable, Some(IntOrString::Int(1)));
        assert_eq!(s.min_available, None);
        assert_eq!(
            s.unhealthy_pod_eviction_policy.as_deref(),
            Some("AlwaysAllow")
        );
        let sel = s.selector.and_then(|s| s.match_labels).expect("selector");
        assert_eq!(sel["app.kubernetes.io/component"], "web");
        let w = worker(&h).expect("2 workers → PDB");
        assert_eq!(w.metadata.name.as_deref(), Some("social-worker"));
    }

    #[test]
    fn single_replica_roles_get_no_pdb_unless_asked() {
        let mut spec = testutil::spec();
        spec.web.replicas = 1;
        spec.worker.replicas = 1;
        let h = testutil::hollo(spec.clone());
        assert!(web(&h).is_none());
        assert!(worker(&h).is_none());
        spec.worker.disruption_budget.enabled = Some(true);
        spec.web.disruption_budget.enabled = Some(false);
        spec.web.replicas = 5;
        let h = testutil::hollo(spec);
        assert!(worker(&h).is_some());
        assert!(web(&h).is_none());
    }

    #[test]
    fn autoscaled_workers_use_the_maximum() {
        let mut spec = testutil::spec();
        spec.worker.replicas = 0;
        spec.worker.autoscaling.enabled = true;
        spec.worker.autoscaling.max_replicas = 4;
        assert!(worker(&testutil::hollo(spec)).is_some());
    }

    #[test]
    fn all_mode_has_one_pdb_for_the_all_role() {
        let mut spec = testutil::spec();
        spec.mode = Mode::All;
        let h = testutil::hollo(spec);
        assert!(worker(&h).is_none());
        let p = web(&h).expect("pdb");
        assert_eq!(p.metadata.name.as_deref(), Some("social-all"));
    }
}
