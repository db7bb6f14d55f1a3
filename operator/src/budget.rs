//! Connection-budget arithmetic (R-DB-2, R-OP-BUDGET):
//! `web_replicas × web_pool + worker_max × (worker_pool + item_lock_pool) + migration + headroom
//! ≤ maxConnections`, where `worker_max` (`web_replicas`) is the autoscaler's maximum when one
//! owns the workers (the web pods). An `all` pod counts `worker_pool + item_lock_pool`, and a
//! pod with `DATABASE_DIRECT_URL` one LISTEN connection more: what the runtime opens.

use crate::crd::{HolloSpec, Mode};
use crate::resources::pod::{DbRoute, database_env};

/// Whether a process on `route` gets `DATABASE_DIRECT_URL` (from the env the operator renders).
fn has_direct_url(spec: &HolloSpec, route: DbRoute) -> bool {
    database_env(spec, route)
        .iter()
        .any(|e| e.name == "DATABASE_DIRECT_URL")
}

/// Connections the migration Job holds (one `hollo migrate` process, one connection).
pub const MIGRATION_CONNECTIONS: i64 = 1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// Label of the HTTP role in the explanation (`web` or `all`).
    pub http_role: &'static str,
    pub http_pods: i64,
    pub per_http_pod: i64,
    pub worker_pods: i64,
    pub per_worker_pod: i64,
    pub migration: i64,
    pub headroom: i64,
    pub max_connections: i64,
}

impl Budget {
    pub fn for_spec(spec: &HolloSpec) -> Self {
        let w = &spec.worker;
        let fixed = crate::resources::profile::fixed_pool(spec);
        // What the runtime opens per process (its `Config::connection_budget`; the test
        // `per_pod_figures_are_what_the_runtime_opens` pins the two together): one general
        // pool — `WORKER_POOL_MAX` on a consuming node, `DATABASE_POOL_MAX` on a web node —,
        // the item-lock pool on a consuming node, and one LISTEN connection of its own when
        // the pod has `DATABASE_DIRECT_URL` (otherwise LISTEN borrows from the general pool).
        let listener = |route| i64::from(has_direct_url(spec, route));
        let consuming = i64::from(w.pool_max) + i64::from(w.item_lock_pool_size);
        let per_worker = fixed.unwrap_or(consuming + listener(DbRoute::Direct));
        let (http_role, per_http_pod, worker_pods) = match spec.mode {
            // An image with one fixed pool per process (upstream) opens it once, whatever the
            // role.
            Mode::All => (
                "all",
                // An `all` node consumes: its general pool is the worker's, the web pool
                // setting is not read.
                fixed.unwrap_or(consuming + listener(DbRoute::Http)),
                0,
            ),
            Mode::Split => {
                let max = if spec.worker_autoscaled() {
                    w.autoscaling.max_replicas
                } else {
                    w.replicas
                };
                let web_pool = i64::from(spec.web.pool_max) + listener(DbRoute::Http);
                ("web", fixed.unwrap_or(web_pool), i64::from(max))
            }
        };
        Self {
            http_role,
            // With web autoscaling, the HPA's maximum (R-OP-OPS).
            http_pods: i64::from(spec.web_max_replicas()),
            per_http_pod,
            worker_pods,
            per_worker_pod: per_worker,
            migration: MIGRATION_CONNECTIONS,
            headroom: i64::from(spec.database.headroom),
            max_connections: i64::from(spec.database.max_connections),
        }
    }

    pub fn total(&self) -> i64 {
        self.http_pods * self.per_http_pod
            + self.worker_pods * self.per_worker_pod
            + self.migration
            + self.headroom
    }

    pub fn fits(&self) -> bool {
        self.total() <= self.max_connections
    }

    /// Whether one extra HTTP pod (a rollout's surge pod, which runs beside the pod it replaces
    /// until it is ready) still fits: then HTTP rollouts can surge and never leave a gap.
    pub fn surge_fits(&self) -> bool {
        self.total() + self.per_http_pod <= self.max_connections
    }

