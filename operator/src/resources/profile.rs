//! Image profiles: what a role's container runs and how it is probed, per image convention
//! (`spec.image.profile`), with the spec's per-role overrides applied on top. Pure.
//!
//! | | `hollo-rs` | `upstream` (fedify-dev/hollo) |
//! |---|---|---|
//! | serve | image entrypoint (`hollo serve`) | `node --dns-result-order=ipv6first dist/bin/server.js` — the image's `pnpm run prod` without the `pnpm run migrate` it runs first |
//! | migrate | `hollo migrate` | `pnpm run migrate` (drizzle-kit) |
//! | web probes | `/healthz` (startup, liveness), `/readyz` on `http` | `/.well-known/nodeinfo` (startup, liveness: answered by Fedify without the database), `/nodeinfo/2.1` (readiness: reads the database, cached 5 min) on `http` |
//! | web ports | `http` (the API), `health` (`/healthz`, `/readyz`, `/metrics`: the only port serving `/metrics`) | `http` |
//! | worker | port `health`, `/healthz`, `/readyz`, `/metrics` | no port, no probe: process-based (below) |
//!
//! Upstream workers open no port and the image has no health command, so their liveness is
//! the process itself: the kubelet restarts the container when it exits, which upstream does
//! when Fedify's queue fails (`process.exit(1)` in `bin/server.ts`); readiness is "running".
//! An exec probe spawning a second Node.js process every period would cost ~50 MB and a
//! database connection per check and still not see a stuck event loop. `worker.probes`
//! replaces either for an image that has something better.

use k8s_openapi::api::core::v1::{ContainerPort, HTTPGetAction, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::crd::{HolloSpec, ImageProfile, ProbeOverrides};

pub const HTTP_PORT_NAME: &str = "http";
pub const HEALTH_PORT_NAME: &str = "health";
pub const HEALTHZ: &str = "/healthz";
pub const READYZ: &str = "/readyz";
/// Upstream: Fedify's NodeInfo links document (no database access).
pub const UPSTREAM_LIVE: &str = "/.well-known/nodeinfo";
/// Upstream: the NodeInfo document (counts accounts and posts; cached for 5 minutes).
pub const UPSTREAM_READY: &str = "/nodeinfo/2.1";

/// The serve command of upstream's image without its start-time migration
/// (`package.json`: `"prod": "pnpm run migrate && node … dist/bin/server.js"`).
pub fn upstream_serve() -> Vec<String> {
    ["node", "--dns-result-order=ipv6first", "dist/bin/server.js"]
        .map(String::from)
        .to_vec()
}

/// The container settings of one role.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Process {
    pub command: Option<Vec<String>>,
    pub args: Option<Vec<String>>,
    pub ports: Vec<ContainerPort>,
    pub startup: Option<Probe>,
    pub liveness: Option<Probe>,
    pub readiness: Option<Probe>,
}

/// An HTTP GET probe on a named container port.
pub fn http_probe(path: &str, port_name: &str, period: i32, failure_threshold: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String(port_name.into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        failure_threshold: Some(failure_threshold),
        timeout_seconds: Some(3),
        ..Probe::default()
    }
}

fn port(name: &str, number: i32) -> ContainerPort {
    ContainerPort {
        name: Some(name.into()),
        container_port: number,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    }
}

/// Probes of a server on the named port: the runtime retries the database at start (R-DB-3),
/// so the startup probe gives it 2 minutes before liveness may restart it.
fn http_probes(live: &str, ready: &str, port_name: &str) -> [Option<Probe>; 3] {
    [
        Some(http_probe(live, port_name, 2, 60)),
        Some(http_probe(live, port_name, 10, 6)),
        Some(http_probe(ready, port_name, 5, 3)),
    ]
}

fn with_overrides(
    mut p: Process,
    command: &Option<Vec<String>>,
    args: &Option<Vec<String>>,
    probes: &ProbeOverrides,
) -> Process {
    if command.is_some() {
        p.command = command.clone();
    }
    if args.is_some() {
        p.args = args.clone();
    }
    for (slot, o) in [
        (&mut p.startup, &probes.startup),
        (&mut p.liveness, &probes.liveness),
        (&mut p.readiness, &probes.readiness),
    ] {
        if let Some(o) = o {
            *slot = Some(Probe::clone(o));
        }
    }
    p
}

