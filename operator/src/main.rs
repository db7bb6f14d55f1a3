//! `hollo-operator`: reconciles `Hollo` resources (`run`) and prints the CRD (`crd`).

mod budget;
mod crd;
mod docs;
mod downgrade;
mod leader;
mod phase;
mod reconcile;
#[cfg(test)]
mod reference;
mod resources;
mod status;
mod telemetry;
#[cfg(test)]
mod testutil;
mod window;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{Parser, Subcommand};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::events::Reporter;
use kube::{Api, Client};
use tokio_util::sync::CancellationToken;

use crate::crd::Hollo;

#[derive(Parser)]
#[command(
    name = "hollo-operator",
    version,
    about = "Kubernetes operator for Hollo"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Hollo CustomResourceDefinition as YAML.
    Crd {
        /// Print the operator chart's template of it instead (`templates/crd.yaml`).
        #[arg(long)]
        chart_template: bool,
    },
    /// Print the CRD's field reference as Markdown (`operator/CRD-REFERENCE.md`).
    CrdReference,
    /// Run the controller against the current kubeconfig or in-cluster config.
    Run(RunArgs),
    /// Print the objects a Hollo (YAML file, `-` for stdin) makes, without a cluster.
    Render {
        file: String,
        /// Namespace to assume when the file has none.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
}

/// Parses a `Hollo` for `render`, filling what only a stored object has (namespace, uid).
fn render_input(text: &str, namespace: &str) -> anyhow::Result<Hollo> {
    let mut hollo: Hollo = serde_yaml::from_str(text)?;
    if hollo.metadata.namespace.is_none() {
        hollo.metadata.namespace = Some(namespace.to_string());
    }
    if hollo.metadata.uid.is_none() {
        hollo.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
    }
    Ok(hollo)
}

#[derive(clap::Args, Debug)]
struct RunArgs {
    /// Watch only this namespace (empty: all namespaces).
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    watch_namespace: String,
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Disable leader election (a single replica, e.g. local development).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false)]
    disable_leader_election: bool,
    /// Name of the coordination.k8s.io Lease.
    #[arg(long, env = "LEASE_NAME", default_value = "hollo-operator-leader")]
    lease_name: String,
    /// Namespace of the Lease (default: POD_NAMESPACE, else the client's default namespace).
    #[arg(long, env = "POD_NAMESPACE")]
    lease_namespace: Option<String>,
    /// This replica's identity in the Lease and in events (default: POD_NAME, else hostname).
    #[arg(long, env = "POD_NAME")]
    identity: Option<String>,
    /// Watch Secrets (metadata only; needs `list` and `watch` on Secrets) instead of reading
    /// every referenced Secret by GET at least once a minute: no requests in steady state, and a
    /// rotation is seen at once.
    #[arg(long, env = "WATCH_SECRETS", default_value_t = false)]
    watch_secrets: bool,
    /// Reconciles in flight at once (0: unbounded). Bounds the operator's memory and the
    /// apiserver's load when many `Hollo`s need work at the same time.
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = 16)]
    reconcile_concurrency: u16,
}

/// glibc's malloc, tuned for one long-lived process holding many `Hollo`s (1 000 per operator),
/// set before any thread starts:
/// - one arena (its default is eight per core, and each keeps its own freed memory): a
///   reconcile mostly waits on the apiserver, so threads rarely contend for it;
/// - blocks of 128 KiB and more (a watch's list page, a large response body) mapped on their
///   own and unmapped when freed, instead of glibc's threshold that grows up to 32 MiB, so a
///   transient large block does not sit in the heap between long-lived objects.
///
/// Measured together (`bench/operator-burst`, N=1000): with two arenas and glibc's threshold
/// the annotation of every `Hollo` took the RSS from 56 to 64 MiB (peak 69.6); with these,
/// from 55 to 59–61 MiB (peak 63.7). An operator who tunes malloc (`GLIBC_TUNABLES`, any
/// `MALLOC_*` variable) is left alone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    if std::env::vars_os()
        .any(|(k, _)| k == "GLIBC_TUNABLES" || k.to_str().is_some_and(|k| k.starts_with("MALLOC_")))
    {
        return;
    }
    // SAFETY: mallopt only sets parameters of glibc's allocator; it is called first thing in
    // main, before this process starts any thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 * 1024);
    }
}

/// Returns the heap's free pages to the system every `every`. glibc gives back only the top of
/// a heap on its own; the free memory inside it (what a burst of reconciles, a re-list or the
/// install of many `Hollo`s left behind) stays resident until `malloc_trim`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_malloc(every: Duration, stop: CancellationToken) {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            // SAFETY: malloc_trim only releases free memory; glibc locks each arena itself.
            let _ = tokio::task::spawn_blocking(|| unsafe { libc::malloc_trim(0) }).await;
        }
    });
}

fn main() -> anyhow::Result<()> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    tune_malloc();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async_main())
}

