//! The operator's reaction time and footprint at `N` `Hollo`s (R-OP-1, R-OP-SCALE; issue 36
//! item 4): run by `bench/operator-burst`, which starts the control plane and one operator and
//! passes its pid and metrics address. Ignored in `e2e/run`: it measures, it does not judge.
//!
//! Env: `HOLLO_BENCH_N` (50) Hollos, `HOLLO_BENCH_BURST` (min(N, 100)) patched at once,
//! `HOLLO_BENCH_STEADY_S` (65) the quiet window in which the operator's API requests are counted,
//! `HOLLO_BENCH_RUNNING_TIMEOUT_S` (600) how long all may take to be `Running` (past it, a line
//! `N=… running_s=timeout running=…` says how far it got, and the test fails).
//!
//! Prints one line of `key=value` pairs: `N=… running_s=… reconciles_per_hollo=…
//! steady_reconciles=… steady_writes=… steady_requests_per_s=… steady_non_watch=…
//! steady_by_verb=… single_p50_ms=… single_ms=… burst=… burst_s=… rss_mib=… rss_peak_mib=…
//! code_mib=… cpu_s=… watch_secrets=… load1=…`.

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

const SINGLE_ROUNDS: usize = 9;

fn name(i: usize) -> String {
    format!("b{i:03}")
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Every series of a counter family, by the value of `label` (`{}` when not exported).
async fn metric_by(name: &str, label: &str) -> std::collections::BTreeMap<String, f64> {
    let mut out = std::collections::BTreeMap::new();
    let Ok(url) = std::env::var("HOLLO_BENCH_METRICS") else {
        return out;
    };
    let Ok(resp) = reqwest::get(&url).await else {
        return out;
    };
    let text = resp.text().await.unwrap_or_default();
    let prefix = format!("{name}{{{label}=\"");
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix(&prefix)
            && let Some((value, count)) = rest.split_once("\"} ")
            && let Ok(count) = count.trim().parse::<f64>()
        {
            out.insert(value.to_string(), count);
        }
    }
    out
}

/// The 1-minute load average of the machine.
fn load1() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .next()
        .unwrap_or("na")
        .to_string()
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

/// The operator process's footprint from `/proc`: `VmRSS`, `VmHWM` and `RssFile` (its code
/// pages: resident like the heap) in MiB, and the CPU it used so far (user + system) in seconds.
struct Footprint {
    rss_mib: f64,
    peak_mib: f64,
    code_mib: f64,
    cpu_s: f64,
}

fn footprint() -> Footprint {
    let pid = std::env::var("HOLLO_BENCH_OPERATOR_PID").unwrap_or_default();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
            / 1024.0
    };
    // utime and stime are fields 14 and 15, counted after the command's closing parenthesis
    // (a command may contain spaces); in clock ticks, which Linux's ABI fixes at 100 a second.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: f64 = after_comm
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<f64>().ok())
        .sum();
    Footprint {
        rss_mib: mib("VmRSS:"),
        peak_mib: mib("VmHWM:"),
        code_mib: mib("RssFile:"),
        cpu_s: ticks / 100.0,
    }
}