/// The HTTP-serving role: web nodes, and `all` nodes (which take `spec.web`'s overrides).
pub fn http(spec: &HolloSpec) -> Process {
    let w = &spec.web;
    let (command, [startup, liveness, readiness]) = match spec.image.profile {
        ImageProfile::HolloRs => (None, http_probes(HEALTHZ, READYZ, HTTP_PORT_NAME)),
        ImageProfile::Upstream => (
            Some(upstream_serve()),
            http_probes(UPSTREAM_LIVE, UPSTREAM_READY, HTTP_PORT_NAME),
        ),
    };
    let ports = match spec.image.profile {
        // Scrapers reach `/metrics` on `health` only (R-OP-HA).
        ImageProfile::HolloRs => vec![
            port(HTTP_PORT_NAME, w.port),
            port(HEALTH_PORT_NAME, w.health_port),
        ],
        ImageProfile::Upstream => vec![port(HTTP_PORT_NAME, w.port)],
    };
    let p = Process {
        command,
        args: None,
        ports,
        startup,
        liveness,
        readiness,
    };
    with_overrides(p, &w.command, &w.args, &w.probes)
}

/// Worker nodes.
pub fn worker(spec: &HolloSpec) -> Process {
    let w = &spec.worker;
    let p = match spec.image.profile {
        ImageProfile::HolloRs => {
            let [startup, liveness, readiness] = http_probes(HEALTHZ, READYZ, HEALTH_PORT_NAME);
            Process {
                command: None,
                args: None,
                ports: vec![port(HEALTH_PORT_NAME, w.health_port)],
                startup,
                liveness,
                readiness,
            }
        }
        ImageProfile::Upstream => {
            let probed = w.probes != ProbeOverrides::default();
            Process {
                command: Some(upstream_serve()),
                args: None,
                // A port only for a probe override to name.
                ports: if probed {
                    vec![port(HEALTH_PORT_NAME, w.health_port)]
                } else {
                    vec![]
                },
                startup: None,
                liveness: None,
                readiness: None,
            }
        }
    };
    with_overrides(p, &w.command, &w.args, &w.probes)
}

/// The migration Job's command: `migrations.command`, else the profile's.
pub fn migration_command(spec: &HolloSpec) -> Vec<String> {
    if let Some(c) = &spec.migrations.command {
        return c.clone();
    }
    match spec.image.profile {
        ImageProfile::HolloRs => vec!["hollo".into(), "migrate".into()],
        ImageProfile::Upstream => vec!["pnpm".into(), "run".into(), "migrate".into()],
    }
}