async fn async_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd { chart_template } => {
            if chart_template {
                print!("{}", crd::chart_template()?);
            } else {
                print!("{}", crd::crd_yaml()?);
            }
            Ok(())
        }
        Command::CrdReference => {
            print!("{}", docs::crd_reference());
            Ok(())
        }
        Command::Render { file, namespace } => {
            let text = if file == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(&file)?
            };
            print!("{}", resources::render(&render_input(&text, &namespace)?)?);
            Ok(())
        }
        Command::Run(args) => {
            telemetry::init_logging();
            run(args).await
        }
    }
}

/// Cancels the token on SIGTERM or SIGINT.
fn shutdown_on_signals(token: CancellationToken) {
    tokio::spawn(async move {
        let term = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no SIGTERM handler");
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = term => {}
        }
        tracing::info!("shutting down");
        token.cancel();
    });
}

/// How often the heap's free pages go back to the system (`trim_malloc`).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MALLOC_TRIM_EVERY: Duration = Duration::from_secs(10);

async fn run(args: RunArgs) -> anyhow::Result<()> {
    let shutdown = CancellationToken::new();
    shutdown_on_signals(shutdown.clone());
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    trim_malloc(MALLOC_TRIM_EVERY, shutdown.clone());

    let health = Arc::new(telemetry::Health::default());
    let server = tokio::spawn(telemetry::serve(
        args.metrics_addr,
        health.clone(),
        shutdown.clone(),
    ));

    // Every request is counted by verb (`hollo_operator_api_requests_total`): in steady state
    // only watches should be opened (many `Hollo`s per operator).
    let config = kube::Config::infer().await?;
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&telemetry::count_requests(health.metrics.requests.clone()))
        .build();
    health.ready.store(true, Ordering::Relaxed);
    let identity = args
        .identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("hollo-operator-{}", std::process::id()));

    let lease = if args.disable_leader_election {
        None
    } else {
        let ns = args
            .lease_namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        let api: Api<Lease> = Api::namespaced(client.clone(), &ns);
        let cfg = leader::LeaseConfig {
            name: args.lease_name.clone(),
            identity: identity.clone(),
            duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(5),
        };
        tracing::info!(lease = %cfg.name, namespace = %ns, identity = %identity, "waiting for leadership");
        if !leader::acquire(&api, &cfg, &shutdown).await {
            server.await??;
            return Ok(());
        }
        Some(tokio::spawn(leader::hold(api, cfg, shutdown.clone())))
    };
    health.metrics.leader.set(1);

    let ns = (!args.watch_namespace.is_empty()).then_some(args.watch_namespace.clone());
    fn api<K>(client: &Client, ns: &Option<String>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let recorder = reconcile::report::Events::new(
        client.clone(),
        Reporter {
            controller: reconcile::MANAGER.into(),
            instance: Some(identity),
        },
    );
    // No bound in the controller itself: every reconcile waits at the gate for one of
    // `RECONCILE_CONCURRENCY` slots, spec edits first (`reconcile::gate`).
    let controller = reconcile::stores::hollo_controller(api::<Hollo>(&client, &ns));
    let gate = Arc::new(reconcile::gate::Gate::new(args.reconcile_concurrency));
    let (controller, stores) =
        reconcile::stores::watch_children(controller, &client, ns.as_deref());
    let (controller, secrets) = if args.watch_secrets {
        reconcile::stores::watch_secrets(controller, &client, ns.as_deref())
    } else {
        (controller, Default::default())
    };
    // A scrape drops the per-Hollo series of Hollos no longer in the cache (R-OP-OPS).
    let _ = health.hollos.set(controller.store());
    // Which cache holds the memory: `RUST_LOG=hollo_operator::reconcile::stores=debug`.
    reconcile::stores::log_sizes(controller.store(), stores.clone(), Duration::from_secs(30));
    let ctx = Arc::new(reconcile::Context {
        client: client.clone(),
        recorder,
        health: health.clone(),
        stores,
        applier: reconcile::apply::Applier::new(health.metrics.writes.clone()),
        secrets,
    });
    tracing::info!(
        namespace = ns.as_deref().unwrap_or("<all>"),
        "starting controller"
    );
    let stop = shutdown.clone();
    let hollos = controller.store();
    controller
        .graceful_shutdown_on(async move { stop.cancelled().await })
        .run(
            move |hollo, ctx| reconcile::gated(gate.clone(), hollos.clone(), hollo, ctx),
            reconcile::error_policy,
            ctx,
        )
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(object = %obj, "reconciled"),
                // A deleted object still queued: nothing to do.
                Err(kube::runtime::controller::Error::ObjectNotFound(obj)) => {
                    tracing::debug!(object = %obj, "object gone")
                }
                Err(e) => tracing::warn!(error = %e, "controller error"),
            }
        })
        .await;

    // The controller stopped (signal or lost lease): release the lease and stop serving.
    shutdown.cancel();
    health.metrics.leader.set(0);
    if let Some(h) = lease {
        h.await?;
    }
    server.await??;
    Ok(())
}
