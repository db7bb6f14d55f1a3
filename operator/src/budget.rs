//! Connection-budget arithmetic (R-DB-2, R-OP-BUDGET):
//! `web_replicas × web_pool + worker_max × (worker_pool + item_lock_pool) + migration + headroom
//! ≤ maxConnections`, where `worker_max` (`web_replicas`) is the autoscaler's maximum when one
//! owns the workers (the web pods).

use crate::crd::{HolloSpec, Mode};

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
        let per_worker = fixed.unwrap_or(i64::from(w.pool_max) + i64::from(w.item_lock_pool_size));
        let web_pool = fixed.unwrap_or(i64::from(spec.web.pool_max));
        let (http_role, per_http_pod, worker_pods) = match spec.mode {
            // An image with one fixed pool per process (upstream) opens it once, whatever the
            // role.
            Mode::All if fixed.is_some() => ("all", web_pool, 0),
            // Assumption (runtime contract): an `all` node opens the web pool and the worker
            // pools, since it runs both sides in one process.
            Mode::All => ("all", web_pool + per_worker, 0),
            Mode::Split => {
                let max = if spec.worker_autoscaled() {
                    w.autoscaling.max_replicas
                } else {
                    w.replicas
                };
                ("web", web_pool, i64::from(max))
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
        // An all pod carries both pools: 3×44 + 6 = 138, + 44 for the surge pod.
        spec.mode = Mode::All;
        spec.web.replicas = 3;
        spec.database.max_connections = 182;
        assert!(Budget::for_spec(&spec).surge_fits());
        spec.database.max_connections = 181;
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
    fn all_mode_counts_both_pools_per_pod() {
        let mut spec = testutil::spec();
        spec.mode = Mode::All;
        spec.web.replicas = 3;
        let b = Budget::for_spec(&spec);
        // 3×(20+24) + 1 + 5 = 138
        assert_eq!(b.total(), 138);
        assert_eq!(
            b.explain(),
            "all 3×44=132 + migration 1 + headroom 5 = 138 > maxConnections 100"
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
        // all pods: 3×44 + 6 = 138.
        assert_eq!(Budget::for_spec(&spec).total(), 138);
    }
}