/// Database connections one process of the profile opens at most, when the profile fixes it:
/// upstream's pool is `max: 20` per process (`src/db.ts`), whatever the role.
pub fn fixed_pool(spec: &HolloSpec) -> Option<i64> {
    match spec.image.profile {
        ImageProfile::HolloRs => None,
        ImageProfile::Upstream => Some(20),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;
    use k8s_openapi::api::core::v1::ExecAction;

    fn path(p: &Option<Probe>) -> Option<(String, String)> {
        let g = p.as_ref()?.http_get.as_ref()?;
        let port = match &g.port {
            IntOrString::String(s) => s.clone(),
            IntOrString::Int(i) => i.to_string(),
        };
        Some((g.path.clone().unwrap_or_default(), port))
    }

    fn upstream() -> HolloSpec {
        let mut spec = testutil::spec();
        spec.image.profile = ImageProfile::Upstream;
        spec
    }

    fn pair(a: &str, b: &str) -> Option<(String, String)> {
        Some((a.into(), b.into()))
    }

    #[test]
    fn hollo_rs_defaults() {
        let spec = testutil::spec();
        let web = http(&spec);
        assert_eq!(
            (web.command, web.args),
            (None, None),
            "the image's entrypoint"
        );
        assert_eq!(web.ports[0].container_port, 3000);
        assert_eq!(web.ports[0].name.as_deref(), Some("http"));
        assert_eq!(web.ports[1].container_port, 9090);
        assert_eq!(web.ports[1].name.as_deref(), Some("health"), "/metrics");
        assert_eq!(path(&web.startup), pair("/healthz", "http"));
        assert_eq!(path(&web.liveness), pair("/healthz", "http"));
        assert_eq!(path(&web.readiness), pair("/readyz", "http"));
        let worker = worker(&spec);
        assert_eq!(worker.command, None);
        assert_eq!(worker.ports[0].container_port, 9090);
        assert_eq!(path(&worker.liveness), pair("/healthz", "health"));
        assert_eq!(path(&worker.readiness), pair("/readyz", "health"));
        assert_eq!(migration_command(&spec), ["hollo", "migrate"]);
        assert!(spec.image.profile.reports_versions());
        assert_eq!(fixed_pool(&spec), None);
    }

    #[test]
    fn upstream_defaults() {
        let spec = upstream();
        let web = http(&spec);
        let serve = ["node", "--dns-result-order=ipv6first", "dist/bin/server.js"];
        assert_eq!(web.command.as_deref(), Some(&serve.map(String::from)[..]));
        assert_eq!(web.ports[0].container_port, 3000);
        assert_eq!(web.ports.len(), 1, "upstream serves no health port");
        assert_eq!(path(&web.startup), pair("/.well-known/nodeinfo", "http"));
        assert_eq!(path(&web.liveness), pair("/.well-known/nodeinfo", "http"));
        assert_eq!(path(&web.readiness), pair("/nodeinfo/2.1", "http"));
        let worker = worker(&spec);
        assert_eq!(
            worker.command.as_deref(),
            Some(&serve.map(String::from)[..])
        );
        assert!(worker.ports.is_empty(), "upstream workers open no port");
        assert_eq!(
            (worker.startup, worker.liveness, worker.readiness),
            (None, None, None),
            "process-based"
        );
        assert_eq!(migration_command(&spec), ["pnpm", "run", "migrate"]);
        assert!(!spec.image.profile.reports_versions());
        assert_eq!(fixed_pool(&spec), Some(20));
    }

    #[test]
    fn every_default_is_overridable_per_role() {
        for profile in [ImageProfile::HolloRs, ImageProfile::Upstream] {
            let mut spec = testutil::spec();
            spec.image.profile = profile;
            spec.web.port = 8080;
            spec.web.command = Some(vec!["/bin/app".into()]);
            spec.web.args = Some(vec!["serve".into(), "--fast".into()]);
            spec.web.probes.readiness = Some(Box::new(http_probe("/ready", "http", 7, 2)));
            spec.worker.command = Some(vec!["/bin/app".into(), "work".into()]);
            spec.worker.args = Some(vec!["--quiet".into()]);
            spec.worker.health_port = 9191;
            spec.worker.probes.liveness = Some(Box::new(Probe {
                exec: Some(ExecAction {
                    command: Some(vec!["/bin/app".into(), "alive".into()]),
                }),
                ..Probe::default()
            }));
            spec.migrations.command = Some(vec!["/bin/app".into(), "db".into()]);
            let web = http(&spec);
            assert_eq!(
                web.command,
                Some(vec!["/bin/app".to_string()]),
                "{profile:?}"
            );
            assert_eq!(web.args.as_ref().map(Vec::len), Some(2));
            assert_eq!(web.ports[0].container_port, 8080);
            assert_eq!(path(&web.readiness), pair("/ready", "http"));
            assert!(
                web.liveness.is_some(),
                "the other probes keep their default"
            );
            let worker = worker(&spec);
            assert_eq!(worker.command.as_ref().map(Vec::len), Some(2));
            assert_eq!(worker.args, Some(vec!["--quiet".to_string()]));
            assert_eq!(worker.ports[0].container_port, 9191);
            assert_eq!(worker.ports[0].name.as_deref(), Some("health"));
            assert!(
                worker
                    .liveness
                    .as_ref()
                    .and_then(|p| p.exec.as_ref())
                    .is_some()
            );
            assert_eq!(migration_command(&spec), ["/bin/app", "db"]);
        }
    }
}
