//! Issue 8, for real: a namespaced install (`watchNamespaces: [<one namespace>]`, so the chart
//! grants a Role and RoleBinding there and no ClusterRole) runs its namespace under that
//! ServiceAccount and nothing else. `e2e/run` stops the cluster-wide operators first, installs a
//! second release watching `HOLLO_E2E_WATCHED`, and runs the operator with its token, so a rule
//! the Role lacks fails this test.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};

const V1: &str = "0.1.0";

#[tokio::test]
async fn a_namespaced_install_runs_its_namespace_and_leaves_the_others_alone() {
    let watched = std::env::var("HOLLO_E2E_WATCHED")
        .expect("e2e/run sets HOLLO_E2E_WATCHED for the namespaced install");
    let ns = Ns::existing(&watched).await;
    ns.prepare_instance().await;
    ns.kubectl(&["apply", "-f", "examples/hollo-minimal.yaml"]);
    ns.wait_running(V1, 120).await;
    ns.wait_replicas("worker", 2, 60).await;

    // A Hollo in a namespace the install does not watch: no status, no children, ever.
    let other = Ns::new("unwatched").await;
    other.prepare_instance().await;
    other
        .apply_hollo(&minimal_example())
        .await
        .expect("apply Hollo");
    let deployments: Api<Deployment> = other.api();
    holds_for("the unwatched Hollo is left alone", 10, || async {
        let h = other.hollo().await;
        if !h.data["status"].is_null() {
            return Err(format!("it got a status: {}", h.data["status"]));
        }
        let n = deployments
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .len();
        if n > 0 {
            return Err(format!("{n} Deployments appeared"));
        }
        Ok(())
    })
    .await;
    // Meanwhile the watched one is still reconciled: a scale-up goes through.
    ns.kubectl_patch_hollo(r#"{"spec":{"worker":{"replicas":3}}}"#);
    ns.wait_replicas("worker", 3, 60).await;
}
