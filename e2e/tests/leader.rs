//! Scenario 9: two operator processes (started by `e2e/run` under the chart's ServiceAccount):
//! only the Lease holder reconciles; killing it hands over. `e2e/run` runs this after the other
//! scenarios because it kills one of the operators.

mod common;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;

struct Operator {
    identity: String,
    pid: u32,
    port: u16,
}

/// `HOLLO_E2E_OPERATORS="id=pid=port id=pid=port"`, as e2e/run exports it.
fn operators() -> Vec<Operator> {
    let spec = std::env::var("HOLLO_E2E_OPERATORS").unwrap_or_default();
    let ops: Vec<Operator> = spec
        .split_whitespace()
        .map(|s| {
            let parts: Vec<&str> = s.split('=').collect();
            assert_eq!(parts.len(), 3, "bad HOLLO_E2E_OPERATORS entry {s:?}");
            Operator {
                identity: parts[0].into(),
                pid: parts[1].parse().expect("pid"),
                port: parts[2].parse().expect("port"),
            }
        })
        .collect();
    assert!(
        ops.len() == 2,
        "scenario 9 needs the two operator processes e2e/run starts (HOLLO_E2E_OPERATORS={spec:?}): run e2e/run"
    );
    ops
}

/// Sum of a metric's samples on one operator's /metrics; Err when it does not answer.
/// `op` holds the Lease (its leader gauge is 1) and has reconciled.
async fn assert_leads(op: &Operator) {
    assert_eq!(metric(op, "hollo_operator_leader").await, Ok(1.0));
    assert!(metric(op, "hollo_operator_reconciles_total").await.unwrap() > 0.0);
}

async fn metric(op: &Operator, name: &str) -> Result<f64, String> {
    let text = reqwest::get(format!("http://127.0.0.1:{}/metrics", op.port))
        .await
        .map_err(|e| format!("{}: {e}", op.identity))?
        .text()
        .await
        .map_err(|e| e.to_string())?;
    Ok(text
        .lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum())
}

async fn holder(leases: &Api<Lease>) -> String {
    leases
        .get_opt("hollo-operator-leader")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec?.holder_identity)
        .unwrap_or_default()
}

#[tokio::test]
async fn only_the_lease_holder_reconciles_and_killing_it_hands_over() {
    let ops = operators();
    let ns = Ns::new("leader").await;
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), "hollo-system");
    let lead = holder(&leases).await;
    let (leader, standby) = match ops.iter().position(|o| o.identity == lead) {
        Some(0) => (&ops[0], &ops[1]),
        Some(_) => (&ops[1], &ops[0]),
        None => panic!(
            "Lease holder {lead:?} is none of the operators {:?}",
            ops.iter().map(|o| &o.identity).collect::<Vec<_>>()
        ),
    };
    ns.log(&format!(
        "leader {} (pid {}), standby {}",
        leader.identity, leader.pid, standby.identity
    ));

    ns.prepare_instance().await;
    ns.apply_hollo(&minimal_example())
        .await
        .expect("apply Hollo");
    ns.wait_running("0.1.0", 90).await;
    ns.merge_hollo(json!({"spec": {"worker": {"replicas": 3}}}))
        .await;
    ns.wait_replicas("worker", 3, 60).await;

    assert_leads(leader).await;
    assert_eq!(metric(standby, "hollo_operator_leader").await, Ok(0.0));
    assert_eq!(
        metric(standby, "hollo_operator_reconciles_total").await,
        Ok(0.0),
        "the standby reconciled without holding the Lease"
    );
    let events: Api<Event> = ns.api();
    let instances: std::collections::BTreeSet<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reporting_controller
                .as_deref()
                .is_some_and(|c| c.contains("hollo"))
        })
        .filter_map(|e| e.reporting_instance)
        .collect();
    assert_eq!(
        instances.iter().collect::<Vec<_>>(),
        vec![&leader.identity],
        "events must come from the Lease holder only"
    );

    // Kill the holder without a chance to release the Lease: the standby takes over at expiry.
    ns.log(&format!("kill -KILL {}", leader.pid));
    let st = std::process::Command::new("kill")
        .args(["-KILL", &leader.pid.to_string()])
        .status()
        .expect("kill");
    assert!(st.success(), "could not kill the leader");
    wait_until("the standby holds the Lease", 60, || async {
        let h = holder(&leases).await;
        if h == standby.identity {
            Ok(())
        } else {
            Err(format!("holder {h:?}"))
        }
    })
    .await;
    ns.log("standby holds the Lease");
    ns.merge_hollo(json!({"spec": {"worker": {"replicas": 1}}}))
        .await;
    ns.wait_replicas("worker", 1, 60).await;
    ns.wait_running("0.1.0", 30).await;
    assert_leads(standby).await;
}