    /// The arithmetic, for the condition message and the Warning event.
    pub fn explain(&self) -> String {
        let mut s = format!(
            "{} {}×{}={}",
            self.http_role,
            self.http_pods,
            self.per_http_pod,
            self.http_pods * self.per_http_pod
        );
        if self.http_role == "web" {
            s.push_str(&format!(
                " + workers {}×{}={}",
                self.worker_pods,
                self.per_worker_pod,
                self.worker_pods * self.per_worker_pod
            ));
        }
        let cmp = if self.fits() { "≤" } else { ">" };
        format!(
            "{s} + migration {} + headroom {} = {} {cmp} maxConnections {}",
            self.migration,
            self.headroom,
            self.total(),
            self.max_connections
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil;
    use k8s_openapi::api::core::v1::Container;

    /// What the runtime itself opens for a container the operator renders: its environment
    /// (Secrets replaced by sample values, `$(VAR)` references expanded as the kubelet does)
    /// parsed by the runtime's own configuration code, which sizes the node's pools.
    fn runtime_connections(c: &Container) -> i64 {
        let mut env: Vec<(String, String)> = Vec::new();
        for e in c.env.as_deref().unwrap_or_default() {
            let value = match &e.value {
                Some(v) => v.clone(),
                None if e.name.starts_with("DATABASE_") => "postgres://app:pw@db:5432/app".into(),
                None => "a-secret-value-long-enough-for-any-check-0123456789".into(),
            };
            let expanded = env.iter().fold(value, |v, (name, value)| {
                v.replace(&format!("$({name})"), value)
            });
            env.push((e.name.clone(), expanded));
        }
        let env = hollo_runtime::config::Env::from_pairs(
            env.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        );
        let config = hollo_runtime::config::Config::from_env(&env)
            .unwrap_or_else(|e| panic!("the runtime refuses the operator's env: {e}"));
        i64::from(config.connection_budget())
    }

    /// The specs whose pools differ: each mode, custom pool sizes, a direct URL beside the
    /// pooled one, and a CloudNativePG Pooler (HTTP pods through it, LISTEN direct).
    fn pool_shapes() -> Vec<(&'static str, crate::crd::HolloSpec)> {
        let custom = |mut s: crate::crd::HolloSpec| {
            s.web.pool_max = 7;
            s.worker.pool_max = 11;
            s.worker.item_lock_pool_size = 3;
            s
        };
        let direct = |mut s: crate::crd::HolloSpec| {
            s.database.direct_url_secret_ref = s.database.url_secret_ref.clone();
            s
        };
        let pooler = |mut s: crate::crd::HolloSpec| {
            s.database = serde_json::from_value(serde_json::json!({
                "cnpg": {"cluster": "pg", "pooler": "pg-pooler"},
            }))
            .expect("a cnpg database");
            s
        };
        let all = |mut s: crate::crd::HolloSpec| {
            s.mode = Mode::All;
            s
        };
        // Media on a claim, as the runtime refuses `DRIVE_DISK=fs` without a directory.
        let base = || {
            let mut s = testutil::spec();
            s.storage = serde_json::from_value(
                serde_json::json!({"disk": "fs", "fs": {"claimName": "hollo-media"}}),
            )
            .expect("fs storage");
            s
        };
        vec![
            ("split", base()),
            ("split, custom pools", custom(base())),
            ("split, direct URL", direct(base())),
            ("split, CloudNativePG pooler", pooler(base())),
            ("all", all(base())),
            ("all, custom pools", all(custom(base()))),
            ("all, direct URL", all(direct(base()))),
            ("all, CloudNativePG pooler", all(pooler(base()))),
        ]
    }

    /// The budget counts per pod what the runtime opens (R-DB-2): the operator's figures and
    /// the runtime's pool sizing (`Config::connection_budget`) are pinned together here, so
    /// neither changes alone. An `all` node opened one general pool of `WORKER_POOL_MAX` plus
    /// the item locks (24 by default) while the budget counted the web pool besides (44).
    #[test]
    fn per_pod_figures_are_what_the_runtime_opens() {
        let mut differ = Vec::new();
        for (shape, spec) in pool_shapes() {
            let b = Budget::for_spec(&spec);
            let h = testutil::hollo(spec.clone());
            let http = match spec.mode {
                Mode::All => crate::resources::all::container(&h, "0.1.0"),
                Mode::Split => crate::resources::web::container(&h, "0.1.0"),
            };
            let mut pods = vec![(b.http_role, b.per_http_pod, runtime_connections(&http))];
            if spec.mode == Mode::Split {
                let worker = crate::resources::worker::container(&h, "0.1.0");
                pods.push(("worker", b.per_worker_pod, runtime_connections(&worker)));
            }
            for (role, counted, opened) in pods {
                if counted != opened {
                    differ.push(format!(
                        "{shape}: the budget counts {counted} per {role} pod, the runtime opens {opened}"
                    ));
                }
            }
        }
        assert!(differ.is_empty(), "{}", differ.join("\n"));
    }

    #[test]
    fn upstream_counts_its_fixed_pool_of_20_per_process() {
        let mut spec = testutil::spec();
        spec.image.profile = crate::crd::ImageProfile::Upstream;
        // web/worker pool settings are hollo-rs env; upstream's src/db.ts fixes max: 20.
        spec.web.pool_max = 5;
        spec.worker.item_lock_pool_size = 9;
        let b = Budget::for_spec(&spec);
        assert_eq!(
            b.explain(),
            "web 2×20=40 + workers 2×20=40 + migration 1 + headroom 5 = 86 ≤ maxConnections 100"
        );
        spec.mode = Mode::All;
        spec.web.replicas = 3;
        assert_eq!(
            Budget::for_spec(&spec).total(),
            3 * 20 + 1 + 5,
            "one pool per all node"
        );
    }

    #[test]
    fn default_spec_fits_in_100() {
        let b = Budget::for_spec(&testutil::spec());
        // 2×20 + 2×24 + 1 + 5 = 94
        assert_eq!(b.total(), 94);
        assert!(b.fits());
        assert_eq!(
            b.explain(),
            "web 2×20=40 + workers 2×24=48 + migration 1 + headroom 5 = 94 ≤ maxConnections 100"
        );
    }

    #[test]
    fn autoscaler_maximum_counts_not_current_replicas() {
        let mut spec = testutil::spec();
        spec.worker.replicas = 1;
        spec.worker.autoscaling.enabled = true;
        spec.worker.autoscaling.max_replicas = 10;
        let b = Budget::for_spec(&spec);
        // 2×20 + 10×24 + 1 + 5 = 286
        assert_eq!(b.total(), 286);
        assert!(!b.fits());
        assert_eq!(
            b.explain(),
            "web 2×20=40 + workers 10×24=240 + migration 1 + headroom 5 = 286 > maxConnections 100"
        );
    }

    #[test]
    fn a_surge_pod_needs_room_for_one_more_http_pool() {
        let mut spec = testutil::spec();
        // 94 + one web pod of 20 = 114.
        spec.database.max_connections = 114;
        assert!(Budget::for_spec(&spec).surge_fits());
        spec.database.max_connections = 113;
        let b = Budget::for_spec(&spec);
        assert!(b.fits() && !b.surge_fits());
        // An all pod opens the worker's pools: 3×24 + 6 = 78, + 24 for the surge pod.
        spec.mode = Mode::All;
        spec.web.replicas = 3;
        spec.database.max_connections = 102;
        assert!(Budget::for_spec(&spec).surge_fits());
        spec.database.max_connections = 101;
        assert!(!Budget::for_spec(&spec).surge_fits());
    }

    #[test]
    fn exactly_at_the_limit_fits() {
        let mut spec = testutil::spec();
        spec.database.max_connections = 94;
        assert!(Budget::for_spec(&spec).fits());
        spec.database.max_connections = 93;
        assert!(!Budget::for_spec(&spec).fits());
    }

    #[test]
    fn custom_pools_are_used() {
        let mut spec = testutil::spec();
        spec.web.pool_max = 5;
        spec.worker.pool_max = 10;
        spec.worker.item_lock_pool_size = 2;
        spec.database.headroom = 0;
        // 2×5 + 2×12 + 1 = 35
        assert_eq!(Budget::for_spec(&spec).total(), 35);
    }

    #[test]
    fn all_mode_counts_the_worker_pools_per_pod() {
        let mut spec = testutil::spec();
        spec.mode = Mode::All;
        spec.web.replicas = 3;
        // The web pool setting is not read by an all node.
        spec.web.pool_max = 50;
        let b = Budget::for_spec(&spec);
        // 3×(20+4) + 1 + 5 = 78: it fits, where counting the web pool besides (3×44 + 6 =
        // 138) reported ConnectionBudget=False with room to spare.
        assert_eq!(b.total(), 78);
        assert_eq!(
            b.explain(),
            "all 3×24=72 + migration 1 + headroom 5 = 78 ≤ maxConnections 100"
        );
        spec.web.replicas = 5;
        // 5×24 + 6 = 126
        assert_eq!(
            Budget::for_spec(&spec).explain(),
            "all 5×24=120 + migration 1 + headroom 5 = 126 > maxConnections 100"
        );
    }

    #[test]
    fn web_autoscaling_counts_its_maximum_and_is_refused_beyond_the_budget() {
        let mut spec = testutil::spec();
        spec.web.replicas = 1;
        spec.web.autoscaling.enabled = true;
        spec.web.autoscaling.min_replicas = 2;
        spec.web.autoscaling.max_replicas = 3;
        // 3×20 + 2×24 + 1 + 5 = 114 > 100: refused, with the maximum in the arithmetic.
        let b = Budget::for_spec(&spec);
        assert!(!b.fits());
        assert_eq!(
            b.explain(),
            "web 3×20=60 + workers 2×24=48 + migration 1 + headroom 5 = 114 > maxConnections 100"
        );
        spec.database.max_connections = 114;
        assert!(Budget::for_spec(&spec).fits(), "exactly at the limit");
        spec.mode = Mode::All;
        // all pods: 3×24 + 6 = 78.
        assert_eq!(Budget::for_spec(&spec).total(), 78);
    }
}
