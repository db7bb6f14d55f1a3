//! The operator's reaction time and footprint at 50 `Hollo`s (R-OP-1, R-OP-SCALE): run by
//! `bench/operator-burst`, which starts the control plane and one operator and passes its pid
//! and metrics address. Ignored in `e2e/run`: it measures, it does not judge.
//!
//! Prints one line: `hollos=50 running_s=… reconciles_per_hollo=… steady_reconciles=…
//! steady_writes=… single_p50_ms=… single_ms=[…] burst_s=… rss_mib=… rss_peak_mib=…`.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

const HOLLOS: usize = 50;
const SINGLE_ROUNDS: usize = 9;

fn name(i: usize) -> String {
    format!("b{i:02}")
}

/// A counter of the operator's `/metrics` (0 when the operator does not export it).
async fn metric(name: &str) -> f64 {
    let Ok(url) = std::env::var("HOLLO_BENCH_METRICS") else {
        return 0.0;
    };
    let Ok(resp) = reqwest::get(&url).await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// `VmRSS` and `VmHWM` of the operator process, in MiB.
fn rss_mib() -> (f64, f64) {
    let pid = std::env::var("HOLLO_BENCH_OPERATOR_PID").unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0)
}

/// Waits until every worker Deployment named in `names` wants `replicas`; returns when.
async fn workers_at(store: &Store<Deployment>, names: &[String], replicas: i32) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = names.iter().all(|n| {
            store
                .find(|d| d.metadata.name.as_deref() == Some(&format!("{n}-worker")))
                .is_some_and(|d| d.spec.replicas == Some(replicas))
        });
        if done {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "worker Deployments did not reach {replicas} replicas in 120 s"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

async fn set_workers(ns: &Ns, name: &str, replicas: i32) {
    ns.hollos()
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"worker": {"replicas": replicas}}})),
        )
        .await
        .expect("patch worker replicas");
}

#[tokio::test]
#[ignore = "a measurement: run by bench/operator-burst"]
async fn fifty_hollos_burst_of_worker_replica_patches() {
    let ns = Ns::new("burst").await;
    ns.prepare_instance().await;
    let names: Vec<String> = (0..HOLLOS).map(name).collect();

    let deployments: Api<Deployment> = ns.api();
    let (store, writer) = reflector::store();
    let watch = watcher(deployments, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .touched_objects()
        .for_each(|_| async {});
    let watch = tokio::spawn(watch);
    store.wait_until_ready().await.expect("deployment cache");

    let reconciles_before = metric("hollo_operator_reconciles_total").await;
    let started = Instant::now();
    for n in &names {
        // Room in the connection budget for the larger worker counts below.
        ns.apply_hollo(&minimal_with(json!({
            "metadata": {"name": n},
            "spec": {"database": {"maxConnections": 1000}},
        })))
        .await
        .expect("apply Hollo");
    }
    let hollos = ns.hollos();
    wait_until("every Hollo Running", 600, || async {
        let list = hollos
            .list(&Default::default())
            .await
            .map_err(|e| e.to_string())?;
        let running = list.items.iter().filter(|h| phase(h) == "Running").count();
        if running == HOLLOS {
            Ok(())
        } else {
            Err(format!("{running}/{HOLLOS} Running"))
        }
    })
    .await;
    let running_s = started.elapsed().as_secs_f64();
    let reconciles = metric("hollo_operator_reconciles_total").await - reconciles_before;

    // Steady: every Hollo reconciled again (an annotation changes no spec), nothing written.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes_before = metric("hollo_operator_api_writes_total").await;
    let reconciles_before = metric("hollo_operator_reconciles_total").await;
    for n in &names {
        hollos
            .patch(
                n,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"bench/poke": "1"}}})),
            )
            .await
            .expect("annotate Hollo");
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut steady_reconciles = 0.0;
    while Instant::now() < deadline {
        steady_reconciles = metric("hollo_operator_reconciles_total").await - reconciles_before;
        if steady_reconciles >= HOLLOS as f64 || std::env::var("HOLLO_BENCH_METRICS").is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let steady_writes = metric("hollo_operator_api_writes_total").await - writes_before;

    // One patch alone, several times.
    let mut single = vec![];
    for (round, n) in names.iter().take(SINGLE_ROUNDS).enumerate() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let t0 = Instant::now();
        set_workers(&ns, n, 3).await;
        let t1 = workers_at(&store, std::slice::from_ref(n), 3).await;
        let ms = (t1 - t0).as_secs_f64() * 1000.0;
        ns.log(&format!("single patch {round}: {ms:.0} ms"));
        single.push(ms);
    }
    let mut sorted = single.clone();
    sorted.sort_by(f64::total_cmp);
    let p50 = sorted[sorted.len() / 2];

    // A burst: every Hollo at once, measured from the last patch's answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ns = Arc::new(ns);
    let patches = names.iter().map(|n| {
        let ns = ns.clone();
        let n = n.clone();
        async move { set_workers(&ns, &n, 4).await }
    });
    futures::future::join_all(patches).await;
    let last_patch = Instant::now();
    let done = workers_at(&store, &names, 4).await;
    let burst_s = (done - last_patch).as_secs_f64();
    let (rss, peak) = rss_mib();
    watch.abort();

    println!(
        "hollos={HOLLOS} running_s={running_s:.1} reconciles_per_hollo={:.1} \
         steady_reconciles={steady_reconciles} steady_writes={steady_writes} single_p50_ms={p50:.0} single_ms={:?} burst_s={burst_s:.2} \
         rss_mib={rss:.1} rss_peak_mib={peak:.1}",
        reconciles / HOLLOS as f64,
        single.iter().map(|v| v.round()).collect::<Vec<_>>(),
    );
}