/// Waits until every worker Deployment named in `names` wants `replicas`; returns when.
async fn workers_at(store: &Store<Deployment>, names: &[String], replicas: i32) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(300);
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
            "worker Deployments did not reach {replicas} replicas in 300 s"
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
async fn hollos_burst_of_worker_replica_patches() {
    let hollos_n = env_usize("HOLLO_BENCH_N", 50);
    let burst = env_usize("HOLLO_BENCH_BURST", hollos_n.min(100)).min(hollos_n);
    let steady_s = env_usize("HOLLO_BENCH_STEADY_S", 65) as u64;
    let ns = Ns::new("burst").await;
    ns.prepare_instance().await;
    let names: Vec<String> = (0..hollos_n).map(name).collect();

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
    // A few applies in flight at once, as a provider's tooling would send them.
    futures::stream::iter(names.iter())
        .for_each_concurrent(8, |n| {
            let ns = &ns;
            async move {
                // Room in the connection budget for the larger worker counts below.
                ns.apply_hollo(&minimal_with(json!({
                    "metadata": {"name": n},
                    "spec": {"database": {"maxConnections": 1000}},
                })))
                .await
                .expect("apply Hollo");
            }
        })
        .await;
    let hollos = ns.hollos();
    // Listed from the apiserver's watch cache (resourceVersion=0) once a second.
    let running_timeout = env_usize("HOLLO_BENCH_RUNNING_TIMEOUT_S", 600) as u64;
    let deadline = Instant::now() + Duration::from_secs(running_timeout);
    let mut last_running = 0;
    loop {
        let list = hollos
            .list(&kube::api::ListParams::default().match_any())
            .await
            .expect("list Hollos");
        let running = list.items.iter().filter(|h| phase(h) == "Running").count();
        if running != last_running {
            ns.log(&format!(
                "{running}/{hollos_n} Running after {:.0} s",
                started.elapsed().as_secs_f64()
            ));
            last_running = running;
        }
        if running == hollos_n {
            break;
        }
        if Instant::now() >= deadline {
            // What was reached, as the last line, before failing: the bench reports it.
            let f = footprint();
            println!(
                "N={hollos_n} running_s=timeout running={running} after_s={:.0} \
                 reconciles={} writes={} rss_mib={:.1} rss_peak_mib={:.1} cpu_s={:.1} load1={}",
                started.elapsed().as_secs_f64(),
                metric("hollo_operator_reconciles_total").await - reconciles_before,
                metric("hollo_operator_api_writes_total").await,
                f.rss_mib,
                f.peak_mib,
                f.cpu_s,
                load1(),
            );
            panic!("only {running}/{hollos_n} Hollos Running after {running_timeout} s");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let running_s = started.elapsed().as_secs_f64();
    let reconciles = metric("hollo_operator_reconciles_total").await - reconciles_before;

    // Steady: every Hollo reconciled again (an annotation changes no spec), nothing written.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes_before = metric("hollo_operator_api_writes_total").await;
    let reconciles_before = metric("hollo_operator_reconciles_total").await;
    futures::stream::iter(names.iter())
        .for_each_concurrent(8, |n| {
            let hollos = &hollos;
            async move {
                hollos
                    .patch(
                        n,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"annotations": {"bench/poke": "1"}}})),
                    )
                    .await
                    .expect("annotate Hollo");
            }
        })
        .await;
    let deadline = Instant::now() + Duration::from_secs(60 + hollos_n as u64 / 10);
    let mut steady_reconciles = 0.0;
    while Instant::now() < deadline {
        steady_reconciles = metric("hollo_operator_reconciles_total").await - reconciles_before;
        if steady_reconciles >= hollos_n as f64 || std::env::var("HOLLO_BENCH_METRICS").is_err() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // Quiet: nothing changes for `steady_s`; what does the operator ask the apiserver? (Long
    // enough to contain every periodic recheck shorter than it, e.g. a Secret re-read.)
    let requests_before = metric_by("hollo_operator_api_requests_total", "verb").await;
    tokio::time::sleep(Duration::from_secs(steady_s)).await;
    let requests_after = metric_by("hollo_operator_api_requests_total", "verb").await;
    let steady_writes = metric("hollo_operator_api_writes_total").await - writes_before;
    let by_verb: Vec<(String, f64)> = requests_after
        .iter()
        .map(|(v, n)| {
            (
                v.clone(),
                n - requests_before.get(v).copied().unwrap_or(0.0),
            )
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    // (`+ 0.0`: an empty f64 sum is -0.0)
    let steady_total: f64 = by_verb.iter().map(|(_, n)| n).sum::<f64>() + 0.0;
    let steady_non_watch: f64 = by_verb
        .iter()
        .filter(|(v, _)| v != "watch")
        .map(|(_, n)| n)
        .sum::<f64>()
        + 0.0;
    let steady_by_verb = if by_verb.is_empty() {
        "none".to_string()
    } else {
        by_verb
            .iter()
            .map(|(v, n)| format!("{v}:{n}"))
            .collect::<Vec<_>>()
            .join(",")
    };

    // One patch alone, several times, while the others sit idle.
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

    // A burst: `burst` Hollos at once, measured from the last patch's answer.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let burst_names = &names[..burst];
    let ns = Arc::new(ns);
    let patches = burst_names.iter().map(|n| {
        let ns = ns.clone();
        let n = n.clone();
        async move { set_workers(&ns, &n, 4).await }
    });
    futures::future::join_all(patches).await;
    let last_patch = Instant::now();
    let done = workers_at(&store, burst_names, 4).await;
    let burst_s = (done - last_patch).as_secs_f64();
    let f = footprint();
    watch.abort();

    println!(
        "N={hollos_n} running_s={running_s:.1} reconciles_per_hollo={:.1} \
         steady_reconciles={steady_reconciles} steady_writes={steady_writes} \
         steady_s={steady_s} steady_requests_per_s={:.2} steady_non_watch={steady_non_watch} \
         steady_by_verb={steady_by_verb} single_p50_ms={p50:.0} single_ms={} burst={burst} \
         burst_s={burst_s:.2} rss_mib={:.1} rss_peak_mib={:.1} code_mib={:.1} cpu_s={:.1} \
         watch_secrets={} load1={}",
        reconciles / hollos_n as f64,
        steady_total / steady_s as f64,
        single
            .iter()
            .map(|v| format!("{v:.0}"))
            .collect::<Vec<_>>()
            .join(","),
        f.rss_mib,
        f.peak_mib,
        f.code_mib,
        f.cpu_s,
        std::env::var("HOLLO_BENCH_WATCH_SECRETS").unwrap_or_else(|_| "false".into()),
        load1(),
    );
}
